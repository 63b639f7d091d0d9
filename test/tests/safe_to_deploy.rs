//! Safe to deploy (issue 10): every resource a client can make the service hold is bounded,
//! every write is all-or-nothing, and no configuration of a deployed environment opens the
//! test routes or accepts a key anyone can sign with.

use handoff_api::token::{owner_token, DEV_SIGNING_KEY};
use handoff_core::limits::{
    BODY_BYTES_MAX, EVENTS_PER_HANDOFF_MAX, EVENTS_TRIM_STEP, IDEMPOTENCY_KEYS_PER_HANDOFF_MAX,
    TURNS_KEPT_PER_HANDOFF_MAX, TURNS_PAGE_DEFAULT,
};
use handoff_it::workerd::databases_holding_data;
use handoff_it::{now_s, owner, temp_state, unique, Answer, Client, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The ceiling on one hand-off object's database, whatever one client repeats: the remembered
/// answers' cap (2 MiB), a thousand events and lineage entries, the parts' own caps (the work
/// record at most 1 MiB), and SQLite's pages and indexes around them.
const STORED_BYTES_CEILING: u64 = 6 * 1024 * 1024;
/// The most the runtime's resident memory may grow while it refuses a 200 MB body.
const BODY_PEAK_GROWTH_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// The body the runtime is sent in the memory test.
const HUGE_BODY_BYTES: usize = 200 * 1024 * 1024;
/// The fixed message of every 503 `store.unavailable`.
const STORE_FAILED: &str = "the hand-off store is unavailable; try again";

fn work_body(title: &str, goal: &str) -> Value {
    json!({"title": title, "goal": goal, "constraints": [], "acceptance_criteria": []})
}

fn storage(c: &Client, id: &str, owner: &str) -> Value {
    let a = c.get(&format!("/v1/test/handoffs/{id}/storage"), owner);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body
}

fn keyed(c: &Client, method: &str, path: &str, token: &str, key: &str, body: &Value) -> Answer {
    c.send(method, path, Some(token), &[("Idempotency-Key", key)], Some(body.to_string().as_bytes()))
}

fn arm(c: &Client, id: &str, owner: &str, fault: Value) {
    let a = c.post(&format!("/v1/test/handoffs/{id}/fault"), owner, fault);
    assert_eq!(a.status, 200, "{}", a.text);
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib =
        status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
    kib.unwrap_or(0) * 1024
}

/// Sends `total` bytes as a chunked body on a raw connection (no `Content-Length`), stopping
/// when the server stops taking them; answers the status line's code, the answer's text and how
/// many bytes went out.
fn send_chunked(port: u16, path: &str, token: &str, total: usize) -> (u16, String, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut reader = s.try_clone().unwrap();
    let answer = thread::spawn(move || {
        let mut raw = vec![];
        let _ = reader.read_to_end(&mut raw);
        String::from_utf8_lossy(&raw).into_owned()
    });
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < total {
        let frame = format!("{:x}\r\n", chunk.len());
        let ok = s.write_all(frame.as_bytes()).and_then(|_| s.write_all(&chunk)).and_then(|_| s.write_all(b"\r\n"));
        if ok.is_err() {
            break;
        }
        sent += chunk.len();
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let text = answer.join().unwrap();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text, sent)
}

/// A raw GET carrying a body, which the test client will not send.
fn get_with_body(port: u16, path: &str, token: &str, body: &str) -> String {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    send_raw(port, request.as_bytes())
}

/// Sends `request` as it is on a raw connection, then closes the sending side; answers what came back.
fn send_raw(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(request);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut raw = vec![];
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

/// On workerd itself: a body short of its declared length (the client stopped sending) is 400,
/// and one over its route's cap behind a small declared length is 413.
#[test]
fn a_hand_offs_body_that_is_not_what_its_content_length_declared_is_refused_and_changes_nothing() {
    let state = temp_state("body-framing");
    let server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let port = server.port;
    let head = |length: usize, more: &str| {
        format!(
            "POST /v1/handoffs/{id}/report HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {machine}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n{more}Connection: close\r\n\r\n"
        )
    };
    let report = br#"{"turn":1,"status":"done","summary":"finished"}"#;
    // Less than declared: the client stops sending.
    let short = [head(report.len() + 100, "").as_bytes(), report].concat();
    let answer = send_raw(port, &short);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains(r#"{"code":"request.invalid","message":"body: unreadable"}"#), "{answer}");
    // A chunked body over the report's cap behind a small declared length.
    let over = handoff_core::limits::REPORT_BODY_BYTES_MAX + 1;
    let mut chunked = head(report.len(), "Transfer-Encoding: chunked\r\n").into_bytes();
    chunked.extend_from_slice(format!("{over:x}\r\n").as_bytes());
    chunked.extend(std::iter::repeat_n(b' ', over));
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let answer = send_raw(port, &chunked);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("request.too_large"), "{answer}");
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!((after.version(), after.handoff()["status"].as_str()), (1, Some("running")), "nothing changed");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// On workerd itself, so that the process measured is the one that reads the body.
#[test]
fn a_200_mb_chunked_body_is_refused_as_soon_as_it_passes_the_limit_and_the_runtime_does_not_grow() {
    let state = temp_state("huge-body");
    let server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let pid = server.workerd_pid().expect("workerd's pid");
    thread::sleep(Duration::from_millis(500));
    let idle = rss_bytes(pid);
    let peak = Arc::new(AtomicU64::new(idle));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(pid), Ordering::Relaxed);
                thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let started = Instant::now();
    let (status, text, sent) =
        send_chunked(server.port, &format!("/v1/handoffs/{id}/report"), &machine, HUGE_BODY_BYTES);
    let took = started.elapsed();
    thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let growth = peak.load(Ordering::Relaxed).saturating_sub(idle);
    eprintln!(
        "huge body: {status} after {:.1} MiB sent of {} MiB in {:.2} s; workerd RSS idle {:.1} MiB, peak {:.1} MiB (+{:.2} MiB)",
        sent as f64 / 1048576.0,
        HUGE_BODY_BYTES / 1048576,
        took.as_secs_f64(),
        idle as f64 / 1048576.0,
        peak.load(Ordering::Relaxed) as f64 / 1048576.0,
        growth as f64 / 1048576.0
    );
    assert_eq!(status, 413, "{}", &text[..text.len().min(400)]);
    assert!(text.contains("request.too_large"), "{text}");
    assert!(growth < BODY_PEAK_GROWTH_BYTES_MAX, "the runtime grew {growth} bytes while refusing the body");
    // A body a little over its route's cap, chunked, is refused the same way: 192 KiB on a
    // report (which may carry the whole reply), 16 KiB elsewhere (a cancel).
    let (over, _, _) = send_chunked(
        server.port,
        &format!("/v1/handoffs/{id}/report"),
        &machine,
        handoff_core::limits::REPORT_BODY_BYTES_MAX + 1,
    );
    assert_eq!(over, 413);
    let (over, _, _) = send_chunked(server.port, &format!("/v1/handoffs/{id}/cancel"), &alice, BODY_BYTES_MAX + 1);
    assert_eq!(over, 413);
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!((after.version(), after.handoff()["status"].as_str()), (1, Some("running")), "nothing changed");
    // A GET takes no body.
    let answer = get_with_body(server.port, &format!("/v1/handoffs/{id}"), &alice, "{\"x\":1}");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("request.invalid") && answer.contains("no body"), "{answer}");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_thousand_requests_for_ids_never_created_leave_nothing_on_disk() {
    let state = temp_state("unknown-ids");
    let server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    assert_eq!(c.get("/v1/handoffs", &alice).status, 200);
    // Let the runtime write what the create and the list wrote.
    thread::sleep(Duration::from_millis(500));
    let before = databases_holding_data(&state);
    assert!(before >= 2, "the created hand-off and the owner's index hold data under {}", state.display());
    thread::scope(|s| {
        for t in 0..4u64 {
            let (c, alice) = (&c, &alice);
            s.spawn(move || {
                for n in 0..250u64 {
                    let unknown =
                        format!("ho_{:032x}", (t << 40) ^ (n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ now_s() as u64);
                    let (path, body): (String, Option<Value>) = match n % 5 {
                        0 => (format!("/v1/handoffs/{unknown}"), None),
                        1 => (format!("/v1/handoffs/{unknown}/wait?after=0&timeout=0"), None),
                        2 => (format!("/v1/handoffs/{unknown}/turns"), None),
                        3 => (format!("/v1/handoffs/{unknown}/close"), Some(json!({}))),
                        _ => (
                            format!("/v1/handoffs/{unknown}/decisions"),
                            Some(json!({"statement": "s", "evidence": []})),
                        ),
                    };
                    let a = match body {
                        None => c.get(&path, alice),
                        Some(b) => c.post(&path, alice, b),
                    };
                    assert_eq!((a.status, a.code()), (404, "handoff.not_found"), "{path}: {}", a.text);
                }
            });
        }
    });
    thread::sleep(Duration::from_millis(500));
    let after = databases_holding_data(&state);
    assert_eq!(
        after,
        before,
        "1,000 requests for unknown ids wrote into {} objects' storage",
        after.saturating_sub(before)
    );
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_change_whose_write_fails_half_way_leaves_the_hand_off_as_it_was_and_it_takes_the_next_change() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let path = |rest: &str| format!("/v1/handoffs/{id}{rest}");
    // A work change writes the record, a part and an event (what the owner's index is owed is
    // derived from the record, so there is no outbox row): fail each statement in turn.
    for statement in 1..=3 {
        arm(&c, &id, &alice, json!({"fail": "statement", "statement": statement}));
        let work = work_body(&format!("t{statement}"), "g");
        let failed = c.put(&path("/work"), &alice, work.clone());
        assert_eq!(
            (failed.status, failed.code()),
            (503, "store.unavailable"),
            "statement {statement}: {}",
            failed.text
        );
        assert_eq!(failed.body["error"]["message"], STORE_FAILED, "the runtime's text stays in the log");
        let now = c.get(&path(""), &alice);
        assert_eq!(now.version(), statement as u64, "statement {statement}: the old version still answers");
        let work_now = c.get(&path("/package?format=json"), &alice);
        assert_ne!(work_now.status, 500);
        // The next change takes the next version, as if the failed one never came.
        let next = c.put(&path("/work"), &alice, work);
        assert_eq!((next.status, next.version()), (200, statement as u64 + 1), "{}", next.text);
        assert_eq!(next.body["work"]["title"], format!("t{statement}"));
    }
    let r = c.report(&id, &machine, 1, "needs-you", Some("after the failures"));
    assert_eq!((r.status, r.version()), (200, 5), "{}", r.text);
}

/// Issue 16's fault at the commit: the change's writes roll back and `storage.sync()` rejects.
/// No waiter and no row of the owner's list may ever see the lost version; the caller gets 503
/// and the next change takes the same version number.
#[test]
fn a_lost_commit_is_seen_by_no_waiter_and_no_list_and_the_next_change_takes_its_version() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let waiter = {
        let (c, alice, id) = (c.clone(), alice.clone(), id.clone());
        thread::spawn(move || c.get(&format!("/v1/handoffs/{id}/wait?after=1&timeout=3"), &alice))
    };
    thread::sleep(Duration::from_millis(700));
    arm(&c, &id, &alice, json!({"fail": "sync"}));
    let lost = c.report(&id, &machine, 1, "needs-you", Some("this version is lost"));
    assert_eq!((lost.status, lost.code()), (503, "store.unavailable"), "{}", lost.text);
    let told = waiter.join().unwrap();
    assert_eq!(told.status, 200, "{}", told.text);
    assert_eq!(told.version(), 1, "a waiter was told a version whose commit was lost: {}", told.text);
    let list = c.get("/v1/handoffs", &alice);
    let row = list.body["handoffs"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["version"], 1, "the owner's list saw the lost version: {row}");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1);
    let next = c.report(&id, &machine, 1, "needs-you", Some("kept"));
    assert_eq!((next.status, next.version()), (200, 2), "{}", next.text);
    assert_eq!(next.handoff()["summary"], "kept");
}

/// Issue 28: a panic between a change and its commit (the release build traps there, as it
/// would on a bug). The change fails, and no hand-off then answers from memory: the one that
/// held the unstored change, and another made before the panic, both answer what is stored
/// (worker-build's module, which `src/entry.mjs` forwards to, starts a fresh instance after a
/// trap and makes each object again from storage). The trapped request's ask rejects, which the
/// edge answers with the one 503, as it does every request in flight in that isolate at the
/// trap: this test runs on a workerd of its own, not on the shared Worker other tests are using.
#[test]
fn a_panic_between_a_change_and_its_commit_leaves_no_hand_off_answering_from_memory() {
    let state = temp_state("trap");
    let server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let (other, other_machine, _) = c.create(&alice);
    let stored = c.report(&other, &other_machine, 1, "needs-you", Some("stored"));
    assert_eq!((stored.status, stored.version()), (200, 2), "{}", stored.text);
    arm(&c, &id, &alice, json!({"fail": "panic"}));
    let trapped = c.report(&id, &machine, 1, "needs-you", Some("never stored"));
    assert_eq!((trapped.status, trapped.code()), (503, "store.unavailable"), "{}", trapped.text);
    // A reset object may answer the first call after the panic with 503, which clients retry.
    let read = |id: &str| {
        let mut answer = c.get(&format!("/v1/handoffs/{id}"), &alice);
        for _ in 0..5 {
            if answer.status != 503 {
                break;
            }
            thread::sleep(Duration::from_millis(100));
            answer = c.get(&format!("/v1/handoffs/{id}"), &alice);
        }
        answer
    };
    let after = read(&id);
    assert_eq!(
        (after.status, after.version()),
        (200, 1),
        "the hand-off answered from memory that held a change never stored: {}",
        after.text
    );
    assert_ne!(after.handoff()["summary"], "never stored");
    let next = c.report(&id, &machine, 1, "needs-you", Some("kept"));
    assert_eq!((next.status, next.version()), (200, 2), "{}", next.text);
    let other_after = read(&other);
    assert_eq!((other_after.status, other_after.version()), (200, 2), "{}", other_after.text);
    assert_eq!(other_after.handoff()["summary"], "stored");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_key_first_used_on_a_dry_run_never_replays_the_preview_over_the_real_compile() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    let work = c.put(&format!("/v1/handoffs/{id}/work"), &alice, work_body("t", "g"));
    assert_eq!(work.status, 200);
    let request = json!({"objective": "o", "purpose": "p", "runtime": "codex"});
    let preview = keyed(&c, "POST", &format!("/v1/handoffs/{id}/package?dry_run=true"), &alice, "k-1", &request);
    assert_eq!((preview.status, preview.version()), (200, 2), "{}", preview.text);
    let real = keyed(&c, "POST", &format!("/v1/handoffs/{id}/package"), &alice, "k-1", &request);
    assert!(real.status == 200 || real.status == 422, "{}", real.text);
    assert_ne!(real.body, preview.body, "the preview was replayed as the compile");
    if real.status == 200 {
        assert_eq!(real.version(), 3, "the real compile moved the version: {}", real.text);
    }
    // And the compile's key replays the compile, whole, package and all.
    let again = keyed(&c, "POST", &format!("/v1/handoffs/{id}/package"), &alice, "k-2", &request);
    let replay = keyed(&c, "POST", &format!("/v1/handoffs/{id}/package"), &alice, "k-2", &request);
    assert_eq!((replay.status, &replay.body), (again.status, &again.body));
}

/// One client repeats each path that can grow a hand-off's storage thousands of times; its
/// database stays under [`STORED_BYTES_CEILING`], and what the contract promises is still there.
#[test]
fn a_workspace_posted_with_a_new_key_each_time_keeps_a_bounded_number_of_answers() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let files: Vec<Value> = (0..150).map(|i| json!({"path": format!("src/module_{i:03}/file_with_a_longish_name.rs"), "insertions": i, "deletions": 1})).collect();
    let body = json!({"files": files});
    let posts = 1_500;
    let mut last = None;
    for n in 0..posts {
        let key = format!("ws-{n}");
        let a = keyed(&c, "POST", &format!("/v1/handoffs/{id}/workspace"), &machine, &key, &body);
        assert_eq!(a.status, 200, "{}", a.text);
        last = Some((key, a));
    }
    let stored = storage(&c, &id, &alice);
    eprintln!("growth path, {posts} keyed workspace posts of 150 paths: {stored}");
    assert!(stored["bytes"].as_u64().unwrap() < STORED_BYTES_CEILING, "{stored}");
    assert!(stored["rows"]["idempotency"].as_u64().unwrap() <= IDEMPOTENCY_KEYS_PER_HANDOFF_MAX as u64, "{stored}");
    // The newest key still answers its first answer.
    let (key, first) = last.unwrap();
    let replay = keyed(&c, "POST", &format!("/v1/handoffs/{id}/workspace"), &machine, &key, &body);
    assert_eq!((replay.status, &replay.body), (200, &first.body));
}

