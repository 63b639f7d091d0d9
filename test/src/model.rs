//! A reference of the turn contract, written apart from the service so that the checkers have
//! a model that the service's bugs are not also in.
//!
//! It is read from the contract, not from `src/turn.rs`: issue 2's API (routes 3–6), README's
//! API section, `docs/openapi.yaml` (`openTurn`, `report`, `cancelTurn`, `closeHandoff`,
//! `waitForVersion`) and the decisions its closing note records where the issue was silent
//! ("a report without `summary` sets it to null"; "`after = turn - 1` answers the current turn
//! as a repeat"). It names nothing of the service's crate (`handoff`): reading service records
//! and commands into these terms is the checker's job (`checker.rs`), and `model/tests.rs`
//! checks, command by command over random sequences, that the service's core agrees.
//!
//! The rules are one table, [`rule`]: the hand-off's phase × what the command asks of it → a
//! refusal, "answers as it is" (200, no version move) or one change (version + 1).
//!
//! Where the contract states no order between two refusals, the model takes the one a caller
//! can act on first, and says so at the row: a closed hand-off refuses everything but a close
//! (`handoff.closed`, whatever the turn); a cancel that names another turn is a conflict before
//! the turn's own state is looked at.

use std::fmt;

/// The current turn's status (`Status` in the OpenAPI document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Running,
    NeedsYou,
    Done,
    Failed,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 5] = [Status::Running, Status::NeedsYou, Status::Done, Status::Failed, Status::Cancelled];

    /// The contract's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::NeedsYou => "needs-you",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(word: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

/// What a machine may report: "running, needs-you, done, failed"; `cancelled` only the owner causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportStatus {
    Running,
    NeedsYou,
    Done,
    Failed,
}

impl ReportStatus {
    pub const ALL: [ReportStatus; 4] =
        [ReportStatus::Running, ReportStatus::NeedsYou, ReportStatus::Done, ReportStatus::Failed];

    pub fn status(self) -> Status {
        match self {
            ReportStatus::Running => Status::Running,
            ReportStatus::NeedsYou => Status::NeedsYou,
            ReportStatus::Done => Status::Done,
            ReportStatus::Failed => Status::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.status().as_str()
    }
}

/// What the contract says of a hand-off's turn: its number, open or closed, the current turn's
/// status and summary, and the version. Times, ids and the work record are not turn rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Handoff {
    pub turn: u64,
    pub closed: bool,
    pub status: Status,
    pub summary: Option<String>,
    pub version: u64,
    /// The current turn's steers: "a new turn starts with none".
    pub steers: usize,
}

/// "A turn takes at most 8 steers" (`STEERS_PER_TURN_MAX`).
pub const STEERS_PER_TURN: usize = 8;

impl Handoff {
    /// "A new hand-off starts at turn 1, state open, status running, version 1" (summary null).
    pub fn created() -> Handoff {
        Handoff { turn: 1, closed: false, status: Status::Running, summary: None, version: 1, steers: 0 }
    }

    /// A wait "answers at once when its version is above V or it is closed"; a held wait is
    /// answered by the next version move, which puts the version above V as well.
    pub fn answers_wait(&self, after: u64) -> bool {
        self.version > after || self.closed
    }
}

impl fmt::Display for Handoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.closed { "closed" } else { "open" };
        write!(f, "v{} turn {} {state} {} {:?}", self.version, self.turn, self.status.as_str(), self.summary)
    }
}

/// The four calls of the turn machine, with what their bodies carry that the rules read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Command {
    /// `POST /turns {"after"}` (owner): open turn `after + 1`.
    OpenTurn { after: u64 },
    /// `POST /report {"turn", "status", "summary"?}` (machine).
    Report { turn: u64, status: ReportStatus, summary: Option<String> },
    /// `POST /cancel {"turn"?}` (owner): stop the current turn.
    Cancel { turn: Option<u64> },
    /// `POST /close` (owner): the only terminal change.
    Close,
    /// `POST /steer {"turn", "prompt"}` (owner): words for the running turn.
    Steer { turn: u64 },
}

/// A 409 of the turn machine; it carries the hand-off, unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    Closed,
    Stale,
    TurnConflict,
    TurnRunning,
    TurnOutOfOrder,
    TurnFinished,
    SteerTooMany,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::Closed => "handoff.closed",
            Refusal::Stale => "handoff.stale",
            Refusal::TurnConflict => "handoff.turn_conflict",
            Refusal::TurnRunning => "handoff.turn_running",
            Refusal::TurnOutOfOrder => "handoff.turn_out_of_order",
            Refusal::TurnFinished => "handoff.turn_finished",
            Refusal::SteerTooMany => "steer.too_many",
        }
    }
}

