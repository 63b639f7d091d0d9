//! `handoff serve` driven from the console alone, and its measured latencies. Both are slow
//! (a browser, 40 harness runs), so they are ignored by `scripts/test` and run by
//! `scripts/served-demo` and `scripts/bench-serve`, against a real local Worker, the real
//! Claude Code and Codex and the scripted model.

mod common;
use common::harness::*;
use common::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest any one wait of these runs takes before it fails.
const STEP_S: u64 = 60;
/// The console script's whole run, browser included.
const CONSOLE_RUN_S: u64 = 240;
/// Turns measured per kind (start, stop).
const BENCH_TURNS: usize = 20;

/// A hand-off created with turn 1's words, and `handoff serve` running on its machine.
struct Served {
    owner: String,
    id: String,
    model: ScriptedModel,
    machine: Machine,
    serve: Child,
}

impl Served {
    fn start(prompt: &str, model: ScriptedModel) -> Served {
        let owner = owner();
        let out =
            ok(Some(&owner), &["create", &unique("session"), "--machine", "m1", "--size", "large", "--prompt", prompt]);
        let mut lines = out.lines();
        let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
        let machine = Machine::new(&id, &token, &model);
        // Codex signed in with the scripted provider's key, so that the runtimes serve detects
        // (`codex login status`) offer it.
        let mut login = Command::new(harness_bin("codex"));
        login.args(["login", "--with-api-key"]).env_clear().envs(machine.vars());
        let mut child = login.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), MODEL_KEY.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "codex login --with-api-key");
        let mut cmd = machine.handoff(&["serve", &id]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let serve = cmd.spawn().expect("handoff serve starts");
        Served { owner, id, model, machine, serve }
    }

    fn record(&self) -> Value {
        record(&self.owner, &self.id)
    }

    fn until(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(
            what,
            Duration::from_secs(STEP_S),
            || Some(self.record()).filter(|r| check(r)),
            || format!("record: {}\nlog:\n{}", self.record(), self.machine.log()),
        )
    }

    fn log_count(&self, what: &str) -> usize {
        self.machine.log().matches(what).count()
    }

    /// The owner closes the hand-off; serve exits 0 and leaves nothing running.
    fn close(mut self) {
        ok(Some(&self.owner), &["close", &self.id]);
        let status = eventually(
            "serve exits on close",
            Duration::from_secs(STEP_S),
            || self.serve.try_wait().unwrap(),
            || self.machine.log(),
        );
        assert_eq!(status.code(), Some(0), "{}", self.machine.log());
        eventually(
            "no process is left",
            Duration::from_secs(10),
            || Some(self.machine.processes()).filter(|p| p.is_empty()),
            || format!("{:?}", self.machine.processes()),
        );
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// The "Done when" session: turn 1 opened with its prompt at create, serve on the
/// machine, then the console alone answers turn 1's question, sends turn 2, hands turn 3 to
/// Codex and stops turn 4. Screenshots go to `SERVED_SHOTS` (phone and desktop per step).
#[test]
#[ignore = "a browser session of several minutes: scripts/served-demo runs it"]
fn from_the_console_alone_the_owner_answers_sends_hands_to_codex_and_cancels_and_the_machine_does_each() {
    let shots = std::env::var("SERVED_SHOTS").expect("SERVED_SHOTS: the folder for the screenshots");
    let python = std::env::var("SERVED_PYTHON").expect("SERVED_PYTHON: the virtualenv's python with Playwright");
    let claude = vec![
        Step::bash("touch proof.txt"),
        Step::text("Made proof.txt."),
        Step::text("Turn 2: the parser reads empty input now."),
    ];
    let codex =
        vec![Step::text("Codex reviewed the parser: two edge cases left."), Step::exec("rm -rf build && echo cleaned")];
    let s = Served::start("Make a proof file, then say so.", ScriptedModel::start_per_api(claude, codex));
    set_parser_work(&s.owner, &s.id);
    eventually(
        "serve reports the runtimes",
        Duration::from_secs(STEP_S),
        || Some(()).filter(|_| s.machine.log().contains("reported runtimes")),
        || s.machine.log(),
    );

    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../test/console/served_session.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .env("CONSOLE_BASE_URL", url())
        .env("SERVED_OWNER", &s.owner)
        .env("SERVED_ID", &s.id)
        .env("SERVED_SHOTS", &shots)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let run = run_bounded("the console script", cmd, CONSOLE_RUN_S);
    eprintln!("console script:\n{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "the console script failed\nlog:\n{}", s.machine.log());

    // What the machine did, and what the model saw, for each of the four.
    let log = s.machine.log();
    eprintln!("serve's log:\n{log}");
    assert!(s.machine.work().join("proof.txt").exists(), "turn 1's allowed command ran");
    let requests = s.model.agent_requests();
    let turn2 = requests
        .iter()
        .find(|r| r.text().contains("Now make the parser read empty input."))
        .expect("turn 2's words reached the model");
    assert!(
        turn2.text().contains("Make a proof file") && turn2.text().contains("Made proof.txt."),
        "turn 2 resumed turn 1's session: {}",
        turn2.text()
    );
    let codex = requests
        .iter()
        .find(|r| r.api == handoff_it::peers::scripted_model::Api::Responses)
        .expect("codex asked the model");
    assert!(
        codex.text().contains("# Hand-off briefing") && codex.text().contains("Review the parser for edge cases"),
        "codex was briefed from the package: {}",
        codex.text()
    );
    assert!(log.contains("turn 3 started: codex") && log.contains("turn 4 started: codex"), "{log}");
    assert!(log.contains("turn 4: stopped codex because the owner cancelled it"), "{log}");
    let rec = s.record();
    assert_eq!((rec["turn"].as_u64(), rec["status"].as_str()), (Some(4), Some("cancelled")), "{rec}");
    assert!(!s.machine.work().join("cleaned").exists());
    s.close();
}

/// The figure after `name`'s "N ms after v" in each line holding `what`.
fn measured(log: &str, what: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| l.split(" ms after v").next()?.rsplit(' ').next()?.parse().ok())
        .collect()
}

/// Item 6: 20 served turns of Claude Code against the scripted model, and 20 cancels, with
/// the times serve logs; and how long Claude Code itself takes from its start to the model's
/// first request, as the test sees it.
#[test]
#[ignore = "40 harness runs: scripts/bench-serve runs it"]
fn bench_served_turns_start_and_stop() {
    // Each turn: a text answer (a start), then a command whose question the owner cancels.
    let mut steps = Vec::new();
    for n in 0..BENCH_TURNS {
        steps.push(Step::text(&format!("Answer {n}.")));
        steps.push(Step::bash(&format!("touch never-{n}.txt")));
    }
    let s = Served::start("Turn 1: say hello.", ScriptedModel::start(steps));
    let mut to_model = Vec::new();
    let mut turn = 1;
    for n in 0..BENCH_TURNS {
        // A turn that runs to its end: the time from its opening to the model's first request.
        if n > 0 {
            turn += 1;
            let before = s.model.requests().len();
            let opened = Instant::now();
            ok(Some(&s.owner), &["turn", &s.id, "--prompt", &format!("Turn {turn}: say hello.")]);
            eventually(
                "the model's first request",
                Duration::from_secs(STEP_S),
                || Some(()).filter(|_| s.model.requests().len() > before),
                || s.machine.log(),
            );
            to_model.push(opened.elapsed().as_millis() as u64);
        }
        s.until("the turn is done", |r| r["turn"] == turn && r["status"] == "done");
        // A turn cancelled while its harness waits on the owner's question.
        turn += 1;
        ok(Some(&s.owner), &["turn", &s.id, "--prompt", &format!("Turn {turn}: make a file.")]);
        s.until("the harness asks", |r| {
            r["turn"] == turn && r["question"]["id"].is_string() && r["question"]["answer"].is_null()
        });
        let stops = s.log_count("because the owner cancelled it");
        ok(Some(&s.owner), &["cancel", &s.id]);
        eventually(
            "serve stops the harness",
            Duration::from_secs(STEP_S),
            || Some(()).filter(|_| s.log_count("because the owner cancelled it") > stops),
            || s.machine.log(),
        );
    }
    let log = s.machine.log();
    eprintln!("serve's log:\n{log}");
    let starts = measured(&log, " started: claude-code session");
    let stops = measured(&log, "because the owner cancelled it");
    assert_eq!((starts.len(), stops.len()), (2 * BENCH_TURNS, BENCH_TURNS), "{log}");
    print_figures("start (version that opened the turn -> Claude Code started)", starts);
    print_figures("stop (cancel's version -> Claude Code ended)", stops);
    print_figures("Claude Code itself: turn opened by the CLI -> the model's first request", to_model);
    s.close();
}

/// The timeline's speed row: from the harness's output to the event reaching a watching client.
/// Each of 20 turns of Claude Code answers with words; the clock starts when the scripted model
/// takes the turn's request (its answer goes at once, so this counts Claude Code's own writing
/// of the line too: an upper bound) and stops when a held `GET …/events` hands the words over.
#[test]
#[ignore = "20 harness runs: scripts/bench-serve runs it"]
fn bench_served_events_reach_a_watching_client() {
    let steps = (0..=BENCH_TURNS).map(|n| Step::text(&format!("Words {n}."))).collect();
    let s = Served::start("Turn 1: say words.", ScriptedModel::start(steps));
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    let mut latencies = Vec::new();
    for turn in 2..=BENCH_TURNS as u64 + 1 {
        let before = s.model.agent_requests().len();
        ok(Some(&s.owner), &["turn", &s.id, "--prompt", &format!("Turn {turn}: say words.")]);
        let asked = eventually(
            "the model's request",
            Duration::from_secs(STEP_S),
            || Some(Instant::now()).filter(|_| s.model.agent_requests().len() > before),
            || s.machine.log(),
        );
        let mut after = 0;
        let arrived = loop {
            let path = format!("/v1/handoffs/{}/events?turn={turn}&after={after}&timeout=30", s.id);
            let (status, body) = api_get(&s.owner, &path);
            assert_eq!(status, 200, "{body}");
            let events = body["events"].as_array().cloned().unwrap_or_default();
            if events.iter().any(|e| e["kind"] == "message") {
                break Instant::now();
            }
            after = body["next"].as_u64().unwrap_or(1) - 1;
            assert!(asked.elapsed() < Duration::from_secs(STEP_S), "no words on turn {turn}'s timeline: {body}");
        };
        latencies.push(arrived.duration_since(asked).as_millis() as u64);
        s.until("the turn is done", |r| r["turn"] == turn && r["status"] == "done");
    }
    print_figures("event (the model answered -> a held GET …/events got the words)", latencies);
    s.close();
}

/// Steering's speed row: from a steer's version to the harness receiving the words. Each of 20
/// served Claude Code turns runs an allowed `sleep 1 && touch …`; the owner steers as it starts, and serve
/// logs when Claude Code read the words back, counted from the steer's version reaching serve.
/// Claude Code takes a steer after its current step, so this counts the rest of the step too.
#[test]
#[ignore = "20 harness runs: scripts/bench-serve runs it"]
fn bench_served_steers_reach_the_harness() {
    let mut steps = Vec::new();
    for n in 0..BENCH_TURNS {
        steps.push(Step::bash(&format!("sleep 1 && touch steered-{n}.txt")));
        steps.push(Step::text(&format!("Steered {n}.")));
    }
    let s = Served::start("Turn 1: sleep.", ScriptedModel::start(steps));
    for turn in 1..=BENCH_TURNS as u64 {
        if turn > 1 {
            ok(Some(&s.owner), &["turn", &s.id, "--prompt", &format!("Turn {turn}: sleep.")]);
        }
        let asked = s.until("the harness asks", |r| {
            r["turn"] == turn && r["question"]["id"].is_string() && r["question"]["answer"].is_null()
        });
        let q = asked["question"]["id"].as_str().unwrap().to_string();
        ok(Some(&s.owner), &["answer", &s.id, "allow", "--question", &q]);
        ok(Some(&s.owner), &["steer", &s.id, "-m", &format!("Steer {turn}.")]);
        s.until("the turn is done", |r| r["turn"] == turn && r["status"] == "done");
    }
    let log = s.machine.log();
    let delivered: Vec<u64> = log
        .lines()
        .filter(|l| l.contains(" delivered, "))
        .filter_map(|l| l.split(" ms after its version arrived").next()?.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(delivered.len(), BENCH_TURNS, "{log}");
    print_figures("steer (its version reached serve -> Claude Code read the words, after its step)", delivered);
    s.close();
}
