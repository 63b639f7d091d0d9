//! `handoff serve --machine`, the daemon of an enrolled machine, with the real Claude Code and
//! Codex of the lockfile against the scripted model and the real local Worker: the owner only
//! creates sessions for the machine, and the daemon serves each in its workspace.

mod common;
use common::harness::*;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest any one wait of these tests takes before it fails.
const STEP_S: u64 = 90;

/// An enrolled machine with its daemon running.
struct Daemon {
    owner: String,
    name: String,
    model: ScriptedModel,
    machine: Machine,
    child: Option<Child>,
    /// What the daemon wrote on standard error, as it comes.
    said: Arc<Mutex<String>>,
}

impl Daemon {
    /// A machine enrolled for a fresh owner, its daemon started with `args` after
    /// `serve --machine`, and its first presence seen by the owner.
    fn start(steps: Vec<Step>, args: &[&str]) -> Daemon {
        let model = ScriptedModel::start(steps);
        let machine = Machine::new("", "", &model);
        Daemon::start_on(machine, model, args)
    }

    /// [`Daemon::start`] on a machine set up already.
    fn start_on(machine: Machine, model: ScriptedModel, args: &[&str]) -> Daemon {
        let mut d = Daemon::enrolled(machine, model);
        d.spawn(args);
        d.machine_view(|m| m["online"] == true && m["runtimes"].as_array().is_some_and(|r| !r.is_empty()));
        d
    }

    /// The machine enrolled for a fresh owner, its daemon not started yet.
    fn enrolled(machine: Machine, model: ScriptedModel) -> Daemon {
        let subject = unique("owner");
        let owner = ok(None, &["token", "--owner", &subject]).trim().to_string();
        let name = unique("vm");
        enrol(&machine.root.join("state"), &name, &subject, &owner);
        Daemon { owner, name, model, machine, child: None, said: Arc::default() }
    }

    fn spawn(&mut self, args: &[&str]) {
        let mut argv = vec!["serve", "--machine"];
        argv.extend(args.iter().copied());
        let mut cmd = command(None, &argv);
        let vars = self.machine.vars().into_iter().filter(|(k, _)| k != "HANDOFF_ID" && k != "HANDOFF_TOKEN");
        cmd.env_clear().envs(vars).current_dir(self.machine.work()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("handoff serve --machine starts");
        let stderr = child.stderr.take().unwrap();
        let said = self.said.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut s = said.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        self.child = Some(child);
    }

    fn said(&self) -> String {
        self.said.lock().unwrap().clone()
    }

    fn context(&self) -> String {
        format!("daemon said:\n{}\nlog:\n{}", self.said(), self.machine.log())
    }

    /// This machine as the owner's `GET /v1/machines` shows it, once `check` holds.
    fn machine_view(&self, check: impl Fn(&Value) -> bool) -> Value {
        eventually(
            "the machine as the owner sees it",
            Duration::from_secs(STEP_S),
            || {
                let (_, list) = api_get(&self.owner, "/v1/machines");
                list["machines"]
                    .as_array()?
                    .iter()
                    .find(|m| m["name"] == self.name.as_str())
                    .cloned()
                    .filter(|m| check(m))
            },
            || self.context(),
        )
    }

    /// A session created for this machine with turn 1's words and `more` flags: its id.
    fn create(&self, prompt: &str, more: &[&str]) -> String {
        self.create_for(&self.name, prompt, more)
    }

    fn create_for(&self, machine: &str, prompt: &str, more: &[&str]) -> String {
        let session = unique("session");
        let mut argv = vec!["create", &session, "--machine", machine, "--size", "large", "--prompt", prompt];
        argv.extend(more.iter().copied());
        let r = run(Some(&self.owner), &argv);
        assert_eq!(r.code, 0, "{r:?}\n{}", self.context());
        r.stdout.lines().next().unwrap().to_string()
    }

    fn until(&self, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(
            what,
            Duration::from_secs(STEP_S),
            || Some(record(&self.owner, id)).filter(|r| check(r)),
            || format!("record: {}\n{}", record(&self.owner, id), self.context()),
        )
    }

    fn done(&self, id: &str) -> Value {
        self.until(id, "turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done")
    }

    /// The folder the daemon served session `id` in, as it said.
    fn served_in(&self, id: &str) -> PathBuf {
        let prefix = format!("{id}: serving in ");
        let line = eventually(
            "the daemon says where it serves",
            Duration::from_secs(STEP_S),
            || self.said().lines().find(|l| l.contains(&prefix)).map(str::to_string),
            || self.context(),
        );
        let rest = &line[line.find(&prefix).unwrap() + prefix.len()..];
        PathBuf::from(rest.split(" on ").next().unwrap())
    }

    /// Turn 1's timeline of session `id`.
    fn events(&self, id: &str) -> Vec<Value> {
        let (status, body) = api_get(&self.owner, &format!("/v1/handoffs/{id}/events?turn=1&after=0"));
        assert_eq!(status, 200, "{body}");
        body["events"].as_array().cloned().unwrap_or_default()
    }

    /// The daemon ends within `limit`: its exit code.
    fn exits_within(&mut self, limit: Duration) -> i32 {
        let child = self.child.as_mut().unwrap();
        let status = eventually("the daemon exits", limit, || child.try_wait().unwrap(), String::new);
        self.child = None;
        status.code().unwrap_or(-1)
    }

    fn close(&self, id: &str) {
        ok(Some(&self.owner), &["close", id]);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: a signal to the daemon this test started; it stops its sessions' serves.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            eventually("the daemon stops", Duration::from_secs(30), || child.try_wait().ok().flatten(), String::new);
        }
    }
}

