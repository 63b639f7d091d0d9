//! The machine reporters (issue 14), run as the harnesses run them: the real `handoff` binary,
//! one process per event, fed the recorded documents of `test/fixtures/hooks/`, against the
//! real local Worker. Each hook must exit 0 within its budget and print nothing.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `HOOK_BUDGET_MS`, and the slack a process start and exit may add on a busy machine.
const BUDGET: Duration = Duration::from_millis(handoff_cli::hook::HOOK_BUDGET_MS);
const SLACK: Duration = Duration::from_millis(1_500);
/// Nothing listens here: a connection is refused at once, as with the Worker stopped.
const DOWN_URL: &str = "http://127.0.0.1:9";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../test/fixtures/hooks")
}

/// A Claude Code document, its transcript path pointed at the recorded transcript.
fn claude_document(name: &str) -> String {
    let text = std::fs::read_to_string(fixtures().join("claude-code").join(name)).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["transcript_path"] = json!(fixtures().join("claude-code/transcript.jsonl"));
    doc.to_string()
}

/// One machine: its state directory, and a PATH whose `claude` and `codex` answer as told.
struct Machine {
    id: String,
    token: String,
    dir: PathBuf,
    bin: PathBuf,
}

impl Machine {
    fn new(id: &str, token: &str, codex_signed_in: bool) -> Machine {
        let dir = std::env::temp_dir().join(unique("handoff-hooks"));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let codex_login = if codex_signed_in {
            "echo 'Logged in using ChatGPT' >&2; exit 0"
        } else {
            "echo 'Not logged in' >&2; exit 1"
        };
        script(
            &bin.join("claude"),
            "case \"$1\" in --version) echo '2.1.50 (Claude Code)';; auth) echo '{\"loggedIn\": true}';; esac",
        );
        script(
            &bin.join("codex"),
            &format!("case \"$1\" in --version) echo 'codex-cli 0.50.0';; login) {codex_login};; esac"),
        );
        Machine { id: id.into(), token: token.into(), dir, bin }
    }

    /// Runs `handoff hook ARGS` with `stdin`, as the harness would; checks the hook's promises.
    fn hook(&self, url: &str, args: &[&str], stdin: &str) -> Duration {
        let mut all = vec!["hook"];
        all.extend_from_slice(args);
        let mut cmd = command(Some(&self.token), &all);
        cmd.env("HANDOFF_URL", url)
            .env("HANDOFF_ID", &self.id)
            .env("HANDOFF_STATE_DIR", &self.dir)
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0), "a hook always exits 0: {args:?} {out:?}");
        assert!(
            out.stdout.is_empty(),
            "a hook prints nothing a harness could read: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(took < BUDGET + SLACK, "{args:?} took {took:?}, past its budget");
        took
    }

    fn claude(&self, url: &str, fixture: &str) -> Duration {
        self.hook(url, &["claude-code"], &claude_document(fixture))
    }

    fn flush(&self, url: &str) -> Run {
        let mut cmd = command(Some(&self.token), &["hook", "flush"]);
        cmd.env("HANDOFF_URL", url).env("HANDOFF_ID", &self.id).env("HANDOFF_STATE_DIR", &self.dir);
        let out = cmd.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    fn spooled(&self) -> usize {
        std::fs::read_to_string(self.dir.join("spool").join(format!("{}.jsonl", self.id)))
            .map_or(0, |t| t.lines().count())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("hook.log")).unwrap_or_default()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Turn 1 done by hand, then turn 2 handed to claude-code: the session the hooks report on.
fn handed_to_claude_code(owner: &str, id: &str, machine: &str) {
    ok(Some(machine), &["report", id, "--turn", "1", "--status", "done", "--summary", "set up"]);
    ok(Some(owner), &["work", id, "--title", "Parser", "--goal", "Accept empty input"]);
    ok(Some(owner), &["turn", id, "--to", "claude-code", "--objective", "Accept empty input", "--purpose", "continue"]);
}

#[test]
fn a_whole_claude_code_session_reports_each_status_and_suggests_only_an_available_runtime() {
    let owner = owner();
    let (id, machine_token) = create(&owner);
    ok(
        Some(&owner),
        &[
            "policy",
            &id,
            "--runtime",
            "claude-code",
            "--runtime",
            "codex",
            "--runtime",
            "gemini",
            "--context-threshold-pct",
            "80",
        ],
    );
    handed_to_claude_code(&owner, &id, &machine_token);
    let m = Machine::new(&id, &machine_token, true);
    let url = url();

    m.claude(&url, "01-session-start.json");
    let r = record(&owner, &id);
    let runtimes = &r["machine_runtimes"]["runtimes"];
    assert_eq!(
        runtimes[0],
        json!({"name": "claude-code", "version": "2.1.50 (Claude Code)", "signed_in": true}),
        "{r}"
    );
    assert_eq!(runtimes[1], json!({"name": "codex", "version": "codex-cli 0.50.0", "signed_in": true}), "{r}");
    assert_eq!(runtimes.as_array().map(Vec::len), Some(2), "gemini is not installed");

    let started = r["version"].as_u64().unwrap();
    m.claude(&url, "02-user-prompt-submit.json");
    let r = record(&owner, &id);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str()), (Some(2), Some("running")), "{r}");
    assert_eq!(
        r["version"], started,
        "turn 2 was already running, and its runtimes were reported at the session's start"
    );

    m.claude(&url, "03-notification-permission.json");
    let r = record(&owner, &id);
    assert_eq!(
        (r["status"].as_str(), r["summary"].as_str()),
        (Some("needs-you"), Some("Claude needs your permission to use Bash"))
    );

    m.claude(&url, "04-post-tool-use.json");
    assert_eq!(record(&owner, &id)["status"], "running", "the person let the tool run");

    let v = version(&owner, &id);
    m.claude(&url, "05-stop.json");
    let r = record(&owner, &id);
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["summary"], "Done: the parser accepts empty input, and all 42 tests pass.");
    let s = &r["suggestion"];
    assert_eq!(
        (s["reason"].as_str(), s["turn"].as_u64()),
        (Some("context-threshold"), Some(2)),
        "170,012 of 200,000 tokens: {r}"
    );
    assert_eq!(s["runtimes"], json!(["codex"]), "not claude-code (this turn's), not gemini (absent)");
    assert_eq!(r["version"], v + 1, "done and its suggestion are one change");

    m.claude(&url, "06-notification-idle.json");
    m.claude(&url, "07-session-end.json");
    m.claude(&url, "05-stop.json");
    let after = record(&owner, &id);
    assert_eq!(
        after["version"], r["version"],
        "nothing is reported for a turn that has ended, and the suggestion came once"
    );
    assert_eq!(m.spooled(), 0, "everything was delivered");
    let log = m.log();
    assert!(log.contains("delivered done for turn 2"), "{log}");
    assert!(log.contains("not reporting needs-you: turn 2 has ended"), "{log}");
}

