//! The test hooks: what a test may ask a hand-off's object or an owner's index where test
//! hooks are on (`HANDOFF_TEST_HOOKS`), each one variant of the product's asks
//! ([`Op::Hook`](crate::decider::Op::Hook), [`Ask::Hook`](crate::owner::Ask::Hook)), so that
//! the product's vocabulary names none of them.

use serde::{Deserialize, Serialize};

/// A test hook on one hand-off: the owner's only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffHook {
    /// Make the next change fail as a runtime would.
    Fault { fault: Fault },
    /// What this hand-off's storage holds.
    Storage,
    /// Move this object's clock `advance_ms` ahead and ring its alarm now.
    Clock { advance_ms: i64 },
}

/// A failure a test arms for the next change of one hand-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fail", rename_all = "snake_case")]
pub enum Fault {
    /// The change's `statement`-th write (from 1) fails in the runtime's SQLite, so its
    /// transaction rolls back.
    Statement { statement: usize },
    /// The change's commit is lost: its writes roll back and the change is answered 503.
    Sync,
    /// The object panics between deciding the change (which memory then holds) and storing
    /// it: the release build traps there, as it would on a bug.
    Panic,
}

/// What a hand-off's plan asks of its object for a test hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanHook {
    /// Arm this failure for the next change.
    Arm(Fault),
    /// Move the object's clock this far ahead and ring its alarm now.
    AdvanceClockMs(i64),
}

/// A test hook on one owner's index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexHook {
    /// While on, refuse the rows hand-offs send (as a failing index would).
    RefuseRows { on: bool },
    /// While on, notification deliveries owed are stored but not sent (as if the runtime died
    /// between the commit and the send).
    HoldDeliveries { on: bool },
    /// The database's size.
    Storage,
    /// Store a row under `id` that no build can read, as a damaged value would be.
    PutUnreadable { id: String },
    /// What the index stores of hand-off `id` (its row, its deliveries, its erased life).
    StorageOf { id: String },
}
