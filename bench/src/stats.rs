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
}

impl Throughput {
    /// A phase left out of a partial run.
    pub fn skipped(connections: usize) -> Throughput {
        Throughput { connections, requests: 0, errors: 0, seconds: 0.0, requests_per_s: 0.0, p50_ms: 0.0, p99_ms: 0.0 }
    }

    pub fn of(connections: usize, mut latencies_us: Vec<u32>, errors: u64, window: Duration) -> Throughput {
        latencies_us.sort_unstable();
        let requests = latencies_us.len() as u64;
        let seconds = window.as_secs_f64();
        Throughput {
            connections,
            requests,
            errors,
            seconds: round(seconds, 3),
            requests_per_s: round(requests as f64 / seconds, 1),
            p50_ms: percentile_ms(&latencies_us, 50.0),
            p99_ms: percentile_ms(&latencies_us, 99.0),
        }
    }
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
        let t = Throughput::of(1, vec![2000, 1000, 3000, 4000], 0, Duration::from_secs(2));
        assert_eq!((t.requests, t.requests_per_s, t.p50_ms), (4, 2.0, 2.0));
    }
}
