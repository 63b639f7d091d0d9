use super::*;
use crate::fixtures;
use crate::package::RejectReason;
use crate::placement::Placement;
use crate::runtimes::Runtime;
use crate::suggestion::{Limit, Reason};
use crate::turn::{State, Status};
use crate::work::WorkInput;

fn fresh() -> Handoff {
    Handoff::create(Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000))
}

fn ok(h: &Handoff, change: Change, by: Role) -> Outcome {
    apply(h, &change, by, 5_000).expect("accepted")
}

fn report(turn: u64, status: ReportStatus) -> Change {
    fixtures::report(turn, status).change()
}

fn open(after: u64, package: Option<PackageRequest>) -> Change {
    Change::Turn { command: TurnCommand::OpenTurn { after, prompt: None }, unmet: None, usage: None, package }
}

fn set_work() -> Change {
    Change::Work {
        command: work::Command::SetWork(WorkInput {
            title: "Ship it".into(),
            goal: "Make the tests pass".into(),
            task_type: None,
            priority: None,
            constraints: vec!["no new deps".into()],
            acceptance_criteria: vec!["tests green".into(), "docs updated".into()],
        }),
    }
}

fn request(runtime: &str) -> PackageRequest {
    PackageRequest {
        objective: "finish".into(),
        purpose: "handover".into(),
        runtime: runtime.into(),
        note: None,
        model: None,
    }
}

#[test]
fn every_change_moves_the_version_once_and_a_no_op_moves_nothing() {
    let h = fresh();
    let worked = ok(&h, set_work(), Role::Owner);
    assert!(worked.moved && worked.dirty.work);
    assert_eq!(worked.next.record.version, 2);
    let again = ok(&worked.next, set_work(), Role::Owner);
    assert!(!again.moved);
    assert_eq!(again.next, worked.next);
}

#[test]
fn the_lineage_follows_every_turn_with_its_status_and_times() {
    let h = ok(&fresh(), report(1, ReportStatus::Done), Role::Machine).next;
    assert_eq!((h.lineage[0].status, h.lineage[0].ended_at), (Status::Done, Some(5_000.into())));
    let h = ok(&h, open(1, None), Role::Owner).next;
    assert_eq!(h.lineage.len(), 2);
    assert_eq!(h.lineage[1].continued_from.as_ref().map(|c| c.turn), Some(1));
    let h = ok(&h, fixtures::turn(TurnCommand::Close), Role::Owner).next;
    assert_eq!((h.record.state, h.lineage[1].status), (State::Closed, Status::Cancelled));
}

#[test]
fn a_turn_handed_to_a_runtime_compiles_its_package_in_the_same_change() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let h = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let before = h.record.version;
    let out = ok(&h, open(1, Some(request("codex"))), Role::Owner);
    let r = &out.next.record;
    assert_eq!(r.version, before + 1, "one version move for the turn and its package");
    assert_eq!((r.turn, r.briefed.runtime.as_deref(), r.briefed.package_version), (2, Some("codex"), Some(1)));
    assert_eq!(r.briefed.package_hash, out.next.ledger.current.as_ref().map(|o| o.hash.clone()));
    assert_eq!(out.next.lineage[1].runtime.as_deref(), Some("codex"));
    assert!(out.dirty.ledger, "the package compiled with the open is written with it");
    // The next plain turn continues from the handed-off one.
    let h = ok(&out.next, report(2, ReportStatus::Done), Role::Machine).next;
    let h = ok(&h, open(2, None), Role::Owner).next;
    assert_eq!(h.record.continued_from.as_ref().and_then(|c| c.runtime.as_deref()), Some("codex"));
    assert_eq!((h.record.briefed.runtime.clone(), h.record.briefed.package_hash.clone()), (None, None));
}

