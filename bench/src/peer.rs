//! Beside the TypeScript reference: the measured routes written as a Workers team would write
//! them by default in TypeScript (`bench/reference/`), once with both hops (Worker → hand-off
//! object → owner index) over `fetch` and once over RPC, run on the same workerd from the same
//! configuration and driven by the same load generator. Each row is measured on this Worker,
//! then on the reference over fetch, then over RPC, one right after the other, each on a
//! workerd of its own started fresh for this phase, so that the three see the same machine.
//!
//! Before anything is measured, the package row's answers are checked against handoff-core:
//! the reference must compile the same package, hash it to what the core's canonical JSON and
//! SHA-256 give, and render the same briefing, or the run stops.

use crate::load::{self, Api, Req, Shape};
use crate::server::{Options, Server};
use crate::service;
use crate::stats::Throughput;
use handoff_core::briefing::{self, Reach};
use handoff_core::package::{package_hash, Latest, OfferState, Package};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// One route on the three Workers, sequential and at `connections` (or at 32 only).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: &'static str,
    pub ours: Vec<Throughput>,
    pub fetch: Vec<Throughput>,
    pub rpc: Vec<Throughput>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    pub rows: Vec<Row>,
    /// The package row's check, one per reference: `[fetch, rpc]`.
    pub agreement: Vec<Agreement>,
}

/// What the package row's dry run answered on a reference, against handoff-core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agreement {
    pub hops: &'static str,
    /// handoff-core's `package_hash` (canonical JSON, SHA-256) of the reference's package is the
    /// hash the reference answered: the two canonical JSONs are the same bytes.
    pub reference_hash_is_cores: bool,
    /// The reference's package is this Worker's, once this Worker's times (each decision's
    /// `recorded_at`, and `generated_at`) are the reference's: the same input.
    pub same_package: bool,
    /// The reference's briefing is handoff-core's rendering of its package, byte for byte.
    pub same_briefing: bool,
    /// Where the two briefings first differ (a byte offset), when they do.
    pub briefing_differs_at: Option<usize>,
    pub package_json_bytes: usize,
    pub briefing_bytes: usize,
    /// The sections the briefing gave up to fit its budget, first given up first.
    pub briefing_left_out: Vec<&'static str>,
}

impl Agreement {
    fn holds(&self) -> bool {
        self.reference_hash_is_cores && self.same_package && self.same_briefing
    }
}

/// The n-th request of a row, on its side's hand-offs.
type MakeRequest = fn(&Handoffs, u64) -> Req;

#[derive(Clone)]
struct Handoffs {
    /// Reported on, and read.
    one: service::Handoff,
    /// Carries the package row's work record; its turn 1 is done.
    package: service::Handoff,
}

/// One Worker started, with its hand-offs.
struct Side {
    server: Server,
    api: Api,
    handoffs: Handoffs,
}

async fn side(options: &Options, dir: &Path, key: &[u8]) -> Result<Side, String> {
    let server = Server::start(options, dir)?;
    let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
    let owner = service::owner_token("peer-owner", key);
    let one = service::create(&api, &owner, "peer-one").await?;
    let package = service::create_with_work(&api, &owner, "peer-package").await?;
    Ok(Side { server, api, handoffs: Handoffs { one, package } })
}

