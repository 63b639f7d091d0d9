//! The work record: what one hand-off is for and what happened on it, as a pure value.
//!
//! The record holds the work (title, goal, constraints, acceptance criteria), every decision,
//! every version of every artifact, every blocker, the workspace paths with their latest
//! counts, and the acceptance criteria the latest final report left unmet. A [`Command`] goes
//! in with the record; the next record, the item to answer and whether anything moved come
//! out of [`apply`] (or a typed refusal, which leaves the record as it was). No I/O, no clock:
//! the Durable Object supplies `now`, stores what comes back and writes nothing when
//! `moved` is false.
//!
//! Invariants, asserted in [`apply`]:
//! - a closed hand-off's record never changes;
//! - `moved` is false exactly when the next record equals the current one;
//! - ids (`dec_N`, `art_N`, `blk_N`) come from counters in the record, rise by one and are
//!   never reused, so the same commands always give the same ids;
//! - nothing is ever removed: a superseded decision, an old artifact version and a resolved
//!   blocker all stay on the record;
//! - every collection has a named limit (`crate::limits`), checked before anything changes.
//!
//! The record keeps paths and line counts of the workspace, never file contents: the
//! workspace body refuses any other field.
//!
//! Each input's rules are its [`Checked`] impl, applied once as the API reads the body:
//! a broken limit is a `request.invalid` refusal naming the field.

use crate::applied::Applied;
use crate::error::{Code, Refusal};
use crate::json::Checked;
use crate::limits::*;
use crate::text::{multi_line, single_line};
use crate::time::{EpochMs, Timestamp};
use crate::turn::Record;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who sent a command, as authenticated by the router: owner or machine.
pub use crate::role::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockerStatus {
    Open,
    Resolved,
}

// ---------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------

/// `PUT /v1/handoffs/:id/work`. Also the work as kept on the record, and as answered (with
/// its two optional labels always present, null when not set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkInput {
    pub title: String,
    pub goal: String,
    #[serde(default)]
    pub task_type: Option<String>,
    #[serde(default)]
    pub priority: Option<String>,
    pub constraints: Vec<String>,
    pub acceptance_criteria: Vec<String>,
}

/// `POST /v1/handoffs/:id/decisions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionInput {
    pub statement: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    pub evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// `POST /v1/handoffs/:id/artifacts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactInput {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `POST /v1/handoffs/:id/blockers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockerInput {
    pub severity: Severity,
    pub title: String,
}

/// `POST /v1/handoffs/:id/workspace`: paths and counts, and nothing else at either level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceInput {
    pub files: Vec<FileInput>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileInput {
    pub path: String,
    pub insertions: u32,
    pub deletions: u32,
}

impl Checked for WorkInput {
    fn checked(self) -> Result<Self, Refusal> {
        let input = self;
        validate_work(&input)?;
        Ok(input)
    }
}

impl Checked for DecisionInput {
    fn checked(self) -> Result<Self, Refusal> {
        let input = self;
        validate_decision(&input)?;
        Ok(input)
    }
}

/// The artifact's `sha256` comes back in lowercase.
impl Checked for ArtifactInput {
    fn checked(self) -> Result<Self, Refusal> {
        let mut input = self;
        validate_artifact(&input)?;
        input.sha256 = input.sha256.map(|s| s.to_ascii_lowercase());
        Ok(input)
    }
}

impl Checked for BlockerInput {
    fn checked(self) -> Result<Self, Refusal> {
        let input = self;
        single_line("title", &input.title, TITLE_BYTES_MAX)?;
        Ok(input)
    }
}

impl Checked for WorkspaceInput {
    fn checked(self) -> Result<Self, Refusal> {
        let input = self;
        if input.files.len() > FILES_PER_REPORT_MAX {
            return Err(Refusal::invalid(format!("files: more than {FILES_PER_REPORT_MAX} in one report")));
        }
        for (i, file) in input.files.iter().enumerate() {
            single_line(&format!("files[{i}].path"), &file.path, PATH_BYTES_MAX)?;
        }
        Ok(input)
    }
}

