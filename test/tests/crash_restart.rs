//! Crash and restart (issue 5, reliability harness 2): drive load on a Worker of this test's
//! own, SIGKILL its whole process group (wrangler and workerd) at a random moment, restart it
//! on the same state, and show that every acknowledged change is there, that nothing
//! unacknowledged is half-done, and — read from the stored history itself once the Worker has
//! stopped — that every hand-off's versions run 1, 2, 3, ... with no gap and no duplicate,
//! each event being exactly the change the clients saw acknowledged (or the one change that
//! was in flight at a crash and is found whole).
//!
//! Each driver keeps one hand-off busy with changes that always move the version (so every
//! acknowledgement is a version), predicts each answer with the pure turn machine and checks
//! it, and stops at the first transport failure: the request it had in flight is the one
//! unacknowledged change, which after the restart must be either absent or there whole.
//!
//! Every acknowledged version is checked where the contract promises it: the record, the
//! stored history (one event per version), the lineage (one entry per turn, agreeing with the
//! record) and the owner's list (a row at the record's version, once the safety alarm has
//! delivered the stored record's row), so that an undelivered row or a lost lineage entry is
//! caught.
//!
//! Replay: `HANDOFF_CRASH_SEED=<seed>` repeats the drivers' choices and the kill moments.

use handoff_core::turn::{self, Command, Record, ReportStatus, Status};
use handoff_it::checker::Snapshot;
use handoff_it::rng::Rng;
use handoff_it::{owner, temp_state, unique, Client, Server};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// Crashes a run survives (the issue asks for at least 5).
const CRASHES: usize = 5;
const DRIVERS: usize = 6;
/// The kill lands this long after the load starts, at random.
const KILL_AFTER_MS_MIN: u64 = 300;
const KILL_AFTER_MS_MAX: u64 = 2_500;

/// What a driver knows of its hand-off: the record as last acknowledged, and the kinds of the
/// changes that made it (the history the store must hold).
struct Tracked {
    owner_token: String,
    id: String,
    machine: String,
    acked: Record,
    kinds: Vec<&'static str>,
}

/// The change a driver had in flight when the Worker died.
enum InFlight {
    Create { session: String },
    Change { id: String, command: Command },
}

fn kind(command: &Command) -> &'static str {
    match command {
        Command::OpenTurn { .. } => "turn_opened",
        Command::Report { .. } => "report",
        Command::Cancel { .. } => "cancel",
        Command::Close => "close",
        Command::Answer { .. } => "answer",
    }
}

fn model_record(id: &str, session: &str) -> Record {
    Record::create(id.to_string(), "o".into(), session.to_string(), "m1".into(), "large".into(), 0)
}

/// A change that moves the version of `r` (open and not closed).
fn next_change(rng: &mut Rng, r: &Record, step: u64) -> Command {
    if r.status.has_ended() {
        return Command::OpenTurn { after: r.turn, prompt: None };
    }
    let summary = Some(format!("step {step}"));
    match rng.below(100) {
        0..=49 => {
            let status = if r.status == Status::Running { ReportStatus::NeedsYou } else { ReportStatus::Running };
            Command::Report {
                turn: r.turn,
                status,
                summary,
                question: None,
                runtime: None,
                permission_mode: None,
                reply: None,
                sync_mode: None,
            }
        }
        50..=74 => Command::Report {
            turn: r.turn,
            status: *rng.pick(&[ReportStatus::Done, ReportStatus::Failed]),
            summary,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        },
        75..=92 => Command::Cancel { turn: rng.chance(50).then_some(r.turn) },
        _ => Command::Close,
    }
}

fn send_command(c: &Client, t: &Tracked, command: &Command) -> Result<handoff_it::Answer, String> {
    let (path, token, body) = match command {
        Command::OpenTurn { after, .. } => ("turns", &t.owner_token, json!({"after": after})),
        Command::Report { turn, status, summary, .. } => {
            ("report", &t.machine, json!({"turn": turn, "status": status, "summary": summary}))
        }
        Command::Cancel { turn: Some(n) } => ("cancel", &t.owner_token, json!({"turn": n})),
        Command::Cancel { turn: None } => ("cancel", &t.owner_token, json!({})),
        Command::Close => ("close", &t.owner_token, json!({})),
        Command::Answer { .. } => unreachable!("the crash runs ask no questions"),
    };
    c.try_send("POST", &format!("/v1/handoffs/{}/{path}", t.id), Some(token), &[], Some(body.to_string().as_bytes()))
}

