//! What the router asks a hand-off's Durable Object: the caller, already authenticated,
//! and one operation, already parsed and validated. Plain data, serialised over the
//! object's internal `fetch`.

use handoff_core::handoff::Change;
use handoff_core::role::Role;
use serde::{Deserialize, Serialize};

/// Who is asking: the token's subject, its role and (machine tokens) its hand-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub owner: String,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Create { id: String, session: String, machine: String, size: String },
    Get,
    Change { change: Change },
    Wait { after: u64, timeout_s: u64 },
    /// `GET …/turns`: a page of the lineage, newest turns first from `before` (exclusive).
    Turns {
        #[serde(default)]
        before: Option<u64>,
        #[serde(default = "turns_page_default")]
        limit: usize,
    },
    /// `GET …/package`, as JSON or as Markdown for a person.
    Package { markdown: bool },
    /// `GET …/briefing`: `base_url` is where the API is, for the closing instruction.
    Briefing { budget_bytes: usize, reach_api: bool, base_url: String },
    /// The benchmark's floor: reach the object and answer, touching no storage.
    Floor,
    /// Test hook: make the next change fail as a runtime would (see [`Fault`]).
    TestFault { fault: Fault },
    /// Test hook: what this hand-off's storage holds (bytes and rows).
    TestStorage,
}

fn turns_page_default() -> usize {
    handoff_core::limits::TURNS_PAGE_DEFAULT
}

/// A failure a test arms for the next change of one hand-off (only where test hooks are on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fail", rename_all = "snake_case")]
pub enum Fault {
    /// The change's `statement`-th SQL statement (from 1) fails in the runtime's SQLite, so the
    /// change's transaction rolls back.
    Statement { statement: usize },
    /// The change's commit is lost: its writes roll back, and `storage.sync()` rejects, as the
    /// runtime's does when a commit fails.
    Sync,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub caller: Caller,
    pub op: Op,
    /// The request's `Idempotency-Key` and a fingerprint of what it asked.
    #[serde(default)]
    pub idempotency: Option<Idempotency>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idempotency {
    pub key: String,
    pub fingerprint: String,
}

/// What an owner's index object is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum IndexAsk {
    /// A hand-off's row, delivered from its outbox; kept only if its version is higher.
    Put { row: handoff_core::index::IndexRow },
    List { query: handoff_core::index::ListQuery },
    /// Test hook (only where test hooks are on): refuse deliveries while on.
    RefuseDeliveries { on: bool },
    /// Test hook: what this index's storage holds.
    TestStorage,
}
