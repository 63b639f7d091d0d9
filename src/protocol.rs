//! What the router asks a hand-off's Durable Object: the caller, already authenticated,
//! and one operation, already parsed and validated. Plain data, serialised over the
//! object's internal `fetch`.

use crate::handoff::Change;
use crate::token::Role;
use crate::work::Actor;
use serde::{Deserialize, Serialize};

/// Who is asking: the token's subject, its role and (machine tokens) its hand-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub owner: String,
    pub role: Role,
}

impl Caller {
    pub fn actor(&self) -> Actor {
        match self.role {
            Role::Owner => Actor::Owner,
            Role::Machine => Actor::Machine,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Create { id: String, session: String, machine: String, size: String },
    Get,
    Change { change: Change },
    Wait { after: u64, timeout_s: u64 },
    /// `GET …/turns`: the lineage.
    Turns,
    /// `GET …/package`, as JSON or as Markdown for a person.
    Package { markdown: bool },
    /// `GET …/briefing`: `base_url` is where the API is, for the closing instruction.
    Briefing { budget_bytes: usize, reach_api: bool, base_url: String },
    /// The benchmark's floor: reach the object and answer, touching no storage.
    Floor,
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
    Put { row: crate::index::IndexRow },
    List { query: crate::index::ListQuery },
    /// Test hook (only where `HANDOFF_TEST_HOOKS` is set): refuse deliveries while on.
    RefuseDeliveries { on: bool },
}