/// Where the hand-off is, as far as the rules tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Closed,
    /// Open, the current turn still going: running or needs-you.
    Going,
    /// Open, the current turn ended by a final report: done or failed.
    Finished,
    /// Open, the current turn ended by the owner.
    Cancelled,
}

/// What a command asks of the hand-off it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ask {
    /// `after` is the current turn.
    OpenFromCurrent,
    /// `after` is the turn before the current one: the current turn was opened from it.
    OpenAgain,
    /// `after` is older than that, or a turn that does not exist yet.
    OpenFromOther,
    ReportOlder,
    /// A report on the current turn; `same`: its status and summary are the current ones.
    ReportCurrent {
        same: bool,
    },
    ReportFuture,
    /// A cancel naming no turn, or the current one.
    CancelCurrent,
    CancelOther,
    Close,
    SteerOlder,
    /// A steer of the current turn; `full`: it has taken as many steers as a turn takes.
    SteerCurrent {
        full: bool,
    },
    SteerFuture,
}

/// One row's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    Refuse(Refusal),
    /// 200 with the hand-off as it is: nothing written, no version move, nobody woken.
    AsItIs,
    /// 200 with the hand-off changed, version + 1.
    Change,
}

pub fn phase(h: &Handoff) -> Phase {
    if h.closed {
        return Phase::Closed;
    }
    match h.status {
        Status::Running | Status::NeedsYou => Phase::Going,
        Status::Done | Status::Failed => Phase::Finished,
        Status::Cancelled => Phase::Cancelled,
    }
}

pub fn ask(h: &Handoff, command: &Command) -> Ask {
    match command {
        Command::OpenTurn { after } => {
            if *after == h.turn {
                Ask::OpenFromCurrent
            } else if after.checked_add(1) == Some(h.turn) {
                Ask::OpenAgain
            } else {
                Ask::OpenFromOther
            }
        }
        Command::Report { turn, status, summary } => {
            if *turn < h.turn {
                Ask::ReportOlder
            } else if *turn > h.turn {
                Ask::ReportFuture
            } else {
                Ask::ReportCurrent { same: status.status() == h.status && *summary == h.summary }
            }
        }
        Command::Cancel { turn: None } => Ask::CancelCurrent,
        Command::Cancel { turn: Some(t) } if *t == h.turn => Ask::CancelCurrent,
        Command::Cancel { turn: Some(_) } => Ask::CancelOther,
        Command::Close => Ask::Close,
        Command::Steer { turn } if *turn < h.turn => Ask::SteerOlder,
        Command::Steer { turn } if *turn > h.turn => Ask::SteerFuture,
        Command::Steer { .. } => Ask::SteerCurrent { full: h.steers >= STEERS_PER_TURN },
    }
}

