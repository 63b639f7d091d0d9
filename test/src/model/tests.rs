//! The model on its own, in the contract's words; then the model against the service's core,
//! command by command, over random sequences. The second is the only place in this crate where
//! the model meets `handoff_core::turn`, and only to compare answers.

use super::*;
use crate::checker::{model_command, Snapshot};
use handoff_core::turn::{self, Record};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::collections::HashSet;

fn report(turn: u64, status: ReportStatus, summary: Option<&str>) -> Command {
    Command::Report { turn, status, summary: summary.map(str::to_string) }
}

/// Applies commands that must all be accepted; answers the hand-off after them.
fn accepted(commands: &[Command]) -> Handoff {
    commands
        .iter()
        .fold(Handoff::created(), |h, c| answer(&h, c).unwrap_or_else(|r| panic!("{c:?} on {h}: {}", r.code())).handoff)
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

// The model against the core.

/// A command relative to the turn the hand-off is at when it is sent (`back` 1 is the turn
/// before, -1 the one after), so that random sequences reach late turns and still name older,
/// current and future turns alike. Summaries come from a small set so that exact repeats happen.
#[derive(Debug, Clone)]
enum Move {
    OpenTurn { back: i64 },
    Report { back: i64, status: turn::ReportStatus, summary: Option<&'static str> },
    Cancel { back: Option<i64> },
    Close,
}

fn back() -> impl Strategy<Value = i64> {
    prop_oneof![6 => Just(0), 2 => Just(1), 1 => Just(2), 1 => Just(-1)]
}

fn any_move() -> impl Strategy<Value = Move> {
    let status = prop_oneof![
        Just(turn::ReportStatus::Running),
        Just(turn::ReportStatus::NeedsYou),
        Just(turn::ReportStatus::Done),
        Just(turn::ReportStatus::Failed),
    ];
    let summary = prop_oneof![Just(None), Just(Some("a")), Just(Some("b"))];
    // Close is rare: after it every command is refused, and the sequences should reach late turns.
    prop_oneof![
        10 => back().prop_map(|back| Move::OpenTurn { back }),
        18 => (back(), status, summary).prop_map(|(back, status, summary)| Move::Report { back, status, summary }),
        6 => proptest::option::of(back()).prop_map(|back| Move::Cancel { back }),
        1 => Just(Move::Close),
    ]
}

/// The service command a move is when the hand-off is at turn `current`.
fn command(m: &Move, current: u64) -> turn::Command {
    let near = |back: i64| current.saturating_add_signed(-back);
    match m {
        Move::OpenTurn { back } => turn::Command::OpenTurn { after: near(*back), prompt: None },
        Move::Report { back, status, summary } => turn::Command::Report {
            turn: near(*back),
            status: *status,
            summary: summary.map(str::to_string),
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        },
        Move::Cancel { back } => turn::Command::Cancel { turn: back.map(near) },
        Move::Close => turn::Command::Close,
    }
}

/// Every (phase, ask) pair a command can meet: all but a report on a cancelled turn repeating
/// it exactly, since a machine cannot report `cancelled`.
fn reachable_rows() -> HashSet<(Phase, Ask)> {
    let phases = [Phase::Closed, Phase::Going, Phase::Finished, Phase::Cancelled];
    let asks = [
        Ask::OpenFromCurrent,
        Ask::OpenAgain,
        Ask::OpenFromOther,
        Ask::ReportOlder,
        Ask::ReportCurrent { same: true },
        Ask::ReportCurrent { same: false },
        Ask::ReportFuture,
        Ask::CancelCurrent,
        Ask::CancelOther,
        Ask::Close,
    ];
    let mut rows: HashSet<(Phase, Ask)> = phases.iter().flat_map(|&p| asks.iter().map(move |&a| (p, a))).collect();
    rows.remove(&(Phase::Cancelled, Ask::ReportCurrent { same: true }));
    rows
}

/// Sends `moves` to the model and to the core side by side; fails at the first command on which
/// they answer differently: another refusal code, another version movement, or another turn,
/// state, status, summary or version after it.
fn agree(moves: &[Move], rows: &RefCell<HashSet<(Phase, Ask)>>) -> Result<(), TestCaseError> {
    let mut model = Handoff::created();
    let mut core = Record::create("ho_model".into(), "o".into(), "s".into(), "m".into(), "large".into(), 0);
    prop_assert_eq!(&Snapshot::of(&core), &model, "both start where the contract says");
    for (i, m) in moves.iter().enumerate() {
        let c = command(m, model.turn);
        let asked = model_command(&c);
        rows.borrow_mut().insert((phase(&model), ask(&model, &asked)));
        // Only written out when the two disagree: formatting every step would cost most of the run.
        let at = || format!("command {i} ({c:?}) on {model}");
        match (answer(&model, &asked), turn::apply(&core, &c, i as i64 + 1)) {
            (Ok(expected), Ok(got)) => {
                prop_assert_eq!(got.moved, expected.moved, "version movement: {}", at());
                prop_assert_eq!(&Snapshot::of(&got.next), &expected.handoff, "after {}", at());
                let version = if expected.moved { model.version + 1 } else { model.version };
                prop_assert_eq!(expected.handoff.version, version, "the model's own version rule: {}", at());
                model = expected.handoff;
                core = got.next;
            }
            (Err(expected), Err(got)) => prop_assert_eq!(got.as_str(), expected.code(), "refusal code: {}", at()),
            (Ok(expected), Err(got)) => {
                let (expected, got) = (expected.handoff, got.as_str());
                return Err(TestCaseError::fail(format!(
                    "{}: the model answers 200 {expected}, the core refuses {got}",
                    at()
                )));
            }
            (Err(expected), Ok(got)) => {
                let got = Snapshot::of(&got.next);
                return Err(TestCaseError::fail(format!(
                    "{}: the model refuses {}, the core answers 200 {got}",
                    at(),
                    expected.code()
                )));
            }
        }
    }
    Ok(())
}

/// Random command sequences run against the core.
const SEQUENCES: u32 = 2_000;
const COMMANDS_MAX: usize = 60;

#[test]
fn the_model_and_the_core_answer_every_command_of_random_sequences_alike() {
    let rows = RefCell::new(HashSet::new());
    // A runner of our own rather than `proptest!`, to gather which rows of the table the
    // sequences reached across all cases (no regression file: the failing sequence is printed).
    let mut runner = TestRunner::new(Config { cases: SEQUENCES, failure_persistence: None, ..Config::default() });
    let sequences = proptest::collection::vec(any_move(), 0..COMMANDS_MAX);
    if let Err(e) = runner.run(&sequences, |moves| agree(&moves, &rows)) {
        panic!("the model and the core disagree: {e}");
    }
    let missed: Vec<_> = reachable_rows().difference(&rows.borrow()).copied().collect();
    assert!(missed.is_empty(), "rows of the table no sequence reached, so never compared with the core: {missed:?}");
}