/// Creates a hand-off for a fresh session; `Err` carries the in-flight create.
fn create(c: &Client, owner_token: &str) -> Result<Tracked, InFlight> {
    let session = unique("crash");
    let body = json!({"session": session, "machine": "m1", "size": "large"}).to_string();
    let a = c
        .try_send("POST", "/v1/handoffs", Some(owner_token), &[], Some(body.as_bytes()))
        .map_err(|_| InFlight::Create { session: session.clone() })?;
    assert_eq!(a.status, 201, "create: {}", a.text);
    let id = a.handoff()["id"].as_str().unwrap().to_string();
    let machine = a.body["machine_token"].as_str().unwrap().to_string();
    Ok(Tracked {
        owner_token: owner_token.to_string(),
        acked: model_record(&id, &session),
        id,
        machine,
        kinds: vec!["create"],
    })
}

/// Drives changes until the Worker dies; answers the hand-offs it finished with, the one it
/// was on, and what it had in flight.
fn drive(
    c: &Client,
    owner_token: &str,
    current: Option<Tracked>,
    rng: &mut Rng,
) -> (Vec<Tracked>, Option<Tracked>, InFlight) {
    let mut done = vec![];
    let mut current = current;
    let mut step = 0;
    loop {
        let t = match current.take() {
            Some(t) if t.acked.state == handoff_core::turn::State::Open => t,
            Some(closed) => {
                done.push(closed);
                continue;
            }
            None => match create(c, owner_token) {
                Ok(t) => t,
                Err(in_flight) => return (done, None, in_flight),
            },
        };
        step += 1;
        let command = next_change(rng, &t.acked, step);
        match send_command(c, &t, &command) {
            Err(_) => {
                let in_flight = InFlight::Change { id: t.id.clone(), command };
                return (done, Some(t), in_flight);
            }
            Ok(a) => {
                let expected =
                    turn::apply(&t.acked, &command, 0).expect("the driver only sends changes the rules accept");
                assert!(expected.moved);
                assert_eq!(a.status, 200, "{command:?}: {}", a.text);
                assert_eq!(
                    Snapshot::from_json(a.handoff()),
                    Some(Snapshot::of(&expected.next)),
                    "{command:?}: {}",
                    a.text
                );
                let mut t = t;
                t.acked = expected.next;
                t.kinds.push(kind(&command));
                current = Some(t);
            }
        }
    }
}

/// After a restart: the hand-off is exactly as acknowledged, or — only if its change was in
/// flight — exactly one whole change further. Updates the tracked record to what was found.
fn recover(c: &Client, t: &mut Tracked, in_flight: Option<&Command>) -> Result<&'static str, String> {
    let got = c.get(&format!("/v1/handoffs/{}", t.id), &t.owner_token);
    if got.status != 200 {
        return Err(format!("{}: {} after the restart", t.id, got.text));
    }
    let found = Snapshot::from_json(got.handoff()).unwrap();
    if found == Snapshot::of(&t.acked) {
        return Ok(if in_flight.is_some() { "in-flight change absent" } else { "as acknowledged" });
    }
    let Some(command) = in_flight else {
        return Err(format!("{}: acknowledged {}, found {found}", t.id, Snapshot::of(&t.acked)));
    };
    let whole = turn::apply(&t.acked, command, 0).unwrap().next;
    if found != Snapshot::of(&whole) {
        return Err(format!(
            "{}: acknowledged {}, in flight {command:?}, found {found} (neither)",
            t.id,
            Snapshot::of(&t.acked)
        ));
    }
    t.acked = whole;
    t.kinds.push(kind(command));
    Ok("in-flight change found whole")
}

/// How long the owner's list may take to show a change that only the stored alarm can deliver
/// (its safety alarm is due 10 s after the change, a retry sooner; see limits::OUTBOX_*).
const LIST_CATCH_UP_S: u64 = 30;

