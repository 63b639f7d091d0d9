//! `handoff launch` against the real local Worker, with the real Claude Code and Codex of the
//! lockfile on `PATH` and a scripted model (`common::harness`): a Codex turn with no network,
//! recorded by the launcher, then a Claude Code turn that records itself, briefed from the
//! package compiled from what Codex left; dry runs, refusals and an interrupt.

mod common;
use common::harness::*;
use common::*;
use handoff_cli::machine::server::claude_code_mcp_config;
use handoff_cli::machine::turn::{access_paragraph, prompt, work_briefing};
use handoff_cli::machine::{Runtime, CLAUDE_CODE_BUDGET_BYTES, CODEX_BUDGET_BYTES};
use serde_json::{json, Value};
use std::time::Duration;

/// The longest one launch may take: a harness, a dozen requests and the model's few answers.
const LAUNCH_S_MAX: u64 = 60;

/// What the Codex of these tests does for `objective`: a decision in `NOTES.md`, a plan in
/// `plan.md`, and a final message naming it, as a session without network is told to.
fn codex_plans(objective: &str) -> Vec<Step> {
    let decision = format!("Do \\\"{objective}\\\" in one pass over the input");
    vec![
        Step::exec(&format!(
            "printf 'Decision: {decision}\\n' >> NOTES.md && printf '1. read the input\\n2. parse it\\n' > plan.md"
        )),
        Step::text(&format!("Planned \"{objective}\" in plan.md.\nArtifact: plan.md\nStatus: done")),
    ]
}

