//! `handoff serve` with the real Claude Code (the lockfile's version), its model scripted,
//! against the real local Worker: the owner acts through the API alone, and the machine runs
//! each turn.

mod common;
use common::harness::*;
use common::served::*;
use common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

impl Served {
    /// serve's state record on the machine.
    fn state_record(&self) -> std::path::PathBuf {
        self.machine.root.join("state").join("serve").join(format!("{}.json", self.id))
    }

    /// serve ends on `signal`, by it, and leaves no process of the machine running.
    fn signalled(&mut self, signal: i32) {
        let mut serve = self.serve.take().unwrap();
        // SAFETY: a signal to the serve this test started.
        unsafe { libc::kill(serve.id() as i32, signal) };
        let status =
            eventually("serve ends", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || self.context());
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(signal), "{}", self.context());
        // Killed before serve ended: what is left are at most processes the kernel is reaping.
        let left = eventually(
            "no process of the harness is left",
            Duration::from_secs(2),
            || Some(self.machine.processes()).filter(|p| p.is_empty()),
            || format!("{:?}\n{}", self.machine.processes(), self.context()),
        );
        assert!(left.is_empty());
    }

    /// The `steer` event of turn `turn`'s timeline naming steer `id`, once serve wrote it.
    fn steer_event(&self, turn: u64, id: &str) -> Value {
        let named = |e: &Value| e["kind"] == "steer" && e["id"] == id;
        let events =
            self.events_until(turn, &format!("the timeline says what became of steer {id}"), |es| es.iter().any(named));
        events.into_iter().find(named).unwrap()
    }

    /// The owner cancels; the harness is gone within 5 s. Serve's log, and its line saying so.
    fn cancelled_within_5_s(&self, what: &str) -> (String, String) {
        let cancelled_at = Instant::now();
        ok(Some(&self.owner), &["cancel", &self.id]);
        eventually(
            what,
            Duration::from_secs(10),
            || Some(self.harness_processes()).filter(|p| p.is_empty()),
            || format!("{:?}\n{}", self.harness_processes(), self.context()),
        );
        assert!(cancelled_at.elapsed() < Duration::from_secs(5), "gone in {:?}", cancelled_at.elapsed());
        let log = self.log_says("because the owner cancelled it");
        let line = log.lines().find(|l| l.contains("because the owner cancelled it")).unwrap_or_default().to_string();
        (log, line)
    }

    /// The machine's processes other than serve itself.
    fn harness_processes(&self) -> Vec<String> {
        let serve = self.serve.as_ref().map(|c| c.id().to_string());
        self.machine
            .processes()
            .into_iter()
            .filter(|p| Some(p.split(' ').next().unwrap_or_default().to_string()) != serve)
            .collect()
    }
}

#[test]
fn two_turns_opened_by_the_owner_run_on_the_machine_the_second_resuming_the_first_harness_session() {
    let mut s = Served::start(
        "Say hello to the parser.",
        vec![Step::text("Hello, parser."), Step::text("Second turn answered.")],
        &[],
        &[],
    );
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], "Hello, parser.", "{done}");
    assert_eq!(done["runtime"], "claude-code", "the record names the runtime of a plain turn: {done}");
    assert_eq!(done["permission_mode"], "default", "and the permission mode it ran in, serve's default: {done}");
    let first = s.model.agent_requests().into_iter().next().expect("Claude Code asked the model");
    assert!(first.text().contains("Say hello to the parser."), "turn 1's words reached the model: {}", first.text());
    let log = s.log_says("turn 1 started: claude-code session");
    assert!(log.contains("(new)") && log.contains("ms after v"), "{log}");
    log.lines().filter(|l| l.contains("started:")).for_each(|l| eprintln!("measured: {l}"));

    // Words that would parse as a flag, were they an argument.
    let words = "--help me with the second thing";
    ok(Some(&s.owner), &["turn", &s.id, &format!("--prompt={words}")]);
    let done = s.until("turn 2 is done", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Second turn answered.", "{done}");
    assert_eq!(
        (done["runtime"].as_str(), done["continued_from"]["runtime"].as_str()),
        (Some("claude-code"), Some("claude-code")),
        "{done}"
    );
    let second = s
        .model
        .agent_requests()
        .into_iter()
        .find(|r| r.text().contains(words))
        .unwrap_or_else(|| panic!("turn 2's words reached the model\n{}", s.context()));
    let text = second.text();
    assert!(
        text.contains("Say hello to the parser.") && text.contains("Hello, parser."),
        "turn 2's request carries turn 1's exchange: {text}"
    );
    assert!(s.machine.log().contains("(resumed)"), "{}", s.machine.log());
    let (_, turns) = api_get(&s.owner, &format!("/v1/handoffs/{}/turns", s.id));
    let modes: Vec<Value> = turns["turns"].as_array().unwrap().iter().map(|t| t["permission_mode"].clone()).collect();
    assert_eq!(modes, ["default", "default"], "each turn's lineage entry keeps its mode: {turns}");
    s.close();
}

#[test]
fn the_owners_cancel_stops_the_harness_within_5_s_and_nothing_moves_the_turn_after() {
    let mut s =
        Served::start("Make a proof file.", vec![Step::bash("touch proof.txt"), Step::text("Made it.")], &[], &[]);
    // The harness waits on the owner's permission question: it is busy in its turn.
    s.question_id();
    assert!(!s.harness_processes().is_empty(), "the harness runs");
    let (log, line) = s.cancelled_within_5_s("the harness is gone");
    assert!(line.contains("ms after v"), "the log says how long the stop took: {log}");
    eprintln!("measured: {line}");
    let cancelled = s.record();
    assert_eq!((cancelled["turn"].as_u64(), cancelled["status"].as_str()), (Some(1), Some("cancelled")), "{cancelled}");
    std::thread::sleep(Duration::from_secs(3));
    let after = s.record();
    assert_eq!(
        (after["status"].as_str(), after["version"].as_u64()),
        (Some("cancelled"), cancelled["version"].as_u64()),
        "nothing moved the turn after its cancel: {after}"
    );
    assert!(!s.machine.work().join("proof.txt").exists());
    s.close();
}

