//! Waiters (issue 5, reliability harness 5): a thousand waiters that disconnect before their
//! answer give their places back at once, so the next report answers only the waiters still
//! connected (and the report and those waiters' times are measured beside a report without
//! them), and their memory goes with them; the per-hand-off cap answers 429 `wait.too_many`
//! past it, and where a disconnect is not seen (behind wrangler's dev proxy) a waiter gives its
//! place back at its timeout; a wait whose hand-off is closed meanwhile answers at once.
//!
//! Disconnected waiters are raw TCP connections that write a wait request and are dropped
//! before any answer. Whether their places are free is read through the cap: a test Worker
//! holds as many waiters as the test says (HANDOFF_TEST_WAITERS_MAX), so a probe wait is
//! refused while they are held and taken once they are gone. Memory is the resident set of this
//! test's own workerd (from /proc), so these tests start Workers on their own state folders.

use handoff_it::{owner, temp_state, unique, Client, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

/// Waiters that disconnect in the fan-out test (the figure).
const DISCONNECTED: usize = 1_000;
/// Waiters that stay connected next to them.
const CONNECTED: usize = 20;
/// The cap a Worker of the cap test is started with (HANDOFF_TEST_WAITERS_MAX).
const TEST_CAP: usize = 50;
/// The server adds up to this much to each wait's timeout (limits::WAIT_JITTER_MS_MAX).
const JITTER_MS: u64 = handoff_core::limits::WAIT_JITTER_MS_MAX;

/// Sends a wait on a raw connection and leaves it open (drop it to disconnect).
fn raw_wait(port: u16, id: &str, token: &str, after: u64, timeout_s: u64) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    let request = format!(
        "GET /v1/handoffs/{id}/wait?after={after}&timeout={timeout_s} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).expect("writes");
    s
}

/// Reads a raw connection's answer: status and JSON body (chunked or not).
fn read_answer(mut s: TcpStream) -> (u16, Value) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut raw = vec![];
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out += &after[..n];
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_string()
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The resident memory of every workerd of a Worker (wrangler runs one for its proxy and one
/// for the Worker), from /proc: the processes in the process group of `Server::workerd_pid`.
fn workerd_rss_kib(server: &Server) -> u64 {
    let stat = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let group_of =
        |stat: &str| stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(2)).map(str::to_string);
    let pid = server.workerd_pid().expect("the Worker's workerd").to_string();
    let group = group_of(&stat(&pid).unwrap()).unwrap();
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(st) = stat(&name) else { continue };
        if st.contains("(workerd)") && group_of(&st).as_deref() == Some(group.as_str()) {
            let status = std::fs::read_to_string(format!("/proc/{name}/status")).unwrap_or_default();
            let rss = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
            total += rss.unwrap_or(0);
        }
    }
    total
}

/// Disconnects `n` waiters on `id`: all are sent, given a moment to reach the object, and dropped.
fn disconnect_waiters(port: u16, id: &str, token: &str, after: u64, timeout_s: u64, n: usize) {
    let streams: Vec<TcpStream> = (0..n).map(|_| raw_wait(port, id, token, after, timeout_s)).collect();
    thread::sleep(Duration::from_millis(1_000));
    drop(streams);
}

/// Holds `CONNECTED` waiters on `id`, reports, and answers (report latency, the slowest
/// waiter's time from the report being sent to its answer).
fn report_to_connected(
    server: &Server,
    c: &Client,
    id: &str,
    alice: &str,
    machine: &str,
    turn_version: (u64, u64),
    summary: &str,
) -> (Duration, Duration) {
    let (turn, version) = turn_version;
    let waiters: Vec<TcpStream> = (0..CONNECTED)
        .map(|i| raw_wait(server.port, id, if i % 2 == 0 { alice } else { machine }, version, 60))
        .collect();
    thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    let readers: Vec<_> = waiters
        .into_iter()
        .map(|s| {
            thread::spawn(move || {
                let answer = read_answer(s);
                (answer, sent.elapsed())
            })
        })
        .collect();
    let r = c.report(id, machine, turn, "needs-you", Some(summary));
    let report_took = sent.elapsed();
    assert_eq!(r.status, 200, "{}", r.text);
    let mut slowest = Duration::ZERO;
    for reader in readers {
        let ((status, body), took) = reader.join().unwrap();
        assert_eq!(
            (status, body["handoff"]["version"].as_u64()),
            (200, Some(version + 1)),
            "a connected waiter: {body}"
        );
        slowest = slowest.max(took);
    }
    (report_took, slowest)
}