#[test]
fn dry_run_packages_with_a_new_key_each_time_store_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    let goal = "g".repeat(3_000);
    assert_eq!(c.put(&format!("/v1/handoffs/{id}/work"), &alice, work_body("t", &goal)).status, 200);
    let before = storage(&c, &id, &alice);
    let request = json!({"objective": "o".repeat(2_000), "purpose": "p", "runtime": "codex"});
    for n in 0..1_000 {
        let a = keyed(
            &c,
            "POST",
            &format!("/v1/handoffs/{id}/package?dry_run=true"),
            &alice,
            &format!("dry-{n}"),
            &request,
        );
        assert_eq!(a.status, 200, "{}", a.text);
    }
    let after = storage(&c, &id, &alice);
    eprintln!("growth path, 1,000 keyed dry runs: before {before}, after {after}");
    assert_eq!(after["rows"]["idempotency"], before["rows"]["idempotency"], "a dry run is not remembered");
    assert!(after["bytes"].as_u64().unwrap() < STORED_BYTES_CEILING, "{after}");
}

#[test]
fn thousands_of_reports_keep_a_bounded_history() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let reports = 3_000u64;
    for n in 0..reports {
        let status = if n % 2 == 0 { "needs-you" } else { "running" };
        let a = keyed(
            &c,
            "POST",
            &format!("/v1/handoffs/{id}/report"),
            &machine,
            &format!("r-{n}"),
            &json!({"turn": 1, "status": status, "summary": format!("report {n} {}", "s".repeat(400))}),
        );
        assert_eq!((a.status, a.version()), (200, n + 2), "{}", a.text);
    }
    let stored = storage(&c, &id, &alice);
    eprintln!("growth path, {reports} keyed reports with 400-byte summaries: {stored}");
    assert!(stored["bytes"].as_u64().unwrap() < STORED_BYTES_CEILING, "{stored}");
    let events = stored["rows"]["events"].as_u64().unwrap();
    assert!(events <= EVENTS_PER_HANDOFF_MAX as u64, "{stored}");
    assert!(events >= (EVENTS_PER_HANDOFF_MAX as u64 - EVENTS_TRIM_STEP), "the newest events are kept: {stored}");
    assert!(stored["rows"]["idempotency"].as_u64().unwrap() <= IDEMPOTENCY_KEYS_PER_HANDOFF_MAX as u64, "{stored}");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), reports + 1, "every report is in the record");
}

