//! The machine's side of the turn's timeline: `handoff serve` with the real Claude Code and
//! Codex (the lockfile's versions), their model scripted, against the real local Worker. A
//! served turn leaves its words, its tool calls and its whole reply on the timeline
//! (`GET …/events`) and the lineage (`GET …/turns`), as the sync mode lets them; its files
//! touched reach the package; and a turn's events sent while the service is unreachable are
//! spooled and delivered in order once it answers.

mod common;
use common::harness::*;
use common::served::*;
use common::*;
use handoff_cli::client::{Client, Event, EventKind, Retry};
use handoff_cli::serve::{batch::Queue, sender};
use serde_json::Value;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

impl Served {
    /// The lineage entry of `turn`.
    fn lineage(&self, turn: u64) -> Value {
        let (status, body) = api_get(&self.owner, &format!("/v1/handoffs/{}/turns", self.id));
        assert_eq!(status, 200, "{body}");
        body["turns"].as_array().unwrap().iter().find(|t| t["turn"] == turn).cloned().unwrap()
    }

    /// The files the work record lists, once `path` is among them.
    fn files_with(&self, path: &str) -> Vec<String> {
        eventually(
            &format!("the work record lists {path}"),
            Duration::from_secs(STEP_S),
            || {
                let (_, work) = api_get(&self.owner, &format!("/v1/handoffs/{}/work", self.id));
                let files: Vec<String> = work["work"]["files"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f["path"].as_str().map(str::to_string))
                    .collect();
                files.iter().any(|f| f == path).then_some(files)
            },
            || self.context(),
        )
    }
}

/// Seqs from 1, consecutive.
fn numbered_from_1(events: &[Value]) -> bool {
    events.iter().enumerate().all(|(i, e)| e["seq"] == i as u64 + 1)
}

fn tool<'a>(events: &'a [Value], name: &str, state: &str) -> Option<&'a Value> {
    events.iter().find(|e| e["kind"] == "tool" && e["name"] == name && e["state"] == state)
}

#[test]
fn a_served_claude_code_turn_leaves_its_words_tool_calls_and_whole_reply_on_the_timeline_and_lineage_and_its_files_reach_the_package(
) {
    // A reply longer than the summary's 4 KiB, on many lines: the reply is kept whole.
    let reply: String = (1..=120).map(|i| format!("Line {i} of the answer: the file is made and checked.\n")).collect();
    let reply = reply.trim().to_string();
    let steps = vec![Step::bash("printf hi > made.txt"), Step::text(&reply)];
    let mut s = Served::start("Make the file.", steps, &[], &[]);
    s.answer("allow");
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(done["sync_mode"], "messages", "serve's default, named by its running report: {done}");
    let events = s.events_until(1, "the turn's words and tool calls", |e| {
        tool(e, "Bash", "done").is_some() && e.iter().any(|x| x["kind"] == "message")
    });
    assert!(numbered_from_1(&events), "serve numbers the turn's events from 1: {events:?}");
    let started = tool(&events, "Bash", "started").expect("the call's start");
    assert_eq!(started["input"], "printf hi > made.txt", "the command whole: {started}");
    let ended = tool(&events, "Bash", "done").unwrap();
    assert_eq!(ended["id"], started["id"], "{ended}");
    assert!(ended["duration_ms"].is_u64() && ended.get("output").is_none(), "no output in messages: {ended}");
    let said: Vec<&str> = events.iter().filter(|e| e["kind"] == "message").filter_map(|e| e["text"].as_str()).collect();
    assert!(said.contains(&reply.as_str()), "the model's words: {said:?}");

    let entry = s.lineage(1);
    assert_eq!(entry["reply"], reply.as_str(), "the whole reply on the lineage: {entry}");
    assert!(entry["summary"].as_str().is_some_and(|t| t.len() <= 4096 && reply.starts_with(t.trim_end_matches('…'))));
    assert_eq!(entry["sync_mode"], "messages");
    let log = s.machine.log();
    assert!(log.contains("turn 1: final report done with its reply: delivered 1"), "serve sent the done: {log}");
    assert!(log.contains("in a served turn, serve sends the final report"), "the Stop hook sent none: {log}");

    let files = s.files_with("made.txt");
    assert!(!files.iter().any(|f| f.contains(".claude")), "{files:?}");
    ok(Some(&s.owner), &["work", &s.id, "--title", "The file", "--goal", "Make the file"]);
    let request = ["package", &s.id, "--objective", "Review", "--purpose", "check", "--runtime", "codex", "--json"];
    let package = run(Some(&s.owner), &request).json();
    assert!(package["package"].to_string().contains("made.txt"), "the package's relevant files: {package}");
    s.close();
}

