//! The pure core of `handoff serve`: from the record as last read and what this machine
//! started (the state record), the one thing to do next. No I/O; [`super`] reads, writes and
//! spawns.
//!
//! **Invariants** (property-tested below):
//! - a turn is started at most once, whatever the order of records and restarts: a turn in
//!   the state record is never started again, and the state record is written before the
//!   harness starts;
//! - a turn the record shows cancelled, or a closed hand-off, is never started;
//! - a final report is sent only for a turn that is still open on the record, once;
//! - the state record belongs to one life of the hand-off: a new life starts it empty, and a
//!   record of the older build (which did not say) belongs to the current one;
//! - a harness session is resumed only by a UUID.
//!
//! Beside [`decide`], the rules serve applies when a harness is gone ([`fail_stands`]), when it
//! stops one ([`settled_by_stop`]), before it spawns ([`start_stands`]), when the hand-off
//! reads closed ([`exit`]) and when the owner answers a harness's question ([`answer`]).

use crate::ask::Waited;
use crate::client::Handoff;
use crate::machine::Runtime;
use handoff_core::turn::{State, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The fields of the record the decision reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub version: u64,
    pub turn: u64,
    pub closed: bool,
    pub status: Status,
    /// The runtime the current turn was handed to, if any.
    pub handed_to: Option<String>,
    /// The turn was handed on with a package.
    pub package: bool,
    pub prompt: Option<String>,
    /// The hand-off's life (0 is one: created before hand-offs were erased).
    pub incarnation: u64,
}

impl View {
    pub fn of(h: &Handoff) -> View {
        View {
            version: h.version,
            turn: h.turn,
            closed: h.state == State::Closed,
            status: h.status,
            handed_to: h.briefed.runtime.clone(),
            package: h.briefed.runtime.is_some() && h.briefed.package_hash.is_some(),
            prompt: h.prompt.clone(),
            incarnation: h.incarnation,
        }
    }
}

/// One turn this machine started, as the state record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub runtime: String,
    /// The harness's own session id (chosen up front, or resumed).
    pub session: String,
    pub started_ms: i64,
    /// The harness's process group, once started (to end what a killed serve left of it).
    #[serde(default)]
    pub group: Option<i32>,
    /// How the harness ended, once it did (`None`: running, or serve stopped before it saw).
    #[serde(default)]
    pub ended: Option<String>,
    /// serve sent this turn's final report (or knows that it needs none).
    #[serde(default)]
    pub settled: bool,
    /// Why no harness was started for it (its state record unwritten, its session id not a
    /// UUID, …): what its failed report says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What this machine started, per turn, and the newest version it acted on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Local {
    pub turns: BTreeMap<u64, Started>,
    #[serde(default)]
    pub version: u64,
    /// The life of the hand-off these turns belong to; `None` in a record of the older build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<u64>,
    /// The commit (or git's empty tree) the session started from: what each turn's files
    /// touched are counted against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

impl Local {
    /// The state record for life `incarnation`: this one when it is of that life, or of the
    /// older build (which did not say, and so belongs to the current life: never start again a
    /// turn it started); an empty one when it is of another life (an erased hand-off created
    /// again under the same id starts at version 1, turn 1).
    pub fn for_life(self, incarnation: u64) -> Local {
        match self.incarnation {
            Some(life) if life != incarnation => Local { incarnation: Some(incarnation), ..Local::default() },
            _ => Local { incarnation: Some(incarnation), ..self },
        }
    }

    /// The runtime and harness session of the newest turn this machine started.
    pub fn last(&self) -> Option<(&u64, &Started)> {
        self.turns.iter().next_back()
    }

    /// The newest session of `runtime` this machine started.
    pub fn session_of(&self, runtime: &str) -> Option<&str> {
        self.turns.values().rev().find(|s| s.runtime == runtime).map(|s| s.session.as_str())
    }
}

/// Whether the harness serve started is alive, for which turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alive {
    None,
    Running { turn: u64 },
}

