//! The hand-off as one value: its record (the turn machine's), its work record, its package
//! ledger, its turn lineage and the owner's suggestion policy. [`apply`] is the single entry
//! point the Durable Object calls for every change; it composes the pure parts so that one
//! request is one transaction: all of it, with one version move, or a refusal and nothing.
//!
//! Invariants:
//! - a change moves the version by exactly one, however many parts it touched; a request that
//!   changes nothing moves nothing ([`Outcome::moved`] is false and nothing is written);
//! - the lineage has one entry per turn, the last one the current turn's, and agrees with
//!   the record's turn, status and runtime; the value holds its newest [`LINEAGE_TAIL_MAX`]
//!   entries (storage keeps more);
//! - a suggestion is raised at most once per turn and reason, and only ever by a report.

use crate::actions::Action;
use crate::applied::Applied;
use crate::error::{Code, Refusal};
use crate::limits::{LINEAGE_TAIL_MAX, PROMPT_TURNS_KEPT_MAX, QUESTIONS_PER_TURN_KEPT_MAX};
use crate::package::{Compiled, Latest, Ledger, PackageRequest, RejectInput, Sources, TurnEntry};
use crate::placement::Placement;
use crate::runtimes::{self, MachineRuntimes, RuntimesInput};
use crate::suggestion::{self, Policy, Reason, Usage};
use crate::time::{EpochMs, Timestamp};
use crate::turn::{self, Command as TurnCommand, Record, ReportStatus};
use crate::work::{self, Role, Work};
use serde::{Deserialize, Serialize};

/// Everything one hand-off's Durable Object keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    pub record: Record,
    pub work: Work,
    pub ledger: Ledger,
    pub lineage: Vec<TurnEntry>,
    pub extras: Extras,
}

/// The small parts: the owner's policy and the suggestions already raised this turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extras {
    pub policy: Option<Policy>,
    /// `(turn, reason)` of every suggestion raised in the current turn.
    pub raised: Vec<(u64, Reason)>,
    /// SHA-256 (hex) of turn 1's prompt, when the create carried one: what a repeated create is
    /// compared with, long after turn 1's words left the lineage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_prompt_sha256: Option<String>,
    /// Turn 1's placement, as the create named it: what a repeated create is compared with.
    #[serde(default, skip_serializing_if = "Placement::is_empty")]
    pub opening_placement: Placement,
}

/// What a parts-wise store must write after a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dirty {
    pub work: bool,
    pub ledger: bool,
    pub extras: bool,
    /// The lineage entries from this index on changed (the current one, or a new one).
    pub lineage_from: Option<usize>,
    /// One older entry changed too: the one whose prompt was just dropped.
    pub lineage_dropped: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A turn command; a report may carry `unmet` (final reports only) and `usage`, an open
    /// may hand the turn to a runtime with the `package` it compiles for it.
    Turn {
        command: TurnCommand,
        #[serde(default)]
        unmet: Option<Vec<u32>>,
        #[serde(default)]
        usage: Option<Usage>,
        #[serde(default)]
        package: Option<PackageRequest>,
    },
    Work {
        command: work::Command,
    },
    Compile {
        request: PackageRequest,
        dry_run: bool,
    },
    Accept {
        package_hash: String,
    },
    Reject {
        input: RejectInput,
    },
    SetPolicy {
        policy: Policy,
    },
    /// The machine's report of the runtimes it can run, replacing the last one whole.
    SetRuntimes {
        input: RuntimesInput,
    },
}

crate::listed_enum! {
    /// What the history records of each version: the kind of change that made it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum EventKind {
        Create,
        TurnOpened,
        TurnHandedOff,
        Report,
        Cancel,
        Close,
        Work,
        Decision,
        Artifact,
        Blocker,
        BlockerResolved,
        Workspace,
        PackageCompiled,
        PackageAccepted,
        PackageRejected,
        Policy,
        Runtimes,
        Answer,
        Steer,
    }
}