#[test]
fn a_plain_turns_runtime_named_by_a_running_report_reaches_its_lineage_entry() {
    let h = ok(&fresh(), report(1, ReportStatus::Done), Role::Machine).next;
    let h = ok(&h, open(1, None), Role::Owner).next;
    let named = fixtures::report(2, ReportStatus::Running).runtime("codex").change();
    let out = ok(&h, named, Role::Machine);
    assert!(out.moved);
    assert_eq!(
        (out.next.record.briefed.runtime.as_deref(), out.next.lineage[1].runtime.as_deref()),
        (Some("codex"), Some("codex"))
    );
    assert_eq!(out.dirty.lineage_from, Some(1));
    assert_eq!(
        (out.next.lineage[0].ended_at.is_some(), out.next.lineage[1].ended_at),
        (true, None),
        "a running turn has not ended"
    );
    let other = fixtures::report(2, ReportStatus::Running).runtime("claude-code").change();
    let refused = apply(&out.next, &other, Role::Machine, 6_000).unwrap_err();
    assert_eq!(refused.code, Code::TurnConflict);
    assert!(refused.message.contains("runs codex"), "{}", refused.message);
}

#[test]
fn each_lineage_entry_keeps_the_permission_mode_its_turn_ran_in() {
    let in_mode = |turn: u64, mode: &str| fixtures::report(turn, ReportStatus::Running).permission_mode(mode).change();
    let h = ok(&fresh(), in_mode(1, "acceptEdits"), Role::Machine).next;
    assert_eq!(
        (h.record.permission_mode.as_deref(), h.lineage[0].permission_mode.as_deref()),
        (Some("acceptEdits"), Some("acceptEdits"))
    );
    let h = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let h = ok(&h, open(1, None), Role::Owner).next;
    assert_eq!(
        (h.record.permission_mode.as_deref(), h.lineage[1].permission_mode.as_deref()),
        (None, None),
        "turn 2 has no mode until a report names one"
    );
    let out = ok(&h, in_mode(2, "plan"), Role::Machine);
    assert_eq!(out.dirty.lineage_from, Some(1));
    let h = out.next;
    assert_eq!(
        (h.lineage[0].permission_mode.as_deref(), h.lineage[1].permission_mode.as_deref()),
        (Some("acceptEdits"), Some("plan")),
        "each turn keeps its own"
    );
    assert!(
        serde_json::to_value(&fresh().lineage[0]).unwrap().get("permission_mode").is_none(),
        "an entry without a mode keeps its bytes"
    );
}

#[test]
fn a_hand_off_that_cannot_compile_opens_no_turn() {
    let h = ok(&fresh(), report(1, ReportStatus::Done), Role::Machine).next;
    let refused = apply(&h, &open(1, Some(request("codex"))), Role::Owner, 6_000).unwrap_err();
    assert_eq!(refused.code, Code::RequestInvalid, "no work set: nothing to brief with");
}

#[test]
fn a_final_report_records_unmet_criteria_until_a_later_final_report_leaves_them_out() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let failed = fixtures::report(1, ReportStatus::Failed).unmet(vec![1]).change();
    let h = ok(&h, failed, Role::Machine).next;
    assert_eq!(h.work.unmet, vec![1]);
    let h = ok(&h, open(1, None), Role::Owner).next;
    let h = ok(&h, report(2, ReportStatus::Done), Role::Machine).next;
    assert!(h.work.unmet.is_empty());
}

fn runtimes(list: &[(&str, Option<bool>)]) -> Change {
    let runtimes = list
        .iter()
        .map(|(name, signed_in)| Runtime { name: name.to_string(), version: None, signed_in: *signed_in })
        .collect();
    Change::SetRuntimes { input: RuntimesInput { runtimes, checked_at: None } }
}

/// A policy naming both runtimes, on a machine that reported both installed and signed in.
fn with_policy() -> Handoff {
    let policy = Policy {
        runtimes: vec!["claude-code".into(), "codex".into()],
        context_threshold_pct: 80,
        quota_threshold: Some(3),
    };
    let h = ok(&fresh(), Change::SetPolicy { policy }, Role::Owner).next;
    ok(&h, runtimes(&[("claude-code", Some(true)), ("codex", Some(true))]), Role::Machine).next
}

