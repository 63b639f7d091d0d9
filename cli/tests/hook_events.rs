//! The hooks' tool events in interactive sessions: where the hooks are installed and
//! nobody serves the session, each tool call reaches the turn's timeline as `tool` events in
//! `metadata` mode, numbered by the hooks' counter from 1 with no gap, with no text, input or
//! output. Run with the real Claude Code and Codex of the lockfile against a scripted model, and
//! with the `handoff` binary as a harness runs its hooks, through a network cut and in a served
//! turn, against the real local Worker.

mod common;
use common::harness::*;
use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;

/// Nothing listens here: a connection is refused at once, as with the Worker stopped.
const DOWN_URL: &str = "http://127.0.0.1:9";

/// Turn `turn`'s events as the owner reads them.
fn events(owner: &str, id: &str, turn: u64) -> Vec<Value> {
    let (status, body) = api_get(owner, &format!("/v1/handoffs/{id}/events?turn={turn}"));
    assert_eq!(status, 200, "{body}");
    body["events"].as_array().cloned().unwrap_or_default()
}

/// Each event as `[seq, name, state]`.
fn steps(events: &[Value]) -> Vec<Value> {
    events.iter().map(|e| json!([e["seq"], e["name"], e["state"]])).collect()
}

/// What `metadata` mode promises of every event: a tool step with its name and id, its end
/// with a duration, and nothing of what the tool was given or gave back.
fn assert_metadata_only(events: &[Value]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "seqs from 1, consecutive: {events:#?}");
        assert_eq!(e["kind"], "tool", "{e}");
        assert!(e["id"].is_string() && e["name"].is_string(), "{e}");
        for absent in ["text", "input", "output", "output_bytes"] {
            assert!(e[absent].is_null(), "metadata mode sends no {absent}: {e}");
        }
        let ended = e["state"] != "started";
        assert_eq!(e["duration_ms"].is_u64(), ended, "a call's end says how long it ran: {e}");
    }
}