#[test]
fn metadata_mode_sends_tool_names_states_and_durations_and_no_text_input_output_or_reply() {
    let steps = vec![Step::bash("touch secret-name.txt"), Step::text("The secret answer words.")];
    let mut s = Served::start("Make the secret file.", steps, &[], &["--sync", "metadata"]);
    s.answer("allow");
    let done = s.until("turn 1 is done", |r| r["status"] == "done");
    assert_eq!(done["sync_mode"], "metadata", "{done}");
    assert_eq!(done["summary"], "The secret answer words.", "the summary only, as before: {done}");
    let events = s.events_until(1, "the tool's steps", |e| tool(e, "Bash", "done").is_some());
    for e in &events {
        assert_eq!(e["kind"], "tool", "nothing but tool steps: {e}");
        for field in ["text", "input", "output", "output_bytes"] {
            assert!(e.get(field).is_none(), "no {field} in metadata: {e}");
        }
    }
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("secret"), "no word of the turn left the machine: {all}");
    assert!(tool(&events, "Bash", "done").unwrap()["duration_ms"].is_u64());
    let entry = s.lineage(1);
    assert!(entry["reply"].is_null(), "no reply in metadata: {entry}");
    assert_eq!(entry["sync_mode"], "metadata");
    s.close();
}

#[test]
fn a_served_codex_turn_leaves_its_words_commands_with_their_output_and_whole_reply_in_full_mode() {
    let steps = vec![Step::exec("printf made > proof.txt && echo proof-made"), Step::text("Made the proof.")];
    let mut s = Served::start("Make a proof file.", steps, &[], &["--runtime", "codex", "--sync", "full"]);
    s.answer("allow");
    let done = s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    assert_eq!(
        (done["sync_mode"].as_str(), done["summary"].as_str()),
        (Some("full"), Some("Made the proof.")),
        "{done}"
    );
    let events = s.events_until(1, "the command and the words", |e| {
        tool(e, "exec_command", "done").is_some() && e.iter().any(|x| x["kind"] == "message")
    });
    assert!(numbered_from_1(&events), "{events:?}");
    let started = tool(&events, "exec_command", "started").unwrap();
    assert!(started["input"].as_str().is_some_and(|i| i.contains("printf made > proof.txt")), "{started}");
    let ended = tool(&events, "exec_command", "done").unwrap();
    assert!(ended["output"].as_str().is_some_and(|o| o.contains("proof-made")), "full adds the output: {ended}");
    assert!(events.iter().any(|e| e["kind"] == "message" && e["text"] == "Made the proof."), "{events:?}");
    assert_eq!(s.lineage(1)["reply"], "Made the proof.", "the turn's last agent message, whole");
    s.files_with("proof.txt");
    s.close();
}

