//! The decider driven with no runtime at all: a [`Db`] stands in for the object's SQLite (it
//! applies each plan's writes and answers the reads the decider asks for), and [`TestWire`]
//! for the HTTP contract. Each rule the object used to carry out itself has a test here.

use super::*;
use crate::fixtures;
use crate::handoff::Change;
use crate::idempotency::KeyEntry;
use crate::limits::{
    EVENTS_PER_HANDOFF_MAX, IDEMPOTENCY_KEYS_PER_HANDOFF_MAX, IDEMPOTENCY_TTL_MS, OUTBOX_SAFETY_ALARM_MS,
    RATIONALE_BYTES_MAX, STATEMENT_BYTES_MAX,
};
use crate::package::PackageRequest;
use crate::turn::{Command, ReportStatus};
use crate::work::{self, DecisionInput, WorkInput};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const T0: EpochMs = 1_796_040_000_000;
/// The hand-off these tests create, and the one a machine token here is minted for.
const ID: &str = "ho_1";

/// The HTTP contract as these tests need it: a refusal's code, a change's version.
struct TestWire;

impl Wire for TestWire {
    fn render(&self, answer: HandoffAnswer<'_>) -> Rendered {
        let (status, body) = match answer {
            HandoffAnswer::Record { h, .. } => (200, json!({"version": h.record.version})),
            HandoffAnswer::Created { h, new, machine_token, .. } => (if new { 201 } else { 200 }, {
                let mut body = serde_json::to_value(&h.record).unwrap();
                body["token"] = json!(machine_token);
                if let Some(token) = machine_token {
                    body["machine_token"] = json!(token);
                }
                body
            }),
            HandoffAnswer::Changed { h, effect, .. } => {
                let package = match effect {
                    Effect::Compiled(c) => Some(serde_json::to_value(&c.package).unwrap()),
                    _ => None,
                };
                (200, json!({"version": h.record.version, "package": package, "prompt": h.record.prompt}))
            }
            HandoffAnswer::Refused { refusal, handoff, .. } => {
                let status = match refusal.code {
                    Code::AuthForbidden => 403,
                    Code::AuthRevoked => 401,
                    Code::HandoffNotFound => 404,
                    Code::RequestTooLarge => 413,
                    Code::IdempotencyMismatch => 422,
                    Code::WaitTooMany | Code::WatchTooMany => 429,
                    Code::StoreUnavailable => 503,
                    _ => 409,
                };
                (
                    status,
                    json!({"code": refusal.code.as_str(), "version": handoff.map(|(h, _)| h.record.version), "prompt": handoff.and_then(|(h, _)| h.record.prompt.clone())}),
                )
            }
            HandoffAnswer::Turns { turns, next_before, .. } => {
                (200, json!({"turns": turns.iter().map(|t| t.turn).collect::<Vec<_>>(), "next": next_before}))
            }
            HandoffAnswer::Erased => (204, json!({})),
            HandoffAnswer::TimelineTaken { turn, next } => (200, json!({"turn": turn, "next": next})),
            HandoffAnswer::TimelineRefused { refusal, next, .. } => {
                let status = match refusal.code {
                    Code::AuthForbidden => 403,
                    Code::RequestInvalid => 400,
                    _ => 409,
                };
                (status, json!({"code": refusal.code.as_str(), "message": refusal.message, "next": next}))
            }
            HandoffAnswer::Timeline { turn, events, next, dropped } => (
                200,
                json!({"turn": turn, "seqs": events.iter().map(|e| e.seq).collect::<Vec<_>>(), "next": next, "dropped": dropped}),
            ),
            HandoffAnswer::TooManyOpen(t) => {
                (429, json!({"code": "owner.too_many_open", "open": t.open, "cap": t.cap}))
            }
            _ => (200, json!({})),
        };
        Rendered { status, content_type: JSON, body: body.to_string(), replayed: false }
    }

    fn without_package(&self, answer: HandoffAnswer<'_>) -> Option<String> {
        let mut body: Value = serde_json::from_str(&self.render(answer).body).ok()?;
        body.as_object_mut()?.remove("package")?;
        Some(body.to_string())
    }

    fn with_package(&self, slim: &str, document: &Document) -> Option<String> {
        let mut body: Value = serde_json::from_str(slim).ok()?;
        body.as_object_mut()?.insert("package".into(), serde_json::from_str(document.json()).ok()?);
        Some(body.to_string())
    }
}

/// The object's tables, in memory: what each plan's writes leave.
#[derive(Debug, Clone, Default)]
struct Db {
    schema: bool,
    record: Option<String>,
    parts: BTreeMap<&'static str, String>,
    turns: BTreeMap<u64, String>,
    events: BTreeMap<u64, EventKind>,
    keys: BTreeMap<String, (Remembered, EpochMs, usize)>,
    attempts: Option<(u64, u32)>,
    entered: bool,
    passed: BTreeMap<u64, String>,
    machine_tokens_from: u64,
    /// The turns' timeline: `(turn, seq)` to `(at, json)`, and each turn's facts.
    timeline: BTreeMap<(u64, u64), (EpochMs, String)>,
    timeline_turns: BTreeMap<u64, TurnFacts>,
}

impl Db {
    fn apply(&mut self, writes: &[Write]) {
        for w in writes {
            let stored_value = match w {
                Write::Record { json: v, .. } | Write::Part { json: v, .. } | Write::Turn { entry: v, .. } => {
                    Some(v.len())
                }
                Write::Remember { remembered, .. } => Some(remembered.body.len()),
                _ => None,
            };
            assert!(
                stored_value.is_none_or(|n| n <= STORED_VALUE_BYTES_MAX),
                "a value over the cap reached the store: {w:?}"
            );
            match w {
                Write::Schema => self.schema = true,
                Write::Record { json, entered } => {
                    self.record = Some(json.clone());
                    self.entered = *entered;
                }
                Write::Part { name, json } => {
                    self.parts.insert(name.as_str(), json.clone());
                }
                Write::Turn { turn, entry } => {
                    self.turns.insert(*turn, entry.clone());
                }
                Write::TrimTurns { through } => self.turns.retain(|t, _| t > through),
                Write::Event { version, kind, .. } => {
                    assert!(self.events.insert(*version, *kind).is_none(), "one event per version");
                }
                Write::TrimEvents { through } => self.events.retain(|v, _| v > through),
                Write::Remember { key, remembered, at, bytes } => {
                    self.keys.insert(key.clone(), (remembered.clone(), *at, *bytes));
                }
                Write::ForgetExpired { before } => self.keys.retain(|_, (_, at, _)| *at >= *before),
                Write::Forget { key } => {
                    self.keys.remove(key);
                }
                Write::Attempts { version, attempts, .. } => self.attempts = Some((*version, *attempts)),
                Write::Pass { version, row } => {
                    self.passed.insert(*version, row.clone());
                }
                Write::Unpass { through } => self.passed.retain(|v, _| v > through),
                Write::MachineTokensFrom { from } => self.machine_tokens_from = *from,
                Write::TimelineEvents { turn, at, events } => {
                    for (seq, json) in events {
                        let fresh = self.timeline.insert((*turn, *seq), (*at, json.clone())).is_none();
                        assert!(fresh, "an event is written once");
                    }
                }
                Write::TimelineTurn { turn, facts } => {
                    self.timeline_turns.insert(*turn, *facts);
                }
                Write::TrimTimeline { through } => {
                    self.timeline.retain(|(turn, _), _| turn > through);
                    for (_, facts) in self.timeline_turns.range_mut(..=*through) {
                        facts.dropped = true;
                    }
                }
            }
        }
    }

    fn stored(&self, lineage: usize) -> Option<Stored> {
        let record = self.record.clone()?;
        assert!(self.schema, "a record is never stored without the schema");
        Some(Stored {
            record,
            parts: self.parts.iter().map(|(n, j)| (n.to_string(), j.clone())).collect(),
            turns: self.turns.values().rev().take(lineage).cloned().collect(),
            attempts: self.attempts,
            entered: self.entered,
            passed: self.passed.iter().map(|(v, r)| (*v, r.clone())).collect(),
            machine_tokens_from: self.machine_tokens_from,
        })
    }
}

/// One object: a decider over a [`Db`], carried out as the Worker carries out its plans.
struct Driver {
    decider: Decider,
    db: Db,
    now: EpochMs,
    /// The index accepts deliveries.
    index_up: bool,
    /// Every version a waiter or socket was told, in order.
    woken: Vec<u64>,
    /// What the machine reported its runtimes reach ([`Read::Reach`]): `None`, not enrolled.
    reach: Option<Vec<String>>,
}

impl Driver {
    fn new() -> Driver {
        Driver {
            decider: Decider::new(Caps::default()),
            db: Db::default(),
            now: T0,
            index_up: true,
            woken: Vec::new(),
            reach: None,
        }
    }

    /// The object evicted and started again: a new decider over the same storage.
    fn restart(&mut self) {
        self.decider = Decider::new(Caps::default());
    }

    /// Reads what the decider asks for, then plans.
    fn plan(&mut self, ask: Ask) -> Plan {
        let mut feed = Feed::default();
        let mut reads = 0;
        while let Some(read) = self.decider.next_read(&ask, &feed, self.now) {
            reads += 1;
            assert!(reads < 8, "the decider keeps asking for {read:?}");
            match read {
                Read::Handoff { lineage } => self.decider.restore(self.db.stored(lineage)).expect("readable"),
                Read::Keys => self.decider.restore_keys(
                    self.db
                        .keys
                        .iter()
                        .map(|(k, (_, at, bytes))| KeyEntry { key: k.clone(), at: *at, bytes: *bytes })
                        .collect(),
                ),
                Read::Key { key, since } => {
                    feed.key = Some(self.db.keys.get(&key).filter(|(_, at, _)| *at >= since).map(|(r, _, _)| r.clone()))
                }
                Read::Turns { before, limit } => {
                    feed.turns =
                        Some(self.db.turns.range(..before as u64).rev().take(limit).map(|(_, e)| e.clone()).collect())
                }
                Read::Sockets(_) => feed.sockets = Some(0),
                Read::Storage => feed.storage = Some(StorageFacts::default()),
                Read::Admission { .. } => feed.admission = Some(crate::rows::Admission::Yes),
                Read::Reach { .. } => feed.reach = Some(self.reach.clone()),
                Read::Timeline { turn, after, limit } => {
                    let events = self
                        .db
                        .timeline
                        .range((turn, after + 1)..=(turn, u64::MAX))
                        .take(limit)
                        .map(|((_, seq), (at, json))| (*seq, *at, json.clone()))
                        .collect();
                    let facts = self.db.timeline_turns.get(&turn).copied().unwrap_or_default();
                    feed.timeline = Some(TimelineRead { facts, events });
                }
            }
        }
        let _ = self.decider.take_catch_up();
        self.decider.handle(ask, feed, Moment { now: self.now, random: 0.5 }, &TestWire)
    }

