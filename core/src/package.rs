//! The hand-off package (format 1): the compiler, its canonical JSON and hash, the ledger of
//! offered, rejected and accepted packages, and the Markdown rendering for a person.
//!
//! Invariants:
//! - [`compile`] is a pure function of its inputs; every collection is read in an explicit
//!   order (decisions and artifacts newest first, blockers most severe first then oldest,
//!   paths and evidence links in code-point order, milestones by turn);
//! - [`package_hash`] is the lowercase hex SHA-256 of [`canonical_json`] of the package
//!   without `generated_at`: sorted keys, no whitespace, UTF-8. The canonical form is written
//!   here, key by key, and does not depend on how `serde_json` orders maps;
//! - the package carries bounded lists only: the newest [`PACKAGE_DECISIONS_MAX`] standing
//!   decisions, the newest [`PACKAGE_ARTIFACTS_MAX`] artifact titles at their latest version,
//!   [`PACKAGE_FILES_MAX`] paths, the milestones of the newest [`PACKAGE_COMPLETED_TURNS_MAX`]
//!   turns, and says in `truncation` how many it left out; the hash covers what is kept;
//! - a superseded decision is never in a package, and neither are its evidence links;
//! - `package_version` counts packages, not compilations: it rises by exactly one when, and
//!   only when, the hash changes ([`Ledger::compile`]);
//! - once the current turn's package is accepted it is never replaced during that turn;
//! - in the Markdown rendering no machine-written string makes markup of its own (a link, an
//!   image, HTML, a heading, a list item, a table, a code block): each is escaped text, a code
//!   span fenced longer than its backtick runs, or an `http(s)` autolink ([`render_markdown`]).

use crate::applied::Applied;
use crate::error::{Code, Refusal};
use crate::json::Checked;
use crate::limits::*;
use crate::placement::Placement;
use crate::text::{multi_line, single_line};
use crate::time::{EpochMs, Timestamp};
use crate::turn::{Record, State, Status};
use crate::work::{uri_kind, HandedArtifact, Role, UriKind, Work};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

/// `POST /v1/handoffs/:id/package` and the `handoff` object of `POST …/turns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageRequest {
    pub objective: String,
    pub purpose: String,
    pub runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A hand-off turn's model, chosen by the owner (`POST …/turns` only): without it, the
    /// previous turn's carries over. Never part of the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl PackageRequest {
    /// The limits on each field; call it when the request arrives nested in another body.
    pub fn validate(&self) -> Result<(), Refusal> {
        multi_line("objective", &self.objective, OBJECTIVE_BYTES_MAX)?;
        multi_line("purpose", &self.purpose, PURPOSE_BYTES_MAX)?;
        single_line("runtime", &self.runtime, RUNTIME_BYTES_MAX)?;
        if let Some(note) = &self.note {
            multi_line("note", note, NOTE_BYTES_MAX)?;
        }
        if let Some(model) = &self.model {
            crate::ids::check_name("model", model, crate::limits::MODEL_BYTES_MAX)?;
        }
        Ok(())
    }
}

impl Checked for PackageRequest {
    fn checked(self) -> Result<Self, Refusal> {
        self.validate()?;
        Ok(self)
    }
}

/// `POST …/package/accept`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptInput {
    pub package_hash: String,
}

/// The hash comes back in lowercase.
impl Checked for AcceptInput {
    fn checked(self) -> Result<Self, Refusal> {
        let mut input = self;
        let is_sha256 = input.package_hash.len() == 64 && input.package_hash.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_sha256 {
            return Err(Refusal::invalid("package_hash: must be 64 hexadecimal digits"));
        }
        input.package_hash.make_ascii_lowercase();
        Ok(input)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    MissingContext,
    WrongRuntime,
    Superseded,
    Other,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::MissingContext => "missing_context",
            RejectReason::WrongRuntime => "wrong_runtime",
            RejectReason::Superseded => "superseded",
            RejectReason::Other => "other",
        }
    }
}

/// `POST …/package/reject`. The note is required: a rejection says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectInput {
    pub reason: RejectReason,
    pub note: String,
}

impl Checked for RejectInput {
    fn checked(self) -> Result<Self, Refusal> {
        let input = self;
        multi_line("note", &input.note, NOTE_BYTES_MAX)?;
        Ok(input)
    }
}

pub use crate::turn::ContinuedFrom;

