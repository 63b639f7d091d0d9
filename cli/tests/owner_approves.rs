//! Nothing on the machine approves for the owner: a served turn with the real Claude Code or
//! Codex (the lockfile's versions), its model scripted, against the real local Worker, in a
//! workspace the model could have written: its own settings allow nothing, a program planted in
//! it never runs, serve refuses to run from inside it, and a Codex approval (a command's, a
//! network host's) reaches the owner whole.

mod common;
use common::harness::*;
use common::served::*;
use common::*;

use std::process::Stdio;
use std::time::Duration;

impl Served {
    /// A program named `name` in the workspace that leaves `name.ran` there when it runs.
    fn plant(&self, name: &str) -> std::path::PathBuf {
        let marker = self.machine.work().join(format!("{name}.ran"));
        let program = self.machine.work().join(name);
        std::fs::write(&program, format!("#!/bin/sh\necho planted > '{}'\nexit 0\n", marker.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        marker
    }
}

#[test]
fn a_workspace_whose_own_settings_allow_bash_still_has_the_owner_asked_and_is_named_in_the_log() {
    let command = "python3 -c 'open(\"ran.txt\", \"w\").write(\"ran\")'";
    let mut s = Served::create("Run the script.", vec![Step::bash(command), Step::text("Left it.")], &[]);
    let settings = s.machine.work().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
    s.serve_with(&[]);

    let asked = s.question();
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert!(asked["input"].as_str().is_some_and(|i| i.starts_with(command)), "the owner is asked: {asked}");
    let log = s.machine.log();
    assert!(
        log.contains(&settings.display().to_string()) && log.contains("not applied to this served turn"),
        "serve's log names the workspace's own settings: {log}"
    );
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", asked["id"].as_str().unwrap()]);
    s.until("turn 1 is done", |r| r["status"] == "done");
    assert!(!s.machine.work().join("ran.txt").exists(), "the denied command did not run");
    s.close();
}

#[test]
fn a_claude_planted_in_the_workspace_is_never_run_as_the_harness() {
    let mut s = Served::create("Say hello.", vec![Step::text("Hello.")], &[]);
    let ran = s.plant("claude");
    // An empty entry first: the current folder, the workspace, for a lookup that reads it so.
    let path = format!(":{}", s.machine.path());
    s.serve_with(&[("PATH", &path)]);
    let done = s.until("turn 1 is done", |r| r["status"] == "done");
    assert_eq!(done["summary"], "Hello.", "the real Claude Code ran the turn: {done}");
    assert!(!ran.exists(), "the planted claude never ran\n{}", s.context());
    s.close();
}

#[test]
fn an_approved_command_never_runs_a_python3_planted_in_the_workspace() {
    let mut s = Served::create(
        "Print the answer.",
        vec![Step::bash("python3 -c 'print(6 * 7)'"), Step::text("Printed it.")],
        &[],
    );
    let ran = s.plant("python3");
    let path = format!(":.:{}", s.machine.path());
    s.serve_with(&[("PATH", &path)]);
    let asked = s.question();
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", asked["id"].as_str().unwrap()]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(STEP_S))
        .unwrap_or_else(|| panic!("the command's result reached the model\n{}", s.context()));
    assert!(result.to_string().contains("42"), "the system's python3 ran it: {result}");
    s.until("turn 1 is done", |r| r["status"] == "done");
    assert!(!ran.exists(), "the planted python3 never ran: {result}");
    s.close();
}

#[test]
fn serve_refuses_to_start_when_its_program_or_its_state_folder_lies_inside_the_workspace() {
    let s = Served::create("Say hello.", vec![], &[]);
    let planted = s.machine.work().join("bin/handoff");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_handoff"), &planted).unwrap();
    let mut cmd = std::process::Command::new(&planted);
    cmd.args(["serve", &s.id]).env_clear().envs(s.machine.vars()).current_dir(s.machine.work());
    let r = run_bounded("serve run from the workspace", cmd, 30);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("this program") && r.stderr.contains("inside the workspace"), "{r:?}");

    let state = s.machine.work().join(".handoff-state");
    let r = s.machine.run(
        "serve keeping its state in the workspace",
        &["serve", &s.id],
        &[("HANDOFF_STATE_DIR", &state.display().to_string())],
    );
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("the state folder") && r.stderr.contains("inside the workspace"), "{r:?}");
    assert!(!state.exists(), "nothing was written there");
    assert_eq!(s.record()["status"], "running", "no turn was touched");
    assert!(s.model.agent_requests().is_empty());
}

#[test]
fn a_codex_workspace_whose_own_config_never_asks_still_has_the_owner_asked_and_its_config_is_not_applied() {
    let marker = unique("project-config-marker");
    let mut s = Served::create(
        "Make a proof file.",
        vec![Step::exec("printf made > proof.txt"), Step::text("Left it.")],
        &["--runtime", "codex"],
    );
    let config = s.machine.work().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let project = format!(
        "approval_policy = \"never\"\napprovals_reviewer = \"auto_review\"\ndeveloper_instructions = \"{marker}\"\n\n\
         [sandbox_workspace_write]\nnetwork_access = true\n"
    );
    std::fs::write(&config, project).unwrap();
    s.serve_with(&[]);

    let asked = s.question();
    assert!(asked["input"].as_str().is_some_and(|i| i.contains("printf made > proof.txt")), "{asked}");
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", asked["id"].as_str().unwrap()]);
    s.until("turn 1 is done", |r| r["status"] == "done");
    assert!(!s.machine.work().join("proof.txt").exists());
    let requests = s.model.requests();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|r| !r.body.to_string().contains(&marker)),
        "the workspace's .codex/config.toml was not applied"
    );
    assert!(s.machine.log().contains(&config.display().to_string()), "serve's log names it: {}", s.machine.log());
    s.close();
}