    /// Plans `ask` and carries the plan out; answers the plan and what the caller is told.
    fn ask(&mut self, ask: Ask) -> (Plan, Value, u16) {
        let plan = self.plan(ask);
        self.db.apply(&plan.writes);
        if let Some(version) = plan.publish {
            if let Some(wake) = self.decider.confirm(version) {
                self.woken.push(wake.handoff.record.version);
            }
        }
        if let Some(version) = plan.send_rows_through {
            while !self.decider.is_taken(version) {
                let Some(send) = self.decider.poll_row_send() else { break };
                let sent = self.decider.on_row_sent(send.version, self.index_up, self.now);
                if let Some(w) = sent.write {
                    self.db.apply(&[w]);
                }
            }
        }
        if plan.erase {
            self.db = Db::default();
            self.decider.erased();
        }
        let (body, status) = match &plan.reply {
            Reply::Rendered(r) => (serde_json::from_str(&r.body).unwrap_or(Value::Null), r.status),
            Reply::Record { .. } => (json!({"version": self.decider.handoff().map(|h| h.record.version)}), 200),
            Reply::Hold { .. } | Reply::HoldTimeline { .. } | Reply::Watch { .. } => (Value::Null, 200),
        };
        self.now += 1_000;
        (plan, body, status)
    }

    fn version(&self) -> u64 {
        self.decider.handoff().map_or(0, |h| h.record.version)
    }

    /// The version storage holds: the truth, whatever the decider has read of it.
    fn stored_version(&self) -> u64 {
        self.db.record.as_deref().map_or(0, |r| serde_json::from_str::<Record>(r).unwrap().version)
    }
}

fn owner() -> Caller {
    Caller { owner: "alice".into(), role: Role::Owner, incarnation: 0, hid: None }
}

fn machine() -> Caller {
    // A token minted after the create: any life of the hand-off up to now accepts it.
    Caller { owner: "alice".into(), role: Role::Machine, incarnation: u64::MAX, hid: Some(ID.into()) }
}

fn ask(caller: Caller, op: Op) -> Ask {
    Ask { caller, op, idempotency: None }
}

fn keyed(caller: Caller, op: Op, key: &str, fingerprint: &str) -> Ask {
    Ask { caller, op, idempotency: Some(Idempotency { key: key.into(), fingerprint: fingerprint.into() }) }
}

fn create() -> Op {
    creating("m1", 0, None, Placement::default())
}

/// The owner's create of `ID` for `machine`, in the hand-off's life `incarnation`.
fn creating(machine: &str, incarnation: u64, prompt: Option<&str>, placement: Placement) -> Op {
    Op::Create {
        id: ID.into(),
        session: "s1".into(),
        machine: machine.into(),
        size: "large".into(),
        machine_token: "t".into(),
        incarnation,
        prompt: prompt.map(str::to_string),
        placement,
    }
}

fn change(change: Change) -> Op {
    Op::Change { change }
}

fn report(turn: u64, status: ReportStatus, summary: &str) -> Op {
    change(fixtures::report(turn, status).says(summary).change())
}

/// A needs-you report asking the owner a permission question.
fn report_asking(turn: u64) -> Op {
    change(fixtures::report(turn, ReportStatus::NeedsYou).question(fixtures::permission("Run ls?")).change())
}

fn set_work() -> Op {
    let input = WorkInput {
        title: "t".into(),
        goal: "g".into(),
        task_type: None,
        priority: None,
        constraints: vec![],
        acceptance_criteria: vec![],
    };
    change(Change::Work { command: work::Command::SetWork(input) })
}

fn compile(dry_run: bool) -> Op {
    let request =
        PackageRequest { objective: "o".into(), purpose: "p".into(), runtime: "codex".into(), note: None, model: None };
    change(Change::Compile { request, dry_run })
}

fn created() -> Driver {
    let mut d = Driver::new();
    let (plan, _, status) = d.ask(ask(owner(), create()));
    assert_eq!(status, 201);
    assert_eq!(plan.writes.first(), Some(&Write::Schema), "the schema comes with the create's own writes");
    d
}

#[test]
fn a_create_writes_the_schema_record_lineage_and_event_in_one_plan_and_a_second_answers_the_same_hand_off() {
    let mut d = created();
    assert_eq!((d.version(), d.db.events.get(&1)), (1, Some(&EventKind::Create)));
    assert!(
        d.db.record.is_some() && d.db.turns.contains_key(&1),
        "the create writes the record and turn 1's lineage entry"
    );
    let (plan, body, status) = d.ask(ask(owner(), create()));
    assert_eq!((status, plan.writes.len(), body["version"].as_u64()), (200, 0, Some(1)));
    let other = creating("other", 0, None, Placement::default());
    let (plan, body, status) = d.ask(ask(owner(), other));
    assert_eq!((status, body["code"].as_str(), plan.writes.len()), (409, Some("handoff.conflict"), 0));
    let (_, body, status) = d.ask(ask(machine(), create()));
    assert_eq!((status, body["code"].as_str()), (403, Some("auth.forbidden")), "only an owner creates");
}

#[test]
fn nothing_is_read_beyond_the_hand_off_and_nothing_written_for_a_caller_who_may_not_see_it() {
    let mut d = created();
    let stranger = Caller { owner: "mallory".into(), role: Role::Owner, incarnation: 0, hid: None };
    for op in [Op::Get, set_work(), Op::Turns { before: None, limit: 10 }, Op::Hook(HandoffHook::Storage)] {
        let (plan, body, status) = d.ask(keyed(stranger.clone(), op, "k", "f"));
        assert_eq!(
            (status, body["code"].as_str(), body["version"].as_u64()),
            (404, Some("handoff.not_found"), None),
            "the record is not shown"
        );
        assert!(plan.writes.is_empty() && !plan.waits());
    }
    let mut empty = Driver::new();
    let (plan, _, status) = empty.ask(ask(owner(), Op::Get));
    assert_eq!((status, plan.writes.len(), empty.db.schema), (404, 0, false), "an id never created is not written");
}

#[test]
fn who_may_send_each_change_is_decided_in_the_session_with_the_record_beside_the_refusal() {
    let mut d = created();
    let (plan, body, status) = d.ask(ask(machine(), set_work()));
    assert_eq!((status, body["code"].as_str(), body["version"].as_u64()), (403, Some("auth.forbidden"), Some(1)));
    assert!(plan.writes.is_empty());
    let (_, _, status) = d.ask(ask(owner(), report(1, ReportStatus::Done, "x")));
    assert_eq!(status, 403, "a report is the machine's");
    let (_, _, status) = d.ask(ask(machine(), Op::Hook(HandoffHook::Fault { fault: Fault::Sync })));
    assert_eq!(status, 403, "test hooks are the owner's");
    let (_, _, status) = d.ask(ask(machine(), report(1, ReportStatus::Running, "x")));
    assert_eq!(status, 200);
}

#[test]
fn every_stored_change_moves_the_version_by_one_publishes_it_and_delivers_it_and_a_no_op_writes_nothing() {
    let mut d = created();
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which?")));
    assert_eq!((plan.publish, plan.send_rows_through, d.version()), (Some(2), Some(2), 2));
    assert!(plan.waits(), "a publication and a delivery are carried out with an await");
    assert_eq!(d.db.events.get(&2), Some(&EventKind::Report));
    let (plan, _, status) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which?")));
    assert_eq!(
        (status, plan.writes.len(), plan.waits(), d.version()),
        (200, 0, false, 2),
        "an exact repeat is answered at once"
    );
    assert_eq!(d.woken, vec![1, 2], "each version published once, in order");
}

#[test]
fn every_read_is_a_plan_with_nothing_to_await() {
    let mut d = created();
    d.ask(ask(owner(), set_work()));
    d.ask(ask(owner(), compile(false)));
    let reads = [
        Op::Get,
        Op::Work,
        Op::Turns { before: None, limit: 5 },
        Op::Package { markdown: false },
        Op::Package { markdown: true },
        Op::Briefing { budget_bytes: 4096, reach: Reaching { api: true, base_url: "https://h".into() } },
        Op::Wait { after: 0, timeout_s: 30 },
        Op::Wait { after: 99, timeout_s: 0 },
        Op::Hook(HandoffHook::Storage),
        Op::Floor,
        compile(true),
    ];
    for op in reads {
        let (plan, _, status) = d.ask(ask(owner(), op.clone()));
        assert_eq!((status, plan.writes.len(), plan.waits()), (200, 0, false), "{op:?}");
    }
}

#[test]
fn a_work_record_past_its_cap_is_413_before_any_write_and_leaves_the_session_as_it_was() {
    let mut d = created();
    let big = |i: usize| DecisionInput {
        statement: format!("{i}{}", "s".repeat(STATEMENT_BYTES_MAX - 8)),
        rationale: Some("r".repeat(RATIONALE_BYTES_MAX)),
        evidence: (0..10).map(|n| format!("https://e.example/{n}/{}", "p".repeat(2_000))).collect(),
        supersedes: None,
    };
    let mut refused = None;
    for i in 0..200 {
        let (plan, body, status) =
            d.ask(ask(owner(), change(Change::Work { command: work::Command::RecordDecision(big(i)) })));
        if status == 413 {
            assert!(plan.writes.is_empty() && !plan.waits());
            refused = Some((i, body));
            break;
        }
    }
    let (i, body) = refused.expect("the work record reached its cap");
    assert_eq!(body["code"], "request.too_large");
    assert_eq!(d.version(), 1 + i as u64, "the refused change moved nothing");
    let stored: Work = serde_json::from_str(&d.db.parts["work"]).unwrap();
    assert_eq!(stored.decisions.len(), i, "nothing of it was stored");
}

