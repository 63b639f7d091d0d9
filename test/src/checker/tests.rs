//! Recorded histories, written out by hand: the kinds of non-linearisable history that matter
//! for a hand-off (a lost change, a version seen then gone, two winners of a race, a stale
//! report applied), each rejected, and linearisable ones accepted, some in one order only.

use super::*;
use crate::model::Status;
use handoff_core::turn::ReportStatus;

/// An open hand-off as an answer shows it.
fn open(version: u64, turn: u64, status: Status, summary: Option<&str>) -> Snapshot {
    Snapshot { turn, closed: false, status, summary: summary.map(str::to_string), version }
}

fn closed(version: u64, turn: u64, status: Status, summary: Option<&str>) -> Snapshot {
    Snapshot { closed: true, ..open(version, turn, status, summary) }
}

fn fresh() -> Snapshot {
    Snapshot::created()
}

fn ev(client: usize, call: Call, outcome: Outcome, invoked_ns: u64, answered_ns: u64) -> Event {
    Event { client, call, outcome, invoked_ns, answered_ns }
}

fn ok(h: &Snapshot) -> Outcome {
    Outcome::Ok(h.clone())
}

fn report(turn: u64, status: ReportStatus, summary: Option<&str>) -> Call {
    Call::Apply(Command::Report {
        turn,
        status,
        summary: summary.map(str::to_string),
        question: None,
        runtime: None,
        permission_mode: None,
        reply: None,
        sync_mode: None,
    })
}

fn done() -> Call {
    report(1, ReportStatus::Done, Some("s"))
}

fn open_turn(after: u64) -> Call {
    Call::Apply(Command::OpenTurn { after, prompt: None })
}

fn cancel(turn: Option<u64>) -> Call {
    Call::Apply(Command::Cancel { turn })
}

fn close() -> Call {
    Call::Apply(Command::Close)
}

// Linearisable histories.

#[test]
fn a_sequential_history_that_follows_the_rules_is_linearisable() {
    let v2 = open(2, 1, Status::Done, Some("s"));
    let v3 = open(3, 2, Status::Running, None);
    let h = vec![
        ev(0, done(), ok(&v2), 0, 10),
        ev(1, open_turn(1), ok(&v3), 20, 30),
        ev(0, done(), refused(Refusal::Stale, Some(&v3)), 40, 50),
        ev(2, Call::Get, ok(&v3), 60, 70),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![0, 1, 2, 3]);
}

#[test]
fn overlapping_calls_may_take_effect_in_the_other_order() {
    // The open-turn call was invoked first but took effect after the report that it needed.
    let v2 = open(2, 1, Status::Done, Some("s"));
    let v3 = open(3, 2, Status::Running, None);
    let h =
        vec![ev(0, open_turn(1), ok(&v3), 0, 100), ev(1, done(), ok(&v2), 10, 50), ev(2, Call::Get, ok(&v2), 20, 60)];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![1, 2, 0]);
}

#[test]
fn three_overlapping_calls_are_linearisable_in_the_one_order_their_answers_allow() {
    // All three overlap; the get saw the first report's version, so it sits between them.
    let a = open(2, 1, Status::Running, Some("a"));
    let b = open(3, 1, Status::NeedsYou, Some("b"));
    let h = vec![
        ev(0, report(1, ReportStatus::NeedsYou, Some("b")), ok(&b), 0, 100),
        ev(1, Call::Get, ok(&a), 5, 100),
        ev(2, report(1, ReportStatus::Running, Some("a")), ok(&a), 10, 100),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![2, 1, 0]);
}

#[test]
fn a_cancel_racing_a_final_report_is_linearisable_with_its_one_winner_first() {
    // The loser's 409 names the winner's state: cancel first, then the report is refused.
    let cancelled = open(2, 1, Status::Cancelled, None);
    let h = vec![
        ev(0, report(1, ReportStatus::Done, Some("s")), refused(Refusal::TurnFinished, Some(&cancelled)), 0, 50),
        ev(1, cancel(Some(1)), ok(&cancelled), 0, 50),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![1, 0]);
    // The other winner: the report first, then the cancel is refused.
    let done = open(2, 1, Status::Done, Some("s"));
    let h = vec![
        ev(0, report(1, ReportStatus::Done, Some("s")), ok(&done), 0, 50),
        ev(1, cancel(Some(1)), refused(Refusal::TurnFinished, Some(&done)), 0, 50),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![0, 1]);
}