/// What briefs a new harness session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Brief {
    /// The turn's package (the API's briefing, the owner's prompt after it).
    Package,
    /// The owner's prompt alone.
    Prompt,
    /// No prompt and no package: the work record's briefing.
    Work,
}

/// How the harness session is had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarnessSession {
    /// A new session, briefed so.
    New(Brief),
    /// The harness's own session `id`, resumed with the owner's prompt as the new message.
    Resume(String),
}

/// Why serve stops a running harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhy {
    Cancelled,
    Closed,
    /// A newer turn is open: the harness of the previous one is stopped before it starts.
    NextTurn,
}

/// Why a turn's harness is gone without a final report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// It exited, as described (an exit code or a signal), in this serve's life.
    Exited(String),
    /// serve restarted while it ran (the parent-death signal ended it).
    Restarted,
    /// It was never started, for the reason given.
    NotStarted(String),
}

impl Gone {
    pub fn summary(&self, runtime: &str) -> String {
        match self {
            Gone::Exited(how) if how == "exit 0" => format!("{runtime} exited 0, but no final report of its hooks or its model reached the service"),
            Gone::Exited(how) => format!("{runtime} ended ({how}) without a final report: the harness crashed or was killed"),
            Gone::Restarted => format!("handoff serve restarted while {runtime} ran this turn: the harness was stopped with it and the turn is not run twice"),
            Gone::NotStarted(why) => why.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Start {
        turn: u64,
        runtime: Runtime,
        session: HarnessSession,
    },
    Stop {
        turn: u64,
        why: StopWhy,
    },
    /// Report the turn failed, the harness gone.
    Fail {
        turn: u64,
        why: Gone,
    },
    /// Start no harness for the turn, and report it failed saying why.
    Refuse {
        turn: u64,
        runtime: String,
        why: String,
    },
    Nothing,
    /// The hand-off is closed and nothing runs: serve exits 0.
    Exit,
}

/// The next action. `default_runtime` runs turns handed to none before any ran here.
pub fn decide(view: &View, local: &Local, harness: Alive, default_runtime: Runtime) -> Action {
    if view.version < local.version {
        // An older record than one acted on: it decides nothing.
        return Action::Nothing;
    }
    if let Alive::Running { turn } = harness {
        if view.closed {
            return Action::Stop { turn, why: StopWhy::Closed };
        }
        if turn == view.turn && view.status == Status::Cancelled {
            return Action::Stop { turn, why: StopWhy::Cancelled };
        }
        if turn < view.turn {
            return Action::Stop { turn, why: StopWhy::NextTurn };
        }
        return Action::Nothing;
    }
    // No harness runs: first settle a started turn that is still open on the record.
    if let Some(started) = local.turns.get(&view.turn) {
        if started.settled || view.status.has_ended() || view.closed {
            return if view.closed { Action::Exit } else { Action::Nothing };
        }
        let why = match (&started.refused, &started.ended) {
            (Some(why), _) => Gone::NotStarted(why.clone()),
            (None, Some(how)) => Gone::Exited(how.clone()),
            (None, None) => Gone::Restarted,
        };
        return Action::Fail { turn: view.turn, why };
    }
    if view.closed {
        return Action::Exit;
    }
    if view.status.has_ended() {
        return Action::Nothing;
    }
    let runtime = match &view.handed_to {
        Some(r) => r.clone(),
        None => local.last().map_or_else(|| default_runtime.name().to_string(), |(_, s)| s.runtime.clone()),
    };
    let Some(known) = Runtime::parse(&runtime) else {
        let why = format!("handoff serve runs claude-code or codex, not {runtime}");
        return Action::Refuse { turn: view.turn, runtime, why };
    };
    let session = if view.package {
        HarnessSession::New(Brief::Package)
    } else if let Some(id) = local.session_of(&runtime) {
        if !is_uuid(id) {
            let shown = handoff_core::text::clip(id, SESSION_SHOWN_BYTES_MAX);
            let why = format!(
                "the {runtime} session this machine's state record holds for the turn to resume ({shown:?}) is not a UUID, so turn {} was not started: hand it on with a package, or clear serve's state record",
                view.turn
            );
            return Action::Refuse { turn: view.turn, runtime, why };
        }
        HarnessSession::Resume(id.to_string())
    } else if view.prompt.is_some() {
        HarnessSession::New(Brief::Prompt)
    } else {
        HarnessSession::New(Brief::Work)
    };
    Action::Start { turn: view.turn, runtime: known, session }
}

/// The most of a refused session id a summary shows.
const SESSION_SHOWN_BYTES_MAX: usize = 80;

/// A UUID as the harnesses write their session ids: 8-4-4-4-12 hexadecimal digits. Anything
/// else (a stored `--permission-mode=…`) never reaches a harness's argv.
pub fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether a turn serve would report failed, its harness gone, still needs that report, as
/// the record reads afresh (`None`: it could not be read): not when the record moved on to
/// another turn or the turn ended (a spooled report said how).
pub fn fail_stands(turn: u64, fresh: Option<&View>) -> bool {
    fresh.is_none_or(|v| v.turn == turn && !v.status.has_ended() && !v.closed)
}

/// What serve does with a turn whose harness is gone, after delivering the hooks' spool.
#[derive(Debug, PartialEq, Eq)]
pub enum GoneTurn {
    /// The record says how the turn ended, or moved on: nothing to report.
    Settled,
    /// Reports still wait in the spool (the service was unreachable), and one may be the
    /// turn's final report: judge again once they are sent, never fail it before.
    Wait,
    /// No report says how it ended: it failed.
    Fails,
}

/// Judges a turn whose harness is gone from the fresh record and how many spooled reports
/// are left unsent.
pub fn gone_turn(turn: u64, fresh: Option<&View>, spooled_left: usize) -> GoneTurn {
    if !fail_stands(turn, fresh) {
        GoneTurn::Settled
    } else if spooled_left > 0 {
        GoneTurn::Wait
    } else {
        GoneTurn::Fails
    }
}

/// Whether a stopped turn is settled by its stop: the record already says why it ended after
/// a cancel or a close, so serve reports nothing; a turn stopped for a newer one is not.
pub fn settled_by_stop(why: StopWhy) -> bool {
    matches!(why, StopWhy::Cancelled | StopWhy::Closed)
}

/// Whether a prepared turn is spawned, as the answer to its `running` report says: not when the
/// report was refused (`None`: the turn was cancelled or moved on while it was prepared), nor
/// when the answer shows it ended or closed. `Some(None)`: the report did not reach the service,
/// which stops nothing (the watch stops a harness the owner cancels).
pub fn start_stands(turn: u64, answer: Option<Option<&View>>) -> bool {
    match answer {
        None => false,
        Some(None) => true,
        Some(Some(v)) => v.turn == turn && !v.status.has_ended() && !v.closed,
    }
}

/// How serve ends on a closed hand-off: erased when the record cannot be read again (an erase
/// closes the hand-off first), else closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Closed,
    Erased,
}

pub fn exit(read_again_refused: bool) -> Exit {
    if read_again_refused {
        Exit::Erased
    } else {
        Exit::Closed
    }
}

/// A question a harness asked, on the record from `version` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub question: String,
    pub version: u64,
}