#[test]
fn the_lineage_and_the_history_are_trimmed_by_the_plan_to_their_caps() {
    let mut d = created();
    let turns = TURNS_KEPT_PER_HANDOFF_MAX as u64 + 3;
    for turn in 1..turns {
        d.ask(ask(machine(), report(turn, ReportStatus::Done, "ok")));
        let (_, _, status) =
            d.ask(ask(owner(), change(fixtures::turn(Command::OpenTurn { after: turn, prompt: None }))));
        assert_eq!(status, 200);
    }
    assert_eq!(d.db.turns.len(), TURNS_KEPT_PER_HANDOFF_MAX, "the newest turns are kept");
    assert_eq!(d.db.turns.keys().next(), Some(&(turns - TURNS_KEPT_PER_HANDOFF_MAX as u64 + 1)));
    assert!(d.db.events.len() <= EVENTS_PER_HANDOFF_MAX, "{} events", d.db.events.len());
    assert_eq!(
        d.decider.handoff().unwrap().lineage.len(),
        LINEAGE_TAIL_MAX,
        "the decider holds only the newest entries"
    );
    // A page of turns reads storage, newest first from `before`.
    let (_, body, _) = d.ask(ask(owner(), Op::Turns { before: Some(turns), limit: 2 }));
    assert_eq!(body["turns"], json!([turns - 2, turns - 1]));
    assert_eq!(body["next"], turns - 2);
}

#[test]
fn a_key_replays_its_first_answer_refuses_another_request_and_forgets_nothing_it_must_keep() {
    let mut d = created();
    let first = d.ask(keyed(machine(), report(1, ReportStatus::NeedsYou, "a"), "k1", "f1"));
    assert!(first.0.writes.iter().any(|w| matches!(w, Write::Remember { key, .. } if key == "k1")));
    let (plan, body, status) = d.ask(keyed(machine(), report(1, ReportStatus::NeedsYou, "a"), "k1", "f1"));
    assert_eq!((status, &body, plan.writes.len()), (200, &first.1, 0), "the first answer again, writing nothing");
    assert!(matches!(&plan.reply, Reply::Rendered(r) if r.replayed));
    let (_, body, status) = d.ask(keyed(machine(), report(1, ReportStatus::Done, "b"), "k1", "f2"));
    assert_eq!((status, body["code"].as_str()), (422, Some("idempotency.mismatch")));
    // A refusal and a dry run are never remembered.
    let (plan, _, status) = d.ask(keyed(owner(), report(1, ReportStatus::Done, "x"), "k2", "f"));
    assert_eq!((status, plan.writes.len()), (403, 0));
    d.ask(ask(owner(), set_work()));
    let (plan, _, _) = d.ask(keyed(owner(), compile(true), "k3", "f"));
    assert!(plan.writes.is_empty());
    // A no-op that answers 2xx is remembered, and moves nothing.
    let (plan, _, _) = d.ask(keyed(machine(), report(1, ReportStatus::NeedsYou, "a"), "k4", "f4"));
    assert!(matches!(plan.writes.as_slice(), [Write::Remember { .. }]) && plan.publish.is_none(), "{:?}", plan.writes);
    // A key past its time is forgotten, and answers afresh.
    d.now += IDEMPOTENCY_TTL_MS + 1;
    let (plan, _, status) = d.ask(keyed(machine(), report(1, ReportStatus::Running, "later"), "k1", "f9"));
    assert_eq!(status, 200, "a forgotten key is a new one");
    assert!(plan.writes.iter().any(|w| matches!(w, Write::ForgetExpired { .. })));
}

#[test]
fn past_the_keys_cap_the_oldest_is_forgotten_in_the_same_plan_and_a_restarted_object_keeps_counting() {
    let mut d = created();
    for n in 0..IDEMPOTENCY_KEYS_PER_HANDOFF_MAX {
        d.ask(keyed(machine(), report(1, ReportStatus::NeedsYou, "same"), &format!("k{n:04}"), "f"));
    }
    assert_eq!(d.db.keys.len(), IDEMPOTENCY_KEYS_PER_HANDOFF_MAX);
    d.restart();
    let (plan, _, _) = d.ask(keyed(machine(), report(1, ReportStatus::NeedsYou, "same"), "k-new", "f"));
    assert!(plan.writes.contains(&Write::Forget { key: "k0000".into() }), "{:?}", plan.writes);
    assert_eq!(d.db.keys.len(), IDEMPOTENCY_KEYS_PER_HANDOFF_MAX);
}

#[test]
fn a_large_answer_is_kept_without_its_package_and_replayed_whole_while_that_package_is_current() {
    let mut d = created();
    let goal = "g".repeat(crate::limits::GOAL_BYTES_MAX);
    let input = WorkInput {
        title: "t".into(),
        goal,
        task_type: None,
        priority: None,
        constraints: vec!["c".repeat(1000); 20],
        acceptance_criteria: vec![],
    };
    d.ask(ask(owner(), change(Change::Work { command: work::Command::SetWork(input) })));
    let (_, first, _) = d.ask(keyed(owner(), compile(false), "k", "f"));
    let (kept, _, _) = d.db.keys["k"].clone();
    assert!(kept.slim && kept.body.len() < first.to_string().len(), "kept without its package");
    let (_, again, _) = d.ask(keyed(owner(), compile(false), "k", "f"));
    assert_eq!(again, first, "the package put back, byte for byte");
}

#[test]
fn a_failed_commit_forgets_what_the_session_held_and_the_next_change_takes_the_same_version() {
    let mut d = created();
    let plan = d.plan(ask(machine(), report(1, ReportStatus::NeedsYou, "lost")));
    assert_eq!(plan.publish, Some(2));
    // The object's transaction failed: nothing of the plan is stored.
    d.decider.failed();
    assert_eq!(
        d.decider.next_read(&ask(owner(), Op::Get), &Feed::default(), d.now),
        Some(Read::Handoff { lineage: LINEAGE_TAIL_MAX })
    );
    assert_eq!(d.decider.confirm(2).map(|w| w.handoff.record.version), None, "a lost version is never published");
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "kept")));
    assert_eq!(plan.publish, Some(2));
    assert_eq!(d.woken, vec![1, 2]);
}

#[test]
fn waiters_are_held_per_role_within_their_cap_and_woken_only_by_a_confirmed_version() {
    let mut d = created();
    d.decider = Decider::new(Caps { waiters: PerRole::new(2, 1), ..Caps::default() });
    let hold = |d: &mut Driver, caller: Caller| d.plan(ask(caller, Op::Wait { after: 1, timeout_s: 30 })).reply;
    let mut held = Vec::new();
    for caller in [owner(), owner(), machine()] {
        match hold(&mut d, caller) {
            Reply::Hold { waiter, role, timeout_ms } => {
                assert!((30_000..=31_000).contains(&timeout_ms), "the timeout and its jitter: {timeout_ms}");
                held.push((waiter, role));
            }
            other => panic!("{other:?}"),
        }
    }
    let Reply::Rendered(refused) = hold(&mut d, owner()) else { panic!("not refused") };
    assert!(refused.status == 429 && refused.body.contains("wait.too_many"), "{refused:?}");
    let plan = d.plan(ask(machine(), report(1, ReportStatus::NeedsYou, "n")));
    d.db.apply(&plan.writes);
    assert_eq!(d.decider.waiters_of(Role::Owner), 2, "nothing is woken before the commit is confirmed");
    let wake = d.decider.confirm(2).expect("version 2 was committed");
    assert_eq!((wake.handoff.record.version, wake.waiters), (2, held), "each waiter once, with its role");
    assert_eq!((d.decider.waiters_of(Role::Owner), d.decider.waiters_of(Role::Machine)), (0, 0));
}

#[test]
fn the_safety_alarm_is_set_by_the_first_change_and_not_again_while_it_is_pending() {
    let mut d = Driver::new();
    let (plan, _, _) = d.ask(ask(owner(), create()));
    assert_eq!(plan.alarm_at, Some(T0 + OUTBOX_SAFETY_ALARM_MS));
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "n")));
    assert_eq!(plan.alarm_at, None, "a pending alarm covers later changes");
}

#[test]
fn a_failed_delivery_stores_its_attempts_and_asks_for_the_retry_alarm() {
    let mut d = created();
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "n")));
    assert_eq!(d.db.attempts, Some((2, 1)), "the attempts outlive an eviction");
    d.restart();
    d.index_up = true;
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    assert_eq!(d.decider.outbox.owed().map(|o| o.attempts), Some(1), "the backoff goes on from the stored count");
    let send = d.decider.on_alarm().expect("the alarm sends what is owed");
    assert_eq!(send.version, 2);
    d.restart();
    d.db.attempts = Some((1, 5));
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    assert_eq!(d.decider.outbox.owed().map(|o| o.attempts), Some(0), "another version's attempts are not this row's");
}

#[test]
fn a_needs_you_passed_while_the_index_is_down_is_told_with_the_done_after_an_eviction() {
    let mut d = created();
    d.ask(ask(machine(), report(1, ReportStatus::Running, "r")));
    let held = d.decider.outbox.owed().map(|o| o.row.row.clone());
    assert!(d.decider.is_taken(2));
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which branch?")));
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which branch? main")));
    assert!(
        plan.writes.iter().any(|w| matches!(w, Write::Pass { version: 3, .. })),
        "stored with the change that passed it: {:?}",
        plan.writes
    );
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::Done, "merged")));
    assert!(!plan.writes.iter().any(|w| matches!(w, Write::Pass { .. })), "a summary-only update is coalesced away");
    assert_eq!(d.db.passed.keys().copied().collect::<Vec<_>>(), [3]);

    d.restart();
    d.index_up = true;
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let send = d.decider.on_alarm().expect("the alarm sends what is owed");
    let passed: Vec<Row> = send.passed.iter().map(|e| e.row.row.clone()).collect();
    let told: Vec<(u64, notice::Notice)> =
        notice::owed_chain(held.as_ref(), &passed, &send.row.row).into_iter().map(|(r, n)| (r.version, n)).collect();
    assert_eq!(told, [(3, notice::Notice::NeedsYou), (5, notice::Notice::Done)]);
    assert_eq!(passed[0].summary.as_deref(), Some("which branch?"), "the row at the version that entered needs-you");
    let sent = d.decider.on_row_sent(send.version, true, d.now);
    assert_eq!(sent.write, Some(Write::Unpass { through: 3 }));
    d.db.apply(&[sent.write.unwrap()]);
    assert!(d.db.passed.is_empty(), "delivered: gone from storage");
}

