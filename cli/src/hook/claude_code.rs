//! What each Claude Code hook event reports. Claude Code runs a hook command with one JSON
//! document on standard input: `hook_event_name` says which event, with `session_id`,
//! `transcript_path` and `cwd`, and each event's own fields.
//!
//! | event | reports |
//! |---|---|
//! | `SessionStart` | the runtimes this machine can run (`PUT …/runtimes`) |
//! | `UserPromptSubmit` | `running`, for the turn the service says is current; in a permission mode that never asks, saying so as its summary |
//! | `Notification` whose `notification_type` means the agent waits for the person | `needs-you`, with its `message` |
//! | `PostToolUse` after a `needs-you` (the person let the tool run) | `running` |
//! | `Stop` | `done`, with the last assistant message and the context used; on a usage limit, `failed` with `limit: provider-limit` |
//! | `StopFailure` (an API error ended the turn) | `failed`; with `limit: provider-limit` when the error is `rate_limit` |
//! | `PermissionRequest` (a permission dialog is about to be shown) | `needs-you` with a permission question (`tool_name`, a line of `tool_input`), then the owner's answer as the decision (see [`permission_text`]) |
//!
//! Anything else reports nothing.

use super::event::{self, clip_summary, Intent};
use super::transcript::{self, Tail};
use crate::ask::{Prompt, Unaskable};
use handoff_core::suggestion::{Limit, Usage};
use handoff_core::turn::ReportStatus;
use serde_json::Value;
use std::path::Path;

/// A `PermissionRequest` document's question text: its `tool_name` and a line of its
/// `tool_input` (Claude Code's hooks reference, "PermissionRequest input"); `None` for any
/// other event.
pub fn permission_text(doc: &Value) -> Option<String> {
    (doc["hook_event_name"].as_str() == Some("PermissionRequest"))
        .then(|| event::permission_text(doc["tool_name"].as_str().unwrap_or(""), &doc["tool_input"]))
}

/// The question of an `ExitPlanMode` request that carries no plan.
pub const EXIT_PLAN_TEXT: &str =
    "ExitPlanMode: Claude wants to leave plan mode and start on its plan (shown at the terminal)";