#[test]
fn a_runtimes_report_replaces_the_last_whole_with_its_time_and_only_the_machine_sends_it() {
    let h = ok(&fresh(), runtimes(&[("codex", Some(true)), ("claude-code", None)]), Role::Machine);
    assert!(h.moved);
    let reported = h.next.record.machine_runtimes.clone().unwrap();
    assert_eq!((reported.runtimes.len(), reported.reported_at.ms()), (2, 5_000));
    let again = apply(&h.next, &runtimes(&[("codex", Some(false))]), Role::Machine, 9_000).unwrap();
    assert!(again.moved, "a report refreshes its time, so it is always a change");
    let reported = again.next.record.machine_runtimes.clone().unwrap();
    assert_eq!((reported.runtimes.len(), reported.reported_at.ms()), (1, 9_000), "replaced whole, not merged");
    let same = apply(&again.next, &runtimes(&[("codex", Some(false))]), Role::Machine, 9_000).unwrap();
    assert!(!same.moved, "the same report of the same moment again changes nothing");
    let by_owner = apply(&h.next, &runtimes(&[]), Role::Owner, 9_000).unwrap_err();
    assert_eq!(by_owner.code, Code::AuthForbidden);
    let closed = ok(&fresh(), fixtures::turn(TurnCommand::Close), Role::Owner).next;
    assert_eq!(apply(&closed, &runtimes(&[]), Role::Machine, 9_000).unwrap_err().code, Code::HandoffClosed);
}

#[test]
fn a_handoff_to_a_runtime_reported_absent_or_signed_out_is_refused_and_changes_nothing() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let h = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let unreported = ok(&h, open(1, Some(request("aider"))), Role::Owner);
    assert_eq!(
        unreported.next.record.briefed.runtime.as_deref(),
        Some("aider"),
        "an unreported machine may be handed anything"
    );
    let h =
        ok(&h, runtimes(&[("codex", Some(false)), ("claude-code", Some(true)), ("gemini", None)]), Role::Machine).next;
    for absent_or_signed_out in ["aider", "codex"] {
        let refused = apply(&h, &open(1, Some(request(absent_or_signed_out))), Role::Owner, 5_000).unwrap_err();
        assert_eq!(refused.code, Code::RuntimeUnavailable, "{absent_or_signed_out}");
    }
    for allowed in ["claude-code", "gemini"] {
        assert_eq!(ok(&h, open(1, Some(request(allowed))), Role::Owner).next.record.turn, 2, "{allowed}");
    }
    let later = 5_000 + crate::limits::RUNTIMES_FRESH_MS + 1;
    assert!(apply(&h, &open(1, Some(request("codex"))), Role::Owner, later).is_ok(), "a stale report refuses nothing");
}

fn report_usage(turn: u64, status: ReportStatus, usage: Usage) -> Change {
    fixtures::report(turn, status).usage(usage).change()
}

#[test]
fn a_suggestion_is_raised_once_per_turn_and_reason_and_opens_nothing() {
    let h = with_policy();
    let hot = Usage { context_used: Some(90), context_window: Some(100), ..Usage::default() };
    let out = ok(&h, report_usage(1, ReportStatus::Running, hot.clone()), Role::Machine);
    assert!(out.moved, "a suggestion is a version move even on an unchanged status");
    let s = out.next.record.suggestion.clone().unwrap();
    assert_eq!((s.reason, s.turn, s.runtimes.len()), (Reason::ContextThreshold, 1, 2));
    assert_eq!((out.next.record.turn, out.next.record.briefed.runtime.clone()), (1, None), "nothing switched");
    let again = ok(&out.next, report_usage(1, ReportStatus::Running, hot), Role::Machine);
    assert!(!again.moved, "raised once per turn and reason");
    let capped = Usage { limit: Some(Limit::ProviderLimit), ..Usage::default() };
    let ended = ok(&again.next, report_usage(1, ReportStatus::Failed, capped), Role::Machine).next;
    assert_eq!(ended.record.suggestion.as_ref().map(|s| s.reason.clone()), Some(Reason::ProviderLimit));
    let opened = ok(&ended, open(1, None), Role::Owner).next;
    assert_eq!(opened.record.suggestion, None, "cleared when the next turn opens");
    let quota = Usage { quota_remaining: Some(3), ..Usage::default() };
    let q = ok(&opened, report_usage(2, ReportStatus::Running, quota), Role::Machine).next;
    assert_eq!(q.record.suggestion.as_ref().map(|s| s.reason.clone()), Some(Reason::QuotaThreshold));
}