#[test]
fn a_restored_row_that_entered_something_is_passed_by_the_next_change() {
    let mut d = created();
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "n")));
    assert!(d.db.entered, "stored with its record");
    d.restart();
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "n, again")));
    assert!(plan.writes.iter().any(|w| matches!(w, Write::Pass { version: 2, .. })), "{:?}", plan.writes);
    assert!(
        plan.writes.iter().any(|w| matches!(w, Write::Record { entered: false, .. })),
        "a summary-only update entered nothing"
    );
    d.restart();
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let (plan, _, _) = d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "n, once more")));
    assert!(
        !plan.writes.iter().any(|w| matches!(w, Write::Pass { .. })),
        "a restored row that entered nothing is not kept: {:?}",
        plan.writes
    );
    let send = d.decider.on_alarm().expect("owed");
    assert_eq!(send.passed.iter().map(|e| e.version).collect::<Vec<_>>(), [2]);
}

#[test]
fn a_watch_is_admitted_within_its_roles_cap() {
    let mut d = created();
    d.decider = Decider::new(Caps { watchers: PerRole::new(1, 1), ..Caps::default() });
    let plan = d.plan(ask(owner(), Op::Watch { after: 0, valid_until_s: 99, subprotocol: true, timeline: None }));
    assert!(matches!(
        plan.reply,
        Reply::Watch { role: Role::Owner, after: 0, valid_until_s: 99, subprotocol: true, timeline: None }
    ));
    let mut feed = Feed { sockets: Some(1), ..Feed::default() };
    let refused = d.decider.handle(
        ask(owner(), Op::Watch { after: 0, valid_until_s: 99, subprotocol: true, timeline: None }),
        std::mem::take(&mut feed),
        Moment { now: T0, random: 0.0 },
        &TestWire,
    );
    assert!(matches!(&refused.reply, Reply::Rendered(r) if r.status == 429 && r.body.contains("watch.too_many")));
}

#[test]
fn a_passed_row_this_build_cannot_read_is_skipped_and_the_hand_off_still_restores() {
    let mut d = created();
    d.ask(ask(machine(), report(1, ReportStatus::Running, "r")));
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which branch?")));
    d.ask(ask(machine(), report(1, ReportStatus::Done, "merged")));
    assert_eq!(d.db.passed.keys().copied().collect::<Vec<_>>(), [3]);
    d.db.passed.insert(3, "{broken".into());
    d.restart();
    d.index_up = true;
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let send = d.decider.on_alarm().expect("the alarm sends what is owed");
    assert!(send.passed.is_empty(), "the unreadable row is not sent: {:?}", send.passed);
    assert_eq!(send.version, 4, "the newest row still is");
}

#[test]
fn a_stored_value_this_build_cannot_read_is_refused_as_unreadable() {
    let mut s = Decider::new(Caps::default());
    let stored = Stored { record: "{\"not\": \"a record\"}".into(), ..Stored::default() };
    assert!(s.restore(Some(stored)).is_err());
    let mut broken = Stored {
        record: serde_json::to_string(&Record::create(
            "ho_1".into(),
            "alice".into(),
            "s".into(),
            "m".into(),
            "l".into(),
            0,
        ))
        .unwrap(),
        ..Stored::default()
    };
    broken.turns.push("{broken".into());
    assert!(s.restore(Some(broken)).is_err_and(|e| e.0.contains("lineage entry")));
    // A page of the lineage read from storage, past what the decider holds.
    let mut d = created();
    d.db.turns.insert(1, "{broken".into());
    let (plan, body, status) = d.ask(ask(owner(), Op::Turns { before: None, limit: 10 }));
    assert_eq!((status, body["code"].as_str()), (503, Some("store.unavailable")));
    assert!(plan.log.is_some_and(|l| l.contains("lineage entry")), "the cause goes to the log");
}

