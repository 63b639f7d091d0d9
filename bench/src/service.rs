//! The hand-off API as the bench uses it: tokens signed like the service's, creating
//! hand-offs, and the requests each phase repeats.

use crate::load::{Api, Req};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Owner tokens the bench mints live this long: longer than any run.
const TOKEN_TTL_S: i64 = 3600;

pub fn now_s() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs() as i64
}

pub fn owner_token(owner: &str, key: &[u8]) -> Arc<str> {
    handoff_api::token::owner_token(owner, TOKEN_TTL_S, key, now_s()).into()
}

/// A hand-off the bench created: its id and the machine token its create answer carried.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub id: Arc<str>,
    pub owner_token: Arc<str>,
    pub machine_token: Arc<str>,
}

/// Creates the hand-off of `session` (201 the first time; 200 for a session that has one).
pub async fn create(api: &Api, owner_token: &Arc<str>, session: &str) -> Result<Handoff, String> {
    let body = json!({"session": session, "machine": "bench-machine", "size": "large"}).to_string();
    let answer = api.json(&Req::post("/v1/handoffs", owner_token.clone(), body), &[200, 201]).await?;
    let id = answer["handoff"]["id"].as_str().ok_or("create: no id")?;
    let machine = answer["machine_token"].as_str().ok_or("create: no machine token")?;
    Ok(Handoff { id: id.into(), owner_token: owner_token.clone(), machine_token: machine.into() })
}

/// Creates `count` hand-offs with up to `connections` creates in flight; `owner_of(i)` names
/// the owner of the i-th (the same owner for all, or one owner each).
pub async fn create_many(
    api: &Api,
    count: usize,
    connections: usize,
    prefix: &str,
    key: &[u8],
    owner_of: impl Fn(usize) -> String,
) -> Result<Vec<Handoff>, String> {
    let tokens: Vec<Arc<str>> = (0..count).map(|i| owner_token(&owner_of(i), key)).collect();
    let next = Arc::new(AtomicU64::new(0));
    let tokens = Arc::new(tokens);
    let mut tasks = Vec::new();
    for _ in 0..connections.min(count) {
        let (api, next, tokens, prefix) = (api.clone(), next.clone(), tokens.clone(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= tokens.len() {
                    return Ok::<_, String>(made);
                }
                made.push((i, create(&api, &tokens[i], &format!("{prefix}-{i}")).await?));
            }
        }));
    }
    let mut all = Vec::with_capacity(count);
    for task in tasks {
        all.extend(task.await.map_err(|e| e.to_string())??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, h)| h).collect())
}

/// The machine's report on turn 1 with the summary numbered `n`: a real change every time,
/// since no two reports carry the same summary (the version moves, the record is written,
/// the owner's index is sent its row and waiters are woken).
pub fn report(handoff: &Handoff, n: u64) -> Req {
    let body =
        json!({"turn": 1, "status": "running", "summary": format!("bench: step {n} of the turn is done")}).to_string();
    Req::post(format!("/v1/handoffs/{}/report", handoff.id), handoff.machine_token.clone(), body)
}

/// The owner reads the hand-off: authentication and a Durable Object round trip, no storage
/// (the object keeps the record in memory once read).
pub fn get(handoff: &Handoff) -> Req {
    Req::get(format!("/v1/handoffs/{}", handoff.id), Some(handoff.owner_token.clone()))
}

/// A wait for any version above `after`, held for up to `timeout_s`.
pub fn wait(handoff: &Handoff, after: u64, timeout_s: u64) -> Req {
    Req::get(
        format!("/v1/handoffs/{}/wait?after={after}&timeout={timeout_s}", handoff.id),
        Some(handoff.owner_token.clone()),
    )
}

pub fn floor() -> Req {
    Req::get("/v1/bench/floor", None)
}

/// The package row's work record: standing decisions, artifact titles and workspace paths, as
/// many as a package keeps of each (core/src/limits.rs `PACKAGE_*_MAX`), so that the compiler
/// leaves nothing out; its briefing (about 7.9 KB) keeps the decisions and gives up the
/// relevant files, the milestones and the artifacts to fit 8 KiB.
pub const PACKAGE_DECISIONS: usize = 20;
pub const PACKAGE_ARTIFACTS: usize = 20;
pub const PACKAGE_FILES: usize = 100;
/// The briefing's budget in the package row: the service's default.
pub const PREVIEW_BUDGET_BYTES: usize = 8 * 1024;