/// One turn of the lineage, as the Durable Object stores it and `GET …/turns` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "TurnEntryFields")]
pub struct TurnEntry {
    pub turn: u64,
    pub status: Status,
    /// The runtime the turn was handed to, when it was.
    pub runtime: Option<String>,
    /// The permission mode the turn ran in, as the machine's running report named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// Where and how the owner asked the turn to run.
    #[serde(flatten)]
    pub placement: Placement,
    /// The package that briefed this turn, if one did.
    pub package_version: Option<u64>,
    pub package_hash: Option<String>,
    pub continued_from: Option<ContinuedFrom>,
    pub opened_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// The owner's words that opened the turn; `None` when it had none, or once they were
    /// dropped (then [`TurnEntry::prompt_dropped`]).
    #[serde(default)]
    pub prompt: Option<String>,
    /// The turn had words, dropped when it left the newest `PROMPT_TURNS_KEPT_MAX` turns.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompt_dropped: bool,
    /// The sync mode the turn ran in, as the machine's running report named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_mode: Option<crate::timeline::SyncMode>,
    /// The turn's summary as its last report gave it: the short line lists and pushes show.
    #[serde(default)]
    pub summary: Option<String>,
    /// The model's final answer, whole, as the done report carried it; `None` when none was
    /// sent (an entry of an earlier build too), or once dropped (then `reply_dropped`).
    #[serde(default)]
    pub reply: Option<String>,
    /// The turn had a reply, dropped with its prompt when it left the newest turns.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reply_dropped: bool,
    /// The questions the turn asked, each with its answer once given: the newest
    /// `QUESTIONS_PER_TURN_KEPT_MAX`, for the newest `PROMPT_TURNS_KEPT_MAX` turns.
    #[serde(default)]
    pub questions: Vec<crate::question::Question>,
    /// Questions of the turn no longer listed (past the cap, or dropped with its prompt).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub questions_dropped: u64,
    /// The owner's steers of the turn, kept and dropped with its prompt (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steers: Vec<crate::turn::Steer>,
}

/// A [`TurnEntry`] as it is read: its placement's fields in place (no buffer of every field,
/// as `turn::Record`'s).
#[derive(Deserialize)]
struct TurnEntryFields {
    turn: u64,
    status: Status,
    runtime: Option<String>,
    #[serde(default)]
    permission_mode: Option<String>,
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    requested_runtime: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    requested_permission_mode: Option<String>,
    package_version: Option<u64>,
    package_hash: Option<String>,
    continued_from: Option<ContinuedFrom>,
    opened_at: Timestamp,
    ended_at: Option<Timestamp>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    prompt_dropped: bool,
    #[serde(default)]
    sync_mode: Option<crate::timeline::SyncMode>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    reply_dropped: bool,
    #[serde(default)]
    questions: Vec<crate::question::Question>,
    #[serde(default)]
    questions_dropped: u64,
    #[serde(default)]
    steers: Vec<crate::turn::Steer>,
}