fn agent_model_of(requests: &[ModelRequest]) -> Vec<String> {
    requests.iter().filter_map(|r| r.body["model"].as_str().map(str::to_string)).collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_daemon_started_with_a_workspace_serves_a_session_created_for_its_machine_and_the_turn_ends_done_with_the_models_answer_on_claude_code(
) {
    let allowed = "claude-scripted-full-1";
    let d =
        Daemon::start(vec![Step::text("Hello from the daemon.")], &["--workspace", "main=.", "--model-allow", allowed]);
    let seen = d.machine_view(|m| m["workspaces"] == serde_json::json!(["main"]));
    let claude = seen["runtimes"].as_array().unwrap().iter().find(|r| r["name"] == "claude-code").cloned().unwrap();
    let models: Vec<&str> = claude["models"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(models.contains(&"opus") && models.contains(&"sonnet"), "the documented aliases: {claude}");
    assert!(models.contains(&allowed), "--model-allow appears in presence: {claude}");

    let id = d.create("Say hello.", &["--model", allowed]);
    let done = d.done(&id);
    assert_eq!(done["summary"], "Hello from the daemon.", "{done}");
    assert_eq!(done["runtime"], "claude-code", "{done}");
    assert_eq!(d.served_in(&id), d.machine.work(), "the default workspace: {}", d.context());
    let models = agent_model_of(&d.model.agent_requests());
    assert!(
        !models.is_empty() && models.iter().all(|m| m == allowed),
        "the model named on the create reaches the model server: {models:?}"
    );
    d.close(&id);
}

#[test]
fn a_daemon_serves_a_codex_session_with_the_model_named_on_the_create_from_codexs_model_list() {
    let d = Daemon::start(vec![Step::text("Hello from Codex.")], &["--workspace", "main=."]);
    let seen = d.machine_view(|m| m["runtimes"].as_array().is_some_and(|r| r.iter().any(|r| r["name"] == "codex")));
    let codex = seen["runtimes"].as_array().unwrap().iter().find(|r| r["name"] == "codex").cloned().unwrap();
    let models: Vec<String> =
        codex["models"].as_array().unwrap().iter().filter_map(Value::as_str).map(str::to_string).collect();
    assert!(!models.is_empty(), "Codex's model/list appears in presence: {codex}");
    let chosen = models.last().unwrap().clone();

    let id = d.create("Say hello.", &["--runtime", "codex", "--model", &chosen]);
    let done = d.done(&id);
    assert_eq!(done["summary"], "Hello from Codex.", "{done}");
    assert_eq!(done["runtime"], "codex", "{done}");
    let models = agent_model_of(&d.model.agent_requests());
    assert!(
        !models.is_empty() && models.iter().all(|m| *m == chosen),
        "the thread's model reaches the model server: {models:?}"
    );
    d.close(&id);
}

#[test]
fn two_sessions_at_once_each_run_in_their_own_worktree_on_a_branch_named_after_the_session() {
    // Each answer held longer than a heartbeat, so a presence is sent while both run.
    let d = Daemon::start(
        vec![Step::held(12_000, Step::text("Answered.")), Step::held(12_000, Step::text("Answered."))],
        &["--workspace", "main=.", "--worktree"],
    );
    std::fs::write(d.machine.work().join("README.md"), "hello\n").unwrap();
    git(&d.machine.work(), &["add", "."]);
    git(&d.machine.work(), &["commit", "-q", "-m", "start"]);
    let (a, b) = (d.create("First.", &[]), d.create("Second.", &[]));
    let seen = d.machine_view(|m| m["sessions"].as_array().is_some_and(|s| s.len() == 2));
    assert_eq!(seen["sessions"].as_array().unwrap().len(), 2, "both run at once: {seen}");
    d.done(&a);
    d.done(&b);
    let (wa, wb) = (d.served_in(&a), d.served_in(&b));
    assert_ne!(wa, wb, "{}", d.context());
    for (id, tree) in [(&a, &wa), (&b, &wb)] {
        assert!(!tree.starts_with(d.machine.work()), "not inside the workspace: {}", tree.display());
        assert_eq!(git(tree, &["rev-parse", "--abbrev-ref", "HEAD"]), format!("handoff/{id}"));
        assert!(tree.join("README.md").exists(), "a worktree of the workspace");
    }
    d.close(&a);
    d.close(&b);
}

#[test]
fn two_sessions_each_run_in_the_workspace_their_create_names_and_a_workspace_the_machine_lacks_is_never_guessed() {
    let model = ScriptedModel::start(Vec::new());
    let machine = Machine::new("", "", &model);
    std::fs::create_dir_all(machine.root.join("web")).unwrap();
    let d = Daemon::start_on(machine, model, &["--workspace", "api=.", "--workspace", "web=../web"]);
    let refused = run(
        Some(&d.owner),
        &["create", &unique("s"), "--machine", &d.name, "--size", "large", "--workspace", "mobile"],
    );
    assert!(
        refused.code != 0 && refused.stderr.contains("workspace"),
        "a workspace the machine did not report is refused: {refused:?}"
    );
    let (api, web) = (d.create("In api.", &["--workspace", "api"]), d.create("In web.", &["--workspace", "web"]));
    d.done(&api);
    d.done(&web);
    assert_eq!(d.served_in(&api), d.machine.work());
    assert_eq!(d.served_in(&web), d.machine.work().join("../web"));
    d.close(&api);
    d.close(&web);
}

#[test]
fn a_session_asking_for_a_workspace_the_machine_lacks_is_refused_with_a_reason_the_owner_sees_and_never_guessed() {
    let model = ScriptedModel::start(Vec::new());
    let mut d = Daemon::enrolled(Machine::new("", "", &model), model);
    // Created before the machine first reported, so the service could not check the workspace.
    let id = d.create("Somewhere else.", &["--workspace", "mobile"]);
    d.spawn(&["--workspace", "main=."]);
    let failed = d.until(&id, "turn 1 is refused", |r| r["status"] == "failed");
    let summary = failed["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("no workspace mobile") && summary.contains("main"), "{failed}");
    assert!(d.model.agent_requests().is_empty(), "no harness ran");
    assert!(!d.said().contains(&format!("{id}: serving in")), "{}", d.context());
}

#[test]
fn a_session_created_for_another_machine_is_never_seen() {
    let d = Daemon::start(Vec::new(), &["--workspace", "main=."]);
    let other = d.create_for("some-other-machine", "Not for you.", &[]);
    let ours = d.create("For you.", &[]);
    d.done(&ours);
    std::thread::sleep(Duration::from_secs(3));
    let r = record(&d.owner, &other);
    assert_eq!((r["turn"].as_u64(), r["status"].as_str()), (Some(1), Some("running")), "{r}");
    assert!(r["runtime"].is_null(), "nothing reported on it: {r}");
    assert!(!d.context().contains(&other), "{}", d.context());
    d.close(&ours);
}

#[test]
fn past_max_sessions_a_session_waits_and_its_timeline_says_so_before_serves_events_which_follow_it() {
    let d = Daemon::start(
        vec![Step::held(6_000, Step::text("First done."))],
        &["--workspace", "main=.", "--max-sessions", "1"],
    );
    let first = d.create("First.", &[]);
    d.until(&first, "the first runs", |r| r["runtime"] == "claude-code");
    let second = d.create("Second.", &[]);
    let note = eventually(
        "the waiting session's timeline says it waits",
        Duration::from_secs(STEP_S),
        || d.events(&second).into_iter().find(|e| e["kind"] == "note"),
        || d.context(),
    );
    assert!(note["text"].as_str().unwrap().contains("--max-sessions 1"), "{note}");
    assert_eq!(note["seq"], 1, "{note}");
    d.done(&first);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(record(&d.owner, &second)["runtime"], Value::Null, "a session holds its place until it closes");
    d.close(&first);
    d.done(&second);
    let events = eventually(
        "serve's events follow the note",
        Duration::from_secs(STEP_S),
        || Some(d.events(&second)).filter(|e| e.iter().any(|e| e["kind"] == "message")),
        || format!("{:?}\n{}", d.events(&second), d.context()),
    );
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "one numbering, no clash: {events:?}");
    assert!(events.iter().skip(1).any(|e| e["kind"] == "message"), "serve's events follow the note: {events:?}");
    d.close(&second);
}

#[test]
fn a_daemon_killed_and_started_again_takes_its_open_sessions_again_and_serves_their_next_turns() {
    let args = ["--workspace", "main=."];
    let mut d = Daemon::start(vec![Step::text("First answer."), Step::text("Second answer.")], &args);
    let id = d.create("First.", &[]);
    d.done(&id);
    let mut child = d.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // Its sessions' serves die with it (a parent-death signal).
    eventually(
        "no serve of the machine is left",
        Duration::from_secs(10),
        || Some(()).filter(|_| !d.machine.processes().iter().any(|p| p.contains(" serve "))),
        || format!("{:?}", d.machine.processes()),
    );
    d.spawn(&args);
    ok(Some(&d.owner), &["turn", &id, "--prompt", "Second."]);
    let done = d.until(&id, "turn 2 is done", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Second answer.", "{done}");
    d.close(&id);
}

#[test]
fn after_a_revoke_a_new_session_is_never_started_and_the_daemon_says_why() {
    let mut d = Daemon::start(vec![Step::held(30_000, Step::text("Too slow."))], &["--workspace", "main=."]);
    let running = d.create("Take your time.", &[]);
    d.until(&running, "the session runs", |r| r["runtime"] == "claude-code");
    eventually(
        "the model is asked",
        Duration::from_secs(STEP_S),
        || Some(()).filter(|_| !d.model.agent_requests().is_empty()),
        || d.context(),
    );
    assert_eq!(api_delete(&d.owner, &format!("/v1/machines/{}", d.name)), 204);
    let code = d.exits_within(Duration::from_secs(60));
    assert_eq!(code, 5, "{}", d.context());
    assert!(d.said().contains("auth.revoked") && d.said().contains("takes no new session"), "{}", d.context());
    let stopped = record(&d.owner, &running);
    assert_eq!(stopped["status"], "failed", "the running session was stopped: {stopped}");
    assert!(stopped["summary"].as_str().is_some_and(|s| s.contains("revoked")), "{stopped}");
    let asked = d.model.agent_requests().len();
    let late = d.create("Too late.", &[]);
    std::thread::sleep(Duration::from_secs(3));
    let r = record(&d.owner, &late);
    assert!(r["runtime"].is_null() && r["status"] == "running", "never started: {r}");
    assert_eq!(d.model.agent_requests().len(), asked, "no harness ran for it");
}

/// Sessions the create-to-harness row measures.
const BENCH_SESSIONS: usize = 20;

/// The daemon's speed row: from the create's answer to the daemon's harness running, for 20
/// sessions created one after another (each closed once done): to the record's `running`
/// with the runtime (serve's report, sent just before the harness starts), and to the
/// scripted model's first request of the session.
#[test]
#[ignore = "20 harness runs: scripts/bench-serve runs it"]
fn bench_daemon_create_to_harness_running() {
    let d = Daemon::start(Vec::new(), &["--workspace", "main=."]);
    let (mut to_running, mut to_model) = (Vec::new(), Vec::new());
    for n in 0..BENCH_SESSIONS {
        let before = d.model.agent_requests().len();
        let id = d.create(&format!("Session {n}: say hello."), &[]);
        let created = std::time::Instant::now();
        let (mut running, mut asked) = (None, None);
        let mut polled = std::time::Instant::now() - Duration::from_secs(1);
        while running.is_none() || asked.is_none() {
            assert!(created.elapsed() < Duration::from_secs(STEP_S), "session {n} did not start: {}", d.context());
            if asked.is_none() && d.model.agent_requests().len() > before {
                asked = Some(created.elapsed().as_millis() as u64);
            }
            if running.is_none() && polled.elapsed() >= Duration::from_millis(50) {
                polled = std::time::Instant::now();
                let (_, body) = api_get(&d.owner, &format!("/v1/handoffs/{id}"));
                if body["handoff"]["runtime"].is_string() {
                    running = Some(created.elapsed().as_millis() as u64);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        to_running.extend(running);
        to_model.extend(asked);
        d.done(&id);
        d.close(&id);
    }
    print_figures("daemon: create answered -> the record's running (serve starting the harness)", to_running);
    print_figures("daemon: create answered -> the daemon's harness's first model request", to_model);
}

#[test]
fn print_unit_prints_a_systemd_unit_that_repeats_the_daemons_flags_and_is_not_restarted_after_a_revoke() {
    let dir = std::env::temp_dir().join(unique("daemon-unit"));
    std::fs::create_dir_all(&dir).unwrap();
    let r = run_in(
        Some(&dir),
        None,
        &["serve", "--machine", "--workspace", "api=.", "--max-sessions", "2", "--print-unit"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let line = r.stdout.lines().find(|l| l.starts_with("ExecStart=")).unwrap_or_default().to_string();
    assert!(line.contains(" serve --machine --workspace api=") && line.contains("--max-sessions 2"), "{line}");
    assert!(
        r.stdout.contains("RestartPreventExitStatus=5") && r.stdout.contains("KillMode=control-group"),
        "{}",
        r.stdout
    );
    let no_workspace = run(None, &["serve", "--machine"]);
    assert!(no_workspace.code == 2 && no_workspace.stderr.contains("--workspace"), "{no_workspace:?}");
    let _ = std::fs::remove_dir_all(dir);
}
