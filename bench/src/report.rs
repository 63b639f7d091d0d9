//! The results of one run: the JSON written to bench/results/latest.json and the table printed.

use crate::fanout::Fanout;
use crate::micro::Micro;
use crate::stats::{ratio, Throughput};
use crate::Args;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// The target for reports against the floor, sequential and at 32 connections.
pub const REPORT_RATIO_TARGET: f64 = 0.5;
/// The fan-out target: 1,000 waiters all answered within this many ms of the report.
pub const FANOUT_1000_MS_TARGET: f64 = 100.0;
/// Memory back within 10% of its start after the waiters return.
pub const RSS_AFTER_OVER_BEFORE_MAX: f64 = 1.10;

#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub sequential: Throughput,
    #[serde(rename = "concurrent_32")]
    pub concurrent: Throughput,
}

impl Pair {
    pub fn skipped(connections: usize) -> Pair {
        Pair { sequential: Throughput::skipped(1), concurrent: Throughput::skipped(connections) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    pub sequential: f64,
    #[serde(rename = "concurrent_32")]
    pub concurrent: f64,
}

impl Ratios {
    fn of(pair: &Pair, floor: &Pair) -> Ratios {
        Ratios {
            sequential: ratio(pair.sequential.requests_per_s, floor.sequential.requests_per_s),
            concurrent: ratio(pair.concurrent.requests_per_s, floor.concurrent.requests_per_s),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    #[serde(flatten)]
    pub pair: Pair,
    pub ratio_to_floor: Ratios,
}

#[derive(Debug, Clone, Serialize)]
pub struct TmpfsMeasured {
    pub floor: Pair,
    pub report: Pair,
    pub ratio_to_floor: Ratios,
}

#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub handoffs: usize,
    /// Every hand-off belongs to one owner: every report also updates that owner's one index.
    #[serde(rename = "one_owner_concurrent_32")]
    pub one_owner: Throughput,
    /// One owner per hand-off: the reports update 1,000 different indexes.
    #[serde(rename = "one_owner_each_concurrent_32")]
    pub one_owner_each: Throughput,
    /// workerd's resident memory once both spreads ran: 2,000 hand-off objects and 1,001 indexes live.
    pub rss_mib_after: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpreadRatios {
    pub one_owner: f64,
    pub one_owner_each: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpreadMeasured {
    #[serde(flatten)]
    pub spread: Spread,
    /// Throughput over the floor's at 32 connections.
    pub ratio_to_floor: SpreadRatios,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeStart {
    pub wasm_bytes: u64,
    pub wasm_gzip_bytes: u64,
    pub wasm_gzip_target_bytes: u64,
    pub start_to_first_answer_ms: f64,
    pub first_durable_object_answer_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub workerd: String,
    pub cpus: usize,
    pub commit: String,
    /// The phases this run measured: all five, unless a partial run was asked for.
    pub phases: Vec<String>,
    /// /proc/loadavg's 1-minute figure as the run started and ended: other work on the
    /// machine moves every figure, so the table says how busy it was.
    pub load_average_start: f64,
    pub load_average_end: f64,
    pub warmup_s: f64,
    pub window_s: f64,
    pub total_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Targets {
    pub report_ratio_sequential_met: bool,
    pub report_ratio_concurrent_32_met: bool,
    pub fanout_1000_all_within_100_ms_met: bool,
    pub fanout_rss_back_within_10_percent_met: bool,
    pub wasm_gzip_under_400_kb_met: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub run: RunInfo,
    pub floor: Pair,
    /// Not one of the figures: a read of one hand-off (authentication, the object's
    /// round trip, the record from memory), which splits a report's cost into its parts.
    pub get_one_handoff: Measured,
    pub report_one_handoff: Measured,
    /// Not one of the figures: (1) and (2) again on a workerd whose objects store on
    /// tmpfs, where a commit costs no fsync; the gap to `report_one_handoff` is the disk's.
    pub report_one_handoff_tmpfs: Option<TmpfsMeasured>,
    pub report_spread: SpreadMeasured,
    pub fanout: Vec<Fanout>,
    /// (4) again over the watch (`GET …/watch`), the same numbers of sockets.
    pub watch_fanout: Vec<crate::watch::WatchFanout>,
    pub size_start: SizeStart,
    pub micro: Vec<Micro>,
    pub targets: Targets,
    /// (7) Beside the TypeScript peer; `None` when the phase was left out.
    pub peer: Option<crate::peer::Peer>,
}

impl Results {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        args: &Args,
        floor: Pair,
        get_one: Pair,
        report_one: Pair,
        report_one_tmpfs: Option<(Pair, Pair)>,
        spread: Spread,
        fanout: Vec<Fanout>,
        size_start: SizeStart,
        micro: Vec<Micro>,
    ) -> Results {
        let report_ratio = Ratios::of(&report_one, &floor);
        let spread_ratio = SpreadRatios {
            one_owner: ratio(spread.one_owner.requests_per_s, floor.concurrent.requests_per_s),
            one_owner_each: ratio(spread.one_owner_each.requests_per_s, floor.concurrent.requests_per_s),
        };
        let thousand = fanout.iter().find(|f| f.waiters == 1_000);
        let targets = Targets {
            report_ratio_sequential_met: report_ratio.sequential >= REPORT_RATIO_TARGET,
            report_ratio_concurrent_32_met: report_ratio.concurrent >= REPORT_RATIO_TARGET,
            fanout_1000_all_within_100_ms_met: thousand
                .is_some_and(|f| f.answered == f.waiters && f.max_ms <= FANOUT_1000_MS_TARGET),
            fanout_rss_back_within_10_percent_met: fanout
                .iter()
                .all(|f| f.rss_after_over_before <= RSS_AFTER_OVER_BEFORE_MAX),
            wasm_gzip_under_400_kb_met: size_start.wasm_gzip_bytes < size_start.wasm_gzip_target_bytes,
        };
        Results {
            run: RunInfo {
                workerd: workerd_version(&args.options.workerd),
                cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                commit: git_commit(&args.options.repo),
                phases: args.phases.clone(),
                load_average_start: 0.0,
                load_average_end: 0.0,
                warmup_s: args.warmup.as_secs_f64(),
                window_s: args.window.as_secs_f64(),
                total_s: 0.0,
            },
            get_one_handoff: Measured { ratio_to_floor: Ratios::of(&get_one, &floor), pair: get_one },
            report_one_handoff: Measured { pair: report_one, ratio_to_floor: report_ratio },
            report_one_handoff_tmpfs: report_one_tmpfs.map(|(floor, report)| TmpfsMeasured {
                ratio_to_floor: Ratios::of(&report, &floor),
                floor,
                report,
            }),
            report_spread: SpreadMeasured { spread, ratio_to_floor: spread_ratio },
            floor,
            fanout,
            watch_fanout: Vec::new(),
            size_start,
            micro,
            targets,
            peer: None,
        }
    }
}

fn workerd_version(workerd: &Path) -> String {
    std::process::Command::new(workerd)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn git_commit(repo: &Path) -> String {
    std::process::Command::new("git")
        .args(["-C", &repo.display().to_string(), "rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The .wasm's size raw and gzipped (best compression), in bytes.
pub fn wasm_size(wasm: &Path) -> Result<(u64, u64), String> {
    let bytes = std::fs::read(wasm).map_err(|e| format!("{}: {e} (has the Worker been built?)", wasm.display()))?;
    let mut gzip = GzEncoder::new(Vec::new(), Compression::best());
    gzip.write_all(&bytes).map_err(|e| e.to_string())?;
    let gzipped = gzip.finish().map_err(|e| e.to_string())?;
    Ok((bytes.len() as u64, gzipped.len() as u64))
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

/// The table printed at the end of a run (and quoted in bench/README.md).
pub fn table(r: &Results) -> String {
    let mut t = String::new();
    let run = &r.run;
    let _ = writeln!(
        t,
        "\nhandoff-bench: {} on {} CPUs, commit {}; {} s windows after {} s warm-up; run took {} s; load average {} → {}\n",
        run.workerd, run.cpus, run.commit, run.window_s, run.warmup_s, run.total_s, run.load_average_start, run.load_average_end
    );
    let _ = writeln!(
        t,
        "{:<46} {:>34} | {:>34}",
        "throughput (closed loop)", "sequential (1 connection)", "32 connections"
    );
    let _ = writeln!(
        t,
        "{:<46} {:>6} {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6} {:>6} {:>6}",
        "", "req/s", "p50ms", "p99ms", "×floor", "cpuµs", "req/s", "p50ms", "p99ms", "×floor", "cpuµs"
    );
    let cells = |x: Option<&Throughput>, ratio: Option<f64>| match x {
        Some(x) => format!(
            "{:>6.0} {:>6.2} {:>6.2} {:>6} {:>6.0}",
            x.requests_per_s,
            x.p50_ms,
            x.p99_ms,
            ratio.map(|v| format!("{v:.2}")).unwrap_or_default(),
            x.workerd_cpu_us_per_request
        ),
        None => format!("{:>6} {:>6} {:>6} {:>6} {:>6}", "-", "", "", "", ""),
    };
    let mut row = |name: &str, seq: Option<&Throughput>, seq_ratio, con: Option<&Throughput>, con_ratio| {
        let _ = writeln!(t, "{name:<46} {} | {}", cells(seq, seq_ratio), cells(con, con_ratio));
    };
    row(
        "1 floor: object round trip, no auth/storage",
        Some(&r.floor.sequential),
        Some(1.0),
        Some(&r.floor.concurrent),
        Some(1.0),
    );
    let g = &r.get_one_handoff;
    row(
        "  read one hand-off: + auth, no storage",
        Some(&g.pair.sequential),
        Some(g.ratio_to_floor.sequential),
        Some(&g.pair.concurrent),
        Some(g.ratio_to_floor.concurrent),
    );
    let p = &r.report_one_handoff;
    row(
        "2 reports on one hand-off",
        Some(&p.pair.sequential),
        Some(p.ratio_to_floor.sequential),
        Some(&p.pair.concurrent),
        Some(p.ratio_to_floor.concurrent),
    );
    if let Some(m) = &r.report_one_handoff_tmpfs {
        row(
            "  floor, objects' storage on tmpfs",
            Some(&m.floor.sequential),
            Some(1.0),
            Some(&m.floor.concurrent),
            Some(1.0),
        );
        row(
            "  reports on one hand-off, storage on tmpfs",
            Some(&m.report.sequential),
            Some(m.ratio_to_floor.sequential),
            Some(&m.report.concurrent),
            Some(m.ratio_to_floor.concurrent),
        );
    }
    let s = &r.report_spread;
    row(
        "3 reports over 1,000 hand-offs, one owner",
        None,
        None,
        Some(&s.spread.one_owner),
        Some(s.ratio_to_floor.one_owner),
    );
    row(
        "  reports over 1,000 hand-offs, 1,000 owners",
        None,
        None,
        Some(&s.spread.one_owner_each),
        Some(s.ratio_to_floor.one_owner_each),
    );
    let tmpfs: Vec<&Pair> = r.report_one_handoff_tmpfs.iter().flat_map(|m| [&m.floor, &m.report]).collect();
    let errors: u64 = [&r.floor, &g.pair, &p.pair]
        .into_iter()
        .chain(tmpfs)
        .map(|x| x.sequential.errors + x.concurrent.errors)
        .sum::<u64>()
        + s.spread.one_owner.errors
        + s.spread.one_owner_each.errors;
    let _ = writeln!(t, "cpuµs: workerd's CPU time per request sent (all its threads, from /proc)");
    let _ = writeln!(
        t,
        "workerd RSS after (3), with 2,000 hand-off objects and 1,001 owner indexes live: {} MiB",
        s.spread.rss_mib_after
    );
    let _ = writeln!(t, "errors (non-200 or failed requests) over all load phases: {errors}\n");

    let _ = writeln!(
        t,
        "{:<22} {:>9} {:>7} {:>7} {:>7} {:>9} {:>10} {:>27} {:>7}",
        "4 long-poll fan-out",
        "answered",
        "p50ms",
        "p99ms",
        "max ms",
        "report ms",
        "cpuµs/wait",
        "RSS MiB before/held/after",
        "after/before"
    );
    for f in &r.fanout {
        let _ = writeln!(
            t,
            "{:<22} {:>9} {:>7.1} {:>7.1} {:>7.1} {:>9.1} {:>10.0} {:>11.1} /{:>7.1} /{:>7.1} {:>7.2}",
            format!("  {} waiters", f.waiters),
            format!("{}/{}", f.answered, f.waiters),
            f.p50_ms,
            f.p99_ms,
            f.max_ms,
            f.report_ms,
            f.workerd_cpu_us_per_waiter,
            f.rss_mib_before,
            f.rss_mib_holding,
            f.rss_mib_after,
            f.rss_after_over_before
        );
    }
    if !r.watch_fanout.is_empty() {
        let _ = writeln!(
            t,
            "\n{:<22} {:>9} {:>7} {:>7} {:>7} {:>9} {:>10} {:>10} {:>35} {:>9}",
            "4 watch fan-out",
            "received",
            "p50ms",
            "p99ms",
            "max ms",
            "report ms",
            "max-answer",
            "cpuµs/sock",
            "RSS MiB before/live/evicted/after",
            "KiB/idle"
        );
    }
    for w in &r.watch_fanout {
        let _ = writeln!(
            t,
            "{:<22} {:>9} {:>7.1} {:>7.1} {:>7.1} {:>9.1} {:>10.1} {:>10.0} {:>8.1} /{:>7.1} /{:>7.1} /{:>7.1} {:>9.2}",
            format!("  {} watchers", w.watchers),
            format!("{}/{}", w.received, w.watchers),
            w.p50_ms,
            w.p99_ms,
            w.max_ms,
            w.report_ms,
            w.max_after_answer_ms,
            w.workerd_cpu_us_per_watcher,
            w.rss_mib_before,
            w.rss_mib_holding,
            w.rss_mib_evicted,
            w.rss_mib_after,
            w.rss_kib_per_idle_watcher
        );
    }
    let z = &r.size_start;
    let _ = writeln!(
        t,
        "\n5 .wasm {} bytes raw, {} bytes gzipped (target < {}); start → first answer {} ms, first Durable Object answer {} ms later",
        z.wasm_bytes, z.wasm_gzip_bytes, z.wasm_gzip_target_bytes, z.start_to_first_answer_ms, z.first_durable_object_answer_ms
    );
    let _ = writeln!(
        t,
        "\n6 native micro-benchmarks (median of {} timed samples)",
        r.micro.first().map_or(0, |m| m.samples)
    );
    for m in &r.micro {
        let _ = writeln!(
            t,
            "  {:<50} {:>9.1} ns/op  (min {:.1}, max {:.1})",
            m.name, m.ns_per_op_median, m.ns_per_op_min, m.ns_per_op_max
        );
    }
    if let Some(peer) = &r.peer {
        let _ = write!(t, "\n{}", crate::peer::table(peer));
    }
    let g = &r.targets;
    let _ = writeln!(
        t,
        "\ntargets: reports ≥ 0.5 × floor sequential {}, at 32 connections {}; 1,000 waiters within 100 ms {}; \
         memory back within 10% {}; .wasm gzipped < 400 KB {}",
        met(g.report_ratio_sequential_met),
        met(g.report_ratio_concurrent_32_met),
        met(g.fanout_1000_all_within_100_ms_met),
        met(g.fanout_rss_back_within_10_percent_met),
        met(g.wasm_gzip_under_400_kb_met)
    );
    t
}
