//! The harness of the integration tests: a real local Worker (wrangler dev on workerd),
//! tokens signed like the service's, and a small blocking HTTP client.
//!
//! `scripts/test` starts the shared Worker and passes its address in `HANDOFF_URL`; tests that
//! must stop and restart a Worker (persistence, crashes) start their own with [`Server`].

use serde_json::Value;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use handoff_api::token::DEV_SIGNING_KEY;

pub mod checker;
pub mod model;
pub mod peers;
pub mod rng;
pub mod watch;
pub mod workerd;

/// How long a Worker may take to answer its first health check, counted from when its start
/// got one of the [`SERVER_STARTS_AT_ONCE_MAX`] slots.
pub const SERVER_START_S_MAX: u64 = 90;
/// Workers one test process starts at once: a wrangler start is seconds of CPU, and four at
/// once on a 2-core machine took one past [`SERVER_START_S_MAX`].
pub const SERVER_STARTS_AT_ONCE_MAX: usize = 2;
/// Starts tried on fresh ports when the Worker exits before its first answer (a port another
/// process took between [`free_port`] and the bind).
pub const SERVER_START_TRIES_MAX: u32 = 3;
/// No single request of a test waits longer than this.
pub const REQUEST_TIMEOUT_S: u64 = 60;

pub fn key() -> Vec<u8> {
    std::env::var("HANDOFF_SIGNING_KEY").unwrap_or_else(|_| DEV_SIGNING_KEY.to_string()).into_bytes()
}

pub fn now_s() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// An owner token valid for an hour.
pub fn owner(name: &str) -> String {
    handoff_api::token::owner_token(name, 3600, &key(), now_s())
}

/// A unique name per call, so tests never share a session or an owner by accident.
pub fn unique(prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// The repository's top folder.
pub fn repo_top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// An answer: status, headers we read, and the body as JSON (or `Value::Null`).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub www_authenticate: Option<String>,
    pub content_type: Option<String>,
    pub allow: Option<String>,
    pub etag: Option<String>,
    pub retry_after: Option<String>,
    pub set_cookie: Option<String>,
    pub cache_control: Option<String>,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn handoff(&self) -> &Value {
        &self.body["handoff"]
    }
    pub fn version(&self) -> u64 {
        self.body["handoff"]["version"].as_u64().expect("answer carries a hand-off version")
    }
}

/// A client of one Worker.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
            .build()
            .into();
        Client { base: base.trim_end_matches('/').to_string(), agent }
    }

    /// The shared Worker that `scripts/test` started.
    pub fn shared() -> Client {
        static BASE: OnceLock<String> = OnceLock::new();
        let base = BASE.get_or_init(|| {
            std::env::var("HANDOFF_URL").expect("HANDOFF_URL: run the integration tests through scripts/test")
        });
        Client::new(base)
    }

    /// Sends a request with optional bearer token, extra headers and raw body.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Answer {
        self.try_send(method, path, token, headers, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// As [`Client::send`], but a transport failure (a Worker killed mid-request) is an `Err`.
    pub fn try_send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Answer, String> {
        let mut request = ureq::http::Request::builder().method(method).uri(format!("{}{path}", self.base));
        if let Some(t) = token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let result = match body {
            Some(b) => self.agent.run(request.header("Content-Type", "application/json").body(b.to_vec()).unwrap()),
            None => self.agent.run(request.body(()).unwrap()),
        };
        let mut response = result.map_err(|e| e.to_string())?;
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let www_authenticate = header("WWW-Authenticate");
        let content_type = header("Content-Type");
        let allow = header("Allow");
        let etag = header("ETag");
        let retry_after = header("Retry-After");
        let set_cookie = header("Set-Cookie");
        let cache_control = header("Cache-Control");
        // An answer cut off mid-body (the Worker was killed) was not received: it acknowledges
        // nothing, so it is an error, not an empty 200.
        let text = response
            .body_mut()
            .with_config()
            .limit(8 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| format!("{method} {path}: the answer's body was cut off: {e}"))?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Answer {
            status: response.status().as_u16(),
            body,
            text,
            www_authenticate,
            content_type,
            allow,
            etag,
            retry_after,
            set_cookie,
            cache_control,
        })
    }

    pub fn get(&self, path: &str, token: &str) -> Answer {
        self.send("GET", path, Some(token), &[], None)
    }

    pub fn post(&self, path: &str, token: &str, body: Value) -> Answer {
        self.send("POST", path, Some(token), &[], Some(body.to_string().as_bytes()))
    }

    pub fn put(&self, path: &str, token: &str, body: Value) -> Answer {
        self.send("PUT", path, Some(token), &[], Some(body.to_string().as_bytes()))
    }

    /// Creates a hand-off for a fresh session; answers (id, machine token, answer).
    pub fn create(&self, owner_token: &str) -> (String, String, Answer) {
        let session = unique("s");
        let a = self.post(
            "/v1/handoffs",
            owner_token,
            serde_json::json!({"session": session, "machine": "m1", "size": "large"}),
        );
        assert_eq!(a.status, 201, "create: {}", a.text);
        let id = a.handoff()["id"].as_str().unwrap().to_string();
        let machine = a.body["machine_token"].as_str().unwrap().to_string();
        (id, machine, a)
    }

    pub fn report(&self, id: &str, machine: &str, turn: u64, status: &str, summary: Option<&str>) -> Answer {
        let mut body = serde_json::json!({"turn": turn, "status": status});
        if let Some(s) = summary {
            body["summary"] = Value::from(s);
        }
        self.post(&format!("/v1/handoffs/{id}/report"), machine, body)
    }
}