/// One request of a random history.
#[derive(Debug, Clone)]
enum Step {
    Report(ReportStatus, u8, bool),
    Open,
    Cancel,
    Close,
    SetWork,
    Compile(bool),
    Get,
    Wait,
    Fail,
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    let status = prop_oneof![
        Just(ReportStatus::Running),
        Just(ReportStatus::NeedsYou),
        Just(ReportStatus::Done),
        Just(ReportStatus::Failed)
    ];
    prop_oneof![
        5 => (status, 0..3u8, any::<bool>()).prop_map(|(s, n, k)| Step::Report(s, n, k)),
        3 => Just(Step::Open),
        1 => Just(Step::Cancel),
        1 => Just(Step::Close),
        1 => Just(Step::SetWork),
        2 => any::<bool>().prop_map(Step::Compile),
        2 => Just(Step::Get),
        1 => Just(Step::Wait),
        1 => Just(Step::Fail),
        1 => Just(Step::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any history, run as the object runs it: the version moves by exactly one exactly when a
    /// plan writes the record; a refusal writes nothing; a closed hand-off never changes; what
    /// is published rises one version at a time; and a started object reads back exactly the
    /// hand-off the decider held.
    #[test]
    fn any_history_keeps_the_sessions_invariants_and_storage_reads_back_as_the_session(steps in prop::collection::vec(step(), 1..60)) {
        let mut d = created();
        for (n, s) in steps.iter().enumerate() {
            let before = d.stored_version();
            let stored: Record = serde_json::from_str(d.db.record.as_deref().unwrap()).unwrap();
            let (closed, turn) = (stored.is_closed(), stored.turn);
            let op = match s {
                Step::Report(status, k, _) => report(turn, *status, &format!("summary {k}")),
                Step::Open => change(fixtures::turn(Command::OpenTurn { after: turn, prompt: None })),
                Step::Cancel => change(fixtures::turn(Command::Cancel { turn: None })),
                Step::Close => change(fixtures::turn(Command::Close)),
                Step::SetWork => set_work(),
                Step::Compile(dry) => compile(*dry),
                Step::Get => Op::Get,
                Step::Wait => Op::Wait { after: before, timeout_s: 0 },
                Step::Fail => {
                    // A commit that fails: its plan is never stored.
                    let _ = d.plan(ask(machine(), report(turn, ReportStatus::Running, &format!("lost {n}"))));
                    d.decider.failed();
                    continue;
                }
                Step::Restart => {
                    d.restart();
                    continue;
                }
            };
            let caller = match s { Step::Report(..) => machine(), _ => owner() };
            let key = matches!(s, Step::Report(_, _, true)).then(|| format!("key-{n}"));
            let a = Ask { caller, op, idempotency: key.map(|key| Idempotency { key, fingerprint: "f".into() }) };
            let (plan, _, status) = d.ask(a);
            let wrote_record = plan.writes.iter().any(|w| matches!(w, Write::Record { .. }));
            prop_assert_eq!(d.stored_version(), before + u64::from(wrote_record), "step {}: {:?}", n, s);
            prop_assert_eq!(d.version(), d.stored_version(), "the decider holds what storage holds");
            prop_assert_eq!(plan.publish.is_some(), wrote_record);
            if status >= 400 {
                prop_assert!(plan.writes.is_empty(), "a refusal wrote {:?}", plan.writes);
            }
            if closed {
                prop_assert!(!wrote_record, "a closed hand-off changed");
            }
        }
        for pair in d.woken.windows(2) {
            prop_assert_eq!(pair[1], pair[0] + 1, "published one version at a time: {:?}", d.woken);
        }
        d.ask(ask(owner(), Op::Get));
        let held = d.decider.handoff().cloned();
        d.restart();
        d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
        prop_assert_eq!(d.decider.handoff().map(|h| (**h).clone()), held.map(|h| (*h).clone()), "storage reads back as the session");
    }
}

#[test]
fn a_create_over_the_open_cap_is_refused_with_the_count_and_the_cap_and_stores_nothing() {
    let mut d = Driver::new();
    let a = ask(owner(), create());
    assert_eq!(d.decider.next_read(&a, &Feed::default(), d.now), Some(Read::Handoff { lineage: LINEAGE_TAIL_MAX }));
    d.decider.restore(None).unwrap();
    let Some(Read::Admission { owner: o, row }) = d.decider.next_read(&a, &Feed::default(), d.now) else {
        panic!("a new hand-off asks its owner's index first")
    };
    assert_eq!((o.as_str(), row.version, row.id.as_str()), ("alice", 1, "ho_1"));
    let crowded = Feed { admission: Some(Admission::No(TooManyOpen { open: 3, cap: 3 })), ..Feed::default() };
    assert_eq!(d.decider.next_read(&a, &crowded, d.now), None, "asked once");
    let plan = d.decider.handle(a.clone(), crowded, Moment { now: d.now, random: 0.5 }, &TestWire);
    let Reply::Rendered(r) = &plan.reply else { panic!("{plan:?}") };
    assert_eq!(r.status, 429);
    assert!(plan.writes.is_empty() && !plan.waits() && d.decider.handoff().is_none(), "nothing stored");
    let unasked = d.decider.handle(a, Feed::default(), Moment { now: d.now, random: 0.5 }, &TestWire);
    assert!(unasked.writes.is_empty(), "no admission, no hand-off");
    let mut d = created();
    assert_eq!(
        d.decider.next_read(&ask(owner(), create()), &Feed::default(), d.now),
        None,
        "an existing hand-off asks nobody"
    );
    let (plan, _, status) = d.ask(ask(owner(), create()));
    assert_eq!((status, plan.writes.len()), (200, 0));
}

#[test]
fn erasing_closes_an_open_hand_off_wakes_with_the_close_then_erases_and_a_retry_finds_it_gone() {
    let mut d = created();
    let (_, _, status) = d.ask(ask(machine(), Op::Erase));
    assert_eq!(status, 403, "the owner's alone");
    let stranger = Caller { owner: "mallory".into(), role: Role::Owner, incarnation: 0, hid: None };
    let (plan, _, status) = d.ask(ask(stranger, Op::Erase));
    assert_eq!((status, plan.erase), (404, false));
    let (plan, _, status) = d.ask(ask(owner(), Op::Erase));
    assert_eq!((status, plan.publish, plan.send_rows_through, plan.erase), (204, Some(2), Some(2), true));
    assert!(plan.waits());
    let erase_alone = Plan { publish: None, send_rows_through: None, ..plan };
    assert!(erase_alone.waits(), "an erasure is carried out with an await, whatever else the plan holds");
    assert_eq!(d.woken.last(), Some(&2), "waiters and watchers are told the close");
    assert!(d.db.record.is_none() && d.decider.handoff().is_none(), "erased");
    let (_, body, status) = d.ask(ask(owner(), Op::Get));
    assert_eq!((status, body["code"].as_str()), (404, Some("handoff.not_found")));
    let (plan, body, status) = d.ask(ask(owner(), Op::Erase));
    assert_eq!(
        (status, body["code"].as_str(), plan.writes.len(), plan.erase),
        (404, Some("handoff.not_found"), 0, false),
        "gone: erasing again changes nothing"
    );
}

#[test]
fn delete_answers_not_yours_and_not_there_alike_404_handoff_not_found() {
    // Ids derive from owner and session: a different answer would tell one owner whether
    // another has a given session.
    let stranger = Caller { owner: "mallory".into(), role: Role::Owner, incarnation: 0, hid: None };
    let mut theirs = created();
    let (plan, not_yours, status) = theirs.ask(ask(stranger.clone(), Op::Erase));
    assert_eq!((status, plan.writes.len(), plan.erase), (404, 0, false));
    let mut nothing = Driver::new();
    let (plan, not_there, status) = nothing.ask(ask(stranger, Op::Erase));
    assert_eq!((status, plan.writes.len(), plan.erase, nothing.db.schema), (404, 0, false, false));
    assert_eq!(not_yours, not_there, "the same body too");
    assert_eq!(not_there["code"], "handoff.not_found");
    assert!(theirs.decider.handoff().is_some(), "the owner's hand-off is untouched");
}

#[test]
fn a_repeated_create_ends_no_token_and_only_the_owners_machine_token_route_mints_one_that_ends_the_ones_before() {
    let mut d = Driver::new();
    let at = |inc: u64| creating("m1", inc, None, Placement::default());
    let (plan, body, status) = d.ask(ask(owner(), at(100)));
    assert_eq!(status, 201);
    assert_eq!(body["machine_token"].as_str(), Some("t"), "the first create carries its token");
    assert!(plan.writes.contains(&Write::MachineTokensFrom { from: 100 }), "the first token is the newest");
    let first = Caller { incarnation: 100, ..machine() };
    assert_eq!(d.ask(ask(first.clone(), report(1, ReportStatus::Running, "a"))).2, 200);
    let (plan, body, status) = d.ask(ask(owner(), at(300)));
    assert_eq!((status, body["version"].as_u64()), (200, Some(2)), "answered as it is");
    assert!(body.get("machine_token").is_none(), "a repeated create mints nothing: {body}");
    assert!(plan.writes.is_empty(), "no record, no event, no floor: {:?}", plan.writes);
    assert!(
        plan.publish.is_none() && plan.send_rows_through.is_none() && !plan.waits(),
        "nobody is woken: nothing changed"
    );
    assert_eq!(d.ask(ask(first.clone(), report(1, ReportStatus::Running, "b"))).2, 200, "the running token lives on");
    let mint = |inc: u64| Op::MachineToken { machine_token: "t2".into(), incarnation: inc, machine: None };
    let (_, body, status) = d.ask(ask(first.clone(), mint(400)));
    assert_eq!((status, body["code"].as_str()), (403, Some("auth.forbidden")), "a machine mints no token");
    let (plan, body, status) = d.ask(ask(owner(), mint(300)));
    assert_eq!((status, body["machine_token"].as_str()), (200, Some("t2")));
    assert_eq!(plan.writes, vec![Write::MachineTokensFrom { from: 300 }], "only the floor: no record, no event");
    let version = d.stored_version();
    for op in [Op::Get, report(1, ReportStatus::Done, "b")] {
        let (plan, body, status) = d.ask(ask(first.clone(), op));
        assert_eq!((status, body["code"].as_str(), plan.writes.len()), (401, Some("auth.revoked"), 0));
    }
    let second = Caller { incarnation: 300, ..machine() };
    assert_eq!(d.ask(ask(second.clone(), report(1, ReportStatus::Done, "b"))).2, 200);
    assert_eq!(d.stored_version(), version + 1);
    // An older mint arriving late does not bring an ended token back.
    let (plan, _, _) = d.ask(ask(owner(), mint(200)));
    assert!(plan.writes.is_empty());
    d.restart();
    assert_eq!(d.ask(ask(first, Op::Get)).2, 401, "ended across an eviction: the floor is stored");
    assert_eq!(d.ask(ask(second, Op::Get)).2, 200);
    assert_eq!(d.ask(ask(owner(), Op::Get)).2, 200, "an owner's token is not a machine token");
    d.ask(ask(owner(), change(fixtures::turn(Command::Close))));
    let (_, body, status) = d.ask(ask(owner(), mint(500)));
    assert_eq!((status, body["code"].as_str()), (409, Some("handoff.closed")), "a closed hand-off gets no token");
}

#[test]
fn a_create_shows_its_placement_on_the_record_and_turn_1_and_a_repeat_naming_another_is_a_conflict() {
    let mut d = Driver::new();
    let placement = Placement {
        workspace: Some("api".into()),
        runtime: Some("codex".into()),
        model: Some("gpt-5-codex".into()),
        requested_permission_mode: Some("untrusted".into()),
    };
    let with = |placement: Placement| creating("m1", 100, None, placement);
    let (_, body, status) = d.ask(ask(owner(), with(placement.clone())));
    assert_eq!(status, 201);
    assert_eq!(
        (body["workspace"].as_str(), body["requested_runtime"].as_str(), body["model"].as_str()),
        (Some("api"), Some("codex"), Some("gpt-5-codex"))
    );
    assert_eq!(body["requested_permission_mode"].as_str(), Some("untrusted"));
    assert!(body.get("permission_mode").is_none(), "the record's permission_mode stays the machine's to report");
    let h = d.decider.handoff().unwrap();
    assert_eq!(h.lineage[0].placement, placement, "turn 1's lineage entry shows it");
    assert_eq!(d.ask(ask(owner(), with(placement.clone()))).2, 200, "the same values answer the hand-off");
    assert_eq!(d.ask(ask(owner(), with(Placement::default()))).2, 200, "none named: a look-up");
    let other = Placement { model: Some("o3".into()), ..placement };
    let (plan, body, status) = d.ask(ask(owner(), with(other)));
    assert_eq!((status, body["code"].as_str(), plan.writes.len()), (409, Some("handoff.conflict"), 0));
}

#[test]
fn the_next_turn_carries_the_previous_turns_workspace_and_model_onto_its_lineage_entry() {
    let mut d = Driver::new();
    let placement = Placement { workspace: Some("api".into()), model: Some("opus".into()), ..Placement::default() };
    let create = creating("m1", 100, None, placement.clone());
    assert_eq!(d.ask(ask(owner(), create)).2, 201);
    let by = Caller { incarnation: 100, ..machine() };
    assert_eq!(d.ask(ask(by, report(1, ReportStatus::Done, "a"))).2, 200);
    assert_eq!(d.ask(ask(owner(), open_with(1, Some("next")))).2, 200);
    let h = d.decider.handoff().unwrap();
    assert_eq!((h.record.turn, &h.record.placement), (2, &placement), "carried over on the record");
    assert_eq!(h.lineage.last().unwrap().placement, placement, "and on turn 2's lineage entry");
}

/// A hand-off on machine `m1` whose turn 1, run with model `opus`, is done: the decider, and
/// its machine's caller.
fn turn_one_done_with_opus() -> (Driver, Caller) {
    let mut d = Driver::new();
    let placement = Placement { model: Some("opus".into()), ..Placement::default() };
    let create = Op::Create {
        id: ID.into(),
        session: "s1".into(),
        machine: "m1".into(),
        size: "large".into(),
        machine_token: "t".into(),
        incarnation: 100,
        prompt: None,
        placement,
    };
    assert_eq!(d.ask(ask(owner(), create)).2, 201);
    assert_eq!(d.ask(ask(owner(), set_work())).2, 200);
    let by = Caller { incarnation: 100, ..machine() };
    assert_eq!(d.ask(ask(by.clone(), report(1, ReportStatus::Done, "a"))).2, 200);
    (d, by)
}

/// Opening the turn after `after` with a hand-off to `runtime`, and `model` if one is chosen.
fn hand_off_to(runtime: &str, model: Option<&str>, after: u64) -> Change {
    Change::Turn {
        command: Command::OpenTurn { after, prompt: Some("go on".into()) },
        unmet: None,
        usage: None,
        package: Some(crate::fixtures::hand_off(runtime, model)),
    }
}

#[test]
fn a_hand_off_turn_carries_the_model_over_and_one_its_target_runtime_does_not_reach_is_refused_and_changes_nothing() {
    let (mut d, by) = turn_one_done_with_opus();
    let to = |runtime: &str, model: Option<&str>, after: u64| change(hand_off_to(runtime, model, after));
    d.reach = Some(vec!["gpt-5-codex".into()]);
    let version = d.decider.handoff().unwrap().record.version;
    let (plan, body, status) = d.ask(ask(owner(), to("codex", None, 1)));
    assert_eq!((status, body["code"].as_str(), plan.writes.len()), (409, Some("model.unavailable"), 0), "{body}");
    assert_eq!(d.decider.handoff().unwrap().record.version, version, "nothing changes");

    let (_, body, status) = d.ask(ask(owner(), to("codex", Some("gpt-5-codex"), 1)));
    assert_eq!(status, 200, "{body}");
    let h = d.decider.handoff().unwrap();
    assert_eq!(h.record.placement.model.as_deref(), Some("gpt-5-codex"), "the owner's choice, on the record");
    assert_eq!(h.record.placement.runtime.as_deref(), Some("codex"));
    assert_eq!(h.lineage.last().unwrap().placement.model.as_deref(), Some("gpt-5-codex"), "and on its lineage entry");

    assert_eq!(d.ask(ask(by, report(2, ReportStatus::Done, "b"))).2, 200);
    d.reach = Some(vec!["opus".into(), "sonnet".into(), "gpt-5-codex".into()]);
    assert_eq!(d.ask(ask(owner(), to("claude-code", None, 2))).2, 200);
    let h = d.decider.handoff().unwrap();
    assert_eq!(h.record.placement.model.as_deref(), Some("gpt-5-codex"), "carried over when none is chosen");
    assert_eq!(h.lineage.last().unwrap().placement.model.as_deref(), Some("gpt-5-codex"));
}

#[test]
fn a_preview_of_a_hand_off_turn_refuses_a_model_its_target_runtime_does_not_reach_as_the_turn_itself_would() {
    let (mut d, _) = turn_one_done_with_opus();
    d.reach = Some(vec!["gpt-5-codex".into()]);
    let version = d.decider.handoff().unwrap().record.version;
    let preview = |model: Option<&str>| Op::Preview {
        change: hand_off_to("codex", model, 1),
        budget_bytes: 4096,
        reach: Reaching { api: false, base_url: String::new() },
    };
    let (plan, body, status) = d.ask(ask(owner(), preview(None)));
    assert_eq!((status, body["code"].as_str(), plan.writes.len()), (409, Some("model.unavailable"), 0), "{body}");
    let (plan, body, status) = d.ask(ask(owner(), preview(Some("gpt-5-codex"))));
    assert_eq!((status, plan.writes.len()), (200, 0), "a model it reaches previews, storing nothing: {body}");
    assert_eq!(d.decider.handoff().unwrap().record.version, version, "a preview changes nothing");
}

#[test]
fn a_hand_off_created_again_after_its_erasure_starts_at_version_1_and_refuses_the_earlier_lifes_machine_token() {
    let mut d = Driver::new();
    let first = creating("m1", 100, None, Placement::default());
    assert_eq!(d.ask(ask(owner(), first)).2, 201);
    let old_token = Caller { incarnation: 100, ..machine() };
    assert_eq!(d.ask(ask(old_token.clone(), report(1, ReportStatus::Running, "a"))).2, 200);
    assert_eq!(d.ask(ask(owner(), Op::Erase)).2, 204);
    let again = creating("m1", 200, None, Placement::default());
    let (_, body, status) = d.ask(ask(owner(), again));
    assert_eq!((status, d.version()), (201, 1), "a new life starts at version 1");
    assert_eq!(body["version"].as_u64(), Some(1));
    assert_eq!(d.decider.handoff().unwrap().record.incarnation, 200);
    let (_, body, status) = d.ask(ask(old_token, Op::Get));
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("handoff.not_found")),
        "the earlier life's token is refused"
    );
    let new_token = Caller { incarnation: 200, ..machine() };
    assert_eq!(d.ask(ask(new_token, Op::Get)).2, 200);
}