impl From<TurnEntryFields> for TurnEntry {
    fn from(t: TurnEntryFields) -> TurnEntry {
        let (workspace, model, requested_permission_mode) = (t.workspace, t.model, t.requested_permission_mode);
        TurnEntry {
            turn: t.turn,
            status: t.status,
            runtime: t.runtime,
            permission_mode: t.permission_mode,
            placement: Placement { workspace, runtime: t.requested_runtime, model, requested_permission_mode },
            package_version: t.package_version,
            package_hash: t.package_hash,
            continued_from: t.continued_from,
            opened_at: t.opened_at,
            ended_at: t.ended_at,
            prompt: t.prompt,
            prompt_dropped: t.prompt_dropped,
            sync_mode: t.sync_mode,
            summary: t.summary,
            reply: t.reply,
            reply_dropped: t.reply_dropped,
            questions: t.questions,
            questions_dropped: t.questions_dropped,
            steers: t.steers,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TurnEntry {
    /// An entry's outcome before its turn reports one (and as an earlier build's entry reads):
    /// no mode, summary, reply or question.
    pub fn outcome_unknown() -> TurnEntry {
        TurnEntry {
            turn: 0,
            status: Status::Running,
            runtime: None,
            permission_mode: None,
            placement: Placement::default(),
            package_version: None,
            package_hash: None,
            continued_from: None,
            opened_at: Timestamp::default(),
            ended_at: None,
            prompt: None,
            prompt_dropped: false,
            sync_mode: None,
            summary: None,
            reply: None,
            reply_dropped: false,
            questions: Vec::new(),
            questions_dropped: 0,
            steers: Vec::new(),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What the compiler reads: the hand-off, its work record and its lineage.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub record: &'a Record,
    pub work: &'a Work,
    /// The lineage, oldest first, whole or only its newest entries: the compiler reads only the
    /// entries of the newest [`PACKAGE_COMPLETED_TURNS_MAX`] turns (their milestones, and the
    /// current turn's runtime), so any tail of at least that many entries compiles to the same
    /// bytes as the whole lineage. The Durable Object may load only its newest
    /// `PACKAGE_COMPLETED_TURNS_MAX + 1` entries.
    pub lineage: &'a [TurnEntry],
}

// ---------------------------------------------------------------------------------------
// The package
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub format: u32,
    pub work: PackageWork,
    pub constraints: Vec<String>,
    pub acceptance_criteria: Vec<String>,
    pub state: PackageState,
    pub decisions: Vec<PackageDecision>,
    /// The work record's artifacts as handed on: without who recorded them and when.
    pub artifacts: Vec<HandedArtifact>,
    pub blockers: Vec<PackageBlocker>,
    pub relevant_files: Vec<String>,
    pub next: Next,
    pub source: Source,
    pub evidence_links: Vec<String>,
    pub notes: Option<String>,
    pub generated_at: Timestamp,
    pub truncation: Truncation,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageWork {
    pub id: String,
    pub session: String,
    pub title: String,
    pub goal: String,
    pub task_type: Option<String>,
    pub priority: Option<String>,
    pub state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageState {
    pub phase: Phase,
    pub completed: Vec<String>,
    pub unresolved: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub state: State,
    pub turn: u64,
    pub status: Status,
}

/// A standing decision as handed on. Its own type, not a part of [`crate::work::Decision`]: a
/// package writes `recorded_at` before `evidence` and the record after it, and both orders are
/// served and stored (the package's is in its Markdown goldens), so one declaration cannot keep both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageDecision {
    pub id: String,
    pub statement: String,
    pub rationale: Option<String>,
    pub recorded_at: Timestamp,
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageBlocker {
    pub id: String,
    pub severity: crate::work::Severity,
    pub title: String,
    pub status: crate::work::BlockerStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Next {
    pub objective: String,
    pub purpose: String,
    pub runtime: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub session: String,
    pub machine: String,
    pub runtime: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Truncation {
    pub decisions_omitted: u64,
    pub artifacts_omitted: u64,
    pub files_omitted: u64,
    /// Turns older than the newest [`PACKAGE_COMPLETED_TURNS_MAX`], whose milestones
    /// `state.completed` leaves out. Written only when not zero, so that a package that leaves
    /// no turn out keeps the bytes and hash it had before this field existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completed_turns_omitted: u64,
}

impl Truncation {
    pub fn any(&self) -> bool {
        let lists = self.decisions_omitted > 0 || self.artifacts_omitted > 0 || self.files_omitted > 0;
        lists || self.completed_turns_omitted > 0
    }
}

/// Compiles the package of `sources` for `request` at `now`. `rejection` is the rejection of
/// the package this one replaces, if that one was rejected: it is listed under unresolved.
/// Refused with 400 `request.invalid` until the work is set: a package without a goal briefs
/// nobody.
#[allow(clippy::too_many_lines, reason = "the package's parts gathered in the document's order")]
pub fn compile(
    sources: &Sources,
    request: &PackageRequest,
    rejection: Option<&Rejection>,
    now: EpochMs,
) -> Result<Package, Refusal> {
    let Sources { record: handoff, work, lineage } = *sources;
    let Some(spec) = &work.spec else {
        return Err(Refusal::invalid("this hand-off has no work yet: PUT /v1/handoffs/:id/work first"));
    };

    let standing: Vec<_> = work.standing_decisions().collect();
    let decisions: Vec<PackageDecision> = standing
        .iter()
        .take(PACKAGE_DECISIONS_MAX)
        .map(|d| PackageDecision {
            id: d.id.clone(),
            statement: d.statement.clone(),
            rationale: d.rationale.clone(),
            recorded_at: d.recorded_at,
            evidence: d.evidence.clone(),
        })
        .collect();

    let latest = work.latest_artifacts();
    let artifacts: Vec<HandedArtifact> = latest.iter().take(PACKAGE_ARTIFACTS_MAX).map(|a| a.handed.clone()).collect();

    let open = work.open_blockers();
    let blockers: Vec<PackageBlocker> = open
        .iter()
        .map(|b| PackageBlocker { id: b.id.clone(), severity: b.severity, title: b.title.clone(), status: b.status })
        .collect();

    let relevant_files = relevant_files(work);

    let evidence_links: Vec<String> = decisions
        .iter()
        .flat_map(|d| d.evidence.iter())
        .chain(artifacts.iter().map(|a| &a.uri))
        .collect::<BTreeSet<&String>>()
        .into_iter()
        .cloned()
        .collect();

    let mut unresolved = Vec::new();
    if let Some(r) = rejection {
        unresolved.push(format!("handoff rejected ({}): {}", r.reason.as_str(), r.note));
    }
    for b in &open {
        unresolved.push(format!("blocker {} ({}): {}", b.id, b.severity.as_str(), b.title));
    }
    for &i in &work.unmet {
        if let Some(criterion) = spec.acceptance_criteria.get(i as usize) {
            unresolved.push(format!("acceptance criterion {i} not met: {criterion}"));
        }
    }

    let current_runtime = lineage.iter().find(|t| t.turn == handoff.turn).and_then(|t| t.runtime.clone());
    let (completed, completed_turns_omitted) = milestones(handoff, lineage);
    let truncation = Truncation {
        decisions_omitted: (standing.len() - decisions.len()) as u64,
        artifacts_omitted: (latest.len() - artifacts.len()) as u64,
        files_omitted: (work.files.len() - relevant_files.len()) as u64,
        completed_turns_omitted,
    };

    Ok(Package {
        format: PACKAGE_FORMAT,
        work: PackageWork {
            id: handoff.id.clone(),
            session: handoff.session.clone(),
            title: spec.title.clone(),
            goal: spec.goal.clone(),
            task_type: spec.task_type.clone(),
            priority: spec.priority.clone(),
            state: handoff.state,
        },
        constraints: spec.constraints.clone(),
        acceptance_criteria: spec.acceptance_criteria.clone(),
        state: PackageState {
            phase: Phase { state: handoff.state, turn: handoff.turn, status: handoff.status },
            completed,
            unresolved,
        },
        decisions,
        artifacts,
        blockers,
        relevant_files,
        next: Next {
            objective: request.objective.clone(),
            purpose: request.purpose.clone(),
            runtime: request.runtime.clone(),
        },
        source: Source { session: handoff.session.clone(), machine: handoff.machine.clone(), runtime: current_runtime },
        evidence_links,
        notes: request.note.clone(),
        generated_at: Timestamp::from_ms(now),
        truncation,
    })
}

/// The paths most changed (insertions + deletions, ties by path), at most
/// [`PACKAGE_FILES_MAX`] of them, then put in code-point order.
fn relevant_files(work: &Work) -> Vec<String> {
    let mut by_churn: Vec<(&String, u64)> =
        work.files.iter().map(|(path, c)| (path, u64::from(c.insertions) + u64::from(c.deletions))).collect();
    crate::order::sort_by(&mut by_churn, |a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut paths: Vec<String> = by_churn.into_iter().take(PACKAGE_FILES_MAX).map(|(p, _)| p.clone()).collect();
    crate::order::sort(&mut paths);
    paths
}

/// "turn N opened" and, once it ended, "turn N finished (status)", each once, by turn, for the
/// newest [`PACKAGE_COMPLETED_TURNS_MAX`] turns, and how many older turns are left out.
/// The hand-off record is the authority on the current turn's status.
///
/// Turns are numbered from 1 with no gap (the turn machine opens turn n+1 only from turn n), so
/// the window and the count follow from the current turn alone: lineage entries before the
/// window are never read, and a lineage tail gives the same milestones as the whole lineage.
fn milestones(handoff: &Record, lineage: &[TurnEntry]) -> (Vec<String>, u64) {
    let omitted = handoff.turn.saturating_sub(PACKAGE_COMPLETED_TURNS_MAX);
    let in_window = |turn: u64| omitted < turn && turn <= handoff.turn;
    let mut turns: BTreeMap<u64, Status> =
        lineage.iter().filter(|t| in_window(t.turn)).map(|t| (t.turn, t.status)).collect();
    turns.insert(handoff.turn, handoff.status);
    let mut out = Vec::new();
    for (turn, status) in turns {
        out.push(format!("turn {turn} opened"));
        if status.has_ended() {
            out.push(format!("turn {turn} finished ({})", status.as_str()));
        }
    }
    assert!(out.len() as u64 <= 2 * PACKAGE_COMPLETED_TURNS_MAX, "two milestones per kept turn at most");
    (out, omitted)
}

// ---------------------------------------------------------------------------------------
// Canonical JSON and the hash
// ---------------------------------------------------------------------------------------

/// Canonical JSON: object keys sorted by code point, no whitespace, strings escaped as
/// `serde_json` escapes them (`"`, `\` and control characters; everything else raw UTF-8).
/// Numbers are integers only.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out, None);
    String::from_utf8(out).expect("canonical JSON is written from strings")
}

/// Writes `value` canonically to `out`; where `cut` is given and `value` is an object with a
/// `generated_at` member, sets it to the bytes of that member and of one comma beside it.
fn write_canonical(value: &Value, out: &mut Vec<u8>, cut: Option<&mut Option<Range<usize>>>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => {
            assert!(n.is_i64() || n.is_u64(), "the package holds integers only");
            serde_json::to_writer(&mut *out, n).expect("a number writes");
        }
        Value::String(s) => serde_json::to_writer(&mut *out, s).expect("a string writes"),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out, None);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // UTF-8 byte order is code-point order.
            let mut keys: Vec<&String> = map.keys().collect();
            crate::order::sort(&mut keys);
            let mut cut = cut;
            out.push(b'{');
            for (i, key) in keys.iter().enumerate() {
                let start = out.len();
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("a key writes");
                out.push(b':');
                write_canonical(&map[key.as_str()], out, None);
                if key.as_str() == "generated_at" {
                    if let Some(cut) = cut.take() {
                        // The first member takes the comma after it; any other, the one before.
                        let end = if i == 0 && keys.len() > 1 { out.len() + 1 } else { out.len() };
                        *cut = Some(start..end);
                    }
                }
            }
            out.push(b'}');
        }
    }
}

/// A package's canonical JSON as an answer carries it (with `generated_at`), written once: the
/// text that is hashed is the same bytes without that member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    json: Rc<str>,
    /// The `generated_at` member, with one comma beside it.
    cut: Range<usize>,
}

impl Document {
    pub fn of(package: &Package) -> Document {
        Document::of_value(&serde_json::to_value(package).expect("a package serializes"))
    }

    fn of_value(value: &Value) -> Document {
        let mut out = Vec::with_capacity(4096);
        let mut cut = None;
        write_canonical(value, &mut out, Some(&mut cut));
        let json: Rc<str> = String::from_utf8(out).expect("canonical JSON is written from strings").into();
        let cut = cut.expect("a package has generated_at");
        Document { json, cut }
    }

    /// The whole document, `generated_at` included.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The hashed text, in the two parts either side of `generated_at`.
    fn hashed(&self) -> [&str; 2] {
        [&self.json[..self.cut.start], &self.json[self.cut.end..]]
    }

    /// Lowercase hex SHA-256 of the hashed text ([`crate::digest`]).
    pub fn hash(&self) -> String {
        let [before, after] = self.hashed();
        hex::encode(crate::digest::sha256(&[before.as_bytes(), after.as_bytes()]))
    }
}

/// The exact text that is hashed: the canonical JSON of the package without `generated_at`.
pub fn hashed_json(package: &Package) -> String {
    Document::of(package).hashed().concat()
}

/// Lowercase hex SHA-256 of [`hashed_json`].
pub fn package_hash(package: &Package) -> String {
    Document::of(package).hash()
}

/// The document written when the package was compiled, kept beside it for its answer: a cache
/// of the package next to it, so it is equal to any other (and none after a load: the answer
/// writes it then).
#[derive(Clone, Default)]
pub struct Written(Option<Document>);

impl Written {
    pub fn new(document: Document) -> Written {
        Written(Some(document))
    }

    /// The document of `package`, as written at its compile or written now.
    pub fn of(&self, package: &Package) -> Document {
        self.0.clone().unwrap_or_else(|| Document::of(package))
    }
}

impl PartialEq for Written {
    fn eq(&self, _: &Written) -> bool {
        true
    }
}

impl Eq for Written {}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Written(kept)" } else { "Written(none)" })
    }
}

// ---------------------------------------------------------------------------------------
// The ledger
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OfferState {
    Offered,
    Rejected,
    Accepted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub reason: RejectReason,
    pub note: String,
    /// Stored as `at` before it was served as it is kept.
    #[serde(alias = "at")]
    pub rejected_at: Timestamp,
    pub by: Role,
}

/// The current package of a hand-off and what its destination said of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub version: u64,
    pub hash: String,
    /// The hand-off's turn when this package was compiled.
    pub turn: u64,
    pub package: Package,
    pub state: OfferState,
    /// Set while the state is `rejected`.
    pub rejection: Option<Rejection>,
    pub offered_at: Timestamp,
    /// When and by whom it was accepted.
    pub accepted: Option<(Timestamp, Role)>,
    #[serde(skip)]
    pub document: Written,
}

/// Every package rule of one hand-off, as a value: store it whole, change it only through its
/// methods. Rejections and acceptances of earlier versions live on in the hand-off's history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub current: Option<Offer>,
}