/// The position of the first line of `text` after `from` that contains `needle`; names what
/// it looked for when there is none.
fn line_after(text: &str, from: usize, needle: &str) -> usize {
    text.lines().enumerate().skip(from).find(|(_, l)| l.contains(needle)).map(|(i, _)| i).unwrap_or_else(|| {
        panic!("no line containing {needle:?} after line {from} of:\n{text}");
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn a_codex_turn_without_network_then_a_claude_code_turn_are_launched_briefed_and_recorded_in_order() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    let mut watch = Follower::start(&owner_token, &["wait", &id, "--follow"]);
    watch.expect("v");
    // Claude Code's model reviews what Codex decided and records through `handoff` (the
    // launcher's allow rule lets exactly that run).
    let decision = "Do \"Write the parser\" in one pass over the input";
    let verdict = format!("Verdict: {decision} holds");
    let reviewed = format!("Reviewed the work; {decision} holds.");
    // Both record through the `handoff` MCP server: Codex from inside its sandbox, Claude Code
    // once it has loaded the server's deferred tools.
    let tool = |name: &str| format!("mcp__handoff__{name}");
    let claude_steps = vec![
        Step::load_tools(&[&tool("record_decision"), &tool("add_artifact"), &tool("report")]),
        Step::Call {
            name: tool("record_decision"),
            input: json!({"statement": verdict, "rationale": "checked against the briefing"}),
        },
        Step::Call {
            name: tool("add_artifact"),
            input: json!({"type": "report", "title": "Review", "uri": "review.md"}),
        },
        Step::Call { name: tool("report"), input: json!({"status": "done", "summary": reviewed}) },
        Step::text(&reviewed),
    ];
    let planned = "Planned \"Write the parser\" in plan.md.";
    let codex_steps = vec![
        Step::exec("printf '1. read the input\\n2. parse it\\n' > plan.md"),
        Step::codex_mcp("handoff", "record_decision", json!({"statement": decision})),
        Step::codex_mcp("handoff", "add_artifact", json!({"type": "file", "title": "plan.md", "uri": "plan.md"})),
        Step::codex_mcp("handoff", "report", json!({"status": "done", "summary": planned})),
        Step::text(planned),
    ];
    let model = ScriptedModel::start_per_api(claude_steps, codex_steps);
    let m = Machine::new(&id, &machine_token, &model);

    // Turn 2 goes to Codex, whose sandbox has no network: it records through the server.
    ok(owner, &["turn", &id, "--to", "codex", "--objective", "Write the parser", "--purpose", "start the work"]);
    let handed = record(&owner_token, &id);
    let (h1, v1) = (handed["package_hash"].as_str().unwrap().to_string(), handed["package_version"].as_u64().unwrap());
    let codex = m.ok("the launch of codex for turn 2", &["launch", &id, "--print"]);
    let lines: Vec<&str> = codex.stdout.lines().collect();
    assert_eq!(lines[0], format!("briefed from package v{v1} ({}…)", &h1[..8]), "{codex:?}");
    assert!(!codex.stdout.contains("recorded "), "the launcher recorded nothing itself: {codex:?}");
    assert!(m.file("plan.md").contains("parse it"), "Codex wrote its plan in the sandbox");
    let codex_config = std::fs::read_to_string(m.codex_home().join("config.toml")).unwrap();
    assert!(
        codex_config.contains("notify") && codex_config.contains("\"hook\", \"codex\""),
        "hooks installed: {codex_config}"
    );
    let after_codex = record(&owner_token, &id);
    assert_eq!(
        (after_codex["turn"].as_u64(), after_codex["status"].as_str()),
        (Some(2), Some("done")),
        "{after_codex}"
    );
    assert!(
        after_codex["summary"].as_str().unwrap().starts_with("Planned \"Write the parser\" in plan.md."),
        "{after_codex}"
    );

    // Turn 3 goes to Claude Code with the package compiled from what Codex left; a recompile
    // of the same request gives the same version and hash.
    ok(
        owner,
        &["turn", &id, "--to", "claude-code", "--objective", "Review the parser", "--purpose", "a second pair of eyes"],
    );
    let handed = record(&owner_token, &id);
    let (h2, v2) = (handed["package_hash"].as_str().unwrap().to_string(), handed["package_version"].as_u64().unwrap());
    assert_eq!(v2, v1 + 1, "what Codex left changed the package");
    let request = [
        "package",
        &id,
        "--objective",
        "Review the parser",
        "--purpose",
        "a second pair of eyes",
        "--runtime",
        "claude-code",
        "--json",
    ];
    let recompiled = run(owner, &request).json();
    assert_eq!(
        (recompiled["changed"].as_bool(), recompiled["package_version"].as_u64()),
        (Some(false), Some(v2)),
        "{recompiled}"
    );
    assert_eq!(recompiled["package_hash"], h2.as_str(), "the hash is stable across a recompile");
    assert!(recompiled["package"]["decisions"].to_string().contains("in one pass over the input"), "{recompiled}");

    let claude = m.ok("the launch of claude-code for turn 3", &["launch", &id, "--print"]);
    let lines: Vec<&str> = claude.stdout.lines().collect();
    assert_eq!(lines[0], format!("briefed from package v{v2} ({}…)", &h2[..8]), "{claude:?}");
    assert!(claude.stdout.contains(&reviewed), "Claude Code ran: {claude:?}");
    let prompt = model
        .agent_requests()
        .into_iter()
        .find(|r| r.api == handoff_it::peers::scripted_model::Api::Messages)
        .expect("Claude Code asked the model")
        .text();
    assert!(
        prompt.contains("in one pass over the input"),
        "the package compiled from Codex's turn briefed Claude Code: {prompt}"
    );
    let settings = std::fs::read_to_string(m.home().join(".claude/settings.json")).unwrap();
    assert!(settings.contains("hook claude-code") && settings.contains("\"Stop\""), "hooks installed: {settings}");
    let moved = run(owner, &request);
    assert_eq!(moved.code, 1, "an accepted package cannot move under its session: {moved:?}");
    assert!(moved.stderr.starts_with("package.accepted"), "{moved:?}");

    // The record: the lineage, the package, the work in the order it was done.
    let (_, turns) = api_get(&owner_token, &format!("/v1/handoffs/{id}/turns"));
    let turns = turns["turns"].as_array().unwrap().clone();
    let facts: Vec<Value> = turns
        .iter()
        .map(|t| {
            json!([t["turn"], t["status"], t["runtime"], t["package_version"], t["package_hash"], t["continued_from"]])
        })
        .collect();
    assert_eq!(
        facts,
        [
            json!([1, "done", null, null, null, null]),
            json!([2, "done", "codex", v1, h1, {"turn": 1, "runtime": null}]),
            json!([3, "done", "claude-code", v2, h2, {"turn": 2, "runtime": "codex"}]),
        ],
        "{turns:#?}"
    );
    let (_, latest) = api_get(&owner_token, &format!("/v1/handoffs/{id}/package"));
    assert_eq!(
        (latest["package_version"].as_u64(), latest["package_hash"].as_str(), latest["state"].as_str()),
        (Some(v2), Some(h2.as_str()), Some("accepted"))
    );
    let (_, work) = api_get(&owner_token, &format!("/v1/handoffs/{id}/work"));
    let work = &work["work"];
    let decisions: Vec<(&str, &str)> = work["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["statement"].as_str().unwrap(), d["by"].as_str().unwrap()))
        .collect();
    assert_eq!(decisions, [(decision, "machine"), (verdict.as_str(), "machine")], "{work}");
    let artifacts = work["artifacts"].as_array().unwrap();
    assert_eq!(
        (artifacts[0]["title"].as_str(), artifacts[0]["type"].as_str()),
        (Some("plan.md"), Some("file")),
        "{work}"
    );
    assert_eq!(
        (artifacts[1]["title"].as_str(), artifacts[1]["uri"].as_str()),
        (Some("Review"), Some("review.md")),
        "{work}"
    );

    // Events in order: each turn's record was made while it ran, before it ended and the next began.
    let at = |v: &Value| v.as_str().unwrap().to_string();
    let times = [
        at(&turns[1]["opened_at"]),
        at(&work["decisions"][0]["recorded_at"]),
        at(&artifacts[0]["recorded_at"]),
        at(&turns[1]["ended_at"]),
        at(&turns[2]["opened_at"]),
        at(&work["decisions"][1]["recorded_at"]),
        at(&artifacts[1]["recorded_at"]),
        at(&turns[2]["ended_at"]),
    ];
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "events out of order: {times:#?}");
    let log = m.log();
    let mut i = line_after(&log, 0, "accepted package v1");
    for needle in [
        "briefed from package v1",
        "started codex exec --sandbox workspace-write -c 'notify=[]' --output-last-message",
        "mcp ho_",
        "codex exited 0",
        "codex recorded through the handoff MCP server",
        "accepted package v2",
        "briefed from package v2",
        "started claude -p <prompt> --permission-mode default --mcp-config",
        "mcp ho_",
        "claude exited 0",
    ] {
        i = line_after(&log, i + 1, needle);
    }
    assert!(!log.contains(&machine_token), "the log never holds the token");
    let leaked = model.requests().into_iter().filter(|r| r.body.to_string().contains(&machine_token)).count();
    assert_eq!(leaked, 0, "no request to either model carries the token (prompt, tool results, settings)");

    ok(owner, &["close", &id]);
    let (code, seen) = watch.finish();
    assert_eq!(code, 0, "{seen:#?}");
    let seen = seen.join("\n");
    let mut i = line_after(&seen, 0, "turn 2 running on codex");
    for needle in [
        "turn 2 done on codex: Planned",
        "turn 3 running on claude-code",
        "turn 3 done on claude-code: Reviewed",
        ", closed",
    ] {
        i = line_after(&seen, i + 1, needle);
    }
}

#[test]
fn a_dry_run_prints_the_exact_prompt_and_command_and_accepts_writes_and_starts_nothing() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(
        owner,
        &["turn", &id, "--to", "claude-code", "--objective", "Review the parser", "--purpose", "a second pair of eyes"],
    );
    let handed = record(&owner_token, &id);
    let hash = handed["package_hash"].as_str().unwrap().to_string();
    let model = ScriptedModel::start(vec![]);
    let m = Machine::new(&id, &machine_token, &model);

    let human = m.ok("a dry run", &["launch", &id, "--dry-run"]);
    let briefing = ok(
        Some(&machine_token),
        &["briefing", &id, "--budget", &CLAUDE_CODE_BUDGET_BYTES.to_string(), "--reach", "api"],
    );
    let prompt = prompt(&briefing, &access_paragraph(Runtime::ClaudeCode, &id, 2));
    let config = claude_code_mcp_config(env!("CARGO_BIN_EXE_handoff"));
    let expected = format!(
        "briefed from package v1 ({}…)\ndry run: nothing accepted, nothing started\nenv: HANDOFF_URL HANDOFF_ID HANDOFF_TOKEN_FILE\n\
         command: claude <prompt> --permission-mode default --mcp-config '{config}' --strict-mcp-config --allowedTools mcp__handoff\nprompt:\n{prompt}\n",
        &hash[..8]
    );
    assert_eq!(human.stdout, expected);

    let json = m.ok("a dry run in JSON", &["launch", &id, "--dry-run", "--print", "--json"]).json();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["command", "env_names", "package", "prompt"], "{json}");
    assert_eq!(json["prompt"], prompt.as_str());
    assert_eq!(
        json["command"],
        json!([
            "claude",
            "-p",
            prompt,
            "--permission-mode",
            "default",
            "--mcp-config",
            config,
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__handoff"
        ])
    );
    assert_eq!(json["env_names"], json!(["HANDOFF_URL", "HANDOFF_ID", "HANDOFF_TOKEN_FILE"]));
    assert_eq!(json["package"], json!({"version": 1, "hash": hash}));

    let after = record(&owner_token, &id);
    assert_eq!(after["version"], handed["version"], "nothing moved");
    let (_, latest) = api_get(&owner_token, &format!("/v1/handoffs/{id}/package"));
    assert_eq!(latest["state"], "offered", "nothing accepted");
    assert!(!m.home().join(".claude").exists(), "no hooks installed");
    let written: Vec<_> = std::fs::read_dir(m.work()).unwrap().flatten().filter(|e| e.file_name() != ".git").collect();
    assert!(m.log().is_empty() && written.is_empty(), "nothing written, nothing started: {written:?}");
    assert!(model.requests().is_empty(), "no harness ran");
}