#[test]
fn without_a_policy_nothing_is_suggested() {
    let hot = Usage { context_used: Some(99), context_window: Some(100), ..Usage::default() };
    let out = ok(&fresh(), report_usage(1, ReportStatus::Running, hot), Role::Machine);
    assert!(!out.moved);
    assert_eq!(out.next.record.suggestion, None);
}

#[test]
fn package_routes_move_the_version_only_when_the_ledger_moves() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let compile = Change::Compile { request: request("codex"), dry_run: false };
    let first = ok(&h, compile.clone(), Role::Owner);
    assert!(first.moved);
    assert!(matches!(&first.effect, Effect::Compiled(c) if c.package_version == 1 && c.changed));
    let again = ok(&first.next, compile.clone(), Role::Owner);
    assert!(!again.moved);
    assert!(matches!(&again.effect, Effect::Compiled(c) if c.package_version == 1 && !c.changed));
    let dry = ok(&first.next, Change::Compile { request: request("other"), dry_run: true }, Role::Owner);
    assert!(!dry.moved);
    assert!(
        matches!(&dry.effect, Effect::Compiled(c) if c.package_version == 2),
        "a preview of the next version, not written"
    );
    let reject = Change::Reject { input: RejectInput { reason: RejectReason::MissingContext, note: "no logs".into() } };
    let rejected = ok(&first.next, reject, Role::Machine);
    assert!(rejected.moved);
}

#[test]
fn each_change_names_its_kind_in_the_history() {
    let policy = Policy { runtimes: vec!["codex".into()], context_threshold_pct: 80, quota_threshold: None };
    let cases: Vec<(Change, &str)> = vec![
        (open(1, None), "turn_opened"),
        (open(1, Some(request("codex"))), "turn_handed_off"),
        (report(1, ReportStatus::Done), "report"),
        (fixtures::turn(TurnCommand::Cancel { turn: None }), "cancel"),
        (fixtures::turn(TurnCommand::Close), "close"),
        (set_work(), "work"),
        (Change::SetPolicy { policy }, "policy"),
        (runtimes(&[]), "runtimes"),
        (Change::Accept { package_hash: "0".repeat(64) }, "package_accepted"),
    ];
    for (change, kind) in cases {
        assert_eq!(change.kind().as_str(), kind, "{change:?}");
    }
}

#[test]
fn an_answer_is_the_owners_its_refusals_name_what_is_wrong_and_the_lineage_runs_again() {
    let asked = fixtures::report(1, ReportStatus::NeedsYou).question(fixtures::permission("Bash: ls")).change();
    let h = ok(&fresh(), asked, Role::Machine).next;
    assert_eq!(h.lineage.last().map(|t| t.status), Some(Status::NeedsYou));
    let answer = |option: &str| {
        fixtures::turn(TurnCommand::Answer { question: "q_2_1000".into(), option: option.into(), note: None })
    };
    assert_eq!(apply(&h, &answer("allow"), Role::Machine, 5_000).unwrap_err().code, Code::AuthForbidden);
    let invalid = apply(&h, &answer("maybe"), Role::Owner, 5_000).unwrap_err();
    assert_eq!(invalid.code, Code::RequestInvalid);
    assert!(invalid.message.starts_with("option: "), "{}", invalid.message);
    let out = ok(&h, answer("allow"), Role::Owner);
    assert_eq!(
        (out.next.record.status, out.next.lineage.last().map(|t| t.status)),
        (Status::Running, Some(Status::Running))
    );
    assert_eq!(answer("allow").kind(), EventKind::Answer);
    let refused = apply(&out.next, &answer("deny"), Role::Owner, 5_000).unwrap_err();
    assert_eq!(refused.code, Code::QuestionAnswered);
    assert!(refused.message.contains("\"allow\""), "{}", refused.message);
    // A stale id names the open question; with none open, the refusal says so.
    let stale = fixtures::turn(TurnCommand::Answer { question: "q_9_1000".into(), option: "allow".into(), note: None });
    let refused = apply(&h, &stale, Role::Owner, 5_000).unwrap_err();
    assert_eq!(refused.code, Code::QuestionStale);
    assert!(refused.message.contains("another question than the open one, q_2"), "{}", refused.message);
    let refused = apply(&fresh(), &answer("allow"), Role::Owner, 5_000).unwrap_err();
    assert_eq!(refused.code, Code::QuestionNone);
    assert!(refused.message.starts_with("no question is open"), "{}", refused.message);
}

