//! Every answer of the HTTP contract as a type, built from the core's values with `From`:
//! the Worker serialises them, the CLI deserialises them, and a test holds them to the
//! examples of `docs/openapi.yaml`. Times are RFC 3339 here and only here.
//!
//! Reading is lenient where it can be: a field a newer server adds is ignored, and an optional
//! field an older one lacks reads as `None`, so a client and a Worker need not be deployed in
//! lockstep. A suggestion's reason stays text for the same reason.

use handoff_core::actions;
use handoff_core::handoff::{self as core_handoff, Effect};
use handoff_core::index::IndexRow;
use handoff_core::package::{CompileAnswer, ContinuedFrom, LatestAnswer, OfferState, RejectReason, Rejection as CoreRejection, TurnEntry};
use handoff_core::role::Role;
use handoff_core::runtimes::{self, Runtime};
use handoff_core::suggestion;
use handoff_core::time::rfc3339;
use handoff_core::turn::{State, Status};
use handoff_core::work::{self, FileInput, Item, Severity, WorkInput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A hand-off's record: `{"handoff": …}` in every success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// What the session's machine last reported it can run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_runtimes: Option<MachineRuntimes>,
    /// The commands the caller may send now (`handoff_core::actions`): text, so that a client
    /// reads an action a newer server adds.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The owner's policy: which runtimes a turn may be handed to, and when to suggest it.
    #[serde(default)]
    pub policy: Option<suggestion::Policy>,
}

/// `machine_runtimes` of a record: the machine's newest `PUT …/runtimes` and when it came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineRuntimes {
    pub runtimes: Vec<Runtime>,
    pub reported_at: String,
}

impl From<&runtimes::MachineRuntimes> for MachineRuntimes {
    fn from(m: &runtimes::MachineRuntimes) -> MachineRuntimes {
        MachineRuntimes { runtimes: m.runtimes.clone(), reported_at: rfc3339(m.reported_at) }
    }
}

impl Handoff {
    /// The record as `role` is answered it: with the actions that role may send now.
    pub fn of(h: &core_handoff::Handoff, role: Role) -> Handoff {
        let r = &h.record;
        Handoff {
            id: r.id.clone(),
            owner: r.owner.clone(),
            session: r.session.clone(),
            machine: r.machine.clone(),
            size: r.size.clone(),
            turn: r.turn,
            state: r.state,
            status: r.status,
            summary: r.summary.clone(),
            version: r.version,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            runtime: r.runtime.clone(),
            package_version: r.package_version,
            package_hash: r.package_hash.clone(),
            continued_from: r.continued_from.clone(),
            suggestion: r.suggestion.as_ref().map(Suggestion::from),
            machine_runtimes: r.machine_runtimes.as_ref().map(MachineRuntimes::from),
            actions: actions::actions(h, role).into_iter().map(|a| a.as_str().to_string()).collect(),
            policy: h.extras.policy.clone(),
        }
    }
}

/// A hand-off the owner may choose to make; the service never acts on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// `context-threshold`, `provider-limit` or `quota-threshold`.
    pub reason: String,
    pub turn: u64,
    pub runtimes: Vec<String>,
    pub command: String,
}

impl From<&suggestion::Suggestion> for Suggestion {
    fn from(s: &suggestion::Suggestion) -> Suggestion {
        Suggestion { reason: s.reason.as_str().to_string(), turn: s.turn, runtimes: s.runtimes.clone(), command: s.command.clone() }
    }
}

/// One row of the owner's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub package_version: Option<u64>,
    #[serde(default)]
    pub package_hash: Option<String>,
}

impl From<&IndexRow> for Row {
    fn from(r: &IndexRow) -> Row {
        Row {
            id: r.id.clone(),
            session: r.session.clone(),
            machine: r.machine.clone(),
            size: r.size.clone(),
            turn: r.turn,
            state: r.state,
            status: r.status,
            summary: r.summary.clone(),
            version: r.version,
            updated_at: rfc3339(r.updated_at),
            suggestion: r.suggestion.as_ref().map(Suggestion::from),
            runtime: r.runtime.clone(),
            package_version: r.package_version,
            package_hash: r.package_hash.clone(),
        }
    }
}

/// `GET /v1/handoffs`: a page of rows, newest first, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub handoffs: Vec<Row>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `POST /v1/handoffs`: the hand-off and its machine's token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub handoff: Handoff,
    pub machine_token: String,
}