fn validate_work(input: &WorkInput) -> Result<(), Refusal> {
    single_line("title", &input.title, TITLE_BYTES_MAX)?;
    multi_line("goal", &input.goal, GOAL_BYTES_MAX)?;
    if let Some(task_type) = &input.task_type {
        single_line("task_type", task_type, LABEL_BYTES_MAX)?;
    }
    if let Some(priority) = &input.priority {
        single_line("priority", priority, LABEL_BYTES_MAX)?;
    }
    list("constraints", &input.constraints, CONSTRAINTS_MAX, CRITERION_BYTES_MAX)?;
    list("acceptance_criteria", &input.acceptance_criteria, ACCEPTANCE_CRITERIA_MAX, CRITERION_BYTES_MAX)
}

fn validate_decision(input: &DecisionInput) -> Result<(), Refusal> {
    multi_line("statement", &input.statement, STATEMENT_BYTES_MAX)?;
    if let Some(rationale) = &input.rationale {
        multi_line("rationale", rationale, RATIONALE_BYTES_MAX)?;
    }
    if input.evidence.len() > EVIDENCE_PER_DECISION_MAX {
        return Err(Refusal::invalid(format!("evidence: more than {EVIDENCE_PER_DECISION_MAX} URIs")));
    }
    for (i, uri) in input.evidence.iter().enumerate() {
        check_uri(&format!("evidence[{i}]"), uri)?;
    }
    if let Some(id) = &input.supersedes {
        single_line("supersedes", id, ID_CHARS_MAX)?;
    }
    Ok(())
}

fn validate_artifact(input: &ArtifactInput) -> Result<(), Refusal> {
    single_line("type", &input.kind, LABEL_BYTES_MAX)?;
    single_line("title", &input.title, TITLE_BYTES_MAX)?;
    check_uri("uri", &input.uri)?;
    if let Some(sha) = &input.sha256 {
        let is_sha256 = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_sha256 {
            return Err(Refusal::invalid("sha256: must be 64 hexadecimal digits"));
        }
    }
    Ok(())
}

fn list(field: &str, values: &[String], max_items: usize, max_bytes: usize) -> Result<(), Refusal> {
    if values.len() > max_items {
        return Err(Refusal::invalid(format!("{field}: more than {max_items} items")));
    }
    for (i, value) in values.iter().enumerate() {
        multi_line(&format!("{field}[{i}]"), value, max_bytes)?;
    }
    Ok(())
}

/// An artifact or evidence URI: one line of at most [`URI_BYTES_MAX`] bytes, with no whitespace
/// and no backslash, that is an `http` or `https` URI with a host or a relative reference
/// ([`uri_kind`]). Any other scheme (`javascript:`, `data:`, `file:`, …) is refused, because
/// these URIs are shown to people as links (the Markdown package) and followed by agents.
/// A backslash is refused because browsers read it as `/` in a URL, which would make
/// `/\evil.example` protocol-relative.
fn check_uri(field: &str, uri: &str) -> Result<(), Refusal> {
    single_line(field, uri, URI_BYTES_MAX)?;
    if uri.contains(|c: char| c.is_whitespace() || c == '\\') {
        return Err(Refusal::invalid(format!("{field}: a URI has no whitespace and no backslash")));
    }
    match uri_kind(uri) {
        UriKind::Web | UriKind::Relative => Ok(()),
        UriKind::Other => Err(Refusal::invalid(format!("{field}: only http, https or relative URIs are accepted"))),
    }
}

/// The shape of a URI, as [`check_uri`] judges it and the Markdown rendering links it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UriKind {
    /// `http://host…` or `https://host…`: a scheme of [`URI_SCHEMES_ACCEPTED`] in any case, then
    /// `//` and a non-empty authority.
    Web,
    /// A relative reference: no scheme (no `:` before the first `/`, `?` or `#`) and not
    /// protocol-relative (`//host`), which would name another host.
    Relative,
    /// Anything else: another scheme, a scheme without `//host`, or `//host`.
    Other,
}