fn open_saying(after: u64, prompt: Option<&str>, package: Option<PackageRequest>) -> Change {
    Change::Turn {
        command: TurnCommand::OpenTurn { after, prompt: prompt.map(str::to_string) },
        unmet: None,
        usage: None,
        package,
    }
}

#[test]
fn a_repeated_open_is_the_same_turn_only_with_the_prompt_and_the_hand_off_taken() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let h = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let h = ok(&h, open_saying(1, Some("write the docs"), Some(request("codex"))), Role::Owner).next;
    assert_eq!(h.record.prompt.as_deref(), Some("write the docs"));
    assert_eq!(
        h.lineage.last().map(|e| e.prompt.as_deref()),
        Some(Some("write the docs")),
        "the lineage carries the turn's words"
    );
    assert!(!ok(&h, open_saying(1, Some("write the docs"), Some(request("codex"))), Role::Owner).moved);
    let other_objective = PackageRequest { objective: "something else".into(), ..request("codex") };
    let noted = PackageRequest { note: Some("n".into()), ..request("codex") };
    for (prompt, package) in [
        (Some("write the tests"), Some(request("codex"))),
        (None, Some(request("codex"))),
        (Some("write the docs"), None),
        (Some("write the docs"), Some(request("claude-code"))),
        (Some("write the docs"), Some(other_objective)),
        (Some("write the docs"), Some(noted)),
    ] {
        let refusal = apply(&h, &open_saying(1, prompt, package.clone()), Role::Owner, 6_000).unwrap_err();
        assert_eq!(refusal.code, Code::TurnConflict, "{prompt:?} {package:?}");
        assert!(refusal.message.starts_with("turn 2 was opened already"), "{}", refusal.message);
    }
    // A package compiled later leaves the runtime to compare: the same request is the same turn.
    let recompiled = ok(
        &h,
        Change::Compile { request: PackageRequest { objective: "later".into(), ..request("codex") }, dry_run: false },
        Role::Owner,
    )
    .next;
    assert!(!ok(&recompiled, open_saying(1, Some("write the docs"), Some(request("codex"))), Role::Owner).moved);
    assert_eq!(
        apply(&recompiled, &open_saying(1, Some("write the docs"), Some(request("gemini"))), Role::Owner, 6_000)
            .unwrap_err()
            .code,
        Code::TurnConflict
    );
    // A plain turn repeated with a hand-off is another request too.
    let plain = ok(&fresh(), report(1, ReportStatus::Done), Role::Machine).next;
    let plain = ok(&plain, open_saying(1, Some("go on"), None), Role::Owner).next;
    assert!(!ok(&plain, open_saying(1, Some("go on"), None), Role::Owner).moved);
    assert_eq!(
        apply(&plain, &open_saying(1, Some("go on"), Some(request("codex"))), Role::Owner, 6_000).unwrap_err().code,
        Code::TurnConflict
    );
}

#[test]
fn the_package_carries_none_of_the_owners_words() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let h = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let with = ok(&h, open_saying(1, Some("the owner's words"), Some(request("codex"))), Role::Owner).next;
    let without = ok(&h, open_saying(1, None, Some(request("codex"))), Role::Owner).next;
    let (a, b) = (with.ledger.current.unwrap(), without.ledger.current.unwrap());
    assert_eq!((a.hash, a.package), (b.hash, b.package), "the package and its hash do not depend on the prompt");
}

