//! The real Claude Code (the lockfile's version) against the real local Worker, its model
//! scripted: a turn launched in print mode by `handoff launch`, and interactive sessions under
//! tmux whose permission prompts the owner answers from afar, as the hooks that `handoff hook
//! install claude-code` writes run them.

mod common;
use common::harness::*;
use common::*;
use serde_json::Value;
use std::time::Duration;

/// A hand-off whose turn 1 was done by hand, with the work set; answers (owner, id, machine).
fn started() -> (String, String, String) {
    let owner = owner();
    let (id, machine) = create(&owner);
    ok(Some(&owner), &["work", &id, "--title", "Config parser", "--goal", "Parse the config file, empty input included", "--criterion", "empty input parses"]);
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "set up the repository"]);
    (owner, id, machine)
}

fn work(owner: &str, id: &str) -> Value {
    api_get(owner, &format!("/v1/handoffs/{id}/work")).1["work"].clone()
}

#[test]
fn a_print_mode_turn_launched_by_handoff_launch_reports_records_and_ends_done() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(owner, &["turn", &id, "--to", "claude-code", "--objective", "Review the parser", "--purpose", "a second pair of eyes"]);
    let decision = "Keep the recursive descent parser";
    let model = ScriptedModel::start(vec![
        Step::bash(&format!("handoff decide {id} \"{decision}\" --rationale \"the grammar is small\"")),
        Step::text("Reviewed the parser: it holds."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);

    let launched = m.run("handoff launch for claude-code", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());

    // The briefing was the model's prompt.
    let first = model.agent_requests().into_iter().next().expect("Claude Code asked the model");
    let prompt = first.text();
    assert!(prompt.contains("Review the parser") && prompt.contains(&format!("handoff report {id} --turn 2")), "the briefing is the prompt: {prompt}");
    // The scripted `handoff decide` ran under the launcher's allow rule, and is on the record.
    let result = model.result_of("call_1", Duration::from_secs(1)).expect("the Bash call's result reached the model");
    assert!(result.to_string().contains("dec_1"), "handoff decide ran and printed its id: {result}");
    let decisions = work(&owner_token, &id)["decisions"].clone();
    assert_eq!(decisions[0]["statement"], decision, "{decisions}");
    assert_eq!(decisions[0]["by"], "machine", "{decisions}");
    // Stop reported done with the model's last text.
    let r = record(&owner_token, &id);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str(), r["summary"].as_str()), (Some(2), Some("done"), Some("Reviewed the parser: it holds.")), "{r}");
    // SessionStart reported the runtimes, UserPromptSubmit running.
    let log = m.log();
    assert!(log.contains("delivered runtimes (") && log.contains("from SessionStart"), "{log}");
    assert!(log.contains("delivered running for turn 2 from UserPromptSubmit"), "{log}");
    let (_, runtimes) = api_get(&owner_token, &format!("/v1/handoffs/{id}/runtimes"));
    let claude = runtimes["runtimes"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "claude-code").cloned()).unwrap_or_default();
    assert_eq!(claude["version"].as_str().map(|v| v.starts_with("2.1.328")), Some(true), "{runtimes}");
    assert!(!log.contains(&machine_token), "the log never holds the token");
}