#[test]
fn a_turn_without_a_package_is_briefed_from_the_work_record_and_what_codex_left_is_recorded() {
    let owner_token = owner();
    let (id, machine_token) = create(&owner_token);
    set_parser_work(&owner_token, &id);
    let model = ScriptedModel::start(codex_plans("Config parser"));
    let m = Machine::new(&id, &machine_token, &model);

    let refused = m.run("a launch naming no runtime", &["launch", &id], &[]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--runtime claude-code or --runtime codex"), "{refused:?}");

    let plan = m
        .ok("a dry run of codex for turn 1", &["launch", &id, "--runtime", "codex", "--print", "--dry-run", "--json"])
        .json();
    assert_eq!(plan["package"], Value::Null);
    let client = handoff_cli::Client::new(&url(), Some(&machine_token));
    let h = client.get(&id).unwrap().value;
    let work = client.work(&id).unwrap().value;
    let briefing = work_briefing(&h, &work, CODEX_BUDGET_BYTES).unwrap();
    assert_eq!(plan["prompt"], prompt(&briefing, &access_paragraph(Runtime::Codex, &id, 1)).as_str());
    assert!(plan["prompt"].as_str().unwrap().contains("## Next objective\nConfig parser\n"), "{plan}");

    // A Codex without the server (its entry switched off after the launcher's): the launcher
    // records what it left, hashing the file it named.
    let run = m.ok(
        "the launch of codex for turn 1",
        &["launch", &id, "--runtime", "codex", "--print", "--", "-c", "mcp_servers.handoff.enabled=false"],
    );
    assert!(run.stdout.starts_with("briefed from the work record\n"), "{run:?}");
    assert!(run.stdout.contains("recorded decision dec_1: Do \"Config parser\" in one pass over the input"), "{run:?}");
    assert!(run.stdout.contains("recorded done for turn 1"), "{run:?}");
    assert!(m.log().contains("briefed from the work record for codex on turn 1"), "{}", m.log());
    let r = record(&owner_token, &id);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str()), (Some(1), Some("done")), "{r}");
    let (_, work) = api_get(&owner_token, &format!("/v1/handoffs/{id}/work"));
    let artifact = &work["work"]["artifacts"][0];
    assert_eq!((artifact["title"].as_str(), artifact["type"].as_str()), (Some("plan.md"), Some("file")), "{work}");
    assert_eq!(
        artifact["sha256"],
        sha256_hex(m.file("plan.md").as_bytes()),
        "the launcher hashed the file Codex named"
    );
}

