//! The watch (`GET /v1/handoffs/:id/watch`, issue 13), in the contract's words, against workerd
//! itself (no wrangler proxy in front, which would hold sockets of its own and hide an
//! eviction). Each test starts its own Worker, since some kill it or lower its caps.
//!
//! - every published version reaches every socket once, in order; a close ends each watch with
//!   its last record and code 1000;
//! - 1,000 idle watchers let the object be evicted while every socket stays open, and one
//!   report then reaches all of them, each once, in order with the versions that follow;
//! - `ping` is answered `pong` by the runtime without waking the object;
//! - reconnecting with `after` misses no version and repeats none, across an eviction and a
//!   SIGKILL of the runtime;
//! - an expired token is closed with 4401, a reader that stalls with 1013 before its
//!   unacknowledged bytes pass `WATCH_UNACKED_BYTES_MAX`, a message that is not `{"after": V}`
//!   with 1003; each role has its own cap (429 `watch.too_many`);
//! - refusals before the upgrade are the usual JSON errors, 426 without the upgrade.

use handoff_core::limits::{WATCH_UNACKED_BYTES_MAX, WATCH_UNACKED_FRAMES_MAX};
use handoff_it::watch::{Auth, Frame, Watch};
use handoff_it::workerd::EVICTED_AFTER_CHANGE;
use handoff_it::{key, now_s, owner, temp_state, unique, Client, Server};
use serde_json::json;
use std::time::{Duration, Instant};

const READ: Duration = Duration::from_secs(20);
/// Past the eviction of an object whose last event was a change, with 5 s to spare.
const PAST_EVICTION: Duration = EVICTED_AFTER_CHANGE.saturating_add(Duration::from_secs(5));

fn server(name: &str, vars: &[(&str, &str)]) -> Server {
    Server::start_workerd(&temp_state(name), vars)
}

fn starts(client: &Client, token: &str) -> u64 {
    let a = client.get("/v1/test/object-starts", token);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["handoff_objects"].as_u64().unwrap()
}

/// A report that always moves the version (a new summary), answering the new version.
fn step(client: &Client, id: &str, machine: &str, n: usize) -> u64 {
    let a = client.report(id, machine, 1, "running", Some(&format!("step {n}")));
    assert_eq!(a.status, 200, "{}", a.text);
    a.version()
}

#[test]
fn every_published_version_reaches_every_socket_once_in_order_and_a_close_ends_each_with_its_last_record() {
    let s = server("watch-contract", &[]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, machine, created) = c.create(&o);
    let v1 = created.version();
    // From the start, by header and by subprotocol, owner and machine; one already up to date.
    let mut from_start = Watch::open(&s.url(), &id, &o, 0, Auth::Header).unwrap();
    let mut browser = Watch::open(&s.url(), &id, &o, 0, Auth::Subprotocol).unwrap();
    assert_eq!(browser.protocol.as_deref(), Some("handoff.v1"), "the answer selects handoff.v1");
    assert_eq!(from_start.protocol, None, "no subprotocol offered, none selected");
    let mut machine_watch = Watch::open(&s.url(), &id, &machine, 0, Auth::Header).unwrap();
    let mut current = Watch::open(&s.url(), &id, &o, v1, Auth::Header).unwrap();
    for w in [&mut from_start, &mut browser, &mut machine_watch] {
        assert_eq!(w.next_version(READ), v1, "at once: the version is above after");
    }
    let mut expected = vec![v1];
    for n in 0..5 {
        expected.push(step(&c, &id, &machine, n));
    }
    let close = c.post(&format!("/v1/handoffs/{id}/close"), &o, json!({}));
    assert_eq!(close.status, 200, "{}", close.text);
    expected.push(close.version());
    // Version 1 went to the first three at once, above.
    for (name, w, from) in [
        ("from the start", &mut from_start, 1),
        ("browser", &mut browser, 1),
        ("machine", &mut machine_watch, 1),
        ("current", &mut current, 1),
    ] {
        let mut seen = Vec::new();
        let last = loop {
            match w.next(READ) {
                Frame::Record(r) => {
                    seen.push((r["handoff"]["version"].as_u64().unwrap(), r["handoff"]["state"].clone()))
                }
                other => break other,
            }
        };
        let versions: Vec<u64> = seen.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, expected[from..], "{name}: each version once, in order");
        assert_eq!(seen.last().unwrap().1, "closed", "{name}: the last record is the closed one");
        assert_eq!(last, Frame::Closed(1000), "{name}");
    }
    // A watch of a closed hand-off: its last record, then 1000, whatever `after` says.
    let mut late = Watch::open(&s.url(), &id, &o, 999, Auth::Header).unwrap();
    assert_eq!(late.next_version(READ), *expected.last().unwrap());
    assert_eq!(late.next(READ), Frame::Closed(1000));
}