/// One turn of the lineage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
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

impl From<&TurnEntry> for Turn {
    fn from(t: &TurnEntry) -> Turn {
        Turn {
            turn: t.turn,
            status: t.status,
            runtime: t.runtime.clone(),
            package_version: t.package_version,
            package_hash: t.package_hash.clone(),
            continued_from: t.continued_from.clone(),
            opened_at: rfc3339(t.opened_at),
            ended_at: t.ended_at.map(rfc3339),
        }
    }
}

/// `GET /v1/handoffs/:id/turns`: a page of the lineage, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turns {
    pub turns: Vec<Turn>,
    #[serde(default)]
    pub next_before: Option<u64>,
    pub handoff: Handoff,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub id: String,
    pub statement: String,
    pub rationale: Option<String>,
    pub evidence: Vec<String>,
    pub supersedes: Option<String>,
    pub superseded_by: Option<String>,
    pub recorded_at: String,
    pub by: Role,
}

impl From<&work::Decision> for Decision {
    fn from(d: &work::Decision) -> Decision {
        Decision {
            id: d.id.clone(),
            statement: d.statement.clone(),
            rationale: d.rationale.clone(),
            evidence: d.evidence.clone(),
            supersedes: d.supersedes.clone(),
            superseded_by: d.superseded_by.clone(),
            recorded_at: rfc3339(d.recorded_at),
            by: d.by,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub version: u64,
    pub uri: String,
    pub sha256: Option<String>,
    pub recorded_at: String,
    pub by: Role,
}

impl From<&work::Artifact> for Artifact {
    fn from(a: &work::Artifact) -> Artifact {
        Artifact {
            id: a.id.clone(),
            kind: a.kind.clone(),
            title: a.title.clone(),
            version: a.version,
            uri: a.uri.clone(),
            sha256: a.sha256.clone(),
            recorded_at: rfc3339(a.recorded_at),
            by: a.by,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    pub id: String,
    pub severity: Severity,
    pub title: String,
    pub status: work::BlockerStatus,
    pub raised_at: String,
    pub resolved_at: Option<String>,
    pub by: Role,
}

impl From<&work::Blocker> for Blocker {
    fn from(b: &work::Blocker) -> Blocker {
        Blocker {
            id: b.id.clone(),
            severity: b.severity,
            title: b.title.clone(),
            status: b.status,
            raised_at: rfc3339(b.raised_at),
            resolved_at: b.resolved_at.map(rfc3339),
            by: b.by,
        }
    }
}

/// `GET …/work`: the whole work record, as a page shows it: the work as last set, every
/// decision and every artifact version in the order recorded, every blocker in the order
/// raised, the workspace paths in code-point order, and the criteria left unmet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkRecord {
    pub spec: Option<Work>,
    pub decisions: Vec<Decision>,
    pub artifacts: Vec<Artifact>,
    pub blockers: Vec<Blocker>,
    pub files: Vec<FileInput>,
    pub unmet: Vec<u32>,
}

impl WorkRecord {
    pub fn of(handoff_id: &str, w: &work::Work) -> WorkRecord {
        WorkRecord {
            spec: w.spec.as_ref().map(|spec| Work::of(handoff_id, spec)),
            decisions: w.decisions.iter().map(Decision::from).collect(),
            artifacts: w.artifacts.iter().map(Artifact::from).collect(),
            blockers: w.blockers.iter().map(Blocker::from).collect(),
            files: w
                .files
                .iter()
                .map(|(path, c)| FileInput { path: path.clone(), insertions: c.insertions, deletions: c.deletions })
                .collect(),
            unmet: w.unmet.clone(),
        }
    }
}

/// `PUT …/work`: the work as set, under the hand-off's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    pub id: String,
    pub title: String,
    pub goal: String,
    #[serde(default)]
    pub task_type: Option<String>,
    #[serde(default)]
    pub priority: Option<String>,
    pub constraints: Vec<String>,
    pub acceptance_criteria: Vec<String>,
}

impl Work {
    pub fn of(handoff_id: &str, w: &WorkInput) -> Work {
        Work {
            id: handoff_id.to_string(),
            title: w.title.clone(),
            goal: w.goal.clone(),
            task_type: w.task_type.clone(),
            priority: w.priority.clone(),
            constraints: w.constraints.clone(),
            acceptance_criteria: w.acceptance_criteria.clone(),
        }
    }
}

/// `POST …/workspace`: the paths this report named, and how many the record keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub files: Vec<FileInput>,
    pub paths_kept: usize,
}

/// `POST …/package` (and its dry run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiled {
    pub package_version: u64,
    pub package_hash: String,
    pub changed: bool,
    /// The document the hash is computed over; shown, never interpreted by a client.
    pub package: Value,
}