/// Judges the scheme and authority only; whitespace, control characters and backslashes are
/// [`check_uri`]'s to refuse (and the renderer's to check before making a link).
pub(crate) fn uri_kind(uri: &str) -> UriKind {
    let head_end = uri.find(['/', '?', '#']).unwrap_or(uri.len());
    let Some(colon) = uri[..head_end].find(':') else {
        return if uri.starts_with("//") { UriKind::Other } else { UriKind::Relative };
    };
    let (scheme, rest) = (&uri[..colon], &uri[colon + 1..]);
    let accepted = URI_SCHEMES_ACCEPTED.iter().any(|s| s.eq_ignore_ascii_case(scheme));
    let Some(after_slashes) = rest.strip_prefix("//") else {
        return UriKind::Other;
    };
    let authority = &after_slashes[..after_slashes.find(['/', '?', '#']).unwrap_or(after_slashes.len())];
    if accepted && !authority.is_empty() {
        UriKind::Web
    } else {
        UriKind::Other
    }
}

// ---------------------------------------------------------------------------------------
// The record
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub id: String,
    pub statement: String,
    pub rationale: Option<String>,
    pub evidence: Vec<String>,
    pub supersedes: Option<String>,
    /// Set once, when a later decision supersedes this one; never cleared.
    pub superseded_by: Option<String>,
    pub recorded_at: Timestamp,
    pub by: Role,
}

impl Decision {
    pub fn is_standing(&self) -> bool {
        self.superseded_by.is_none()
    }
}

/// One version of one artifact as a package hands it on: all of [`Artifact`] but who
/// recorded it and when. Every title has one id; its versions count from 1. A package refuses
/// any other field; flattened into [`Artifact`], it is given only its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandedArtifact {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub version: u64,
    pub uri: String,
    pub sha256: Option<String>,
}

/// One version of one artifact as the record keeps it: what a package hands on (flattened, so
/// the JSON is flat), then when and by whom it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ArtifactFields")]
pub struct Artifact {
    #[serde(flatten)]
    pub handed: HandedArtifact,
    pub recorded_at: Timestamp,
    pub by: Role,
}

/// An [`Artifact`] as it is read: the handed-on part's fields in place (no buffer of every
/// field, as `turn::Record`'s).
#[derive(Deserialize)]
struct ArtifactFields {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    title: String,
    version: u64,
    uri: String,
    sha256: Option<String>,
    recorded_at: Timestamp,
    by: Role,
}

impl From<ArtifactFields> for Artifact {
    fn from(a: ArtifactFields) -> Artifact {
        let (id, kind, title, version, uri, sha256) = (a.id, a.kind, a.title, a.version, a.uri, a.sha256);
        Artifact {
            handed: HandedArtifact { id, kind, title, version, uri, sha256 },
            recorded_at: a.recorded_at,
            by: a.by,
        }
    }
}

/// `artifact.title` and the like read the handed-on part.
impl std::ops::Deref for Artifact {
    type Target = HandedArtifact;
    fn deref(&self) -> &HandedArtifact {
        &self.handed
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    pub id: String,
    pub severity: Severity,
    pub title: String,
    pub status: BlockerStatus,
    pub raised_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
    pub by: Role,
}

/// A workspace path's latest counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCounts {
    pub insertions: u32,
    pub deletions: u32,
}

/// The id counters: the number of the last id handed out of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub decisions: u64,
    pub artifacts: u64,
    pub blockers: u64,
}