#[test]
fn refusals_before_the_upgrade_are_json_errors_and_without_it_426() {
    let s = server("watch-refusals", &[]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, _machine, _) = c.create(&o);
    let path = format!("/v1/handoffs/{id}/watch");
    let plain = c.get(&path, &o);
    assert_eq!((plain.status, plain.code()), (426, "request.upgrade_required"), "{}", plain.text);
    // Every other refusal comes before the 426.
    let bad_query = c.get(&format!("{path}?after=18446744073709551616"), &o);
    assert_eq!((bad_query.status, bad_query.code()), (400, "request.invalid"), "{}", bad_query.text);
    let no_token = c.send("GET", &path, None, &[], None);
    assert_eq!((no_token.status, no_token.code()), (401, "auth.required"), "{}", no_token.text);
    let refused = |token: &str, auth: Auth, path: &str, headers: &[(&str, &str)]| {
        Watch::open_with(&s.url(), path, token, auth, headers).err().expect("refused")
    };
    let r = refused("not-a-token", Auth::Header, &path, &[]);
    assert_eq!((r.status, r.code()), (401, "auth.invalid"));
    let r = refused("not-a-token", Auth::Subprotocol, &path, &[]);
    assert_eq!((r.status, r.code()), (401, "auth.invalid"));
    let other = owner(&unique("mallory"));
    let r = refused(&other, Auth::Header, &path, &[]);
    assert_eq!((r.status, r.code()), (404, "handoff.not_found"), "another owner's hand-off");
    let (_, other_machine, _) = c.create(&o);
    let r = refused(&other_machine, Auth::Header, &path, &[]);
    assert_eq!((r.status, r.code()), (404, "handoff.not_found"), "another hand-off's machine");
    let r = refused(&o, Auth::Header, &format!("{path}?after=x"), &[]);
    assert_eq!((r.status, r.code()), (400, "request.invalid"));
    let r = refused(&o, Auth::Header, &format!("{path}?timeout=5"), &[]);
    assert_eq!((r.status, r.code()), (400, "request.invalid"));
    let r = refused(&o, Auth::Header, &path, &[("Sec-WebSocket-Protocol", "chat")]);
    assert_eq!((r.status, r.code()), (400, "request.invalid"), "a subprotocol list without handoff.v1");
    let r = refused(&o, Auth::Header, "/v1/handoffs/nope/watch", &[]);
    assert_eq!((r.status, r.code()), (404, "handoff.not_found"));
    // The token never goes in the URL: a query token is an unknown parameter.
    let r = refused("", Auth::Header, &format!("{path}?token={o}"), &[]);
    assert_eq!(r.status / 100, 4);
}

#[test]
fn idle_watchers_let_the_object_be_evicted_and_one_report_then_reaches_a_thousand_of_them_once_each() {
    const WATCHERS: usize = 1_000;
    let s = server("watch-thousand", &[]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, machine, created) = c.create(&o);
    let v = created.version();
    let mut watchers: Vec<Watch> =
        (0..WATCHERS).map(|_| Watch::open(&s.url(), &id, &o, v, Auth::Header).unwrap()).collect();
    let before = starts(&c, &o);
    std::thread::sleep(PAST_EVICTION);
    // `ping` is answered by the runtime: the evicted object does not start for it.
    watchers[0].send_text("ping");
    assert_eq!(watchers[0].next(READ), Frame::Text("pong".into()));
    assert_eq!(starts(&c, &o), before, "a ping woke the object");
    // The report starts the object again: it had been evicted, with every socket open.
    let v2 = step(&c, &id, &machine, 1);
    assert_eq!(starts(&c, &o), before + 1, "the object was not evicted while its watchers were idle");
    for (i, w) in watchers.iter_mut().enumerate() {
        assert_eq!(w.next_version(READ), v2, "watcher {i}");
    }
    // Each once: the next frame of every socket is the version after.
    let v3 = step(&c, &id, &machine, 2);
    for (i, w) in watchers.iter_mut().enumerate() {
        assert_eq!(w.next_version(READ), v3, "watcher {i}: nothing repeated before {v3}");
    }
}

