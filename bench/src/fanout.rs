//! Long-poll fan-out: N waiters held on one hand-off, then one report. Measures the time from
//! sending the report until each waiter has its whole answer, and workerd's resident memory
//! before the waiters, while they are held, and after they have returned.

use crate::load::Api;
use crate::server::Server;
use crate::service::{self, Handoff};
use crate::stats::{micros, percentile_ms, ratio, round};
use serde::Serialize;
use std::time::{Duration, Instant};

/// How long a waiter asks to be held: far longer than a round takes, so that only the report
/// can answer it.
const WAIT_TIMEOUT_S: u64 = 60;
/// The client gives up on a waiter after this long (the wait timeout plus its jitter and slack).
const CLIENT_TIMEOUT_S: u64 = 90;
/// Waiters that connect at once, each batch connected before the next.
pub(crate) const CONNECTING_AT_ONCE: usize = 128;
/// The longest the bench waits for every waiter to be held before it reports anyway.
const HOLD_S_MAX: u64 = 30;
/// workerd counts as idle (every waiter parsed and parked) when its CPU time stays the same
/// over this many consecutive polls.
const IDLE_POLLS: u32 = 3;
const POLL_MS: u64 = 100;
/// workerd's own threads tick now and then while it is idle: less CPU than this over one poll
/// counts as none.
const IDLE_CPU_PER_POLL: Duration = Duration::from_millis(1);
/// After the waiters return and their connections close, memory is read this much later.
const SETTLE_AFTER_MS: u64 = 2000;

#[derive(Debug, Clone, Serialize)]
pub struct Fanout {
    pub waiters: usize,
    /// Waiters whose connection was open and workerd idle when the report was sent.
    pub held: usize,
    /// Waiters answered 200 with the report's version after the report was sent.
    pub answered: usize,
    /// Waiters answered before the report (should be 0) or with something else.
    pub early_or_wrong: usize,
    pub errors: usize,
    /// The report's own latency, while the waiters are woken.
    pub report_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// workerd's CPU time from sending the report until every waiter was answered, per waiter.
    pub workerd_cpu_us_per_waiter: f64,
    pub rss_mib_before: f64,
    pub rss_mib_holding: f64,
    pub rss_mib_after: f64,
    /// `after / before`: 1.10 or less is the target.
    pub rss_after_over_before: f64,
    /// Resident memory each held waiter costs: (holding - before) / waiters.
    pub rss_kib_per_waiter: f64,
}