#[test]
fn a_served_turns_permission_is_allowed_from_afar_and_the_next_is_denied_with_a_note_the_model_reads() {
    let steps = vec![
        Step::bash("touch allowed.txt"),
        Step::text("Made allowed.txt."),
        Step::bash("touch denied.txt"),
        Step::text("Left it."),
    ];
    let mut s = Served::start("Make the files.", steps, &[], &[]);
    let q = s.question_id();
    assert_eq!(s.record()["question"]["text"], "Bash: touch allowed.txt");
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
    let ran = s
        .model
        .result_of("call_1", Duration::from_secs(STEP_S))
        .unwrap_or_else(|| panic!("the tool's result reached the model\n{}", s.context()));
    assert!(!ran.to_string().contains("denied"), "{ran}");
    assert_eq!(s.until("turn 1 is done", |r| r["status"] == "done")["summary"], "Made allowed.txt.");
    assert!(s.machine.work().join("allowed.txt").exists());

    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Now the other file."]);
    let q = eventually(
        "turn 2's question",
        Duration::from_secs(STEP_S),
        || {
            let r = s.record();
            (r["turn"] == 2 && r["question"]["answer"].is_null())
                .then(|| r["question"]["id"].as_str().map(str::to_string))
                .flatten()
        },
        || s.context(),
    );
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", &q, "--note", "not that file"]);
    let denied = s
        .model
        .result_of("call_2", Duration::from_secs(STEP_S))
        .unwrap_or_else(|| panic!("the deny reached the model\n{}", s.context()));
    assert!(denied.to_string().contains("not that file"), "the model reads the owner's note: {denied}");
    assert_eq!(s.until("turn 2 is done", |r| r["turn"] == 2 && r["status"] == "done")["summary"], "Left it.");
    assert!(!s.machine.work().join("denied.txt").exists());
    s.close();
}

#[test]
fn serve_killed_mid_turn_and_started_again_reports_the_turn_failed_runs_it_once_and_runs_the_next() {
    let mut s = Served::start(
        "Make a proof file.",
        vec![Step::bash("touch proof.txt"), Step::text("Second turn ran.")],
        &[],
        &[],
    );
    s.question_id();
    let mut first = s.serve.take().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    // The parent-death signal took Claude Code with serve (its hook waiting for the answer is
    // left for the next serve to end).
    let claude = || s.machine.processes().into_iter().filter(|p| p.contains("--session-id")).collect::<Vec<_>>();
    eventually(
        "Claude Code went with serve",
        Duration::from_secs(5),
        || Some(claude()).filter(|p| p.is_empty()),
        || format!("{:?}", claude()),
    );

    s.serve = Some(s.spawn(&[]));
    let failed = s.until("turn 1 is reported failed", |r| r["turn"] == 1 && r["status"] == "failed");
    assert!(failed["summary"].as_str().is_some_and(|t| t.contains("handoff serve restarted")), "{failed}");
    let log = s.machine.log();
    assert_eq!(log.matches("turn 1 started:").count(), 1, "turn 1 ran once: {log}");
    assert!(log.contains("process(es) left by the serve before's harness"), "the hook left waiting was ended: {log}");
    let left: Vec<String> = s
        .harness_processes()
        .into_iter()
        .filter(|p| p.contains("--session-id") || p.contains("hook claude-code") || p.contains(" mcp"))
        .collect();
    assert!(left.is_empty(), "nothing of the killed serve's harness is left: {left:?}");

    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Try again."]);
    let done = s.until("turn 2 is done", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Second turn ran.", "{done}");
    s.close();
}

#[test]
fn a_second_serve_for_the_same_hand_off_refuses_naming_the_first_ones_pid() {
    let mut s = Served::start("Say hello.", vec![Step::text("Hello.")], &[], &[]);
    s.until("turn 1 is done", |r| r["status"] == "done");
    let second = run_bounded("a second serve", s.machine.handoff(&["serve", &s.id]), 30);
    assert_eq!(second.code, 1, "{second:?}");
    let pid = s.serve.as_ref().unwrap().id();
    assert!(second.stderr.contains(&format!("pid {pid}")), "{second:?}");
    s.close();
}

#[test]
fn a_served_question_left_unanswered_is_withdrawn_and_denied_with_a_note_the_model_reads() {
    let mut s = Served::start(
        "Make a proof file.",
        vec![Step::bash("touch proof.txt"), Step::text("Went on without it.")],
        &[("HANDOFF_SERVE_ANSWER_WAIT_S", "3")],
        &[],
    );
    s.question_id();
    let denied = s
        .model
        .result_of("call_1", Duration::from_secs(STEP_S))
        .unwrap_or_else(|| panic!("the deny reached the model\n{}", s.context()));
    assert!(denied.to_string().contains("did not answer within 3 s"), "the model reads why: {denied}");
    let done = s.until("the turn goes on and ends", |r| r["status"] == "done");
    assert_eq!(done["summary"], "Went on without it.", "{done}");
    assert!(!s.machine.work().join("proof.txt").exists());
    assert!(s.machine.log().contains("denied, and the question withdrawn"), "{}", s.machine.log());
    s.close();
}

#[test]
fn an_erased_hand_off_ends_serve_with_a_line_saying_so() {
    let mut s = Served::start("Say hello.", vec![Step::text("Hello.")], &[], &[]);
    s.until("turn 1 is done", |r| r["status"] == "done");
    ok(Some(&s.owner), &["erase", &s.id]);
    let mut serve = s.serve.take().unwrap();
    let status =
        eventually("serve ends", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || s.machine.log());
    assert_eq!(status.code(), Some(1), "{}", s.machine.log());
    assert!(s.machine.log().contains("was erased, or this token does not reach it (404)"), "{}", s.machine.log());
    assert!(s.machine.processes().is_empty(), "{:?}", s.machine.processes());
}

#[test]
fn a_refused_token_with_no_fresh_one_in_the_file_ends_serve_with_the_apis_code_and_what_to_do() {
    let model = ScriptedModel::start(vec![]);
    let owner = owner();
    let (id, token) = create(&owner);
    let m = Machine::new(&id, &token, &model);
    let file = m.root.join("state/stale.token");
    std::fs::write(&file, "not-a-token").unwrap();
    let mut cmd = m.handoff(&["serve", &id]);
    cmd.env_remove("HANDOFF_TOKEN").env("HANDOFF_TOKEN_FILE", &file);
    let r = run_bounded("serve with a refused token", cmd, 30);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("mint a fresh one") && r.stderr.contains("stale.token"), "{r:?}");
}