/// After the restarts: each hand-off's lineage, read through the API, has one entry per turn,
/// the last one at the record's turn and status.
fn check_lineage(c: &Client, t: &Tracked) -> Result<(), String> {
    let got = c.get(&format!("/v1/handoffs/{}/turns?limit=1000", t.id), &t.owner_token);
    let turns: Vec<(u64, String)> = got.body["turns"]
        .as_array()
        .ok_or_else(|| format!("{}: {}", t.id, got.text))?
        .iter()
        .map(|e| (e["turn"].as_u64().unwrap_or(0), e["status"].as_str().unwrap_or("").to_string()))
        .collect();
    let numbers: Vec<u64> = turns.iter().map(|e| e.0).collect();
    if numbers != (1..=t.acked.turn).collect::<Vec<_>>() {
        return Err(format!("{}: lineage turns {numbers:?}, the record is at turn {}", t.id, t.acked.turn));
    }
    let last = turns.last().map(|e| e.1.as_str());
    if last != Some(t.acked.status.as_str()) {
        return Err(format!("{}: the lineage ends {last:?}, the record is {}", t.id, t.acked.status.as_str()));
    }
    if turns[..turns.len() - 1].iter().any(|e| e.1 == "running" || e.1 == "needs-you") {
        return Err(format!("{}: an earlier turn of the lineage never ended: {turns:?}", t.id));
    }
    Ok(())
}

/// After the restarts: each owner's list shows every hand-off at its acknowledged version,
/// within [`LIST_CATCH_UP_S`] (a change in flight at a crash reaches it by the stored alarm).
fn check_lists(c: &Client, tracked: &[&Tracked]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(LIST_CATCH_UP_S);
    loop {
        let mut behind = vec![];
        for t in tracked {
            let list = c.get("/v1/handoffs?limit=200", &t.owner_token);
            let row = list.body["handoffs"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["id"] == t.id.as_str()).cloned());
            let version = row.as_ref().and_then(|r| r["version"].as_u64());
            if version != Some(t.acked.version) {
                behind.push(format!("{}: listed at {version:?}, acknowledged {}", t.id, t.acked.version));
            }
        }
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the owner's list is behind after {LIST_CATCH_UP_S} s: {}", behind.join("; ")));
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// Every hand-off object's stored record and history, read from the state folder with
/// Python's sqlite3 (the Worker must be stopped).
fn stored_histories(state: &std::path::Path) -> BTreeMap<String, (u64, Vec<(u64, String)>)> {
    let script = r#"
import glob, json, sqlite3, sys
for path in glob.glob(sys.argv[1] + '/**/*HandoffObject*/*.sqlite', recursive=True):
    db = sqlite3.connect(path)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if 'handoff' not in tables:
        continue
    rows = db.execute('SELECT record FROM handoff WHERE k = 0').fetchall()
    if not rows:
        continue
    record = json.loads(rows[0][0])
    events = db.execute('SELECT version, kind FROM events ORDER BY rowid').fetchall()
    print(json.dumps({'id': record['id'], 'version': record['version'], 'events': events}))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &state.display().to_string()])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let events = v["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e[0].as_u64().unwrap(), e[1].as_str().unwrap().to_string()))
                .collect();
            (v["id"].as_str().unwrap().to_string(), (v["version"].as_u64().unwrap(), events))
        })
        .collect()
}