pub async fn run(api: &Api, server: &Server, handoff: &Handoff, waiters: usize) -> Result<Fanout, String> {
    let rss_before = server.rss_kib();
    // Connections already open to the server (the main client's pool) are not waiters.
    let open_before = established_to(server.port);
    // The waiters' own client: dropping it afterwards closes their connections, as real
    // clients going away would, so that "after" measures what workerd keeps.
    let waiter_api = Api::new(&api.base, Duration::from_secs(CLIENT_TIMEOUT_S));
    let after_version = 1;
    let mut tasks = Vec::with_capacity(waiters);
    for n in 0..waiters {
        // In batches, each connected before the next: ten thousand connects at once overflow
        // the listen backlog, and the dropped SYNs come back seconds later.
        if n > 0 && n % CONNECTING_AT_ONCE == 0 {
            let deadline = Instant::now() + Duration::from_secs(5);
            while established_to(server.port).saturating_sub(open_before) < n && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let (waiter_api, req) = (waiter_api.clone(), service::wait(handoff, after_version, WAIT_TIMEOUT_S));
        tasks.push(tokio::spawn(async move {
            let answer = waiter_api.send(&req).await;
            let done = Instant::now();
            let version = match &answer {
                Ok((200, body)) => {
                    serde_json::from_str::<serde_json::Value>(body).ok().and_then(|v| v["handoff"]["version"].as_u64())
                }
                _ => None,
            };
            (done, answer.map(|(status, _)| status), version)
        }));
    }
    let held = wait_until_held(server, open_before, waiters).await;
    let rss_holding = server.rss_kib();

    let cpu_at_report = server.cpu_time();
    let reported_at = Instant::now();
    let report = api.send(&service::report(handoff, waiters as u64)).await?;
    let report_latency = reported_at.elapsed();
    if report.0 != 200 {
        return Err(format!("fan-out report answered {}: {}", report.0, report.1));
    }

    let mut latencies_us = Vec::with_capacity(waiters);
    let (mut early_or_wrong, mut errors) = (0, 0);
    for task in tasks {
        let (done, status, version) = task.await.map_err(|e| e.to_string())?;
        match status {
            Ok(200) if done >= reported_at && version == Some(after_version + 1) => {
                latencies_us.push(micros(done - reported_at));
            }
            Ok(_) => early_or_wrong += 1,
            Err(e) => {
                if errors == 0 {
                    eprintln!("bench: fan-out waiter: {e}");
                }
                errors += 1;
            }
        }
    }
    let wake_cpu = server.cpu_time().saturating_sub(cpu_at_report);
    drop(waiter_api);
    tokio::time::sleep(Duration::from_millis(SETTLE_AFTER_MS)).await;
    let rss_after = server.rss_kib();

    latencies_us.sort_unstable();
    let mib = |kib: u64| round(kib as f64 / 1024.0, 1);
    Ok(Fanout {
        waiters,
        held,
        answered: latencies_us.len(),
        early_or_wrong,
        errors,
        report_ms: round(report_latency.as_secs_f64() * 1000.0, 3),
        p50_ms: percentile_ms(&latencies_us, 50.0),
        p99_ms: percentile_ms(&latencies_us, 99.0),
        max_ms: percentile_ms(&latencies_us, 100.0),
        workerd_cpu_us_per_waiter: round(wake_cpu.as_secs_f64() * 1e6 / waiters as f64, 1),
        rss_mib_before: mib(rss_before),
        rss_mib_holding: mib(rss_holding),
        rss_mib_after: mib(rss_after),
        rss_after_over_before: ratio(rss_after as f64, rss_before as f64),
        rss_kib_per_waiter: round(rss_holding.saturating_sub(rss_before) as f64 / waiters as f64, 2),
    })
}

/// Waits until `waiters` more connections to the server than `open_before` are established and workerd has gone idle
/// (under [`IDLE_CPU_PER_POLL`] of CPU in each of [`IDLE_POLLS`] polls): every wait has then been read, routed
/// and parked in the hand-off's object. Answers how many connections were open.
pub(crate) async fn wait_until_held(server: &Server, open_before: usize, waiters: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(HOLD_S_MAX);
    let mut last_cpu = server.cpu_time();
    let mut idle_polls = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        let open = established_to(server.port).saturating_sub(open_before);
        let cpu = server.cpu_time();
        idle_polls = if cpu.saturating_sub(last_cpu) < IDLE_CPU_PER_POLL { idle_polls + 1 } else { 0 };
        last_cpu = cpu;
        if (open >= waiters && idle_polls >= IDLE_POLLS) || Instant::now() >= deadline {
            if open < waiters {
                eprintln!("bench: fan-out: only {open} of {waiters} waiters connected after {HOLD_S_MAX} s");
            }
            return open.min(waiters);
        }
    }
}

/// Established TCP connections whose local end is `port` (the server's side), from /proc.
pub fn established_to(port: u16) -> usize {
    const ESTABLISHED: &str = "01";
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|table| {
            table
                .lines()
                .skip(1)
                .filter(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let local_port = fields
                        .get(1)
                        .and_then(|a| a.rsplit_once(':'))
                        .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
                    local_port == Some(port) && fields.get(3) == Some(&ESTABLISHED)
                })
                .count()
        })
        .sum()
}