/// The contract as a table: phase × ask → outcome, each row in the contract's words.
pub fn rule(phase: Phase, ask: Ask) -> Rule {
    use Ask::*;
    use Phase::*;
    match (phase, ask) {
        // close: "Repeating it → 200, no version move."
        (Closed, Close) => Rule::AsItIs,
        // "Closed → 409 handoff.closed" on open-turn, report and cancel alike, whatever turn
        // they name: a closed hand-off never changes.
        (Closed, OpenFromCurrent | OpenAgain | OpenFromOther) => Rule::Refuse(Refusal::Closed),
        (Closed, ReportOlder | ReportCurrent { .. } | ReportFuture) => Rule::Refuse(Refusal::Closed),
        (Closed, CancelCurrent | CancelOther) => Rule::Refuse(Refusal::Closed),
        // "the only terminal change: state closed, and a turn still going becomes cancelled".
        (Going | Finished | Cancelled, Close) => Rule::Change,

        // open-turn: "When turn n is current and has ended (done, failed or cancelled): opens
        // turn n+1, status running, summary null, version +1."
        (Finished | Cancelled, OpenFromCurrent) => Rule::Change,
        // "handoff.turn_running while the current turn is still going (running or needs-you:
        // that is steering, not a new turn)".
        (Going, OpenFromCurrent) => Rule::Refuse(Refusal::TurnRunning),
        // "Repeating the call for a turn already opened from `after` answers that same turn
        // with no version move" (and "`after = turn - 1` answers the current turn as a repeat").
        (Going | Finished | Cancelled, OpenAgain) => Rule::AsItIs,
        // "handoff.turn_conflict for a caller that saw an older turn (or claims a future one)".
        (Going | Finished | Cancelled, OpenFromOther) => Rule::Refuse(Refusal::TurnConflict),

        // report: "An older turn → 409 handoff.stale, changing nothing, so a late or retried
        // turn-1 report can never touch turn 2."
        (Going | Finished | Cancelled, ReportOlder) => Rule::Refuse(Refusal::Stale),
        // "A turn not yet opened → 409 handoff.turn_out_of_order."
        (Going | Finished | Cancelled, ReportFuture) => Rule::Refuse(Refusal::TurnOutOfOrder),
        // "needs-you and running may alternate; done and failed end the turn." ...
        (Going, ReportCurrent { same: false }) => Rule::Change,
        // ... "A report identical to the current state moves no version either."
        (Going, ReportCurrent { same: true }) => Rule::AsItIs,
        // "A turn that has ended → 409 handoff.turn_finished, except an exact repeat of its
        // final report (same status and summary), which answers 200 and moves no version."
        (Finished, ReportCurrent { same: true }) => Rule::AsItIs,
        (Finished, ReportCurrent { same: false }) => Rule::Refuse(Refusal::TurnFinished),
        // A cancelled turn had no final report to repeat (a machine cannot report cancelled).
        (Cancelled, ReportCurrent { .. }) => Rule::Refuse(Refusal::TurnFinished),

        // cancel: "With `turn` given and not current → 409 handoff.turn_conflict" (first: the
        // caller saw another turn than the one it would stop).
        (Going | Finished | Cancelled, CancelOther) => Rule::Refuse(Refusal::TurnConflict),
        // "stops the current turn (status cancelled, version +1)".
        (Going, CancelCurrent) => Rule::Change,
        // "A turn already done or failed → 409 handoff.turn_finished".
        (Finished, CancelCurrent) => Rule::Refuse(Refusal::TurnFinished),
        // "cancelling an already cancelled turn → 200, no version move".
        (Cancelled, CancelCurrent) => Rule::AsItIs,

        // steer: "the hand-off is closed: handoff.closed, whatever else also holds".
        (Closed, SteerOlder | SteerCurrent { .. } | SteerFuture) => Rule::Refuse(Refusal::Closed),
        // "an older turn: handoff.stale; a later one: handoff.turn_out_of_order".
        (Going | Finished | Cancelled, SteerOlder) => Rule::Refuse(Refusal::Stale),
        (Going | Finished | Cancelled, SteerFuture) => Rule::Refuse(Refusal::TurnOutOfOrder),
        // "the current turn has ended: handoff.turn_finished".
        (Finished | Cancelled, SteerCurrent { .. }) => Rule::Refuse(Refusal::TurnFinished),
        // "The number per turn is bounded and named."
        (Going, SteerCurrent { full: true }) => Rule::Refuse(Refusal::SteerTooMany),
        // "A steer ... moves the version once."
        (Going, SteerCurrent { full: false }) => Rule::Change,
    }
}

/// What an accepted command answers: the hand-off after it, and whether the version moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub handoff: Handoff,
    pub moved: bool,
}

/// The model's answer to `command` on `h`: the row of [`rule`], carried out.
pub fn answer(h: &Handoff, command: &Command) -> Result<Accepted, Refusal> {
    match rule(phase(h), ask(h, command)) {
        Rule::Refuse(refusal) => Err(refusal),
        Rule::AsItIs => Ok(Accepted { handoff: h.clone(), moved: false }),
        Rule::Change => Ok(Accepted { handoff: changed(h, command), moved: true }),
    }
}

/// The one change a command makes when its row says it changes the hand-off.
fn changed(h: &Handoff, command: &Command) -> Handoff {
    let mut next = h.clone();
    next.version += 1;
    match command {
        // "opens turn n+1, status running, summary null".
        Command::OpenTurn { .. } => {
            next.turn += 1;
            next.status = Status::Running;
            next.summary = None;
            next.steers = 0;
        }
        // The words join the turn's steers; the status stays.
        Command::Steer { .. } => next.steers += 1,
        // The reported status and summary ("a report without summary sets it to null").
        Command::Report { status, summary, .. } => {
            next.status = status.status();
            next.summary = summary.clone();
        }
        // "status cancelled"; the summary the machine last gave stays.
        Command::Cancel { .. } => next.status = Status::Cancelled,
        // "state closed, and a turn still going becomes cancelled in the same write".
        Command::Close => {
            next.closed = true;
            if phase(h) == Phase::Going {
                next.status = Status::Cancelled;
            }
        }
    }
    next
}

#[cfg(test)]
mod tests;
