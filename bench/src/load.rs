//! The load generator: N connections, each sending its next request as soon as the last one
//! is answered (a closed loop), for a warm-up and then a measured window. Bounded in time:
//! no request starts after the window ends, and each has a timeout.

use crate::server::Server;
use crate::stats::{cpu_time, micros, Throughput};
use reqwest::{Client, Method};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// No single request of a load phase waits longer than this.
pub const REQUEST_TIMEOUT_S: u64 = 30;

/// One request to send: the path is relative to the Worker's base URL.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub path: String,
    pub token: Option<Arc<str>>,
    pub body: Option<String>,
}

impl Req {
    pub fn get(path: impl Into<String>, token: Option<Arc<str>>) -> Req {
        Req { method: Method::GET, path: path.into(), token, body: None }
    }

    pub fn post(path: impl Into<String>, token: Arc<str>, body: String) -> Req {
        Req { method: Method::POST, path: path.into(), token: Some(token), body: Some(body) }
    }

    pub fn put(path: impl Into<String>, token: Arc<str>, body: String) -> Req {
        Req { method: Method::PUT, path: path.into(), token: Some(token), body: Some(body) }
    }
}

/// A client of one Worker. `connections` bounds its pool: one HTTP/1.1 connection per request
/// in flight, kept alive between requests like a real client's.
#[derive(Clone)]
pub struct Api {
    pub client: Client,
    pub base: Arc<str>,
}

impl Api {
    pub fn new(base: &str, timeout: Duration) -> Api {
        let client = Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .no_proxy()
            .build()
            .expect("a plain HTTP/1.1 client builds");
        Api { client, base: base.into() }
    }

    /// Sends `req` and reads the whole answer: (status, body).
    pub async fn send(&self, req: &Req) -> Result<(u16, String), String> {
        let mut builder = self.client.request(req.method.clone(), format!("{}{}", self.base, req.path));
        if let Some(token) = &req.token {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(body) = &req.body {
            builder = builder.header("Content-Type", "application/json").body(body.clone());
        }
        let response = builder.send().await.map_err(|e| format!("{} {}: {e}", req.method, req.path))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| format!("{} {}: body: {e}", req.method, req.path))?;
        Ok((status, text))
    }

    /// Sends `req` and parses the answer as JSON, insisting on `expect`.
    pub async fn json(&self, req: &Req, expect: &[u16]) -> Result<serde_json::Value, String> {
        let (status, body) = self.send(req).await?;
        if !expect.contains(&status) {
            return Err(format!("{} {}: answered {status}: {}", req.method, req.path, body));
        }
        serde_json::from_str(&body).map_err(|e| format!("{} {}: not JSON: {e}", req.method, req.path))
    }
}

/// How a load phase runs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub connections: usize,
    pub warmup: Duration,
    pub window: Duration,
}

/// Runs a closed-loop phase: `make(n)` builds the n-th request (n counts from 0 over all
/// connections); an answer with another status than `expect` counts as an error.
/// Only requests that start inside the measured window are counted.
pub async fn run<F>(api: &Api, server: &Server, shape: Shape, expect: u16, make: F) -> Throughput
where
    F: Fn(u64) -> Req + Send + Sync + 'static,
{
    let (workerd_cpu, client_cpu) = (server.cpu_time(), cpu_time("self"));
    let make = Arc::new(make);
    let counter = Arc::new(AtomicU64::new(0));
    let begin = Instant::now();
    let measure_from = begin + shape.warmup;
    let measure_until = measure_from + shape.window;
    let mut tasks = Vec::with_capacity(shape.connections);
    for _ in 0..shape.connections {
        let (api, make, counter) = (api.clone(), make.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies_us = Vec::new();
            let mut errors = 0u64;
            let mut first_error: Option<String> = None;
            loop {
                let started = Instant::now();
                if started >= measure_until {
                    break;
                }
                let req = make(counter.fetch_add(1, Ordering::Relaxed));
                let outcome = api.send(&req).await;
                let latency = started.elapsed();
                let measured = started >= measure_from;
                match outcome {
                    Ok((status, _)) if status == expect => {
                        if measured {
                            latencies_us.push(micros(latency));
                        }
                    }
                    Ok((status, body)) => {
                        errors += 1;
                        first_error.get_or_insert(format!("{} {} answered {status}: {}", req.method, req.path, body));
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (latencies_us, errors, first_error)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (latencies, e, first_error) = task.await.expect("a load task does not panic");
        all.extend(latencies);
        errors += e;
        if let Some(first_error) = first_error {
            eprintln!("bench: error: {first_error}");
        }
    }
    let sent = counter.load(Ordering::Relaxed);
    Throughput::of(shape.connections, all, errors, shape.window, sent)
        .with_cpu(server.cpu_time().saturating_sub(workerd_cpu), cpu_time("self").saturating_sub(client_cpu))
}
