//! The real Claude Code (the lockfile's version) against the real local Worker, its model
//! scripted: a turn launched in print mode by `handoff launch`, and interactive sessions under
//! tmux whose permission prompts the owner answers from afar, as the hooks that `handoff hook
//! install claude-code` writes run them.

mod common;
use common::harness::*;
use common::*;
use serde_json::Value;
use std::time::Duration;

fn work(owner: &str, id: &str) -> Value {
    api_get(owner, &format!("/v1/handoffs/{id}/work")).1["work"].clone()
}

#[test]
fn a_print_mode_turn_launched_by_handoff_launch_reports_records_and_ends_done() {
    let (owner_token, id, machine_token) = started();
    let owner = Some(owner_token.as_str());
    ok(
        owner,
        &["turn", &id, "--to", "claude-code", "--objective", "Review the parser", "--purpose", "a second pair of eyes"],
    );
    let decision = "Keep the recursive descent parser";
    let model = ScriptedModel::start(vec![
        Step::load_tools(&["mcp__handoff__record_decision"]),
        Step::Call {
            name: "mcp__handoff__record_decision".into(),
            input: serde_json::json!({"statement": decision, "rationale": "the grammar is small"}),
        },
        Step::text("Reviewed the parser: it holds."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);

    let launched = m.run("handoff launch for claude-code", &["launch", &id, "--print"], &[]);
    assert_eq!(launched.code, 0, "{launched:?}\nlog:\n{}", m.log());

    // The briefing was the model's prompt.
    let first = model.agent_requests().into_iter().next().expect("Claude Code asked the model");
    let prompt = first.text();
    assert!(
        prompt.contains("Review the parser") && prompt.contains("record_decision"),
        "the briefing is the prompt: {prompt}"
    );
    // Claude Code lists the server's tools as deferred, by name, and loads them on request.
    assert!(first.body.to_string().contains("mcp__handoff__record_decision"), "Claude Code offered the server's tools");
    let loaded = model.result_of("call_1", Duration::from_secs(1)).expect("ToolSearch answered");
    assert!(loaded.to_string().contains("mcp__handoff__record_decision"), "{loaded}");
    // The scripted call of the server's tool ran under the launcher's allow rule, and is on the record.
    let result = model.result_of("call_2", Duration::from_secs(1)).expect("the tool's result reached the model");
    // Claude Code hands the model a tool's structured content when it has one, not its text.
    assert!(
        result.to_string().contains("dec_1") && result.to_string().contains(decision),
        "the server recorded it: {result}"
    );
    let decisions = work(&owner_token, &id)["decisions"].clone();
    assert_eq!(decisions[0]["statement"], decision, "{decisions}");
    assert_eq!(decisions[0]["by"], "machine", "{decisions}");
    // Stop reported done with the model's last text.
    let r = record(&owner_token, &id);
    assert_eq!(
        (r["turn"].as_u64(), r["status"].as_str(), r["summary"].as_str()),
        (Some(2), Some("done"), Some("Reviewed the parser: it holds.")),
        "{r}"
    );
    // SessionStart reported the runtimes, UserPromptSubmit running.
    let log = m.log();
    assert!(log.contains("delivered runtimes (") && log.contains("from SessionStart"), "{log}");
    assert!(log.contains("delivered running for turn 2 from UserPromptSubmit"), "{log}");
    assert!(log.contains("claude-code runs in permission mode default"), "the launcher says which mode and why: {log}");
    let runtimes = r["machine_runtimes"].clone();
    let claude = runtimes["runtimes"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "claude-code").cloned())
        .unwrap_or_default();
    assert_eq!(claude["version"].as_str().map(|v| v.starts_with("2.1.328")), Some(true), "{runtimes}");
    // `claude auth status` counts the API key in the environment as signed in.
    assert_eq!(claude["signed_in"], true, "{runtimes}");
    assert!(!log.contains(&machine_token), "the log never holds the token");
    // The decision was on the record while the session ran: before the turn ended.
    let (_, turns) = api_get(&owner_token, &format!("/v1/handoffs/{id}/turns"));
    let ended = turns["turns"][1]["ended_at"].as_str().unwrap_or_default().to_string();
    assert!(decisions[0]["recorded_at"].as_str().is_some_and(|at| at < ended.as_str()), "{decisions} {turns}");
}

/// An interactive Claude Code under tmux on a fresh hand-off (turn 1 running), its hooks
/// installed by `handoff hook install claude-code` with `answer_wait_s` as the owner's wait,
/// in the default permission mode (the launcher's), asked to go on.
struct Interactive {
    owner: String,
    id: String,
    model: ScriptedModel,
    machine: Machine,
    tmux: Tmux,
    /// The owner's `wait --follow`, from before the session started.
    watch: std::cell::RefCell<Follower>,
}

impl Interactive {
    fn start(steps: Vec<Step>, answer_wait_s: u64) -> Interactive {
        Interactive::start_in(steps, answer_wait_s, Some("default"))
    }

    /// [`Interactive::start`] in permission mode `mode` (`None`: Claude Code's own default).
    fn start_in(steps: Vec<Step>, answer_wait_s: u64, mode: Option<&str>) -> Interactive {
        let owner = owner();
        let (id, machine_token) = create(&owner);
        let mut watch = Follower::start(&owner, &["wait", &id, "--follow"]);
        watch.expect("v1");
        let model = ScriptedModel::start(steps);
        let machine = Machine::new(&id, &machine_token, &model);
        let wait = answer_wait_s.to_string();
        let installed =
            machine.run("hook install", &["hook", "install", "claude-code"], &[("HANDOFF_ANSWER_WAIT_S", &wait)]);
        assert_eq!(installed.code, 0, "{installed:?}");
        let mut vars = machine.vars();
        vars.push(("HANDOFF_ANSWER_WAIT_S".into(), wait));
        let mut argv = vec![harness_bin("claude").display().to_string()];
        if let Some(mode) = mode {
            argv.extend(["--permission-mode".to_string(), mode.to_string()]);
        }
        argv.push("Go on with the work.".into());
        let tmux = Tmux::start(&machine.work(), &vars, &argv);
        Interactive { owner, id, model, machine, tmux, watch: std::cell::RefCell::new(watch) }
    }

    fn record(&self) -> Value {
        record(&self.owner, &self.id)
    }

    /// Waits for the hook's question to be on the record, open; answers its id.
    fn question(&self) -> String {
        let open =
            |r: &Value| r["question"]["id"].as_str().filter(|_| r["question"]["answer"].is_null()).map(str::to_string);
        eventually("the hook asks the owner", Duration::from_secs(60), || open(&self.record()), || self.context())
    }

    fn context(&self) -> String {
        format!("record: {}\nscreen:\n{}\nlog:\n{}", self.record(), self.tmux.screen(), self.machine.log())
    }

    /// Waits for the turn's status to be `status`.
    fn status(&self, status: &str) -> Value {
        eventually(
            &format!("the turn is {status}"),
            Duration::from_secs(60),
            || Some(self.record()).filter(|r| r["status"] == status),
            || self.context(),
        )
    }
}

#[test]
fn a_permission_prompt_left_unanswered_at_the_terminal_for_30_s_is_answered_allow_from_the_api_and_the_tool_runs() {
    let s = Interactive::start(vec![Step::bash("touch proof.txt"), Step::text("Made the proof.")], 90);
    let q = s.question();
    let r = s.record();
    assert_eq!(
        (r["status"].as_str(), r["question"]["kind"].as_str(), r["question"]["text"].as_str()),
        (Some("needs-you"), Some("permission"), Some("Bash: touch proof.txt")),
        "{r}"
    );
    s.tmux.wait_for("Do you want to proceed?", Duration::from_secs(30));
    // Past Claude Code's own notification of the waiting prompt: the question is still open.
    std::thread::sleep(Duration::from_secs(30));
    let log = s.machine.log();
    assert!(log.contains("from Notification"), "Claude Code notified of its waiting prompt: {log}");
    assert_eq!(s.record()["question"]["id"].as_str(), Some(q.as_str()), "{}", s.context());

    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    assert!(
        !result.to_string().contains("needs approval") && !result.to_string().contains("denied"),
        "the tool ran: {result}"
    );
    assert!(s.machine.work().join("proof.txt").exists(), "touch ran: {}", s.context());
    let done = s.status("done");
    assert_eq!(done["summary"], "Made the proof.", "{done}");
}

#[test]
fn a_permission_prompt_denied_from_the_api_with_a_note_gives_the_model_the_note() {
    let s = Interactive::start(vec![Step::bash("touch proof.txt"), Step::text("Left the folder alone.")], 90);
    let q = s.question();
    std::thread::sleep(Duration::from_secs(10));
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", &q, "--note", "not in this folder"]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    assert!(result.to_string().contains("not in this folder"), "the model reads the owner's note: {result}");
    assert!(!s.machine.work().join("proof.txt").exists(), "touch did not run");
    assert_eq!(s.status("done")["summary"], "Left the folder alone.");
}

#[test]
fn with_no_answer_in_time_the_person_answers_at_the_terminal_and_the_turn_runs_again() {
    let s = Interactive::start(vec![Step::bash("touch proof.txt"), Step::text("Made the proof.")], 3);
    s.question();
    let log = eventually(
        "the hook gives the prompt back to the terminal",
        Duration::from_secs(30),
        || Some(s.machine.log()).filter(|l| l.contains("no answer within 3 s")),
        || s.context(),
    );
    assert!(log.contains("the harness asks at its terminal"), "{log}");
    s.tmux.wait_for("Do you want to proceed?", Duration::from_secs(10));
    s.tmux.keys(&["Enter"]);
    s.model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    assert!(s.machine.work().join("proof.txt").exists(), "the person let touch run: {}", s.context());
    let log = eventually(
        "PostToolUse reports running",
        Duration::from_secs(30),
        || Some(s.machine.log()).filter(|l| l.contains("delivered running for turn 1 from PostToolUse")),
        || s.context(),
    );
    assert!(!log.contains(&s.machine.token));
    assert_eq!(s.status("done")["summary"], "Made the proof.");
}

#[test]
fn ask_user_question_asks_the_owner_its_own_question_and_the_model_receives_the_choice() {
    let question = serde_json::json!({"questions": [{"question": "Which database?", "header": "Database", "multiSelect": false,
        "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "one file"}]}]});
    let s = Interactive::start(
        vec![Step::Call { name: "AskUserQuestion".into(), input: question }, Step::text("SQLite it is.")],
        90,
    );
    let q = s.question();
    let asked = s.record()["question"].clone();
    assert_eq!((asked["kind"].as_str(), asked["text"].as_str()), (Some("choice"), Some("Which database?")), "{asked}");
    let labels: Vec<&str> = asked["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Postgres", "SQLite"], "{asked}");
    ok(Some(&s.owner), &["answer", &s.id, "2", "--question", &q, "--note", "one file is enough"]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    let text = result.as_str().map_or_else(|| result.to_string(), str::to_string);
    assert!(
        text.contains("\"Which database?\"=\"SQLite (note: one file is enough)\""),
        "the model receives the person's choice and note, not a bare allow: {text}"
    );
    assert_eq!(s.status("done")["summary"], "SQLite it is.");
}

#[test]
fn in_its_own_default_mode_claude_code_asks_nothing_and_the_record_says_so() {
    // Claude Code 2.1.328 starts interactive sessions in `auto`: the touch runs unasked.
    let s = Interactive::start_in(vec![Step::bash("touch proof.txt"), Step::text("Made the proof.")], 90, None);
    // The runtimes' report (SessionStart) is one version, the prompt's running report the next.
    let mut watch = s.watch.borrow_mut();
    let running = (0..4)
        .map(|_| watch.expect("v"))
        .find(|line| line.contains("turn 1 running:"))
        .unwrap_or_else(|| panic!("{:#?}", watch.seen));
    assert!(running.contains("permission mode auto") && running.contains("no question will come"), "{running}");
    drop(watch);
    assert_eq!(s.status("done")["summary"], "Made the proof.");
    assert!(s.machine.work().join("proof.txt").exists(), "auto ran the command: {}", s.context());
    assert!(!s.machine.log().contains("PermissionRequest"), "nothing was asked: {}", s.machine.log());
}

#[test]
fn ask_owner_answered_from_the_api_reaches_the_model_as_the_tools_result() {
    let (owner_token, id, machine_token) = started();
    ok(
        Some(&owner_token),
        &["turn", &id, "--to", "claude-code", "--objective", "Pick a database", "--purpose", "the owner decides"],
    );
    let ask = serde_json::json!({"question": "Postgres or SQLite?", "options": ["Postgres", "SQLite"], "wait_s": 60});
    let model = ScriptedModel::start(vec![
        Step::load_tools(&["mcp__handoff__ask_owner"]),
        Step::Call { name: "mcp__handoff__ask_owner".into(), input: ask },
        Step::text("SQLite, as the owner chose."),
    ]);
    let m = Machine::new(&id, &machine_token, &model);
    let mut cmd = m.handoff(&["launch", &id, "--print"]);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut launched = cmd.spawn().unwrap();
    let asked = eventually(
        "the session asks its owner",
        Duration::from_secs(60),
        || Some(record(&owner_token, &id)).filter(|r| r["question"]["kind"] == "choice"),
        || m.log(),
    );
    assert_eq!(asked["question"]["text"], "Postgres or SQLite?", "{asked}");
    let q = asked["question"]["id"].as_str().unwrap().to_string();
    ok(Some(&owner_token), &["answer", &id, "2", "--question", &q, "--note", "one file is enough"]);
    let result = model
        .result_of("call_2", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the answer reached the model\n{}", m.log()));
    // Claude Code hands the model the structured content: the chosen option, its label, the note.
    let answer: Value = serde_json::from_str(result.as_str().unwrap_or("null")).unwrap_or_default();
    assert_eq!(
        answer,
        serde_json::json!({"answered": true, "option": "2", "label": "SQLite", "note": "one file is enough"}),
        "{result}"
    );
    let status = launched.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", m.log());
    assert_eq!(record(&owner_token, &id)["summary"], "SQLite, as the owner chose.");
}

#[test]
fn exit_plan_mode_asks_the_owner_to_approve_leaving_plan_mode_and_the_model_reads_a_deny_note() {
    let plan = serde_json::json!({"plan": "1. Parse the header\n2. Parse the body"});
    let s = Interactive::start_in(
        vec![Step::Call { name: "ExitPlanMode".into(), input: plan }, Step::text("Planning on.")],
        90,
        Some("plan"),
    );
    let q = s.question();
    let asked = s.record()["question"].clone();
    assert_eq!(
        (asked["kind"].as_str(), asked["text"].as_str()),
        (Some("permission"), Some(handoff_cli::hook::claude_code::EXIT_PLAN_TEXT)),
        "{asked}"
    );
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", &q, "--note", "parse the footer too"]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    assert!(result.to_string().contains("parse the footer too"), "the model reads the owner's note: {result}");
    assert_eq!(s.status("done")["summary"], "Planning on.");
}

#[test]
fn the_models_shell_in_a_launched_claude_code_has_no_token_only_the_files_path() {
    let (owner_token, id, machine_token) = started();
    ok(
        Some(&owner_token),
        &["turn", &id, "--to", "claude-code", "--objective", "Look around", "--purpose", "the token's reach"],
    );
    let command = "echo \"TOKEN=[${HANDOFF_TOKEN:-}] FILE=[${HANDOFF_TOKEN_FILE:-}]\"";
    let model = ScriptedModel::start(vec![Step::bash(command), Step::text("Looked.")]);
    let m = Machine::new(&id, &machine_token, &model);
    let launch = m
        .handoff(&["launch", &id, "--print"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Claude Code asks before a command that expands variables: the owner is shown it whole.
    let q = eventually(
        "the permission question",
        Duration::from_secs(60),
        || {
            let r = record(&owner_token, &id);
            (r["question"]["answer"].is_null() && r["question"]["input"] == command)
                .then(|| r["question"]["id"].as_str().map(str::to_string))
                .flatten()
        },
        || m.log(),
    );
    ok(Some(&owner_token), &["answer", &id, "allow", "--question", &q]);
    let out = launch.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}\nlog:\n{}", m.log());
    let seen =
        model.result_of("call_1", Duration::from_secs(1)).expect("the command's output reached the model").to_string();
    assert!(
        seen.contains("TOKEN=[]") && !seen.contains(&machine_token),
        "the launcher took HANDOFF_TOKEN out of Claude Code's environment: {seen}"
    );
    // Claude Code hands its whole environment to Bash: the file's path is there, and a model
    // running as the same user could read it (docs/cloud-machine.md says so).
    assert!(seen.contains("FILE=[/") && seen.contains(".token]"), "{seen}");
    // The hooks and the MCP server found the token through the file.
    assert_eq!(record(&owner_token, &id)["status"], "done", "log:\n{}", m.log());
}
