use super::*;
use crate::wire::Json;
use handoff_core::decider::{HandoffAnswer, Wire};
use handoff_core::handoff::{self as core_handoff, apply, Change, Effect};
use handoff_core::package::{ContinuedFrom, PackageRequest, RejectInput, RejectReason};
use handoff_core::time::Timestamp;
use handoff_core::turn::Status;
use handoff_core::work::{Item, WorkInput};
use serde_json::{json, Value};

fn record() -> Record {
    let mut record = Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 0);
    record.summary = Some("built it".into());
    record.updated_at = Timestamp::from_ms(1_700_000_000_123);
    record
}

fn rendered(answer: HandoffAnswer<'_>) -> Value {
    serde_json::from_str(&Json.render(answer).body).unwrap()
}

fn changed(h: &core_handoff::Handoff, effect: &Effect) -> Value {
    rendered(HandoffAnswer::Changed { h, role: Role::Owner, effect })
}

fn work_input() -> WorkInput {
    WorkInput {
        title: "t".into(),
        goal: "g".into(),
        task_type: None,
        priority: None,
        constraints: vec!["c".into()],
        acceptance_criteria: vec![],
    }
}

#[test]
fn the_record_answer_is_the_handoff_alone_with_every_field_present() {
    let h = core_handoff::Handoff::create(record());
    let body = rendered(HandoffAnswer::Record { h: &h, role: Role::Owner });
    let shown = &body["handoff"];
    assert_eq!(body.as_object().unwrap().len(), 1);
    assert_eq!(
        (shown["created_at"].as_str(), shown["updated_at"].as_str()),
        (Some("1970-01-01T00:00:00.000Z"), Some("2023-11-14T22:13:20.123Z"))
    );
    for field in ["runtime", "package_version", "package_hash", "continued_from", "suggestion"] {
        assert_eq!(shown[field], Value::Null, "{field} is present and null");
    }
    assert!(shown.get("machine_runtimes").is_none(), "absent until the machine reports");
    let back: Handoff<'static> = serde_json::from_value(shown.clone()).unwrap();
    assert_eq!(back, Handoff::of(&h, Role::Owner));
}

#[test]
fn a_turn_lists_with_its_lineage_fields() {
    let entry = TurnEntry {
        turn: 2,
        status: Status::Running,
        runtime: Some("claude-code".into()),
        permission_mode: None,
        placement: Default::default(),
        package_version: Some(1),
        package_hash: Some("ab".repeat(32)),
        continued_from: Some(ContinuedFrom { turn: 1, runtime: Some("codex".into()) }),
        opened_at: Timestamp::from_ms(1_796_040_013_000),
        ended_at: None,
        prompt: Some("now the tests".into()),
        prompt_dropped: false,
        ..TurnEntry::outcome_unknown()
    };
    let v = serde_json::to_value(&entry).unwrap();
    // Every outcome a page shows after a reload: the summary, the reply, the questions.
    assert_eq!((&v["summary"], &v["reply"], &v["questions"]), (&Value::Null, &Value::Null, &json!([])));
    assert!(v.get("reply_dropped").is_none() && v.get("questions_dropped").is_none() && v.get("sync_mode").is_none());
    let earlier: TurnEntry = serde_json::from_value(json!({"turn": 1, "status": "done", "runtime": null, "package_version": null, "package_hash": null, "continued_from": null, "opened_at": "2026-11-30T12:00:13.000Z", "ended_at": null})).unwrap();
    assert_eq!(
        (earlier.reply, earlier.questions.len()),
        (None, 0),
        "an entry of the earlier build reads with no reply"
    );
    assert_eq!(v["prompt"], "now the tests");
    assert!(v.get("prompt_dropped").is_none(), "the marker only where the words were dropped");
    assert!(v.get("permission_mode").is_none(), "absent where no report named one, as before it was kept");
    let moded =
        serde_json::to_value(TurnEntry { permission_mode: Some("acceptEdits".into()), ..entry.clone() }).unwrap();
    assert_eq!(moded["permission_mode"], "acceptEdits");
    let dropped = TurnEntry { prompt: None, prompt_dropped: true, ..entry.clone() };
    let d = serde_json::to_value(&dropped).unwrap();
    assert_eq!((&d["prompt"], &d["prompt_dropped"]), (&Value::Null, &json!(true)));
    assert_eq!(v["continued_from"], json!({"turn": 1, "runtime": "codex"}));
    assert_eq!(v["package_version"], 1);
    assert_eq!(v["ended_at"], Value::Null);
    assert_eq!(v["opened_at"], "2026-11-30T12:00:13.000Z");
}

#[test]
fn an_item_answers_under_its_kind_beside_the_record() {
    let h = core_handoff::Handoff::create(record());
    let decision = work::Decision {
        id: "dec_2".into(),
        statement: "use sqlite".into(),
        rationale: None,
        evidence: vec![],
        supersedes: Some("dec_1".into()),
        superseded_by: None,
        recorded_at: Timestamp::from_ms(5_000),
        by: Role::Owner,
    };
    let body = changed(&h, &Effect::Item(Item::Decision(decision)));
    assert_eq!(body["decision"]["id"], "dec_2");
    assert_eq!(body["decision"]["recorded_at"], "1970-01-01T00:00:05.000Z");
    assert_eq!(body["decision"]["by"], "owner");
    assert_eq!(body["handoff"]["id"], "ho_1");
    let workspace =
        Item::Workspace { files: vec![FileInput { path: "a".into(), insertions: 1, deletions: 2 }], paths_kept: 7 };
    let body = changed(&h, &Effect::Item(workspace));
    assert_eq!(body["workspace"], json!({"files": [{"path": "a", "insertions": 1, "deletions": 2}], "paths_kept": 7}));
    let body = changed(&h, &Effect::Nothing);
    assert_eq!(
        body,
        json!({"handoff": serde_json::to_value(Handoff::of(&h, Role::Owner)).unwrap()}),
        "the record alone"
    );
}