#[test]
fn a_create_with_a_prompt_gives_turn_one_its_words_and_remembers_them_for_a_repeat() {
    let mut r = Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000);
    r.prompt = Some("fix the login bug".into());
    let h = Handoff::create(r);
    assert_eq!(h.lineage[0].prompt.as_deref(), Some("fix the login bug"));
    assert_eq!(h.check_create_again("m1", "large", Some("fix the login bug"), &Placement::default()), Ok(()));
    assert_eq!(h.check_create_again("m1", "large", None, &Placement::default()), Ok(()), "no prompt: a look-up");
    assert_eq!(
        h.check_create_again("m1", "large", Some("fix the logout bug"), &Placement::default()),
        Err(Code::HandoffConflict)
    );
    assert_eq!(h.check_create_again("m2", "large", None, &Placement::default()), Err(Code::HandoffConflict));
    assert_eq!(
        fresh().check_create_again("m1", "large", Some("words"), &Placement::default()),
        Err(Code::HandoffConflict),
        "turn 1 had none"
    );
}

#[test]
fn an_open_that_names_another_turn_is_a_turn_conflict_saying_so_not_a_repeat() {
    let h = ok(&fresh(), report(1, ReportStatus::Done), Role::Machine).next;
    let h = ok(&h, open_saying(1, Some("go on"), None), Role::Owner).next;
    for after in [0, 5] {
        let refusal = apply(&h, &open_saying(after, Some("go on"), None), Role::Owner, 6_000).unwrap_err();
        assert_eq!(refusal.code, Code::TurnConflict);
        assert!(refusal.message.starts_with("the request names another turn"), "{after}: {}", refusal.message);
    }
}

// ---- Every outcome a turn keeps. ----

fn saying(turn: u64, status: ReportStatus, summary: &str, reply: Option<&str>) -> Change {
    fixtures::report(turn, status).says(summary).reply(reply).change()
}

fn asking(turn: u64, text: &str) -> Change {
    let question = crate::question::QuestionInput {
        kind: crate::question::Kind::Permission,
        text: text.into(),
        input: Some(format!("run {text}")),
        options: vec![crate::question::Choice { id: "allow".into(), label: "Allow".into() }],
    };
    fixtures::report(turn, ReportStatus::NeedsYou).question(question).change()
}

fn answering(h: &Handoff) -> Change {
    let id = h.record.question.as_ref().expect("a question is open").id.clone();
    fixtures::turn(TurnCommand::Answer { question: id, option: "allow".into(), note: Some("go".into()) })
}

#[test]
fn a_turns_entry_keeps_its_summary_reply_sync_mode_and_each_question_with_its_answer() {
    let mut h = fresh();
    let running = fixtures::report(1, ReportStatus::Running).sync_mode(crate::timeline::SyncMode::Full).change();
    h = ok(&h, running, Role::Machine).next;
    h = ok(&h, asking(1, "ls"), Role::Machine).next;
    h = ok(&h, answering(&h), Role::Owner).next;
    h = ok(&h, asking(1, "rm"), Role::Machine).next;
    let done = ok(&h, saying(1, ReportStatus::Done, "done", Some("The whole answer.")), Role::Machine);
    assert_eq!(done.dirty.lineage_from, Some(0), "the entry is written with the change");
    let entry = &done.next.lineage[0];
    assert_eq!((entry.summary.as_deref(), entry.reply.as_deref()), (Some("done"), Some("The whole answer.")));
    assert_eq!(entry.sync_mode, Some(crate::timeline::SyncMode::Full));
    let picks: Vec<Option<&str>> =
        entry.questions.iter().map(|q| q.answer.as_ref().map(|a| a.option.as_str())).collect();
    assert_eq!(picks, [Some("allow"), None], "the answered one with its answer, the withdrawn one without");
    assert_eq!(entry.questions[0].input.as_deref(), Some("run ls"));
    let next = ok(&done.next, open(1, None), Role::Owner).next;
    assert_eq!((next.record.reply.as_deref(), next.record.sync_mode), (None, None), "a new turn starts with none");
    assert_eq!(next.lineage[0].reply.as_deref(), Some("The whole answer."), "the ended turn keeps its own");
}