/// The work record of one hand-off. Change it only through [`apply`]; store and load it
/// whole (it is `Serialize` + `Deserialize`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// The work as last set; `None` until the owner sets it.
    pub spec: Option<WorkInput>,
    /// Every decision, in the order recorded (newest last).
    pub decisions: Vec<Decision>,
    /// Every version of every artifact, in the order recorded (newest last).
    pub artifacts: Vec<Artifact>,
    /// Every blocker, in the order raised.
    pub blockers: Vec<Blocker>,
    /// Workspace paths (code-point order) with their latest counts.
    pub files: BTreeMap<String, FileCounts>,
    /// Indices of acceptance criteria the latest final report left unmet, ascending.
    pub unmet: Vec<u32>,
    pub counters: Counters,
}

impl Work {
    /// Standing (not superseded) decisions, newest first.
    pub fn standing_decisions(&self) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().rev().filter(|d| d.is_standing())
    }

    /// The latest version of each artifact title, the title revised most recently first.
    pub fn latest_artifacts(&self) -> Vec<&Artifact> {
        let mut seen = std::collections::BTreeSet::new();
        self.artifacts.iter().rev().filter(|a| seen.insert(a.title.as_str())).collect()
    }

    /// Open blockers, most severe first, then in the order raised.
    pub fn open_blockers(&self) -> Vec<&Blocker> {
        let mut open: Vec<(usize, &Blocker)> =
            self.blockers.iter().enumerate().filter(|(_, b)| b.status == BlockerStatus::Open).collect();
        crate::order::sort_by_key(&mut open, |(i, b)| (std::cmp::Reverse(b.severity), *i));
        open.into_iter().map(|(_, b)| b).collect()
    }

    fn latest_version_of(&self, title: &str) -> Option<&Artifact> {
        self.artifacts.iter().rev().find(|a| a.title == title)
    }
}

// ---------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "input", rename_all = "snake_case")]
pub enum Command {
    /// The owner sets the work (`PUT …/work`).
    SetWork(WorkInput),
    /// The owner or the machine records a decision.
    RecordDecision(DecisionInput),
    /// The owner or the machine records an artifact (a new title, or its next version).
    AddArtifact(ArtifactInput),
    /// The owner or the machine raises a blocker.
    AddBlocker(BlockerInput),
    /// The owner or the machine resolves a blocker (`POST …/blockers/:bid/resolve`).
    ResolveBlocker { id: String },
    /// The machine reports workspace paths and counts.
    ReportWorkspace(WorkspaceInput),
}

/// What a command answers, under the key [`Item::kind`]: `{"handoff", "<kind>": item}`
/// (the HTTP contract renders it; see `handoff_api::view`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Work(WorkInput),
    Decision(Decision),
    Artifact(Artifact),
    Blocker(Blocker),
    /// The paths this report named (each once, in code-point order, with its latest counts)
    /// and how many paths the record keeps.
    Workspace {
        files: Vec<FileInput>,
        paths_kept: usize,
    },
}

impl Item {
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Work(_) => "work",
            Item::Decision(_) => "decision",
            Item::Artifact(_) => "artifact",
            Item::Blocker(_) => "blocker",
            Item::Workspace { .. } => "workspace",
        }
    }
}

/// Applies `command`, sent by `by` at `now`, to the work record of `handoff`. Its input was
/// checked once, as it was read ([`Checked`]); who may send it is [`crate::actions::Action::sender`]'s.
/// A refusal leaves the record as it was.
pub fn apply(
    work: &Work,
    handoff: &Record,
    command: &Command,
    by: Role,
    now: EpochMs,
) -> Result<Applied<Work, Item>, Refusal> {
    handoff.check_open()?;
    let applied = match command {
        Command::SetWork(input) => set_work(work, input)?,
        Command::RecordDecision(input) => record_decision(work, input, by, now)?,
        Command::AddArtifact(input) => add_artifact(work, input, by, now)?,
        Command::AddBlocker(input) => add_blocker(work, input, by, now)?,
        Command::ResolveBlocker { id } => resolve_blocker(work, id, now)?,
        Command::ReportWorkspace(input) => report_workspace(work, input)?,
    };
    assert_eq!(applied.moved, applied.next != *work, "moved means exactly: the record changed");
    Ok(applied)
}