#[test]
fn a_close_racing_a_final_report_is_linearisable_in_either_order_its_answers_show() {
    // The report landed first and the close closed the finished turn ...
    let failed = open(2, 1, Status::Failed, None);
    let h = vec![
        ev(0, close(), ok(&closed(3, 1, Status::Failed, None)), 0, 50),
        ev(1, report(1, ReportStatus::Failed, None), ok(&failed), 0, 50),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![1, 0]);
    // ... or the close landed first, cancelling the running turn, and the report was refused.
    let shut = closed(2, 1, Status::Cancelled, None);
    let h = vec![
        ev(0, close(), ok(&shut), 0, 50),
        ev(1, report(1, ReportStatus::Failed, None), refused(Refusal::Closed, Some(&shut)), 0, 50),
    ];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![0, 1]);
}

#[test]
fn a_repeat_of_an_open_racing_the_open_answers_the_same_turn_without_a_version_move() {
    let v2 = open(2, 1, Status::Done, Some("s"));
    let v3 = open(3, 2, Status::Running, None);
    let h =
        vec![ev(0, done(), ok(&v2), 0, 10), ev(1, open_turn(1), ok(&v3), 20, 60), ev(2, open_turn(1), ok(&v3), 20, 60)];
    assert!(check(&fresh(), &h).is_ok());
}

#[test]
fn a_refusal_must_carry_the_record_it_was_refused_against() {
    let v1 = fresh();
    let v2 = open(2, 1, Status::Done, Some("s"));
    // turn_finished is right for the cancel only after the report, and then it must show v2.
    let wrong =
        vec![ev(0, done(), ok(&v2), 0, 10), ev(1, cancel(None), refused(Refusal::TurnFinished, Some(&v1)), 20, 30)];
    assert!(check(&v1, &wrong).is_err());
    let right = vec![wrong[0].clone(), ev(1, cancel(None), refused(Refusal::TurnFinished, Some(&v2)), 20, 30)];
    assert!(check(&v1, &right).is_ok());
}

// A lost change: an acknowledged change whose version is never seen again.

#[test]
fn a_change_written_over_by_a_later_one_at_the_same_version_is_a_lost_change() {
    // The report was acknowledged at v2; the cancel, invoked after that answer, was applied to
    // v1 as if the report had never happened: it too claims v2, and the get agrees with it.
    let needs_you = open(2, 1, Status::NeedsYou, Some("a"));
    let lost = open(2, 1, Status::Cancelled, None);
    let h = vec![
        ev(0, report(1, ReportStatus::NeedsYou, Some("a")), ok(&needs_you), 0, 10),
        ev(1, cancel(None), ok(&lost), 20, 30),
        ev(2, Call::Get, ok(&lost), 40, 50),
    ];
    let v = check(&fresh(), &h).unwrap_err();
    assert_eq!((v.longest_prefix, v.stuck_on), (vec![0], vec![1]));
    // What the model would have answered: the cancel keeps the summary and moves to v3.
    let kept = vec![h[0].clone(), ev(1, cancel(None), ok(&open(3, 1, Status::Cancelled, Some("a"))), 20, 30)];
    assert!(check(&fresh(), &kept).is_ok());
}

#[test]
fn two_reports_each_acknowledged_at_the_same_version_are_a_lost_change() {
    let h = vec![
        ev(0, report(1, ReportStatus::NeedsYou, Some("a")), ok(&open(2, 1, Status::NeedsYou, Some("a"))), 0, 10),
        ev(1, report(1, ReportStatus::Running, Some("b")), ok(&open(2, 1, Status::Running, Some("b"))), 20, 30),
    ];
    assert!(check(&fresh(), &h).is_err());
}

#[test]
fn an_acknowledged_change_that_a_later_read_does_not_show_is_a_lost_change() {
    // Concurrent with the report, the get may precede it; invoked after its answer, it may not.
    let v2 = open(2, 1, Status::NeedsYou, None);
    let report_then_read = |read_invoked_ns| {
        vec![
            ev(0, report(1, ReportStatus::NeedsYou, None), ok(&v2), 0, 10),
            ev(1, Call::Get, ok(&fresh()), read_invoked_ns, 30),
        ]
    };
    let v = check(&fresh(), &report_then_read(20)).unwrap_err();
    assert_eq!((v.longest_prefix, v.stuck_on), (vec![0], vec![1]));
    assert!(check(&fresh(), &report_then_read(5)).is_ok());
}

// A version seen, then gone.

