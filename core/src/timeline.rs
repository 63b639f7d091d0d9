//! The turn's timeline: what the machine says happened in a turn (the model's words, each
//! tool call, its own notes), kept apart from the record. Events never move the version and
//! never wake a wait on it: the version counts changes of the turn machine, `seq` counts one
//! turn's events.
//!
//! Rules, decided by [`take`] without the runtime:
//! - one writer numbers a turn's events: `seq` from 1, consecutive, per turn;
//! - a batch is taken whole or not at all;
//! - a `seq` already taken, repeated with the same content, changes nothing; with other
//!   content it is 409 `timeline.conflict`; a batch that starts past the next `seq` is 409
//!   `timeline.gap`, naming the next one expected;
//! - events are taken for any turn whose timeline is still kept (the newest
//!   [`TIMELINE_TURNS_KEPT_MAX`]), also after it ended or the hand-off closed; an older turn's
//!   events are dropped, its count kept, and a batch for it is 409 `timeline.dropped`;
//! - a turn holds at most [`TIMELINE_EVENTS_PER_TURN_MAX`] events and
//!   [`TIMELINE_BYTES_PER_TURN_MAX`] bytes; a batch past either is 409 `timeline.full`;
//! - a `steer` event says what became of one of the turn's steers: it names a steer the turn
//!   took ([`unknown_steer`]), else the batch is 400 `request.invalid`.

use crate::error::{Code, Refusal};
use crate::json::Checked;
use crate::limits::{
    QUESTION_INPUT_BYTES_MAX, TIMELINE_BYTES_PER_TURN_MAX, TIMELINE_EVENTS_PER_REQUEST_MAX,
    TIMELINE_EVENTS_PER_TURN_MAX, TIMELINE_MESSAGE_BYTES_MAX, TIMELINE_NAME_BYTES_MAX, TIMELINE_OUTPUT_BYTES_MAX,
    TIMELINE_TURNS_KEPT_MAX, TIMELINE_WHY_BYTES_MAX,
};
use crate::text::{lines_only, multi_line, single_line};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What the machine lets leave it (`handoff serve --sync`), named by its running report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// Tool names, states, durations and counts: no text, no input, no output, no reply.
    Metadata,
    /// Adds the model's words, each tool's input and the whole reply.
    Messages,
    /// Adds tool outputs, clipped.
    Full,
}

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The model's words (`text`).
    Message,
    /// A tool call's step (`id`, `name`, `state`; `input` and `output` by the sync mode).
    Tool,
    /// What the machine itself says (`text`): a resumed session, a stop and why.
    Note,
    /// What became of one of the turn's steers (`id`, `state` `delivered` or `undelivered`,
    /// and `why` when undelivered). Like every event it moves no version, and it is no
    /// `running` report: an open question stays open.
    Steer,
}

/// Where a tool call stands (`started`, `done`, `failed`), or what became of a steer
/// (`delivered`, `undelivered`): one field, `state`, whose values each kind takes are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Started,
    Done,
    Failed,
    /// The harness took the steer's words.
    Delivered,
    /// No harness took them: `why` says.
    Undelivered,
}

/// The name the tools' code knows the state by.
pub type ToolState = State;

impl State {
    fn of_tool(self) -> bool {
        matches!(self, State::Started | State::Done | State::Failed)
    }
}

/// One event of a turn, as the machine sends it and the timeline keeps it. One flat object
/// whose `kind` says which fields it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub seq: u64,
    pub kind: Kind,
    /// A message's or a note's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A tool call's id (its `started` and its `done` or `failed` share it), or a steer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A tool's name (`Bash`, `Edit`, `exec_command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// A tool's input as a person reads it, in the form a question's `input` takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// A tool's output, clipped to [`TIMELINE_OUTPUT_BYTES_MAX`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The output's whole size before it was clipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// How long the tool ran, on its `done` or `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Why an undelivered steer never reached the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// When the service took it: set by the service, never sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
}

