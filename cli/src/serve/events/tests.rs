use super::*;
use handoff_core::json::Checked;
use handoff_core::timeline::Batch;
use serde_json::json;

/// The events numbered from 1 as the sender would, checked as the service checks a batch.
fn taken(events: &[Event]) -> Batch {
    let events = events.iter().enumerate().map(|(i, e)| Event { seq: i as u64 + 1, ..e.clone() }).collect();
    Batch { turn: 1, events }.checked().expect("the service takes every shaped event")
}

fn claude_turn(shaper: &mut Shaper) -> Vec<Event> {
    let lines = [
        json!({"type": "system", "subtype": "init", "session_id": "s"}),
        json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "I'll make the file."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "touch a.txt && ls", "description": "make it"}}]}}),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\n\u{1b}[31mred\u{1b}[0m", "is_error": false}]}}),
        json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_2", "name": "Write", "input": {"file_path": "/w/b.txt", "content": "secret words"}}]}}),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "denied"}], "is_error": true}]}}),
        json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Made a.txt."}]}}),
        json!({"type": "result", "subtype": "success", "result": "Made a.txt.", "is_error": false}),
    ];
    let mut events = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        events.extend(shaper.claude_code(line, 1_000 * i as i64));
    }
    events
}

#[test]
fn claude_codes_words_tool_calls_and_results_become_messages_and_tool_steps_in_messages_mode() {
    let events = claude_turn(&mut Shaper::new(SyncMode::Messages));
    let kinds: Vec<(Kind, Option<ToolState>)> = events.iter().map(|e| (e.kind, e.state)).collect();
    assert_eq!(
        kinds,
        [
            (Kind::Message, None),
            (Kind::Tool, Some(ToolState::Started)),
            (Kind::Tool, Some(ToolState::Done)),
            (Kind::Tool, Some(ToolState::Started)),
            (Kind::Tool, Some(ToolState::Failed)),
            (Kind::Message, None),
        ]
    );
    assert_eq!(events[0].text.as_deref(), Some("I'll make the file."));
    assert_eq!(events[1].input.as_deref(), Some("touch a.txt && ls"), "a command whole");
    assert_eq!(events[3].input.as_deref(), Some("/w/b.txt\n\nsecret words"), "a write's path and content");
    assert_eq!((events[2].name.as_deref(), events[2].id.as_deref()), (Some("Bash"), Some("toolu_1")));
    assert_eq!(events[2].duration_ms, Some(1_000), "from its start to its result");
    assert!(events.iter().all(|e| e.output.is_none()), "no output in messages mode");
    taken(&events);
}

#[test]
fn metadata_mode_sends_tool_names_states_and_durations_and_no_text_input_or_output() {
    let events = claude_turn(&mut Shaper::new(SyncMode::Metadata));
    assert_eq!(events.len(), 4, "the tool steps only: {events:?}");
    for e in &events {
        assert_eq!(e.kind, Kind::Tool);
        assert!(e.text.is_none() && e.input.is_none() && e.output.is_none() && e.output_bytes.is_none(), "{e:?}");
        assert!(e.name.is_some() && e.state.is_some());
    }
    assert!(events.iter().any(|e| e.duration_ms.is_some()));
    assert_eq!(note(SyncMode::Metadata, "resumed"), None, "a note is text");
    assert_eq!(reply(SyncMode::Metadata, "The answer."), None, "no reply: the summary only");
    taken(&events);
}

#[test]
fn full_mode_adds_each_output_clipped_with_its_whole_size_and_made_sendable() {
    let events = claude_turn(&mut Shaper::new(SyncMode::Full));
    let done = &events[2];
    assert_eq!(done.output.as_deref(), Some("a.txt\n\\u{1b}[31mred\\u{1b}[0m"), "no terminal escapes leave");
    assert_eq!(events[4].output.as_deref(), Some("denied"));
    let mut shaper = Shaper::new(SyncMode::Full);
    shaper.claude_code(
        &json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "yes"}}]}}),
        0,
    );
    let long = "y\n".repeat(10_000);
    let ended = shaper.claude_code(
        &json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": long}]}}),
        5,
    );
    let output = ended[0].output.as_deref().unwrap();
    assert!(output.len() <= TIMELINE_OUTPUT_BYTES_MAX && output.ends_with('…'), "{}", output.len());
    assert_eq!(ended[0].output_bytes, Some(20_000), "the whole size beside it");
    taken(&events);
    taken(&ended);
}

