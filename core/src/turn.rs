//! The turn machine: the whole life of one hand-off as a pure function.
//!
//! A command goes in with the current record; the next record (or a typed refusal)
//! and whether the version moved come out. No I/O, no clock, no `worker` types:
//! the Durable Object supplies `now` and stores what comes back.
//!
//! Invariants, asserted in [`apply`]:
//! - the version rises by exactly one on every change and never otherwise;
//! - a closed hand-off never changes;
//! - the turn number only rises, by one, through `OpenTurn`.

use crate::applied::Applied;
use crate::error::{Code, Refusal};
use crate::limits::{
    PERMISSION_MODE_BYTES_MAX, PROMPT_BYTES_MAX, REPLY_BYTES_MAX, RUNTIME_BYTES_MAX, STEERS_PER_TURN_MAX,
    SUMMARY_BYTES_MAX,
};
use crate::placement::Placement;
use crate::question::{Pick, Question, QuestionInput};
use crate::runtimes::MachineRuntimes;
use crate::suggestion::Suggestion;
use crate::text::lines_only;
use crate::time::{EpochMs, Timestamp};
use crate::timeline::SyncMode;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Open,
    Closed,
}

impl State {
    /// The state as the contract writes it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Open => "open",
            State::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        [State::Open, State::Closed].into_iter().find(|state| state.as_str() == s)
    }
}

/// The current turn's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Running,
    NeedsYou,
    Done,
    Failed,
    Cancelled,
}

impl Status {
    /// Done, failed and cancelled end a turn; running and needs-you mean it is still going.
    pub fn has_ended(self) -> bool {
        matches!(self, Status::Done | Status::Failed | Status::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::NeedsYou => "needs-you",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [Status::Running, Status::NeedsYou, Status::Done, Status::Failed, Status::Cancelled]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// What a machine may report: every status but `cancelled`, which only the owner causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportStatus {
    Running,
    NeedsYou,
    Done,
    Failed,
}

impl From<ReportStatus> for Status {
    fn from(s: ReportStatus) -> Status {
        match s {
            ReportStatus::Running => Status::Running,
            ReportStatus::NeedsYou => Status::NeedsYou,
            ReportStatus::Done => Status::Done,
            ReportStatus::Failed => Status::Failed,
        }
    }
}

/// `{"turn", "runtime"}` of the turn before the current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuedFrom {
    pub turn: u64,
    pub runtime: Option<String>,
}

/// A hand-off at a glance: its session, where it runs, and where its turn stands. The record
/// keeps it and the owner's list repeats it ([`crate::rows::Row`], whose summary is the open
/// question's text while it waits), flattened into each, so both stay flat JSON objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub session: String,
    pub machine: String,
    pub size: String,
    pub turn: u64,
    pub state: State,
    pub status: Status,
    pub summary: Option<String>,
    pub version: u64,
}

/// How the current turn was handed on: the runtime it was handed to, when it was, and the
/// package that briefed it, if one did. On the record and its list row, flattened into each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Briefed {
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub package_version: Option<u64>,
    #[serde(default)]
    pub package_hash: Option<String>,
}