#[test]
fn a_package_that_moved_after_it_was_read_is_refused_with_its_code_and_the_next_launch_reads_the_new_one() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    let request = ["--objective", "Review the parser", "--purpose", "a second pair of eyes"];
    ok(owner, &[&["turn", &id, "--to", "claude-code"][..], &request].concat());
    let client = handoff_cli::Client::new(&url(), Some(&machine_token));
    let read = handoff_cli::machine::turn::prepare(&client, &id, None, None).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(read.package().map(|p| p.version), Some(1));

    // The owner recompiles after a new decision, between the launcher's read and its accept.
    ok(owner, &["decide", &id, "Comments start with #"]);
    let recompiled = ok(owner, &[&["package", &id, "--runtime", "claude-code"][..], &request].concat());
    assert!(recompiled.starts_with("package recompiled (v2"), "{recompiled}");
    let error = handoff_cli::machine::turn::accept(&client, &read).unwrap_err();
    assert_eq!(error.code().map(|c| c.as_str()), Some("package.stale"), "{error:?}");

    let model = ScriptedModel::start(vec![]);
    let m = Machine::new(&id, &machine_token, &model);
    let dry = m.ok("a dry run after the recompile", &["launch", &id, "--dry-run"]);
    assert!(dry.stdout.starts_with("briefed from package v2 ("), "{dry:?}");
}

