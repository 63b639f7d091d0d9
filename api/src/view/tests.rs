use super::*;
use handoff_core::handoff::Handoff as Value_;
use handoff_core::package::TurnEntry;
use handoff_core::turn::Record;
use serde_json::json;

fn record() -> Record {
    let mut record = Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 0);
    record.summary = Some("built it".into());
    record.updated_at = 1_700_000_000_123;
    record
}

#[test]
fn a_row_shows_its_record_with_its_time_in_rfc3339() {
    let row = Row::from(&IndexRow::of(&record()));
    assert_eq!(
        serde_json::to_value(&row).unwrap(),
        json!({
            "id": "ho_1", "session": "s1", "machine": "m1", "size": "large", "turn": 1,
            "state": "open", "status": "running", "summary": "built it", "version": 1,
            "updated_at": "2023-11-14T22:13:20.123Z", "suggestion": null,
            "runtime": null, "package_version": null, "package_hash": null,
        })
    );
}

#[test]
fn the_record_answer_is_the_handoff_alone_with_every_field_present() {
    let body = record_answer(&Value_::create(record()), Role::Owner);
    let h = &body["handoff"];
    assert_eq!(body.as_object().unwrap().len(), 1);
    assert_eq!((h["created_at"].as_str(), h["updated_at"].as_str()), (Some("1970-01-01T00:00:00.000Z"), Some("2023-11-14T22:13:20.123Z")));
    for field in ["runtime", "package_version", "package_hash", "continued_from", "suggestion"] {
        assert_eq!(h[field], Value::Null, "{field} is present and null");
    }
    let back: Handoff = serde_json::from_value(h.clone()).unwrap();
    assert_eq!(back, Handoff::of(&Value_::create(record()), Role::Owner));
}

#[test]
fn a_turn_lists_with_its_lineage_fields() {
    let entry = TurnEntry {
        turn: 2,
        status: Status::Running,
        runtime: Some("claude-code".into()),
        package_version: Some(1),
        package_hash: Some("ab".repeat(32)),
        continued_from: Some(ContinuedFrom { turn: 1, runtime: Some("codex".into()) }),
        opened_at: 1_796_040_013_000,
        ended_at: None,
    };
    let v = serde_json::to_value(Turn::from(&entry)).unwrap();
    assert_eq!(v["continued_from"], json!({"turn": 1, "runtime": "codex"}));
    assert_eq!(v["package_version"], 1);
    assert_eq!(v["ended_at"], Value::Null);
    assert_eq!(v["opened_at"], "2026-11-30T12:00:13.000Z");
}

#[test]
fn an_item_answers_under_its_kind_beside_the_record() {
    let h = Value_::create(record());
    let decision = work::Decision {
        id: "dec_2".into(),
        statement: "use sqlite".into(),
        rationale: None,
        evidence: vec![],
        supersedes: Some("dec_1".into()),
        superseded_by: None,
        recorded_at: 5_000,
        by: Role::Owner,
    };
    let body = answer(&h, Role::Owner, &Effect::Item(Item::Decision(decision)));
    assert_eq!(body["decision"]["id"], "dec_2");
    assert_eq!(body["decision"]["recorded_at"], "1970-01-01T00:00:05.000Z");
    assert_eq!(body["decision"]["by"], "owner");
    assert_eq!(body["handoff"]["id"], "ho_1");
    let workspace = Item::Workspace { files: vec![FileInput { path: "a".into(), insertions: 1, deletions: 2 }], paths_kept: 7 };
    let body = answer(&h, Role::Owner, &Effect::Item(workspace));
    assert_eq!(body["workspace"], json!({"files": [{"path": "a", "insertions": 1, "deletions": 2}], "paths_kept": 7}));
    let body = answer(&h, Role::Owner, &Effect::Nothing);
    assert_eq!(body, json!({"handoff": serde_json::to_value(Handoff::of(&h, Role::Owner)).unwrap()}), "the record alone");
}

#[test]
fn the_work_answers_with_the_handoff_id() {
    let h = Value_::create(record());
    let input = WorkInput {
        title: "t".into(),
        goal: "g".into(),
        task_type: None,
        priority: None,
        constraints: vec!["c".into()],
        acceptance_criteria: vec![],
    };
    let body = answer(&h, Role::Owner, &Effect::Item(Item::Work(input)));
    assert_eq!(body["work"]["id"], "ho_1");
    assert_eq!(body["work"]["constraints"], json!(["c"]));
}