/// Creates `session`'s hand-off and gives it the package row's work record: the work, the
/// decisions and artifacts (by the machine), the workspace, and a final report of turn 1 that
/// leaves one criterion unmet, so that turn 2 may be opened (and previewed).
pub async fn create_with_work(api: &Api, owner_token: &Arc<str>, session: &str) -> Result<Handoff, String> {
    let h = create(api, owner_token, session).await?;
    let path = |leaf: &str| format!("/v1/handoffs/{}/{leaf}", h.id);
    let work = json!({
        "title": "Move invoicing onto the ledger service",
        "goal": "Invoices are written by the ledger service instead of the monolith's billing tables.\n\
                 Every invoice the old path wrote stays readable, and the totals of both paths match to the cent \
                 for a whole billing cycle before the old path is switched off.",
        "task_type": "migration",
        "priority": "high",
        "constraints": [
            "No downtime: every step ships behind the ledger_writes flag and can be turned off per tenant.",
            "The public invoice API keeps its shape; new fields are additive.",
            "No customer data leaves the EU region.",
            "Migrations run online, in batches of at most 10,000 rows.",
            "The old tables stay writable until the reconciliation job has passed for a full cycle.",
        ],
        "acceptance_criteria": [
            "Every invoice created while the flag is on is written by the ledger service.",
            "The reconciliation job reports no difference over a full billing cycle.",
            "p99 latency of POST /invoices stays under 250 ms.",
            "The runbook describes turning the flag off and back on.",
            "The old write path is deleted behind a final flag.",
            "Dashboards show ledger and monolith totals side by side.",
        ],
    });
    api.json(&Req::put(path("work"), owner_token.clone(), work.to_string()), &[200]).await?;
    let areas = ["invoice", "credit note", "tax line", "refund", "payout"];
    for i in 1..=PACKAGE_DECISIONS {
        let area = areas[i % areas.len()];
        let decision = json!({
            "statement": format!("Step {i}: {area} writes go through the ledger client, behind the flag."),
            "rationale": format!("Ships dark per tenant; the old {area} path is the fallback until reconciliation passes."),
            "evidence": [format!("https://git.example.test/billing/pull/{}", 4100 + i), format!("docs/adr/{i:04}-ledger-step-{i}.md")],
        });
        api.json(&Req::post(path("decisions"), h.machine_token.clone(), decision.to_string()), &[200]).await?;
    }
    let kinds = ["pull_request", "ci_run", "document", "dataset"];
    for i in 1..=PACKAGE_ARTIFACTS {
        let mut artifact = json!({
            "type": kinds[i % kinds.len()],
            "title": format!("Ledger migration step {i}"),
            "uri": format!("https://ci.example.test/billing/runs/{}", 88_000 + i),
        });
        if i % 2 == 0 {
            artifact["sha256"] = json!(format!("{:016x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).repeat(4));
        }
        api.json(&Req::post(path("artifacts"), h.machine_token.clone(), artifact.to_string()), &[200]).await?;
    }
    let modules = ["ledger", "invoice", "tax", "export", "api"];
    let files: Vec<_> = (0..PACKAGE_FILES)
        .map(|i| json!({"path": format!("services/billing/src/{}/part_{i:03}.rs", modules[i % modules.len()]), "insertions": (i * 37) % 211, "deletions": (i * 11) % 53}))
        .collect();
    api.json(&Req::post(path("workspace"), h.machine_token.clone(), json!({"files": files}).to_string()), &[200])
        .await?;
    let done = json!({"turn": 1, "status": "done", "summary": "Steps 1-20 are merged behind the flag; the old path is not deleted yet.", "unmet": [4]});
    api.json(&Req::post(path("report"), h.machine_token.clone(), done.to_string()), &[200]).await?;
    Ok(h)
}

/// The owner's dry run of handing turn 2 to another runtime: the package that open would
/// compile (and its hash) and its briefing at [`PREVIEW_BUDGET_BYTES`], written nowhere.
pub fn preview(handoff: &Handoff) -> Req {
    let body = json!({"after": 1, "handoff": {
        "runtime": "codex",
        "objective": "Delete the old invoice write path and its tables' writers, behind the final flag.",
        "purpose": "The session's context is nearly full; a fresh runtime takes the last step.",
        "note": "Criterion 4 is the one left: keep the old tables readable.",
    }});
    Req::post(
        format!("/v1/handoffs/{}/turns?dry_run=true&budget={PREVIEW_BUDGET_BYTES}", handoff.id),
        handoff.owner_token.clone(),
        body.to_string(),
    )
}

/// The events row's batch: events per `POST …/events`.
pub const EVENTS_PER_BATCH: u64 = 32;
/// Batches one turn takes before its cap (`TIMELINE_EVENTS_PER_TURN_MAX`, 2,000 events): 62
/// batches of 32, 1,984 events. The row then goes on to the next hand-off.
pub const BATCHES_PER_TURN: u64 = handoff_core::limits::TIMELINE_EVENTS_PER_TURN_MAX / EVENTS_PER_BATCH;
/// The most batches a second the events row provides hand-offs for (sequential: one writer);
/// past them it writes into a full turn, and each request counts as an error.
pub const EVENTS_BATCHES_PER_S_MAX: f64 = 1_500.0;

/// Hand-offs one measurement of the events row writes through, over `seconds` of warm-up and window.
pub fn events_handoffs(seconds: f64) -> usize {
    (seconds * EVENTS_BATCHES_PER_S_MAX / BATCHES_PER_TURN as f64).ceil() as usize
}

/// The `k`-th batch of turn 1 (from 0): seqs `32k + 1` to `32k + 32`, what a served turn of
/// Claude Code sends: the model's words, a tool's start with its command, its end with its
/// output clipped, and now and then a note. About 190 bytes an event stored, so the turn's
/// 1,984 events stay well under its 1 MiB.
pub fn events_body(k: u64) -> String {
    let events: Vec<serde_json::Value> = (0..EVENTS_PER_BATCH)
        .map(|i| {
            let seq = k * EVENTS_PER_BATCH + i + 1;
            let call = format!("toolu_{k}_{}", i / 4);
            match i % 4 {
                0 => json!({"seq": seq, "kind": "message", "text": format!("Step {seq}: the ledger client now writes credit notes; running the tests next.")}),
                1 => json!({"seq": seq, "kind": "tool", "id": call, "name": "Bash", "state": "started", "input": "cargo test -p ledger --lib -- credit_note"}),
                2 => json!({"seq": seq, "kind": "tool", "id": call, "name": "Bash", "state": "done", "output": "running 12 tests\ntest credit_note::writes ... ok\ntest result: ok. 12 passed", "output_bytes": 1840, "duration_ms": 4210}),
                _ => json!({"seq": seq, "kind": "note", "text": format!("batch {k}, event {i}: resumed after a network cut")}),
            }
        })
        .collect();
    json!({"turn": 1, "events": events}).to_string()
}

/// The events row's `n`-th batch over `handoffs`, each taking [`BATCHES_PER_TURN`] batches in
/// order before the next. Past the last one's, the batches go on into its full turn (409).
pub fn events(handoffs: &[Handoff], n: u64) -> Req {
    let at = ((n / BATCHES_PER_TURN) as usize).min(handoffs.len() - 1);
    let handoff = &handoffs[at];
    let k = n - at as u64 * BATCHES_PER_TURN;
    Req::post(format!("/v1/handoffs/{}/events", handoff.id), handoff.machine_token.clone(), events_body(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::json::Checked;
    use handoff_core::limits::{
        TIMELINE_BODY_BYTES_MAX, TIMELINE_BYTES_PER_TURN_MAX, TIMELINE_EVENTS_PER_REQUEST_MAX,
        TIMELINE_EVENTS_PER_TURN_MAX,
    };
    use handoff_core::timeline::{self, Batch, TurnFacts};

    fn handoff(id: &str) -> Handoff {
        Handoff { id: id.into(), owner_token: "o".into(), machine_token: "m".into() }
    }

    #[test]
    fn a_turns_batches_are_all_taken_in_order_and_its_next_batch_is_full() {
        let mut facts = TurnFacts::default();
        for k in 0..BATCHES_PER_TURN {
            let body = events_body(k);
            assert!(body.len() <= TIMELINE_BODY_BYTES_MAX);
            let batch: Batch = serde_json::from_str::<Batch>(&body).unwrap().checked().unwrap();
            assert_eq!(batch.events.len() as u64, EVENTS_PER_BATCH);
            assert!(batch.events.len() <= TIMELINE_EVENTS_PER_REQUEST_MAX);
            let taken = timeline::take(&batch, 1, &facts, &[]).unwrap();
            assert_eq!(taken.new.len() as u64, EVENTS_PER_BATCH, "batch {k} adds all its events");
            facts = taken.facts;
        }
        assert!(facts.events <= TIMELINE_EVENTS_PER_TURN_MAX && facts.bytes <= TIMELINE_BYTES_PER_TURN_MAX as u64);
        let past: Batch = serde_json::from_str(&events_body(BATCHES_PER_TURN)).unwrap();
        assert!(timeline::take(&past, 1, &facts, &[]).is_err(), "the turn has no room for one more batch");
    }

    #[test]
    fn each_handoff_takes_its_turns_batches_then_the_next_one_starts_at_seq_1() {
        let hs = [handoff("a"), handoff("b")];
        let seqs = |r: &Req| {
            let b: Batch = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
            (b.events[0].seq, b.events[b.events.len() - 1].seq)
        };
        assert_eq!((events(&hs, 0).path.as_str(), seqs(&events(&hs, 0))), ("/v1/handoffs/a/events", (1, 32)));
        let last = events(&hs, BATCHES_PER_TURN - 1);
        assert_eq!((last.path.as_str(), seqs(&last)), ("/v1/handoffs/a/events", (1953, 1984)));
        let next = events(&hs, BATCHES_PER_TURN);
        assert_eq!((next.path.as_str(), seqs(&next)), ("/v1/handoffs/b/events", (1, 32)));
        let past = events(&hs, 2 * BATCHES_PER_TURN);
        assert_eq!(
            (past.path.as_str(), seqs(&past).0),
            ("/v1/handoffs/b/events", 1985),
            "past the supply: a full turn"
        );
        assert_eq!(events_handoffs(4.0), 97);
    }
}