impl EventKind {
    /// The kind as the history stores it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Create => "create",
            EventKind::TurnOpened => "turn_opened",
            EventKind::TurnHandedOff => "turn_handed_off",
            EventKind::Report => "report",
            EventKind::Cancel => "cancel",
            EventKind::Close => "close",
            EventKind::Work => "work",
            EventKind::Decision => "decision",
            EventKind::Artifact => "artifact",
            EventKind::Blocker => "blocker",
            EventKind::BlockerResolved => "blocker_resolved",
            EventKind::Workspace => "workspace",
            EventKind::PackageCompiled => "package_compiled",
            EventKind::PackageAccepted => "package_accepted",
            EventKind::PackageRejected => "package_rejected",
            EventKind::Policy => "policy",
            EventKind::Runtimes => "runtimes",
            EventKind::Answer => "answer",
            EventKind::Steer => "steer",
        }
    }
}

impl Change {
    /// The event kind the history records for this change.
    pub fn kind(&self) -> EventKind {
        match self {
            Change::Turn { command: TurnCommand::OpenTurn { .. }, package: Some(_), .. } => EventKind::TurnHandedOff,
            Change::Turn { command: TurnCommand::OpenTurn { .. }, .. } => EventKind::TurnOpened,
            Change::Turn { command: TurnCommand::Report { .. }, .. } => EventKind::Report,
            Change::Turn { command: TurnCommand::Cancel { .. }, .. } => EventKind::Cancel,
            Change::Turn { command: TurnCommand::Close, .. } => EventKind::Close,
            Change::Turn { command: TurnCommand::Answer { .. }, .. } => EventKind::Answer,
            Change::Turn { command: TurnCommand::Steer { .. }, .. } => EventKind::Steer,
            Change::Work { command } => match command {
                work::Command::SetWork(_) => EventKind::Work,
                work::Command::RecordDecision(_) => EventKind::Decision,
                work::Command::AddArtifact(_) => EventKind::Artifact,
                work::Command::AddBlocker(_) => EventKind::Blocker,
                work::Command::ResolveBlocker { .. } => EventKind::BlockerResolved,
                work::Command::ReportWorkspace(_) => EventKind::Workspace,
            },
            Change::Compile { .. } => EventKind::PackageCompiled,
            Change::Accept { .. } => EventKind::PackageAccepted,
            Change::Reject { .. } => EventKind::PackageRejected,
            Change::SetPolicy { .. } => EventKind::Policy,
            Change::SetRuntimes { .. } => EventKind::Runtimes,
        }
    }
}

/// What a change answers beside the record (the HTTP contract renders it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The record alone: a turn command.
    Nothing,
    /// The work record's item the command set or recorded.
    Item(work::Item),
    /// The package compiled (or found unchanged, or a dry run's).
    Compiled(Compiled),
    /// The current package after an accept or a reject.
    Package(Latest),
    /// The owner's policy as set.
    Policy(Policy),
}

/// An accepted change: the hand-off's [`Applied`] (its next value, what it answers, whether
/// it moved) and, for a store that writes parts, which parts to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub next: Handoff,
    pub moved: bool,
    pub dirty: Dirty,
    pub effect: Effect,
}

impl Handoff {
    /// A new hand-off; turn 1's prompt, if any, is the record's.
    pub fn create(record: Record) -> Handoff {
        let first = TurnEntry {
            turn: record.turn,
            status: record.status,
            runtime: None,
            permission_mode: None,
            placement: record.placement.clone(),
            package_version: None,
            package_hash: None,
            continued_from: None,
            opened_at: record.created_at,
            ended_at: None,
            prompt: record.prompt.clone(),
            prompt_dropped: false,
            ..TurnEntry::outcome_unknown()
        };
        let extras = Extras {
            opening_prompt_sha256: record.prompt.as_deref().map(prompt_digest),
            opening_placement: record.placement.clone(),
            ..Extras::default()
        };
        Handoff { record, work: Work::default(), ledger: Ledger::default(), lineage: vec![first], extras }
    }

