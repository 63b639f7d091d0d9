//! The hooks' side of the turn's timeline: in a session nobody serves (a person at the
//! terminal), each tool call the harness makes becomes `tool` events, `started` then `done` or
//! `failed`, in `metadata` mode: the tool's name, its state and how long it ran; never its
//! input, its output or any text.
//!
//! One writer numbers a turn's events. Each hook is its own process, so the [`Counter`] of
//! the hand-off lives in the state folder (`STATE/timeline/ID.json`) and is read, moved and
//! written back under `STATE/timeline/ID.lock`, with the event appended to the spool inside the
//! same lock: the spool then holds a turn's events in `seq` order, and delivers them in it.
//! In a served turn the hooks send no events: serve is that turn's one writer.

use crate::client::{Event, EventKind, ToolState};
use handoff_core::limits::TIMELINE_NAME_BYTES_MAX;
use handoff_core::text::clip;
use serde::{Deserialize, Serialize};

/// The tool calls whose start a counter keeps, for their duration; past it the oldest is
/// forgotten (its `done` then carries no duration).
pub const OPEN_TOOLS_MAX: usize = 64;

/// A step of a tool call as a hook document says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The harness's id of the call (`tool_use_id`), shared by its start and its end.
    pub id: String,
    pub name: String,
    pub state: ToolState,
}

impl Step {
    /// A step from a harness's raw id and name: each made one line, at most
    /// [`TIMELINE_NAME_BYTES_MAX`] bytes; no name is "a tool", no id the name.
    pub fn new(id: Option<&str>, name: Option<&str>, state: ToolState) -> Step {
        let name = one_line(name.unwrap_or("")).unwrap_or_else(|| "a tool".to_string());
        let id = one_line(id.unwrap_or("")).unwrap_or_else(|| name.clone());
        Step { id, name, state }
    }
}

/// `text` on one line: whitespace runs as one space, every other control shown as `\u{…}`,
/// cut on a character to the service's limit; `None` when blank.
fn one_line(text: &str) -> Option<String> {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = crate::output::escape(&line, false);
    (!line.is_empty()).then(|| clip(&line, TIMELINE_NAME_BYTES_MAX).to_string())
}

/// A hand-off's event counter on this machine: the turn it numbers, the `seq` its next event
/// takes, and when each open tool call started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub turn: u64,
    /// The `seq` of the next event (0 in a counter never used: the turn starts at 1).
    pub next: u64,
    /// Open tool calls, oldest first: their id and start (ms since the epoch).
    #[serde(default)]
    pub open: Vec<(String, i64)>,
}

impl Counter {
    /// Numbers `step` of `turn` at `now_ms`: a new turn starts at `seq` 1 and forgets the
    /// calls open in the one before; a call's end carries how long it ran since its start.
    /// Answers the event, in `metadata` mode.
    pub fn take(&mut self, turn: u64, step: &Step, now_ms: i64) -> Event {
        if turn != self.turn || self.next == 0 {
            *self = Counter { turn, next: 1, open: Vec::new() };
        }
        let duration_ms = match step.state {
            ToolState::Started => {
                self.open.retain(|(id, _)| *id != step.id);
                if self.open.len() >= OPEN_TOOLS_MAX {
                    self.open.remove(0);
                }
                self.open.push((step.id.clone(), now_ms));
                None
            }
            // A hook's step is a tool's: a steer's states never reach here.
            ToolState::Done | ToolState::Failed | ToolState::Delivered | ToolState::Undelivered => {
                let at = self.open.iter().position(|(id, _)| *id == step.id);
                at.map(|i| self.open.remove(i).1).map(|started| (now_ms - started).max(0) as u64)
            }
        };
        let seq = self.next;
        self.next += 1;
        metadata_event(seq, step, duration_ms)
    }
}

/// A tool step as `metadata` mode sends it: its name, state and duration, and nothing of what
/// it was given or gave back.
pub fn metadata_event(seq: u64, step: &Step, duration_ms: Option<u64>) -> Event {
    Event {
        id: Some(step.id.clone()),
        name: Some(step.name.clone()),
        state: Some(step.state),
        duration_ms,
        ..Event::of(seq, EventKind::Tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Batch;
    use handoff_core::json::Checked;

    fn step(id: &str, state: ToolState) -> Step {
        Step::new(Some(id), Some("Bash"), state)
    }

    #[test]
    fn a_turns_events_are_numbered_from_1_consecutively_and_a_new_turn_starts_again_at_1() {
        let mut c = Counter::default();
        let seqs: Vec<u64> = [("a", ToolState::Started), ("a", ToolState::Done), ("b", ToolState::Started)]
            .iter()
            .enumerate()
            .map(|(i, (id, state))| c.take(3, &step(id, *state), i as i64).seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(c.take(4, &step("c", ToolState::Started), 10).seq, 1, "turn 4 starts again");
        assert_eq!(c.open, [("c".to_string(), 10)], "turn 3's open call is forgotten");
        assert_eq!(c.take(4, &step("c", ToolState::Done), 11).seq, 2);
    }

    #[test]
    fn a_calls_end_carries_how_long_it_ran_and_only_its_end() {
        let mut c = Counter::default();
        assert_eq!(c.take(1, &step("a", ToolState::Started), 1_000).duration_ms, None);
        c.take(1, &step("b", ToolState::Started), 1_500);
        assert_eq!(c.take(1, &step("a", ToolState::Failed), 1_250).duration_ms, Some(250));
        assert_eq!(c.take(1, &step("b", ToolState::Done), 2_000).duration_ms, Some(500));
        assert_eq!(c.take(1, &step("z", ToolState::Done), 2_000).duration_ms, None, "an end never started");
        assert!(c.open.is_empty());
    }

    #[test]
    fn the_open_calls_kept_are_bounded_and_the_oldest_forgotten() {
        let mut c = Counter::default();
        for i in 0..OPEN_TOOLS_MAX + 5 {
            c.take(1, &step(&format!("t{i}"), ToolState::Started), i as i64);
        }
        assert_eq!(c.open.len(), OPEN_TOOLS_MAX);
        assert_eq!(c.open[0].0, "t5");
    }

    #[test]
    fn a_metadata_event_has_the_name_state_and_duration_and_no_text_input_or_output() {
        let long = "x".repeat(TIMELINE_NAME_BYTES_MAX * 2);
        let s = Step::new(Some("toolu_1\n\u{1b}[2J"), Some(&format!("mcp__db__query {long}")), ToolState::Done);
        assert!(!s.id.chars().any(char::is_control) && s.id.contains("toolu_1"), "{:?}", s.id);
        assert!(s.name.len() <= TIMELINE_NAME_BYTES_MAX, "{}", s.name.len());
        let e = metadata_event(7, &s, Some(12));
        assert_eq!((e.seq, e.kind, e.state, e.duration_ms), (7, EventKind::Tool, Some(ToolState::Done), Some(12)));
        assert_eq!((e.text, e.input, e.output, e.output_bytes), (None, None, None, None));
        let none = Step::new(None, Some("  "), ToolState::Started);
        assert_eq!((none.id.as_str(), none.name.as_str()), ("a tool", "a tool"));
        // The service takes every event the hooks shape, whatever the harness sent.
        let batch = Batch { turn: 1, events: vec![metadata_event(1, &s, None), metadata_event(2, &none, Some(0))] };
        assert!(batch.checked().is_ok());
    }
}
