use super::*;
use proptest::prelude::*;

fn fresh() -> Record {
    Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000)
}

fn ok(record: &Record, command: Command) -> Applied<Record> {
    apply(record, &command, 2_000).expect("accepted")
}

fn report(turn: u64, status: ReportStatus, summary: Option<&str>) -> Command {
    Command::Report { turn, status, summary: summary.map(str::to_string) }
}

/// Turn 1 reported done and turn 2 opened: the usual second-turn starting point.
fn at_turn_two() -> Record {
    let r = ok(&fresh(), report(1, ReportStatus::Done, Some("built it"))).next;
    ok(&r, Command::OpenTurn { after: 1 }).next
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
    assert_eq!(apply(&r, &Command::OpenTurn { after: 2 }, 2), Err(Code::TurnConflict));
    let r2 = at_turn_two();
    let r2 = ok(&r2, report(2, ReportStatus::Done, None)).next;
    assert_eq!(apply(&r2, &Command::OpenTurn { after: 0 }, 2), Err(Code::TurnConflict));
}

#[test]
fn no_turn_opens_while_one_is_running_or_needs_you() {
    assert_eq!(apply(&fresh(), &Command::OpenTurn { after: 1 }, 2), Err(Code::TurnRunning));
    let r = ok(&fresh(), report(1, ReportStatus::NeedsYou, None)).next;
    assert_eq!(apply(&r, &Command::OpenTurn { after: 1 }, 2), Err(Code::TurnRunning));
}

#[test]
fn a_turn_opens_after_done_failed_or_cancelled() {
    for end in [report(1, ReportStatus::Done, None), report(1, ReportStatus::Failed, None), Command::Cancel { turn: None }] {
        let r = ok(&fresh(), end).next;
        assert_eq!(ok(&r, Command::OpenTurn { after: 1 }).next.turn, 2);
    }
}

#[test]
fn a_repeat_of_the_open_turn_call_answers_the_same_turn_without_moving() {
    let r = at_turn_two();
    let again = ok(&r, Command::OpenTurn { after: 1 });
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
    for c in [Command::OpenTurn { after: 1 }, report(1, ReportStatus::Done, None), Command::Cancel { turn: None }] {
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
        (0u64..6).prop_map(|after| Command::OpenTurn { after }),
        (0u64..6, status, summary).prop_map(|(turn, status, summary)| Command::Report { turn, status, summary }),
        proptest::option::of(0u64..6).prop_map(|turn| Command::Cancel { turn }),
        Just(Command::Close),
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