/// A compile's outcome, `{"package_version", "package_hash", "changed", "package"}`: the
/// package compiled, or the current one when the hash did not change. `P` is the document's
/// type: [`Package`] here, any JSON for a client that only shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compiled<P = Package> {
    pub package_version: u64,
    pub package_hash: String,
    pub changed: bool,
    pub package: P,
    #[serde(skip)]
    pub document: Written,
}

/// The current package and what its destination said of it, `{"package_version",
/// "package_hash", "state", "rejection"?, "package"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latest<P = Package> {
    pub package_version: u64,
    pub package_hash: String,
    pub state: OfferState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    pub package: P,
    #[serde(skip)]
    pub document: Written,
}

fn not_found() -> Refusal {
    Refusal::new(Code::PackageNotFound, "this hand-off has no package yet")
}

impl Offer {
    fn answer(&self) -> Latest {
        Latest {
            package_version: self.version,
            package_hash: self.hash.clone(),
            state: self.state,
            rejection: self.rejection.clone(),
            package: self.package.clone(),
            document: self.document.clone(),
        }
    }
}

impl Ledger {
    /// `GET …/package`: the latest package, or 404 `package.not_found`.
    pub fn latest(&self) -> Result<Latest, Refusal> {
        self.current.as_ref().map(Offer::answer).ok_or_else(not_found)
    }

