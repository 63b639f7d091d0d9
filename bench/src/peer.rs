//! Beside the TypeScript reference: the measured routes written as a Workers team would write
//! them by default in TypeScript (`bench/reference/`), once with both hops (Worker → hand-off
//! object → owner index) over `fetch` and once over RPC, run on the same workerd from the same
//! configuration and driven by the same load generator. Each of the three runs on a workerd of
//! its own, started fresh for this phase. Each row is measured in rounds, the three in rotated
//! order (`rounds::rotation`: round 0 ours, fetch, RPC; round 1 fetch, RPC, ours; …), because
//! the order alone moved a ratio by up to 40 %; the table quotes the median of the per-round
//! ratios with their lowest and highest.
//!
//! Before anything is measured, the package row's answers are checked against handoff-core:
//! the reference must compile the same package, hash it to what the core's canonical JSON and
//! SHA-256 give, and render the same briefing, or the run stops.

use crate::load::{self, Api, Req, Shape};
use crate::rounds::{self, Versus};
use crate::server::{Options, Server};
use crate::service;
use crate::stats::Throughput;
use handoff_core::briefing::{self, Reach};
use handoff_core::package::{package_hash, Latest, OfferState, Package};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// The three Workers, in the order of round 0 (and of `run`'s `sides`).
pub const WORKERS: [&str; 3] = ["ours", "fetch", "rpc"];

/// One route at one number of connections, measured on the three Workers once per round.
#[derive(Debug, Clone, Serialize)]
pub struct Rounds {
    pub connections: usize,
    /// Round by round, the Workers in the order that round measured them.
    pub order: Vec<[&'static str; 3]>,
    /// Each Worker's figures round by round: `ours[r]` is round r's, whatever its place in it.
    pub ours: Vec<Throughput>,
    pub fetch: Vec<Throughput>,
    pub rpc: Vec<Throughput>,
    /// Ours over the reference with the higher median throughput, round by round.
    pub throughput: Versus,
    /// Ours over the reference with the lower median CPU per request, round by round.
    pub cpu: Versus,
}

impl Rounds {
    /// `measured`: ours, fetch and RPC's figures, each round by round.
    pub fn of(connections: usize, measured: [Vec<Throughput>; 3]) -> Rounds {
        let count = measured[0].len();
        assert!(measured.iter().all(|m| m.len() == count), "every round measures each of the three once");
        let order = (0..count)
            .map(|r| {
                let places = rounds::rotation(r, WORKERS.len());
                std::array::from_fn(|place| WORKERS[places[place]])
            })
            .collect();
        let [ours, fetch, rpc] = measured;
        let rps = |t: &[Throughput]| t.iter().map(|t| t.requests_per_s).collect::<Vec<f64>>();
        let cpu = |t: &[Throughput]| t.iter().map(|t| t.workerd_cpu_us_per_request).collect::<Vec<f64>>();
        Rounds {
            connections,
            order,
            throughput: rounds::against_better(&rps(&ours), [("fetch", &rps(&fetch)), ("rpc", &rps(&rpc))], true),
            cpu: rounds::against_better(&cpu(&ours), [("fetch", &cpu(&fetch)), ("rpc", &cpu(&rpc))], false),
            ours,
            fetch,
            rpc,
        }
    }

    fn all(&self) -> impl Iterator<Item = &Throughput> {
        self.ours.iter().chain(&self.fetch).chain(&self.rpc)
    }
}

/// One route on the three Workers, sequential and at 32 connections (or at 32 only).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: &'static str,
    pub shapes: Vec<Rounds>,
    /// The events row: events a request carries (its events per second are this × req/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_per_request: Option<u64>,
}

/// Which of phase 7's rows run: all of them, or (`--phases events`) the report path's targets alone:
/// reports on one hand-off and the events batch, with the floor (a no-op on the same path) beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    All,
    ReportsAndEvents,
}