#[test]
fn past_the_questions_kept_per_turn_the_oldest_goes_and_is_counted() {
    let mut h = fresh();
    let asked = QUESTIONS_PER_TURN_KEPT_MAX + 3;
    for n in 0..asked {
        h = ok(&h, asking(1, &format!("q{n}")), Role::Machine).next;
    }
    let entry = &h.lineage[0];
    assert_eq!(entry.questions.len(), QUESTIONS_PER_TURN_KEPT_MAX);
    assert_eq!(entry.questions_dropped, 3);
    assert_eq!(entry.questions[0].text, "q3", "the newest are kept");
}

#[test]
fn a_turns_reply_and_questions_go_with_its_prompt_when_it_leaves_the_newest_turns_kept() {
    let mut h = fresh();
    h = ok(&h, asking(1, "ls"), Role::Machine).next;
    h = ok(&h, saying(1, ReportStatus::Done, "one", Some("Turn one's answer.")), Role::Machine).next;
    for turn in 1..=PROMPT_TURNS_KEPT_MAX {
        h = ok(&h, open(turn, None), Role::Owner).next;
        let out = ok(&h, saying(turn + 1, ReportStatus::Done, "d", Some("r")), Role::Machine);
        h = out.next;
    }
    let first = h.lineage.iter().find(|e| e.turn == 1).expect("turn 1 is still in the tail");
    assert_eq!((first.reply.as_deref(), first.reply_dropped), (None, true));
    assert_eq!((first.questions.len(), first.questions_dropped), (0, 1));
    assert_eq!(first.summary.as_deref(), Some("one"), "the summary, a short line, stays");
    let second = h.lineage.iter().find(|e| e.turn == 2).unwrap();
    assert_eq!((second.reply.as_deref(), second.reply_dropped), (Some("r"), false));
}

#[test]
fn the_package_carries_no_reply_and_no_question_and_its_hash_does_not_depend_on_them() {
    let h = ok(&fresh(), set_work(), Role::Owner).next;
    let plain = ok(&h, report(1, ReportStatus::Done), Role::Machine).next;
    let asked = ok(&h, asking(1, "SECRET-QUESTION"), Role::Machine).next;
    let asked = ok(&asked, answering(&asked), Role::Owner).next;
    let said = ok(&asked, saying(1, ReportStatus::Done, "", Some("SECRET-REPLY")), Role::Machine).next;
    let with = ok(&said, open(1, Some(request("codex"))), Role::Owner).next;
    let without = ok(&plain, open(1, Some(request("codex"))), Role::Owner).next;
    let (a, b) = (with.ledger.current.unwrap(), without.ledger.current.unwrap());
    let text = serde_json::to_string(&a.package).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
    assert_eq!((a.hash, a.package), (b.hash, b.package), "the package and its hash do not depend on them");
}

/// Each lineage entry keeps its turn's steers with its other outcomes; a steer moves one
/// version and writes the current entry.
#[test]
fn each_lineage_entry_keeps_its_turns_steers() {
    let steer = |turn: u64, words: &str| fixtures::turn(TurnCommand::Steer { turn, prompt: words.into() });
    let h = fresh();
    let steered = ok(&h, steer(1, "use SQLite"), Role::Owner);
    assert_eq!(steered.next.record.version, h.record.version + 1);
    assert_eq!(steered.dirty.lineage_from, Some(0));
    assert_eq!(steered.next.lineage[0].steers, steered.next.record.steers);
    let refused = apply(&steered.next, &steer(1, "x"), Role::Machine, 5_000).unwrap_err();
    assert_eq!(refused.code, crate::error::Code::AuthForbidden, "only the owner steers");
    let done = ok(&steered.next, report(1, ReportStatus::Done), Role::Machine).next;
    let two = ok(&done, open(1, None), Role::Owner).next;
    assert_eq!(two.lineage[0].steers.len(), 1, "turn 1 keeps its steer");
    assert_eq!(two.lineage[0].steers[0].prompt, "use SQLite");
    assert!(two.lineage[1].steers.is_empty() && two.record.steers.is_empty());
}
