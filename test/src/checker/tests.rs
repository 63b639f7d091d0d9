//! Recorded histories, written out by hand, in the model's terms.

use super::*;
use crate::model::Status;
use handoff::turn::ReportStatus;

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
    Call::Apply(Command::Report { turn, status, summary: summary.map(str::to_string) })
}

fn done() -> Call {
    report(1, ReportStatus::Done, Some("s"))
}

fn open_turn(after: u64) -> Call {
    Call::Apply(Command::OpenTurn { after })
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
    let h = vec![ev(0, open_turn(1), ok(&v3), 0, 100), ev(1, done(), ok(&v2), 10, 50), ev(2, Call::Get, ok(&v2), 20, 60)];
    assert_eq!(check(&fresh(), &h).unwrap(), vec![1, 2, 0]);
}

#[test]
fn a_refusal_must_carry_the_record_it_was_refused_against() {
    let v1 = fresh();
    let v2 = open(2, 1, Status::Done, Some("s"));
    // turn_finished is right for the cancel only after the report, and then it must show v2.
    let wrong = vec![ev(0, done(), ok(&v2), 0, 10), ev(1, cancel(None), refused(Refusal::TurnFinished, Some(&v1)), 20, 30)];
    assert!(check(&v1, &wrong).is_err());
    let right = vec![wrong[0].clone(), ev(1, cancel(None), refused(Refusal::TurnFinished, Some(&v2)), 20, 30)];
    assert!(check(&v1, &right).is_ok());
}

// Rejected histories.

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
        vec![ev(0, report(1, ReportStatus::NeedsYou, None), ok(&v2), 0, 10), ev(1, Call::Get, ok(&fresh()), read_invoked_ns, 30)]
    };
    let v = check(&fresh(), &report_then_read(20)).unwrap_err();
    assert_eq!((v.longest_prefix, v.stuck_on), (vec![0], vec![1]));
    assert!(check(&fresh(), &report_then_read(5)).is_ok());
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
    let h = vec![ev(0, Call::Wait { after: 1, timed_out: true }, ok(&v2), 0, 2_100 * ms), ev(1, done(), ok(&v2), 100 * ms, 110 * ms)];
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
    let record = handoff::turn::Record::create("ho_x".into(), "o".into(), "s".into(), "m".into(), "l".into(), 0);
    let v2 = open(2, 1, Status::Done, Some("s"));
    let after = step(&record, &done(), &ok(&v2)).unwrap();
    assert_eq!(Snapshot::of(&after), v2);
    assert_eq!((after.id, after.created_at), (record.id.clone(), record.created_at));
    assert!(step(&record, &done(), &ok(&open(2, 1, Status::Failed, Some("s")))).is_none());
}