#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    /// Rounds per row and shape.
    pub rounds: usize,
    pub rows: Vec<Row>,
    /// The package row's check, one per reference: `[fetch, rpc]`.
    pub agreement: Vec<Agreement>,
    /// The events route's contract, asked of the three the same way: each answer's status,
    /// code and `next`, the same on all three (or the run stops).
    pub events_contract: Vec<String>,
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

/// Summaries of the reports of one (shape, round) are numbered from `offset(shape, round)`, so
/// that no report repeats an earlier one's summary: every report is a change.
fn offset(shape: usize, round: usize, rounds: usize) -> u64 {
    (shape * rounds + round) as u64 * 1_000_000_000
}

/// `sides`: this Worker, the reference over fetch, the reference over RPC. Every row and shape
/// is measured in `rounds` rounds, round r in the order `rounds::rotation(r, 3)`.
pub async fn run(
    sides: &[Options; 3],
    run_dir: &Path,
    key: &[u8],
    warmup: Duration,
    window: Duration,
    rounds: usize,
    which: Rows,
) -> Result<Peer, String> {
    let mut started = Vec::new();
    for (options, dir) in sides.iter().zip(["peer-rust", "peer-ts-fetch", "peer-ts-rpc"]) {
        started.push(side(options, &run_dir.join(dir), key).await?);
    }
    let agreement = check(&started).await?;
    let events_contract = events_contract(&started, key).await?;
    let shapes = [1, crate::CONNECTIONS];
    let mut routes: Vec<(&'static str, MakeRequest)> = vec![
        ("trivial route (GET /v1/health)", |_, _| Req::get("/v1/health", None)),
        ("floor (route, reach an object, answer)", |_, _| service::floor()),
        ("read one hand-off (owner)", |h, _| service::get(&h.one)),
        ("reports on one hand-off", |h, n| service::report(&h.one, n)),
        ("package + briefing (dry-run open, 8 KiB)", |h, _| service::preview(&h.package)),
    ];
    if which == Rows::ReportsAndEvents {
        // The floor beside them: a no-op on the same path, what crossing into WASM costs alone.
        routes.retain(|(name, _)| *name == "reports on one hand-off" || name.starts_with("floor"));
    }
    let mut rows = Vec::new();
    for (name, make) in routes {
        let mut row = Row { name, shapes: Vec::new(), events_per_request: None };
        for (i, connections) in shapes.into_iter().enumerate() {
            eprintln!("bench:   {name}, {connections} connection(s), {rounds} rounds");
            let shape = Shape { connections, warmup, window };
            let mut measured: [Vec<Throughput>; 3] = Default::default();
            for round in 0..rounds {
                let offset = offset(i, round, rounds);
                for w in rounds::rotation(round, started.len()) {
                    let s = &started[w];
                    let handoffs = s.handoffs.clone();
                    measured[w]
                        .push(load::run(&s.api, &s.server, shape, 200, move |n| make(&handoffs, offset + n)).await);
                }
            }
            row.shapes.push(Rounds::of(connections, measured));
        }
        rows.push(row);
    }
    rows.push(events_row(&started, key, warmup, window, rounds).await?);
    if which == Rows::ReportsAndEvents {
        return Ok(Peer { rounds, rows, agreement, events_contract });
    }
    // The spread row's hand-offs are made once per Worker, before its rounds (not timed).
    let name = "reports over 1,000 hand-offs, one owner";
    eprintln!("bench:   {name}, {} connections, {rounds} rounds", crate::CONNECTIONS);
    let mut spread = Vec::new();
    for s in &started {
        let owner = |_| "peer-spread-owner".to_string();
        spread.push(std::sync::Arc::new(
            service::create_many(&s.api, crate::SPREAD_HANDOFFS, crate::CONNECTIONS, "peer-spread", key, owner).await?,
        ));
    }
    let shape = Shape { connections: crate::CONNECTIONS, warmup, window };
    let mut measured: [Vec<Throughput>; 3] = Default::default();
    for round in 0..rounds {
        for w in rounds::rotation(round, started.len()) {
            let s = &started[w];
            measured[w]
                .push(crate::spread_load(&s.api, &s.server, shape, spread[w].clone(), offset(0, round, rounds)).await);
        }
    }
    rows.push(Row { name, shapes: vec![Rounds::of(crate::CONNECTIONS, measured)], events_per_request: None });
    Ok(Peer { rounds, rows, agreement, events_contract })
}