/// What `record` says became of the question a harness asked: answered or withdrawn, or
/// nothing yet (a record older than the question's says nothing of it).
pub fn answer(asked: &Asked, record: &Handoff) -> Option<Waited> {
    if record.version < asked.version {
        return None;
    }
    crate::ask::answer_of(record, &asked.question)
}

/// What serve does with one steer of the record's current turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteerTo {
    /// Hand it to the harness running the turn (once: it is then sent).
    Harness,
    /// No harness will take it: the turn's harness ran here and ended, none was started for
    /// it, or the turn ended before one was.
    Undelivered(String),
    /// Nothing runs it here yet (not started yet): kept for now.
    Keep,
}

/// Where steer `id` of `turn` goes: nowhere again once sent; to the harness running the turn
/// (which keeps it while it cannot take input, and says at its end what it never took);
/// reported undelivered when this machine took the turn and no harness of it runs (it ended,
/// was never started, or went with a serve that restarted), or the record shows the turn
/// `over` (ended or closed) before any harness here took it; else kept until one starts.
pub fn steer_to(
    id: &str,
    turn: u64,
    sent: &std::collections::BTreeSet<String>,
    alive: Alive,
    local: &Local,
    over: bool,
) -> Option<SteerTo> {
    if sent.contains(id) {
        return None;
    }
    if alive == (Alive::Running { turn }) {
        return Some(SteerTo::Harness);
    }
    // A turn this machine took is never started again: with no harness running it, none will
    // take the words.
    if let Some(ran) = local.turns.get(&turn) {
        let why = match (&ran.refused, &ran.ended) {
            (Some(why), _) => format!("no harness was started for the turn: {why}"),
            (None, Some(how)) => format!("the turn's harness had ended ({how})"),
            (None, None) => "the turn's harness was stopped when handoff serve restarted".to_string(),
        };
        return Some(SteerTo::Undelivered(why));
    }
    if over {
        return Some(SteerTo::Undelivered(format!("turn {turn} ended before a harness took the words")));
    }
    Some(SteerTo::Keep)
}

