//! The real Codex (the lockfile's version) against the real local Worker, its model scripted
//! over the Responses API: a turn launched by `handoff launch` in `codex exec` with no network,
//! which the launcher records from what the session left.

mod common;
use common::harness::*;
use common::*;
use std::time::Duration;

#[test]
fn an_exec_turn_whose_mcp_server_cannot_start_is_briefed_recorded_by_the_launcher_and_ends_done() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(owner, &["turn", &id, "--to", "codex", "--objective", "Write the parser", "--purpose", "start the work"]);
    let model = ScriptedModel::start(vec![
        Step::exec("printf 'Decision: Parse in one pass over the input\\n' >> NOTES.md && printf 'fn parse() {}\\n' > parser.rs"),
        Step::text("Wrote the parser.\nArtifact: parser.rs\nStatus: done"),
    ]);
    let m = Machine::new(&id, &machine_token, &model);

    // A Codex without the server (its entry switched off after the launcher's): the fallback.
    let launched = m.run(
        "handoff launch for codex",
        &["launch", &id, "--print", "--", "-c", "mcp_servers.handoff.enabled=false"],
        &[],
    );
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());
    let first = model.agent_requests().into_iter().next().expect("Codex asked the model");
    let prompt = first.text();
    assert!(
        prompt.contains("Write the parser") && prompt.contains("This sandbox has no network"),
        "the briefing is the prompt: {prompt}"
    );
    let result = model.result_of("call_1", Duration::from_secs(1)).expect("the command's output reached the model");
    assert!(
        std::fs::read_to_string(m.work().join("NOTES.md")).unwrap_or_default().contains("Decision: Parse in one pass"),
        "the command ran in the sandbox: {result}"
    );

    let (_, work) = api_get(&owner_token, &format!("/v1/handoffs/{id}/work"));
    let decisions = work["work"]["decisions"].clone();
    assert_eq!(decisions[0]["statement"], "Parse in one pass over the input", "{work}");
    assert_eq!(work["work"]["artifacts"][0]["title"], "parser.rs", "{work}");
    let r = record(&owner_token, &id);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str()), (Some(2), Some("done")), "{r}");
    assert!(r["summary"].as_str().unwrap_or("").starts_with("Wrote the parser."), "{r}");
    let log = m.log();
    assert!(log.contains("recorded decision dec_1") && log.contains("recorded done for turn 2"), "{log}");
    assert!(log.contains("codex did not start the handoff MCP server: recording what it left in NOTES.md"), "{log}");
}