fn set_work(work: &Work, input: &WorkInput) -> Result<Applied<Work, Item>, Refusal> {
    if work.spec.as_ref() == Some(input) {
        return Ok(Applied { next: work.clone(), effect: Item::Work(input.clone()), moved: false });
    }
    let mut next = work.clone();
    // An unmet criterion stays unmet only while it is still, word for word, the same criterion
    // at the same index; a rewritten list is judged again by the next final report.
    let old = work.spec.as_ref().map(|s| s.acceptance_criteria.as_slice()).unwrap_or(&[]);
    next.unmet.retain(|&i| {
        let i = i as usize;
        old.get(i).is_some() && old.get(i) == input.acceptance_criteria.get(i)
    });
    next.spec = Some(input.clone());
    Ok(Applied { next, effect: Item::Work(input.clone()), moved: true })
}

fn too_many(what: &str, max: usize) -> Refusal {
    Refusal::new(Code::RequestTooLarge, format!("this hand-off already keeps {max} {what}, the most it keeps"))
}

fn record_decision(work: &Work, input: &DecisionInput, by: Role, now: EpochMs) -> Result<Applied<Work, Item>, Refusal> {
    if work.decisions.len() >= DECISIONS_PER_HANDOFF_MAX {
        return Err(too_many("decisions", DECISIONS_PER_HANDOFF_MAX));
    }
    let mut next = work.clone();
    next.counters.decisions += 1;
    let id = format!("dec_{}", next.counters.decisions);
    if let Some(target) = &input.supersedes {
        let Some(old) = next.decisions.iter_mut().find(|d| d.id == *target) else {
            return Err(Refusal::new(
                Code::DecisionNotFound,
                format!("supersedes: this hand-off has no decision {target}"),
            ));
        };
        if let Some(by_id) = &old.superseded_by {
            return Err(Refusal::new(
                Code::HandoffConflict,
                format!("supersedes: {target} was already superseded by {by_id}; supersede {by_id} instead"),
            ));
        }
        old.superseded_by = Some(id.clone());
    }
    let decision = Decision {
        id,
        statement: input.statement.clone(),
        rationale: input.rationale.clone(),
        evidence: input.evidence.clone(),
        supersedes: input.supersedes.clone(),
        superseded_by: None,
        recorded_at: Timestamp::from_ms(now),
        by,
    };
    let item = Item::Decision(decision.clone());
    next.decisions.push(decision);
    Ok(Applied { next, effect: item, moved: true })
}

fn add_artifact(work: &Work, input: &ArtifactInput, by: Role, now: EpochMs) -> Result<Applied<Work, Item>, Refusal> {
    // Checked inputs carry their hash in lowercase already.
    let sha256 = input.sha256.clone();
    let latest = work.latest_version_of(&input.title);
    if let Some(latest) = latest {
        let same = latest.kind == input.kind && latest.uri == input.uri && latest.sha256 == sha256;
        if same {
            return Ok(Applied { next: work.clone(), effect: Item::Artifact(latest.clone()), moved: false });
        }
    }
    if work.artifacts.len() >= ARTIFACT_VERSIONS_PER_HANDOFF_MAX {
        return Err(too_many("artifact versions", ARTIFACT_VERSIONS_PER_HANDOFF_MAX));
    }
    let mut next = work.clone();
    let (id, version) = match latest {
        Some(latest) => (latest.id.clone(), latest.version + 1),
        None => {
            next.counters.artifacts += 1;
            (format!("art_{}", next.counters.artifacts), 1)
        }
    };
    let artifact = Artifact {
        handed: HandedArtifact {
            id,
            kind: input.kind.clone(),
            title: input.title.clone(),
            version,
            uri: input.uri.clone(),
            sha256,
        },
        recorded_at: Timestamp::from_ms(now),
        by,
    };
    let item = Item::Artifact(artifact.clone());
    next.artifacts.push(artifact);
    Ok(Applied { next, effect: item, moved: true })
}