#[test]
fn a_launch_is_refused_before_anything_is_accepted_for_another_runtime_an_ended_turn_a_missing_program_an_owner_token_or_no_work(
) {
    let (owner_token, id, machine_token) = started();
    ok(
        Some(&owner_token),
        &["turn", &id, "--to", "codex", "--objective", "Write the parser", "--purpose", "start the work"],
    );
    let model = ScriptedModel::start(vec![]);
    let m = Machine::new(&id, &machine_token, &model);
    let other = m.run("a launch of another runtime", &["launch", &id, "--runtime", "claude-code"], &[]);
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("turn 2 was handed to codex, not claude-code"), "{other:?}");

    let bare = Machine::new(&id, &machine_token, &model).bare();
    let missing = bare.run("a launch on a machine without codex", &["launch", &id, "--print"], &[]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("codex is not on PATH"), "{missing:?}");

    let as_owner = Machine::new(&id, &owner_token, &model);
    let owner_run = as_owner.run("a launch with the owner's token", &["launch", &id, "--print"], &[]);
    assert_eq!(owner_run.code, 2, "{owner_run:?}");
    assert!(owner_run.stderr.contains("owner's token"), "{owner_run:?}");
    let (_, latest) = api_get(&owner_token, &format!("/v1/handoffs/{id}/package"));
    assert_eq!(latest["state"], "offered", "nothing was accepted by the refused launches");

    ok(Some(&machine_token), &["report", &id, "--turn", "2", "--status", "done", "--summary", "done by hand"]);
    let ended = m.run("a launch of an ended turn", &["launch", &id], &[]);
    assert_eq!(ended.code, 2, "{ended:?}");
    assert!(ended.stderr.contains("turn 2 is done"), "{ended:?}");

    let owner_token = owner();
    let (bare_id, bare_machine) = create(&owner_token);
    let fresh = Machine::new(&bare_id, &bare_machine, &model);
    let nothing =
        fresh.run("a launch with no package and no work", &["launch", &bare_id, "--runtime", "codex", "--print"], &[]);
    assert_eq!(nothing.code, 2, "{nothing:?}");
    assert!(nothing.stderr.contains("set it with `handoff work` first"), "{nothing:?}");
    assert!(
        !fresh.codex_home().join("hooks.json").exists() && fresh.file("NOTES.md").is_empty(),
        "nothing installed, nothing started"
    );
    assert!(model.requests().is_empty(), "no harness ran");
}