    /// `POST …/package` (and the compile inside `POST …/turns`). An unchanged hash answers
    /// the version, hash and document it already had and moves nothing; a new hash is the
    /// next version, offered. With `dry_run` the answer is the same and nothing moves.
    /// Refused with 409 `package.accepted` once the current turn's package was accepted.
    pub fn compile(
        &self,
        sources: &Sources,
        request: &PackageRequest,
        dry_run: bool,
        now: EpochMs,
    ) -> Result<Applied<Ledger, Compiled>, Refusal> {
        if !dry_run {
            sources.record.check_open()?;
        }
        let current = self.current.as_ref();
        if let Some(c) = current.filter(|c| c.state == OfferState::Accepted && c.turn == sources.record.turn) {
            return Err(Refusal::new(
                Code::PackageAccepted,
                format!(
                    "package version {} was accepted for turn {}; the next turn may compile again",
                    c.version, c.turn
                ),
            ));
        }
        let rejection = current.filter(|c| c.state == OfferState::Rejected).and_then(|c| c.rejection.as_ref());
        let package = compile(sources, request, rejection, now)?;
        let document = Document::of(&package);
        let hash = document.hash();

        if let Some(c) = current.filter(|c| c.hash == hash) {
            let answer = Compiled {
                package_version: c.version,
                package_hash: c.hash.clone(),
                changed: false,
                package: c.package.clone(),
                document: c.document.clone(),
            };
            return Ok(Applied { next: self.clone(), effect: answer, moved: false });
        }
        let version = current.map_or(1, |c| c.version + 1);
        let answer = Compiled {
            package_version: version,
            package_hash: hash.clone(),
            changed: true,
            package,
            document: Written::new(document),
        };
        if dry_run {
            return Ok(Applied { next: self.clone(), effect: answer, moved: false });
        }
        let offer = Offer {
            version,
            hash,
            turn: sources.record.turn,
            package: answer.package.clone(),
            state: OfferState::Offered,
            rejection: None,
            offered_at: Timestamp::from_ms(now),
            accepted: None,
            document: answer.document.clone(),
        };
        let next = Ledger { current: Some(offer) };
        assert_eq!(next.current.as_ref().map(|c| c.version), Some(current.map_or(0, |c| c.version) + 1));
        Ok(Applied { next, effect: answer, moved: true })
    }