#[test]
fn reconnecting_with_after_misses_no_version_and_repeats_none_across_a_sigkill_and_an_eviction() {
    let mut s = server("watch-reconnect", &[]);
    let o = owner(&unique("o"));
    let (id, machine, created) = s.client().create(&o);
    let mut last = created.version();
    let mut watchers: Vec<Watch> =
        (0..10).map(|_| Watch::open(&s.url(), &id, &o, last, Auth::Header).unwrap()).collect();
    let v = step(&s.client(), &id, &machine, 1);
    for w in &mut watchers {
        assert_eq!(w.next_version(READ), v);
    }
    last = v;
    // The runtime dies: every socket with it. It restarts on the same state (a new port), one
    // change lands before the watchers are back, and they reconnect from what they had.
    s.kill(libc::SIGKILL);
    drop(watchers);
    s.restart();
    let missed = step(&s.client(), &id, &machine, 2);
    assert_eq!(missed, last + 1);
    let mut watchers: Vec<Watch> =
        (0..10).map(|_| Watch::open(&s.url(), &id, &o, last, Auth::Header).unwrap()).collect();
    for w in &mut watchers {
        assert_eq!(w.next_version(READ), missed, "the version made while away, at once");
    }
    let next = step(&s.client(), &id, &machine, 3);
    for w in &mut watchers {
        assert_eq!(w.next_version(READ), next, "then the next, nothing repeated");
    }
    last = next;
    // Gone while the object is evicted; back with `after`.
    for w in watchers {
        w.close();
    }
    std::thread::sleep(PAST_EVICTION);
    let mut back = Watch::open(&s.url(), &id, &o, last, Auth::Header).unwrap();
    let mut behind = Watch::open(&s.url(), &id, &o, last - 1, Auth::Header).unwrap();
    assert_eq!(behind.next_version(READ), last, "a client one behind gets the current record at once");
    let after = step(&s.client(), &id, &machine, 4);
    assert_eq!(back.next_version(READ), after, "an up-to-date client gets only what follows");
    assert_eq!(behind.next_version(READ), after);
}

#[test]
fn an_expired_token_is_closed_with_4401_at_the_next_send_or_message() {
    let s = server("watch-expiry", &[]);
    let c = s.client();
    let name = unique("o");
    let o = owner(&name);
    let (id, machine, created) = c.create(&o);
    let v = created.version();
    // Accepted for three more seconds (its exp is 57 s ago, within the 60 s of skew).
    let short = handoff_api::token::owner_token(&name, -57, &key(), now_s());
    let mut sent_to = Watch::open(&s.url(), &id, &short, v, Auth::Header).unwrap();
    let mut speaking = Watch::open(&s.url(), &id, &short, v, Auth::Subprotocol).unwrap();
    let mut fresh = Watch::open(&s.url(), &id, &o, v, Auth::Header).unwrap();
    let early = step(&c, &id, &machine, 1);
    assert_eq!(sent_to.next_version(READ), early, "still valid");
    assert_eq!(speaking.next_version(READ), early);
    std::thread::sleep(Duration::from_secs(4));
    speaking.ack(early);
    assert_eq!(speaking.next(READ), Frame::Closed(4401), "expired at the next message");
    let late = step(&c, &id, &machine, 2);
    assert_eq!(sent_to.next(READ), Frame::Closed(4401), "expired at the next send");
    assert_eq!(fresh.next_version(READ), early);
    assert_eq!(fresh.next_version(READ), late, "a valid token's socket goes on");
}

#[test]
fn a_stalled_reader_is_closed_with_1013_before_its_unacknowledged_bytes_pass_the_cap_and_a_reader_that_acknowledges_is_not(
) {
    let s = server("watch-stall", &[]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, machine, created) = c.create(&o);
    let v = created.version();
    let mut stalled = Watch::open(&s.url(), &id, &o, v, Auth::Header).unwrap();
    let mut reader = Watch::open(&s.url(), &id, &o, v, Auth::Header).unwrap();
    // Large records (a question's 12 KiB input), so that the byte cap is reached before the
    // frame cap.
    let filler = "x".repeat(12_000);
    let reports = WATCH_UNACKED_FRAMES_MAX + 8;
    let mut versions = Vec::new();
    for n in 0..reports {
        let question = serde_json::json!({"kind": "choice", "text": format!("question {n}"), "input": filler, "options": [{"id": "a", "label": "A"}]});
        let body = serde_json::json!({"turn": 1, "status": "needs-you", "question": question});
        let a = c.post(&format!("/v1/handoffs/{id}/report"), &machine, body);
        assert_eq!(a.status, 200, "{}", a.text);
        versions.push(a.version());
        assert_eq!(reader.next_version(READ), a.version());
        if n % 8 == 7 {
            reader.ack(a.version());
        }
    }
    // Now the stalled reader reads what it was sent: a prefix of the versions, then 1013.
    let mut got = Vec::new();
    let end = loop {
        match stalled.next(READ) {
            Frame::Record(r) => got.push(r["handoff"]["version"].as_u64().unwrap()),
            other => break other,
        }
    };
    assert_eq!(end, Frame::Closed(1013));
    assert_eq!(got, versions[..got.len()], "what it got came in order, once");
    assert!(stalled.bytes_read <= WATCH_UNACKED_BYTES_MAX, "{} bytes unacknowledged", stalled.bytes_read);
    assert!(got.len() < WATCH_UNACKED_FRAMES_MAX, "the byte cap closed it ({} frames)", got.len());
    // The reader that acknowledges is still open and current.
    let next = step(&c, &id, &machine, 99);
    assert_eq!(reader.next_version(READ), next);
}