#[test]
fn an_interrupted_interactive_codex_still_has_what_it_left_recorded_by_the_launcher() {
    let owner_token = owner();
    let (id, machine_token) = create(&owner_token);
    ok(Some(&owner_token), &["work", &id, "--title", "Config parser", "--goal", "Parse the config file"]);
    // The session decides, then waits for the person, who presses Ctrl-C at the terminal.
    let model = ScriptedModel::start(vec![
        Step::exec("printf 'Decision: Parse line by line\\n' >> NOTES.md"),
        Step::text("Noted the decision. What next?"),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    let exit_file = m.root.join("launch.exit");
    // A Codex without the server (its entry switched off after the launcher's): the fallback.
    let line = format!(
        "{} launch {id} --runtime codex -- -c mcp_servers.handoff.enabled=false; echo $? > {}",
        env!("CARGO_BIN_EXE_handoff"),
        exit_file.display()
    );
    let tmux = Tmux::start(&m.work(), &m.vars(), &["sh".into(), "-c".into(), line]);
    tmux.wait_for("What next?", Duration::from_secs(LAUNCH_S_MAX));
    assert!(m.file("NOTES.md").contains("Decision: Parse line by line"), "{}", tmux.screen());
    // Interactive, Codex's notify hook reports each of its turns done, with its last message.
    let done = |_: ()| Some(record(&owner_token, &id)).filter(|r| r["status"] == "done");
    let r = eventually(
        "the notify hook reports the turn done",
        Duration::from_secs(30),
        || done(()),
        || format!("screen:\n{}\nlog:\n{}", tmux.screen(), m.log()),
    );
    assert_eq!(r["summary"], "Noted the decision. What next?", "{r}");
    let ended = || std::fs::read_to_string(&exit_file).ok().map(|c| c.trim().to_string());
    let code = eventually(
        "the launch ends after Ctrl-C",
        Duration::from_secs(30),
        || {
            if ended().is_none() {
                tmux.keys(&["C-c"]);
            }
            std::thread::sleep(Duration::from_millis(500));
            ended()
        },
        || format!("screen:\n{}\nlog:\n{}", tmux.screen(), m.log()),
    );
    let log = m.log();
    assert!(
        log.contains("recorded decision dec_1: Parse line by line from what codex left"),
        "the launcher outlived the interrupt (exit {code}): {log}"
    );
    let (_, work) = api_get(&owner_token, &format!("/v1/handoffs/{id}/work"));
    assert_eq!(work["work"]["decisions"][0]["statement"], "Parse line by line", "{work}");
    // The turn keeps the hook's report: the launcher's own comes after the turn ended.
    let r = record(&owner_token, &id);
    assert_eq!(
        (r["status"].as_str(), r["summary"].as_str()),
        (Some("done"), Some("Noted the decision. What next?")),
        "{r}\n{log}"
    );
}