    /// `POST …/package/accept`: accepts exactly the document whose hash is given. A hash that
    /// is not the current one → 409 `package.stale` (the message carries the current hash);
    /// an accepted package accepted again → 409 `package.accepted`. A rejected package that
    /// is still current may be accepted: the destination changed its mind about the same
    /// document.
    pub fn accept(
        &self,
        handoff: &Record,
        package_hash: &str,
        by: Role,
        now: EpochMs,
    ) -> Result<Applied<Ledger, Latest>, Refusal> {
        handoff.check_open()?;
        let current = self.current.as_ref().ok_or_else(not_found)?;
        if current.hash != package_hash {
            return Err(stale(current));
        }
        if current.state == OfferState::Accepted {
            return Err(Refusal::new(
                Code::PackageAccepted,
                format!("package version {} was already accepted", current.version),
            ));
        }
        let mut offer = current.clone();
        offer.state = OfferState::Accepted;
        offer.rejection = None;
        offer.accepted = Some((Timestamp::from_ms(now), by));
        let next = Ledger { current: Some(offer) };
        let answer = next.latest().expect("a current package");
        Ok(Applied { next, effect: answer, moved: true })
    }

    /// `POST …/package/reject`: rejects the current package. The same rejection again moves
    /// nothing; an accepted package cannot be rejected (409 `package.accepted`).
    pub fn reject(
        &self,
        handoff: &Record,
        input: &RejectInput,
        by: Role,
        now: EpochMs,
    ) -> Result<Applied<Ledger, Latest>, Refusal> {
        handoff.check_open()?;
        let current = self.current.as_ref().ok_or_else(not_found)?;
        if current.state == OfferState::Accepted {
            return Err(Refusal::new(
                Code::PackageAccepted,
                format!("package version {} was accepted and cannot be rejected", current.version),
            ));
        }
        let same_again = current.rejection.as_ref().is_some_and(|r| r.reason == input.reason && r.note == input.note);
        if same_again {
            return Ok(Applied { next: self.clone(), effect: current.answer(), moved: false });
        }
        let mut offer = current.clone();
        offer.state = OfferState::Rejected;
        offer.rejection = Some(Rejection {
            reason: input.reason,
            note: input.note.clone(),
            rejected_at: Timestamp::from_ms(now),
            by,
        });
        let next = Ledger { current: Some(offer) };
        let answer = next.latest().expect("a current package");
        Ok(Applied { next, effect: answer, moved: true })
    }
}

fn stale(current: &Offer) -> Refusal {
    Refusal::new(
        Code::PackageStale,
        format!(
            "that package is no longer current; the current one is version {} with package_hash {}",
            current.version, current.hash
        ),
    )
}

// ---------------------------------------------------------------------------------------
// Markdown, for a person
// ---------------------------------------------------------------------------------------