    /// A second create for the same session answers the same hand-off, unless it names another
    /// machine or size, or carries other words or another placement than turn 1's (`None`: it
    /// carries none, as a create that only looks the session up).
    pub fn check_create_again(
        &self,
        machine: &str,
        size: &str,
        prompt: Option<&str>,
        placement: &Placement,
    ) -> Result<(), Code> {
        self.record.check_create_again(machine, size)?;
        placement.check_again(&self.extras.opening_placement)?;
        match prompt {
            Some(words) if self.extras.opening_prompt_sha256.as_deref() != Some(prompt_digest(words).as_str()) => {
                Err(Code::HandoffConflict)
            }
            _ => Ok(()),
        }
    }
}

fn prompt_digest(words: &str) -> String {
    hex::encode(crate::digest::sha256(&[words.as_bytes()]))
}

/// The machine's runtimes as reported at `now`: a change unless it is the same report of the
/// same moment again (its time is what keeps its runtimes available).
fn set_runtimes(h: &Handoff, next: &mut Handoff, input: &RuntimesInput, now: EpochMs) -> Result<bool, Refusal> {
    h.record.check_open()?;
    let reported =
        MachineRuntimes { runtimes: input.runtimes.clone(), reported_at: Timestamp::from_ms(input.reported_at(now)) };
    next.record.machine_runtimes = Some(reported);
    Ok(next.record.machine_runtimes != h.record.machine_runtimes)
}

/// Applies `change`, sent by `by` at `now`.
pub fn apply(h: &Handoff, change: &Change, by: Role, now: EpochMs) -> Result<Outcome, Refusal> {
    let action = Action::of(change);
    if action.sender().is_some_and(|sender| sender != by) {
        return Err(Refusal::new(
            Code::AuthForbidden,
            format!("{} is not open to the {}", action.as_str(), by.as_str()),
        ));
    }
    let mut next = h.clone();
    let mut dirty = Dirty::default();
    let (moved, answer) = match change {
        Change::Turn { command, unmet, usage, package } => {
            let moved = turn_change(
                h,
                &mut next,
                &mut dirty,
                command,
                unmet.as_deref(),
                usage.as_ref(),
                package.as_ref(),
                now,
            )?;
            (moved, Effect::Nothing)
        }
        Change::Work { command } => {
            let applied = work::apply(&h.work, &h.record, command, by, now)?;
            next.work = applied.next;
            dirty.work = applied.moved;
            (applied.moved, Effect::Item(applied.effect))
        }
        Change::Compile { request, dry_run } => {
            let sources = Sources { record: &h.record, work: &h.work, lineage: &h.lineage };
            let applied = h.ledger.compile(&sources, request, *dry_run, now)?;
            let answer = applied.effect.clone();
            (take_ledger(applied, &mut next, &mut dirty), Effect::Compiled(answer))
        }
        Change::Accept { package_hash } => {
            let applied = h.ledger.accept(&h.record, package_hash, by, now)?;
            let answer = applied.effect.clone();
            (take_ledger(applied, &mut next, &mut dirty), Effect::Package(answer))
        }
        Change::Reject { input } => {
            let applied = h.ledger.reject(&h.record, input, by, now)?;
            let answer = applied.effect.clone();
            (take_ledger(applied, &mut next, &mut dirty), Effect::Package(answer))
        }
        Change::SetPolicy { policy } => {
            h.record.check_open()?;
            next.extras.policy = Some(policy.clone());
            dirty.extras = h.extras.policy.as_ref() != Some(policy);
            (dirty.extras, Effect::Policy(policy.clone()))
        }
        Change::SetRuntimes { input } => (set_runtimes(h, &mut next, input, now)?, Effect::Nothing),
    };
    if !moved {
        // Nothing changed, so the working copy is the hand-off as it was: no second clone.
        debug_assert_eq!(next, *h, "a change that did not move changed nothing");
        return Ok(Outcome { next, moved: false, dirty: Dirty::default(), effect: answer });
    }
    next.record.version = h.record.version + 1;
    next.record.updated_at = Timestamp::from_ms(now).max(h.record.updated_at);
    keep_lineage_tail(&mut next, &mut dirty);
    assert_eq!(next.lineage.last().map(|t| t.turn), Some(next.record.turn), "the lineage ends at the current turn");
    Ok(Outcome { next, moved: true, dirty, effect: answer })
}