#[test]
fn a_rejection_shows_its_time_in_rfc3339() {
    let r = CoreRejection { reason: RejectReason::MissingContext, note: "which?".into(), at: 30_000, by: Role::Machine };
    assert_eq!(
        serde_json::to_value(Rejection::from(&r)).unwrap(),
        json!({"reason": "missing_context", "note": "which?", "rejected_at": "1970-01-01T00:00:30.000Z", "by": "machine"})
    );
}

#[test]
fn a_package_or_policy_answer_puts_its_fields_beside_the_record() {
    use handoff_core::handoff::{apply, Change};
    use handoff_core::package::{PackageRequest, RejectInput};
    use handoff_core::suggestion::Policy;
    let work = WorkInput { title: "t".into(), goal: "g".into(), task_type: None, priority: None, constraints: vec![], acceptance_criteria: vec![] };
    let h = apply(&Value_::create(record()), &Change::Work { command: work::Command::SetWork(work) }, Role::Owner, 1).unwrap().next;
    let request = PackageRequest { objective: "o".into(), purpose: "p".into(), runtime: "codex".into(), note: None };
    let compiled = apply(&h, &Change::Compile { request, dry_run: false }, Role::Owner, 2).unwrap();
    let body = answer(&compiled.next, Role::Owner, &compiled.answer);
    assert_eq!((body["package_version"].as_u64(), body["changed"].as_bool()), (Some(1), Some(true)));
    assert_eq!(body["package"]["format"], 1);
    let hash = body["package_hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64);
    assert_eq!(body["handoff"]["version"], compiled.next.record.version);

    let reject = RejectInput { reason: RejectReason::WrongRuntime, note: "not codex".into() };
    let rejected = apply(&compiled.next, &Change::Reject { input: reject }, Role::Machine, 3).unwrap();
    let body = answer(&rejected.next, Role::Owner, &rejected.answer);
    assert_eq!(body["state"], "rejected");
    assert_eq!(body["rejection"], json!({"reason": "wrong_runtime", "note": "not codex", "rejected_at": "1970-01-01T00:00:00.003Z", "by": "machine"}));

    let policy = Policy { runtimes: vec!["codex".into()], context_threshold_pct: 80, quota_threshold: None };
    let set = apply(&rejected.next, &Change::SetPolicy { policy }, Role::Owner, 4).unwrap();
    let body = answer(&set.next, Role::Owner, &set.answer);
    assert_eq!(body["policy"], json!({"runtimes": ["codex"], "context_threshold_pct": 80}));
    assert_eq!(body["handoff"]["version"], set.next.record.version);
}

#[test]
fn the_record_lists_the_actions_of_the_role_it_answers_and_the_owners_policy() {
    let h = Value_::create(record());
    let owner = Handoff::of(&h, Role::Owner);
    let machine = Handoff::of(&h, Role::Machine);
    assert_eq!((owner.actions, machine.actions), (vec!["cancel".to_string(), "close".into()], vec!["report".to_string()]));
    assert_eq!(owner.policy, None);
    let body = record_answer(&h, Role::Machine);
    assert_eq!(body["handoff"]["actions"], json!(["report"]));
    assert_eq!(body["handoff"]["policy"], Value::Null);
}

#[test]
fn a_preview_puts_the_turn_the_package_and_its_briefing_beside_the_record_as_it_is() {
    use handoff_core::handoff::{apply, Change};
    use handoff_core::package::PackageRequest;
    let work = WorkInput { title: "t".into(), goal: "g".into(), task_type: None, priority: None, constraints: vec![], acceptance_criteria: vec![] };
    let h = apply(&Value_::create(record()), &Change::Work { command: work::Command::SetWork(work) }, Role::Owner, 1).unwrap().next;
    let request = PackageRequest { objective: "o".into(), purpose: "p".into(), runtime: "codex".into(), note: None };
    let compiled = apply(&h, &Change::Compile { request, dry_run: false }, Role::Owner, 2).unwrap().next;
    let latest = compiled.ledger.latest().unwrap();
    let body = preview(&h, Role::Owner, 2, &latest, "the briefing");
    assert_eq!((body["turn"].as_u64(), body["briefing"].as_str(), body["state"].as_str()), (Some(2), Some("the briefing"), Some("offered")));
    assert_eq!(body["package_hash"].as_str(), Some(latest.package_hash.as_str()));
    assert_eq!(body["package"]["format"], 1);
    assert_eq!(body["handoff"], serde_json::to_value(Handoff::of(&h, Role::Owner)).unwrap(), "the record as it is, not as the open would leave it");
}
