//! The API's answers and request bodies as typed values. Enums and request types come from the
//! service crate where it has them; the record is read leniently (fields a newer server adds
//! are ignored, fields an older one lacks are `None`), so the client and the Worker need not be
//! deployed in lockstep. Every answer also keeps its raw JSON (see [`crate::client::Reply`]),
//! which is what `--json` prints.

use handoff_core::turn::{ReportStatus, State, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use handoff_core::package::{OfferState, PackageRequest, RejectReason};
pub use handoff_core::turn::ContinuedFrom;
pub use handoff_core::work::{Severity, WorkInput};

/// A hand-off record: `{"handoff": …}` in every success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub id: String,
    pub owner: String,
    pub session: String,
    pub machine: String,
    pub size: String,
    pub turn: u64,
    pub state: State,
    pub status: Status,
    pub summary: Option<String>,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
    /// The runtime the current turn was handed to, when it was.
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub package_version: Option<u64>,
    #[serde(default)]
    pub package_hash: Option<String>,
    #[serde(default)]
    pub continued_from: Option<ContinuedFrom>,
    #[serde(default)]
    pub suggestion: Option<Suggestion>,
}

/// A hand-off the owner may choose to make. The service never acts on it, and neither does
/// this client: it is printed, nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// `context-threshold`, `provider-limit` or `quota-threshold`; kept as text so that a
    /// reason this client does not know yet is still shown.
    pub reason: String,
    pub turn: u64,
    pub runtimes: Vec<String>,
    pub command: String,
}

/// One row of the owner's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub id: String,
    pub session: String,
    pub machine: String,
    pub size: String,
    pub turn: u64,
    pub state: State,
    pub status: Status,
    pub summary: Option<String>,
    pub version: u64,
    pub updated_at: String,
    #[serde(default)]
    pub suggestion: Option<Suggestion>,
}

/// `{"handoffs": [row…], "cursor": next page or null}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Page {
    pub handoffs: Vec<Row>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The create answer: the hand-off, its machine token, and whether this call created it
/// (201) or found the session's existing hand-off (200).
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub handoff: Handoff,
    pub machine_token: String,
    pub new: bool,
}

/// One turn of the lineage (`GET …/turns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEntry {
    pub turn: u64,
    pub status: Status,
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub package_version: Option<u64>,
    #[serde(default)]
    pub package_hash: Option<String>,
    #[serde(default)]
    pub continued_from: Option<ContinuedFrom>,
    pub opened_at: String,
    #[serde(default)]
    pub ended_at: Option<String>,
}

/// `POST …/package` (and its dry run).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Compiled {
    pub package_version: u64,
    pub package_hash: String,
    pub changed: bool,
    pub package: Value,
}

/// `GET …/package`: the latest package and what its destination said of it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Latest {
    pub package_version: u64,
    pub package_hash: String,
    pub state: OfferState,
    #[serde(default)]
    pub rejection: Option<Value>,
    pub package: Value,
}

/// An item of the work record (`decision`, `artifact`, `blocker`, `work`, `policy`, …) with
/// the hand-off it changed. The item stays JSON: it is shown, never interpreted.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub handoff: Handoff,
    pub kind: &'static str,
    pub item: Value,
}

impl Item {
    pub fn id(&self) -> Option<&str> {
        self.item["id"].as_str()
    }
}

// ---- Request bodies the service crate only reads (it derives Deserialize alone). ----

/// What a machine says of its session's budget on a report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_remaining: Option<u64>,
    /// `"provider-limit"` when the turn ended on a provider's cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub turn: u64,
    pub status: ReportStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Indexes of acceptance criteria a final report leaves unmet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmet: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub statement: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    pub evidence: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub severity: Severity,
    pub title: String,
}

/// One touched file: its path and line counts, never its contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCounts {
    pub path: String,
    pub insertions: u32,
    pub deletions: u32,
}

/// `PUT …/policy`: the runtimes this owner can hand off to, and the thresholds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub runtimes: Vec<String>,
    pub context_threshold_pct: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_threshold: Option<u64>,
}

/// `reach` of a briefing: what the destination can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reach {
    Api,
    None,
}

impl Reach {
    pub fn as_str(self) -> &'static str {
        match self {
            Reach::Api => "api",
            Reach::None => "none",
        }
    }
}