/// Holds only the newest [`LINEAGE_TAIL_MAX`] lineage entries: older turns live in storage
/// (`GET …/turns` pages them), and the package compiler reads only the newest turns.
fn keep_lineage_tail(next: &mut Handoff, dirty: &mut Dirty) {
    let Some(over) = next.lineage.len().checked_sub(LINEAGE_TAIL_MAX).filter(|n| *n > 0) else {
        return;
    };
    next.lineage.drain(..over);
    dirty.lineage_from = dirty.lineage_from.map(|from| from.saturating_sub(over));
    dirty.lineage_dropped = dirty.lineage_dropped.and_then(|at| at.checked_sub(over));
}

/// Keeps a ledger command's ledger; answers whether it moved.
fn take_ledger<A>(applied: Applied<Ledger, A>, next: &mut Handoff, dirty: &mut Dirty) -> bool {
    next.ledger = applied.next;
    dirty.ledger = applied.moved;
    applied.moved
}

#[allow(clippy::too_many_arguments)]
fn turn_change(
    h: &Handoff,
    next: &mut Handoff,
    dirty: &mut Dirty,
    command: &TurnCommand,
    unmet: Option<&[u32]>,
    usage: Option<&Usage>,
    package: Option<&PackageRequest>,
    now: EpochMs,
) -> Result<bool, Refusal> {
    // An open repeated for the turn it opened: its words and its hand-off must be the ones taken.
    let repeat = matches!(command, TurnCommand::OpenTurn { after, .. } if after.checked_add(1) == Some(h.record.turn));
    let conflict = |what: &str| {
        let r = &h.record;
        let message = format!(
            "turn {} was opened already, with {what}; the hand-off shows what was taken ({}, version {})",
            r.turn,
            r.status.as_str(),
            r.version
        );
        Refusal::new(Code::TurnConflict, message)
    };
    let applied = turn::apply(&h.record, command, now).map_err(|code| match code {
        Code::TurnConflict if repeat => conflict("other words"),
        Code::TurnConflict if matches!(command, TurnCommand::Report { .. }) => {
            let r = &h.record;
            let ran = r.briefed.runtime.as_deref().unwrap_or_default();
            let message = format!(
                "turn {} runs {ran}; a report cannot name another runtime ({}, version {})",
                r.turn,
                r.status.as_str(),
                r.version
            );
            Refusal::new(Code::TurnConflict, message)
        }
        code => Refusal::new(code, refusal_message(code, &h.record)),
    })?;
    if repeat && !applied.moved && !same_hand_off(h, package) {
        return Err(conflict("another hand-off"));
    }
    next.record = applied.next;
    let mut moved = applied.moved;
    if let (true, Some(request)) = (applied.moved && next.record.turn > h.record.turn, package) {
        // A hand-off turn runs its target runtime, with the model chosen or carried over.
        next.record.placement = crate::placement::handed(&h.record.placement, request);
    }
    if applied.moved {
        follow_lineage(h, next, dirty, now);
    }
    let opened = applied.moved && next.record.turn > h.record.turn;
    if opened {
        next.extras.raised.clear();
        dirty.extras = dirty.extras || !h.extras.raised.is_empty();
        if let Some(request) = package {
            hand_off(next, dirty, request, now)?;
        }
    }
    if let TurnCommand::Report { status, .. } = command {
        let ends_turn = matches!(status, ReportStatus::Done | ReportStatus::Failed);
        if applied.moved && ends_turn {
            let recorded = work::record_unmet(&next.work, unmet.unwrap_or_default())?;
            dirty.work = recorded.moved;
            next.work = recorded.next;
        }
        if let (Some(usage), Some(policy)) = (usage, h.extras.policy.as_ref()) {
            moved |= raise_suggestions(next, dirty, policy, usage, ends_turn, now);
        }
    }
    Ok(moved)
}