#[test]
fn the_machine_notes_a_resumed_session_and_a_stop_and_why_on_the_turns_timeline() {
    let steps = vec![Step::text("Hello."), Step::bash("touch never.txt"), Step::text("Not reached.")];
    let mut s = Served::start("Say hello.", steps, &[], &[]);
    s.until("turn 1 is done", |r| r["turn"] == 1 && r["status"] == "done");
    ok(Some(&s.owner), &["turn", &s.id, "--prompt", "Now make a file."]);
    s.until("turn 2 asks", |r| r["turn"] == 2 && r["question"]["id"].is_string() && r["question"]["answer"].is_null());
    ok(Some(&s.owner), &["cancel", &s.id]);
    let events = s.events_until(2, "the stop's note", |e| {
        e.iter().any(|x| x["kind"] == "note" && x["text"].as_str().is_some_and(|t| t.starts_with("Stopped")))
    });
    assert!(numbered_from_1(&events), "each turn numbers from 1 again: {events:?}");
    let notes: Vec<&str> = events.iter().filter(|e| e["kind"] == "note").filter_map(|e| e["text"].as_str()).collect();
    assert!(notes[0].starts_with("Resumed the claude-code session"), "{notes:?}");
    assert_eq!(notes.last().copied(), Some("Stopped claude-code because the owner cancelled it."), "{notes:?}");
    assert!(tool(&events, "Bash", "started").is_some(), "the call it was stopped in: {events:?}");
    let first = s.events_until(1, "turn 1's words", |e| e.iter().any(|x| x["text"] == "Hello."));
    assert!(first.iter().all(|e| e["kind"] != "note"), "a new session is no note: {first:?}");
    s.close();
}

#[test]
fn a_served_turns_events_and_reply_made_while_the_worker_is_down_reach_it_in_order_once_it_is_back() {
    // A Worker of this test's own, on workerd, its state on disk: stopped while the turn works
    // and started again on the same port, where serve and the hooks know it.
    let state = handoff_it::temp_state("timeline-worker");
    let mut worker = handoff_it::Server::start_workerd(&state, &[]);
    let api = worker.url();
    let on = |token: &str, args: &[&str]| ok(Some(token), &[args, &["--url", api.as_str()]].concat());
    let owner = owner();
    let create = ["create", &unique("session"), "--machine", "m1", "--size", "large", "--prompt", "Make the file."];
    let out = on(&owner, &create);
    let mut lines = out.lines();
    let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    let model =
        ScriptedModel::start(vec![Step::bash("touch x.txt"), Step::text("Went on while the service was away.")]);
    let m = Machine::new(&id, &token, &model);
    let mut cmd = m.handoff(&["serve", &id]);
    cmd.env("HANDOFF_URL", &api).env("HANDOFF_SERVE_ANSWER_WAIT_S", "3").stdout(Stdio::null()).stderr(Stdio::null());
    let mut serve = cmd.spawn().expect("handoff serve starts");
    let record = || serde_json::from_str::<Value>(&on(&owner, &["show", &id, "--json"])).unwrap()["handoff"].clone();
    eventually(
        "the harness asks the owner",
        Duration::from_secs(STEP_S),
        || Some(record()).filter(|r| r["question"]["id"].is_string()),
        || m.log(),
    );
    // Down while the question waits: nobody answers, the harness goes on denied, and its words,
    // the call's end and the turn's done have nowhere to go but the spools.
    worker.kill(libc::SIGKILL);
    eventually(
        "serve spools the turn's events",
        Duration::from_secs(STEP_S),
        || Some(m.log()).filter(|l| l.contains("could not send its events")),
        || m.log(),
    );
    std::thread::sleep(Duration::from_secs(2));
    worker.restart_on_the_same_port();
    let done = eventually(
        "turn 1 is done with the reply made while the Worker was down",
        Duration::from_secs(STEP_S),
        || Some(record()).filter(|r| r["status"] == "done"),
        || m.log(),
    );
    assert_eq!(done["reply"], "Went on while the service was away.", "{done}");
    let events = eventually(
        "the turn's events reach the Worker",
        Duration::from_secs(STEP_S),
        || {
            let path = format!("/v1/handoffs/{id}/events?turn=1");
            let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
            let mut r =
                agent.get(format!("{api}{path}")).header("Authorization", format!("Bearer {owner}")).call().ok()?;
            let body: Value = serde_json::from_str(&r.body_mut().read_to_string().ok()?).ok()?;
            let events = body["events"].as_array().cloned().unwrap_or_default();
            events.iter().any(|e| e["kind"] == "message").then_some(events)
        },
        || m.log(),
    );
    assert!(numbered_from_1(&events), "in order, each once: {events:?}");
    let kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["kind"].as_str().unwrap_or_default().into(), e["state"].as_str().unwrap_or_default().into()))
        .collect();
    let at = |k: &str, st: &str| kinds.iter().position(|(a, b)| a == k && b == st);
    assert!(at("tool", "started") < at("tool", "failed") && at("tool", "failed") < at("message", ""), "{kinds:?}");
    on(&owner, &["close", &id]);
    let status =
        eventually("serve exits on close", Duration::from_secs(STEP_S), || serve.try_wait().unwrap(), || m.log());
    assert_eq!(status.code(), Some(0), "{}", m.log());
    drop(worker);
    let _ = std::fs::remove_dir_all(&state);
}

