//! Latency samples and what the table shows of them: throughput and nearest-rank percentiles.

use serde::Serialize;
use std::time::Duration;

/// The figures of one load phase.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Connections (and so requests in flight) the phase kept busy.
    pub connections: usize,
    /// Requests answered with the expected status inside the measured window.
    pub requests: u64,
    /// Requests that failed or answered another status (each is a finding, not noise).
    pub errors: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Every request the phase sent, warm-up included: the divisor of the CPU figures.
    pub sent: u64,
    /// workerd's CPU time (user + system, all threads) over the phase, per request sent.
    pub workerd_cpu_us_per_request: f64,
    /// The load generator's own CPU time per request sent: it shares the machine.
    pub client_cpu_us_per_request: f64,
}

impl Throughput {
    /// A phase left out of a partial run.
    pub fn skipped(connections: usize) -> Throughput {
        Throughput::of(connections, Vec::new(), 0, Duration::ZERO, 0)
    }

    pub fn of(connections: usize, mut latencies_us: Vec<u32>, errors: u64, window: Duration, sent: u64) -> Throughput {
        latencies_us.sort_unstable();
        let requests = latencies_us.len() as u64;
        let seconds = window.as_secs_f64();
        Throughput {
            connections,
            requests,
            errors,
            seconds: round(seconds, 3),
            requests_per_s: if seconds > 0.0 { round(requests as f64 / seconds, 1) } else { 0.0 },
            p50_ms: percentile_ms(&latencies_us, 50.0),
            p99_ms: percentile_ms(&latencies_us, 99.0),
            sent,
            workerd_cpu_us_per_request: 0.0,
            client_cpu_us_per_request: 0.0,
        }
    }

    /// Adds the CPU time workerd and the load generator spent over the phase.
    pub fn with_cpu(mut self, workerd: Duration, client: Duration) -> Throughput {
        let per = |d: Duration| if self.sent > 0 { round(d.as_secs_f64() * 1e6 / self.sent as f64, 1) } else { 0.0 };
        self.workerd_cpu_us_per_request = per(workerd);
        self.client_cpu_us_per_request = per(client);
        self
    }
}

/// CPU time of process `pid` so far: the sum of its threads' `/proc/PID/task/TID/schedstat`
/// (nanoseconds on a CPU), or where the kernel keeps no schedstat, user + system time from
/// `/proc/PID/stat` (in clock ticks of 10 ms: too coarse for one fan-out of a hundred sockets).
pub fn cpu_time(pid: &str) -> Duration {
    let on_cpu_ns = std::fs::read_dir(format!("/proc/{pid}/task")).ok().map(|tasks| {
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()))
            .sum::<u64>()
    });
    match on_cpu_ns {
        Some(ns) if ns > 0 => Duration::from_nanos(ns),
        _ => cpu_ticks(pid),
    }
}

fn cpu_ticks(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces: utime and
    // stime are fields 14 and 15 of the line, so 12 and 13 after the name.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / ticks_per_s)
}

/// The nearest-rank percentile of sorted microsecond samples, in milliseconds (0 when empty).
pub fn percentile_ms(sorted_us: &[u32], pct: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let rank = ((pct / 100.0) * sorted_us.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted_us.len()) - 1;
    round(sorted_us[index] as f64 / 1000.0, 3)
}

pub fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// `part / whole`, or 0 when there is no whole.
pub fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        round(part / whole, 2)
    } else {
        0.0
    }
}

pub fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_pick_a_real_sample() {
        let samples: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&samples, 50.0), 50.0);
        assert_eq!(percentile_ms(&samples, 99.0), 99.0);
        assert_eq!(percentile_ms(&samples, 100.0), 100.0);
        assert_eq!(percentile_ms(&[7000], 99.0), 7.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn throughput_counts_requests_over_the_window() {
        let t = Throughput::of(1, vec![2000, 1000, 3000, 4000], 0, Duration::from_secs(2), 6);
        assert_eq!((t.requests, t.requests_per_s, t.p50_ms), (4, 2.0, 2.0));
    }
}
