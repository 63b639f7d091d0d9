//! Native micro-benchmarks of the pure core: a timed loop, calibrated so that one sample runs
//! for at least [`SAMPLE_MS_MIN`], repeated [`SAMPLES`] times; the median sample is the figure.

use crate::stats::round;
use handoff_api::token;
use handoff_core::turn::{self, Command, Record, ReportStatus};
use serde::Serialize;
use std::hint::black_box;
use std::time::{Duration, Instant};

const SAMPLES: usize = 31;
const SAMPLE_MS_MIN: u64 = 10;
/// Calibration doubles the iteration count at most this often.
const CALIBRATION_STEPS_MAX: u32 = 40;

#[derive(Debug, Clone, Serialize)]
pub struct Micro {
    pub name: String,
    pub ns_per_op_median: f64,
    pub ns_per_op_min: f64,
    pub ns_per_op_max: f64,
    pub samples: usize,
    pub iterations_per_sample: u64,
}

pub fn run_all() -> Vec<Micro> {
    let now_ms = 1_800_000_000_000;
    let record = Record::create(
        "ho_0123456789abcdef".into(),
        "bench-owner".into(),
        "session-1".into(),
        "machine-1".into(),
        "large".into(),
        now_ms,
    );
    let report = Command::Report {
        turn: 1,
        status: ReportStatus::NeedsYou,
        summary: Some("the tests pass; should I open the pull request?".into()),
        question: None,
        runtime: None,
        permission_mode: None,
        reply: None,
        sync_mode: None,
    };
    let key = handoff_api::token::DEV_SIGNING_KEY.as_bytes();
    let now_s = now_ms / 1000;
    let owner = token::owner_token("bench-owner", 3600, key, now_s);
    let machine = token::machine_token("bench-owner", "ho_0123456789abcdef", key, now_s);
    vec![
        measure("turn::apply (a report that moves the version)", || {
            let applied = turn::apply(black_box(&record), black_box(&report), black_box(now_ms + 1));
            assert!(applied.as_ref().is_ok_and(|a| a.moved));
            let _ = black_box(applied);
        }),
        measure("token::verify (owner token, HS256)", || {
            black_box(token::verify(black_box(&owner), black_box(key), black_box(now_s)).expect("verifies"));
        }),
        measure("token::verify (machine token, HS256)", || {
            black_box(token::verify(black_box(&machine), black_box(key), black_box(now_s)).expect("verifies"));
        }),
    ]
}

fn measure(name: &str, mut op: impl FnMut()) -> Micro {
    let mut time = |iterations: u64| {
        let started = Instant::now();
        for _ in 0..iterations {
            op();
        }
        started.elapsed()
    };
    let mut iterations = 1u64;
    for _ in 0..CALIBRATION_STEPS_MAX {
        if time(iterations) >= Duration::from_millis(SAMPLE_MS_MIN) {
            break;
        }
        iterations *= 2;
    }
    let mut ns_per_op: Vec<f64> =
        (0..SAMPLES).map(|_| time(iterations).as_nanos() as f64 / iterations as f64).collect();
    ns_per_op.sort_by(f64::total_cmp);
    Micro {
        name: name.to_string(),
        ns_per_op_median: round(ns_per_op[SAMPLES / 2], 1),
        ns_per_op_min: round(ns_per_op[0], 1),
        ns_per_op_max: round(ns_per_op[SAMPLES - 1], 1),
        samples: SAMPLES,
        iterations_per_sample: iterations,
    }
}
