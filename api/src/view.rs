//! Every answer of the HTTP contract as a type. The core's values are served as they are kept
//! (their times are [`handoff_core::time::Timestamp`]s, RFC 3339 on the wire); a type here
//! only wraps one to add what an answer carries beside it (the caller's `actions`, the
//! owner's `policy`, the record beside a change). The Worker serialises them, the CLI
//! deserialises them, and a test holds them to the examples of `docs/openapi.yaml`.
//!
//! Reading is lenient where it can be: a field a newer server adds is ignored, and an optional
//! field an older one lacks reads as `None`, so a client and a Worker need not be deployed in
//! lockstep.

use handoff_core::actions;
use handoff_core::handoff as core_handoff;
use handoff_core::package::{Latest, OfferState, TurnEntry};
use handoff_core::role::Role;
use handoff_core::suggestion::Policy;
use handoff_core::turn::Record;
use handoff_core::work::{self, FileInput, WorkInput};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

pub use handoff_core::package::{Compiled, Rejection};
pub use handoff_core::rows::{Page, Row};
pub use handoff_core::runtimes::MachineRuntimes;
pub use handoff_core::suggestion::Suggestion;
pub use handoff_core::work::{Artifact, Blocker, Decision};

/// One turn of the lineage, as `GET …/turns` lists it.
pub type Turn = TurnEntry;

/// A hand-off's record as `role` is answered it: the record as kept, the commands that role
/// may send now, and the owner's policy. Borrowed when the Worker writes it, owned when a
/// client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff<'a> {
    #[serde(flatten)]
    pub record: Cow<'a, Record>,
    /// Text, so that a client reads an action a newer server adds.
    #[serde(default)]
    pub actions: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub policy: Option<Cow<'a, Policy>>,
}

impl<'a> Handoff<'a> {
    pub fn of(h: &'a core_handoff::Handoff, role: Role) -> Handoff<'a> {
        Handoff {
            record: Cow::Borrowed(&h.record),
            actions: actions::actions(h, role).into_iter().map(|a| Cow::Borrowed(a.as_str())).collect(),
            policy: h.extras.policy.as_ref().map(Cow::Borrowed),
        }
    }
}

impl std::ops::Deref for Handoff<'_> {
    type Target = Record;
    fn deref(&self) -> &Record {
        &self.record
    }
}

impl std::ops::DerefMut for Handoff<'_> {
    fn deref_mut(&mut self) -> &mut Record {
        self.record.to_mut()
    }
}

/// `{"handoff": record}`: what a read, a wait, a watch and every change without an item answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAnswer<'a> {
    pub handoff: Handoff<'a>,
}

/// `POST /v1/handoffs`: the hand-off, and its machine's token when this create made it (a
/// repeated create answers without one); `POST …/machine-token`: the hand-off and a fresh one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created<'a> {
    pub handoff: Handoff<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_token: Option<Cow<'a, str>>,
}

/// `GET /v1/handoffs/:id/turns`: a page of the lineage, oldest first, and the page before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turns<'a> {
    pub turns: Cow<'a, [TurnEntry]>,
    #[serde(default)]
    pub next_before: Option<u64>,
    pub handoff: Handoff<'a>,
}

/// The work as set, under the hand-off's id (`PUT …/work`, and `spec` of the work record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work<'a> {
    pub id: Cow<'a, str>,
    #[serde(flatten)]
    pub spec: Cow<'a, WorkInput>,
}

impl std::ops::Deref for Work<'_> {
    type Target = WorkInput;
    fn deref(&self) -> &WorkInput {
        &self.spec
    }
}

/// `GET …/work`: the whole work record, as a page shows it: the work as last set, every
/// decision and every artifact version in the order recorded, every blocker in the order
/// raised, the workspace paths in code-point order, and the criteria left unmet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkRecord<'a> {
    pub spec: Option<Work<'a>>,
    pub decisions: Cow<'a, [Decision]>,
    pub artifacts: Cow<'a, [Artifact]>,
    pub blockers: Cow<'a, [Blocker]>,
    pub files: Vec<FileInput>,
    pub unmet: Cow<'a, [u32]>,
}