#[test]
fn each_role_has_its_own_cap_and_a_message_other_than_after_closes_with_1003() {
    let s = server("watch-caps", &[("HANDOFF_TEST_WATCHERS_MAX", "3")]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, machine, created) = c.create(&o);
    let v = created.version();
    let machines: Vec<Watch> = (0..3).map(|_| Watch::open(&s.url(), &id, &machine, v, Auth::Header).unwrap()).collect();
    let r = Watch::open(&s.url(), &id, &machine, v, Auth::Header).err().expect("past the machine's cap");
    assert_eq!((r.status, r.code()), (429, "watch.too_many"));
    assert!(r.body["error"]["message"].as_str().unwrap().contains("MACHINE_WATCHERS_PER_HANDOFF_MAX"), "{}", r.body);
    // The machine's sockets took none of the owner's places.
    let mut owners: Vec<Watch> = (0..3).map(|_| Watch::open(&s.url(), &id, &o, v, Auth::Header).unwrap()).collect();
    let r = Watch::open(&s.url(), &id, &o, v, Auth::Header).err().expect("past the owner's cap");
    assert_eq!((r.status, r.code()), (429, "watch.too_many"));
    // A message that is not {"after": V} closes its socket, which gives its place back.
    let mut rude = owners.pop().unwrap();
    rude.send_text("hello");
    assert_eq!(rude.next(READ), Frame::Closed(1003));
    drop(rude);
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        match Watch::open(&s.url(), &id, &o, v, Auth::Header) {
            Ok(w) => break w,
            Err(r) if r.status == 429 && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(r) => panic!("the closed socket's place was not given back: {} {}", r.status, r.body),
        }
    };
    // `{"after": V}` re-synchronises: a client that says it has V while the record is past it
    // is sent the current record again, though this socket was sent it before; what the
    // service pushes unasked goes once.
    let mut again = again;
    let next = step(&c, &id, &machine, 1);
    assert_eq!(again.next_version(READ), next, "pushed once");
    again.ack(v);
    assert_eq!(again.next_version(READ), next, "sent again to a client that says it has only {v}");
    let after = step(&c, &id, &machine, 2);
    assert_eq!(again.next_version(READ), after, "the next push is the next version");
    assert_eq!(again.next(Duration::from_millis(500)), Frame::Silent, "and nothing is pushed twice");
    drop(machines);
}

/// The record's `actions` are the caller's: each socket is sent its own role's, at every
/// version, as the record's `GET` answers that role.
#[test]
fn each_socket_is_sent_the_record_with_its_own_roles_actions() {
    let s = server("watch-actions", &[]);
    let c = s.client();
    let o = owner(&unique("o"));
    let (id, machine, _) = c.create(&o);
    let mut owner_watch = Watch::open(&s.url(), &id, &o, 0, Auth::Header).unwrap();
    let mut machine_watch = Watch::open(&s.url(), &id, &machine, 0, Auth::Header).unwrap();
    let actions = |frame: Frame| match frame {
        Frame::Record(v) => v["handoff"]["actions"].clone(),
        other => panic!("expected a record, got {other:?}"),
    };
    let read = |token: &str| c.get(&format!("/v1/handoffs/{id}"), token).body["handoff"]["actions"].clone();
    assert_eq!(actions(owner_watch.next(READ)), json!(["cancel", "close", "steer"]));
    assert_eq!(actions(machine_watch.next(READ)), json!(["report"]));
    let done = c.report(&id, &machine, 1, "done", Some("built"));
    assert_eq!(done.status, 200, "{}", done.text);
    let (for_owner, for_machine) = (actions(owner_watch.next(READ)), actions(machine_watch.next(READ)));
    assert_eq!(for_owner, json!(["open_turn", "close"]));
    assert_eq!(for_machine, json!([]));
    assert_eq!((for_owner, for_machine), (read(&o), read(&machine)), "as the record's GET answers each role");
}
