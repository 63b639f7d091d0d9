//! The turn's timeline (`POST/`GET …/events`), against the real local Worker, in
//! the contract's words: a batch is taken whole, a repeat changes nothing, other content is a
//! conflict, a gap names the next seq, the caps refuse, an erase erases, and events never move
//! the version or wake a wait.

use handoff_it::peers::WebhookReceiver;
use handoff_it::watch::{Auth, Frame, Watch};
use handoff_it::{owner, unique, Answer, Client};
use serde_json::{json, Value};
use std::thread;
use std::time::{Duration, Instant};

fn post(c: &Client, id: &str, token: &str, turn: u64, events: Value) -> Answer {
    c.post(&format!("/v1/handoffs/{id}/events"), token, json!({"turn": turn, "events": events}))
}

fn read(c: &Client, id: &str, token: &str, query: &str) -> Answer {
    c.get(&format!("/v1/handoffs/{id}/events?{query}"), token)
}

fn note(seq: u64, text: &str) -> Value {
    json!({"seq": seq, "kind": "note", "text": text})
}

fn seqs(a: &Answer) -> Vec<u64> {
    a.body["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[test]
fn a_batch_is_taken_whole_and_read_back_in_order_with_the_next_seq() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let batch = json!([
        {"seq": 1, "kind": "message", "text": "I'll run the tests."},
        {"seq": 2, "kind": "tool", "id": "toolu_1", "name": "Bash", "state": "started", "input": "cargo test"},
        {"seq": 3, "kind": "tool", "id": "toolu_1", "name": "Bash", "state": "done", "output": "ok", "output_bytes": 2, "duration_ms": 1200},
    ]);
    let taken = post(&c, &id, &machine, 1, batch.clone());
    assert_eq!((taken.status, &taken.body), (200, &json!({"turn": 1, "next": 4})), "{}", taken.text);
    for token in [&alice, &machine] {
        let all = read(&c, &id, token, "turn=1");
        assert_eq!(all.status, 200, "{}", all.text);
        assert_eq!(
            (seqs(&all), all.body["next"].as_u64(), all.body["turn"].as_u64()),
            (vec![1, 2, 3], Some(4), Some(1))
        );
        let first = &all.body["events"][0];
        assert!(first["at"].is_string(), "each event carries when the service took it: {first}");
        assert_eq!(all.body["events"][1]["input"], "cargo test");
        assert!(all.body.get("dropped").is_none());
    }
    let page = read(&c, &id, &alice, "after=1&limit=1");
    assert_eq!((seqs(&page), page.body["next"].as_u64()), (vec![2], Some(4)), "the current turn's, after 1, one");
    assert_eq!(read(&c, &id, &alice, "turn=2").code(), "handoff.turn_out_of_order");
    assert_eq!(read(&c, &id, &alice, "limit=0").status, 400);
}

#[test]
fn a_repeat_changes_nothing_other_content_is_a_conflict_and_a_gap_names_the_next_seq() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "a"), note(2, "b")])).status, 200);
    let again = post(&c, &id, &machine, 1, json!([note(1, "a"), note(2, "b")]));
    assert_eq!((again.status, again.body["next"].as_u64()), (200, Some(3)), "{}", again.text);
    let overlap = post(&c, &id, &machine, 1, json!([note(2, "b"), note(3, "c")]));
    assert_eq!((overlap.status, overlap.body["next"].as_u64()), (200, Some(4)));

    let conflict = post(&c, &id, &machine, 1, json!([note(3, "other"), note(4, "d")]));
    assert_eq!((conflict.status, conflict.code()), (409, "timeline.conflict"), "{}", conflict.text);
    assert_eq!((conflict.body["turn"].as_u64(), conflict.body["next"].as_u64()), (Some(1), Some(4)));
    let gap = post(&c, &id, &machine, 1, json!([note(6, "f")]));
    assert_eq!((gap.status, gap.code(), gap.body["next"].as_u64()), (409, "timeline.gap", Some(4)), "{}", gap.text);
    let all = read(&c, &id, &alice, "");
    assert_eq!(seqs(&all), [1, 2, 3], "a refused batch stored nothing, not even its new events");
    assert_eq!(all.body["events"][2]["text"], "c", "each event as first taken");
    let inner_gap = post(&c, &id, &machine, 1, json!([note(4, "d"), note(6, "f")]));
    assert_eq!((inner_gap.status, inner_gap.code()), (400, "request.invalid"), "a batch's seqs are consecutive");
}