/// `GET …/package?format=markdown`: the package for a person to review, with the whole hash
/// and the raw JSON at the end.
///
/// Every machine-written string goes through one of three helpers, so that no text can make a
/// link, an image, HTML, a heading, a list item, a table or a code block of its own:
/// [`one_line`] (and [`quote`] for multi-line text) escapes it as inline text, [`code_span`]
/// fences ids and paths, [`md_uri`] makes a URI an autolink only where that cannot go wrong.
/// The structure around them (headings, `- ` and `> ` prefixes, `**state**`) is this
/// function's own.
#[allow(
    clippy::too_many_lines,
    reason = "the document's sections in their order, each a few lines: split, it would read out of order"
)]
pub fn render_markdown(latest: &Latest) -> String {
    let p = &latest.package;
    let mut md = String::new();
    let state = match latest.state {
        OfferState::Offered => "offered",
        OfferState::Rejected => "rejected",
        OfferState::Accepted => "accepted",
    };
    let _ = writeln!(md, "# Hand-off package v{}: {}\n", latest.package_version, one_line(&p.work.title));
    let _ = writeln!(
        md,
        "- Hand-off: {} (session {}, machine {})",
        code_span(&p.work.id),
        code_span(&p.source.session),
        code_span(&p.source.machine)
    );
    let _ = writeln!(md, "- State: **{state}**");
    if let Some(r) = &latest.rejection {
        let _ = writeln!(md, "- Rejected ({}): {}", one_line(r.reason.as_str()), one_line(&r.note));
    }
    let _ = writeln!(
        md,
        "- Phase: turn {}, {}, hand-off {}",
        p.state.phase.turn,
        p.state.phase.status.as_str(),
        p.state.phase.state.as_str()
    );
    if let Some(t) = &p.work.task_type {
        let _ = writeln!(md, "- Task type: {}", one_line(t));
    }
    if let Some(pr) = &p.work.priority {
        let _ = writeln!(md, "- Priority: {}", one_line(pr));
    }
    let _ = writeln!(md, "- Generated at: {}", one_line(&p.generated_at.to_string()));

    let _ = writeln!(md, "\n## Goal\n\n{}", quote(&p.work.goal));
    let _ = writeln!(
        md,
        "\n## Next\n\n- Objective: {}\n- Purpose: {}\n- Runtime: {}",
        one_line(&p.next.objective),
        one_line(&p.next.purpose),
        one_line(&p.next.runtime)
    );
    if let Some(note) = &p.notes {
        let _ = writeln!(md, "\n## Operator's note\n\n{}", quote(note));
    }
    section(&mut md, "Constraints", p.constraints.iter().map(|c| one_line(c)));
    section(
        &mut md,
        "Acceptance criteria",
        p.acceptance_criteria.iter().enumerate().map(|(i, c)| format!("[{i}] {}", one_line(c))),
    );
    section(&mut md, "Completed", p.state.completed.iter().map(|c| one_line(c)));
    section(&mut md, "Unresolved", p.state.unresolved.iter().map(|c| one_line(c)));
    section(
        &mut md,
        "Decisions",
        p.decisions.iter().map(|d| {
            let mut line =
                format!("{} {} ({})", code_span(&d.id), one_line(&d.statement), one_line(&d.recorded_at.to_string()));
            if let Some(r) = &d.rationale {
                let _ = write!(line, ". Why: {}", one_line(r));
            }
            if !d.evidence.is_empty() {
                let links: Vec<String> = d.evidence.iter().map(|u| md_uri(u)).collect();
                let _ = write!(line, ". Evidence: {}", links.join(", "));
            }
            line
        }),
    );
    section(
        &mut md,
        "Artifacts",
        p.artifacts.iter().map(|a| {
            let sha = a.sha256.as_deref().map(|s| format!(", sha256 {}", code_span(s))).unwrap_or_default();
            format!(
                "{} v{} {} ({}): {}{sha}",
                code_span(&a.id),
                a.version,
                one_line(&a.title),
                one_line(&a.kind),
                md_uri(&a.uri)
            )
        }),
    );
    section(
        &mut md,
        "Open blockers",
        p.blockers.iter().map(|b| format!("{} [{}] {}", code_span(&b.id), b.severity.as_str(), one_line(&b.title))),
    );
    section(&mut md, "Relevant files", p.relevant_files.iter().map(|f| code_span(f)));
    section(&mut md, "Evidence links", p.evidence_links.iter().map(|u| md_uri(u)));
    let t = &p.truncation;
    if t.any() {
        let _ = writeln!(
            md,
            "\n## Left out by the compiler's bounds\n\n- Decisions: {}\n- Artifacts: {}\n- Files: {}\n- Turns: {} (Completed lists the newest {PACKAGE_COMPLETED_TURNS_MAX})",
            t.decisions_omitted, t.artifacts_omitted, t.files_omitted, t.completed_turns_omitted
        );
    }
    let raw = serde_json::to_string_pretty(p).expect("a package serializes");
    // Longer than any run of backticks in the JSON, so no value can close the block.
    let fence = "`".repeat(longest_backtick_run(&raw).max(2) + 1);
    let _ = writeln!(md, "\n## Package hash\n\n{}", code_span(&latest.package_hash));
    let _ = writeln!(md, "\n## Raw package JSON\n\n{fence}json\n{raw}\n{fence}");
    md
}

/// A `## heading` and one `- ` list item per item; every item is already escaped.
fn section(md: &mut String, heading: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## {heading}\n");
    for item in items {
        let _ = writeln!(md, "- {item}");
    }
}

