//! What a Codex `notify` call reports. Codex runs its configured `notify` program with one
//! JSON argument after each turn: `type` (`agent-turn-complete`, the only type), `thread-id`,
//! `turn-id`, `cwd`, `input-messages` and `last-assistant-message` (which may be null).
//! A completed turn is `done`, with the last assistant message as the summary. An interactive
//! Codex (0.169.0) also runs a side thread that names the task and fires `notify` for it too,
//! with the same `cwd` and client: its first input message is Codex's title request
//! ([`CODEX_TITLE_REQUEST`]), and it reports nothing, or it would end the turn with a title.
//!
//! Codex's hooks (`[hooks]` in `config.toml`, or `hooks.json`, read by `codex-rs/hooks`) run
//! `handoff hook codex` with no argument and one JSON document on standard input; its
//! `PermissionRequest` (`hook_event_name`, `tool_name` `Bash` or `NetworkAccess`,
//! `tool_input.command` and `.description`: `codex-rs/hooks/schema/generated/
//! permission-request.command.input.schema.json`) asks the owner, as Claude Code's does.
//! Its `PreToolUse` and `PostToolUse` (`tool_name`, `tool_use_id`; 0.169.0 runs them for its
//! shell commands) are the call's steps on the turn's timeline ([`step`]).

use super::event::{self, clip_summary, Intent};
use super::timeline::Step;
use crate::client::ToolState;
use handoff_core::turn::ReportStatus;
use serde_json::Value;

/// A Codex `PermissionRequest` document's question text: its `tool_name` and a line of its
/// `tool_input`; `None` for any other document.
pub fn permission_text(doc: &Value) -> Option<String> {
    (doc["hook_event_name"].as_str() == Some("PermissionRequest"))
        .then(|| event::permission_text(doc["tool_name"].as_str().unwrap_or(""), &doc["tool_input"]))
}

/// A tool call's step from a Codex hook document: `PreToolUse` started, `PostToolUse` done,
/// or failed when its `tool_response` says the command exited with another code than 0;
/// `None` for any other document. Codex 0.169.0's `tool_response` for a command is its output
/// text alone, and it has no hook for a failed call, so its commands end `done` whatever their
/// exit code.
pub fn step(doc: &Value) -> Option<Step> {
    let state = match doc["hook_event_name"].as_str()? {
        "PreToolUse" => ToolState::Started,
        "PostToolUse" if exit_code(&doc["tool_response"]).is_some_and(|code| code != 0) => ToolState::Failed,
        "PostToolUse" => ToolState::Done,
        _ => return None,
    };
    Some(Step::new(doc["tool_use_id"].as_str(), doc["tool_name"].as_str(), state))
}

/// A shell command's exit code in a `PostToolUse`'s `tool_response`, where it says one.
fn exit_code(response: &Value) -> Option<i64> {
    response["exit_code"].as_i64().or(response["exitCode"].as_i64())
}

/// How Codex's side thread that names the task starts its only input message (read off the
/// `notify` documents of Codex 0.169.0; the interactive tests fail if it changes).
pub const CODEX_TITLE_REQUEST: &str = "Generate a concise, single-line task title";

pub fn intent(doc: &Value) -> Intent {
    let first_input = doc["input-messages"][0].as_str().unwrap_or("");
    match doc["type"].as_str() {
        Some("agent-turn-complete") if first_input.starts_with(CODEX_TITLE_REQUEST) => {
            Intent::Nothing("the turn of Codex's thread that names the task is not the session's".into())
        }
        Some("agent-turn-complete") => {
            let summary = doc["last-assistant-message"].as_str().map(clip_summary);
            Intent::Report { status: ReportStatus::Done, summary, usage: None, refresh: true }
        }
        other => Intent::Nothing(format!("a {other:?} notification reports nothing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_permission_request_asks_with_the_tool_and_its_command() {
        let doc = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "cargo publish", "description": "publish"}, "turn_id": "t1"});
        assert_eq!(permission_text(&doc).as_deref(), Some("Bash: cargo publish"));
        assert_eq!(permission_text(&json!({"type": "agent-turn-complete"})), None);
    }

    #[test]
    fn a_commands_start_and_end_are_its_steps_failed_when_it_exits_with_another_code() {
        let pre = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "call_1", "tool_input": {"command": "ls"}});
        assert_eq!(step(&pre), Some(Step { id: "call_1".into(), name: "Bash".into(), state: ToolState::Started }));
        let mut post = pre.clone();
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] = json!({"exit_code": 0});
        assert_eq!(step(&post).map(|s| s.state), Some(ToolState::Done));
        post["tool_response"] = json!({"exit_code": 2});
        assert_eq!(step(&post).map(|s| s.state), Some(ToolState::Failed));
        post["tool_response"] = json!("a secret");
        assert_eq!(step(&post).map(|s| s.state), Some(ToolState::Done), "0.169.0's output text says no code: done");
        assert_eq!(step(&json!({"hook_event_name": "PermissionRequest"})), None);
        assert_eq!(step(&json!({"type": "agent-turn-complete"})), None);
    }

    #[test]
    fn a_completed_turn_is_done_with_the_last_assistant_message() {
        let doc = json!({"type": "agent-turn-complete", "thread-id": "t", "turn-id": "1", "cwd": "/w", "input-messages": ["go"], "last-assistant-message": "Renamed foo to bar."});
        match intent(&doc) {
            Intent::Report { status, summary, usage, refresh } => {
                assert_eq!(
                    (status, summary.as_deref(), usage, refresh),
                    (ReportStatus::Done, Some("Renamed foo to bar."), None, true)
                );
            }
            other => panic!("{other:?}"),
        }
        let silent = json!({"type": "agent-turn-complete", "last-assistant-message": null});
        assert!(matches!(intent(&silent), Intent::Report { summary: None, .. }));
        assert!(matches!(intent(&json!({"type": "approval-requested"})), Intent::Nothing(_)));
        let title = json!({"type": "agent-turn-complete", "input-messages": [format!("{CODEX_TITLE_REQUEST} of at most 36 characters.\n\nUser prompt:\nsay hi")], "last-assistant-message": "Say hi"});
        assert!(matches!(intent(&title), Intent::Nothing(_)), "the title thread's turn is not the session's");
    }
}