#[test]
fn an_interactive_codex_launched_with_its_hooks_asks_the_owner_and_the_answer_decides() {
    let owner_token = owner();
    let owner = Some(owner_token.as_str());
    let (id, machine_token) = create(&owner_token);
    ok(owner, &["work", &id, "--title", "Proof", "--goal", "Make the proof file"]);
    let escalated = serde_json::json!({"cmd": "touch proof.txt", "sandbox_permissions": "require_escalated", "justification": "Make the proof file"});
    let model = ScriptedModel::start(vec![
        Step::Call { name: "exec_command".into(), input: escalated },
        Step::text("Made the proof."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    let mut vars = m.vars();
    vars.push(("HANDOFF_ANSWER_WAIT_S".into(), "90".into()));

    // A hooks.json whose handler is not the one install trusted: Codex stops at its review
    // screen (the hash Codex checks is of the handler's command and timeout).
    let installed = m.run("hook install codex", &["hook", "install", "codex"], &[("HANDOFF_ANSWER_WAIT_S", "90")]);
    assert!(
        installed.code == 0 && installed.stdout.contains("[hooks.state]"),
        "install says the trust it recorded: {installed:?}"
    );
    let hooks_json = m.codex_home().join("hooks.json");
    let trusted = std::fs::read_to_string(&hooks_json).unwrap();
    std::fs::write(&hooks_json, trusted.replace("\"timeout\": 105", "\"timeout\": 106")).unwrap();
    let untrusted = Tmux::start(
        &m.work(),
        &vars,
        &[harness_bin("codex").display().to_string(), "--no-daemon".into(), "Make the proof.".into()],
    );
    untrusted.wait_for("Hooks need review", Duration::from_secs(60));
    drop(untrusted);
    std::fs::write(&hooks_json, &trusted).unwrap();

    // Launched (which installs the same hook again), Codex runs it without a review: the
    // launcher passes no flag that skips Codex's trust.
    let handoff = env!("CARGO_BIN_EXE_handoff").to_string();
    let tmux =
        Tmux::start(&m.work(), &vars, &[handoff, "launch".into(), id.clone(), "--runtime".into(), "codex".into()]);
    let context = || format!("record: {}\nscreen:\n{}\nlog:\n{}", record(&owner_token, &id), tmux.screen(), m.log());
    let q = eventually(
        "the hook asks the owner",
        Duration::from_secs(60),
        || record(&owner_token, &id)["question"]["id"].as_str().map(str::to_string),
        context,
    );
    let asked = record(&owner_token, &id)["question"].clone();
    assert_eq!(
        (asked["kind"].as_str(), asked["text"].as_str()),
        (Some("permission"), Some("Bash: touch proof.txt")),
        "{asked}"
    );
    let answered = run(owner, &["answer", &id, "allow", "--question", &q]);
    assert_eq!(answered.code, 0, "{answered:?}\n{}\nmodel requests: {}", context(), model.requests().len());
    model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the command's result reached the model\n{}", context()));
    assert!(m.work().join("proof.txt").exists(), "the owner's allow let it run: {}", context());
    assert!(m.log().contains("started codex --sandbox workspace-write --ask-for-approval on-request --no-daemon --enable hooks -c 'mcp_servers.handoff.command="), "{}", context());
    drop(tmux);
    let left = |_: ()| Some(m.processes()).filter(|p| p.is_empty());
    eventually(
        "the session leaves no process behind (no background server)",
        Duration::from_secs(15),
        || left(()),
        || format!("{:#?}", m.processes()),
    );
}

#[test]
fn an_exec_turn_in_workspace_write_records_live_and_reports_done_through_the_mcp_server() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(owner, &["turn", &id, "--to", "codex", "--objective", "Write the parser", "--purpose", "start the work"]);
    let model = ScriptedModel::start(vec![
        Step::codex_mcp("handoff", "record_decision", serde_json::json!({"statement": "Parse line by line"})),
        Step::codex_mcp(
            "handoff",
            "report",
            serde_json::json!({"status": "done", "summary": "Wrote the parser through MCP"}),
        ),
        Step::text("Done."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    let launched = m.run("handoff launch for codex", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());
    let first = model.agent_requests().into_iter().next().expect("Codex asked the model");
    assert!(
        first.body["tools"].as_array().unwrap().iter().any(|t| t["type"] == "namespace" && t["name"] == "mcp__handoff"),
        "Codex offered the server's tools"
    );
    let decided = model.result_of("call_1", Duration::from_secs(1)).unwrap_or_default();
    assert!(decided.to_string().contains("dec_1"), "the server recorded the decision from the sandbox: {decided}");
    let r = record(&owner_token, &id);
    assert_eq!(
        (r["status"].as_str(), r["summary"].as_str()),
        (Some("done"), Some("Wrote the parser through MCP")),
        "{r}"
    );
    let log = m.log();
    assert!(
        log.contains("codex recorded through the handoff MCP server")
            && log.contains("mcp ho_")
            && log.contains("serving codex"),
        "{log}"
    );
    assert!(!log.contains("from what codex left"), "the launcher recorded nothing itself: {log}");
    // Recorded while the session ran: the decision is older than the turn's end.
    let (_, turns) = api_get(&owner_token, &format!("/v1/handoffs/{id}/turns"));
    let (_, work) = api_get(&owner_token, &format!("/v1/handoffs/{id}/work"));
    let decided_at = work["work"]["decisions"][0]["recorded_at"].as_str().unwrap_or_default().to_string();
    assert!(decided_at.as_str() < turns["turns"][1]["ended_at"].as_str().unwrap_or_default(), "{work} {turns}");
}

#[test]
fn the_models_commands_in_a_launched_codex_see_neither_the_token_nor_its_file() {
    let (owner_token, id, machine_token) = started();
    ok(
        Some(&owner_token),
        &["turn", &id, "--to", "codex", "--objective", "Look around", "--purpose", "the token's reach"],
    );
    let model = ScriptedModel::start(vec![
        Step::exec("echo \"TOKEN=[${HANDOFF_TOKEN:-}] FILE=[${HANDOFF_TOKEN_FILE:-}] ID=[${HANDOFF_ID:-}]\""),
        Step::codex_mcp("handoff", "report", serde_json::json!({"status": "done", "summary": "Looked"})),
        Step::text("Done."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    let launched = m.run("handoff launch for codex", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());
    let seen =
        model.result_of("call_1", Duration::from_secs(1)).expect("the command's output reached the model").to_string();
    assert!(
        seen.contains("TOKEN=[] FILE=[]") && seen.contains(&format!("ID=[{id}]")),
        "shell_environment_policy.exclude keeps both out: {seen}"
    );
    assert!(!seen.contains(&machine_token));
    let r = record(&owner_token, &id);
    assert_eq!(
        (r["status"].as_str(), r["summary"].as_str()),
        (Some("done"), Some("Looked")),
        "the MCP server read the token's file: {r}"
    );
}