#[test]
fn the_alarm_erases_a_closed_hand_off_once_its_retention_has_passed_and_sets_itself_for_then_before() {
    let retention = Retention::default();
    let mut d = created();
    assert_eq!(d.decider.after_alarm(d.now, retention), AfterAlarm::Nothing, "an open hand-off is kept");
    d.ask(ask(owner(), change(fixtures::turn(Command::Close))));
    let closed_at = d.decider.handoff().unwrap().record.updated_at.ms();
    let due = retention.erase_at(closed_at);
    assert_eq!(d.decider.after_alarm(d.now, retention), AfterAlarm::At(due));
    assert_eq!(d.decider.after_alarm(due - 1, retention), AfterAlarm::At(due));
    assert_eq!(d.decider.after_alarm(due, retention), AfterAlarm::Erase);
}

#[test]
fn a_callers_incarnation_travels_with_its_ask_and_none_is_written_as_none() {
    let token = Caller { incarnation: 100, ..machine() };
    let text = serde_json::to_string(&token).unwrap();
    assert!(text.contains("\"incarnation\":100"), "{text}");
    assert_eq!(serde_json::from_str::<Caller>(&text).unwrap(), token);
    assert!(text.contains("\"hid\":\"ho_1\""), "{text}");
    assert!(!serde_json::to_string(&owner()).unwrap().contains("incarnation"));
    assert!(!serde_json::to_string(&owner()).unwrap().contains("hid"));
}

#[test]
fn a_machine_token_minted_for_another_hand_off_is_refused_as_if_this_one_were_not_there() {
    let mut d = created();
    let elsewhere = Caller { hid: Some("ho_2".into()), ..machine() };
    assert!(!elsewhere.reaches(ID) && machine().reaches(ID) && owner().reaches("ho_2"));
    let (_, body, status) = d.ask(ask(elsewhere.clone(), Op::Get));
    assert_eq!((status, body["code"].as_str()), (404, Some("handoff.not_found")));
    let (plan, _, status) = d.ask(ask(elsewhere, report(1, ReportStatus::Running, "not mine")));
    assert_eq!((status, plan.writes.len()), (404, 0), "and changes nothing");
    let unbound = Caller { hid: None, ..machine() };
    assert_eq!(d.ask(ask(unbound, Op::Get)).2, 404, "a machine token names its hand-off or reaches none");
    assert_eq!(d.ask(ask(machine(), Op::Get)).2, 200);
}

#[test]
fn a_route_for_one_role_refuses_the_others_token_and_a_route_for_either_takes_both() {
    assert_eq!(admit_role(Some(Role::Owner), Role::Machine).map_err(|r| r.code), Err(Code::AuthForbidden));
    assert_eq!(admit_role(Some(Role::Machine), Role::Owner).map_err(|r| r.code), Err(Code::AuthForbidden));
    for role in Role::ALL {
        assert_eq!(admit_role(Some(role), role), Ok(()));
    }
    assert_eq!(admit_role(None, Role::Owner), Ok(()));
    assert_eq!(admit_role(None, Role::Machine), Ok(()));
}

#[test]
fn a_machine_credential_takes_only_its_own_routes_and_never_an_owners_or_a_hand_offs() {
    let forbidden = Err(Code::AuthForbidden);
    assert_eq!(admit_role(None, Role::Credential).map_err(|r| r.code), forbidden, "a hand-off's route or a create");
    assert_eq!(admit_role(Some(Role::Owner), Role::Credential).map_err(|r| r.code), forbidden);
    assert_eq!(admit_role(Some(Role::Credential), Role::Owner).map_err(|r| r.code), forbidden);
    assert_eq!(admit_role(Some(Role::Credential), Role::Machine).map_err(|r| r.code), forbidden);
}

#[test]
fn an_erase_drops_the_owners_row_first_then_the_storage_then_the_sockets_and_forgets_the_hand_off_with_its_storage() {
    let mut d = created();
    let mut erasure = d.decider.erasure().expect("a hand-off to erase");
    assert_eq!(
        erasure.first(),
        Some(&EraseStep::DropRow { owner: "alice".into(), id: ID.into(), incarnation: T0 as u64 }),
        "no row outlives the hand-off"
    );
    assert_eq!(d.decider.on_erase_step(&mut erasure, true, d.now), Erasing::Next(EraseStep::DeleteStorage));
    assert!(d.decider.handoff().is_some(), "the row alone went: the hand-off is whole");
    assert_eq!(d.decider.on_erase_step(&mut erasure, true, d.now), Erasing::Next(EraseStep::CloseSockets));
    assert!(d.decider.handoff().is_none(), "forgotten with its storage");
    assert_eq!(d.decider.on_erase_step(&mut erasure, true, d.now), Erasing::Done);
    assert_eq!(d.decider.erasure(), None, "nothing left to erase");
}

#[test]
fn a_failed_erase_step_stops_the_erase_with_the_hand_off_whole_and_says_when_to_try_again() {
    for failing in 0..2 {
        let mut d = created();
        let mut erasure = d.decider.erasure().unwrap();
        for _ in 0..failing {
            d.decider.on_erase_step(&mut erasure, true, d.now);
        }
        let failed = d.decider.on_erase_step(&mut erasure, false, d.now);
        assert_eq!(failed, Erasing::Failed { retry_at: d.now + crate::limits::OUTBOX_RETRY_MS_MAX }, "step {failing}");
        assert!(d.decider.handoff().is_some(), "step {failing}: nothing after the failure ran");
        assert_eq!(erasure.first(), None);
        assert_eq!(
            d.decider.on_erase_step(&mut erasure, true, d.now),
            Erasing::Done,
            "an ended erase does nothing more"
        );
        assert!(d.decider.erasure().is_some(), "to be erased again");
    }
}

#[test]
fn the_clock_test_hook_is_the_owners() {
    let mut d = created();
    assert_eq!(d.ask(ask(machine(), Op::Hook(HandoffHook::Clock { advance_ms: 1_000 }))).2, 403);
    let (plan, _, status) = d.ask(ask(owner(), Op::Hook(HandoffHook::Clock { advance_ms: 1_000 })));
    assert_eq!((status, plan.hook), (204, Some(PlanHook::AdvanceClockMs(1_000))));
}