#[test]
fn a_claude_code_turn_nobody_serves_leaves_each_tool_calls_steps_on_the_timeline_with_no_text() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(owner, &["turn", &id, "--to", "claude-code", "--objective", "Read the notes", "--purpose", "review"]);
    let secret = "the notes' secret words";
    let model = ScriptedModel::start(vec![
        Step::Call { name: "Read".into(), input: json!({"file_path": "notes.md"}) },
        Step::Call { name: "Read".into(), input: json!({"file_path": "missing.md"}) },
        Step::text("Read the notes."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    std::fs::write(m.work().join("notes.md"), secret).unwrap();

    let launched = m.run("handoff launch for claude-code", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());
    let read = model.result_of("call_1", std::time::Duration::from_secs(1)).expect("the read reached the model");
    assert!(read.to_string().contains(secret), "{read}");

    let got = events(&owner_token, &id, 2);
    assert_eq!(
        steps(&got),
        [
            json!([1, "Read", "started"]),
            json!([2, "Read", "done"]),
            json!([3, "Read", "started"]),
            json!([4, "Read", "failed"]),
        ],
        "{got:#?}\nlog:\n{}",
        m.log()
    );
    assert_metadata_only(&got);
    assert_eq!(got[0]["id"], got[1]["id"], "a call's start and end share its id");
    assert_ne!(got[0]["id"], got[2]["id"]);
    assert!(!serde_json::to_string(&got).unwrap().contains(secret), "no output leaves the machine");
    assert!(!m.log().contains("PreToolUse: nothing to report"), "a step logs no line of its own: {}", m.log());
}

#[test]
fn a_codex_turn_nobody_serves_leaves_each_commands_steps_on_the_timeline_with_no_text() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(owner, &["turn", &id, "--to", "codex", "--objective", "Make the file", "--purpose", "start the work"]);
    let model = ScriptedModel::start(vec![
        Step::exec("printf made > made.txt"),
        Step::exec("printf 'a secret' && exit 3"),
        Step::text("Made it."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);

    let launched = m.run("handoff launch for codex", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());
    assert_eq!(m.file("made.txt"), "made", "the command ran");
    let hooks = std::fs::read_to_string(m.codex_home().join("hooks.json")).unwrap();
    assert!(hooks.contains("PreToolUse") && hooks.contains("PostToolUse"), "{hooks}");

    let got = events(&owner_token, &id, 2);
    assert_eq!(
        steps(&got),
        [
            json!([1, "Bash", "started"]),
            json!([2, "Bash", "done"]),
            json!([3, "Bash", "started"]),
            // Codex 0.169.0's PostToolUse says nothing of the exit code, and no hook runs on a
            // failed call: a command that exited 3 ended, as far as its hooks tell.
            json!([4, "Bash", "done"]),
        ],
        "{got:#?}\nlog:\n{}",
        m.log()
    );
    assert_metadata_only(&got);
    assert!(!serde_json::to_string(&got).unwrap().contains("secret"), "no command or output leaves the machine");
}

/// A machine whose hooks the test runs by hand, one process per event, as a harness runs them.
struct Hooks {
    id: String,
    token: String,
    state: PathBuf,
}

impl Hooks {
    fn new(id: &str, token: &str) -> Hooks {
        let state = std::env::temp_dir().join(unique("handoff-hook-events"));
        Hooks { id: id.into(), token: token.into(), state }
    }

    /// `handoff hook claude-code` with Claude Code's document for `event` of call `call`.
    fn claude(&self, url: &str, event: &str, call: &str, served: bool) {
        let doc = json!({"hook_event_name": event, "session_id": "s", "tool_name": "Bash", "tool_use_id": call,
            "tool_input": {"command": "cat secret.txt"}, "tool_response": {"stdout": "the secret"}});
        let mut cmd = command(Some(&self.token), &["hook", "claude-code"]);
        cmd.env("HANDOFF_URL", url)
            .env("HANDOFF_ID", &self.id)
            .env("HANDOFF_STATE_DIR", &self.state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if served {
            cmd.env("HANDOFF_SERVED", "1");
        }
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(doc.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }

    fn spooled(&self) -> usize {
        std::fs::read_to_string(self.state.join("spool").join(format!("{}.jsonl", self.id)))
            .map_or(0, |t| t.lines().count())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.state.join("hook.log")).unwrap_or_default()
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

#[test]
fn tool_events_made_through_a_network_cut_are_spooled_and_delivered_later_in_order() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let h = Hooks::new(&id, &machine);
    h.claude(&url(), "PreToolUse", "toolu_1", false);
    assert_eq!(steps(&events(&owner, &id, 1)), [json!([1, "Bash", "started"])], "{}", h.log());

    // The network goes: the harness is not held up, and each step waits in the spool in order.
    for (event, call) in [("PostToolUse", "toolu_1"), ("PreToolUse", "toolu_2"), ("PostToolUseFailure", "toolu_2")] {
        h.claude(DOWN_URL, event, call, false);
    }
    assert_eq!(h.spooled(), 3, "{}", h.log());
    assert_eq!(events(&owner, &id, 1).len(), 1);

    // Back: the next hook delivers what was owed first, as one batch, then its own.
    h.claude(&url(), "PreToolUse", "toolu_3", false);
    assert_eq!(h.spooled(), 0, "{}", h.log());
    assert!(h.log().contains("delivered events 2-5 for turn 1 from 4 hook events"), "{}", h.log());
    let got = events(&owner, &id, 1);
    assert_eq!(
        steps(&got),
        [
            json!([1, "Bash", "started"]),
            json!([2, "Bash", "done"]),
            json!([3, "Bash", "started"]),
            json!([4, "Bash", "failed"]),
            json!([5, "Bash", "started"]),
        ],
        "{got:#?}\n{}",
        h.log()
    );
    assert_metadata_only(&got);
    assert!(!serde_json::to_string(&got).unwrap().contains("secret"));
}

#[test]
fn in_a_served_turn_the_hooks_send_no_events_serve_being_the_turns_one_writer() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let h = Hooks::new(&id, &machine);
    for (event, call) in [("PreToolUse", "toolu_1"), ("PostToolUse", "toolu_1")] {
        h.claude(&url(), event, call, true);
    }
    assert_eq!(h.spooled(), 0, "{}", h.log());
    assert!(events(&owner, &id, 1).is_empty(), "{}", h.log());
    assert!(!h.state.join("timeline").exists(), "no counter was taken");
    // The same hooks in a session nobody serves start the turn's timeline at 1.
    h.claude(&url(), "PreToolUse", "toolu_2", false);
    assert_eq!(steps(&events(&owner, &id, 1)), [json!([1, "Bash", "started"])]);
}