/// One hand-off: one cloud chat session, turn after turn. Serialised as it is stored.
///
/// The fields it shares with its list row are two flattened parts, [`Listed`] (read through
/// `Deref`) and [`Briefed`]: two, because the row orders its fields otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RecordFields")]
pub struct Record {
    pub id: String,
    pub owner: String,
    #[serde(flatten)]
    pub listed: Listed,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(flatten)]
    pub briefed: Briefed,
    /// The permission mode the current turn runs in, as the machine's running report named it
    /// (absent until one does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// Where and how the owner asked the current turn to run (turn 1's, from the create).
    #[serde(flatten)]
    pub placement: Placement,
    /// The sync mode the current turn runs in, as the machine's running report named it
    /// (absent until one does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_mode: Option<SyncMode>,
    /// The current turn's reply, once its done report carried one: the model's final answer,
    /// whole. One record frame with it at its longest still fits the watch's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The owner's words that opened the current turn (`prompt` of the create or the open), or
    /// `None` when it was opened without any.
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub continued_from: Option<ContinuedFrom>,
    /// A hand-off the owner may choose to make; never acted on by the service.
    #[serde(default)]
    pub suggestion: Option<Suggestion>,
    /// The runtimes the session's machine last reported installed (`PUT …/runtimes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_runtimes: Option<MachineRuntimes>,
    /// The question the current needs-you asks the owner, and its answer once given; `None`
    /// when no question is open (never asked, or withdrawn).
    #[serde(default)]
    pub question: Option<Question>,
    /// The owner's words sent to the current turn while it ran (`POST …/steer`), oldest first,
    /// at most [`STEERS_PER_TURN_MAX`]; a new turn starts with none. Absent when there are none,
    /// so that a record without steers keeps its stored and served bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steers: Vec<Steer>,
    /// Which life of the session's hand-off this is: the moment (epoch ms) its create was
    /// asked. A hand-off created again after an erasure starts at version 1 with a later one,
    /// and a machine token minted for an earlier life is refused by it. 0: created before
    /// hand-offs were erased.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incarnation: u64,
}

/// A [`Record`] as it is read: its parts' fields in place, with their attributes. Serde reads
/// a flattened part through a buffer of every field and a second reader of each part's type,
/// which cost the Worker's `.wasm` more than this one reader does.
#[derive(Deserialize)]
struct RecordFields {
    id: String,
    owner: String,
    session: String,
    machine: String,
    size: String,
    turn: u64,
    state: State,
    status: Status,
    summary: Option<String>,
    version: u64,
    created_at: Timestamp,
    updated_at: Timestamp,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    package_version: Option<u64>,
    #[serde(default)]
    package_hash: Option<String>,
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
    #[serde(default)]
    sync_mode: Option<SyncMode>,
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    continued_from: Option<ContinuedFrom>,
    #[serde(default)]
    suggestion: Option<Suggestion>,
    #[serde(default)]
    machine_runtimes: Option<MachineRuntimes>,
    #[serde(default)]
    question: Option<Question>,
    #[serde(default)]
    steers: Vec<Steer>,
    #[serde(default)]
    incarnation: u64,
}

impl From<RecordFields> for Record {
    fn from(r: RecordFields) -> Record {
        let (session, machine, size, turn, state, status, summary, version) =
            (r.session, r.machine, r.size, r.turn, r.state, r.status, r.summary, r.version);
        let (runtime, package_version, package_hash) = (r.runtime, r.package_version, r.package_hash);
        let (workspace, model, requested_permission_mode) = (r.workspace, r.model, r.requested_permission_mode);
        Record {
            id: r.id,
            owner: r.owner,
            listed: Listed { session, machine, size, turn, state, status, summary, version },
            created_at: r.created_at,
            updated_at: r.updated_at,
            briefed: Briefed { runtime, package_version, package_hash },
            permission_mode: r.permission_mode,
            placement: Placement { workspace, runtime: r.requested_runtime, model, requested_permission_mode },
            sync_mode: r.sync_mode,
            reply: r.reply,
            prompt: r.prompt,
            continued_from: r.continued_from,
            suggestion: r.suggestion,
            machine_runtimes: r.machine_runtimes,
            question: r.question,
            steers: r.steers,
            incarnation: r.incarnation,
        }
    }
}

/// One steer: the owner's words for the running turn, which the machine hands its harness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steer {
    /// `st_`, the version the steer made, `_`, the hand-off's life ([`steer_id`]).
    pub id: String,
    pub prompt: String,
    pub sent_at: Timestamp,
}