/// Rounds of a thousand disconnected waiters whose memory is measured (after one round of
/// warm-up, so that pools and heaps the runtime keeps once grown are in the baseline).
const MEMORY_ROUNDS: usize = 3;
/// How long the places of disconnected waiters may take to come back: far below their
/// timeout (`HELD_TIMEOUT_S`), so that only the disconnect can have freed them.
const RELEASE_S_MAX: u64 = 10;
/// The timeout of the waiters that disconnect: they are gone long before it.
const HELD_TIMEOUT_S: u64 = 120;

/// Whether a wait on `id` after `after` is taken (200 when it times out after 1 s) or refused
/// (429 `wait.too_many`).
fn probe(c: &Client, id: &str, token: &str, after: u64) -> u16 {
    c.get(&format!("/v1/handoffs/{id}/wait?after={after}&timeout=1"), token).status
}

/// Holds `n` waiters on `id`, checks the hand-off is then full (the cap is `n`), drops them all,
/// and answers how long it took until the hand-off took a waiter again.
fn disconnect_and_time_release(server: &Server, c: &Client, id: &str, token: &str, after: u64, n: usize) -> Duration {
    let streams: Vec<TcpStream> = (0..n).map(|_| raw_wait(server.port, id, token, after, HELD_TIMEOUT_S)).collect();
    // Time to reach the object before the first probe, which would take a place if one were free.
    thread::sleep(Duration::from_millis(1_500));
    let deadline = Instant::now() + Duration::from_secs(RELEASE_S_MAX);
    while probe(c, id, token, after) != 429 {
        assert!(Instant::now() < deadline, "{n} waiters never filled the hand-off's {n} places");
        thread::sleep(Duration::from_millis(100));
    }
    let left = Instant::now();
    drop(streams);
    loop {
        let asked = left.elapsed();
        if probe(c, id, token, after) == 200 {
            return asked;
        }
        assert!(
            left.elapsed() < Duration::from_secs(RELEASE_S_MAX),
            "{n} disconnected waiters still held their places {RELEASE_S_MAX} s later (their timeout is {HELD_TIMEOUT_S} s)"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// On workerd itself: wrangler's dev proxy keeps a client's connection to the Worker open
/// after the client has gone, so there no disconnect ever reaches the Worker (the cap test
/// below covers that case: the timeout frees the place).
#[test]
fn a_thousand_waiters_that_disconnect_give_their_places_back_at_once_and_a_report_answers_only_the_connected() {
    let started = Instant::now();
    let state = temp_state("waiters");
    let server = Server::start_workerd(&state, &[("HANDOFF_TEST_WAITERS_MAX", &DISCONNECTED.to_string())]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (hot, machine, _) = c.create(&alice);
    let (quiet, _, _) = c.create(&alice);

    // A report to connected waiters alone; then a thousand waiters fill the hand-off and
    // disconnect, and their places come back long before their timeout: the next report has
    // only the connected waiters to answer.
    let (report_alone, slowest_alone) = report_to_connected(&server, &c, &hot, &alice, &machine, (1, 1), "alone");
    let released = disconnect_and_time_release(&server, &c, &hot, &alice, 2, DISCONNECTED);
    let (report_took, slowest) =
        report_to_connected(&server, &c, &hot, &alice, &machine, (1, 2), "after a thousand left");

    // Every place is free: a thousand connected waiters fill the hand-off again, and one report
    // answers each of them once with the new version.
    // The owner's waits: the cap is per role, and the probe below reads the owner's.
    let connected: Vec<TcpStream> = (0..DISCONNECTED).map(|_| raw_wait(server.port, &hot, &alice, 3, 60)).collect();
    thread::sleep(Duration::from_millis(1_500));
    let deadline = Instant::now() + Duration::from_secs(RELEASE_S_MAX);
    while probe(&c, &hot, &alice, 3) != 429 {
        assert!(Instant::now() < deadline, "a thousand connected waiters were not all held");
        thread::sleep(Duration::from_millis(100));
    }
    let r = c.report(&hot, &machine, 1, "needs-you", Some("to a full house"));
    assert_eq!((r.status, r.version()), (200, 4), "{}", r.text);
    for s in connected {
        let (status, body) = read_answer(s);
        assert_eq!((status, body["handoff"]["version"].as_u64()), (200, Some(4)), "a connected waiter: {body}");
    }

    // Memory: rounds of a thousand waiters that disconnect on a quiet hand-off, well within
    // their timeout. Measured, not asserted: workerd keeps the pools it grew.
    disconnect_and_time_release(&server, &c, &quiet, &alice, 1, DISCONNECTED);
    let baseline = workerd_rss_kib(&server);
    let mut rounds = vec![];
    for _ in 0..MEMORY_ROUNDS {
        let streams: Vec<TcpStream> =
            (0..DISCONNECTED).map(|_| raw_wait(server.port, &quiet, &alice, 1, HELD_TIMEOUT_S)).collect();
        thread::sleep(Duration::from_millis(1_000));
        let holding = workerd_rss_kib(&server);
        drop(streams);
        thread::sleep(Duration::from_millis(1_000));
        assert_eq!(probe(&c, &quiet, &alice, 1), 200, "the hand-off takes waiters again");
        rounds.push((holding / 1024, workerd_rss_kib(&server) / 1024));
    }
    let after = workerd_rss_kib(&server);

    eprintln!(
        "waiters (workerd): {DISCONNECTED} disconnected waiters gave their places back {:.0} ms after leaving (timeout {HELD_TIMEOUT_S} s); \
         report {:.1} ms and slowest of {CONNECTED} connected waiters {:.1} ms after them (alone: {:.1} ms, {:.1} ms); \
         workerd RSS {} MiB after warm-up, (holding, after leaving) per round of {DISCONNECTED}: {rounds:?} MiB, {} MiB at the end; {:.1} s",
        released.as_secs_f64() * 1e3,
        report_took.as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3,
        report_alone.as_secs_f64() * 1e3,
        slowest_alone.as_secs_f64() * 1e3,
        baseline / 1024,
        after / 1024,
        started.elapsed().as_secs_f64()
    );
    assert!(baseline > 0 && after > 0, "workerd's memory was read");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// Sends `n` waits that each time out after 1 s; answers their statuses.
fn short_waits(port: u16, id: &str, token: &str, after: u64, n: usize) -> Vec<u16> {
    let streams: Vec<TcpStream> = (0..n).map(|_| raw_wait(port, id, token, after, 1)).collect();
    streams.into_iter().map(|s| read_answer(s).0).collect()
}

#[test]
fn the_cap_answers_429_past_it_and_where_a_disconnect_is_not_seen_the_place_comes_back_at_the_timeout() {
    let started = Instant::now();
    let state = temp_state("waiter-cap");
    let server = Server::start_with_vars(&state, None, &[("HANDOFF_TEST_WAITERS_MAX", &TEST_CAP.to_string())]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let (other, _, _) = c.create(&alice);

    // The cap, held by connected waiters.
    let held: Vec<TcpStream> = (0..TEST_CAP).map(|_| raw_wait(server.port, &id, &alice, 1, 30)).collect();
    thread::sleep(Duration::from_millis(1_500));
    let sent = Instant::now();
    let past = c.get(&format!("/v1/handoffs/{id}/wait?after=1&timeout=30"), &alice);
    assert_eq!((past.status, past.code()), (429, "wait.too_many"), "{}", past.text);
    assert!(sent.elapsed() < Duration::from_secs(5), "answered at once, not held");
    let message = past.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("OWNER_WAITERS_PER_HANDOFF_MAX"), "the 429 names the cap: {message}");
    // The caps are per role: a full house of owner waits leaves the machine its own places.
    assert_eq!(short_waits(server.port, &id, &machine, 1, 1), vec![200], "the machine still waits");
    // The cap is per hand-off: another one still takes a waiter.
    assert_eq!(short_waits(server.port, &other, &alice, 1, 1), vec![200]);

    // A version move answers the held ones, each once, and frees their places.
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("?")).status, 200);
    for s in held {
        let (status, body) = read_answer(s);
        assert_eq!((status, body["handoff"]["version"].as_u64()), (200, Some(2)), "{body}");
    }
    assert!(
        short_waits(server.port, &id, &alice, 2, TEST_CAP).iter().all(|&s| s == 200),
        "the places were given back by the wake-up"
    );

    // The cap, taken by waiters that disconnect at once: their places come back at their timeout.
    let timeout_s = 2;
    disconnect_waiters(server.port, &id, &alice, 2, timeout_s, TEST_CAP);
    let while_held = c.get(&format!("/v1/handoffs/{id}/wait?after=2&timeout=1"), &alice);
    thread::sleep(Duration::from_millis(timeout_s * 1000 + JITTER_MS + 1_000));
    let statuses = short_waits(server.port, &id, &alice, 2, TEST_CAP);
    let refused = statuses.iter().filter(|&&s| s != 200).count();
    eprintln!(
        "waiters (wrangler dev): cap {TEST_CAP}; while {TEST_CAP} disconnected waiters were within their timeout a new wait got {} (the Worker {} the disconnects); after it {refused} of {TEST_CAP} new waits refused; {:.1} s",
        while_held.status,
        if while_held.status == 429 { "did not see" } else { "saw" },
        started.elapsed().as_secs_f64()
    );
    assert_eq!(refused, 0, "disconnected waiters kept their places past their timeout: {statuses:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// A machine token that fills its own cap (say, a reporter that leaks waits) never takes the
/// owner's places: the owner's waits go on, and the 429 names the machine's cap.
#[test]
fn a_machine_that_fills_its_waits_never_starves_the_owner() {
    let state = temp_state("waiter-roles");
    let server = Server::start_workerd(&state, &[("HANDOFF_TEST_WAITERS_MAX", &TEST_CAP.to_string())]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let held: Vec<TcpStream> = (0..TEST_CAP).map(|_| raw_wait(server.port, &id, &machine, 1, 30)).collect();
    thread::sleep(Duration::from_millis(1_500));
    let past = c.get(&format!("/v1/handoffs/{id}/wait?after=1&timeout=30"), &machine);
    assert_eq!((past.status, past.code()), (429, "wait.too_many"), "{}", past.text);
    let message = past.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("MACHINE_WAITERS_PER_HANDOFF_MAX"), "the 429 names the machine's cap: {message}");
    let owners = short_waits(server.port, &id, &alice, 1, TEST_CAP);
    assert!(owners.iter().all(|&s| s == 200), "the owner keeps every one of its places: {owners:?}");
    drop(held);
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_wait_whose_hand_off_is_closed_meanwhile_answers_at_once() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", Some("finished"));
    // Waiters for the next version and for one further ahead, with both tokens.
    let waiters: Vec<_> = (0..10)
        .map(|i| {
            let (c, token) = (c.clone(), if i % 2 == 0 { alice.clone() } else { machine.clone() });
            let path = format!("/v1/handoffs/{id}/wait?after={}&timeout=60", 2 + i % 3);
            thread::spawn(move || c.get(&path, &token))
        })
        .collect();
    thread::sleep(Duration::from_millis(700));
    let closed_at = Instant::now();
    let closed = c.post(&format!("/v1/handoffs/{id}/close"), &alice, serde_json::json!({}));
    assert_eq!((closed.status, closed.version()), (200, 3), "{}", closed.text);
    for w in waiters {
        let a = w.join().unwrap();
        assert_eq!((a.status, a.handoff()["state"].as_str(), a.version()), (200, Some("closed"), 3), "{}", a.text);
    }
    let took = closed_at.elapsed();
    assert!(took < Duration::from_secs(5), "the waits ended {took:?} after the close");
    // And a wait that starts on the closed hand-off answers at once, whatever it asks for.
    for after in [0, 3, 99] {
        let t = Instant::now();
        let a = c.get(&format!("/v1/handoffs/{id}/wait?after={after}&timeout=60"), &machine);
        assert_eq!((a.status, a.handoff()["state"].as_str()), (200, Some("closed")));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