/// `sides`: this Worker, the reference over fetch, the reference over RPC.
pub async fn run(sides: &[Options; 3], run_dir: &Path, key: &[u8], warmup: Duration, window: Duration) -> Result<Peer, String> {
    let mut started = Vec::new();
    for (options, dir) in sides.iter().zip(["peer-rust", "peer-ts-fetch", "peer-ts-rpc"]) {
        started.push(side(options, &run_dir.join(dir), key).await?);
    }
    let agreement = check(&started).await?;
    let shapes = [1, crate::CONNECTIONS];
    let routes: [(&'static str, MakeRequest); 5] = [
        ("trivial route (GET /v1/health)", |_, _| Req::get("/v1/health", None)),
        ("floor (route, reach an object, answer)", |_, _| service::floor()),
        ("read one hand-off (owner)", |h, _| service::get(&h.one)),
        ("reports on one hand-off", |h, n| service::report(&h.one, n)),
        ("package + briefing (dry-run open, 8 KiB)", |h, _| service::preview(&h.package)),
    ];
    let mut rows = Vec::new();
    for (name, make) in routes {
        let mut measured: [Vec<Throughput>; 3] = Default::default();
        for (i, connections) in shapes.into_iter().enumerate() {
            let shape = Shape { connections, warmup, window };
            // Summaries numbered apart per shape: every report is a change.
            let offset = i as u64 * 1_000_000_000;
            for (s, out) in started.iter().zip(measured.iter_mut()) {
                let handoffs = s.handoffs.clone();
                out.push(load::run(&s.api, &s.server, shape, 200, move |n| make(&handoffs, offset + n)).await);
            }
        }
        let [ours, fetch, rpc] = measured;
        rows.push(Row { name, ours, fetch, rpc });
    }
    let mut measured: [Vec<Throughput>; 3] = Default::default();
    for (s, out) in started.iter().zip(measured.iter_mut()) {
        out.push(crate::spread(&s.api, &s.server, (warmup, window), key, "peer-spread", |_| "peer-spread-owner".into()).await?);
    }
    let [ours, fetch, rpc] = measured;
    rows.push(Row { name: "reports over 1,000 hand-offs, one owner", ours, fetch, rpc });
    Ok(Peer { rows, agreement })
}

/// One dry run on each side, each reference's answer judged against this Worker's.
async fn check(sides: &[Side]) -> Result<Vec<Agreement>, String> {
    let mut answers = Vec::new();
    for s in sides {
        answers.push(s.api.json(&service::preview(&s.handoffs.package), &[200]).await?);
    }
    let mut out = Vec::new();
    for (s, (answer, hops)) in sides[1..].iter().zip(answers[1..].iter().zip(["fetch", "rpc"])) {
        let a = agreement(hops, &answers[0], answer, &s.server.base())?;
        if !a.holds() {
            return Err(format!(
                "the reference over {hops} does not do this Worker's work: {a:?}\nours: {}\nthe reference's: {}",
                answers[0], answer
            ));
        }
        out.push(a);
    }
    Ok(out)
}

/// Judges a reference's dry-run answer against this Worker's: `base_url` is the reference's
/// origin, which its briefing's closing instruction names.
pub fn agreement(hops: &'static str, ours: &Value, reference: &Value, base_url: &str) -> Result<Agreement, String> {
    let package = |answer: &Value, whose: &str| -> Result<Package, String> {
        serde_json::from_value(answer["package"].clone()).map_err(|e| format!("{whose} package does not read as handoff-core's: {e}"))
    };
    let (ours_package, theirs) = (package(ours, "our")?, package(reference, "the reference's")?);
    let hash = reference["package_hash"].as_str().unwrap_or_default().to_string();
    let reference_hash_is_cores = package_hash(&theirs) == hash;
    let mut same_input = ours_package;
    for (d, t) in same_input.decisions.iter_mut().zip(&theirs.decisions) {
        d.recorded_at = t.recorded_at;
    }
    same_input.generated_at = theirs.generated_at;
    let same_package = same_input == theirs && package_hash(&same_input) == hash;
    let text = reference["briefing"].as_str().unwrap_or_default();
    let latest = Latest {
        package_version: reference["package_version"].as_u64().unwrap_or_default(),
        package_hash: hash,
        state: OfferState::Offered,
        rejection: None,
        package: theirs,
    };
    let briefing::Briefing { text: rendered, left_out, .. } = briefing::render(&latest, service::PREVIEW_BUDGET_BYTES, &Reach::api(base_url));
    let briefing_differs_at = (rendered != text)
        .then(|| rendered.bytes().zip(text.bytes()).position(|(a, b)| a != b).unwrap_or(rendered.len().min(text.len())));
    Ok(Agreement {
        hops,
        reference_hash_is_cores,
        same_package,
        same_briefing: briefing_differs_at.is_none(),
        briefing_differs_at,
        package_json_bytes: reference["package"].to_string().len(),
        briefing_bytes: text.len(),
        briefing_left_out: left_out.iter().map(|s| s.heading().trim_start_matches("## ")).collect(),
    })
}

/// `part / whole` to two places, or "-" with no whole.
fn ratio(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.2}", part / whole)
    } else {
        "-".into()
    }
}

