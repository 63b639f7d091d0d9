//! The peers' one server: every request read whole (up to a cap), handed to the peer's handler on its own
//! thread (so a hung answer delays no other request), and answered as the handler says.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most body a peer reads from one request; past it the request is answered 413.
pub const PEER_BODY_BYTES_MAX: usize = 64 * 1024;
/// The longest a hung answer is held before the connection is answered 500 and closed, so
/// that a test that forgets a hang still ends.
pub const PEER_HANG_S_MAX: u64 = 120;

/// How a peer answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// This status, with an empty body.
    Status(u16),
    /// No answer for this long (at most `PEER_HANG_S_MAX`), then 500: for the sender's timeout.
    Hang(Duration),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    /// The first header of that (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Answers scripted by the test, one per request, before the peer's default.
#[derive(Debug, Default)]
pub struct Script(VecDeque<Reply>);

impl Script {
    pub fn push(&mut self, reply: Reply, times: usize) {
        self.0.extend(std::iter::repeat_n(reply, times));
    }

    pub fn next_or(&mut self, default: Reply) -> Reply {
        self.0.pop_front().unwrap_or(default)
    }
}

/// A list the peer's threads add to and a test waits on.
pub struct Log<T> {
    items: Mutex<Vec<T>>,
    added: Condvar,
}

impl<T: Clone> Log<T> {
    pub fn new() -> Log<T> {
        Log { items: Mutex::new(Vec::new()), added: Condvar::new() }
    }

    pub fn add(&self, item: T) {
        self.items.lock().unwrap().push(item);
        self.added.notify_all();
    }

    pub fn all(&self) -> Vec<T> {
        self.items.lock().unwrap().clone()
    }

    /// Everything logged once there are at least `n`, or what there is after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<T> {
        let items = self.items.lock().unwrap();
        let (items, _) = self.added.wait_timeout_while(items, timeout, |items| items.len() < n).unwrap();
        items.clone()
    }
}

/// The server: started on a free port of 127.0.0.1, stopped (and its thread joined) on drop.
pub struct Server {
    server: Arc<tiny_http::Server>,
    pub port: u16,
    accept: Option<JoinHandle<()>>,
    /// Set on drop: a hung answer ends then instead of outliving its peer.
    stopping: Arc<AtomicBool>,
}

/// A handler's answer: how, the headers to add, and the body (sent only with a status).
pub type Answer = (Reply, Vec<(&'static str, String)>, Vec<u8>);

impl Server {
    /// Serves every request with `handle`, which records it and says how to answer (with an
    /// empty body); bodies past [`PEER_BODY_BYTES_MAX`] are answered 413.
    pub fn start<H>(handle: H) -> Server
    where
        H: Fn(Received) -> (Reply, Vec<(&'static str, String)>) + Send + Sync + 'static,
    {
        Server::start_with_bodies(PEER_BODY_BYTES_MAX, move |received| {
            let (reply, headers) = handle(received);
            (reply, headers, Vec::new())
        })
    }

    /// [`Server::start`] for a peer that answers with bodies and reads up to `body_max`.
    pub fn start_with_bodies<H>(body_max: usize, handle: H) -> Server
    where
        H: Fn(Received) -> Answer + Send + Sync + 'static,
    {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("a peer binds 127.0.0.1:0"));
        let port = server.server_addr().to_ip().expect("a peer listens on IP").port();
        let handle = Arc::new(handle);
        let accepting = Arc::clone(&server);
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let accept = std::thread::spawn(move || {
            // `incoming_requests` ends when `unblock` is called on drop.
            for request in accepting.incoming_requests() {
                let (handle, stop) = (Arc::clone(&handle), Arc::clone(&stop));
                std::thread::spawn(move || serve(request, body_max, &*handle, &stop));
            }
        });
        Server { server, port, accept: Some(accept), stopping }
    }
}

fn serve<H>(mut request: tiny_http::Request, body_max: usize, handle: &H, stopping: &AtomicBool)
where
    H: Fn(Received) -> Answer,
{
    let mut body = Vec::new();
    let read = request.as_reader().take(body_max as u64 + 1).read_to_end(&mut body);
    if read.is_err() || body.len() > body_max {
        let _ = request.respond(tiny_http::Response::empty(413));
        return;
    }
    let received = Received {
        method: request.method().as_str().to_string(),
        path: request.url().to_string(),
        headers: request
            .headers()
            .iter()
            .map(|h| (h.field.as_str().as_str().to_ascii_lowercase(), h.value.as_str().to_string()))
            .collect(),
        body,
        at: Instant::now(),
    };
    match handle(received) {
        (Reply::Status(status), headers, body) => {
            let mut response = tiny_http::Response::from_data(body).with_status_code(status);
            for (name, value) in headers {
                if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                    response.add_header(header);
                }
            }
            let _ = request.respond(response);
        }
        (Reply::Hang(how_long), _, _) => {
            let until = Instant::now() + how_long.min(Duration::from_secs(PEER_HANG_S_MAX));
            while Instant::now() < until && !stopping.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = request.respond(tiny_http::Response::empty(500));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.server.unblock();
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}