/// Whether serve writes a `steer` event for what became of steer `id`: once per steer, the
/// first word of it (a driver's later word of the same steer is passed over), noted in
/// `reported`.
pub fn steer_reported(reported: &mut std::collections::BTreeSet<String>, id: &str) -> bool {
    reported.insert(id.to_string())
}

/// Whether a result of a served turn whose harness takes further messages (Claude Code on
/// stream-json) ends the turn, so that serve reports its end: every steer written to it was
/// read back before this result (`unread`: none is left for a further exchange) and none is
/// kept waiting to be written. Seen with Claude Code 2.1.328: a message read between tool
/// calls joins the running exchange and shares its one result; one read while the model
/// answers waits for that result and runs as an exchange of its own, with a result of its own
/// (several read then run as one exchange, one message).
pub fn messages_done(unread: usize, steers_kept: usize) -> bool {
    unread == 0 && steers_kept == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn view(version: u64, turn: u64, status: Status) -> View {
        View {
            version,
            turn,
            closed: false,
            status,
            handed_to: None,
            package: false,
            prompt: Some("fix the tests".into()),
            incarnation: 0,
        }
    }

    const S1: &str = "0b6f3a8e-5c1d-4e2f-9a7b-1c2d3e4f5a6b";

    fn started(runtime: &str, session: &str) -> Started {
        Started {
            runtime: runtime.into(),
            session: session.into(),
            started_ms: 0,
            group: None,
            ended: None,
            settled: false,
            refused: None,
        }
    }

    #[test]
    fn turn_1_with_a_prompt_starts_the_default_runtime_in_a_new_session_briefed_by_the_prompt() {
        let a = decide(&view(1, 1, Status::Running), &Local::default(), Alive::None, Runtime::ClaudeCode);
        assert_eq!(
            a,
            Action::Start { turn: 1, runtime: Runtime::ClaudeCode, session: HarnessSession::New(Brief::Prompt) }
        );
        let mut v = view(1, 1, Status::Running);
        v.prompt = None;
        assert_eq!(
            decide(&v, &Local::default(), Alive::None, Runtime::Codex),
            Action::Start { turn: 1, runtime: Runtime::Codex, session: HarnessSession::New(Brief::Work) }
        );
    }

    #[test]
    fn a_turn_handed_to_none_resumes_the_harness_session_of_the_previous_turn() {
        let mut local = Local::default();
        local.turns.insert(1, Started { settled: true, ..started("claude-code", S1) });
        let a = decide(&view(5, 2, Status::Running), &local, Alive::None, Runtime::Codex);
        assert_eq!(
            a,
            Action::Start { turn: 2, runtime: Runtime::ClaudeCode, session: HarnessSession::Resume(S1.into()) }
        );
    }

    #[test]
    fn a_turn_handed_on_with_a_package_starts_a_new_session_of_that_runtime_briefed_from_it() {
        let mut local = Local::default();
        local.turns.insert(1, Started { settled: true, ..started("claude-code", S1) });
        let v = View { handed_to: Some("codex".into()), package: true, ..view(5, 2, Status::Running) };
        assert_eq!(
            decide(&v, &local, Alive::None, Runtime::ClaudeCode),
            Action::Start { turn: 2, runtime: Runtime::Codex, session: HarnessSession::New(Brief::Package) }
        );
    }

    #[test]
    fn the_owners_cancel_or_close_stops_the_running_harness_and_close_then_exits() {
        let local = Local::default();
        assert_eq!(
            decide(&view(3, 1, Status::Cancelled), &local, Alive::Running { turn: 1 }, Runtime::ClaudeCode),
            Action::Stop { turn: 1, why: StopWhy::Cancelled }
        );
        let closed = View { closed: true, ..view(3, 1, Status::Cancelled) };
        assert_eq!(
            decide(&closed, &local, Alive::Running { turn: 1 }, Runtime::ClaudeCode),
            Action::Stop { turn: 1, why: StopWhy::Closed }
        );
        assert_eq!(decide(&closed, &local, Alive::None, Runtime::ClaudeCode), Action::Exit);
        assert_eq!(
            decide(&view(3, 1, Status::Running), &local, Alive::Running { turn: 1 }, Runtime::ClaudeCode),
            Action::Nothing
        );
        assert_eq!(
            decide(&view(3, 2, Status::Running), &local, Alive::Running { turn: 1 }, Runtime::ClaudeCode),
            Action::Stop { turn: 1, why: StopWhy::NextTurn }
        );
    }

    #[test]
    fn a_started_turn_still_open_with_no_harness_is_failed_saying_why_and_only_once() {
        let mut local = Local::default();
        local.turns.insert(1, started("claude-code", S1));
        assert_eq!(
            decide(&view(2, 1, Status::Running), &local, Alive::None, Runtime::ClaudeCode),
            Action::Fail { turn: 1, why: Gone::Restarted }
        );
        local.turns.get_mut(&1).unwrap().ended = Some("signal 9".into());
        assert_eq!(
            decide(&view(2, 1, Status::NeedsYou), &local, Alive::None, Runtime::ClaudeCode),
            Action::Fail { turn: 1, why: Gone::Exited("signal 9".into()) }
        );
        // Reported done by its hooks: nothing to say.
        assert_eq!(decide(&view(3, 1, Status::Done), &local, Alive::None, Runtime::ClaudeCode), Action::Nothing);
        local.turns.get_mut(&1).unwrap().settled = true;
        assert_eq!(decide(&view(2, 1, Status::Running), &local, Alive::None, Runtime::ClaudeCode), Action::Nothing);
    }

    #[test]
    fn the_failed_summary_says_why_the_harness_is_gone() {
        assert!(Gone::Restarted.summary("claude-code").contains("handoff serve restarted"));
        assert!(Gone::Exited("signal 9".into())
            .summary("claude-code")
            .contains("(signal 9) without a final report: the harness crashed or was killed"));
        assert!(Gone::Exited("exit 0".into()).summary("claude-code").contains("exited 0, but no final report"));
        assert_eq!(Gone::NotStarted("why".into()).summary("codex"), "why");
    }

    #[test]
    fn a_stored_session_id_that_is_not_a_uuid_is_refused_and_never_resumed() {
        let mut local = Local::default();
        local
            .turns
            .insert(1, Started { settled: true, ..started("claude-code", "--permission-mode=bypassPermissions") });
        let Action::Refuse { turn, runtime, why } =
            decide(&view(5, 2, Status::Running), &local, Alive::None, Runtime::ClaudeCode)
        else {
            panic!("refused")
        };
        assert_eq!((turn, runtime.as_str()), (2, "claude-code"));
        assert!(why.contains("is not a UUID") && why.contains("--permission-mode=bypassPermissions"), "{why}");
        // Refused, it is settled as one that started: never started after.
        local.turns.insert(2, Started { refused: Some(why), settled: true, ..started("claude-code", "") });
        assert_eq!(decide(&view(6, 2, Status::Running), &local, Alive::None, Runtime::ClaudeCode), Action::Nothing);
        assert!(is_uuid(S1) && is_uuid(&crate::serve::new_uuid()));
        assert!(!is_uuid("0b6f3a8e-5c1d-4e2f-9a7b-1c2d3e4f5a6") && !is_uuid("--resume") && !is_uuid(""));
        assert!(!is_uuid("0b6f3a8e-5c1d-4e2f-9a7b-1c2d3e4f5a6g"));
    }

    #[test]
    fn a_state_record_of_another_life_starts_empty_and_one_of_the_older_build_belongs_to_the_current_life() {
        let mut older = Local { version: 9, ..Local::default() };
        older.turns.insert(1, started("claude-code", S1));
        // The older build's record: the current life's, so its turn 1 never starts again.
        let adopted = older.clone().for_life(0);
        assert_eq!((adopted.incarnation, adopted.turns.len(), adopted.version), (Some(0), 1, 9));
        assert!(matches!(
            decide(&view(9, 1, Status::Running), &adopted, Alive::None, Runtime::ClaudeCode),
            Action::Fail { .. }
        ));
        // Life 0 is a life: the same life keeps the record, another starts it empty.
        assert_eq!(adopted.clone().for_life(0), adopted);
        let next = adopted.for_life(1_765_000_000_000);
        assert_eq!(next, Local { incarnation: Some(1_765_000_000_000), ..Local::default() });
        let v = View { incarnation: 1_765_000_000_000, ..view(1, 1, Status::Running) };
        assert!(matches!(decide(&v, &next, Alive::None, Runtime::ClaudeCode), Action::Start { turn: 1, .. }));
    }

    #[test]
    fn a_gone_harness_is_failed_only_while_its_turn_is_open_on_the_fresh_record() {
        assert!(fail_stands(1, None), "a record that cannot be read fails it");
        assert!(fail_stands(1, Some(&view(4, 1, Status::Running))));
        assert!(!fail_stands(1, Some(&view(4, 1, Status::Done))), "a spooled report said how it ended");
        assert!(!fail_stands(1, Some(&view(4, 2, Status::Running))), "the record moved on");
        assert!(settled_by_stop(StopWhy::Cancelled) && settled_by_stop(StopWhy::Closed));
    }

    #[test]
    fn a_gone_harness_is_never_failed_while_a_spooled_report_may_still_say_how_it_ended() {
        let running = view(4, 1, Status::Running);
        assert_eq!(gone_turn(1, None, 1), GoneTurn::Wait, "the service unreachable, the done still spooled");
        assert_eq!(gone_turn(1, Some(&running), 2), GoneTurn::Wait, "the record read before the spool was sent");
        assert_eq!(gone_turn(1, Some(&running), 0), GoneTurn::Fails);
        assert_eq!(gone_turn(1, None, 0), GoneTurn::Fails);
        assert_eq!(gone_turn(1, Some(&view(5, 1, Status::Done)), 3), GoneTurn::Settled, "the record already says");
        assert!(!settled_by_stop(StopWhy::NextTurn));
    }

    #[test]
    fn a_turn_cancelled_or_refused_while_it_is_prepared_is_never_spawned() {
        assert!(!start_stands(1, None), "its running report refused");
        assert!(!start_stands(1, Some(Some(&view(4, 1, Status::Cancelled)))));
        assert!(!start_stands(1, Some(Some(&View { closed: true, ..view(4, 1, Status::Running) }))));
        assert!(!start_stands(1, Some(Some(&view(4, 2, Status::Running)))));
        assert!(start_stands(1, Some(Some(&view(4, 1, Status::Running)))));
        assert!(start_stands(1, Some(None)), "a report that did not reach the service stops nothing");
        assert_eq!((exit(true), exit(false)), (Exit::Erased, Exit::Closed));
    }

    #[test]
    fn a_turn_handed_to_a_runtime_serve_does_not_run_is_refused_saying_so() {
        let v = View { handed_to: Some("gemini".into()), ..view(2, 1, Status::Running) };
        let Action::Refuse { runtime, why, .. } = decide(&v, &Local::default(), Alive::None, Runtime::ClaudeCode)
        else {
            panic!("refused")
        };
        assert_eq!((runtime.as_str(), why.as_str()), ("gemini", "handoff serve runs claude-code or codex, not gemini"));
    }

    #[test]
    fn an_older_record_than_one_acted_on_decides_nothing() {
        let local = Local { version: 7, ..Local::default() };
        assert_eq!(decide(&view(6, 1, Status::Running), &local, Alive::None, Runtime::ClaudeCode), Action::Nothing);
    }

    /// A scripted world: records arrive in any order, serve restarts (the harness dies, the
    /// state record stays), harnesses end. The state record is applied as serve applies it.
    fn replay(events: &[(u8, u64, u8)]) -> (Vec<u64>, Vec<(u64, Status, bool)>) {
        let mut local = Local::default();
        let mut harness = Alive::None;
        let mut starts = Vec::new();
        let mut start_views = Vec::new();
        for &(kind, n, s) in events {
            match kind % 4 {
                0 => {
                    // serve restarts: the harness is gone, serve's memory too; the file stays.
                    harness = Alive::None;
                    continue;
                }
                1 => {
                    if let Alive::Running { turn } = harness {
                        local.turns.get_mut(&turn).unwrap().ended = Some("0".into());
                        harness = Alive::None;
                    }
                    continue;
                }
                _ => {}
            }
            let status =
                [Status::Running, Status::NeedsYou, Status::Done, Status::Failed, Status::Cancelled][s as usize % 5];
            let closed = s % 7 == 6;
            let turn = 1 + n % 4;
            let v = View {
                version: n,
                turn,
                closed,
                status,
                handed_to: None,
                package: false,
                prompt: None,
                incarnation: 0,
            };
            match decide(&v, &local, harness, Runtime::ClaudeCode) {
                Action::Start { turn, runtime, .. } => {
                    starts.push(turn);
                    start_views.push((turn, status, closed));
                    local.turns.insert(
                        turn,
                        Started {
                            runtime: runtime.name().to_string(),
                            session: format!("00000000-0000-4000-8000-{turn:012}"),
                            started_ms: 0,
                            group: None,
                            ended: None,
                            settled: false,
                            refused: None,
                        },
                    );
                    harness = Alive::Running { turn };
                }
                Action::Stop { turn, .. } => {
                    local.turns.get_mut(&turn).unwrap().ended = Some("stopped".into());
                    local.turns.get_mut(&turn).unwrap().settled = true;
                    harness = Alive::None;
                }
                Action::Fail { turn, .. } => local.turns.get_mut(&turn).unwrap().settled = true,
                Action::Refuse { turn, runtime, why } => {
                    let refused = Started { refused: Some(why), settled: true, ..started(&runtime, "") };
                    local.turns.insert(turn, refused);
                }
                Action::Nothing | Action::Exit => {}
            }
            local.version = local.version.max(v.version);
        }
        (starts, start_views)
    }

    proptest! {
        #[test]
        fn a_turn_runs_at_most_once_whatever_the_order_of_records_and_restarts(events in proptest::collection::vec((0u8..8, 0u64..12, 0u8..14), 0..60)) {
            let (starts, _) = replay(&events);
            let mut seen = std::collections::BTreeSet::new();
            for t in starts {
                prop_assert!(seen.insert(t), "turn {t} started twice");
            }
        }

        #[test]
        fn a_cancelled_turn_or_a_closed_hand_off_never_starts(events in proptest::collection::vec((0u8..8, 0u64..12, 0u8..14), 0..60)) {
            let (_, views) = replay(&events);
            for (turn, status, closed) in views {
                prop_assert!(!closed && !status.has_ended(), "turn {turn} started on a record {status:?} closed={closed}");
            }
        }
    }

    /// A steer goes to the harness running its turn once; one of a turn whose harness ran here
    /// and ended (or was never started, or whose turn ended before one was) is reported
    /// undelivered, once; else it is kept.
    #[test]
    fn a_steer_goes_to_the_running_harness_once_and_is_undelivered_once_the_harness_ended() {
        let mut sent = std::collections::BTreeSet::new();
        let mut local = Local::default();
        local.turns.insert(2, started("codex", S1));
        let running = Alive::Running { turn: 2 };
        assert_eq!(steer_to("st_5_1", 2, &sent, running, &local, false), Some(SteerTo::Harness));
        sent.insert("st_5_1".to_string());
        assert_eq!(steer_to("st_5_1", 2, &sent, running, &local, false), None, "once");
        assert_eq!(steer_to("st_6_1", 3, &sent, running, &local, false), Some(SteerTo::Keep), "another turn's harness");
        let restarted = steer_to("st_6_1", 2, &sent, Alive::None, &local, false);
        assert!(
            matches!(restarted, Some(SteerTo::Undelivered(ref why)) if why.contains("serve restarted")),
            "a turn taken here whose harness is not running is never started again: {restarted:?}"
        );
        assert_eq!(
            steer_to("st_6_1", 2, &sent, running, &local, true),
            Some(SteerTo::Harness),
            "a harness still running its ended turn says itself what it never took"
        );
        local.turns.get_mut(&2).unwrap().ended = Some("exit 0".into());
        let gone = steer_to("st_6_1", 2, &sent, Alive::None, &local, false);
        assert!(matches!(gone, Some(SteerTo::Undelivered(ref why)) if why.contains("exit 0")), "{gone:?}");
        local.turns.insert(3, Started { refused: Some("not installed".into()), ..started("codex", "") });
        assert!(matches!(steer_to("st_7_1", 3, &sent, Alive::None, &local, false), Some(SteerTo::Undelivered(_))));
    }

    /// A steer of a turn that ended (or whose hand-off closed) before any harness here started
    /// is reported undelivered rather than kept for ever.
    #[test]
    fn a_steer_kept_for_a_turn_that_ends_before_a_harness_took_it_is_reported_undelivered() {
        let sent = std::collections::BTreeSet::new();
        let local = Local::default();
        assert_eq!(steer_to("st_4_1", 1, &sent, Alive::None, &local, false), Some(SteerTo::Keep));
        let over = steer_to("st_4_1", 1, &sent, Alive::None, &local, true);
        assert!(matches!(over, Some(SteerTo::Undelivered(ref why)) if why.contains("turn 1 ended")), "{over:?}");
    }

    #[test]
    fn each_steer_gets_one_steer_event_its_first_outcome() {
        let mut reported = std::collections::BTreeSet::new();
        assert!(steer_reported(&mut reported, "st_4_1"));
        assert!(!steer_reported(&mut reported, "st_4_1"), "a second word of the same steer is passed over");
        assert!(steer_reported(&mut reported, "st_5_1"));
    }

    /// On stream-json a result ends the turn only when every steer written was read before it
    /// and none is kept: a steer still unread runs as a further exchange with its own result.
    #[test]
    fn a_turn_taking_further_messages_ends_only_at_a_result_with_no_steer_unread_or_kept() {
        assert!(messages_done(0, 0), "the prompt alone, or every steer read into this exchange");
        assert!(!messages_done(1, 0), "a steer written and not read yet: a further exchange comes");
        assert!(!messages_done(0, 1), "a steer kept, to be written");
    }
}