/// The events row: one writer (one connection, as one writer numbers a turn's events) sends
/// 32-event batches to one hand-off's turn 1 until the turn's cap, then to the next hand-off.
/// Each round writes through hand-offs of its own, made before the rounds (not timed) and read
/// once just before the round's measurement, so that no object is measured while it loads.
async fn events_row(
    started: &[Side],
    key: &[u8],
    warmup: Duration,
    window: Duration,
    rounds: usize,
) -> Result<Row, String> {
    let name = "events: a 32-event batch to one hand-off";
    let per_round = service::events_handoffs((warmup + window).as_secs_f64());
    eprintln!("bench:   {name}, 1 connection, {rounds} rounds ({per_round} hand-offs a round per Worker)");
    let mut made = Vec::new();
    for s in started {
        let owner = |_| "peer-events-owner".to_string();
        let all =
            service::create_many(&s.api, per_round * rounds, crate::CONNECTIONS, "peer-events", key, owner).await?;
        made.push(all);
    }
    let shape = Shape { connections: 1, warmup, window };
    let mut measured: [Vec<Throughput>; 3] = Default::default();
    for round in 0..rounds {
        for w in rounds::rotation(round, started.len()) {
            let s = &started[w];
            let handoffs: std::sync::Arc<[service::Handoff]> =
                made[w][round * per_round..(round + 1) * per_round].into();
            for h in handoffs.iter() {
                s.api.json(&service::get(h), &[200]).await?;
            }
            measured[w].push(load::run(&s.api, &s.server, shape, 200, move |n| service::events(&handoffs, n)).await);
        }
    }
    Ok(Row { name, shapes: vec![Rounds::of(1, measured)], events_per_request: Some(service::EVENTS_PER_BATCH) })
}

/// The events route's contract, asked of each Worker on a hand-off of its own: a batch, the
/// same again, other content for taken seqs, a gap, an owner's token, a batch of 65, a turn not
/// opened. Each answer as `status code next`; the three must answer alike.
async fn events_contract(sides: &[Side], key: &[u8]) -> Result<Vec<String>, String> {
    let mut answers: Vec<Vec<String>> = Vec::new();
    for s in sides {
        let owner = service::owner_token("peer-contract-owner", key);
        let h = service::create(&s.api, &owner, "peer-events-contract").await?;
        let path = format!("/v1/handoffs/{}/events", h.id);
        let batch = |body: Value| load::Req::post(path.clone(), h.machine_token.clone(), body.to_string());
        let first: Value = serde_json::from_str(&service::events_body(0)).map_err(|e| e.to_string())?;
        let mut other = first.clone();
        other["events"][0]["text"] = Value::from("Other words for seq 1.");
        let mut gap: Value = serde_json::from_str(&service::events_body(1)).map_err(|e| e.to_string())?;
        gap["events"] = Value::from(gap["events"].as_array().map(|e| e[7..].to_vec()).unwrap_or_default());
        let mut too_many = first.clone();
        let sixty_five = (1..=65).map(|seq| serde_json::json!({"seq": seq, "kind": "note", "text": "n"})).collect();
        too_many["events"] = Value::Array(sixty_five);
        let mut turn_two = first.clone();
        turn_two["turn"] = Value::from(2);
        let asks = [
            batch(first.clone()),
            batch(first.clone()),
            batch(other),
            batch(gap),
            load::Req::post(path.clone(), owner.clone(), first.to_string()),
            batch(too_many),
            batch(turn_two),
        ];
        let mut side = Vec::new();
        for ask in &asks {
            let (status, body) = s.api.send(ask).await?;
            let v: Value = serde_json::from_str(&body).unwrap_or_default();
            side.push(format!("{status} {} next {}", v["error"]["code"].as_str().unwrap_or("-"), v["next"]));
        }
        answers.push(side);
    }
    for (hops, theirs) in ["fetch", "rpc"].iter().zip(&answers[1..]) {
        if *theirs != answers[0] {
            return Err(format!(
                "the reference over {hops} answers the events route otherwise: ours {:?}, theirs {theirs:?}",
                answers[0]
            ));
        }
    }
    Ok(answers.swap_remove(0))
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
        serde_json::from_value(answer["package"].clone())
            .map_err(|e| format!("{whose} package does not read as handoff-core's: {e}"))
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
        document: Default::default(),
    };
    let briefing::Briefing { text: rendered, left_out, .. } =
        briefing::render(&latest, service::PREVIEW_BUDGET_BYTES, &Reach::api(base_url));
    let briefing_differs_at = (rendered != text).then(|| {
        rendered.bytes().zip(text.bytes()).position(|(a, b)| a != b).unwrap_or(rendered.len().min(text.len()))
    });
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