/// What a `PermissionRequest` asks the owner. `AskUserQuestion` (which Claude Code puts through
/// the permission dialog) with one single-choice question that fits the owner's form
/// ([`crate::ask::choice_fits`]) is that question; anything else it asks is [`Unaskable`], which
/// the caller leaves to the terminal, or denies with a note in a served turn. Any other tool is
/// a permission.
pub fn prompt(doc: &Value) -> Option<Result<Prompt, Unaskable>> {
    let text = permission_text(doc)?;
    // Claude Code 2.1.328 sends ExitPlanMode's request with an empty `tool_input`: its plan is
    // on the terminal, so the question says what is asked.
    if doc["tool_name"] == "ExitPlanMode" && doc["tool_input"]["plan"].as_str().is_none_or(|p| p.trim().is_empty()) {
        return Some(Ok(Prompt::Permission { text: EXIT_PLAN_TEXT.to_string(), input: None }));
    }
    if doc["tool_name"] != "AskUserQuestion" {
        return Some(Ok(Prompt::Permission { text, input: event::permission_input(&doc["tool_input"]) }));
    }
    let questions = doc["tool_input"]["questions"].as_array().cloned().unwrap_or_default();
    let [one] = questions.as_slice() else {
        return Some(Err(Unaskable::Several(questions.len())));
    };
    if one["multiSelect"] == true {
        return Some(Err(Unaskable::MultiSelect));
    }
    // The labels and the question exactly as Claude Code sent them: the answer names them back,
    // so a question that does not fit the service's limits is not asked, never cut.
    let labels: Vec<String> = one["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["label"].as_str())
        .map(str::to_string)
        .collect();
    let text = one["question"].as_str().unwrap_or("").to_string();
    if let Err(why) = crate::ask::choice_fits(&text, &labels) {
        return Some(Err(why));
    }
    Some(Ok(Prompt::Choice { text, labels, input: doc["tool_input"].clone() }))
}

/// `Notification` types that mean the agent is waiting for the person.
/// `elicitation_url_dialog` is an MCP server asking the person to open a link (sign-in).
pub const WAITING_NOTIFICATIONS: [&str; 4] =
    ["permission_prompt", "idle_prompt", "elicitation_dialog", "elicitation_url_dialog"];

/// Permission modes in which Claude Code asks the person nothing: `auto` decides by itself and
/// blocks what it judges risky (2.1.328's interactive default), `bypassPermissions` runs
/// everything, `dontAsk` denies what no rule allows.
pub const NEVER_ASKING_MODES: [&str; 3] = ["auto", "bypassPermissions", "dontAsk"];

/// The running report's summary for a prompt whose `permission_mode` never asks, so that the
/// owner knows no question will come; `None` in a mode that asks.
pub fn mode_note(doc: &Value) -> Option<String> {
    let mode = doc["permission_mode"].as_str().filter(|m| NEVER_ASKING_MODES.contains(m))?;
    Some(format!("Claude Code runs in permission mode {mode}, which asks nothing: no question will come"))
}

/// The `StopFailure` errors that are a provider's usage limit.
const LIMIT_ERRORS: [&str; 1] = ["rate_limit"];

/// What the hook document `doc` asks the hook to report. `read_tail` reads a transcript;
/// `window_setting` is `HANDOFF_CONTEXT_WINDOW`, when set.
pub fn intent(doc: &Value, read_tail: &dyn Fn(&Path) -> Option<Tail>, window_setting: Option<u64>) -> Intent {
    let event = doc["hook_event_name"].as_str().unwrap_or("");
    match event {
        "SessionStart" => Intent::Runtimes,
        "UserPromptSubmit" => {
            Intent::Report { status: ReportStatus::Running, summary: mode_note(doc), usage: None, refresh: true }
        }
        "Notification" => {
            let kind = doc["notification_type"].as_str().unwrap_or("");
            if WAITING_NOTIFICATIONS.contains(&kind) {
                let summary = doc["message"].as_str().map(clip_summary);
                Intent::Report { status: ReportStatus::NeedsYou, summary, usage: None, refresh: false }
            } else {
                Intent::Nothing(format!("a {kind:?} notification does not wait for the person"))
            }
        }
        "PostToolUse" => Intent::ResumeIfWaiting,
        "Stop" => stop(doc, read_tail, window_setting),
        "StopFailure" => {
            let error = doc["error"].as_str().or(doc["error_type"].as_str()).unwrap_or("unknown");
            let text = doc["last_assistant_message"].as_str().or(doc["error_details"].as_str()).unwrap_or(error);
            let limit = LIMIT_ERRORS.contains(&error).then_some(Limit::ProviderLimit);
            let usage = limit.map(|l| Usage { limit: Some(l), ..Usage::default() });
            Intent::Report { status: ReportStatus::Failed, summary: Some(clip_summary(text)), usage, refresh: false }
        }
        other => Intent::Nothing(format!("{other:?} reports nothing")),
    }
}

/// `Stop`: the turn is done, unless the transcript ends on a usage-limit error.
fn stop(doc: &Value, read_tail: &dyn Fn(&Path) -> Option<Tail>, window_setting: Option<u64>) -> Intent {
    let tail = doc["transcript_path"].as_str().and_then(|p| read_tail(Path::new(p))).unwrap_or_default();
    let mut usage = Usage::default();
    if let Some(used) = tail.context_used {
        usage.context_used = Some(used);
        usage.context_window = Some(transcript::context_window(tail.model.as_deref(), window_setting));
    }
    if let Some(error) = tail.api_error.as_deref().filter(|e| is_usage_limit(e)) {
        usage.limit = Some(Limit::ProviderLimit);
        return Intent::Report {
            status: ReportStatus::Failed,
            summary: Some(clip_summary(error)),
            usage: Some(usage),
            refresh: false,
        };
    }
    // The document's own copy of the last message when it has one (Claude Code 2.1.47 and
    // later): the transcript is written asynchronously and may not have it yet.
    let last = doc["last_assistant_message"].as_str().map(str::to_string).or(tail.last_text);
    let usage = (usage != Usage::default()).then_some(usage);
    Intent::Report { status: ReportStatus::Done, summary: last.as_deref().map(clip_summary), usage, refresh: false }
}

/// An API error's text that says a usage limit was hit ("You've hit your session limit").
fn is_usage_limit(text: &str) -> bool {
    let t = text.to_lowercase();
    t.contains("limit") && !t.contains("context")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_tail(_: &Path) -> Option<Tail> {
        None
    }

    fn report(i: Intent) -> (ReportStatus, Option<String>, Option<Usage>) {
        match i {
            Intent::Report { status, summary, usage, .. } => (status, summary, usage),
            other => panic!("not a report: {other:?}"),
        }
    }

    #[test]
    fn a_permission_request_asks_with_the_tool_and_a_line_of_its_input() {
        let doc = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "rm -rf node_modules\n  && npm ci", "description": "Reinstall"}});
        assert_eq!(permission_text(&doc).as_deref(), Some("Bash: rm -rf node_modules && npm ci"));
        let write = json!({"hook_event_name": "PermissionRequest", "tool_name": "Write", "tool_input": {"file_path": "/w/a.rs", "content": "fn main() {}"}});
        assert_eq!(permission_text(&write).as_deref(), Some("Write: /w/a.rs"));
        let other = json!({"hook_event_name": "PermissionRequest", "tool_name": "mcp__db__query", "tool_input": {"sql": "select 1"}});
        assert_eq!(permission_text(&other).as_deref(), Some(r#"mcp__db__query: {"sql":"select 1"}"#));
        let long = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "x".repeat(5_000)}});
        let text = permission_text(&long).unwrap();
        assert!(text.len() <= handoff_core::limits::QUESTION_TEXT_BYTES_MAX && text.ends_with('…'), "{}", text.len());
        assert_eq!(permission_text(&json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"})), None);
    }

    #[test]
    fn ask_user_question_with_one_single_choice_question_is_that_question_and_anything_else_a_permission() {
        let one = json!({"hook_event_name": "PermissionRequest", "tool_name": "AskUserQuestion", "tool_input": {"questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": false, "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite", "description": ""}]}]}});
        match prompt(&one) {
            Some(Ok(Prompt::Choice { text, labels, input })) => {
                assert_eq!(
                    (text.as_str(), labels),
                    ("Which database?", vec!["Postgres".to_string(), "SQLite".to_string()])
                );
                assert_eq!(input, one["tool_input"]);
            }
            other => panic!("not a choice: {other:?}"),
        }
        let mut two = one.clone();
        two["tool_input"]["questions"] = json!([one["tool_input"]["questions"][0], one["tool_input"]["questions"][0]]);
        assert_eq!(prompt(&two), Some(Err(Unaskable::Several(2))), "two questions are not asked");
        let mut many = one.clone();
        many["tool_input"]["questions"][0]["multiSelect"] = json!(true);
        assert_eq!(prompt(&many), Some(Err(Unaskable::MultiSelect)), "several answers are not asked");
        let mut long = one.clone();
        long["tool_input"]["questions"][0]["options"][0]["label"] =
            json!("x".repeat(handoff_core::limits::QUESTION_LABEL_BYTES_MAX + 1));
        assert_eq!(
            prompt(&long),
            Some(Err(Unaskable::DoesNotFit)),
            "a label the service cannot hold whole is not asked, never cut"
        );
        let mut none = one.clone();
        none["tool_input"]["questions"][0]["options"] = json!([]);
        assert_eq!(prompt(&none), Some(Err(Unaskable::NoOptions)));
        let mut padded = one.clone();
        padded["tool_input"]["questions"][0]["question"] = json!(" Which database? ");
        assert!(
            matches!(prompt(&padded), Some(Ok(Prompt::Choice { text, .. })) if text == " Which database? "),
            "the question is kept as sent"
        );
        let plan = json!({"hook_event_name": "PermissionRequest", "tool_name": "ExitPlanMode", "tool_input": {"plan": "1. Parse\n2. Test"}});
        let asked = Prompt::Permission {
            text: "ExitPlanMode: 1. Parse 2. Test".into(),
            input: Some("1. Parse\n2. Test".into()),
        };
        assert_eq!(prompt(&plan), Some(Ok(asked)), "a plan is approved or denied, whole, with a note");
        let empty = json!({"hook_event_name": "PermissionRequest", "tool_name": "ExitPlanMode", "tool_input": {}});
        assert_eq!(
            prompt(&empty),
            Some(Ok(Prompt::Permission { text: EXIT_PLAN_TEXT.into(), input: None })),
            "as Claude Code 2.1.328 sends it"
        );
        assert_eq!(prompt(&json!({"hook_event_name": "Stop"})), None);
    }

    #[test]
    fn a_prompt_is_running_and_refreshes_the_turn() {
        let i = intent(&json!({"hook_event_name": "UserPromptSubmit", "prompt": "go"}), &no_tail, None);
        assert!(matches!(i, Intent::Report { status: ReportStatus::Running, refresh: true, summary: None, .. }));
        for asks in ["default", "acceptEdits", "plan"] {
            let doc = json!({"hook_event_name": "UserPromptSubmit", "prompt": "go", "permission_mode": asks});
            assert!(matches!(intent(&doc, &no_tail, None), Intent::Report { summary: None, .. }), "{asks} asks");
        }
        for never in NEVER_ASKING_MODES {
            let doc = json!({"hook_event_name": "UserPromptSubmit", "prompt": "go", "permission_mode": never});
            let (status, summary, _) = report(intent(&doc, &no_tail, None));
            assert_eq!(status, ReportStatus::Running);
            assert!(summary.is_some_and(|s| s.contains(never) && s.contains("no question will come")), "{never}");
        }
    }

    #[test]
    fn only_notifications_that_wait_for_the_person_are_needs_you() {
        for kind in WAITING_NOTIFICATIONS {
            let doc = json!({"hook_event_name": "Notification", "notification_type": kind, "message": "Claude needs your permission to use Bash"});
            assert_eq!(report(intent(&doc, &no_tail, None)).0, ReportStatus::NeedsYou, "{kind}");
            assert_eq!(
                report(intent(&doc, &no_tail, None)).1.as_deref(),
                Some("Claude needs your permission to use Bash")
            );
        }
        let url = json!({"hook_event_name": "Notification", "notification_type": "elicitation_url_dialog", "message": "Open the link to sign in"});
        assert_eq!(
            report(intent(&url, &no_tail, None)).0,
            ReportStatus::NeedsYou,
            "an MCP server's link for the person waits for them"
        );
        let done = json!({"hook_event_name": "Notification", "notification_type": "auth_success", "message": "ok"});
        assert!(matches!(intent(&done, &no_tail, None), Intent::Nothing(_)));
    }

    #[test]
    fn a_stop_is_done_with_the_transcripts_last_message_and_context() {
        let tail = |_: &Path| {
            Some(Tail {
                last_text: Some("All tests pass.".into()),
                context_used: Some(170_000),
                model: Some("claude-sonnet-4-5".into()),
                api_error: None,
            })
        };
        let doc = json!({"hook_event_name": "Stop", "transcript_path": "/t.jsonl", "stop_hook_active": false});
        let (status, summary, usage) = report(intent(&doc, &tail, None));
        assert_eq!((status, summary.as_deref()), (ReportStatus::Done, Some("All tests pass.")));
        let usage = usage.unwrap();
        assert_eq!((usage.context_used, usage.context_window, usage.limit), (Some(170_000), Some(200_000), None));
        let with_own_copy =
            json!({"hook_event_name": "Stop", "transcript_path": "/t.jsonl", "last_assistant_message": "Newer."});
        assert_eq!(
            report(intent(&with_own_copy, &tail, None)).1.as_deref(),
            Some("Newer."),
            "the document's copy is newer than a lagging transcript"
        );
        let (_, summary, usage) = report(intent(&json!({"hook_event_name": "Stop"}), &no_tail, None));
        assert_eq!((summary, usage), (None, None), "no transcript: done, and nothing made up");
    }

    #[test]
    fn a_stop_on_a_usage_limit_is_failed_with_the_provider_limit() {
        let tail = |_: &Path| {
            Some(Tail { api_error: Some("You've hit your session limit · resets 3:45pm".into()), ..Tail::default() })
        };
        let doc = json!({"hook_event_name": "Stop", "transcript_path": "/t.jsonl"});
        let (status, summary, usage) = report(intent(&doc, &tail, None));
        assert_eq!(status, ReportStatus::Failed);
        assert_eq!(summary.as_deref(), Some("You've hit your session limit · resets 3:45pm"));
        assert_eq!(usage.unwrap().limit, Some(Limit::ProviderLimit));
        let other = |_: &Path| {
            Some(Tail {
                api_error: Some("API Error: 529 Overloaded".into()),
                last_text: Some("Partial.".into()),
                ..Tail::default()
            })
        };
        assert_eq!(
            report(intent(&doc, &other, None)).0,
            ReportStatus::Done,
            "an error that is not a limit does not say limit"
        );
    }

    #[test]
    fn a_stop_failure_is_failed_and_a_rate_limit_is_the_providers() {
        let doc = json!({"hook_event_name": "StopFailure", "error": "rate_limit", "error_details": "429", "last_assistant_message": "API Error: Rate limit reached"});
        let (status, summary, usage) = report(intent(&doc, &no_tail, None));
        assert_eq!((status, summary.as_deref()), (ReportStatus::Failed, Some("API Error: Rate limit reached")));
        assert_eq!(usage.unwrap().limit, Some(Limit::ProviderLimit));
        let server = json!({"hook_event_name": "StopFailure", "error": "server_error"});
        let (status, summary, usage) = report(intent(&server, &no_tail, None));
        assert_eq!((status, summary.as_deref(), usage), (ReportStatus::Failed, Some("server_error"), None));
    }

    #[test]
    fn a_session_start_reports_runtimes_and_other_events_nothing() {
        assert!(matches!(
            intent(&json!({"hook_event_name": "SessionStart", "source": "startup"}), &no_tail, None),
            Intent::Runtimes
        ));
        assert!(matches!(intent(&json!({"hook_event_name": "PostToolUse"}), &no_tail, None), Intent::ResumeIfWaiting));
        assert!(matches!(intent(&json!({"hook_event_name": "PreCompact"}), &no_tail, None), Intent::Nothing(_)));
        assert!(matches!(intent(&json!([1, 2]), &no_tail, None), Intent::Nothing(_)));
    }
}
