//! What a served turn's harness says becomes events of the turn's timeline, one pure function
//! per harness: [`Shaper::claude_code`] reads a line of Claude Code's stream-json,
//! [`Shaper::codex`] an item notification of Codex's app-server. The sync mode decides what
//! leaves the machine:
//! - `metadata`: tool calls only, with their names, states and durations: no text, no input,
//!   no output (and no note: a note is text too);
//! - `messages`: adds the model's words, each tool's input (in the form a question's `input`
//!   takes: a command whole, a write's path and content, an edit's diff, anything else as
//!   pretty JSON) and the machine's own notes;
//! - `full`: adds each tool's output, clipped to [`TIMELINE_OUTPUT_BYTES_MAX`] with its size.
//!
//! Events come out unnumbered (`seq` 0): the turn's one sender numbers them
//! ([`super::batch`]).

use crate::hook::event::{permission_input, sendable};
use handoff_core::limits::{
    QUESTION_INPUT_BYTES_MAX, REPLY_BYTES_MAX, TIMELINE_MESSAGE_BYTES_MAX, TIMELINE_NAME_BYTES_MAX,
    TIMELINE_OUTPUT_BYTES_MAX,
};
use handoff_core::text::clip;
use handoff_core::timeline::{Event, Kind, SyncMode, ToolState};
use serde_json::Value;
use std::collections::HashMap;

/// Codex's names for its tools, as the timeline shows them.
pub const CODEX_COMMAND_TOOL: &str = "exec_command";
pub const CODEX_PATCH_TOOL: &str = "apply_patch";

/// A tool call seen started and not yet ended: its name and when it started.
#[derive(Debug, Clone)]
struct Open {
    name: String,
    at_ms: i64,
}

/// Shapes one turn's harness output into timeline events, remembering the tool calls open.
#[derive(Debug, Clone)]
pub struct Shaper {
    mode: SyncMode,
    open: HashMap<String, Open>,
}

impl Shaper {
    pub fn new(mode: SyncMode) -> Shaper {
        Shaper { mode, open: HashMap::new() }
    }

    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// One line of Claude Code's stream-json at `now_ms`: an assistant message's text blocks
    /// (each a `message`) and tool uses (each a `tool` started); a user message's tool results
    /// (each a `tool` done or failed). Anything else (the init, the result) is no event.
    pub fn claude_code(&mut self, line: &Value, now_ms: i64) -> Vec<Event> {
        let blocks = line["message"]["content"].as_array().map(Vec::as_slice).unwrap_or_default();
        let mut events = Vec::new();
        match line["type"].as_str() {
            Some("assistant") => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => events.extend(self.message(block["text"].as_str().unwrap_or_default())),
                        Some("tool_use") => {
                            let id = block["id"].as_str().unwrap_or_default();
                            let name = block["name"].as_str().unwrap_or_default();
                            events.push(self.started(id, name, permission_input(&block["input"]), now_ms));
                        }
                        _ => {}
                    }
                }
            }
            Some("user") => {
                for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    let output = result_text(&block["content"]);
                    events.push(self.ended(id, block["is_error"] == true, Some(output), None, now_ms));
                }
            }
            _ => {}
        }
        events
    }

    /// One `item/started` or `item/completed` notification of Codex's app-server at `now_ms`:
    /// an agent message completed is a `message`; a command execution, a file change and an
    /// MCP tool call are a `tool` started, then done or failed.
    pub fn codex(&mut self, method: &str, item: &Value, now_ms: i64) -> Vec<Event> {
        let completed = method == "item/completed";
        let id = item["id"].as_str().unwrap_or_default();
        let text = |k: &str| item[k].as_str().unwrap_or_default();
        let duration_ms = item["durationMs"].as_u64();
        let status = text("status");
        let failed = matches!(status, "failed" | "declined");
        let event = match (item["type"].as_str().unwrap_or_default(), completed) {
            ("agentMessage", true) => return self.message(text("text")).into_iter().collect(),
            ("commandExecution", false) => {
                self.started(id, CODEX_COMMAND_TOOL, Some(sendable(text("command"))), now_ms)
            }
            ("commandExecution", true) => {
                let failed = failed || item["exitCode"].as_i64().is_some_and(|c| c != 0);
                let output = item["aggregatedOutput"].as_str().map(str::to_string);
                self.ended(id, failed, output, duration_ms, now_ms)
            }
            ("fileChange", false) => self.started(id, CODEX_PATCH_TOOL, Some(changes_text(&item["changes"])), now_ms),
            ("fileChange", true) => self.ended(id, failed, None, duration_ms, now_ms),
            ("mcpToolCall", false) => {
                let name = format!("mcp__{}__{}", text("server"), text("tool"));
                self.started(id, &name, permission_input(&item["arguments"]), now_ms)
            }
            ("mcpToolCall", true) => {
                let output = match item["error"]["message"].as_str() {
                    Some(error) => error.to_string(),
                    None => result_text(&item["result"]["content"]),
                };
                let failed = failed || item["error"].is_object();
                self.ended(id, failed, Some(output), duration_ms, now_ms)
            }
            _ => return Vec::new(),
        };
        vec![event]
    }

    /// The model's words, unless the mode keeps them or there are none.
    fn message(&self, text: &str) -> Option<Event> {
        let text = sendable(text.trim());
        if self.mode == SyncMode::Metadata || text.trim().is_empty() {
            return None;
        }
        Some(Event { text: Some(clipped(&text, TIMELINE_MESSAGE_BYTES_MAX)), ..bare(Kind::Message) })
    }

    fn started(&mut self, id: &str, name: &str, input: Option<String>, now_ms: i64) -> Event {
        let (id, name) = (one_line(id), one_line(name));
        self.open.insert(id.clone(), Open { name: name.clone(), at_ms: now_ms });
        let input = input.filter(|_| self.mode != SyncMode::Metadata).map(|i| clipped(&i, QUESTION_INPUT_BYTES_MAX));
        Event { id: Some(id), name: Some(name), state: Some(ToolState::Started), input, ..bare(Kind::Tool) }
    }

    fn ended(
        &mut self,
        id: &str,
        failed: bool,
        output: Option<String>,
        duration_ms: Option<u64>,
        now_ms: i64,
    ) -> Event {
        let id = one_line(id);
        let open = self.open.remove(&id);
        let name = open.as_ref().map_or_else(|| "tool".to_string(), |o| o.name.clone());
        let duration_ms = duration_ms.or_else(|| open.map(|o| (now_ms - o.at_ms).max(0) as u64));
        let output = output.map(|o| sendable(&o)).filter(|o| self.mode == SyncMode::Full && !o.is_empty());
        let output_bytes = output.as_ref().map(|o| o.len() as u64);
        let output = output.map(|o| clipped(&o, TIMELINE_OUTPUT_BYTES_MAX));
        let state = if failed { ToolState::Failed } else { ToolState::Done };
        Event {
            id: Some(id),
            name: Some(name),
            state: Some(state),
            output,
            output_bytes,
            duration_ms,
            ..bare(Kind::Tool)
        }
    }
}