#[test]
fn a_read_of_version_two_then_a_later_read_of_version_one_is_rejected() {
    // The report's answer is still on its way, so either read alone would be fine; but once a
    // read has shown v2, no later read may show v1.
    let v2 = open(2, 1, Status::Done, Some("s"));
    let h =
        vec![ev(0, done(), ok(&v2), 0, 100), ev(1, Call::Get, ok(&v2), 10, 20), ev(2, Call::Get, ok(&fresh()), 30, 40)];
    let v = check(&fresh(), &h).unwrap_err();
    assert_eq!(v.longest_prefix.len(), 2);
    let why = explain(&fresh(), &h, &v);
    assert!(why.contains("#2   model answers 200 v2 turn 1 open done"), "{why}");
    // The same answers, but the reads overlap: the v1 read may take effect first.
    let overlapping = vec![h[0].clone(), ev(1, Call::Get, ok(&v2), 10, 40), ev(2, Call::Get, ok(&fresh()), 30, 40)];
    assert_eq!(check(&fresh(), &overlapping).unwrap(), vec![2, 0, 1]);
}

#[test]
fn a_wait_that_showed_a_version_then_a_read_that_does_not_is_rejected() {
    let v2 = open(2, 1, Status::NeedsYou, None);
    let h = vec![
        ev(0, Call::Wait { after: 1, timed_out: false }, ok(&v2), 0, 50),
        ev(1, report(1, ReportStatus::NeedsYou, None), ok(&v2), 10, 200),
        ev(2, Call::Get, ok(&fresh()), 60, 70),
    ];
    assert!(check(&fresh(), &h).is_err());
}

// Two winners of a race.

#[test]
fn two_opens_of_the_same_turn_that_both_move_the_version_are_rejected() {
    // Both opened turn 2 from turn 1: one of them should have been the repeat (v3, no move).
    let v2 = open(2, 1, Status::Done, Some("s"));
    let h = vec![
        ev(0, done(), ok(&v2), 0, 10),
        ev(1, open_turn(1), ok(&open(3, 2, Status::Running, None)), 20, 60),
        ev(2, open_turn(1), ok(&open(4, 2, Status::Running, None)), 20, 60),
    ];
    let v = check(&fresh(), &h).unwrap_err();
    assert_eq!(v.longest_prefix.len(), 2);
    assert!(explain(&fresh(), &h, &v).contains("model answers 200 v3 turn 2 open running"));
}

#[test]
fn two_opens_from_the_same_turn_that_open_two_turns_are_rejected() {
    let v2 = open(2, 1, Status::Cancelled, None);
    let h = vec![
        ev(0, cancel(Some(1)), ok(&v2), 0, 10),
        ev(1, open_turn(1), ok(&open(3, 2, Status::Running, None)), 20, 60),
        ev(2, open_turn(1), ok(&open(4, 3, Status::Running, None)), 20, 60),
    ];
    assert!(check(&fresh(), &h).is_err());
}

#[test]
fn a_cancel_and_a_final_report_that_both_win_are_rejected() {
    // Both claim the turn ended their way at version 2: no order gives both answers.
    let h = vec![
        ev(0, done(), ok(&open(2, 1, Status::Done, Some("s"))), 0, 50),
        ev(1, cancel(Some(1)), ok(&open(2, 1, Status::Cancelled, None)), 0, 50),
    ];
    let v = check(&fresh(), &h).unwrap_err();
    assert_eq!(v.longest_prefix.len(), 1);
    assert!(explain(&fresh(), &h, &v).contains("handoff.turn_finished"));
}

// A stale report applied.

#[test]
fn a_late_turn_one_report_answered_200_on_turn_two_is_rejected() {
    let v2 = open(2, 1, Status::Done, Some("s"));
    let v3 = open(3, 2, Status::Running, None);
    let applied = open(4, 2, Status::Done, Some("late"));
    let h = vec![
        ev(0, done(), ok(&v2), 0, 10),
        ev(1, open_turn(1), ok(&v3), 20, 30),
        ev(0, report(1, ReportStatus::Done, Some("late")), ok(&applied), 40, 50),
        ev(2, Call::Get, ok(&applied), 60, 70),
    ];
    let v = check(&fresh(), &h).unwrap_err();
    assert_eq!((&v.longest_prefix, &v.stuck_on), (&vec![0, 1], &vec![2]));
    let why = explain(&fresh(), &h, &v);
    assert!(why.contains("#2   model answers handoff.stale"), "{why}");
}

