//! Watch fan-out: N sockets on one hand-off's watch (`GET …/watch`), then one report. Measures
//! the time from sending the report (and from its answer) until every socket has the new
//! version, workerd's CPU for it, and workerd's resident memory before the sockets, while
//! they are held with the object live, once the idle object has been evicted (the sockets
//! hibernating: what an idle watcher really costs), and after they are closed.

use crate::fanout::{wait_until_held, CONNECTING_AT_ONCE};
use crate::load::Api;
use crate::server::Server;
use crate::service::{self, Handoff};
use crate::stats::{micros, percentile_ms, round};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// A socket that has not had the report's version this long after the report is counted lost.
const RECEIVE_S_MAX: u64 = 60;
/// Past the eviction of the object after the report (`EVICTED_AFTER_CHANGE`), with 4 s to spare.
const EVICTED_AFTER: Duration = handoff_it::workerd::EVICTED_AFTER_CHANGE.saturating_add(Duration::from_secs(4));
const SETTLE_AFTER_MS: u64 = 2000;
/// What each client socket reads into at a time. tungstenite's default (128 KiB) is zeroed on
/// each socket's first read: for a thousand sockets that is 128 MiB of page faults in this
/// process, on a two-core machine, timed as if the service were slow to send.
const READ_BUFFER_BYTES: usize = 8 * 1024;

#[derive(Debug, Clone, Serialize)]
pub struct WatchFanout {
    pub watchers: usize,
    pub connected: usize,
    /// Sockets that had the report's version, once.
    pub received: usize,
    pub errors: usize,
    pub report_ms: f64,
    /// From sending the report until each socket had it.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// From the report's answer until the last socket had it.
    pub max_after_answer_ms: f64,
    pub workerd_cpu_us_per_watcher: f64,
    pub rss_mib_before: f64,
    pub rss_mib_holding: f64,
    /// Once the idle object was evicted and the sockets hibernate.
    pub rss_mib_evicted: f64,
    pub rss_kib_per_idle_watcher: f64,
    pub rss_mib_after: f64,
}

type Socket = tokio_tungstenite::WebSocketStream<TcpStream>;

/// Of a frame, only what the bench checks: the record's version (the rest is skipped, not
/// built).
#[derive(Deserialize)]
struct Frame {
    handoff: Versioned,
}

#[derive(Deserialize)]
struct Versioned {
    version: u64,
}

async fn open(base: &str, handoff: &Handoff, after: u64) -> Result<Socket, String> {
    let url = format!("{}/v1/handoffs/{}/watch?after={after}", base.replacen("http://", "ws://", 1), handoff.id);
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let bearer = format!("Bearer {}", handoff.owner_token).parse().map_err(|_| "token header")?;
    request.headers_mut().insert("Authorization", bearer);
    let authority = request.uri().authority().map(|a| a.to_string()).ok_or("no authority")?;
    let stream = TcpStream::connect(authority).await.map_err(|e| e.to_string())?;
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
    let (socket, _) =
        tokio_tungstenite::client_async_with_config(request, stream, Some(config)).await.map_err(|e| e.to_string())?;
    Ok(socket)
}

/// Reads until the record of `version` arrives: when it did, or `None` for anything else
/// first (a repeat, a close) or nothing in time.
async fn receive(socket: &mut Socket, version: u64) -> Option<Instant> {
    let deadline = tokio::time::sleep(Duration::from_secs(RECEIVE_S_MAX));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => return None,
            frame = socket.next() => match frame? {
                Ok(Message::Text(text)) => {
                    let got = serde_json::from_str::<Frame>(text.as_str()).ok()?.handoff.version;
                    return (got == version).then(Instant::now);
                }
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                _ => return None,
            },
        }
    }
}

pub async fn run(
    api: &Api,
    server: &Server,
    handoff: &Handoff,
    after: u64,
    watchers: usize,
) -> Result<WatchFanout, String> {
    let rss_before = server.rss_kib();
    let open_before = crate::fanout::established_to(server.port);
    let base = server.base();
    let mut sockets = Vec::with_capacity(watchers);
    let mut errors = 0;
    while sockets.len() + errors < watchers {
        let batch = CONNECTING_AT_ONCE.min(watchers - sockets.len() - errors);
        let opened = futures_util::future::join_all((0..batch).map(|_| open(&base, handoff, after))).await;
        for socket in opened {
            match socket {
                Ok(s) => sockets.push(s),
                Err(e) => {
                    if errors == 0 {
                        eprintln!("bench: watch: {e}");
                    }
                    errors += 1;
                }
            }
        }
    }
    let connected = wait_until_held(server, open_before, sockets.len()).await;
    let rss_holding = server.rss_kib();

    // Every socket reads on its own task from before the report.
    let target = after + 1;
    let tasks: Vec<_> = sockets
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                let at = receive(&mut s, target).await;
                (at, s)
            })
        })
        .collect();
    let cpu_at_report = server.cpu_time();
    let reported_at = Instant::now();
    let report = api.send(&service::report(handoff, watchers as u64)).await?;
    let answered_at = Instant::now();
    if report.0 != 200 {
        let log = server.log();
        let tail: String =
            log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(format!("watch fan-out report answered {}: {}; workerd's log ends:\n{tail}", report.0, report.1));
    }
    let mut latencies_us = Vec::with_capacity(watchers);
    let mut last = answered_at;
    let mut kept = Vec::with_capacity(watchers);
    for task in tasks {
        let (at, socket) = task.await.map_err(|e| e.to_string())?;
        match at {
            Some(at) => {
                latencies_us.push(micros(at.saturating_duration_since(reported_at)));
                last = last.max(at);
            }
            None => errors += 1,
        }
        kept.push(socket);
    }
    let fan_out_cpu = server.cpu_time().saturating_sub(cpu_at_report);

    // Idle: the object lets go of its memory while the sockets stay open.
    tokio::time::sleep(EVICTED_AFTER).await;
    let rss_evicted = server.rss_kib();
    drop(kept);
    tokio::time::sleep(Duration::from_millis(SETTLE_AFTER_MS)).await;
    let rss_after = server.rss_kib();

    latencies_us.sort_unstable();
    let mib = |kib: u64| round(kib as f64 / 1024.0, 1);
    Ok(WatchFanout {
        watchers,
        connected,
        received: latencies_us.len(),
        errors,
        report_ms: round(answered_at.duration_since(reported_at).as_secs_f64() * 1000.0, 3),
        p50_ms: percentile_ms(&latencies_us, 50.0),
        p99_ms: percentile_ms(&latencies_us, 99.0),
        max_ms: percentile_ms(&latencies_us, 100.0),
        max_after_answer_ms: round(last.duration_since(answered_at).as_secs_f64() * 1000.0, 3),
        workerd_cpu_us_per_watcher: round(fan_out_cpu.as_secs_f64() * 1e6 / watchers as f64, 1),
        rss_mib_before: mib(rss_before),
        rss_mib_holding: mib(rss_holding),
        rss_mib_evicted: mib(rss_evicted),
        rss_kib_per_idle_watcher: round(rss_evicted.saturating_sub(rss_before) as f64 / watchers as f64, 2),
        rss_mib_after: mib(rss_after),
    })
}