#[test]
fn a_panic_fault_is_read_from_its_words_and_armed_for_the_next_change_like_any_other() {
    let panic: Fault = serde_json::from_str(r#"{"fail": "panic"}"#).unwrap();
    assert_eq!(panic, Fault::Panic);
    assert_eq!(serde_json::to_string(&Fault::Panic).unwrap(), r#"{"fail":"panic"}"#);
    let mut d = created();
    let (plan, _, status) = d.ask(ask(owner(), Op::Hook(HandoffHook::Fault { fault: Fault::Panic })));
    assert_eq!((status, plan.hook), (200, Some(PlanHook::Arm(Fault::Panic))));
}

fn open_with(after: u64, prompt: Option<&str>) -> Op {
    change(fixtures::turn(Command::OpenTurn { after, prompt: prompt.map(str::to_string) }))
}

fn create_with(prompt: Option<&str>) -> Op {
    creating("m1", 0, prompt, Placement::default())
}

/// Storage stays bounded whatever a client repeats: turn after turn opened with the longest
/// prompt, across restarts, the record and the stored lineage together never hold more than
/// `PROMPT_BYTES_KEPT_PER_HANDOFF_MAX` bytes of prompts; the newest `PROMPT_TURNS_KEPT_MAX`
/// turns keep their words whole, and an older entry shows `prompt: null` and `prompt_dropped`.
#[test]
fn any_number_of_turns_with_the_longest_prompts_keeps_within_the_prompt_bytes_named() {
    use crate::limits::{PROMPT_BYTES_KEPT_PER_HANDOFF_MAX, PROMPT_BYTES_MAX, PROMPT_TURNS_KEPT_MAX};
    let words = |turn: u64| format!("{turn:>width$}", width = PROMPT_BYTES_MAX);
    let mut d = Driver::new();
    let (_, _, status) = d.ask(ask(owner(), create_with(Some(&words(1)))));
    assert_eq!(status, 201);
    let last = 3 * LINEAGE_TAIL_MAX as u64 + 7;
    for turn in 1..last {
        d.ask(ask(machine(), report(turn, ReportStatus::Done, "ok")));
        let (_, body, status) = d.ask(ask(owner(), open_with(turn, Some(&words(turn + 1)))));
        assert_eq!(status, 200, "{body}");
        if turn % 50 == 0 {
            d.restart();
            d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
        }
        let current = turn + 1;
        let record: Record = serde_json::from_str(d.db.record.as_deref().unwrap()).unwrap();
        assert_eq!(
            record.prompt.as_deref(),
            Some(words(current).as_str()),
            "the record carries the current turn's words"
        );
        let entries: Vec<TurnEntry> = d.db.turns.values().map(|t| serde_json::from_str(t).unwrap()).collect();
        let kept: usize =
            entries.iter().filter_map(|e| e.prompt.as_ref()).map(String::len).sum::<usize>() + PROMPT_BYTES_MAX;
        assert!(kept <= PROMPT_BYTES_KEPT_PER_HANDOFF_MAX, "{kept} prompt bytes kept at turn {current}");
        for e in &entries {
            if e.turn + PROMPT_TURNS_KEPT_MAX > current {
                assert_eq!(
                    (e.prompt.as_deref(), e.prompt_dropped),
                    (Some(words(e.turn).as_str()), false),
                    "turn {} keeps its words",
                    e.turn
                );
            } else {
                assert_eq!(
                    (e.prompt.as_deref(), e.prompt_dropped),
                    (None, true),
                    "turn {}'s words are dropped, and it says so",
                    e.turn
                );
            }
        }
    }
}

/// Steers are the owner's words too: turn after turn with the longest prompt and every steer
/// of the longest words, the record and the stored lineage hold at most
/// `PROMPT_BYTES_KEPT_PER_HANDOFF_MAX` bytes of them, and an old turn's steers go with its prompt.
#[test]
fn steers_count_under_the_prompt_bytes_kept_per_hand_off_and_go_with_their_turns_prompt() {
    use crate::limits::{
        PROMPT_BYTES_KEPT_PER_HANDOFF_MAX, PROMPT_BYTES_MAX, PROMPT_TURNS_KEPT_MAX, STEERS_PER_TURN_MAX,
    };
    let words = |turn: u64| format!("{turn:>width$}", width = PROMPT_BYTES_MAX);
    let steer = |turn: u64| change(fixtures::turn(Command::Steer { turn, prompt: words(turn) }));
    let mut d = Driver::new();
    d.ask(ask(owner(), create_with(Some(&words(1)))));
    let last = PROMPT_TURNS_KEPT_MAX + 4;
    for turn in 1..=last {
        for _ in 0..STEERS_PER_TURN_MAX {
            let (_, body, status) = d.ask(ask(owner(), steer(turn)));
            assert_eq!(status, 200, "{body}");
        }
        let record: Record = serde_json::from_str(d.db.record.as_deref().unwrap()).unwrap();
        let entries: Vec<TurnEntry> = d.db.turns.values().map(|t| serde_json::from_str(t).unwrap()).collect();
        let of_steers = |s: &[crate::turn::Steer]| s.iter().map(|s| s.prompt.len()).sum::<usize>();
        let kept: usize =
            entries.iter().map(|e| e.prompt.as_ref().map_or(0, String::len) + of_steers(&e.steers)).sum::<usize>()
                + record.prompt.as_ref().map_or(0, String::len)
                + of_steers(&record.steers);
        assert!(kept <= PROMPT_BYTES_KEPT_PER_HANDOFF_MAX, "{kept} bytes of words kept at turn {turn}");
        for e in &entries {
            let dropped = e.turn + PROMPT_TURNS_KEPT_MAX <= turn;
            assert_eq!(e.steers.len(), if dropped { 0 } else { STEERS_PER_TURN_MAX }, "turn {}", e.turn);
        }
        d.ask(ask(machine(), report(turn, ReportStatus::Done, "ok")));
        d.ask(ask(owner(), open_with(turn, Some(&words(turn + 1)))));
    }
}

#[test]
fn a_create_repeated_with_turn_ones_prompt_or_none_answers_the_hand_off_and_another_prompt_conflicts() {
    let mut d = Driver::new();
    let (_, body, status) = d.ask(ask(owner(), create_with(Some("fix the login bug"))));
    assert_eq!((status, body["prompt"].as_str()), (201, Some("fix the login bug")));
    let (_, body, _) = d.ask(ask(owner(), Op::Turns { before: None, limit: 10 }));
    assert_eq!(body["turns"], json!([1]), "turn 1 is listed");
    for again in [Some("fix the login bug"), None] {
        let (plan, body, status) = d.ask(ask(owner(), create_with(again)));
        assert_eq!((status, plan.writes.len(), body["version"].as_u64()), (200, 0, Some(1)), "{again:?}");
    }
    let (plan, body, status) = d.ask(ask(owner(), create_with(Some("something else"))));
    assert_eq!((status, body["code"].as_str(), plan.writes.len()), (409, Some("handoff.conflict"), 0));
    // Long after turn 1, the same words still answer, other words still conflict.
    d.ask(ask(machine(), report(1, ReportStatus::Done, "ok")));
    d.ask(ask(owner(), open_with(1, Some("and now the tests"))));
    d.restart();
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let (_, body, status) = d.ask(ask(owner(), create_with(Some("fix the login bug"))));
    assert_eq!((status, body["prompt"].as_str()), (200, Some("and now the tests")), "the hand-off as it is");
    let (_, body, status) = d.ask(ask(owner(), create_with(Some("and now the tests"))));
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("handoff.conflict")),
        "turn 1's words, not the current turn's"
    );
}

#[test]
fn a_failed_clean_up_of_delivered_passed_rows_is_logged_and_fails_nothing_and_they_ride_along_once_more_owing_nothing_twice(
) {
    let mut d = created();
    d.ask(ask(machine(), report(1, ReportStatus::Running, "r")));
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which branch?")));
    d.ask(ask(machine(), report(1, ReportStatus::NeedsYou, "which branch? main")));
    d.ask(ask(machine(), report(1, ReportStatus::Done, "merged")));
    assert_eq!(d.db.passed.keys().copied().collect::<Vec<_>>(), [3]);
    d.restart();
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    let send = d.decider.on_alarm().expect("the alarm sends what is owed");
    let held = send.row.row.clone();
    let sent = d.decider.on_row_sent(send.version, true, d.now);
    assert_eq!(sent.write, Some(Write::Unpass { through: 3 }));
    assert_eq!(sent.if_write_fails(), WriteFailed::Logged("could not forget delivered passed rows"));
    // The clean-up failed: the delivered passed row is still stored, and rides along once more.
    d.restart();
    d.decider.restore(d.db.stored(LINEAGE_TAIL_MAX)).unwrap();
    d.ask(ask(owner(), change(fixtures::turn(Command::Close))));
    let send = d.decider.on_alarm().expect("owed while the index is down");
    let passed: Vec<Row> = send.passed.iter().map(|e| e.row.row.clone()).collect();
    assert!(passed.iter().any(|r| r.version == 3), "it rides along: {passed:?}");
    let told: Vec<u64> =
        notice::owed_chain(Some(&held), &passed, &send.row.row).into_iter().map(|(r, _)| r.version).collect();
    assert!(!told.contains(&3), "the index skips it by version: nothing is owed twice ({told:?})");
}

#[test]
fn a_failed_store_of_a_sends_attempts_fails_the_send() {
    let mut d = created();
    d.index_up = false;
    d.ask(ask(machine(), report(1, ReportStatus::Running, "r")));
    let send = d.decider.on_alarm().expect("owed");
    let sent = d.decider.on_row_sent(send.version, false, d.now);
    assert!(matches!(sent.write, Some(Write::Attempts { .. })), "{sent:?}");
    assert_eq!(sent.if_write_fails(), WriteFailed::Fails, "the backoff outlives an eviction only once stored");
}

#[test]
#[should_panic(expected = "the driver skipped the read of the lineage entries")]
fn turns_whose_read_the_driver_skipped_fail_an_assertion_rather_than_answering_an_empty_page() {
    let mut d = created();
    d.decider.handle(
        ask(owner(), Op::Turns { before: None, limit: 10 }),
        Feed::default(),
        Moment { now: d.now, random: 0.5 },
        &TestWire,
    );
}

#[test]
#[should_panic(expected = "the driver skipped the read of the watching sockets")]
fn a_watch_whose_sockets_the_driver_skipped_fails_an_assertion_rather_than_being_refused() {
    let mut d = created();
    d.decider.handle(
        ask(owner(), Op::Watch { after: 0, valid_until_s: 99, subprotocol: true, timeline: None }),
        Feed::default(),
        Moment { now: d.now, random: 0.5 },
        &TestWire,
    );
}