#[test]
fn long_words_and_inputs_are_clipped_to_the_timelines_limits_and_the_reply_kept_whole_to_its_own() {
    let mut shaper = Shaper::new(SyncMode::Messages);
    let words = "word ".repeat(10_000);
    let command = "x".repeat(QUESTION_INPUT_BYTES_MAX * 2);
    let events = shaper.claude_code(
        &json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": words},
            {"type": "tool_use", "id": "i\nd", "name": "", "input": {"command": command}}]}}),
        0,
    );
    assert!(events[0].text.as_ref().unwrap().len() <= TIMELINE_MESSAGE_BYTES_MAX);
    assert!(events[1].input.as_ref().unwrap().len() <= QUESTION_INPUT_BYTES_MAX);
    assert_eq!((events[1].id.as_deref(), events[1].name.as_deref()), (Some("i d"), Some("tool")));
    taken(&events);
    let answer = "line\n".repeat(10_000);
    assert_eq!(reply(SyncMode::Messages, &answer).as_deref(), Some(answer.trim()), "whole, 50 KB");
    let huge = "z".repeat(REPLY_BYTES_MAX * 2);
    assert!(reply(SyncMode::Full, &huge).unwrap().len() <= REPLY_BYTES_MAX);
    assert_eq!(reply(SyncMode::Messages, "  "), None);
}

#[test]
fn codexs_agent_messages_commands_file_changes_and_mcp_calls_become_messages_and_tool_steps() {
    let mut shaper = Shaper::new(SyncMode::Full);
    let notes = [
        ("item/started", json!({"type": "agentMessage", "id": "m1", "text": ""})),
        ("item/completed", json!({"type": "agentMessage", "id": "m1", "text": "Running it."})),
        (
            "item/started",
            json!({"type": "commandExecution", "id": "c1", "command": "printf made > proof.txt", "status": "inProgress", "commandActions": [], "cwd": "/w"}),
        ),
        (
            "item/completed",
            json!({"type": "commandExecution", "id": "c1", "command": "printf made > proof.txt", "status": "completed", "exitCode": 0, "aggregatedOutput": "ok", "durationMs": 12, "commandActions": [], "cwd": "/w"}),
        ),
        (
            "item/started",
            json!({"type": "commandExecution", "id": "c2", "command": "false", "status": "inProgress", "commandActions": [], "cwd": "/w"}),
        ),
        (
            "item/completed",
            json!({"type": "commandExecution", "id": "c2", "command": "false", "status": "completed", "exitCode": 1, "commandActions": [], "cwd": "/w"}),
        ),
        (
            "item/started",
            json!({"type": "fileChange", "id": "f1", "status": "inProgress", "changes": [{"path": "/w/a.rs", "kind": {"type": "update"}, "diff": "-a\n+b"}]}),
        ),
        ("item/completed", json!({"type": "fileChange", "id": "f1", "status": "declined", "changes": []})),
        (
            "item/started",
            json!({"type": "mcpToolCall", "id": "p1", "server": "handoff", "tool": "report", "arguments": {"status": "done"}, "status": "inProgress"}),
        ),
        (
            "item/completed",
            json!({"type": "mcpToolCall", "id": "p1", "server": "handoff", "tool": "report", "arguments": {}, "status": "completed", "result": {"content": [{"type": "text", "text": "reported"}]}}),
        ),
        ("item/completed", json!({"type": "reasoning", "id": "r1"})),
    ];
    let events: Vec<Event> = notes.iter().flat_map(|(m, item)| shaper.codex(m, item, 0)).collect();
    let shown: Vec<(Kind, Option<&str>, Option<ToolState>)> =
        events.iter().map(|e| (e.kind, e.name.as_deref(), e.state)).collect();
    assert_eq!(
        shown,
        [
            (Kind::Message, None, None),
            (Kind::Tool, Some(CODEX_COMMAND_TOOL), Some(ToolState::Started)),
            (Kind::Tool, Some(CODEX_COMMAND_TOOL), Some(ToolState::Done)),
            (Kind::Tool, Some(CODEX_COMMAND_TOOL), Some(ToolState::Started)),
            (Kind::Tool, Some(CODEX_COMMAND_TOOL), Some(ToolState::Failed)),
            (Kind::Tool, Some(CODEX_PATCH_TOOL), Some(ToolState::Started)),
            (Kind::Tool, Some(CODEX_PATCH_TOOL), Some(ToolState::Failed)),
            (Kind::Tool, Some("mcp__handoff__report"), Some(ToolState::Started)),
            (Kind::Tool, Some("mcp__handoff__report"), Some(ToolState::Done)),
        ]
    );
    assert_eq!(events[0].text.as_deref(), Some("Running it."));
    assert_eq!(events[1].input.as_deref(), Some("printf made > proof.txt"));
    assert_eq!((events[2].output.as_deref(), events[2].duration_ms), (Some("ok"), Some(12)));
    assert_eq!(events[5].input.as_deref(), Some("update /w/a.rs\n-a\n+b\n"), "a change's path and diff");
    assert_eq!(events[8].output.as_deref(), Some("reported"));
    taken(&events);
    let metadata: Vec<Event> =
        notes.iter().flat_map(|(m, item)| Shaper::new(SyncMode::Metadata).codex(m, item, 0)).collect();
    assert!(metadata.iter().all(|e| e.kind == Kind::Tool && e.input.is_none() && e.output.is_none()));
}