/// Whether an open repeated for the current turn asks for the hand-off that turn was given:
/// none for a plain turn; for a handed-off one, the same runtime, objective, purpose and note
/// as the package that briefs it.
fn same_hand_off(h: &Handoff, package: Option<&PackageRequest>) -> bool {
    let briefed = h.record.briefed.package_version;
    let Some(asked) = package else {
        return briefed.is_none();
    };
    if h.record.briefed.runtime.as_deref() != Some(asked.runtime.as_str()) {
        return false;
    }
    if asked.model.is_some() && asked.model != h.record.placement.model {
        return false;
    }
    // The package that briefed the turn, while it is the current one; a later compile leaves
    // only the runtime to compare.
    match h.ledger.current.as_ref().filter(|offer| Some(offer.version) == briefed) {
        Some(offer) => {
            let (next, notes) = (&offer.package.next, &offer.package.notes);
            next.objective == asked.objective && next.purpose == asked.purpose && *notes == asked.note
        }
        None => true,
    }
}

/// Keeps the lineage in step with the record after a turn command moved it.
fn follow_lineage(h: &Handoff, next: &mut Handoff, dirty: &mut Dirty, now: EpochMs) {
    let last = next.lineage.len() - 1;
    if next.record.turn > h.record.turn {
        next.lineage.push(TurnEntry {
            turn: next.record.turn,
            status: next.record.status,
            runtime: None,
            permission_mode: None,
            placement: next.record.placement.clone(),
            package_version: None,
            package_hash: None,
            continued_from: next.record.continued_from.clone(),
            opened_at: Timestamp::from_ms(now),
            ended_at: None,
            prompt: next.record.prompt.clone(),
            prompt_dropped: false,
            ..TurnEntry::outcome_unknown()
        });
        dirty.lineage_from = Some(last + 1);
        drop_old_prompt(next, dirty);
        return;
    }
    let entry = &mut next.lineage[last];
    entry.status = next.record.status;
    entry.runtime = next.record.briefed.runtime.clone();
    entry.permission_mode = next.record.permission_mode.clone();
    entry.sync_mode = next.record.sync_mode;
    entry.summary = next.record.summary.clone();
    entry.reply = next.record.reply.clone();
    if let Some(asked) = &next.record.question {
        keep_question(entry, asked);
    }
    entry.steers.clone_from(&next.record.steers);
    if next.record.status.has_ended() && entry.ended_at.is_none() {
        entry.ended_at = Some(Timestamp::from_ms(now));
    }
    dirty.lineage_from = Some(last);
}

/// Drops the prompt of the turn that has just left the newest [`PROMPT_TURNS_KEPT_MAX`], so
/// that a hand-off keeps at most that many turns' words in its lineage, whatever its turns.
fn drop_old_prompt(next: &mut Handoff, dirty: &mut Dirty) {
    let Some(old) = next.record.turn.checked_sub(PROMPT_TURNS_KEPT_MAX) else {
        return;
    };
    let Some(at) = next.lineage.iter().position(|e| e.turn == old) else {
        return;
    };
    let entry = &mut next.lineage[at];
    let prompt = entry.prompt.take().is_some();
    let steered = !std::mem::take(&mut entry.steers).is_empty();
    let reply = entry.reply.take().is_some();
    let questions = std::mem::take(&mut entry.questions).len() as u64;
    entry.prompt_dropped |= prompt || steered;
    entry.reply_dropped |= reply;
    entry.questions_dropped += questions;
    if prompt || steered || reply || questions > 0 {
        dirty.lineage_dropped = Some(at);
    }
}

/// Keeps the record's question on its turn's entry: asked, or answered since (the same id);
/// past [`QUESTIONS_PER_TURN_KEPT_MAX`] the oldest goes and is counted.
fn keep_question(entry: &mut TurnEntry, asked: &crate::question::Question) {
    if let Some(kept) = entry.questions.iter_mut().find(|q| q.id == asked.id) {
        *kept = asked.clone();
        return;
    }
    entry.questions.push(asked.clone());
    if entry.questions.len() > QUESTIONS_PER_TURN_KEPT_MAX {
        entry.questions.remove(0);
        entry.questions_dropped += 1;
    }
}