impl From<&CompileAnswer> for Compiled {
    fn from(c: &CompileAnswer) -> Compiled {
        Compiled {
            package_version: c.package_version,
            package_hash: c.package_hash.clone(),
            changed: c.changed,
            package: serde_json::to_value(&c.package).unwrap_or(Value::Null),
        }
    }
}

/// Why the destination turned a package down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub reason: RejectReason,
    pub note: String,
    pub rejected_at: String,
    pub by: Role,
}

impl From<&CoreRejection> for Rejection {
    fn from(r: &CoreRejection) -> Rejection {
        Rejection { reason: r.reason, note: r.note.clone(), rejected_at: rfc3339(r.at), by: r.by }
    }
}

/// `GET …/package`, and the accept and reject answers: the latest package and what its
/// destination said of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latest {
    pub package_version: u64,
    pub package_hash: String,
    pub state: OfferState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    pub package: Value,
}

impl From<&LatestAnswer> for Latest {
    fn from(l: &LatestAnswer) -> Latest {
        Latest {
            package_version: l.package_version,
            package_hash: l.package_hash.clone(),
            state: l.state,
            rejection: l.rejection.as_ref().map(Rejection::from),
            package: serde_json::to_value(&l.package).unwrap_or(Value::Null),
        }
    }
}

/// The body of a success to `role`: `{"handoff": record}`, and beside it what the change
/// answered (an item of the work record under its kind, a package's fields, the policy).
pub fn answer(h: &core_handoff::Handoff, role: Role, effect: &Effect) -> Value {
    let record = &h.record;
    let mut body = Map::new();
    match effect {
        Effect::Nothing => {}
        Effect::Item(item) => {
            body.insert(item.kind().into(), item_view(&record.id, item));
        }
        Effect::Compiled(c) => extend(&mut body, &Compiled::from(c)),
        Effect::Package(l) => extend(&mut body, &Latest::from(l)),
        Effect::Policy(p) => {
            body.insert("policy".into(), to_value(p));
        }
    }
    body.insert("handoff".into(), to_value(&Handoff::of(h, role)));
    Value::Object(body)
}

/// `POST …/turns?dry_run=true`: the record as it is, the turn the open would start, the
/// package it would compile (version, hash, document) and that package's briefing.
pub fn preview(h: &core_handoff::Handoff, role: Role, turn: u64, latest: &LatestAnswer, briefing: &str) -> Value {
    let mut body = Map::new();
    body.insert("turn".into(), Value::from(turn));
    extend(&mut body, &Latest::from(latest));
    body.insert("briefing".into(), Value::from(briefing));
    body.insert("handoff".into(), to_value(&Handoff::of(h, role)));
    Value::Object(body)
}

/// `{"handoff": record}`: what a read, a wait, a watch and a create answer `role`.
pub fn record_answer(h: &core_handoff::Handoff, role: Role) -> Value {
    answer(h, role, &Effect::Nothing)
}

fn item_view(handoff_id: &str, item: &Item) -> Value {
    match item {
        Item::Work(w) => to_value(&Work::of(handoff_id, w)),
        Item::Decision(d) => to_value(&Decision::from(d)),
        Item::Artifact(a) => to_value(&Artifact::from(a)),
        Item::Blocker(b) => to_value(&Blocker::from(b)),
        Item::Workspace { files, paths_kept } => to_value(&Workspace { files: files.clone(), paths_kept: *paths_kept }),
        Item::Unmet(unmet) => to_value(unmet),
    }
}

fn to_value<T: Serialize + ?Sized>(v: &T) -> Value {
    // Every view is plain data (strings, numbers, maps with string keys): it always serialises.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn extend<T: Serialize>(body: &mut Map<String, Value>, fields: &T) {
    if let Value::Object(fields) = to_value(fields) {
        body.extend(fields);
    }
}

#[cfg(test)]
mod tests;