/// A steer's id: `st_`, the version that took it, `_`, the hand-off's life. One version takes one
/// steer, so no id is given twice, across erasures too.
pub fn steer_id(version: u64, incarnation: u64) -> String {
    format!("st_{version}_{incarnation}")
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `record.status` and the like read and write the [`Listed`] part.
impl std::ops::Deref for Record {
    type Target = Listed;
    fn deref(&self) -> &Listed {
        &self.listed
    }
}

impl std::ops::DerefMut for Record {
    fn deref_mut(&mut self) -> &mut Listed {
        &mut self.listed
    }
}

impl Record {
    /// Whether the hand-off is closed: terminal, nothing changes it again.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Refuses every change to a closed hand-off with `handoff.closed`: the routes outside the
    /// turn machine (the work record, packages, the policy, the runtimes) share this one check.
    pub fn check_open(&self) -> Result<(), Refusal> {
        if self.state == State::Closed {
            return Err(Refusal::new(Code::HandoffClosed, "the hand-off is closed"));
        }
        Ok(())
    }

    /// A new hand-off: turn 1, open, running, version 1.
    pub fn create(id: String, owner: String, session: String, machine: String, size: String, now: EpochMs) -> Record {
        Record {
            id,
            owner,
            listed: Listed {
                session,
                machine,
                size,
                turn: 1,
                state: State::Open,
                status: Status::Running,
                summary: None,
                version: 1,
            },
            created_at: Timestamp::from_ms(now),
            updated_at: Timestamp::from_ms(now),
            briefed: Briefed::default(),
            permission_mode: None,
            placement: Placement::default(),
            sync_mode: None,
            reply: None,
            prompt: None,
            continued_from: None,
            suggestion: None,
            machine_runtimes: None,
            question: None,
            steers: Vec::new(),
            incarnation: now.max(0) as u64,
        }
    }

    /// A second create for the same session answers the same hand-off, unless it names
    /// another machine or size.
    pub fn check_create_again(&self, machine: &str, size: &str) -> Result<(), Code> {
        if self.machine == machine && self.size == size {
            Ok(())
        } else {
            Err(Code::HandoffConflict)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Command {
    /// The owner opens turn `after + 1`, with their words for it, if any.
    OpenTurn {
        after: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
    /// The machine reports on `turn`; a needs-you may ask the owner a question.
    Report {
        turn: u64,
        status: ReportStatus,
        summary: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<QuestionInput>,
        /// The runtime running the turn, as the machine says: named on the record and the
        /// turn's lineage entry; another than the one the turn was handed to is refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// The permission mode the turn runs in, as the machine says: named on the record and
        /// the turn's lineage entry; another mode later in the turn replaces it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission_mode: Option<String>,
        /// A done report's reply: the model's final answer, whole. Part of what makes a final
        /// report the same report again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<String>,
        /// A running report's sync mode: named on the record and the turn's lineage entry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sync_mode: Option<SyncMode>,
    },
    /// The owner stops the current turn (or names it, to be sure it is the one they saw).
    Cancel { turn: Option<u64> },
    /// The owner closes the hand-off: the only terminal change.
    Close,
    /// The owner answers the open question with one of its options.
    Answer { question: String, option: String, note: Option<String> },
    /// The owner's words for `turn` while it runs: the machine hands them to its harness.
    Steer { turn: u64, prompt: String },
}

/// Applies `command` to `record` at time `now`. A refusal leaves the record as it was.
pub fn apply(record: &Record, command: &Command, now: EpochMs) -> Result<Applied<Record>, Code> {
    let outcome = decide(record, command, now);
    let applied = match outcome {
        Err(code) => return Err(code),
        Ok(None) => Applied { next: record.clone(), effect: (), moved: false },
        Ok(Some(mut next)) => {
            next.version = record.version + 1;
            next.updated_at = Timestamp::from_ms(now).max(record.updated_at);
            Applied { next, effect: (), moved: true }
        }
    };
    assert!(record.state == State::Open || !applied.moved, "a closed hand-off never changes");
    let opened = matches!(command, Command::OpenTurn { .. }) && applied.moved;
    assert_eq!(
        applied.next.turn,
        record.turn + u64::from(opened),
        "the turn rises by exactly one, and only through OpenTurn"
    );
    if applied.moved {
        assert_eq!(applied.next.version, record.version + 1);
    } else {
        assert_eq!(applied.next, *record);
    }
    Ok(applied)
}

/// The rules. `Ok(None)`: accepted, changes nothing. `Ok(Some(next))`: the changed record
/// (version and time are stamped by [`apply`]).
fn decide(record: &Record, command: &Command, now: EpochMs) -> Result<Option<Record>, Code> {
    match command {
        Command::OpenTurn { after, prompt } => open_turn(record, *after, prompt),
        Command::Report { turn, status, summary, question, runtime, permission_mode, reply, sync_mode } => {
            let running = Running {
                runtime: runtime.as_deref(),
                permission_mode: permission_mode.as_deref(),
                sync_mode: *sync_mode,
            };
            let said = Said { summary, reply };
            report(record, *turn, *status, said, question.as_ref(), running, now)
        }
        Command::Cancel { turn } => cancel(record, *turn),
        Command::Close => close(record),
        Command::Answer { question, option, note } => answer(record, question, option, note, now),
        Command::Steer { turn, prompt } => steer(record, *turn, prompt, now),
    }
}

fn open_turn(record: &Record, after: u64, prompt: &Option<String>) -> Result<Option<Record>, Code> {
    if record.state == State::Closed {
        return Err(Code::HandoffClosed);
    }
    if after.checked_add(1) == Some(record.turn) {
        // The same call again, with the same words, answers the turn it opened; other words
        // are another device's, which spoke first: a conflict, so neither is lost silently.
        // (Whether the hand-off it asks for is the one taken is the hand-off's to check.)
        return if record.prompt == *prompt { Ok(None) } else { Err(Code::TurnConflict) };
    }
    if after != record.turn {
        return Err(Code::TurnConflict);
    }
    if !record.status.has_ended() {
        return Err(Code::TurnRunning);
    }
    let mut next = record.clone();
    next.turn = record.turn + 1;
    next.status = Status::Running;
    next.summary = None;
    // A new turn starts unbriefed and unsuggested; a hand-off to a runtime fills these in.
    next.continued_from = Some(ContinuedFrom { turn: record.turn, runtime: record.briefed.runtime.clone() });
    next.briefed = Briefed::default();
    next.permission_mode = None;
    next.sync_mode = None;
    next.reply = None;
    next.prompt = prompt.clone();
    next.suggestion = None;
    next.question = None;
    next.steers = Vec::new();
    Ok(Some(next))
}

/// A steer: taken only while `turn` is the current turn and still going, within
/// [`STEERS_PER_TURN_MAX`]. Every steer is new words, so each one moves (a repeat is the
/// idempotency key's to answer, not the rules').
fn steer(record: &Record, turn: u64, prompt: &str, now: EpochMs) -> Result<Option<Record>, Code> {
    if record.state == State::Closed {
        return Err(Code::HandoffClosed);
    }
    if turn < record.turn {
        return Err(Code::HandoffStale);
    }
    if turn > record.turn {
        return Err(Code::TurnOutOfOrder);
    }
    if record.status.has_ended() {
        return Err(Code::TurnFinished);
    }
    if record.steers.len() >= STEERS_PER_TURN_MAX {
        return Err(Code::SteerTooMany);
    }
    let mut next = record.clone();
    let id = steer_id(record.version + 1, record.incarnation);
    next.steers.push(Steer { id, prompt: prompt.to_string(), sent_at: Timestamp::from_ms(now) });
    Ok(Some(next))
}

/// A prompt's rule: 1..=[`PROMPT_BYTES_MAX`] bytes of text, not only blanks, no control
/// character but the multi-line fields' (400 `request.invalid` naming `prompt`).
pub fn check_prompt(prompt: &str) -> Result<(), Refusal> {
    crate::text::multi_line("prompt", prompt, PROMPT_BYTES_MAX)
}

/// What a running report may say of how the turn runs.
#[derive(Debug, Clone, Copy)]
struct Running<'a> {
    runtime: Option<&'a str>,
    permission_mode: Option<&'a str>,
    sync_mode: Option<SyncMode>,
}

/// What a report says of the turn: its summary, and a done report's reply.
#[derive(Debug, Clone, Copy)]
struct Said<'a> {
    summary: &'a Option<String>,
    reply: &'a Option<String>,
}

fn report(
    record: &Record,
    turn: u64,
    status: ReportStatus,
    said: Said<'_>,
    question: Option<&QuestionInput>,
    running: Running<'_>,
    now: EpochMs,
) -> Result<Option<Record>, Code> {
    let Running { runtime, permission_mode, sync_mode } = running;
    let Said { summary, reply } = said;
    if record.state == State::Closed {
        return Err(Code::HandoffClosed);
    }
    if turn < record.turn {
        return Err(Code::HandoffStale);
    }
    if turn > record.turn {
        return Err(Code::TurnOutOfOrder);
    }
    // A turn runs one runtime: the one it was handed to, or the first one a report named.
    let named = record.briefed.runtime.as_deref();
    if runtime.is_some_and(|r| named.is_some_and(|n| n != r)) {
        return Err(Code::TurnConflict);
    }
    let names_runtime = runtime.is_some() && named.is_none();
    // The mode may change within a turn (a harness leaving plan mode): the newest one stands.
    let names_mode = permission_mode.is_some_and(|m| record.permission_mode.as_deref() != Some(m));
    let names_sync = sync_mode.is_some_and(|m| record.sync_mode != Some(m));
    let names = names_runtime || names_mode || names_sync;
    let status = Status::from(status);
    let waiting = still_waiting(record, status, question);
    if waiting && !names {
        return Ok(None);
    }
    // The open question asked again is the same question; no question where none is open is
    // no question: anything else asks a new one or withdraws the one there was.
    let same_question = match (question, &record.question) {
        (None, None) => true,
        (Some(input), Some(open)) => open.is_same_open(input),
        _ => false,
    };
    let same_as_now =
        record.status == status && record.summary == *summary && record.reply == *reply && same_question && !names;
    if same_as_now {
        // An exact repeat (of a final report too): accepted, nothing moves.
        return Ok(None);
    }
    if record.status.has_ended() {
        return Err(Code::TurnFinished);
    }
    let mut next = record.clone();
    if names_runtime {
        next.briefed.runtime = runtime.map(str::to_string);
    }
    if names_mode {
        next.permission_mode = permission_mode.map(str::to_string);
    }
    if names_sync {
        next.sync_mode = sync_mode;
    }
    if waiting {
        return Ok(Some(next));
    }
    next.status = status;
    next.summary = summary.clone();
    next.reply = reply.clone();
    // Only a needs-you asks; the API refuses a question on any other status.
    let asked = question.filter(|_| status == Status::NeedsYou);
    next.question = asked
        .map(|input| Question::asked(input, turn, record.version + 1, record.incarnation, Timestamp::from_ms(now)));
    Ok(Some(next))
}

/// A runtime a report names: 1..=[`RUNTIME_BYTES_MAX`] characters of `[A-Za-z0-9._:-]`, as
/// the machine's runtimes are named (400 `request.invalid` naming `runtime`).
pub fn check_runtime(runtime: &str) -> Result<(), Refusal> {
    crate::ids::check_name("runtime", runtime, RUNTIME_BYTES_MAX)
}

/// A permission mode a report names: 1..=[`PERMISSION_MODE_BYTES_MAX`] characters of
/// `[A-Za-z0-9._:-]` (400 `request.invalid` naming `permission_mode`).
pub fn check_permission_mode(mode: &str) -> Result<(), Refusal> {
    crate::ids::check_name("permission_mode", mode, PERMISSION_MODE_BYTES_MAX)
}

/// A report's summary, whatever machine sent it (a hook's last message, MCP `report`, a
/// person): at most [`SUMMARY_BYTES_MAX`] bytes, under the rule of every text that may span
/// lines ([`lines_only`]: `\n` and `\t`, no other control character). It may be empty, as a
/// harness's last message can be: a final report is never refused for saying nothing.
pub fn check_summary(summary: &str) -> Result<(), Refusal> {
    if summary.len() > SUMMARY_BYTES_MAX {
        return Err(Refusal::invalid(format!("summary: longer than {SUMMARY_BYTES_MAX} bytes")));
    }
    lines_only("summary", summary)
}

/// A done report's reply: the model's final answer, whole, at most [`REPLY_BYTES_MAX`] bytes
/// under the multi-line rule (400 `request.invalid` naming `reply`).
pub fn check_reply(reply: &str) -> Result<(), Refusal> {
    if reply.len() > REPLY_BYTES_MAX {
        return Err(Refusal::invalid(format!("reply: longer than {REPLY_BYTES_MAX} bytes")));
    }
    lines_only("reply", reply)
}

/// A needs-you without a question while the turn waits on an unanswered one says nothing new:
/// the question stays open, answerable until the turn moves on (a running, done or failed
/// report, a new question, a cancel, a close). A harness reminds the person of its own waiting
/// prompt this way (Claude Code's `permission_prompt` notification, seconds after it asked).
fn still_waiting(record: &Record, status: Status, question: Option<&QuestionInput>) -> bool {
    status == Status::NeedsYou
        && question.is_none()
        && record.status == Status::NeedsYou
        && record.question.as_ref().is_some_and(Question::is_open)
}

fn cancel(record: &Record, turn: Option<u64>) -> Result<Option<Record>, Code> {
    if record.state == State::Closed {
        return Err(Code::HandoffClosed);
    }
    if turn.is_some_and(|t| t != record.turn) {
        return Err(Code::TurnConflict);
    }
    match record.status {
        Status::Cancelled => Ok(None),
        Status::Done | Status::Failed => Err(Code::TurnFinished),
        Status::Running | Status::NeedsYou => {
            let mut next = record.clone();
            next.status = Status::Cancelled;
            next.question = None;
            Ok(Some(next))
        }
    }
}

fn close(record: &Record) -> Result<Option<Record>, Code> {
    if record.state == State::Closed {
        return Ok(None);
    }
    let mut next = record.clone();
    next.state = State::Closed;
    if !record.status.has_ended() {
        next.status = Status::Cancelled;
    }
    next.question = None;
    Ok(Some(next))
}

/// The owner's answer: recorded once, on the open question, with one of its options; the turn
/// goes back to `running`. The same option again changes nothing.
fn answer(
    record: &Record,
    question: &str,
    option: &str,
    note: &Option<String>,
    now: EpochMs,
) -> Result<Option<Record>, Code> {
    if record.state == State::Closed {
        return Err(Code::HandoffClosed);
    }
    let Some(open) = &record.question else {
        return Err(Code::QuestionNone);
    };
    if open.id != question {
        return Err(Code::QuestionStale);
    }
    if !open.has_option(option) {
        return Err(Code::RequestInvalid);
    }
    if let Some(given) = &open.answer {
        return if given.option == option { Ok(None) } else { Err(Code::QuestionAnswered) };
    }
    assert_eq!(record.status, Status::NeedsYou, "an unanswered question is open only while the turn needs the owner");
    let mut next = record.clone();
    next.status = Status::Running;
    let answered = Pick { option: option.to_string(), note: note.clone(), answered_at: Timestamp::from_ms(now) };
    if let Some(q) = next.question.as_mut() {
        q.answer = Some(answered);
    }
    Ok(Some(next))
}

/// What a waiter that saw `after` should do now.
pub fn wait_answers_now(record: &Record, after: u64) -> bool {
    record.version > after || record.is_closed()
}

#[cfg(test)]
mod tests;