#[test]
fn a_thousand_turns_keep_a_bounded_lineage_that_pages_newest_first() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let turns = TURNS_KEPT_PER_HANDOFF_MAX as u64 + 100;
    for turn in 1..=turns {
        let done = c.report(&id, &machine, turn, "done", Some("ok"));
        assert_eq!(done.status, 200, "{}", done.text);
        if turn < turns {
            let open = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": turn}));
            assert_eq!(open.status, 200, "{}", open.text);
        }
    }
    let stored = storage(&c, &id, &alice);
    eprintln!("growth path, {turns} turns: {stored}");
    assert!(stored["bytes"].as_u64().unwrap() < STORED_BYTES_CEILING, "{stored}");
    assert!(stored["rows"]["turns"].as_u64().unwrap() <= TURNS_KEPT_PER_HANDOFF_MAX as u64, "{stored}");
    // GET …/turns pages the kept lineage: the newest page first, each page oldest first.
    let page = c.get(&format!("/v1/handoffs/{id}/turns"), &machine);
    let entries = page.body["turns"].as_array().unwrap();
    assert_eq!(entries.len(), TURNS_PAGE_DEFAULT);
    assert_eq!(entries.last().unwrap()["turn"], turns);
    assert_eq!(entries[0]["turn"], turns + 1 - TURNS_PAGE_DEFAULT as u64);
    let before = page.body["next_before"].as_u64().expect("an older page");
    let older = c.get(&format!("/v1/handoffs/{id}/turns?before={before}&limit=10"), &machine);
    let older: Vec<u64> = older.body["turns"].as_array().unwrap().iter().map(|t| t["turn"].as_u64().unwrap()).collect();
    assert_eq!(older, (before - 10..before).collect::<Vec<_>>());
    let oldest = c.get(
        &format!("/v1/handoffs/{id}/turns?before={}&limit=1000", turns + 1 - TURNS_KEPT_PER_HANDOFF_MAX as u64 + 5),
        &machine,
    );
    assert_eq!(oldest.body["turns"].as_array().unwrap().len(), 5, "only the newest turns are kept");
    assert!(oldest.body["next_before"].is_null());
    let bad = c.get(&format!("/v1/handoffs/{id}/turns?limit=0"), &machine);
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));
}