#[test]
fn a_codex_turn_is_done_with_its_last_message() {
    let owner = owner();
    let (id, machine_token) = create(&owner);
    let m = Machine::new(&id, &machine_token, true);
    let argument = std::fs::read_to_string(fixtures().join("codex/agent-turn-complete.json")).unwrap();
    m.hook(&url(), &["codex", argument.trim()], "");
    let r = record(&owner, &id);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str()), (Some(1), Some("done")), "{r}");
    assert_eq!(r["summary"], "Rename complete: `foo` is now `bar` in 7 files, and the tests pass.");
    m.hook(&url(), &["codex", argument.trim()], "");
    assert_eq!(record(&owner, &id)["version"], r["version"], "the same turn is not done twice");
}

#[test]
fn reports_made_while_the_service_is_down_land_in_order_once_and_a_finished_turns_are_dropped() {
    let owner = owner();
    let (id, machine_token) = create(&owner);
    let m = Machine::new(&id, &machine_token, true);
    let url = url();
    m.claude(&url, "02-user-prompt-submit.json");
    let v = version(&owner, &id);

    // The network is cut between two hooks: each still returns within its budget.
    m.claude(DOWN_URL, "03-notification-permission.json");
    m.claude(DOWN_URL, "05-stop.json");
    assert_eq!(m.spooled(), 2);
    assert_eq!(version(&owner, &id), v, "nothing arrived while the service was down");

    // Back: the spool is delivered in order before anything else.
    let flushed = m.flush(&url);
    assert_eq!(
        (flushed.code, flushed.stdout.trim_end().split(" (log").next()),
        (0, Some("delivered 2, dropped 0, left 0")),
        "{flushed:?}"
    );
    let r = record(&owner, &id);
    assert_eq!(
        (r["status"].as_str(), r["summary"].as_str()),
        (Some("done"), Some("Done: the parser accepts empty input, and all 42 tests pass."))
    );
    assert_eq!(
        r["version"],
        v + 2,
        "needs-you then done, each once (had done come first, needs-you would have been refused)"
    );
    assert!(
        m.flush(&url).stdout.starts_with("delivered 0, dropped 0, left 0"),
        "a delivered entry is never sent again"
    );

    // A report spooled for a turn that ends before it can be delivered is dropped, not applied.
    ok(Some(&owner), &["turn", &id]);
    m.claude(&url, "02-user-prompt-submit.json");
    m.claude(DOWN_URL, "03-notification-permission.json");
    ok(Some(&owner), &["cancel", &id]);
    let v = version(&owner, &id);
    let flushed = m.flush(&url);
    assert!(flushed.stdout.starts_with("delivered 0, dropped 1, left 0"), "{flushed:?}");
    let r = record(&owner, &id);
    assert_eq!((r["status"].as_str(), r["version"].as_u64()), (Some("cancelled"), Some(v)));
    assert!(
        m.log().contains("dropped needs-you for turn 2 from Notification: 409 handoff.turn_finished"),
        "{}",
        m.log()
    );
}