/// A Worker this test started and stops: `wrangler dev` on a free port, its own state folder;
/// or workerd itself from a generated configuration ([`Server::start_workerd`]).
pub struct Server {
    pub port: u16,
    pub state_dir: PathBuf,
    env: Option<String>,
    /// `--var HANDOFF_ENV:local` for wrangler dev with no `--env`: wrangler.toml's top level is
    /// what a deploy with no `--env` deploys, so it is not local unless a run asks.
    local: bool,
    /// workerd without wrangler in front of it (see [`workerd`]).
    direct: bool,
    /// Extra `--var NAME:VALUE`s for wrangler dev (test-only switches such as a low waiter cap).
    vars: Vec<(String, String)>,
    child: Option<Child>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    /// Starts a Worker under wrangler dev: `env` None for a local Worker (the top level with
    /// `--var HANDOFF_ENV:local`), or a wrangler environment as it is configured.
    pub fn start(state_dir: &Path, env: Option<&str>) -> Server {
        Server::start_with_vars(state_dir, env, &[])
    }

    /// As [`Server::start`], with extra variables (kept across restarts).
    pub fn start_with_vars(state_dir: &Path, env: Option<&str>, vars: &[(&str, &str)]) -> Server {
        Server::wrangler(state_dir, env, env.is_none(), vars)
    }

    /// wrangler.toml's top level exactly as a deploy with no `--env` would run it: no
    /// `HANDOFF_ENV` override, with extra variables.
    pub fn start_top_level(state_dir: &Path, vars: &[(&str, &str)]) -> Server {
        Server::wrangler(state_dir, None, false, vars)
    }

    fn wrangler(state_dir: &Path, env: Option<&str>, local: bool, vars: &[(&str, &str)]) -> Server {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut server = Server {
            port: 0,
            state_dir: state_dir.to_path_buf(),
            env: env.map(str::to_string),
            local,
            direct: false,
            vars,
            child: None,
        };
        server.restart();
        server
    }