/// Compiles the package that briefs the turn just opened, in the same change; refused when
/// the machine reported the runtime absent or signed out.
fn hand_off(next: &mut Handoff, dirty: &mut Dirty, request: &PackageRequest, now: EpochMs) -> Result<(), Refusal> {
    runtimes::check_handoff(next.record.machine_runtimes.as_ref(), &request.runtime, now)?;
    let last = next.lineage.len() - 1;
    next.lineage[last].runtime = Some(request.runtime.clone());
    next.record.briefed.runtime = Some(request.runtime.clone());
    let sources = Sources { record: &next.record, work: &next.work, lineage: &next.lineage };
    let applied = next.ledger.compile(&sources, request, false, now)?;
    let Compiled { package_version, package_hash, .. } = applied.effect;
    next.ledger = applied.next;
    dirty.ledger = dirty.ledger || applied.moved;
    next.record.briefed.package_version = Some(package_version);
    next.record.briefed.package_hash = Some(package_hash.clone());
    next.lineage[last].package_version = Some(package_version);
    next.lineage[last].package_hash = Some(package_hash);
    Ok(())
}

/// Raises each suggestion this report calls for that this turn has not had; true if any.
fn raise_suggestions(
    next: &mut Handoff,
    dirty: &mut Dirty,
    policy: &Policy,
    usage: &Usage,
    ends_turn: bool,
    now: EpochMs,
) -> bool {
    let turn = next.record.turn;
    let mut raised_any = false;
    for reason in suggestion::reasons(policy, usage, ends_turn) {
        if next.extras.raised.iter().any(|(t, raised)| *t == turn && *raised == reason) {
            continue;
        }
        let r = &next.record;
        let at = suggestion::Context {
            id: &r.id,
            turn,
            current_runtime: r.briefed.runtime.as_deref(),
            machine: r.machine_runtimes.as_ref(),
            now,
        };
        if let Some(s) = suggestion::suggest(&at, reason.clone(), policy) {
            next.record.suggestion = Some(s);
            next.extras.raised.push((turn, reason));
            dirty.extras = true;
            raised_any = true;
        }
    }
    raised_any
}

/// What a turn refusal says, naming the current turn so the client can catch up.
pub fn refusal_message(code: Code, r: &Record) -> String {
    let now = format!("turn {} is current ({}, version {})", r.turn, r.status.as_str(), r.version);
    match code {
        Code::HandoffStale => format!("the report is for an older turn: {now}"),
        Code::TurnOutOfOrder => format!("that turn has not been opened: {now}"),
        Code::TurnFinished => format!("that turn has ended: {now}"),
        Code::TurnRunning => format!("a turn is still going; steer it or cancel it first: {now}"),
        Code::TurnConflict => format!("the request names another turn than the current one: {now}"),
        Code::HandoffClosed => format!("the hand-off is closed (version {})", r.version),
        Code::SteerTooMany => format!(
            "turn {} has taken {} steers, the most one turn takes; cancel it and open the next: {now}",
            r.turn,
            crate::limits::STEERS_PER_TURN_MAX
        ),
        Code::QuestionNone => format!("no question is open: {now}"),
        Code::QuestionStale => match &r.question {
            Some(q) => format!("the answer names another question than the open one, {}: {now}", q.id),
            None => format!("no question is open: {now}"),
        },
        Code::QuestionAnswered => match r.question.as_ref().and_then(|q| q.answer.as_ref()) {
            Some(a) => format!("the question was answered {:?} already: {now}", a.option),
            None => format!("the question was answered already: {now}"),
        },
        // The one request.invalid the turn machine gives: an answer's option it does not offer.
        Code::RequestInvalid => match &r.question {
            Some(q) => format!(
                "option: not one of {}'s options ({})",
                q.id,
                q.options.iter().map(|o| o.id.as_str()).collect::<Vec<_>>().join(", ")
            ),
            None => "option: not one of the question's options".to_string(),
        },
        _ => now,
    }
}

#[cfg(test)]
mod tests;