#[test]
fn a_hook_keeps_its_budget_when_the_service_never_answers() {
    let owner = owner();
    let (id, machine_token) = create(&owner);
    let m = Machine::new(&id, &machine_token, true);
    m.claude(&url(), "02-user-prompt-submit.json");
    // A listener that takes connections and never answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let took = m.claude(&silent_url, "03-notification-permission.json");
    assert!(took >= Duration::from_millis(handoff_cli::hook::HOOK_REQUEST_MS), "it did wait for an answer: {took:?}");
    assert_eq!(m.spooled(), 1, "the report waits in the spool");
    drop(silent);
    assert!(m.flush(&url()).stdout.starts_with("delivered 1,"));
    assert_eq!(record(&owner, &id)["status"], "needs-you");
}

#[test]
fn runtimes_detect_reports_what_the_machine_has_and_handing_off_to_a_signed_out_one_is_refused() {
    let owner = owner();
    let (id, machine_token) = create(&owner);
    let m = Machine::new(&id, &machine_token, false);
    let mut cmd = command(Some(&machine_token), &["runtimes", &id, "--detect"]);
    // No key in the environment and no provider configured: Codex's login alone decides.
    cmd.env("PATH", format!("{}:/usr/bin:/bin", m.bin.display()))
        .env("CODEX_HOME", &m.dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("CODEX_API_KEY");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("runtime claude-code 2.1.50 (Claude Code): signed in"), "{stdout}");
    assert!(stdout.contains("runtime codex codex-cli 0.50.0: signed out"), "{stdout}");
    ok(Some(&machine_token), &["report", &id, "--turn", "1", "--status", "done"]);
    ok(Some(&owner), &["work", &id, "--title", "t", "--goal", "g"]);
    let refused = run(Some(&owner), &["turn", &id, "--to", "codex", "--objective", "o", "--purpose", "p"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.starts_with("runtime.unavailable:"), "{refused:?}");
    ok(Some(&owner), &["turn", &id, "--to", "claude-code", "--objective", "o", "--purpose", "p"]);
}

#[test]
fn hook_install_twice_then_uninstall_leaves_the_settings_as_they_began() {
    let dir = std::env::temp_dir().join(unique("handoff-install"));
    let settings = dir.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = json!({
        "permissions": {"allow": ["Bash(cargo test:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]},
    });
    std::fs::write(&settings, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let config = dir.join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let toml = "# my settings\nmodel = \"gpt-5-codex\"\n\n[profiles.fast]\nmodel = \"gpt-5-mini\"\n";
    std::fs::write(&config, toml).unwrap();
    let project = dir.to_str().unwrap();

    for harness in ["claude-code", "codex"] {
        let first = ok(None, &["hook", "install", harness, "--project", project]);
        assert!(first.starts_with("hooks installed in"), "{first}");
        let second = ok(None, &["hook", "install", harness, "--project", project]);
        assert!(second.starts_with("nothing to change"), "installing twice adds nothing: {second}");
    }
    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let stop = installed["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(stop.len(), 2, "the existing Stop hook is kept beside ours: {installed}");
    assert!(stop[1]["hooks"][0]["command"].as_str().unwrap().ends_with("handoff hook claude-code"), "{installed}");
    assert_eq!(installed["permissions"], original["permissions"]);
    let codex = std::fs::read_to_string(&config).unwrap();
    assert!(codex.contains("notify = [") && codex.contains("\"hook\", \"codex\"]"), "{codex}");
    assert!(codex.starts_with("# my settings\n"), "{codex}");

    for harness in ["claude-code", "codex"] {
        let removed = ok(None, &["hook", "install", harness, "--project", project, "--uninstall"]);
        assert!(removed.starts_with("hooks removed from"), "{removed}");
    }
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(back, original, "the settings end as they began");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), toml, "the Codex config ends byte for byte as it began");
    std::fs::remove_dir_all(&dir).unwrap();
}