    /// The local Worker on workerd itself, without wrangler's dev proxy, which keeps a client's
    /// connection to the Worker open after the client has gone; with extra variables.
    pub fn start_workerd(state_dir: &Path, vars: &[(&str, &str)]) -> Server {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut server = Server {
            port: 0,
            state_dir: state_dir.to_path_buf(),
            env: None,
            local: true,
            direct: true,
            vars,
            child: None,
        };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url())
    }

    /// Starts the Worker again on the same state (a new port).
    pub fn restart(&mut self) {
        self.stop();
        let _slot = StartSlot::take();
        for _ in 1..SERVER_START_TRIES_MAX {
            match self.spawn_and_wait() {
                Started::Healthy => return,
                Started::Exited(why) => {
                    eprintln!("the Worker on port {} exited before answering ({why}); trying a new port", self.port)
                }
            }
        }
        if let Started::Exited(why) = self.spawn_and_wait() {
            panic!(
                "the Worker on port {} exited before answering, {SERVER_START_TRIES_MAX} tries: {why}\n{}",
                self.port,
                self.log_tail()
            );
        }
    }

    /// Starts the Worker again on the same state and the same port, where its clients know it
    /// (a machine's service stopped and started again).
    pub fn restart_on_the_same_port(&mut self) {
        self.stop();
        let _slot = StartSlot::take();
        if let Started::Exited(why) = self.spawn() {
            panic!("the Worker on port {} exited before answering again: {why}\n{}", self.port, self.log_tail());
        }
    }

    fn log_path(&self) -> PathBuf {
        self.state_dir.with_extension(format!("{}.log", self.port))
    }

    /// The last lines of this start's log, for a failure's message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn spawn_and_wait(&mut self) -> Started {
        self.port = free_port();
        self.spawn()
    }

    /// Starts the Worker on `self.port` and waits until it answers.
    fn spawn(&mut self) -> Started {
        let top = repo_top();
        let log = std::fs::File::create(self.log_path()).unwrap();
        if self.direct {
            let key = String::from_utf8(key()).unwrap();
            let mut vars = vec![("HANDOFF_SIGNING_KEY", key.as_str()), ("HANDOFF_TEST_HOOKS", "1")];
            vars.extend(self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            workerd::lay_out(&top, &top.join("build"), &self.state_dir, self.port, &vars).unwrap();
            let mut cmd = Command::new(workerd::binary(&top));
            cmd.current_dir(&self.state_dir)
                .args(["serve", "config.capnp"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0);
            self.child = Some(cmd.spawn().expect("workerd starts"));
            return self.wait_healthy();
        }
        let mut cmd = Command::new(top.join("node_modules/.bin/wrangler"));
        cmd.current_dir(&top)
            .env(
                "PATH",
                format!("{}:{}", top.join("node_modules/.bin").display(), std::env::var("PATH").unwrap_or_default()),
            )
            .env("WRANGLER_SEND_METRICS", "false")
            .args(["dev", "--ip", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--persist-to", &self.state_dir.display().to_string()])
            .args(["--var", &format!("HANDOFF_SIGNING_KEY:{}", String::from_utf8(key()).unwrap())])
            .args(["--var", "HANDOFF_TEST_HOOKS:1", "--inspector-port", &free_port().to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        if self.local {
            cmd.args(["--var", &format!("{}:{}", workerd::ENV_VAR, workerd::LOCAL)]);
        }
        for (name, value) in &self.vars {
            cmd.args(["--var", &format!("{name}:{value}")]);
        }
        if let Some(env) = &self.env {
            cmd.args(["--env", env]);
        }
        self.child = Some(cmd.spawn().expect("wrangler starts"));
        self.wait_healthy()
    }

    fn wait_healthy(&mut self) -> Started {
        let deadline = Instant::now() + Duration::from_secs(SERVER_START_S_MAX);
        let client = Client::new(&self.url());
        while Instant::now() < deadline {
            let ok = std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && ureq::get(format!("{}/v1/health", client.base)).call().is_ok();
            if ok {
                return Started::Healthy;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Started::Exited(format!("{status}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "the Worker on port {} did not start in {SERVER_START_S_MAX} s; its log ends:\n{}",
            self.port,
            self.log_tail()
        );
    }

    /// Stops the whole process group (wrangler and its workerd) with `signal`.
    pub fn kill(&mut self, signal: i32) {
        if let Some(mut child) = self.child.take() {
            unsafe {
                libc::kill(-(child.id() as i32), signal);
            }
            let _ = child.wait();
        }
    }

    pub fn stop(&mut self) {
        self.kill(libc::SIGTERM);
        // A stopped wrangler may leave its workerd behind for a moment; wait for the port.
        std::thread::sleep(Duration::from_millis(300));
    }

    /// The pid of the workerd serving this Worker (a descendant of wrangler), if found.
    pub fn workerd_pid(&self) -> Option<u32> {
        let root = self.child.as_ref()?.id();
        let mut out = String::new();
        Command::new("ps")
            .args(["-e", "-o", "pid=,ppid=,comm="])
            .stdout(Stdio::piped())
            .spawn()
            .ok()?
            .stdout?
            .read_to_string(&mut out)
            .ok()?;
        let rows: Vec<(u32, u32, String)> = out
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.to_string()))
            })
            .collect();
        let mut family = vec![root];
        let mut i = 0;
        while i < family.len() {
            let parent = family[i];
            family.extend(rows.iter().filter(|r| r.1 == parent).map(|r| r.0));
            i += 1;
        }
        rows.iter().find(|r| family.contains(&r.0) && r.2.starts_with("workerd")).map(|r| r.0)
    }
}

enum Started {
    Healthy,
    Exited(String),
}

/// One of the [`SERVER_STARTS_AT_ONCE_MAX`] slots for starting a Worker, held until it answers.
struct StartSlot;

static STARTING: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

impl StartSlot {
    fn take() -> StartSlot {
        let (count, freed) = &STARTING;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        while *n >= SERVER_STARTS_AT_ONCE_MAX {
            n = freed.wait(n).unwrap_or_else(|e| e.into_inner());
        }
        *n += 1;
        StartSlot
    }
}

impl Drop for StartSlot {
    fn drop(&mut self) {
        let (count, freed) = &STARTING;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill(libc::SIGKILL);
    }
}

/// A fresh temporary folder for a Worker's state.
pub fn temp_state(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(&format!("handoff-{name}")));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
