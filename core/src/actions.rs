//! Who may send each change, and what a caller may send now: the `actions` of every record the
//! API answers, so that a client (the console) offers exactly the commands the rules would
//! take, and none that would be refused.
//!
//! Who may send each change is written once, in [`Action::sender`]: [`crate::handoff::apply`]
//! refuses the other role with it before anything else, and nothing outside the core checks a
//! role. [`actions`] lists the [`Action::listed`] ones.
//!
//! Invariant, shown by the property test in `actions/tests.rs` over hand-offs reached by
//! random histories: for each role, an action in [`actions`] is accepted by
//! [`crate::handoff::apply`] and changes the hand-off (a compile may find its package
//! unchanged, which it answers as such); a listed action not in it is refused, or is a repeat
//! that changes nothing.

use crate::handoff::{Change, Handoff};
use crate::package::OfferState;
use crate::role::Role;
use crate::turn::Command as TurnCommand;
use crate::work::{self, BlockerStatus};
use serde::Serialize;

crate::listed_enum! {
    /// Every change a caller can send, by what it does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Action {
        /// `POST …/turns`: open the next turn (maybe handing it to a runtime).
        OpenTurn,
        /// `POST …/cancel`: stop the current turn.
        Cancel,
        /// `POST …/close`: end the hand-off, for good.
        Close,
        /// `POST …/report`: the machine reports on the current turn.
        Report,
        /// `POST …/package`: compile (or recompile) the package.
        Compile,
        /// `POST …/package/accept`.
        Accept,
        /// `POST …/package/reject`.
        Reject,
        /// `POST …/blockers/:bid/resolve`, on an open blocker.
        ResolveBlocker,
        /// `PUT …/work`.
        SetWork,
        /// `POST …/decisions`.
        RecordDecision,
        /// `POST …/artifacts`.
        AddArtifact,
        /// `POST …/blockers`.
        AddBlocker,
        /// `POST …/workspace`.
        ReportWorkspace,
        /// `PUT …/policy`.
        SetPolicy,
        /// `PUT …/runtimes`.
        SetRuntimes,
        /// `POST …/answer`: answer the open question.
        Answer,
        /// `POST …/steer`: the owner's words for the running turn.
        Steer,
    }
}

impl Action {
    /// The action as the record writes it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::OpenTurn => "open_turn",
            Action::Cancel => "cancel",
            Action::Close => "close",
            Action::Report => "report",
            Action::Compile => "compile",
            Action::Accept => "accept",
            Action::Reject => "reject",
            Action::ResolveBlocker => "resolve_blocker",
            Action::SetWork => "set_work",
            Action::RecordDecision => "record_decision",
            Action::AddArtifact => "add_artifact",
            Action::AddBlocker => "add_blocker",
            Action::ReportWorkspace => "report_workspace",
            Action::SetPolicy => "set_policy",
            Action::SetRuntimes => "set_runtimes",
            Action::Answer => "answer",
            Action::Steer => "steer",
        }
    }

    /// Who may send it; `None` for either role. The owner steers turns, sets the work and the
    /// policy, and compiles; the machine reports on the turn, its workspace and its runtimes;
    /// either side may record what happened and take or refuse a package.
    pub fn sender(self) -> Option<Role> {
        match self {
            Action::OpenTurn
            | Action::Cancel
            | Action::Close
            | Action::Compile
            | Action::SetWork
            | Action::SetPolicy
            | Action::Answer
            | Action::Steer => Some(Role::Owner),
            Action::Report | Action::ReportWorkspace | Action::SetRuntimes => Some(Role::Machine),
            Action::Accept
            | Action::Reject
            | Action::ResolveBlocker
            | Action::RecordDecision
            | Action::AddArtifact
            | Action::AddBlocker => None,
        }
    }

    /// Whether a record's `actions` lists it: the commands a button sends on the record as it
    /// stands. Recording what happened (work, decisions, artifacts, blockers, the workspace,
    /// the policy, the runtimes) is always open while the hand-off is, and is not listed.
    pub fn listed(self) -> bool {
        self.listed_when().is_some()
    }

    /// The action a change is.
    pub fn of(change: &Change) -> Action {
        match change {
            Change::Turn { command, .. } => match command {
                TurnCommand::OpenTurn { .. } => Action::OpenTurn,
                TurnCommand::Report { .. } => Action::Report,
                TurnCommand::Cancel { .. } => Action::Cancel,
                TurnCommand::Close => Action::Close,
                TurnCommand::Answer { .. } => Action::Answer,
                TurnCommand::Steer { .. } => Action::Steer,
            },
            Change::Compile { .. } => Action::Compile,
            Change::Accept { .. } => Action::Accept,
            Change::Reject { .. } => Action::Reject,
            Change::Work { command } => match command {
                work::Command::SetWork(_) => Action::SetWork,
                work::Command::RecordDecision(_) => Action::RecordDecision,
                work::Command::AddArtifact(_) => Action::AddArtifact,
                work::Command::AddBlocker(_) => Action::AddBlocker,
                work::Command::ResolveBlocker { .. } => Action::ResolveBlocker,
                work::Command::ReportWorkspace(_) => Action::ReportWorkspace,
            },
            Change::SetPolicy { .. } => Action::SetPolicy,
            Change::SetRuntimes { .. } => Action::SetRuntimes,
        }
    }

    /// Whether the hand-off, as it is, takes this listed action from its sender.
    fn open_now(self, h: &Handoff) -> bool {
        !h.record.is_closed() && self.listed_when().is_some_and(|open| open(h))
    }

    /// When an open hand-off takes a listed action; `None` for an action never listed.
    fn listed_when(self) -> Option<fn(&Handoff) -> bool> {
        match self {
            Action::OpenTurn => Some(|h: &Handoff| h.record.status.has_ended()),
            Action::Cancel | Action::Report => Some(|h: &Handoff| !h.record.status.has_ended()),
            Action::Close => Some(|_: &Handoff| true),
            // A package briefs from the work record: none until the owner sets the work.
            Action::Compile => Some(|h: &Handoff| {
                let current = h.ledger.current.as_ref();
                h.work.spec.is_some()
                    && !current.is_some_and(|c| c.state == OfferState::Accepted && c.turn == h.record.turn)
            }),
            Action::Accept | Action::Reject => {
                Some(|h: &Handoff| h.ledger.current.as_ref().is_some_and(|c| c.state != OfferState::Accepted))
            }
            Action::ResolveBlocker => {
                Some(|h: &Handoff| h.work.blockers.iter().any(|b| b.status == BlockerStatus::Open))
            }
            Action::Answer => Some(|h: &Handoff| h.record.question.as_ref().is_some_and(|q| q.is_open())),
            Action::Steer => Some(|h: &Handoff| {
                !h.record.status.has_ended() && h.record.steers.len() < crate::limits::STEERS_PER_TURN_MAX
            }),
            Action::SetWork
            | Action::RecordDecision
            | Action::AddArtifact
            | Action::AddBlocker
            | Action::ReportWorkspace
            | Action::SetPolicy
            | Action::SetRuntimes => None,
        }
    }
}

/// The listed actions `role` may send to `h` now, in [`Action::ALL`]'s order.
pub fn actions(h: &Handoff, role: Role) -> Vec<Action> {
    Action::ALL
        .into_iter()
        .filter(|a| a.listed() && a.sender().is_none_or(|sender| sender == role) && a.open_now(h))
        .collect()
}

#[cfg(test)]
mod tests;