/// The median of one figure of a Worker over the rounds (0 with no rounds).
fn median_of(t: &[Throughput], figure: fn(&Throughput) -> f64) -> f64 {
    rounds::median(&t.iter().map(figure).collect::<Vec<f64>>()).unwrap_or(0.0)
}

/// ` 1.23 0.98–1.40 rpc  `: ours over the reference named, the median of the rounds' ratios,
/// their lowest–highest, and the reference.
fn against(v: &Versus) -> String {
    match v.ratio {
        Some(r) => format!("{:>5.2} {:>9} {:<5}", r.median, rounds::range(r), v.reference),
        None => format!("{:>5} {:>9} {:<5}", "-", "", v.reference),
    }
}

/// The rows, each shape with the three Workers' medians over the rounds and this Worker's over
/// the better reference's, with the range of the rounds' ratios.
pub fn table(p: &Peer) -> String {
    let mut out = format!(
        "7 beside the TypeScript reference (bench/reference/), its hops over fetch and over RPC, each on a workerd of its own; every row\n\
         \x20 measured in {} rounds, the three in rotated order (round 0: ours, fetch, rpc; 1: fetch, rpc, ours; 2: rpc, ours, fetch; …)\n\
         \x20 req/s: throughput; µs: workerd's CPU per request (all its threads, from schedstat); each the Worker's median over the rounds\n\
         \x20 vs: the reference compared against, the one whose median is the better (throughput: the higher; CPU: the lower)\n\
         \x20 ×best: the median over the rounds of ours ÷ vs's, the two as measured in the same round (throughput: above 1 is faster;\n\
         \x20 CPU: below 1 is cheaper); min–max: the lowest and highest of those per-round ratios (wide: the order or the machine moved it)\n\
         \x20 {:<42} {:>5} | {:>6} {:>6} {:>6}  {} | {:>7} {:>8} {:>6}  {}\n",
        p.rounds,
        "",
        "conns",
        "ours",
        "fetch",
        "rpc",
        format_args!("{:>5} {:>9} {:<5}", "×best", "min–max", "vs"),
        "ours µs",
        "fetch µs",
        "rpc µs",
        format_args!("{:>5} {:>9} {:<5}", "×best", "min–max", "vs"),
    );
    let rps: fn(&Throughput) -> f64 = |t| t.requests_per_s;
    let cpu: fn(&Throughput) -> f64 = |t| t.workerd_cpu_us_per_request;
    for row in &p.rows {
        for s in &row.shapes {
            out.push_str(&format!(
                "  {:<42} {:>5} | {:>6.0} {:>6.0} {:>6.0}  {} | {:>7.0} {:>8.0} {:>6.0}  {}\n",
                row.name,
                s.connections,
                median_of(&s.ours, rps),
                median_of(&s.fetch, rps),
                median_of(&s.rpc, rps),
                against(&s.throughput),
                median_of(&s.ours, cpu),
                median_of(&s.fetch, cpu),
                median_of(&s.rpc, cpu),
                against(&s.cpu),
            ));
        }
    }
    for row in p.rows.iter().filter_map(|r| r.events_per_request.map(|e| (r, e as f64))) {
        for s in &row.0.shapes {
            let events = |t: &[Throughput]| median_of(t, |t| t.requests_per_s) * row.1;
            out.push_str(&format!(
                "  {:<42} {:>5} | {:>6.0} {:>6.0} {:>6.0}  events/s one hand-off took ({} × req/s, the medians)\n",
                "  the same, in events per second",
                s.connections,
                events(&s.ours),
                events(&s.fetch),
                events(&s.rpc),
                row.1,
            ));
        }
    }
    let errors: u64 = p.rows.iter().flat_map(|r| &r.shapes).flat_map(Rounds::all).map(|t| t.errors).sum();
    out.push_str(&format!("  errors (non-200 or failed requests) over this phase: {errors}; each round's figures: the results file (peer.rows)\n"));
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
    if !p.events_contract.is_empty() {
        out.push_str(&format!(
            "  events route, the three alike (batch, repeat, other content, gap, owner, 65 events, turn 2): {}\n",
            p.events_contract.join("; ")
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
        let latest = Latest {
            package_version: 1,
            package_hash: hash.clone(),
            state: OfferState::Offered,
            rejection: None,
            package: p,
            document: Default::default(),
        };
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
        let theirs =
            json!({"package_version": 1, "package_hash": package_hash(&p), "package": other_statement, "briefing": ""});
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

    fn measured(rps: f64, cpu_us: f64) -> Throughput {
        let mut t = Throughput::of(1, vec![1_000; rps as usize], 0, Duration::from_secs(1), rps as u64);
        t.workerd_cpu_us_per_request = cpu_us;
        t
    }

    #[test]
    fn each_round_names_its_order_and_the_ratios_are_of_the_rounds() {
        let ours = vec![measured(120.0, 300.0), measured(90.0, 300.0), measured(100.0, 300.0)];
        let fetch = vec![measured(80.0, 400.0), measured(200.0, 400.0), measured(60.0, 400.0)];
        let rpc = vec![measured(100.0, 600.0), measured(100.0, 200.0), measured(100.0, 700.0)];
        let r = Rounds::of(32, [ours, fetch, rpc]);
        assert_eq!(r.order, [["ours", "fetch", "rpc"], ["fetch", "rpc", "ours"], ["rpc", "ours", "fetch"]]);
        assert_eq!((r.throughput.reference, r.throughput.per_round.clone()), ("rpc", vec![1.2, 0.9, 1.0]));
        assert_eq!((r.cpu.reference, r.cpu.per_round.clone()), ("fetch", vec![0.75, 0.75, 0.75]));
        let p = Peer {
            rounds: 3,
            rows: vec![Row { name: "floor", shapes: vec![r], events_per_request: None }],
            agreement: Vec::new(),
            events_contract: Vec::new(),
        };
        let t = table(&p);
        assert!(t.contains("100   1.00 0.90–1.20 rpc   |"), "{t}");
        assert!(t.contains("  0.75 0.75–0.75 fetch\n"), "{t}");
        assert!(t.contains("in 3 rounds"), "{t}");
        // The medians: ours 100 req/s, fetch 80, rpc 100; CPU 300, 400, 600.
        assert!(t.contains("|    100     80    100"), "{t}");
        assert!(t.contains("|     300      400    600"), "{t}");
    }

    #[test]
    fn no_two_shapes_or_rounds_number_their_reports_alike() {
        let rounds = 3;
        let mut starts: Vec<u64> =
            (0..2).flat_map(|shape| (0..rounds).map(move |round| offset(shape, round, rounds))).collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), 6);
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= 1_000_000_000), "room for a billion reports each: {starts:?}");
    }
}