#[test]
fn a_codex_approval_reaches_the_owner_whole_with_the_rule_codex_proposes_and_allow_adds_no_rule() {
    let command = "curl -s -m 5 http://blocked.example.com/ -o /dev/null; echo curl-exit-$?";
    let mut s = Served::create(
        "Fetch it.",
        vec![Step::exec(command), Step::exec(command), Step::text("Fetched.")],
        &["--runtime", "codex"],
    );
    s.serve_with(&[]);
    let asked = s.question();
    let input = asked["input"].as_str().unwrap_or_default();
    for shown in
        [command, "in ", "Codex proposes a rule to run commands starting", "Allow runs this once and adds no rule"]
    {
        assert!(input.contains(shown), "{shown:?} is shown: {input}");
    }
    assert!(asked["text"].as_str().is_some_and(|t| t.starts_with("Command: ")), "{asked}");
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", asked["id"].as_str().unwrap()]);
    // The same command again is asked again: the Allow added no rule.
    let again = s.until("the same command is asked again", |r| {
        r["question"]["id"].is_string() && r["question"]["id"] != asked["id"] && r["question"]["answer"].is_null()
    });
    assert_eq!(again["question"]["input"], asked["input"], "{again}");
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", again["question"]["id"].as_str().unwrap()]);
    s.until("turn 1 is done", |r| r["status"] == "done");
    s.close();
}

/// Codex 0.169.0 asks a network approval (`networkApprovalContext`) only where its managed
/// network proxy has a decider, and it gives it one only under a managed network requirement:
/// a `[experimental_network]` table in `/etc/codex/requirements.toml`, the administrator's
/// file, never the user's config (without it an allowlist miss is refused unasked, "domain is
/// not on the allowlist"). So serve runs in a private mount namespace whose `/etc` is an overlay
/// holding that file, seen by this serve and its Codex only (`unshare` and `mount`, as root).
fn serve_under_a_managed_network_requirement(s: &mut Served) {
    let config = s.machine.codex_home().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    // The machine's person turns the proxy on in their own config: commands reach the network
    // only through it.
    text.push_str("\n[sandbox_workspace_write]\nnetwork_access = true\n\n[features.network_proxy]\nenabled = true\n");
    std::fs::write(&config, text).unwrap();
    let overlay = s.machine.root.join("etc");
    std::fs::create_dir_all(overlay.join("upper/codex")).unwrap();
    std::fs::create_dir_all(overlay.join("work")).unwrap();
    std::fs::write(overlay.join("upper/codex/requirements.toml"), "[experimental_network]\nenabled = true\n").unwrap();
    let script = format!(
        "mount -t overlay overlay -o lowerdir=/etc,upperdir={0}/upper,workdir={0}/work /etc && exec \"$@\"",
        overlay.display()
    );
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script, "sh", env!("CARGO_BIN_EXE_handoff")])
        .args(["serve", &s.id, "--runtime", "codex"])
        .env_clear()
        .envs(s.machine.vars())
        .current_dir(s.machine.work())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    s.serve = Some(cmd.spawn().expect("unshare starts serve"));
}

#[test]
fn a_codex_network_approval_shows_the_owner_its_host_and_a_deny_keeps_the_host_unreached() {
    let host = "handoff-network-approval.example.com";
    let command = format!("curl -s -m 30 -o /dev/null -w 'http-%{{http_code}}' http://{host}/; echo \" curl-exit-$?\"");
    let mut s = Served::create("Fetch it.", vec![Step::exec(&command), Step::text("Fetched.")], &[]);
    serve_under_a_managed_network_requirement(&mut s);
    // In `untrusted` the command itself is asked first.
    let command_question = s.question();
    assert!(command_question["text"].as_str().is_some_and(|t| t.starts_with("Command: ")), "{command_question}");
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", command_question["id"].as_str().unwrap()]);
    // Then its request to the host, through the proxy: the owner reads the host whole.
    let r = s.until("the network approval is asked", |r| {
        r["question"]["id"].is_string() && r["question"]["id"] != command_question["id"]
    });
    let asked = &r["question"];
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert_eq!(asked["text"], format!("Network access: {host} over http"), "{asked}");
    let input = asked["input"].as_str().unwrap_or_default();
    for shown in [
        format!("{host} over http"),
        format!("reason: Network access to {host} requires approval"),
        format!("Codex proposes a network rule: allow {host} from now on; Allow answers this once and adds no rule"),
    ] {
        assert!(input.contains(&shown), "{shown:?} is shown: {input}");
    }
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", asked["id"].as_str().unwrap()]);
    let result = s
        .model
        .result_of("call_1", Duration::from_secs(STEP_S))
        .unwrap_or_else(|| panic!("the command's result reached the model\n{}", s.context()));
    assert!(!result.to_string().contains("http-200"), "the denied host was not reached: {result}");
    s.until("turn 1 is done", |r| r["status"] == "done");
    s.close();
}