#[test]
fn a_stale_report_racing_the_open_is_rejected_in_every_order() {
    // Overlapping the open, the late report could take effect before it; but there it meets
    // turn 1 done with another summary (turn_finished), so no order answers it 200 either.
    let v2 = open(2, 1, Status::Done, Some("s"));
    let h = vec![
        ev(0, done(), ok(&v2), 0, 10),
        ev(1, open_turn(1), ok(&open(3, 2, Status::Running, None)), 20, 60),
        ev(0, report(1, ReportStatus::Done, Some("late")), ok(&open(4, 2, Status::Done, Some("late"))), 30, 70),
    ];
    assert!(check(&fresh(), &h).is_err());
    // Refused as the contract says, it is linearisable.
    let stale = refused(Refusal::Stale, Some(&open(3, 2, Status::Running, None)));
    let h = vec![h[0].clone(), h[1].clone(), ev(0, report(1, ReportStatus::Done, Some("late")), stale, 30, 70)];
    assert!(check(&fresh(), &h).is_ok());
}

// Waits.

#[test]
fn a_wait_must_answer_newer_or_closed_unless_it_ran_its_timeout() {
    let v1 = fresh();
    let v2 = open(2, 1, Status::Done, Some("s"));
    // Answered early with nothing newer than it asked for: a broken promise.
    let early = vec![ev(0, Call::Wait { after: 1, timed_out: false }, ok(&v1), 0, 10)];
    assert!(check(&v1, &early).is_err());
    let at_timeout = vec![ev(0, Call::Wait { after: 1, timed_out: true }, ok(&v1), 0, 10)];
    assert!(check(&v1, &at_timeout).is_ok());
    // Woken by a change inside its interval, it shows the change.
    let woken = vec![ev(0, Call::Wait { after: 1, timed_out: false }, ok(&v2), 0, 100), ev(1, done(), ok(&v2), 40, 60)];
    assert!(check(&v1, &woken).is_ok());
    // A closed hand-off answers a wait at once, whatever it asked for.
    let shut = closed(2, 1, Status::Cancelled, None);
    let h = vec![ev(1, close(), ok(&shut), 0, 10), ev(0, Call::Wait { after: 9, timed_out: false }, ok(&shut), 20, 30)];
    assert!(check(&v1, &h).is_ok());
}

#[test]
fn a_wait_held_to_its_timeout_past_a_change_is_a_missed_wake_up() {
    let v1 = fresh();
    let v2 = open(2, 1, Status::Done, Some("s"));
    let ms = 1_000_000;
    let h = vec![
        ev(0, Call::Wait { after: 1, timed_out: true }, ok(&v2), 0, 2_100 * ms),
        ev(1, done(), ok(&v2), 100 * ms, 110 * ms),
    ];
    assert!(check(&v1, &h).is_ok(), "linearisable: it is a timing fault");
    assert_eq!(missed_wake_ups(&h, 1_000 * ms, 2_000 * ms).len(), 1);
    let prompt = vec![ev(0, Call::Wait { after: 1, timed_out: false }, ok(&v2), 0, 120 * ms), h[1].clone()];
    assert!(missed_wake_ups(&prompt, 1_000 * ms, 2_000 * ms).is_empty());
}

// The search.

#[test]
fn memoisation_keeps_many_commuting_reads_cheap() {
    // 60 overlapping gets of one state: 60! orders, one memoised state per subset reached.
    let v1 = fresh();
    let h: Vec<Event> = (0..60).map(|i| ev(i, Call::Get, ok(&v1), 0, 100)).collect();
    assert!(check(&v1, &h).is_ok());
    // A history that fails only at its end: without memoisation every one of the 11! orders
    // of the overlapping calls is tried; with it, each subset of them once (2^11).
    let v2 = open(2, 1, Status::Done, Some("s"));
    let mut h: Vec<Event> = (0..10).map(|i| ev(i, Call::Get, ok(&v1), 0, 100)).collect();
    h.push(ev(10, done(), ok(&v2), 0, 100));
    h.push(ev(11, Call::Get, ok(&v1), 200, 300));
    let v = check(&v1, &h).unwrap_err();
    assert!(v.explored <= 1 << 11, "{}", v.explored);
}

#[test]
fn step_on_a_service_record_carries_the_model_s_answer() {
    // `step` is `next` for drivers that track the service's record (concurrency.rs).
    let record = handoff_core::turn::Record::create("ho_x".into(), "o".into(), "s".into(), "m".into(), "l".into(), 0);
    let v2 = open(2, 1, Status::Done, Some("s"));
    let after = step(&record, &done(), &ok(&v2)).unwrap();
    assert_eq!(Snapshot::of(&after), v2);
    assert_eq!((after.id, after.created_at), (record.id.clone(), record.created_at));
    assert!(step(&record, &done(), &ok(&open(2, 1, Status::Failed, Some("s")))).is_none());
}