fn add_blocker(work: &Work, input: &BlockerInput, by: Role, now: EpochMs) -> Result<Applied<Work, Item>, Refusal> {
    if work.blockers.len() >= BLOCKERS_PER_HANDOFF_MAX {
        return Err(too_many("blockers", BLOCKERS_PER_HANDOFF_MAX));
    }
    let mut next = work.clone();
    next.counters.blockers += 1;
    let blocker = Blocker {
        id: format!("blk_{}", next.counters.blockers),
        severity: input.severity,
        title: input.title.clone(),
        status: BlockerStatus::Open,
        raised_at: Timestamp::from_ms(now),
        resolved_at: None,
        by,
    };
    let item = Item::Blocker(blocker.clone());
    next.blockers.push(blocker);
    Ok(Applied { next, effect: item, moved: true })
}

/// Resolving a resolved blocker again changes nothing.
fn resolve_blocker(work: &Work, id: &str, now: EpochMs) -> Result<Applied<Work, Item>, Refusal> {
    let Some(index) = work.blockers.iter().position(|b| b.id == id) else {
        return Err(Refusal::new(Code::BlockerNotFound, format!("this hand-off has no blocker {id}")));
    };
    if work.blockers[index].status == BlockerStatus::Resolved {
        return Ok(Applied { next: work.clone(), effect: Item::Blocker(work.blockers[index].clone()), moved: false });
    }
    let mut next = work.clone();
    let blocker = &mut next.blockers[index];
    blocker.status = BlockerStatus::Resolved;
    blocker.resolved_at = Some(Timestamp::from_ms(now));
    let item = Item::Blocker(blocker.clone());
    Ok(Applied { next, effect: item, moved: true })
}

/// Answers the reported paths as now on the record (code-point order) and how many paths
/// the hand-off keeps in all.
fn report_workspace(work: &Work, input: &WorkspaceInput) -> Result<Applied<Work, Item>, Refusal> {
    let mut next = work.clone();
    // In body order, so a path named twice in one report keeps its later counts.
    for file in &input.files {
        next.files.insert(file.path.clone(), FileCounts { insertions: file.insertions, deletions: file.deletions });
    }
    if next.files.len() > FILES_PER_HANDOFF_MAX {
        return Err(too_many("workspace paths", FILES_PER_HANDOFF_MAX));
    }
    let reported: std::collections::BTreeSet<&str> = input.files.iter().map(|f| f.path.as_str()).collect();
    let files: Vec<FileInput> = reported
        .iter()
        .map(|path| {
            let counts = next.files[*path];
            FileInput { path: path.to_string(), insertions: counts.insertions, deletions: counts.deletions }
        })
        .collect();
    let item = Item::Workspace { files, paths_kept: next.files.len() };
    let moved = next != *work;
    Ok(Applied { next, effect: item, moved })
}

/// A final report (`done` or `failed`) lists the acceptance criteria left unmet; a final report
/// without `unmet` records an empty list. Judged against the current criteria.
pub(crate) fn record_unmet(work: &Work, indices: &[u32]) -> Result<Applied<Work, Vec<u32>>, Refusal> {
    let criteria = work.spec.as_ref().map_or(0, |s| s.acceptance_criteria.len());
    if let Some(bad) = indices.iter().find(|&&i| i as usize >= criteria) {
        return Err(Refusal::invalid(format!(
            "unmet: {bad} is not the index of an acceptance criterion (this work has {criteria})"
        )));
    }
    let mut unmet = indices.to_vec();
    crate::order::sort(&mut unmet);
    unmet.dedup();
    if unmet == work.unmet {
        return Ok(Applied { next: work.clone(), effect: unmet, moved: false });
    }
    let mut next = work.clone();
    next.unmet = unmet.clone();
    Ok(Applied { next, effect: unmet, moved: true })
}

#[cfg(test)]
mod tests;