/// The ASCII punctuation that some Markdown dialect reads as markup anywhere in a line, each
/// escaped with a backslash wherever it appears: `\` itself (so text cannot escape our escapes),
/// code spans, emphasis, links and images (`[`, `]`, `(`, `)`; `!` and `:` mean nothing
/// without an unescaped `[`), ATX headings and their closing `#`s, GFM tables and
/// strikethrough, math, superscripts and attribute lists. The other ASCII punctuation is
/// escaped only where it would start a block (see [`md_text`]).
const MD_ESCAPED_EVERYWHERE: &str = "\\`*_[](){}#|~$^";

/// Multi-line text on one list line, escaped as inert inline text.
fn one_line(s: &str) -> String {
    md_text(&joined_lines(s))
}

/// The lines of `s` (split at `\n`, `\r\n` and a lone `\r`, each a line ending in CommonMark),
/// each trimmed, the blank ones dropped, joined with spaces.
fn joined_lines(s: &str) -> String {
    s.split(['\n', '\r']).map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Multi-line text as a block quote, every line escaped as inert inline text. A lone `\r` ends
/// a line too: left inside a `> ` line, it would start a line of its own outside the quote.
fn quote(s: &str) -> String {
    let mut lines: Vec<&str> = s.split("\r\n").flat_map(|l| l.split(['\n', '\r'])).collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let quoted: Vec<String> = lines
        .iter()
        .map(|l| match l.trim_start() {
            "" => ">".to_string(),
            text => format!("> {}", md_text(text)),
        })
        .collect();
    quoted.join("\n")
}

/// `s` as Markdown text that renders as exactly its characters and nothing else.
///
/// `<`, `>` and `&` become the entities `&lt;`, `&gt;` and `&amp;` rather than backslash
/// escapes: every Markdown dialect and every HTML reader takes an entity as the character,
/// while `\<` is an escape only in CommonMark (the original Markdown.pl would pass a tag
/// through). The characters of [`MD_ESCAPED_EVERYWHERE`] get a backslash (CommonMark lets any
/// ASCII punctuation be escaped). At the start of the text, where a block would begin, the
/// first character gets a backslash too if it is any other ASCII punctuation (`-`, `+`, `=`,
/// `>`, `:`, …: list items, setext underlines, thematic breaks, definition lists), and so does
/// the `.` of a leading number (`1.`, an ordered list; `1)` has its `)` escaped already).
/// GitHub's Markdown also links bare `scheme://…` and `www.…` in text, so the `:` of `://`
/// and the `.` of `www.` get a backslash too. Control characters other than tab, which callers
/// have split lines on already, become U+FFFD.
fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    let mut block_start = true; // only spaces and tabs so far
    let mut leading_number = false; // only spaces, tabs and then digits so far
    for (i, c) in s.char_indices() {
        let bare_link = match c {
            ':' => s[i + 1..].starts_with("//"),
            '.' => i >= 3 && s.is_char_boundary(i - 3) && s[i - 3..i].eq_ignore_ascii_case("www"),
            _ => false,
        };
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if MD_ESCAPED_EVERYWHERE.contains(c) || bare_link => {
                out.push('\\');
                out.push(c);
            }
            c if block_start && c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            '.' if leading_number => out.push_str("\\."),
            c if c.is_control() && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
        let blank = c == ' ' || c == '\t';
        leading_number = (block_start || leading_number) && c.is_ascii_digit();
        block_start = block_start && blank;
    }
    out
}

/// `s` as a code span: fenced with one backtick more than its longest run of backticks, and
/// padded with a space where it starts or ends with a backtick or a space (CommonMark then
/// takes one space off each side), so no value can close the span early. Inside a code span
/// nothing is markup and nothing can be escaped, so the value is shown as it is, on one line
/// (a line ending, which would end the span's paragraph, becomes a space).
fn code_span(s: &str) -> String {
    let one_line = |c: char| match c {
        '\n' | '\r' => ' ',
        c if c.is_control() => '\u{FFFD}',
        c => c,
    };
    let text: String = s.chars().map(one_line).collect();
    let ticks = "`".repeat(longest_backtick_run(&text) + 1);
    let pad = if text.is_empty() || text.starts_with(['`', ' ']) || text.ends_with(['`', ' ']) { " " } else { "" };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

/// A URI as an autolink (`<https://…>`, whose text is its own target) when it is an `http` or
/// `https` URI with a host and has no `<`, `>`, whitespace, control character or backslash
/// (any of which could end the autolink early or be read differently by a browser); anything
/// else, such as a relative reference or a URI a record kept from before the scheme rule
/// (`javascript:`), as escaped text.
fn md_uri(uri: &str) -> String {
    let breaks_out = |c: char| matches!(c, '<' | '>' | '\\') || c.is_whitespace() || c.is_control();
    if uri_kind(uri) == UriKind::Web && !uri.contains(breaks_out) {
        format!("<{uri}>")
    } else {
        one_line(uri)
    }
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests;