impl Event {
    /// An event of `kind` carrying nothing yet: each kind's fields are set on it.
    pub fn of(seq: u64, kind: Kind) -> Event {
        Event {
            seq,
            kind,
            text: None,
            id: None,
            name: None,
            state: None,
            input: None,
            output: None,
            output_bytes: None,
            duration_ms: None,
            why: None,
            at: None,
        }
    }

    /// What became of steer `id`: delivered, or undelivered saying why (clipped to
    /// [`TIMELINE_WHY_BYTES_MAX`]).
    pub fn steer(seq: u64, id: &str, delivered: Result<(), &str>) -> Event {
        let (state, why) = match delivered {
            Ok(()) => (State::Delivered, None),
            Err(why) => (State::Undelivered, Some(crate::text::clip(why, TIMELINE_WHY_BYTES_MAX).to_string())),
        };
        Event { id: Some(id.to_string()), state: Some(state), why, ..Event::of(seq, Kind::Steer) }
    }

    /// The event as the timeline stores it (without `at`, kept beside it): what a repeat is
    /// compared with, and what counts against the turn's bytes.
    pub fn stored_json(&self) -> String {
        let bare = Event { at: None, ..self.clone() };
        serde_json::to_string(&bare).expect("an event is plain data: it always serialises")
    }

    fn check(&self, at: usize) -> Result<(), Refusal> {
        let field = |name: &str| format!("events[{at}].{name}");
        let absent = |name: &str, present: bool| {
            if present {
                Err(Refusal::invalid(format!("{}: not a field of a {} event", field(name), kind_name(self.kind))))
            } else {
                Ok(())
            }
        };
        if self.seq == 0 {
            return Err(Refusal::invalid(format!("{}: from 1", field("seq"))));
        }
        absent("at", self.at.is_some())?;
        if self.kind != Kind::Steer {
            absent("why", self.why.is_some())?;
        }
        match self.kind {
            Kind::Steer => self.check_steer(at),
            Kind::Message | Kind::Note => {
                let Some(text) = &self.text else {
                    return Err(Refusal::invalid(format!("{}: required", field("text"))));
                };
                multi_line(&field("text"), text, TIMELINE_MESSAGE_BYTES_MAX)?;
                absent("id", self.id.is_some())?;
                absent("name", self.name.is_some())?;
                absent("state", self.state.is_some())?;
                absent("input", self.input.is_some())?;
                absent("output", self.output.is_some())?;
                absent("output_bytes", self.output_bytes.is_some())?;
                absent("duration_ms", self.duration_ms.is_some())
            }
            Kind::Tool => {
                absent("text", self.text.is_some())?;
                let id = self.id.as_deref().unwrap_or_default();
                single_line(&field("id"), id, TIMELINE_NAME_BYTES_MAX)?;
                let name = self.name.as_deref().unwrap_or_default();
                single_line(&field("name"), name, TIMELINE_NAME_BYTES_MAX)?;
                if !self.state.is_some_and(State::of_tool) {
                    return Err(Refusal::invalid(format!("{}: required (started, done or failed)", field("state"))));
                }
                if let Some(input) = &self.input {
                    within(&field("input"), input, QUESTION_INPUT_BYTES_MAX)?;
                }
                if let Some(output) = &self.output {
                    within(&field("output"), output, TIMELINE_OUTPUT_BYTES_MAX)?;
                    if self.output_bytes.is_some_and(|whole| whole < output.len() as u64) {
                        return Err(Refusal::invalid(format!(
                            "{}: the whole output's size, at least the output's",
                            field("output_bytes")
                        )));
                    }
                }
                Ok(())
            }
        }
    }
}