/// What the machine itself says (a resumed session, a stop and why), in every mode but
/// `metadata`.
pub fn note(mode: SyncMode, text: &str) -> Option<Event> {
    let text = sendable(text.trim());
    (mode != SyncMode::Metadata && !text.is_empty())
        .then(|| Event { text: Some(clipped(&text, TIMELINE_MESSAGE_BYTES_MAX)), ..bare(Kind::Note) })
}

/// A done report's `reply`: the model's final answer whole (up to [`REPLY_BYTES_MAX`]), in
/// `messages` and `full`; none in `metadata` or when there is no answer.
pub fn reply(mode: SyncMode, answer: &str) -> Option<String> {
    let text = sendable(answer.trim());
    (mode != SyncMode::Metadata && !text.is_empty()).then(|| clipped(&text, REPLY_BYTES_MAX))
}

fn bare(kind: Kind) -> Event {
    Event::of(0, kind)
}

/// `text` within `max` bytes, cut on a character and marked `…` when cut.
fn clipped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", clip(text, max - '…'.len_utf8()))
}

/// An id or a name as the timeline takes it: one line, no control characters, not empty.
fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line: String = line.chars().filter(|c| !c.is_control()).collect();
    let line = clipped(&line, TIMELINE_NAME_BYTES_MAX);
    if line.is_empty() {
        "tool".to_string()
    } else {
        line
    }
}

/// A tool result's content as text: a string as it is, blocks' texts joined.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A Codex file change's changes as a person reads them: each path with its diff.
fn changes_text(changes: &Value) -> String {
    let mut out = String::new();
    for change in changes.as_array().into_iter().flatten() {
        let path = change["path"].as_str().unwrap_or_default();
        let kind = change["kind"]["type"].as_str().unwrap_or("update");
        out.push_str(&format!("{kind} {path}\n{}", change["diff"].as_str().unwrap_or_default()));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    sendable(&out)
}

#[cfg(test)]
mod tests;