#[test]
fn an_owner_token_reads_the_timeline_but_may_not_write_it() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    let refused = post(&c, &id, &alice, 1, json!([note(1, "a")]));
    assert_eq!((refused.status, refused.code()), (403, "auth.forbidden"), "{}", refused.text);
    assert_eq!(read(&c, &id, &alice, "").body["next"].as_u64(), Some(1), "nothing was taken");
    let bob = owner(&unique("bob"));
    assert_eq!(read(&c, &id, &bob, "").status, 404, "another owner's is not found");
}

#[test]
fn events_move_no_version_and_wake_no_wait_on_the_version() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, created) = c.create(&alice);
    let version = created.version();
    let waiter = {
        let (c, id, alice) = (c.clone(), id.clone(), alice.clone());
        thread::spawn(move || {
            let started = Instant::now();
            let a = c.get(&format!("/v1/handoffs/{id}/wait?after={version}&timeout=3"), &alice);
            (a, started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(500));
    for seq in 1..=5 {
        assert_eq!(post(&c, &id, &machine, 1, json!([note(seq, "working")])).status, 200);
    }
    let (waited, elapsed) = waiter.join().unwrap();
    assert_eq!(waited.version(), version, "the wait answered at its timeout with the same version");
    assert!(elapsed >= Duration::from_millis(2_900), "no event woke the wait: {elapsed:?}");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), version);
}

#[test]
fn events_are_taken_for_a_kept_turn_after_it_ended_and_after_the_close_and_refused_once_dropped() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "done", Some("one")).status, 200);
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "spooled through a cut")])).status, 200);
    for turn in 2..=4 {
        assert_eq!(c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": turn - 1})).status, 200);
        assert_eq!(c.report(&id, &machine, turn, "done", None).status, 200);
    }
    let late = post(&c, &id, &machine, 1, json!([note(2, "late, turn 1 is still kept")]));
    assert_eq!(late.status, 200, "{}", late.text);
    assert_eq!(post(&c, &id, &machine, 5, json!([note(1, "a")])).code(), "handoff.turn_out_of_order");
    // Turn 5 opens: turn 1 leaves the newest 4 kept.
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 4})).status, 200);
    let dropped = post(&c, &id, &machine, 1, json!([note(3, "too late")]));
    assert_eq!((dropped.status, dropped.code()), (409, "timeline.dropped"), "{}", dropped.text);
    let old = read(&c, &id, &alice, "turn=1");
    assert_eq!(
        (old.status, seqs(&old), old.body["next"].as_u64(), old.body["dropped"].as_bool()),
        (200, vec![], Some(3), Some(true))
    );
    assert_eq!(post(&c, &id, &machine, 2, json!([note(1, "turn 2 is kept")])).status, 200);
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({})).status, 200);
    let after_close = post(&c, &id, &machine, 5, json!([note(1, "stopped: the hand-off closed")]));
    assert_eq!(after_close.status, 200, "the close does not lose spooled events: {}", after_close.text);
}

#[test]
fn a_full_batch_of_64_events_is_stored_whole_in_order_and_its_repeat_changes_nothing() {
    // 64 events take more than one multi-row INSERT (each binds at most 100 values).
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let batch: Vec<Value> = (1..=64).map(|s| note(s, &format!("n{s}"))).collect();
    let taken = post(&c, &id, &machine, 1, Value::from(batch.clone()));
    assert_eq!((taken.status, taken.body["next"].as_u64()), (200, Some(65)), "{}", taken.text);
    let all = read(&c, &id, &alice, "turn=1");
    assert_eq!(seqs(&all), (1..=64).collect::<Vec<u64>>());
    assert_eq!(
        (all.body["events"][48]["text"].as_str(), all.body["events"][63]["text"].as_str()),
        (Some("n49"), Some("n64"))
    );
    let again = post(&c, &id, &machine, 1, Value::from(batch.clone()));
    assert_eq!((again.status, again.body["next"].as_u64()), (200, Some(65)), "{}", again.text);
    let mut changed = batch;
    changed[63] = note(64, "other");
    let conflict = post(&c, &id, &machine, 1, Value::from(changed));
    assert_eq!((conflict.status, conflict.code()), (409, "timeline.conflict"), "{}", conflict.text);
    assert_eq!(seqs(&read(&c, &id, &alice, "turn=1")).len(), 64);
}