impl Event {
    /// A steer event: the steer's `id`, `state` `delivered` (no `why`) or `undelivered` (with
    /// `why`, one to [`TIMELINE_WHY_BYTES_MAX`] bytes), nothing else.
    fn check_steer(&self, at: usize) -> Result<(), Refusal> {
        let field = |name: &str| format!("events[{at}].{name}");
        let id = self.id.as_deref().unwrap_or_default();
        single_line(&field("id"), id, TIMELINE_NAME_BYTES_MAX)?;
        match (self.state, &self.why) {
            (Some(State::Delivered), None) => {}
            (Some(State::Delivered), Some(_)) => {
                return Err(Refusal::invalid(format!("{}: only an undelivered steer says why", field("why"))));
            }
            (Some(State::Undelivered), Some(why)) => multi_line(&field("why"), why, TIMELINE_WHY_BYTES_MAX)?,
            (Some(State::Undelivered), None) => {
                return Err(Refusal::invalid(format!("{}: required for an undelivered steer", field("why"))));
            }
            _ => return Err(Refusal::invalid(format!("{}: required (delivered or undelivered)", field("state")))),
        }
        let others = [
            ("text", self.text.is_some()),
            ("name", self.name.is_some()),
            ("input", self.input.is_some()),
            ("output", self.output.is_some()),
            ("output_bytes", self.output_bytes.is_some()),
            ("duration_ms", self.duration_ms.is_some()),
        ];
        match others.iter().find(|(_, present)| *present) {
            Some((name, _)) => Err(Refusal::invalid(format!("{}: not a field of a steer event", field(name)))),
            None => Ok(()),
        }
    }
}

/// The first steer event of `batch` naming a steer its turn did not take (`taken` says which
/// ids it took): a machine reports only steers the record gave it, so this is 400
/// `request.invalid`, naming the event.
pub fn unknown_steer(batch: &Batch, taken: impl Fn(&str) -> bool) -> Result<(), Refusal> {
    for (at, event) in batch.events.iter().enumerate() {
        let id = event.id.as_deref().unwrap_or_default();
        if event.kind == Kind::Steer && !taken(id) {
            let turn = batch.turn;
            return Err(Refusal::invalid(format!("events[{at}].id: turn {turn} took no steer {id}")));
        }
    }
    Ok(())
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Message => "message",
        Kind::Tool => "tool",
        Kind::Note => "note",
        Kind::Steer => "steer",
    }
}

/// A text that may be empty, spans lines and is at most `max_bytes`.
fn within(field: &str, value: &str, max_bytes: usize) -> Result<(), Refusal> {
    if value.len() > max_bytes {
        return Err(Refusal::invalid(format!("{field}: longer than {max_bytes} bytes")));
    }
    lines_only(field, value)
}

/// `POST …/events`: a batch of one turn's events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    pub turn: u64,
    pub events: Vec<Event>,
}

impl Checked for Batch {
    /// 1 to [`TIMELINE_EVENTS_PER_REQUEST_MAX`] events, each of its kind's shape, their `seq`s
    /// consecutive and rising.
    fn checked(self) -> Result<Batch, Refusal> {
        if self.turn == 0 {
            return Err(Refusal::invalid("turn: from 1"));
        }
        let n = self.events.len();
        if n == 0 || n > TIMELINE_EVENTS_PER_REQUEST_MAX {
            return Err(Refusal::invalid(format!("events: 1 to {TIMELINE_EVENTS_PER_REQUEST_MAX} events")));
        }
        for (at, event) in self.events.iter().enumerate() {
            event.check(at)?;
            if at > 0 && self.events[at - 1].seq.checked_add(1) != Some(event.seq) {
                return Err(Refusal::invalid(format!("events[{at}].seq: a batch's seqs are consecutive")));
            }
        }
        Ok(self)
    }
}

/// What storage holds of one turn's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnFacts {
    /// Events taken (the newest `seq`).
    pub events: u64,
    /// Their stored bytes.
    pub bytes: u64,
    /// The events were dropped (the turn left the newest kept); the count stays.
    pub dropped: bool,
}

impl TurnFacts {
    /// The `seq` the next event takes.
    pub fn next(&self) -> u64 {
        self.events + 1
    }
}