fn message(text: &str) -> Event {
    Event { text: Some(text.into()), ..Event::of(0, EventKind::Message) }
}

#[test]
fn events_sent_while_the_service_is_unreachable_are_spooled_and_delivered_in_order_once_it_answers() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let dir = std::env::temp_dir().join(unique("handoff-timeline-spool"));
    let spool = dir.join("timeline").join(format!("{id}-turn-1.jsonl"));
    // Nothing listens here: the service is unreachable until `reachable` is set.
    let nowhere = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let reachable = Arc::new(AtomicBool::new(false));
    let (up, token) = (reachable.clone(), machine.clone());
    let link = sender::Link {
        id: id.clone(),
        turn: 1,
        spool: spool.clone(),
        client: Arc::new(move || {
            let base = if up.load(Ordering::SeqCst) { url() } else { nowhere.clone() };
            Client::new(&base, Some(&token)).with_retry(Retry::none())
        }),
        refresh: Arc::new(|| false),
        say: Arc::new(|line| eprintln!("sender: {line}")),
    };
    let s = sender::Sender::start(link, Queue::new());
    let timeline = s.timeline();
    for word in ["one", "two", "three"] {
        timeline.push(message(word));
    }
    let spooled = eventually(
        "the events are spooled",
        Duration::from_secs(20),
        || Some(sender::read_spool(&spool)).filter(|e| e.len() == 3),
        || format!("{:?}", std::fs::read_to_string(&spool)),
    );
    assert_eq!(spooled.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3], "numbered before they left");
    timeline.push(message("four"));
    reachable.store(true, Ordering::SeqCst);
    timeline.push(message("five"));
    s.finish();
    assert!(s.wait(Duration::from_secs(30)), "everything was delivered once the service answered");
    let (status, body) = api_get(&owner, &format!("/v1/handoffs/{id}/events?turn=1"));
    assert_eq!(status, 200, "{body}");
    let got: Vec<(u64, String)> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["seq"].as_u64().unwrap(), e["text"].as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(u64, String)> = ["one", "two", "three", "four", "five"]
        .iter()
        .enumerate()
        .map(|(i, w)| (i as u64 + 1, w.to_string()))
        .collect();
    assert_eq!(got, want, "in order, each once");
    assert!(!spool.exists(), "the spool goes once everything in it was taken");

    // A serve that starts sends what an earlier one spooled, after the turn ended too.
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "ended"]);
    std::fs::create_dir_all(spool.parent().unwrap()).unwrap();
    let left = serde_json::to_string(&Event { seq: 6, ..message("six, left by a killed serve") }).unwrap();
    std::fs::write(&spool, format!("{left}\n")).unwrap();
    let (base, token) = (url(), machine.clone());
    let resumed = sender::resume_spooled(&dir, &id, &|turn, path| sender::Link {
        id: id.clone(),
        turn,
        spool: path,
        client: Arc::new({
            let (base, token) = (base.clone(), token.clone());
            move || Client::new(&base, Some(&token))
        }),
        refresh: Arc::new(|| false),
        say: Arc::new(|line| eprintln!("sender: {line}")),
    });
    assert_eq!(resumed.len(), 1);
    assert!(resumed[0].wait(Duration::from_secs(30)));
    let (_, body) = api_get(&owner, &format!("/v1/handoffs/{id}/events?turn=1&after=5"));
    assert_eq!(body["events"][0]["text"], "six, left by a killed serve", "{body}");
    assert!(!spool.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