#[test]
fn a_turn_past_its_cap_of_bytes_refuses_more_with_timeline_full() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let text = "x".repeat(16 * 1024);
    let mut seq = 1;
    let full = loop {
        let events: Vec<Value> = (seq..seq + 12).map(|s| json!({"seq": s, "kind": "message", "text": text})).collect();
        let a = post(&c, &id, &machine, 1, Value::from(events));
        if a.status != 200 {
            break a;
        }
        seq += 12;
        assert!(seq < 200, "the turn's bytes were never capped");
    };
    assert_eq!(
        (full.status, full.code(), full.body["next"].as_u64()),
        (409, "timeline.full", Some(seq)),
        "{}",
        full.text
    );
    assert!(seq * 16 * 1024 <= 1024 * 1024 + 12 * 17 * 1024, "the cap is about a megabyte: {seq}");
    let small = post(&c, &id, &machine, 1, json!([{"seq": seq, "kind": "note", "text": "x"}]));
    assert!(small.status == 200 || small.code() == "timeline.full", "{}", small.text);
}

#[test]
fn a_batch_past_the_events_routes_body_cap_or_64_events_is_refused() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let many: Vec<Value> = (1..=65).map(|s| note(s, "n")).collect();
    let a = post(&c, &id, &machine, 1, Value::from(many));
    assert_eq!((a.status, a.code()), (400, "request.invalid"), "{}", a.text);
    let text = "x".repeat(16 * 1024);
    let big: Vec<Value> = (1..=17).map(|s| json!({"seq": s, "kind": "message", "text": text})).collect();
    let a = post(&c, &id, &machine, 1, Value::from(big));
    assert_eq!((a.status, a.code()), (413, "request.too_large"), "past 256 KiB of body");
    assert_eq!(read(&c, &id, &alice, "").body["next"].as_u64(), Some(1));
}

#[test]
fn a_held_read_answers_when_an_event_arrives_and_at_its_timeout_otherwise() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let held = {
        let (c, id, alice) = (c.clone(), id.clone(), alice.clone());
        thread::spawn(move || {
            let started = Instant::now();
            (read(&c, &id, &alice, "after=0&timeout=20"), started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(700));
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "first word")])).status, 200);
    let (a, elapsed) = held.join().unwrap();
    assert_eq!((a.status, seqs(&a)), (200, vec![1]), "{}", a.text);
    assert!(elapsed < Duration::from_secs(10), "woken by the event, not the timeout: {elapsed:?}");

    let started = Instant::now();
    let quiet = read(&c, &id, &alice, "after=1&timeout=2");
    assert_eq!((quiet.status, seqs(&quiet), quiet.body["next"].as_u64()), (200, vec![], Some(2)));
    assert!(started.elapsed() >= Duration::from_millis(1_900), "held to its timeout");
    let at_once = read(&c, &id, &alice, "after=0&timeout=30");
    assert_eq!(seqs(&at_once), [1], "a read that has something answers at once");
    assert_eq!(read(&c, &id, &alice, "timeout=301").status, 400, "held no longer than a wait");
}

#[test]
fn an_erase_erases_the_events() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let body = json!({"session": session, "machine": "m1", "size": "large"});
    let created = c.post("/v1/handoffs", &alice, body.clone());
    let id = created.handoff()["id"].as_str().unwrap().to_string();
    let machine = created.body["machine_token"].as_str().unwrap().to_string();
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "a"), note(2, "b")])).status, 200);
    let storage = c.get(&format!("/v1/test/handoffs/{id}/storage"), &alice);
    assert_eq!(storage.body["rows"]["timeline"].as_u64(), Some(2), "{}", storage.text);
    assert_eq!(c.send("DELETE", &format!("/v1/handoffs/{id}"), Some(&alice), &[], None).status, 204);
    assert_eq!(post(&c, &id, &machine, 1, json!([note(3, "c")])).status, 404, "its machine token is refused");
    let again = c.post("/v1/handoffs", &alice, body);
    assert_eq!(again.status, 201, "{}", again.text);
    let machine = again.body["machine_token"].as_str().unwrap().to_string();
    assert_eq!(read(&c, &id, &alice, "").body["next"].as_u64(), Some(1), "the new life's timeline starts empty");
    assert_eq!(c.get(&format!("/v1/test/handoffs/{id}/storage"), &alice).body["rows"]["timeline"].as_u64(), Some(0));
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "new life")])).body["next"].as_u64(), Some(2));
}

#[test]
fn events_send_no_notification_and_a_status_still_does() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let hook = WebhookReceiver::start("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let created = c.post("/v1/webhooks", &alice, json!({"url": hook.url()}));
    assert_eq!(created.status, 201, "{}", created.text);
    hook.set_secret(created.body["secret"].as_str().unwrap());
    let (id, machine, _) = c.create(&alice);
    for seq in 1..=3 {
        assert_eq!(post(&c, &id, &machine, 1, json!([note(seq, "step")])).status, 200);
    }
    assert_eq!(c.report(&id, &machine, 1, "done", Some("done")).status, 200);
    let got = hook.wait_for(1, Duration::from_secs(30));
    thread::sleep(Duration::from_secs(2));
    let types: Vec<String> =
        hook.deliveries().iter().map(|d| d.json()["type"].as_str().unwrap_or("?").to_string()).collect();
    assert_eq!(types, ["handoff.done"], "the done alone: {got:?}");
}