/// Whether `turn`'s timeline is kept while `current` is the hand-off's turn.
pub fn kept(turn: u64, current: u64) -> bool {
    turn <= current && turn + TIMELINE_TURNS_KEPT_MAX > current
}

/// The turns whose events go when `current` opens: every one up to this, if any.
pub fn dropped_through(current: u64) -> Option<u64> {
    current.checked_sub(TIMELINE_TURNS_KEPT_MAX).filter(|t| *t > 0)
}

/// A batch taken: the new events to store, `(seq, json)`, and the turn's facts after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub new: Vec<(u64, String)>,
    pub facts: TurnFacts,
}

impl Taken {
    pub fn next(&self) -> u64 {
        self.facts.next()
    }
}

/// A refusal of a batch, with the turn's next `seq` for the machine to go on from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub refusal: Refusal,
    pub next: Option<u64>,
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Refused {
        Refused { refusal, next: None }
    }
}

/// Decides a batch for a hand-off at turn `current`, given what storage holds of the batch's
/// turn (`facts`) and the stored events the batch repeats (`repeated`: `(seq, json)` of every
/// taken `seq` the batch names).
pub fn take(batch: &Batch, current: u64, facts: &TurnFacts, repeated: &[(u64, String)]) -> Result<Taken, Refused> {
    let turn = batch.turn;
    if turn > current {
        let message = format!("turn {turn} has not been opened: turn {current} is current");
        return Err(Refusal::new(Code::TurnOutOfOrder, message).into());
    }
    if !kept(turn, current) || facts.dropped {
        let message = format!(
            "turn {turn}'s events were dropped: the newest {TIMELINE_TURNS_KEPT_MAX} turns' are kept (turn {current} is current)"
        );
        return Err(Refused { refusal: Refusal::new(Code::TimelineDropped, message), next: Some(facts.next()) });
    }
    let next = facts.next();
    let first = batch.events.first().map_or(next, |e| e.seq);
    if first > next {
        let message = format!("turn {turn}'s next event is seq {next}; this batch starts at {first}");
        return Err(Refused { refusal: Refusal::new(Code::TimelineGap, message), next: Some(next) });
    }
    let mut new = Vec::new();
    let mut bytes = facts.bytes;
    for event in &batch.events {
        let json = event.stored_json();
        if event.seq < next {
            let same = repeated.iter().any(|(seq, stored)| *seq == event.seq && *stored == json);
            if !same {
                let message = format!("turn {turn}'s event {} was taken with other content", event.seq);
                return Err(Refused { refusal: Refusal::new(Code::TimelineConflict, message), next: Some(next) });
            }
            continue;
        }
        bytes += json.len() as u64;
        new.push((event.seq, json));
    }
    let events = facts.events + new.len() as u64;
    let over_count = events > TIMELINE_EVENTS_PER_TURN_MAX;
    let over_bytes = bytes > TIMELINE_BYTES_PER_TURN_MAX as u64;
    if over_count || over_bytes {
        let message = format!(
            "turn {turn}'s timeline is full: at most {TIMELINE_EVENTS_PER_TURN_MAX} events and {TIMELINE_BYTES_PER_TURN_MAX} bytes a turn (TIMELINE_EVENTS_PER_TURN_MAX, TIMELINE_BYTES_PER_TURN_MAX)"
        );
        return Err(Refused { refusal: Refusal::new(Code::TimelineFull, message), next: Some(next) });
    }
    Ok(Taken { new, facts: TurnFacts { events, bytes, dropped: false } })
}

/// A stored event read back: its `json` and when it was taken.
pub fn read_back(json: &str, at: i64) -> Result<Event, String> {
    let mut event: Event = crate::json::from_slice(json.as_bytes()).map_err(|e| e.to_string())?;
    event.at = Some(Timestamp::from_ms(at));
    Ok(event)
}

#[cfg(test)]
mod tests;