#[test]
#[should_panic(expected = "the driver skipped the read of the storage facts")]
fn storage_facts_the_driver_skipped_fail_an_assertion_rather_than_answering_none() {
    let mut d = created();
    d.decider.handle(
        ask(owner(), Op::Hook(HandoffHook::Storage)),
        Feed::default(),
        Moment { now: d.now, random: 0.5 },
        &TestWire,
    );
}

// ---- The turn's timeline. ----

fn events(turn: u64, seqs: std::ops::RangeInclusive<u64>) -> Op {
    let events = seqs.map(|seq| timeline::Event {
        text: Some(format!("step {seq}")),
        ..timeline::Event::of(seq, timeline::Kind::Note)
    });
    Op::Events { batch: timeline::Batch { turn, events: events.collect() } }
}

fn read_timeline(turn: Option<u64>, after: u64, timeout_s: u64) -> Op {
    Op::Timeline { turn, after, limit: 100, timeout_s }
}

#[test]
fn a_batch_writes_its_events_alone_moves_no_version_publishes_nothing_and_sends_no_row() {
    let mut d = created();
    let version = d.version();
    let (plan, body, status) = d.ask(ask(machine(), events(1, 1..=3)));
    assert_eq!((status, &body), (200, &json!({"turn": 1, "next": 4})));
    assert_eq!(plan.events_taken, Some((1, 1, 3)), "every handoff.v2 socket is owed them once committed");
    assert!(
        plan.writes.iter().all(|w| matches!(w, Write::TimelineEvents { .. } | Write::TimelineTurn { .. })),
        "{:?}",
        plan.writes
    );
    assert_eq!(
        (plan.publish, plan.send_rows_through, plan.alarm_at),
        (None, None, None),
        "no version, no row, no notice"
    );
    assert_eq!((d.version(), d.stored_version()), (version, version));
    let (plan, body, _) = d.ask(ask(machine(), events(1, 2..=3)));
    assert!(plan.writes.is_empty() && plan.events_taken.is_none(), "a repeat writes and sends nothing");
    assert_eq!(body["next"], 4);
    let (_, body, status) = d.ask(ask(owner(), read_timeline(None, 1, 0)));
    assert_eq!((status, &body["seqs"], &body["next"]), (200, &json!([2, 3]), &json!(4)));
}

/// A steer event names a steer its turn took (the record's for the current turn, the lineage's
/// before): one the turn did not take is 400 and stores nothing; one it took is taken like any
/// event, moving no version and leaving the question open (it is no running report).
#[test]
fn a_steer_event_names_a_steer_its_turn_took_moves_no_version_and_leaves_the_question_open() {
    let steer_event = |turn: u64, seq: u64, id: &str, delivered: Result<(), &str>| Op::Events {
        batch: timeline::Batch { turn, events: vec![timeline::Event::steer(seq, id, delivered)] },
    };
    let mut d = created();
    let (_, body, status) = d.ask(ask(machine(), steer_event(1, 1, "st_2_0", Ok(()))));
    assert_eq!((status, body["code"].as_str()), (400, Some("request.invalid")), "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("events[0].id: turn 1 took no steer st_2_0"), "{body}");
    assert!(d.db.timeline.is_empty(), "nothing stored");
    let steer = change(fixtures::turn(Command::Steer { turn: 1, prompt: "use SQLite".into() }));
    let stored = |d: &Driver| serde_json::from_str::<Record>(d.db.record.as_deref().unwrap()).unwrap();
    let (_, body, status) = d.ask(ask(owner(), steer));
    assert_eq!(status, 200, "{body}");
    let id = stored(&d).steers[0].id.clone();
    let (_, body, status) = d.ask(ask(machine(), report_asking(1)));
    assert_eq!((status, stored(&d).status), (200, crate::turn::Status::NeedsYou), "{body}");
    let version = d.version();
    let (plan, body, status) = d.ask(ask(machine(), steer_event(1, 1, &id, Err("the harness had ended"))));
    assert_eq!((status, &body), (200, &json!({"turn": 1, "next": 2})));
    assert_eq!((plan.publish, d.version()), (None, version), "no version moves");
    let record = stored(&d);
    assert_eq!(
        (record.status, record.question.is_some()),
        (crate::turn::Status::NeedsYou, true),
        "the question stays open"
    );
    // The turn ended and the next opened: turn 1's steer is its lineage entry's, still known.
    d.ask(ask(machine(), report(1, ReportStatus::Done, "d")));
    d.ask(ask(owner(), open_with(1, None)));
    let (_, body, status) = d.ask(ask(machine(), steer_event(1, 2, &id, Ok(()))));
    assert_eq!((status, &body["next"]), (200, &json!(3)), "{body}");
    let (_, body, status) = d.ask(ask(machine(), steer_event(2, 1, &id, Ok(()))));
    assert_eq!((status, body["code"].as_str()), (400, Some("request.invalid")), "turn 2 took no steer: {body}");
}

#[test]
fn only_the_machine_writes_the_timeline_and_either_role_reads_it() {
    let mut d = created();
    let (plan, body, status) = d.ask(ask(owner(), events(1, 1..=1)));
    assert_eq!((status, body["code"].as_str()), (403, Some("auth.forbidden")));
    assert!(plan.writes.is_empty());
    for caller in [owner(), machine()] {
        let (_, body, status) = d.ask(ask(caller, read_timeline(Some(1), 0, 0)));
        assert_eq!((status, &body["next"]), (200, &json!(1)));
    }
    let (_, body, _) = d.ask(ask(owner(), read_timeline(Some(2), 0, 0)));
    assert_eq!(body["code"], "handoff.turn_out_of_order");
}

#[test]
fn opening_a_turn_drops_the_events_of_the_turn_that_leaves_the_newest_kept_and_keeps_its_count() {
    let mut d = created();
    d.ask(ask(machine(), events(1, 1..=2)));
    for turn in 1..=crate::limits::TIMELINE_TURNS_KEPT_MAX {
        d.ask(ask(machine(), report(turn, ReportStatus::Done, "d")));
        let (plan, _, status) = d.ask(ask(owner(), open_with(turn, None)));
        assert_eq!(status, 200);
        let trims: Vec<&Write> = plan.writes.iter().filter(|w| matches!(w, Write::TrimTimeline { .. })).collect();
        let dropped = timeline::dropped_through(turn + 1);
        assert_eq!(trims.first().map(|w| (*w).clone()), dropped.map(|through| Write::TrimTimeline { through }));
    }
    assert!(d.db.timeline.is_empty(), "turn 1's events are gone");
    let (_, body, _) = d.ask(ask(owner(), read_timeline(Some(1), 0, 0)));
    assert_eq!((&body["seqs"], &body["next"], &body["dropped"]), (&json!([]), &json!(3), &json!(true)));
    let (_, body, status) = d.ask(ask(machine(), events(1, 3..=3)));
    assert_eq!((status, body["code"].as_str()), (409, Some("timeline.dropped")));
}

#[test]
fn a_held_timeline_read_waits_within_the_waits_cap_and_is_woken_by_its_turns_batch_never_by_a_version() {
    let mut d = created();
    d.decider = Decider::new(Caps { waiters: PerRole::new(1, 1), ..Caps::default() });
    let Reply::HoldTimeline { waiter, timeout_ms, timeout_body } =
        d.plan(ask(owner(), read_timeline(None, 0, 20))).reply
    else {
        panic!("not held")
    };
    assert!((20_000..=21_000).contains(&timeout_ms));
    assert_eq!(
        serde_json::from_str::<Value>(&timeout_body).unwrap()["seqs"],
        json!([]),
        "its timeout answers what there is"
    );
    let Reply::Rendered(refused) = d.plan(ask(owner(), Op::Wait { after: 1, timeout_s: 30 })).reply else {
        panic!("not refused")
    };
    assert_eq!(refused.status, 429, "a held read counts against the waits' cap");
    let plan = d.plan(ask(machine(), report(1, ReportStatus::NeedsYou, "n")));
    d.db.apply(&plan.writes);
    let wake = d.decider.confirm(2).unwrap();
    assert!(wake.waiters.is_empty(), "a version wakes no held read");
    let plan = d.plan(ask(machine(), events(1, 1..=2)));
    assert_eq!(plan.wake_timeline, vec![(waiter, TimelineAsk { turn: 1, after: 0, limit: 100 })]);
    assert!(plan.waits(), "woken once the commit is confirmed");
    d.db.apply(&plan.writes);
    let Reply::Rendered(at_once) = d.plan(ask(owner(), read_timeline(None, 0, 20))).reply else { panic!("held") };
    assert_eq!(
        serde_json::from_str::<Value>(&at_once.body).unwrap()["seqs"],
        json!([1, 2]),
        "something to read answers at once"
    );
}

#[test]
fn a_machine_credential_gets_a_token_only_for_its_machines_hand_offs_created_since_it_enrolled_and_ends_none() {
    let mut d = Driver::new();
    let at = |inc: u64| creating("m1", inc, None, Placement::default());
    assert_eq!(d.ask(ask(owner(), at(100))).2, 201);
    let credential = |enrolled_at: u64| Caller {
        owner: "alice".into(),
        role: Role::Credential,
        incarnation: enrolled_at,
        hid: Some(ID.into()),
    };
    let mint = |machine: &str| Op::MachineToken {
        machine_token: "t2".into(),
        incarnation: 500,
        machine: Some(machine.into()),
    };
    let (plan, body, status) = d.ask(ask(credential(50), mint("m1")));
    assert_eq!((status, body["machine_token"].as_str()), (200, Some("t2")));
    assert!(plan.writes.is_empty(), "no floor raised: the token before lives on");
    assert_eq!(d.ask(ask(Caller { incarnation: 100, ..machine() }, Op::Get)).2, 200);
    let (_, body, status) = d.ask(ask(credential(50), mint("m2")));
    assert_eq!((status, body["code"].as_str()), (404, Some("handoff.not_found")), "another machine's hand-off");
    let (_, _, status) = d.ask(ask(credential(150), mint("m1")));
    assert_eq!(status, 404, "a hand-off made before the machine was enrolled is never taken");
    let (_, _, status) = d.ask(ask(credential(50), Op::Get));
    assert_eq!(status, 403, "a credential reads no hand-off");
}