/// A TCP relay to the Worker that the test can take down (every connection cut, new ones
/// dropped) and bring back on the same address: the Worker unreachable, then back.
struct Relay {
    port: u16,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bumped on each cut: a connection of an older generation ends.
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// What a [`Relay`] calls with each piece a client sends, before it passes it on.
type OnSend = std::sync::Arc<dyn Fn(&[u8]) + Send + Sync>;

impl Relay {
    fn start(upstream: &str) -> Relay {
        Relay::watching(upstream, std::sync::Arc::new(|_: &[u8]| {}))
    }

    /// A relay that shows `on_send` every piece a client sends before passing it on: a test
    /// acts between a client's request and the Worker's answer.
    fn watching(upstream: &str, on_send: OnSend) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = upstream.trim_start_matches("http://").to_string();
        let relay = Relay { port, down: Default::default(), generation: Default::default() };
        let (down, generation) = (relay.down.clone(), relay.generation.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if down.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&upstream) else { continue };
                let born = generation.load(Ordering::SeqCst);
                for (sending, from, to) in
                    [(true, client.try_clone().unwrap(), server.try_clone().unwrap()), (false, server, client)]
                {
                    let (generation, on_send) = (generation.clone(), on_send.clone());
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let (mut from, mut to) = (from, to);
                        let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            if generation.load(Ordering::SeqCst) != born {
                                break;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if sending {
                                        on_send(&buf[..n]);
                                    }
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                    ) =>
                                {
                                    continue
                                }
                                Err(_) => break,
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        relay
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn set_down(&self, down: bool) {
        use std::sync::atomic::Ordering;
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn with_the_service_unreachable_for_a_while_serve_follows_again_and_runs_the_turn_opened_meanwhile() {
    let relay = Relay::start(&url());
    let relayed = relay.url();
    let mut s = Served::start(
        "Say hello.",
        vec![Step::text("Hello."), Step::text("Ran the turn opened while away.")],
        &[("HANDOFF_URL", &relayed)],
        &[],
    );
    s.until("turn 1 is done", |r| r["status"] == "done");
    s.log_says(&format!("from {relayed}"));

    relay.set_down(true);
    s.log_says("lost the hand-off's watch");
    // Opened while serve cannot reach the service.
    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Run this when you are back."]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(!s.machine.log().contains("turn 2 started:"), "{}", s.machine.log());
    relay.set_down(false);
    let done = s.until("turn 2 ran after the service came back", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Ran the turn opened while away.", "{done}");
    let log = s.machine.log();
    assert!(log.contains("reconnected at v") && log.contains("turn 2 started:"), "{log}");
    s.close();
}

#[test]
fn a_codex_turn_is_served_through_app_server_its_approval_answered_from_the_api_and_the_next_resumes_its_thread() {
    let steps = vec![
        Step::exec("printf made > proof.txt && echo proof-made"),
        Step::text("Made the proof."),
        Step::text("Still here."),
    ];
    let mut s = Served::start("Make a proof file.", steps, &[], &["--runtime", "codex"]);
    let q = s.question_id();
    let asked = s.record()["question"].clone();
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert!(
        asked["input"].as_str().is_some_and(|i| i.contains("printf made > proof.txt")),
        "the owner is shown the whole command: {asked}"
    );
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], "Made the proof.", "{done}");
    assert_eq!(done["runtime"], "codex", "the record names the runtime of a plain turn: {done}");
    assert_eq!(done["permission_mode"], "untrusted", "and Codex's approval policy as its permission mode: {done}");
    assert_eq!(s.machine.file("proof.txt"), "made");
    let first = s.model.agent_requests().into_iter().next().unwrap();
    assert!(first.text().contains("Make a proof file."), "{}", first.text());

    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Are you still there?"]);
    let done = s.until("turn 2 is done", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Still here.", "{done}");
    let second = s
        .model
        .agent_requests()
        .into_iter()
        .find(|r| r.text().contains("Are you still there?"))
        .expect("turn 2 reached the model");
    assert!(
        second.text().contains("Make a proof file.") && second.text().contains("proof-made"),
        "turn 2 carries turn 1's exchange: {}",
        second.text()
    );
    assert!(s.machine.log().contains("codex thread"), "{}", s.machine.log());
    s.close();
}

#[test]
fn a_refused_token_is_replaced_by_the_one_in_the_token_file_and_serve_goes_on() {
    let model = ScriptedModel::start(vec![Step::text("Served with the fresh token.")]);
    let owner = owner();
    let (id, token) = create_with_prompt(&owner, "Say hello.");
    let m = Machine::new(&id, &token, &model);
    let file = m.root.join("state/rotated.token");
    std::fs::write(&file, &token).unwrap();
    let mut cmd = m.handoff(&["serve", &id]);
    // Started with a token the API refuses; the file holds the fresh one.
    cmd.env("HANDOFF_TOKEN", "expired-token")
        .env("HANDOFF_TOKEN_FILE", &file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut serve = cmd.spawn().unwrap();
    let done = eventually(
        "turn 1 is done",
        Duration::from_secs(STEP_S),
        || Some(record(&owner, &id)).filter(|r| r["status"] == "done"),
        || m.log(),
    );
    assert_eq!(done["summary"], "Served with the fresh token.", "{done}");
    assert!(m.log().contains("read a fresh one from the token file"), "{}", m.log());
    ok(Some(&owner), &["close", &id]);
    let status =
        eventually("serve exits on close", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || m.log());
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_mid_chat_hand_off_to_codex_is_served_briefed_from_its_package_and_handed_back_to_claude_code_briefed_from_codexs()
{
    let model = ScriptedModel::start_per_api(
        vec![Step::text("Claude Code's first turn."), Step::text("Claude Code is back.")],
        vec![Step::text("Codex reviewed the parser.")],
    );
    let mut s = Served::create_for("Start the parser.", model, &[]);
    set_parser_work(&s.owner, &s.id);
    s.serve_with(&[]);
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    s.log_says("reported runtimes");
    // `codex login status` says "Not logged in" with the scripted provider's key in the
    // environment; serve's report counts the configured provider and its key as signed in.
    let codex = s.record()["machine_runtimes"]["runtimes"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "codex").cloned());
    assert_eq!(codex.as_ref().map(|c| c["signed_in"].clone()), Some(Value::Bool(true)), "{codex:?}");

    ok(
        Some(&s.owner),
        &[
            "turn",
            &s.id,
            "--to",
            "codex",
            "--objective",
            "Review the parser for edge cases",
            "--purpose",
            "a second pair of eyes",
        ],
    );
    let done = s.until("turn 2 is done by codex", |r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Codex reviewed the parser.", "{done}");
    let codex = s
        .model
        .agent_requests()
        .into_iter()
        .find(|r| r.api == handoff_it::peers::scripted_model::Api::Responses)
        .expect("codex asked the model");
    assert!(
        codex.text().contains("Review the parser for edge cases") && codex.text().contains("# Hand-off briefing"),
        "codex was briefed from the package: {}",
        codex.text()
    );
    assert!(s.machine.log().contains("turn 2 started: codex"), "{}", s.machine.log());

    ok(
        Some(&s.owner),
        &[
            "turn",
            &s.id,
            "--to",
            "claude-code",
            "--objective",
            "Fix what the review found",
            "--purpose",
            "back to the author",
        ],
    );
    let done = s.until("turn 3 is done by claude-code", |r| r["turn"] == 3 && r["status"] == "done");
    assert_eq!(done["summary"], "Claude Code is back.", "{done}");
    let back = s
        .model
        .agent_requests()
        .into_iter()
        .rev()
        .find(|r| r.api == handoff_it::peers::scripted_model::Api::Messages)
        .unwrap();
    // The package compiled after Codex's turn: its milestones (the package carries no summaries).
    let text = back.text();
    assert!(
        text.contains("Fix what the review found")
            && text.contains("turn 2 finished (done)")
            && text.contains("Package version 2"),
        "claude-code was briefed from the package compiled after codex's turn: {text}"
    );
    s.close();
}

#[test]
fn a_launch_typed_by_hand_while_serve_runs_the_turn_refuses_naming_serves_pid() {
    let mut s =
        Served::start("Make a proof file.", vec![Step::bash("touch proof.txt"), Step::text("Made it.")], &[], &[]);
    s.question_id();
    // serve reports the machine's runtimes as it starts, a change of its own that may land after
    // the question under load: the launch is measured against a record that has it.
    let before = s.until("serve has reported the machine's runtimes", |r| r["machine_runtimes"].is_object());
    let launch = run_bounded("a launch by hand", s.machine.handoff(&["launch", &s.id, "--runtime", "claude-code"]), 30);
    assert_ne!(launch.code, 0, "{launch:?}");
    let pid = s.serve.as_ref().unwrap().id();
    assert!(launch.stderr.contains(&format!("pid {pid}")), "the refusal names serve's pid: {launch:?}");
    let after = s.record();
    assert_eq!(after["version"], before["version"], "the launch changed nothing: {after}");
    assert_eq!(s.model.agent_requests().len(), 1, "no second harness asked the model");
    s.close();
}

#[test]
fn the_owners_cancel_of_a_served_codex_turn_ends_its_app_server_within_5_s_and_nothing_is_reported_after() {
    let steps = vec![Step::exec("printf made > proof.txt"), Step::text("Made the proof.")];
    let mut s = Served::start("Make a proof file.", steps, &[], &["--runtime", "codex"]);
    // Codex waits on the owner's approval: its app-server is busy in the turn.
    s.question_id();
    assert!(s.harness_processes().iter().any(|p| p.contains("app-server")), "{:?}", s.harness_processes());
    let (log, line) = s.cancelled_within_5_s("the app-server is gone");
    assert!(
        line.contains("stopped codex") && line.contains("(interrupted)"),
        "the app-server's turn was interrupted: {log}"
    );
    eprintln!("measured: {line}");
    let cancelled = s.record();
    assert_eq!(
        (cancelled["turn"].as_u64(), cancelled["status"].as_str(), cancelled["runtime"].as_str()),
        (Some(1), Some("cancelled"), Some("codex")),
        "{cancelled}"
    );
    std::thread::sleep(Duration::from_secs(3));
    let after = s.record();
    assert_eq!(
        (after["status"].as_str(), after["version"].as_u64()),
        (Some("cancelled"), cancelled["version"].as_u64()),
        "nothing was reported after the cancel: {after}"
    );
    assert!(!s.machine.work().join("proof.txt").exists(), "the declined command never ran");
    s.close();
}

#[test]
fn a_turn_whose_package_moved_before_serve_accepted_it_ends_failed_with_package_stale_in_its_summary() {
    let owner = owner();
    let (id, token) = create_with_prompt(&owner, "Start the parser.");
    set_parser_work(&owner, &id);
    let request = ["--objective", "Review the parser", "--purpose", "a second pair of eyes"];
    // The owner recompiles the package between serve's read of it and its accept.
    let recompiled = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let on_send: OnSend = {
        let (owner, id, recompiled) = (owner.clone(), id.clone(), recompiled.clone());
        std::sync::Arc::new(move |sent: &[u8]| {
            let mut done = recompiled.lock().unwrap();
            if done.is_none() && String::from_utf8_lossy(sent).contains("/package/accept ") {
                ok(Some(&owner), &["decide", &id, "Comments start with #"]);
                *done = Some(ok(Some(&owner), &[&["package", &id, "--runtime", "claude-code"][..], &request].concat()));
            }
        })
    };
    let relay = Relay::watching(&url(), on_send);
    let model = ScriptedModel::start(vec![Step::text("Turn 1 done.")]);
    let machine = Machine::new(&id, &token, &model);
    let mut s = Served { owner, session: String::new(), id, model, machine, serve: None, args: Vec::new() };
    s.serve = Some(s.spawn(&[("HANDOFF_URL", &relay.url())]));
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");

    ok(Some(&s.owner), &[&["turn", &s.id, "--to", "claude-code"][..], &request].concat());
    let failed = s.until("turn 2 ends failed", |r| r["turn"] == 2 && r["status"] == "failed");
    assert!(
        recompiled.lock().unwrap().as_deref().is_some_and(|r| r.starts_with("package recompiled (v2")),
        "{:?}",
        recompiled.lock().unwrap()
    );
    let summary = failed["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("could not accept package v1") && summary.contains("package.stale"),
        "the reason is in the summary: {failed}"
    );
    assert_eq!(s.model.agent_requests().len(), 1, "no harness started for turn 2");
    s.close();
}

#[test]
fn a_turn_handed_to_a_runtime_not_installed_on_the_machine_ends_failed_saying_so() {
    let (owner, id, token) = started();
    let model = ScriptedModel::start(vec![]);
    let machine = Machine::new(&id, &token, &model).bare();
    let mut s = Served { owner, session: String::new(), id, model, machine, serve: None, args: Vec::new() };
    s.serve = Some(s.spawn(&[]));
    s.log_says("reported runtimes");
    // The machine's report from before codex was taken off it.
    s.machine.ok("runtimes", &["runtimes", &s.id, "--runtime", "codex=signed-in"]);
    ok(
        Some(&s.owner),
        &["turn", &s.id, "--to", "codex", "--objective", "Review the parser", "--purpose", "a second pair of eyes"],
    );
    let failed = s.until("turn 2 ends failed", |r| r["turn"] == 2 && r["status"] == "failed");
    assert_eq!(failed["summary"], "codex is not on PATH on the machine: install codex there", "{failed}");
    assert!(s.model.agent_requests().is_empty());
    s.close();
}

#[test]
fn a_served_codex_command_denied_from_afar_with_a_note_runs_nothing_and_the_model_reads_the_note() {
    // The note is steered into the turn just before the decline is answered; by timing, Codex
    // sends the declined call's result and the note in one request or in two, each answered.
    let steps = vec![Step::exec("printf made > proof.txt"), Step::text("Left it."), Step::text("Left it.")];
    let mut s = Served::start("Make a proof file.", steps, &[], &["--runtime", "codex"]);
    let q = s.question_id();
    let note = "Not that file: write the proof into NOTES.md instead";
    ok(Some(&s.owner), &["answer", &s.id, "deny", "--question", &q, "--note", note]);
    let done = s.until("the turn goes on and ends", |r| r["status"] == "done");
    assert_eq!(done["summary"], "Left it.", "{done}");
    assert!(!s.machine.work().join("proof.txt").exists(), "the denied command did not run");
    let requests = s.model.agent_requests();
    let declined =
        requests.iter().position(|r| handoff_it::peers::scripted_model::find_result(&r.body, "call_1").is_some());
    let declined = declined.unwrap_or_else(|| panic!("the decline reached the model\n{}", s.context()));
    let texts: Vec<String> = requests[declined..].iter().map(|r| r.text()).collect();
    assert!(
        texts.iter().any(|t| t.contains(note)),
        "the model reads the owner's note with the decline or right after it: {texts:?}"
    );
    s.close();
}

#[test]
fn the_readmes_whole_loop_runs_as_written_the_owner_sends_a_prompt_and_the_machine_runs_it() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let after = &readme[readme.find("<!-- readme-serve:").expect("the README marks its loop")..];
    let start = after.find("```sh\n").unwrap() + "```sh\n".len();
    let block = &after[start..start + after[start..].find("```").unwrap()];
    let model = ScriptedModel::start(vec![Step::text("Hello."), Step::text("Two files here.")]);
    // A machine whose hand-off the block creates: its folders, harnesses and model, not yet an id.
    let m = Machine::new("", "", &model);
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(format!("set -euo pipefail\n{block}"));
    cmd.env_clear()
        .envs(m.vars())
        .env_remove("HANDOFF_ID")
        .env_remove("HANDOFF_TOKEN")
        .env("API", url())
        .env("HANDOFF_SIGNING_KEY", signing_key());
    cmd.current_dir(m.work());
    let r = run_bounded("the README's loop", cmd, 2 * STEP_S);
    assert_eq!(r.code, 0, "{r:?}\nlog:\n{}", m.log());
    let texts: Vec<String> = model.agent_requests().iter().map(|q| q.text()).collect();
    assert!(texts.first().is_some_and(|t| t.contains("Say hello.")), "turn 1's words reached the model: {texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("Now list the files here.") && t.contains("Hello.")),
        "turn 2's words, after turn 1's exchange: {texts:?}"
    );
    assert!(m.log().contains("turn 2 started: claude-code session"), "{}", m.log());
    assert!(!m.work().join("machine.token").exists(), "the block cleans up after itself");
    assert!(m.processes().is_empty(), "{:?}", m.processes());
}

#[test]
fn the_worker_stopped_and_started_again_while_serve_runs_it_follows_again_and_serves_the_next_turn() {
    // A Worker of this test's own, on workerd, with its state on disk: stopped and started again
    // on the same port, where serve knows it.
    let state = handoff_it::temp_state("serve-worker");
    let mut worker = handoff_it::Server::start_workerd(&state, &[]);
    let api = worker.url();
    let on = |token: &str, args: &[&str]| ok(Some(token), &[args, &["--url", api.as_str()]].concat());
    let owner = owner();
    let out =
        on(&owner, &["create", &unique("session"), "--machine", "m1", "--size", "large", "--prompt", "Say hello."]);
    let mut lines = out.lines();
    let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    let model = ScriptedModel::start(vec![Step::text("Hello."), Step::text("Served after the Worker came back.")]);
    let m = Machine::new(&id, &token, &model);
    let mut cmd = m.handoff(&["serve", &id]);
    cmd.env("HANDOFF_URL", &api).stdout(Stdio::null()).stderr(Stdio::null());
    let mut serve = cmd.spawn().expect("handoff serve starts");
    let record = || serde_json::from_str::<Value>(&on(&owner, &["show", &id, "--json"])).unwrap()["handoff"].clone();
    let until = |what: &str, check: &dyn Fn(&Value) -> bool| {
        eventually(what, Duration::from_secs(STEP_S), || Some(record()).filter(|r| check(r)), || m.log())
    };
    until("turn 1 is done", &|r| r["turn"] == 1 && r["status"] == "done");

    // workerd drains open connections on SIGTERM, and serve's watch stays open: it is killed.
    worker.kill(libc::SIGKILL);
    eventually(
        "serve lost the Worker",
        Duration::from_secs(STEP_S),
        || Some(m.log()).filter(|l| l.contains("lost the hand-off's watch")),
        || m.log(),
    );
    worker.restart_on_the_same_port();
    assert_eq!(worker.url(), api);
    on(&owner, &["turn", &id, "--prompt", "Are you back?"]);
    let done = until("turn 2 ran on the Worker started again", &|r| r["turn"] == 2 && r["status"] == "done");
    assert_eq!(done["summary"], "Served after the Worker came back.", "{done}");
    assert!(m.log().contains("reconnected at v"), "{}", m.log());

    on(&owner, &["close", &id]);
    let status =
        eventually("serve exits on close", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || m.log());
    assert_eq!(status.code(), Some(0), "{}", m.log());
    eventually(
        "no process is left",
        Duration::from_secs(10),
        || Some(m.processes()).filter(|p| p.is_empty()),
        || format!("{:?}", m.processes()),
    );
    drop(worker);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_state_record_that_cannot_be_written_starts_no_harness_the_turn_ends_failed_saying_where_and_nothing_runs_after_a_restart(
) {
    let mut s = Served::create("Make a proof file.", vec![Step::bash("touch proof.txt"), Step::text("Made it.")], &[]);
    let tmp = s.state_record().with_extension("json.tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    s.serve = Some(s.spawn(&[]));
    let failed = s.until("turn 1 is reported failed", |r| r["turn"] == 1 && r["status"] == "failed");
    let summary = failed["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("the state record could not be written"), "{failed}");
    assert!(summary.contains(&format!("{}.json.tmp", s.id)), "the summary says where: {failed}");
    assert!(
        s.model.requests().is_empty() && !s.machine.log().contains("turn 1 started:"),
        "no harness ran\n{}",
        s.context()
    );

    let mut first = s.serve.take().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    s.serve = Some(s.spawn(&[]));
    let serving = format!("serving {} from", s.id);
    eventually(
        "serve started again",
        Duration::from_secs(STEP_S),
        || (s.machine.log().matches(&serving).count() == 2).then_some(()),
        || s.context(),
    );
    std::thread::sleep(Duration::from_secs(3));
    // serve's runtime report moves the version; nothing moves the turn.
    let after = s.record();
    let turn_of = |r: &Value| (r["turn"].clone(), r["status"].clone(), r["summary"].clone());
    assert_eq!(turn_of(&after), turn_of(&failed), "{after}");
    assert!(
        s.model.requests().is_empty() && !s.machine.log().contains("started:"),
        "nothing ran after the restart\n{}",
        s.context()
    );
    std::fs::remove_dir_all(&tmp).unwrap();
    s.close();
}

#[test]
fn a_stored_session_id_that_is_not_a_uuid_fails_its_turn_saying_so_and_never_reaches_the_harness() {
    let mut s = Served::start("Say hello.", vec![Step::text("Hello."), Step::text("Resumed.")], &[], &[]);
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    let mut first = s.serve.take().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    // The model runs as the machine's user and can write the state record.
    let flag = "--permission-mode=bypassPermissions";
    let mut state: Value = serde_json::from_str(&std::fs::read_to_string(s.state_record()).unwrap()).unwrap();
    state["turns"]["1"]["session"] = Value::from(flag);
    std::fs::write(s.state_record(), state.to_string()).unwrap();
    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Go on."]);
    s.serve = Some(s.spawn(&[]));
    let failed = s.until("turn 2 is reported failed", |r| r["turn"] == 2 && r["status"] == "failed");
    let summary = failed["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("is not a UUID") && summary.contains(flag), "{failed}");
    assert!(!s.machine.log().contains("turn 2 started:"), "{}", s.context());
    assert!(!s.model.agent_requests().iter().any(|r| r.text().contains("Go on.")), "the harness never ran turn 2");
    s.close();
}

#[test]
fn a_hand_off_erased_and_created_again_is_served_from_an_empty_state_record_of_its_new_life() {
    let mut s = Served::start("Say hello.", vec![Step::text("Hello."), Step::text("Hello, new life.")], &[], &[]);
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    ok(Some(&s.owner), &["erase", &s.id]);
    let mut serve = s.serve.take().unwrap();
    eventually("serve ends on the erase", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || s.context());
    let life = |r: &Value| r["incarnation"].as_u64().unwrap_or(0);
    let again = eventually(
        "the same session is created again",
        Duration::from_secs(STEP_S),
        || {
            let r = run(
                Some(&s.owner),
                &["create", &s.session, "--machine", "m1", "--size", "large", "--prompt", "Again."],
            );
            (r.code == 0).then_some(r.stdout)
        },
        || s.context(),
    );
    let mut lines = again.lines();
    assert_eq!(lines.next(), Some(s.id.as_str()), "the same session, the same id");
    s.machine.token = lines.next().unwrap().to_string();
    let old_state: Value = serde_json::from_str(&std::fs::read_to_string(s.state_record()).unwrap()).unwrap();
    assert!(old_state["version"].as_u64().unwrap() > 1, "the old life's record is ahead of the new life's versions");
    s.serve = Some(s.spawn(&[]));
    let done = s.until("the new life's turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], "Hello, new life.", "{done}");
    let state: Value = serde_json::from_str(&std::fs::read_to_string(s.state_record()).unwrap()).unwrap();
    assert_eq!(state["incarnation"].as_u64(), Some(life(&done)), "the record is of the new life: {state}");
    s.close();
}

#[test]
fn serve_stopped_by_term_or_int_ends_the_harness_its_whole_group_and_what_it_left_before_it_exits() {
    let steps = vec![Step::bash("touch proof.txt"), Step::bash("touch second.txt"), Step::text("Left it.")];
    let mut s = Served::start("Make a proof file.", steps, &[], &[]);
    // The harness waits on the owner: Claude Code, and its hook in a group of its own.
    s.question_id();
    assert!(s.harness_processes().len() > 1, "{:?}", s.harness_processes());
    s.signalled(libc::SIGTERM);
    assert!(s.machine.log().contains("serve got signal 15"), "{}", s.context());

    s.serve = Some(s.spawn(&[]));
    s.until("turn 1 is reported failed", |r| r["turn"] == 1 && r["status"] == "failed");
    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "The other file."]);
    eventually(
        "turn 2's question",
        Duration::from_secs(STEP_S),
        || {
            let r = s.record();
            (r["turn"] == 2 && r["question"]["id"].is_string() && r["question"]["answer"].is_null()).then_some(())
        },
        || s.context(),
    );
    s.signalled(libc::SIGINT);
    assert!(!s.machine.work().join("proof.txt").exists() && !s.machine.work().join("second.txt").exists());
    s.serve = Some(s.spawn(&[]));
    s.until("turn 2 is reported failed", |r| r["turn"] == 2 && r["status"] == "failed");
    s.close();
}

#[test]
fn a_turn_cancelled_while_it_is_prepared_is_never_spawned() {
    let mut s = Served::create("Make a proof file.", vec![Step::text("Made it.")], &[]);
    // The owner cancels between serve's preparing the turn and its `running` report.
    let cancelled = std::sync::Arc::new(std::sync::Mutex::new(false));
    let on_send: OnSend = {
        let (owner, id, cancelled) = (s.owner.clone(), s.id.clone(), cancelled.clone());
        std::sync::Arc::new(move |sent: &[u8]| {
            let text = String::from_utf8_lossy(sent);
            let mut done = cancelled.lock().unwrap();
            if !*done && text.contains(r#""status":"running""#) && text.contains(r#""permission_mode":"default""#) {
                ok(Some(&owner), &["cancel", &id]);
                *done = true;
            }
        })
    };
    let relay = Relay::watching(&url(), on_send);
    s.serve = Some(s.spawn(&[("HANDOFF_URL", &relay.url())]));
    s.log_says("was cancelled or moved on while it was prepared");
    assert!(*cancelled.lock().unwrap(), "the owner cancelled while serve prepared the turn");
    std::thread::sleep(Duration::from_secs(2));
    let log = s.machine.log();
    assert!(!log.contains("turn 1 started:"), "no harness was spawned: {log}");
    assert!(s.model.requests().is_empty() && s.harness_processes().is_empty(), "{}", s.context());
    assert_eq!(s.record()["status"], "cancelled", "{}", s.context());
    s.close();
}

#[test]
fn a_steer_sent_while_a_served_codex_turn_works_reaches_a_later_model_request_of_the_same_turn_and_its_reply_answers_it(
) {
    // The command runs for seconds after the owner allows it: the steer arrives while the
    // turn works, and Codex carries it in a later request of the same turn (with the command's
    // result, or right after it: both are answered the same).
    let reply = "Using SQLite, as you asked.";
    let steps = vec![Step::exec("sleep 3 && printf made > proof.txt"), Step::text(reply), Step::text(reply)];
    let mut s = Served::start("Make a proof file.", steps, &[], &["--runtime", "codex"]);
    let q = s.question_id();
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
    let words = "Use SQLite instead of Postgres.";
    let steered = ok(Some(&s.owner), &["steer", &s.id, "-m", words]);
    assert!(steered.starts_with("steered turn 1 with st_"), "{steered}");
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], reply, "{done}");
    assert_eq!(done["steers"][0]["prompt"], words, "{done}");
    let requests = s.model.agent_requests();
    let at = requests.iter().position(|r| r.text().contains(words));
    let at = at.unwrap_or_else(|| panic!("the steer reached the model\n{}", s.context()));
    assert!(at > 0, "a later request of the same turn, not the first");
    assert!(requests[0].text().contains("Make a proof file."));
    let log = s.log_says("delivered");
    let id = done["steers"][0]["id"].as_str().unwrap();
    let line = log.lines().find(|l| l.contains(&format!("steer {id} delivered"))).unwrap_or_default();
    assert!(!line.is_empty(), "serve's log says it was delivered: {log}");
    eprintln!("measured: {line}");
    let event = s.steer_event(1, id);
    assert_eq!((&event["state"], &event["why"]), (&Value::from("delivered"), &Value::Null), "{event}");
    s.close();
}

#[test]
fn a_steer_sent_after_the_turns_harness_ended_is_reported_undelivered_on_the_timeline() {
    // Claude Code waits on the owner's answer; serve is killed and its harness goes with it
    // (the parent-death signal). The owner steers the turn, still open on the record.
    let mut s = Served::start("Make a proof file.", vec![Step::bash("touch proof.txt"), Step::text("Made.")], &[], &[]);
    s.question_id();
    let mut first = s.serve.take().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    let words = "Call it other.txt instead.";
    ok(Some(&s.owner), &["steer", &s.id, "-m", words]);
    let id = s.record()["steers"][0]["id"].as_str().unwrap().to_string();
    // serve again: the turn's harness is gone, so no harness takes the words; it says so once.
    s.serve = Some(s.spawn(&[]));
    let event = s.steer_event(1, &id);
    assert_eq!(event["state"], "undelivered", "{event}");
    let why = event["why"].as_str().unwrap_or_default();
    assert!(why.contains("serve restarted") || why.contains("ended"), "{event}");
    s.until("turn 1 is reported failed", |r| r["status"] == "failed");
    let (_, body) = api_get(&s.owner, &format!("/v1/handoffs/{}/events?turn=1", s.id));
    let steers = body["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "steer").count();
    assert_eq!(steers, 1, "one event per steer: {body}");
    assert!(!s.model.agent_requests().iter().any(|r| r.text().contains(words)), "the words never reached the model");
    s.close();
}

#[test]
fn a_steer_sent_while_a_served_claude_code_turn_works_reaches_a_later_model_request_of_the_same_turn_and_its_reply_answers_it(
) {
    // The command runs for seconds after the owner allows it: the steer arrives between the
    // turn's tool calls, is written to Claude Code's input as a user message, and is read back
    // (delivered); the model's next answer carries it. Either answer ends the turn the same.
    let reply = "Using SQLite, as you asked.";
    let steps = vec![Step::bash("sleep 4 && printf made > proof.txt"), Step::text(reply), Step::text(reply)];
    let mut s = Served::start("Make a proof file.", steps, &[], &[]);
    let q = s.question_id();
    ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
    s.until("the command runs", |r| r["status"] == "running");
    let words = "Use SQLite instead of Postgres.";
    ok(Some(&s.owner), &["steer", &s.id, "-m", words]);
    let id = s.record()["steers"][0]["id"].as_str().unwrap().to_string();
    let event = s.steer_event(1, &id);
    assert_eq!(event["state"], "delivered", "{event}");
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], reply, "{done}");
    let requests = s.model.agent_requests();
    let at = requests.iter().position(|r| r.text().contains(words));
    let at = at.unwrap_or_else(|| panic!("the steer reached the model\n{}", s.context()));
    assert!(at > 0 && requests[0].text().contains("Make a proof file."), "a later request of the same turn");
    let log = s.log_says("final report done");
    let line = log.lines().find(|l| l.contains(&format!("steer {id} delivered"))).unwrap_or_default();
    eprintln!(
        "seen: {} agent requests; the steer first in request {at} (with the tool's result: {}); {line}",
        requests.len(),
        requests[at].body.to_string().contains("tool_result")
    );
    assert_eq!(log.matches("final report done").count(), 1, "one final report: {log}");
    s.close();
}

/// How long the scripted model holds its answer to the owner's words in the steer-while-answering
/// test: long enough for the steer to reach serve and Claude Code's input meanwhile.
const ANSWER_HELD_MS: u64 = 6_000;

#[test]
fn a_steer_sent_while_a_served_claude_code_model_is_answering_runs_as_the_next_exchange_of_the_same_session_and_the_turn_ends_once_at_its_result(
) {
    // The model holds its answer (no tool call): the steer is written to Claude Code's input
    // while the model is answering. Claude Code 2.1.328 takes it after that answer's result, as
    // the next exchange of the same session, and echoes it (delivered) with that exchange's
    // answer. The model holds that answer too, so the test sees the turn still running between
    // the two results.
    let (first, reply) = ("The parser reads JSON.", "Using SQLite, as you asked.");
    let steps = vec![Step::held(ANSWER_HELD_MS, Step::text(first)), Step::held(ANSWER_HELD_MS, Step::text(reply))];
    let mut s = Served::start("Describe the parser.", steps, &[], &[]);
    let answering = |n: usize| {
        eventually(
            &format!("the model is answering request {n}"),
            Duration::from_secs(STEP_S),
            || Some(()).filter(|()| s.model.agent_requests().len() >= n),
            || s.context(),
        );
        Instant::now()
    };
    let asked = answering(1);
    let words = "Use SQLite instead of Postgres.";
    ok(Some(&s.owner), &["steer", &s.id, "-m", words]);
    let steered = asked.elapsed();
    assert!(steered < Duration::from_millis(ANSWER_HELD_MS / 2), "steered while the model answers: {steered:?}");
    let id = s.record()["steers"][0]["id"].as_str().unwrap().to_string();

    answering(2);
    let between = s.record();
    assert_eq!(between["status"], "running", "the first answer's result does not end the turn: {between}");
    let requests = s.model.agent_requests();
    let next = requests[1].text();
    assert!(
        next.contains("Describe the parser.") && next.contains(first) && next.contains(words),
        "the steer's request carries the earlier exchange and the steer's words: {next}"
    );
    assert!(!requests[1].body.to_string().contains("tool_result"), "no tool call was in flight");
    assert!(!requests[0].text().contains(words), "the first request did not carry the steer");
    let session = |r: &ModelRequest| {
        let user: Value = serde_json::from_str(r.body["metadata"]["user_id"].as_str().unwrap_or("{}")).unwrap();
        user["session_id"].as_str().map(String::from)
    };
    assert!(session(&requests[0]).is_some(), "Claude Code names its session: {}", requests[0].body["metadata"]);
    assert_eq!(session(&requests[0]), session(&requests[1]), "the same session");

    let event = s.steer_event(1, &id);
    assert_eq!((&event["state"], &event["why"]), (&Value::from("delivered"), &Value::Null), "{event}");
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], reply, "the turn's reply answers the steer: {done}");
    assert_eq!(s.model.agent_requests().len(), 2, "two exchanges, no more: {}", s.context());
    let log = s.log_says("final report done");
    assert_eq!(log.matches("final report done").count(), 1, "one final report: {log}");
    let line = log.lines().find(|l| l.contains(&format!("steer {id} delivered"))).unwrap_or_default();
    eprintln!("seen: steered {} ms after the first request; {line}", steered.as_millis());
    s.close();
}

#[test]
fn steers_sent_while_a_served_claude_code_model_is_answering_are_each_delivered_and_answered_together_in_the_next_exchange(
) {
    // Claude Code 2.1.328 joins the messages queued while the model answers into one message of
    // the next exchange, a text part each: each steer is read back from it, and that exchange's
    // result ends the turn.
    let (first, reply) = ("The parser reads JSON.", "Using db.sqlite, as you asked.");
    let steps = vec![Step::held(ANSWER_HELD_MS, Step::text(first)), Step::text(reply)];
    let mut s = Served::start("Describe the parser.", steps, &[], &[]);
    eventually(
        "the model is answering",
        Duration::from_secs(STEP_S),
        || Some(()).filter(|()| !s.model.agent_requests().is_empty()),
        || s.context(),
    );
    let words = ["Use SQLite instead of Postgres.", "Name the file db.sqlite."];
    for w in words {
        ok(Some(&s.owner), &["steer", &s.id, "-m", w]);
    }
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["summary"], reply, "{done}");
    for steer in done["steers"].as_array().unwrap() {
        let event = s.steer_event(1, steer["id"].as_str().unwrap());
        assert_eq!(event["state"], "delivered", "{event}");
    }
    let requests = s.model.agent_requests();
    assert_eq!(requests.len(), 2, "one exchange for both steers: {}", s.context());
    assert!(words.iter().all(|w| requests[1].text().contains(w)), "{}", requests[1].text());
    let log = s.log_says("final report done");
    assert_eq!(log.matches("final report done").count(), 1, "one final report: {log}");
    s.close();
}
