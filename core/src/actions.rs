//! What a caller may send now: the `actions` of every record the API answers, so that a
//! client (the console) offers exactly the commands the rules would take, and none that
//! would be refused.
//!
//! Invariant, shown by the property test in `actions/tests.rs` over hand-offs reached by
//! random histories: for each role, an action in [`actions`] is accepted by
//! [`crate::handoff::apply`] and changes the hand-off (a compile may find its package
//! unchanged, which it answers as such); an action not in it is refused, or is a repeat that
//! changes nothing. Who may send each action is written once, in [`Action::sender`], and
//! `apply` refuses the other role with it.

use crate::handoff::{Change, Handoff};
use crate::package::OfferState;
use crate::role::Role;
use crate::turn::Command as TurnCommand;
use crate::work::{self, BlockerStatus};
use serde::Serialize;

/// A command a button can send.
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
}

impl Action {
    /// Every action, in the order the record lists them.
    pub const ALL: [Action; 8] = [
        Action::OpenTurn,
        Action::Cancel,
        Action::Close,
        Action::Report,
        Action::Compile,
        Action::Accept,
        Action::Reject,
        Action::ResolveBlocker,
    ];

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
        }
    }

    /// Who may send it; `None` for either role. The owner steers turns and compiles; the
    /// machine reports; either side of a hand-off may take or refuse its package and resolve
    /// a blocker.
    pub fn sender(self) -> Option<Role> {
        match self {
            Action::OpenTurn | Action::Cancel | Action::Close | Action::Compile => Some(Role::Owner),
            Action::Report => Some(Role::Machine),
            Action::Accept | Action::Reject | Action::ResolveBlocker => None,
        }
    }

    /// The action a change is, if a button can send it.
    pub fn of(change: &Change) -> Option<Action> {
        match change {
            Change::Turn { command, .. } => Some(match command {
                TurnCommand::OpenTurn { .. } => Action::OpenTurn,
                TurnCommand::Report { .. } => Action::Report,
                TurnCommand::Cancel { .. } => Action::Cancel,
                TurnCommand::Close => Action::Close,
            }),
            Change::Compile { .. } => Some(Action::Compile),
            Change::Accept { .. } => Some(Action::Accept),
            Change::Reject { .. } => Some(Action::Reject),
            Change::Work { command: work::Command::ResolveBlocker { .. } } => Some(Action::ResolveBlocker),
            Change::Work { .. } | Change::SetPolicy { .. } | Change::SetRuntimes { .. } => None,
        }
    }

    /// Whether the hand-off, as it is, takes this action from its sender.
    fn open_now(self, h: &Handoff) -> bool {
        let record = &h.record;
        if record.is_closed() {
            return false;
        }
        let current = h.ledger.current.as_ref();
        match self {
            Action::OpenTurn => record.status.has_ended(),
            Action::Cancel | Action::Report => !record.status.has_ended(),
            Action::Close => true,
            // A package briefs from the work record: none until the owner sets the work.
            Action::Compile => {
                h.work.spec.is_some() && !current.is_some_and(|c| c.state == OfferState::Accepted && c.turn == record.turn)
            }
            Action::Accept | Action::Reject => current.is_some_and(|c| c.state != OfferState::Accepted),
            Action::ResolveBlocker => h.work.blockers.iter().any(|b| b.status == BlockerStatus::Open),
        }
    }
}

/// The actions `role` may send to `h` now, in [`Action::ALL`]'s order.
pub fn actions(h: &Handoff, role: Role) -> Vec<Action> {
    Action::ALL
        .into_iter()
        .filter(|a| a.sender().is_none_or(|sender| sender == role) && a.open_now(h))
        .collect()
}

#[cfg(test)]
mod tests;