#[test]
fn after_a_sigkill_mid_load_every_acknowledged_change_is_there_whole_and_versions_have_no_gap() {
    let started = Instant::now();
    let (seed, _) = Rng::seed_from_env("HANDOFF_CRASH_SEED");
    eprintln!("crash_restart: seed {seed} (replay with HANDOFF_CRASH_SEED={seed})");
    let state = temp_state("crash");
    let mut server = Server::start(&state, None);
    let names: Vec<String> = (0..DRIVERS).map(|_| unique("crash")).collect();
    let owners: Vec<String> = names.iter().map(|n| owner(n)).collect();
    let mut rng = Rng::new(seed);
    let mut current: Vec<Option<Tracked>> = (0..DRIVERS).map(|_| None).collect();
    let mut finished: Vec<Tracked> = vec![];
    let mut outcomes = BTreeMap::<&'static str, usize>::new();
    let mut load_s = 0.0;
    for crash in 0..CRASHES {
        let c = server.client();
        if crash == CRASHES - 1 {
            // The last round's changes are committed and answered but never delivered (the
            // indexes refuse them until the restart), so only each hand-off's stored record and
            // its alarm can bring the owner's list up to date: an alarm that does not deliver
            // the record's row is then caught by `check_lists`.
            for owner_token in &owners {
                let a = c.post("/v1/test/refuse-index", owner_token, json!({"on": true}));
                assert_eq!(a.status, 200, "{}", a.text);
            }
        }
        let kill_after = Duration::from_millis(KILL_AFTER_MS_MIN + rng.below(KILL_AFTER_MS_MAX - KILL_AFTER_MS_MIN));
        let results = Mutex::new(vec![]);
        let load = Instant::now();
        thread::scope(|s| {
            for (d, slot) in current.iter_mut().enumerate() {
                let (c, owner_token, results) = (&c, &owners[d], &results);
                let mut rng = Rng::new(Rng::derive(seed, (crash * DRIVERS + d) as u64 + 1));
                let start = slot.take();
                s.spawn(move || {
                    let out = drive(c, owner_token, start, &mut rng);
                    results.lock().unwrap().push((d, out));
                });
            }
            thread::sleep(kill_after);
            server.kill(libc::SIGKILL);
        });
        load_s += load.elapsed().as_secs_f64();
        server.restart();
        let c = server.client();
        let mut results = results.into_inner().unwrap();
        results.sort_by_key(|(d, _)| *d);
        for (d, (done, on, in_flight)) in results {
            finished.extend(done);
            match in_flight {
                InFlight::Create { session } => {
                    // Absent, or there whole at version 1: nothing between.
                    let id = handoff_api::input::handoff_id(&names[d], &session);
                    let got = c.get(&format!("/v1/handoffs/{id}"), &owners[d]);
                    match got.status {
                        404 => *outcomes.entry("in-flight create absent").or_default() += 1,
                        200 => {
                            assert_eq!(
                                Snapshot::from_json(got.handoff()),
                                Some(Snapshot::of(&model_record(&id, &session))),
                                "crash {crash}: a half-made hand-off"
                            );
                            *outcomes.entry("in-flight create found whole").or_default() += 1;
                        }
                        _ => panic!("crash {crash}: {}", got.text),
                    }
                    current[d] = None;
                }
                InFlight::Change { id, command } => {
                    let mut t = on.expect("a change in flight is on a tracked hand-off");
                    assert_eq!(t.id, id);
                    let how = recover(&c, &mut t, Some(&command))
                        .unwrap_or_else(|e| panic!("crash {crash} (seed {seed}): {e}"));
                    *outcomes.entry(how).or_default() += 1;
                    current[d] = Some(t);
                }
            }
        }
        for t in finished.iter_mut() {
            recover(&c, t, None)
                .unwrap_or_else(|e| panic!("crash {crash} (seed {seed}): a closed hand-off changed: {e}"));
        }
        eprintln!("crash_restart: crash {} after {} ms of load, restarted", crash + 1, kill_after.as_millis());
    }
    {
        let c = server.client();
        let tracked: Vec<&Tracked> = finished.iter().chain(current.iter().flatten()).collect();
        for t in &tracked {
            check_lineage(&c, t).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        check_lists(&c, &tracked).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    server.stop();
    drop(server);

    // The stored history: versions 1..=N, each once, each the change the clients saw.
    let stored = stored_histories(&state);
    let tracked: Vec<&Tracked> = finished.iter().chain(current.iter().flatten()).collect();
    for t in &tracked {
        let (version, events) = stored.get(&t.id).unwrap_or_else(|| panic!("{} is not in the store", t.id));
        assert_eq!(*version, t.acked.version, "{}: the stored record", t.id);
        let versions: Vec<u64> = events.iter().map(|e| e.0).collect();
        assert_eq!(versions, (1..=*version).collect::<Vec<_>>(), "{}: versions with a gap or a duplicate", t.id);
        let kinds: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
        assert_eq!(kinds, t.kinds, "{}: the stored history is not the acknowledged one", t.id);
    }
    eprintln!(
        "crash_restart: {CRASHES} SIGKILLs, {} hand-offs, {} stored changes each as acknowledged, in-flight outcomes {outcomes:?}; {:.1} s of load, {:.1} s in all",
        tracked.len(),
        tracked.iter().map(|t| t.kinds.len()).sum::<usize>(),
        load_s,
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&state);
}
