//! The model on its own, in the contract's words.

use super::*;

fn report(turn: u64, status: ReportStatus, summary: Option<&str>) -> Command {
    Command::Report { turn, status, summary: summary.map(str::to_string) }
}

/// Applies commands that must all be accepted; answers the hand-off after them.
fn accepted(commands: &[Command]) -> Handoff {
    commands.iter().fold(Handoff::created(), |h, c| answer(&h, c).unwrap_or_else(|r| panic!("{c:?} on {h}: {}", r.code())).handoff)
}

#[test]
fn the_readme_session_in_the_model() {
    let h = Handoff::created();
    assert_eq!(h.to_string(), "v1 turn 1 open running None");
    let needs_you = answer(&h, &report(1, ReportStatus::NeedsYou, Some("Postgres or SQLite?"))).unwrap();
    assert!(needs_you.moved);
    assert!(needs_you.handoff.answers_wait(1));
    let done = answer(&needs_you.handoff, &report(1, ReportStatus::Done, Some("Postgres it is"))).unwrap().handoff;
    let turn_two = answer(&done, &Command::OpenTurn { after: 1 }).unwrap().handoff;
    assert_eq!(turn_two.to_string(), "v4 turn 2 open running None");
    let late = report(1, ReportStatus::Done, Some("Postgres it is"));
    assert_eq!(answer(&turn_two, &late), Err(Refusal::Stale));
    let closed = answer(&turn_two, &Command::Close).unwrap().handoff;
    assert_eq!(closed.to_string(), "v5 turn 2 closed cancelled None");
    assert_eq!(answer(&closed, &Command::Close), Ok(Accepted { handoff: closed.clone(), moved: false }));
    assert!(closed.answers_wait(99), "a closed hand-off answers any wait at once");
}

#[test]
fn a_close_after_a_final_report_keeps_the_turn_as_it_ended() {
    let h = accepted(&[report(1, ReportStatus::Failed, Some("tests red")), Command::Close]);
    assert_eq!(h.to_string(), "v3 turn 1 closed failed Some(\"tests red\")");
    assert_eq!(answer(&h, &report(1, ReportStatus::Failed, Some("tests red"))), Err(Refusal::Closed));
}