/// What a watch reads until it is quiet for a second: record versions and timeline seqs, in
/// the order they came (`("v", version)` or `("e", seq)`).
fn read_quiet(w: &mut Watch) -> Vec<(&'static str, u64)> {
    let mut got = Vec::new();
    loop {
        match w.next(Duration::from_secs(1)) {
            Frame::Silent => return got,
            Frame::Record(v) => got.push(("v", v["handoff"]["version"].as_u64().unwrap())),
            Frame::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap_or_else(|_| panic!("not JSON: {t}"));
                assert_eq!(v["timeline"]["turn"], 1, "{t}");
                for e in v["timeline"]["events"].as_array().unwrap() {
                    assert!(e["at"].is_string());
                    got.push(("e", e["seq"].as_u64().unwrap()));
                }
            }
            Frame::Closed(code) => panic!("closed {code}"),
        }
    }
}

fn v2(c: &Client, id: &str, token: &str, query: &str) -> Watch {
    let path = format!("/v1/handoffs/{id}/watch?{query}");
    let w = Watch::open_with(&c.base, &path, token, Auth::Header, &[("Sec-WebSocket-Protocol", "handoff.v2")])
        .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
    assert_eq!(w.protocol.as_deref(), Some("handoff.v2"));
    w
}

#[test]
fn a_handoff_v2_watch_is_sent_the_turns_events_once_in_order_beside_the_records_and_v1_only_records() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    assert_eq!(post(&c, &id, &machine, 1, json!([note(1, "a"), note(2, "b")])).status, 200);
    let mut watch = v2(&c, &id, &alice, "after=0");
    let mut v1 = Watch::open(&c.base, &id, &alice, 0, Auth::Subprotocol).unwrap();
    assert_eq!(v1.protocol.as_deref(), Some("handoff.v1"));
    assert_eq!(read_quiet(&mut watch), [("v", 1), ("e", 1), ("e", 2)], "the record, then the turn so far");
    assert_eq!(read_quiet(&mut v1), [("v", 1)]);

    assert_eq!(post(&c, &id, &machine, 1, json!([note(3, "c")])).status, 200);
    assert_eq!(c.report(&id, &machine, 1, "running", Some("working")).status, 200);
    assert_eq!(read_quiet(&mut watch), [("e", 3), ("v", 2)], "each once, in order");
    assert_eq!(read_quiet(&mut v1), [("v", 2)], "handoff.v1: exactly the record frames");
    assert_eq!(post(&c, &id, &machine, 1, json!([note(3, "c")])).status, 200);
    assert_eq!(read_quiet(&mut watch), [], "a repeat sends nothing");

    // A client that lost its place says where it is, and is sent what is newer.
    watch.send_text(r#"{"after":2,"turn":1,"seq":1}"#);
    assert_eq!(read_quiet(&mut watch), [("e", 2), ("e", 3)]);
    let mut again = v2(&c, &id, &alice, "after=2&turn=1&seq=2");
    assert_eq!(read_quiet(&mut again), [("e", 3)], "a reconnect from its place misses nothing and repeats nothing");
    v1.send_text(r#"{"after":2,"turn":1,"seq":3}"#);
    assert_eq!(v1.next(Duration::from_secs(5)), Frame::Closed(1003), "v1 takes {{\"after\": V}} alone");
    let refused =
        Watch::open_with(&c.base, &format!("/v1/handoffs/{id}/watch?turn=1&seq=0"), &alice, Auth::Subprotocol, &[]);
    assert_eq!(refused.err().map(|r| r.status), Some(400), "a v1 watch follows no timeline");
    // The next turn's events start from its first.
    assert_eq!(c.report(&id, &machine, 1, "done", Some("done")).status, 200);
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1})).status, 200);
    assert_eq!(read_quiet(&mut watch), [("v", 3), ("v", 4)]);
    assert_eq!(post(&c, &id, &machine, 2, json!([note(1, "turn two")])).status, 200);
    match watch.next(Duration::from_secs(5)) {
        Frame::Text(t) => {
            let v: Value = serde_json::from_str(&t).unwrap();
            assert_eq!(
                (v["timeline"]["turn"].as_u64(), v["timeline"]["events"][0]["seq"].as_u64()),
                (Some(2), Some(1))
            );
        }
        other => panic!("{other:?}"),
    }
    watch.close();
    again.close();
}
