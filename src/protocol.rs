//! What the router asks a hand-off's Durable Object: the caller, already authenticated,
//! and one operation, already parsed and validated. Plain data, serialised over the
//! object's internal `fetch`.

use crate::token::Role;
use crate::turn::Command;
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
    Apply { command: Command },
    Wait { after: u64, timeout_s: u64 },
    /// The benchmark's floor: reach the object and answer, touching no storage.
    Floor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub caller: Caller,
    pub op: Op,
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