#[test]
fn the_work_answers_with_the_handoff_id() {
    let h = core_handoff::Handoff::create(record());
    let body = changed(&h, &Effect::Item(Item::Work(work_input())));
    assert_eq!(body["work"]["id"], "ho_1");
    assert_eq!(body["work"]["constraints"], json!(["c"]));
    let read: Work<'static> = serde_json::from_value(body["work"].clone()).unwrap();
    assert_eq!((read.id.as_ref(), read.spec.as_ref()), ("ho_1", &work_input()), "read back as it was set");
}

#[test]
fn a_rejection_shows_its_time_in_rfc3339_and_reads_one_stored_before_it_was_named_so() {
    let r = Rejection {
        reason: RejectReason::MissingContext,
        note: "which?".into(),
        rejected_at: Timestamp::from_ms(30_000),
        by: Role::Machine,
    };
    let shown = serde_json::to_value(&r).unwrap();
    assert_eq!(
        shown,
        json!({"reason": "missing_context", "note": "which?", "rejected_at": "1970-01-01T00:00:30.000Z", "by": "machine"})
    );
    let stored = json!({"reason": "missing_context", "note": "which?", "at": 30_000, "by": "machine"});
    assert_eq!(serde_json::from_value::<Rejection>(stored).unwrap(), r);
}

fn with_work() -> core_handoff::Handoff {
    apply(
        &core_handoff::Handoff::create(record()),
        &Change::Work { command: work::Command::SetWork(work_input()) },
        Role::Owner,
        1,
    )
    .unwrap()
    .next
}

fn request() -> PackageRequest {
    PackageRequest { objective: "o".into(), purpose: "p".into(), runtime: "codex".into(), note: None, model: None }
}

#[test]
fn a_package_or_policy_answer_puts_its_fields_beside_the_record() {
    let compiled =
        apply(&with_work(), &Change::Compile { request: request(), dry_run: false }, Role::Owner, 2).unwrap();
    let body = changed(&compiled.next, &compiled.effect);
    assert_eq!((body["package_version"].as_u64(), body["changed"].as_bool()), (Some(1), Some(true)));
    assert_eq!(body["package"]["format"], 1);
    assert_eq!(body["package_hash"].as_str().map(str::len), Some(64));
    assert_eq!(body["handoff"]["version"], compiled.next.record.version);

    let reject = RejectInput { reason: RejectReason::WrongRuntime, note: "not codex".into() };
    let rejected = apply(&compiled.next, &Change::Reject { input: reject }, Role::Machine, 3).unwrap();
    let body = changed(&rejected.next, &rejected.effect);
    assert_eq!(body["state"], "rejected");
    assert_eq!(
        body["rejection"],
        json!({"reason": "wrong_runtime", "note": "not codex", "rejected_at": "1970-01-01T00:00:00.003Z", "by": "machine"})
    );
    let read: LatestAnswer = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(
        (read.package_version, read.package["format"].as_u64()),
        (1, Some(1)),
        "a client reads the package as JSON"
    );

    let policy = Policy { runtimes: vec!["codex".into()], context_threshold_pct: 80, quota_threshold: None };
    let set = apply(&rejected.next, &Change::SetPolicy { policy }, Role::Owner, 4).unwrap();
    let body = changed(&set.next, &set.effect);
    assert_eq!(body["policy"], json!({"runtimes": ["codex"], "context_threshold_pct": 80}));
    assert_eq!(body["handoff"]["version"], set.next.record.version);
}

#[test]
fn the_record_lists_the_actions_of_the_role_it_answers_and_the_owners_policy() {
    let h = core_handoff::Handoff::create(record());
    let owner = Handoff::of(&h, Role::Owner);
    let machine = Handoff::of(&h, Role::Machine);
    assert_eq!(
        (owner.actions, machine.actions),
        (vec![Cow::from("cancel"), "close".into(), "steer".into()], vec![Cow::from("report")])
    );
    assert_eq!(owner.policy, None);
    let body = rendered(HandoffAnswer::Record { h: &h, role: Role::Machine });
    assert_eq!(body["handoff"]["actions"], json!(["report"]));
    assert_eq!(body["handoff"]["policy"], Value::Null);
}

#[test]
fn a_preview_puts_the_turn_the_package_and_its_briefing_beside_the_record_as_it_is() {
    let h = with_work();
    let compiled = apply(&h, &Change::Compile { request: request(), dry_run: false }, Role::Owner, 2).unwrap().next;
    let latest = compiled.ledger.latest().unwrap();
    let body = rendered(HandoffAnswer::Preview {
        h: &h,
        role: Role::Owner,
        turn: 2,
        latest: &latest,
        briefing: "the briefing",
    });
    assert_eq!(
        (body["turn"].as_u64(), body["briefing"].as_str(), body["state"].as_str()),
        (Some(2), Some("the briefing"), Some("offered"))
    );
    assert_eq!(body["package_hash"].as_str(), Some(latest.package_hash.as_str()));
    assert_eq!(body["package"]["format"], 1);
    assert_eq!(
        body["handoff"],
        serde_json::to_value(Handoff::of(&h, Role::Owner)).unwrap(),
        "the record as it is, not as the open would leave it"
    );
}