fn dev_key_owner(name: &str) -> String {
    owner_token(name, 3600, DEV_SIGNING_KEY.as_bytes(), now_s())
}

/// A development Worker with every hook variable set still has no test or bench route, and
/// takes tokens only with the issuer and audience it is configured for.
#[test]
fn a_deployed_environment_opens_no_test_route_and_checks_issuer_and_audience() {
    let state = temp_state("deployed");
    let key = "k".repeat(48);
    let vars = [
        ("HANDOFF_SIGNING_KEY", key.as_str()),
        ("HANDOFF_TEST_HOOKS", "1"),
        ("HANDOFF_BENCH_FLOOR", "1"),
        ("HANDOFF_TOKEN_ISSUER", "https://id.example"),
        ("HANDOFF_TOKEN_AUDIENCE", "handoff"),
    ];
    let server = Server::start_with_vars(&state, Some("development"), &vars);
    let c = server.client();
    let health = c.send("GET", "/v1/health", None, &[], None);
    assert_eq!(health.body["auth"], "ok", "{}", health.text);
    let name = unique("alice");
    let plain = owner_token(&name, 3600, key.as_bytes(), now_s());
    for (method, path) in [
        ("POST", "/v1/test/refuse-index"),
        ("GET", "/v1/bench/floor"),
        ("GET", "/v1/test/handoffs/ho_00000000000000000000000000000000/storage"),
    ] {
        let a = c.send(method, path, Some(&plain), &[], (method == "POST").then_some(b"{\"on\":true}".as_slice()));
        assert_eq!((a.status, a.code()), (404, "route.not_found"), "{method} {path}");
    }
    let refused = c.get("/v1/handoffs", &plain);
    assert_eq!((refused.status, refused.code()), (401, "auth.invalid"), "no iss: {}", refused.text);
    let with = |claims: Value| {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let head = b64(br#"{"alg":"HS256"}"#);
        let body = b64(claims.to_string().as_bytes());
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(key.as_bytes()).unwrap();
        hmac::Mac::update(&mut mac, format!("{head}.{body}").as_bytes());
        format!("{head}.{body}.{}", b64(&hmac::Mac::finalize(mac).into_bytes()))
    };
    let good = with(
        json!({"sub": name, "role": "owner", "exp": now_s() + 600, "iss": "https://id.example", "aud": ["handoff"]}),
    );
    assert_eq!(c.get("/v1/handoffs", &good).status, 200);
    let other_aud =
        with(json!({"sub": name, "role": "owner", "exp": now_s() + 600, "iss": "https://id.example", "aud": "else"}));
    assert_eq!(c.get("/v1/handoffs", &other_aud).code(), "auth.invalid");
    assert_eq!(c.get("/v1/handoffs", &dev_key_owner(&name)).status, 401, "a development-key token");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// Outside local, the public development key and a key under 32 bytes authenticate nobody.
#[test]
fn a_deployed_environment_with_the_development_key_or_a_short_key_refuses_every_token() {
    for (what, key) in [("the development key", DEV_SIGNING_KEY.to_string()), ("a 31-byte key", "k".repeat(31))] {
        let state = temp_state("misconfigured");
        let server = Server::start_with_vars(&state, Some("development"), &[("HANDOFF_SIGNING_KEY", key.as_str())]);
        let c = server.client();
        let health = c.send("GET", "/v1/health", None, &[], None);
        assert_eq!(
            (health.status, health.body["auth"].as_str()),
            (200, Some("misconfigured")),
            "{what}: {}",
            health.text
        );
        let signed = owner_token("alice", 3600, key.as_bytes(), now_s());
        for (method, path) in [("GET", "/v1/handoffs"), ("POST", "/v1/handoffs")] {
            let a = c.send(
                method,
                path,
                Some(&signed),
                &[],
                (method == "POST").then_some(br#"{"session":"s","machine":"m","size":"l"}"#.as_slice()),
            );
            assert_eq!((a.status, a.code()), (503, "auth.misconfigured"), "{what}: {method} {path}: {}", a.text);
        }
        drop(server);
        let _ = std::fs::remove_dir_all(&state);
    }
}

/// The hook routes, each with the method it answers to where hooks are open.
const HOOK_ROUTES: [(&str, &str); 3] = [
    ("POST", "/v1/test/refuse-index"),
    ("GET", "/v1/bench/floor"),
    ("GET", "/v1/test/handoffs/ho_00000000000000000000000000000000/storage"),
];

fn assert_no_hook_route(c: &Client, token: &str, what: &str) {
    for (method, path) in HOOK_ROUTES {
        let a = c.send(method, path, Some(token), &[], (method == "POST").then_some(b"{\"on\":true}".as_slice()));
        assert_eq!((a.status, a.code()), (404, "route.not_found"), "{what}: {method} {path}: {}", a.text);
    }
}

/// The lines wrangler prints under "Your Worker has access to the following bindings:".
fn printed_bindings(stdout: &str) -> Vec<String> {
    let mut lines = stdout.lines().skip_while(|l| !l.contains("has access to the following bindings"));
    let heading = lines.next().map(str::to_string);
    heading.into_iter().chain(lines.take_while(|l| !l.trim().is_empty()).map(|l| l.trim_end().to_string())).collect()
}

/// The `metadata` part of the upload wrangler would send (`--outfile`: the multipart form
/// itself), which carries every binding with its value.
fn upload_metadata(form: &[u8]) -> Value {
    let marker = b"name=\"metadata\"";
    let at = form.windows(marker.len()).position(|w| w == marker).expect("the form has a metadata part");
    let rest = &form[at..];
    let body = rest.windows(4).position(|w| w == b"\r\n\r\n").expect("the part's headers end") + 4;
    let mut values = serde_json::Deserializer::from_slice(&rest[body..]).into_iter::<Value>();
    values.next().expect("a JSON document").expect("the metadata is JSON")
}

/// `wrangler deploy` with no `--env` deploys the top level: as bundled for upload, it names
/// no `HANDOFF_ENV` but a deployed one, and no hook variable.
#[test]
fn a_deploy_with_no_env_is_not_local_and_sets_no_hook() {
    let top = handoff_it::repo_top();
    let out = temp_state("dry-run");
    let form = out.join("upload.form");
    let run = std::process::Command::new(top.join("node_modules/.bin/wrangler"))
        .current_dir(&top)
        .env(
            "PATH",
            format!("{}:{}", top.join("node_modules/.bin").display(), std::env::var("PATH").unwrap_or_default()),
        )
        .env("WRANGLER_SEND_METRICS", "false")
        // wrangler reads the target environment from CLOUDFLARE_ENV when --env is not given.
        .env_remove("CLOUDFLARE_ENV")
        .args(["deploy", "--dry-run", "--outdir"])
        .arg(out.join("bundle"))
        .arg("--outfile")
        .arg(&form)
        .output()
        .expect("wrangler runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "wrangler deploy --dry-run: {stdout}{}", String::from_utf8_lossy(&run.stderr));
    let printed = printed_bindings(&stdout);
    eprintln!("wrangler deploy --dry-run (no --env) prints:\n{}", printed.join("\n"));
    assert!(printed.iter().any(|l| l.contains("env.HANDOFFS (HandoffObject)")), "the bindings were read: {stdout}");
    assert!(!printed.iter().any(|l| l.contains("HANDOFF_ENV (\"local\")")), "{}", printed.join("\n"));

    let metadata = upload_metadata(&std::fs::read(&form).expect("wrangler wrote the upload"));
    let bindings = metadata["bindings"].as_array().expect("the metadata lists bindings");
    let names: Vec<&str> = bindings.iter().filter_map(|b| b["name"].as_str()).collect();
    assert!(names.contains(&"HANDOFFS") && names.contains(&"OWNER_INDEX"), "{metadata}");
    for binding in bindings {
        let name = binding["name"].as_str().unwrap_or_default();
        if name == "HANDOFF_ENV" {
            let value = binding["text"].as_str();
            assert!(
                matches!(value, Some("development" | "staging" | "production")),
                "HANDOFF_ENV is {value:?}: {binding}"
            );
        }
        assert!(
            !name.starts_with("HANDOFF_TEST_") && !name.starts_with("HANDOFF_BENCH_"),
            "a hook variable is deployed: {binding}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The top level run as a deploy with no `--env` would run it, without the local runs'
/// `--var HANDOFF_ENV:local`: the development key authenticates nobody and the hooks stay
/// shut, though their variables are set. An unknown `HANDOFF_ENV` is read the same way.
#[test]
fn the_top_level_without_the_local_override_refuses_the_development_key_and_opens_no_hook() {
    let state = temp_state("top-level");
    // The harness sets the development key and HANDOFF_TEST_HOOKS:1 on every wrangler Worker.
    let server = Server::start_top_level(&state, &[("HANDOFF_BENCH_FLOOR", "1")]);
    let c = server.client();
    let health = c.send("GET", "/v1/health", None, &[], None);
    assert_eq!(
        (health.status, health.body["store"].as_str(), health.body["auth"].as_str()),
        (200, Some("bound"), Some("misconfigured")),
        "{}",
        health.text
    );
    let dev = dev_key_owner(&unique("alice"));
    for (method, path) in [("GET", "/v1/handoffs"), ("POST", "/v1/handoffs")] {
        let a = c.send(
            method,
            path,
            Some(&dev),
            &[],
            (method == "POST").then_some(br#"{"session":"s","machine":"m","size":"l"}"#.as_slice()),
        );
        assert_eq!(
            (a.status, a.code()),
            (503, "auth.misconfigured"),
            "a development-key token: {method} {path}: {}",
            a.text
        );
    }
    assert_no_hook_route(&c, &dev, "no HANDOFF_ENV");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);

    let state = temp_state("top-level-unknown");
    let key = "k".repeat(48);
    let server = Server::start_top_level(
        &state,
        &[("HANDOFF_ENV", "LOCAL"), ("HANDOFF_SIGNING_KEY", key.as_str()), ("HANDOFF_BENCH_FLOOR", "1")],
    );
    let c = server.client();
    let health = c.send("GET", "/v1/health", None, &[], None);
    assert_eq!(health.body["auth"], "ok", "{}", health.text);
    let name = unique("alice");
    let refused = c.get("/v1/handoffs", &dev_key_owner(&name));
    assert_eq!(
        (refused.status, refused.code()),
        (401, "auth.invalid"),
        "a development-key token under HANDOFF_ENV=LOCAL: {}",
        refused.text
    );
    let signed = owner_token(&name, 3600, key.as_bytes(), now_s());
    assert_eq!(c.get("/v1/handoffs", &signed).status, 200, "the Worker's own key still works");
    assert_no_hook_route(&c, &signed, "HANDOFF_ENV=LOCAL");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}