impl<'a> WorkRecord<'a> {
    pub fn of(handoff_id: &'a str, w: &'a work::Work) -> WorkRecord<'a> {
        WorkRecord {
            spec: w.spec.as_ref().map(|spec| Work { id: Cow::Borrowed(handoff_id), spec: Cow::Borrowed(spec) }),
            decisions: Cow::Borrowed(&w.decisions),
            artifacts: Cow::Borrowed(&w.artifacts),
            blockers: Cow::Borrowed(&w.blockers),
            files: w
                .files
                .iter()
                .map(|(path, c)| FileInput { path: path.clone(), insertions: c.insertions, deletions: c.deletions })
                .collect(),
            unmet: Cow::Borrowed(&w.unmet),
        }
    }
}

/// `GET …/work`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkAnswer<'a> {
    pub handoff: Handoff<'a>,
    pub work: WorkRecord<'a>,
}

/// An item a change recorded, under its kind: `{"decision": …}`, `{"work": …}`, ….
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemView<'a> {
    Work(Work<'a>),
    Decision(&'a Decision),
    Artifact(&'a Artifact),
    Blocker(&'a Blocker),
    Workspace { files: &'a [FileInput], paths_kept: usize },
}

impl<'a> ItemView<'a> {
    pub fn of(handoff_id: &'a str, item: &'a work::Item) -> ItemView<'a> {
        match item {
            work::Item::Work(spec) => ItemView::Work(Work { id: Cow::Borrowed(handoff_id), spec: Cow::Borrowed(spec) }),
            work::Item::Decision(d) => ItemView::Decision(d),
            work::Item::Artifact(a) => ItemView::Artifact(a),
            work::Item::Blocker(b) => ItemView::Blocker(b),
            work::Item::Workspace { files, paths_kept } => ItemView::Workspace { files, paths_kept: *paths_kept },
        }
    }
}

/// What a change answers beside the record. A package is the last member of its answer,
/// written apart from its canonical document (`crate::wire`), so that it is escaped once and an
/// answer kept without it can be given it back.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Beside<'a> {
    Nothing {},
    Item(ItemView<'a>),
    Policy { policy: &'a Policy },
    Compiled(CompiledHead<'a>),
    Package(LatestHead<'a>),
}

/// A compile's answer without its package: `{"package_version", "package_hash", "changed"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledHead<'a> {
    pub package_version: u64,
    pub package_hash: &'a str,
    pub changed: bool,
}

impl<'a> CompiledHead<'a> {
    pub fn of(c: &'a Compiled) -> CompiledHead<'a> {
        CompiledHead { package_version: c.package_version, package_hash: &c.package_hash, changed: c.changed }
    }
}

/// The current package's answer without its document: `{"package_version", "package_hash",
/// "state", "rejection"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatestHead<'a> {
    pub package_version: u64,
    pub package_hash: &'a str,
    pub state: OfferState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejection: Option<&'a Rejection>,
}

impl<'a> LatestHead<'a> {
    pub fn of(l: &'a Latest) -> LatestHead<'a> {
        LatestHead {
            package_version: l.package_version,
            package_hash: &l.package_hash,
            state: l.state,
            rejection: l.rejection.as_ref(),
        }
    }
}

/// A change's answer: `{"handoff": record, …what it answers beside}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed<'a> {
    pub handoff: Handoff<'a>,
    #[serde(flatten)]
    pub beside: Beside<'a>,
}

/// `POST …/turns?dry_run=true`: the record as it is, the turn the open would start, that
/// package's briefing, and the package it would compile (version, hash, state, then the
/// document, written apart).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview<'a> {
    pub handoff: Handoff<'a>,
    pub turn: u64,
    pub briefing: &'a str,
    #[serde(flatten)]
    pub latest: LatestHead<'a>,
}

// ---- The turn's timeline. ----

/// `POST …/events`' answer: the turn, and the `seq` its next event takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineTaken {
    pub turn: u64,
    pub next: u64,
}

/// `GET …/events`' answer: a turn's events after the `after` asked, oldest first, the `seq`
/// its next event takes, and `dropped` once its events left the newest turns kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline<'a> {
    pub turn: u64,
    pub events: Cow<'a, [handoff_core::timeline::Event]>,
    pub next: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dropped: bool,
}

/// A compile's or a package read's answer as a client reads it: the document stays JSON (it is
/// shown, never interpreted), so a newer package format reads too.
pub type CompiledAnswer = Compiled<serde_json::Value>;
pub type LatestAnswer = Latest<serde_json::Value>;

#[cfg(test)]
mod tests;