/// This Worker's figure over the better reference's for one metric: the higher throughput or
/// the lower CPU, named.
fn against_best(ours: f64, fetch: f64, rpc: f64, higher_is_better: bool) -> String {
    let fetch_wins = if higher_is_better { fetch >= rpc } else { fetch <= rpc };
    let (best, which) = if fetch_wins { (fetch, "fetch") } else { (rpc, "rpc") };
    format!("{} {which:<5}", ratio(ours, best))
}

/// The rows, each shape with the three Workers' figures and this Worker's over the better
/// reference's.
pub fn table(p: &Peer) -> String {
    let mut out = String::from(
        "7 beside the TypeScript reference (bench/reference/), its hops over fetch and over RPC; each row measured on the three, one after another\n\
         \x20                                           conns |   ours  fetch    rpc  ×best       | ours µs fetch µs rpc µs  ×best\n",
    );
    for row in &p.rows {
        for ((o, f), r) in row.ours.iter().zip(&row.fetch).zip(&row.rpc) {
            out.push_str(&format!(
                "  {:<42} {:>5} | {:>6.0} {:>6.0} {:>6.0}  {} | {:>7.0} {:>8.0} {:>6.0}  {}\n",
                row.name,
                o.connections,
                o.requests_per_s,
                f.requests_per_s,
                r.requests_per_s,
                against_best(o.requests_per_s, f.requests_per_s, r.requests_per_s, true),
                o.workerd_cpu_us_per_request,
                f.workerd_cpu_us_per_request,
                r.workerd_cpu_us_per_request,
                against_best(o.workerd_cpu_us_per_request, f.workerd_cpu_us_per_request, r.workerd_cpu_us_per_request, false),
            ));
        }
    }
    let errors: u64 = p.rows.iter().flat_map(|r| r.ours.iter().chain(&r.fetch).chain(&r.rpc)).map(|t| t.errors).sum();
    out.push_str(
        "  req/s: throughput; µs: workerd's CPU per request (all its threads, from schedstat). ×best: ours over the better\n\
         \x20 reference for that figure, named (throughput: the higher, above 1 is faster; CPU: the lower, below 1 is cheaper)\n",
    );
    out.push_str(&format!("  errors (non-200 or failed requests) over this phase: {errors}\n"));
    for a in &p.agreement {
        out.push_str(&format!(
            "  package row, reference over {:<5}: hash = handoff-core's of its package {}; same package as ours (times aside) {}; \
             briefing byte for byte handoff-core's {} ({} bytes of package JSON, {} of briefing, which leaves out: {})\n",
            a.hops,
            yes(a.reference_hash_is_cores),
            yes(a.same_package),
            yes(a.same_briefing),
            a.package_json_bytes,
            a.briefing_bytes,
            a.briefing_left_out.join(", "),
        ));
    }
    out
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A package as the Worker answers it (format 1), compiled by hand.
    fn package(recorded_at: &str) -> Value {
        json!({
            "format": 1,
            "work": {"id": "ho_0123456789abcdef0123456789abcdef", "session": "s", "title": "Ship it", "goal": "Ship\nit",
                     "task_type": null, "priority": "high", "state": "open"},
            "constraints": ["No downtime."],
            "acceptance_criteria": ["It ships.", "It stays up."],
            "state": {"phase": {"state": "open", "turn": 2, "status": "running"},
                      "completed": ["turn 1 opened", "turn 1 finished (done)", "turn 2 opened"],
                      "unresolved": ["acceptance criterion 1 not met: It stays up."]},
            "decisions": [{"id": "dec_1", "statement": "Use the flag.", "rationale": null, "recorded_at": recorded_at,
                           "evidence": ["https://example.test/1"]}],
            "artifacts": [{"id": "art_1", "type": "pr", "title": "PR", "version": 1, "uri": "https://example.test/pr", "sha256": null}],
            "blockers": [],
            "relevant_files": ["src/a.rs"],
            "next": {"objective": "Finish", "purpose": "context", "runtime": "codex"},
            "source": {"session": "s", "machine": "m", "runtime": "codex"},
            "evidence_links": ["https://example.test/1", "https://example.test/pr"],
            "notes": null,
            "generated_at": recorded_at,
            "truncation": {"decisions_omitted": 0, "artifacts_omitted": 0, "files_omitted": 0},
        })
    }

    /// A dry-run answer whose hash and briefing are handoff-core's own, at `base`.
    fn answer(recorded_at: &str, base: &str) -> Value {
        let p: Package = serde_json::from_value(package(recorded_at)).unwrap();
        let hash = package_hash(&p);
        let latest = Latest { package_version: 1, package_hash: hash.clone(), state: OfferState::Offered, rejection: None, package: p };
        let text = briefing::render(&latest, service::PREVIEW_BUDGET_BYTES, &Reach::api(base)).text;
        json!({"package_version": 1, "package_hash": hash, "package": package(recorded_at), "briefing": text})
    }

    const BASE: &str = "http://127.0.0.1:1";

    #[test]
    fn a_reference_that_does_the_same_work_at_another_time_agrees() {
        let ours = answer("2026-12-01T10:00:00.000Z", "http://127.0.0.1:2");
        let theirs = answer("2026-12-01T10:00:05.123Z", BASE);
        assert_ne!(ours["package_hash"], theirs["package_hash"], "the times are hashed");
        let a = agreement("rpc", &ours, &theirs, BASE).unwrap();
        assert!(a.holds(), "{a:?}");
    }

    #[test]
    fn another_hash_another_package_or_another_briefing_is_found() {
        let ours = answer("2026-12-01T10:00:00.000Z", BASE);
        let mut wrong_hash = ours.clone();
        wrong_hash["package_hash"] = json!("0".repeat(64));
        let a = agreement("rpc", &ours, &wrong_hash, BASE).unwrap();
        assert!(!a.reference_hash_is_cores && !a.same_package, "{a:?}");

        let mut other_statement = package("2026-12-01T10:00:00.000Z");
        other_statement["decisions"][0]["statement"] = json!("Use no flag.");
        let p: Package = serde_json::from_value(other_statement.clone()).unwrap();
        let theirs = json!({"package_version": 1, "package_hash": package_hash(&p), "package": other_statement, "briefing": ""});
        let a = agreement("rpc", &ours, &theirs, BASE).unwrap();
        assert!(a.reference_hash_is_cores && !a.same_package, "{a:?}");

        let mut other_briefing = ours.clone();
        other_briefing["briefing"] = json!(ours["briefing"].as_str().unwrap().replace("Ship it", "Ship It"));
        let a = agreement("rpc", &ours, &other_briefing, BASE).unwrap();
        assert!(a.same_package && !a.same_briefing, "{a:?}");
        assert_eq!(a.briefing_differs_at, ours["briefing"].as_str().unwrap().find("Ship it").map(|i| i + 5));

        let unknown_field = json!({"package": {"format": 1, "extra": true}});
        assert!(agreement("rpc", &ours, &unknown_field, BASE).is_err(), "a package the core cannot read is an error");
    }

    #[test]
    fn the_ratio_is_against_the_better_reference_of_each_figure() {
        assert_eq!(against_best(120.0, 100.0, 80.0, true), "1.20 fetch");
        assert_eq!(against_best(120.0, 80.0, 100.0, true), "1.20 rpc  ");
        assert_eq!(against_best(300.0, 400.0, 600.0, false), "0.75 fetch");
        assert_eq!(against_best(300.0, 600.0, 400.0, false), "0.75 rpc  ");
    }
}
