//! Steering a running turn (`POST …/steer`), against the real local Worker, in the contract's
//! words: when a steer is taken, every refusal, idempotency, the bound, `actions`, and the
//! version moving once per steer.

use handoff_core::limits::{PROMPT_BYTES_MAX, STEERS_PER_TURN_MAX, WORDS_BODY_BYTES_MAX};
use handoff_it::{owner, unique, Answer, Client};
use serde_json::{json, Value};

fn steer(c: &Client, id: &str, token: &str, turn: u64, prompt: &str) -> Answer {
    c.post(&format!("/v1/handoffs/{id}/steer"), token, json!({"turn": turn, "prompt": prompt}))
}

fn steer_with_key(c: &Client, id: &str, token: &str, key: &str, turn: u64, prompt: &str) -> Answer {
    let body = json!({"turn": turn, "prompt": prompt}).to_string();
    c.send("POST", &format!("/v1/handoffs/{id}/steer"), Some(token), &[("Idempotency-Key", key)], Some(body.as_bytes()))
}

fn actions(a: &Answer) -> Vec<String> {
    a.handoff()["actions"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

fn steers(a: &Answer) -> Vec<Value> {
    a.handoff().get("steers").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// A hand-off at turn 2, running: the owner's token, the id and the machine's token.
fn at_turn_two(c: &Client) -> (String, String, String) {
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let opened = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1, "prompt": "build it"}));
    assert_eq!(opened.status, 200, "{}", opened.text);
    (alice, id, machine)
}

#[test]
fn a_steer_of_the_running_turn_answers_the_record_with_its_steer_and_moves_the_version_once() {
    let c = Client::shared();
    let (alice, id, machine) = at_turn_two(&c);
    let before = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert!(actions(&before).contains(&"steer".to_string()), "{:?}", actions(&before));
    let first = steer(&c, &id, &alice, 2, "Use SQLite instead.\n\tKeep the schema.");
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.version(), before.version() + 1, "one version per steer");
    let taken = steers(&first);
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0]["prompt"], "Use SQLite instead.\n\tKeep the schema.");
    assert!(taken[0]["id"].as_str().unwrap().starts_with(&format!("st_{}_", first.version())), "{}", taken[0]);
    assert!(taken[0]["sent_at"].is_string());
    // The same words again, without a key, are a second steer.
    let second = steer(&c, &id, &alice, 2, "Use SQLite instead.\n\tKeep the schema.");
    assert_eq!((second.status, second.version(), steers(&second).len()), (200, first.version() + 1, 2));
    // The machine reads them on the record, and a question does not stop a steer.
    let read = c.get(&format!("/v1/handoffs/{id}"), &machine);
    assert_eq!(steers(&read).len(), 2);
    let asked = c.post(
        &format!("/v1/handoffs/{id}/report"),
        &machine,
        json!({"turn": 2, "status": "needs-you", "summary": "Which?", "question": {"kind": "choice", "text": "Which?", "options": [{"id": "a", "label": "A"}]}}),
    );
    assert_eq!(asked.status, 200, "{}", asked.text);
    let waiting = steer(&c, &id, &alice, 2, "either is fine");
    assert_eq!((waiting.status, waiting.handoff()["status"].as_str()), (200, Some("needs-you")), "{}", waiting.text);
    assert!(waiting.handoff()["question"].is_object(), "a steer leaves the question open");
    // The lineage entry of the turn keeps its steers; the next turn starts with none.
    c.report(&id, &machine, 2, "done", None);
    let three = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 2}));
    assert!(steers(&three).is_empty(), "{}", three.text);
    let page = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    let kept = page.body["turns"][1]["steers"].as_array().unwrap();
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[2]["prompt"], "either is fine");
}

#[test]
fn every_refusal_of_a_steer_carries_the_hand_off_and_changes_nothing_and_closed_wins() {
    let c = Client::shared();
    let (alice, id, machine) = at_turn_two(&c);
    let version = c.get(&format!("/v1/handoffs/{id}"), &alice).version();
    let cases = [(1, "handoff.stale"), (3, "handoff.turn_out_of_order")];
    for (turn, code) in cases {
        let a = steer(&c, &id, &alice, turn, "x");
        assert_eq!((a.status, a.code()), (409, code), "turn {turn}: {}", a.text);
        assert_eq!((a.handoff()["turn"].as_u64(), a.version()), (Some(2), version), "it carries the hand-off");
    }
    let by_machine = steer(&c, &id, &machine, 2, "x");
    assert_eq!((by_machine.status, by_machine.code()), (403, "auth.forbidden"), "{}", by_machine.text);
    for bad in [json!({"turn": 2}), json!({"turn": 2, "prompt": ""}), json!({"turn": 2, "prompt": "a\u{1b}b"})] {
        let a = c.post(&format!("/v1/handoffs/{id}/steer"), &alice, bad.clone());
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{bad}: {}", a.text);
    }
    let over = "x".repeat(WORDS_BODY_BYTES_MAX + 1);
    let too_large = steer(&c, &id, &alice, 2, &over);
    assert_eq!((too_large.status, too_large.code()), (413, "request.too_large"));
    // The words' cap: a prompt of the longest length, escaped, still fits the body.
    let longest = "\"".repeat(PROMPT_BYTES_MAX);
    assert_eq!(steer(&c, &id, &alice, 2, &longest).status, 200, "the words' body cap");
    let version = version + 1;
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), version, "refusals changed nothing");
    // Ended: finished, and steer leaves the actions.
    c.report(&id, &machine, 2, "done", None);
    let finished = steer(&c, &id, &alice, 2, "too late");
    assert_eq!((finished.status, finished.code()), (409, "handoff.turn_finished"), "{}", finished.text);
    assert!(!actions(&finished).contains(&"steer".to_string()));
    // Closed, whatever else holds: an older, a later and the current turn alike.
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({})).status, 200);
    for turn in [1, 2, 3] {
        let a = steer(&c, &id, &alice, turn, "x");
        assert_eq!((a.status, a.code()), (409, "handoff.closed"), "turn {turn}: {}", a.text);
    }
}

#[test]
fn a_cancelled_turn_refuses_a_steer_as_finished() {
    let c = Client::shared();
    let (alice, id, _) = at_turn_two(&c);
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/cancel"), &alice, json!({})).status, 200);
    let a = steer(&c, &id, &alice, 2, "wait");
    assert_eq!((a.status, a.code()), (409, "handoff.turn_finished"), "{}", a.text);
}

#[test]
fn a_steer_with_an_idempotency_key_is_taken_once_and_the_key_with_other_words_is_a_mismatch() {
    let c = Client::shared();
    let (alice, id, _) = at_turn_two(&c);
    let key = unique("steer-key");
    let first = steer_with_key(&c, &id, &alice, &key, 2, "only SQLite");
    assert_eq!(first.status, 200, "{}", first.text);
    let again = steer_with_key(&c, &id, &alice, &key, 2, "only SQLite");
    assert_eq!((again.status, again.version(), steers(&again).len()), (200, first.version(), 1), "{}", again.text);
    let other = steer_with_key(&c, &id, &alice, &key, 2, "only Postgres");
    assert_eq!((other.status, other.code()), (422, "idempotency.mismatch"), "the prompt is in the fingerprint");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), first.version());
}

#[test]
fn a_turn_takes_the_named_number_of_steers_then_steer_too_many_and_steer_leaves_the_actions() {
    let c = Client::shared();
    let (alice, id, _) = at_turn_two(&c);
    let mut version = c.get(&format!("/v1/handoffs/{id}"), &alice).version();
    for i in 0..STEERS_PER_TURN_MAX {
        let a = steer(&c, &id, &alice, 2, &format!("steer {i}"));
        assert_eq!((a.status, a.version()), (200, version + 1), "{}", a.text);
        version += 1;
        assert_eq!(actions(&a).contains(&"steer".to_string()), i + 1 < STEERS_PER_TURN_MAX, "after steer {i}");
    }
    let over = steer(&c, &id, &alice, 2, "one more");
    assert_eq!((over.status, over.code()), (409, "steer.too_many"), "{}", over.text);
    assert_eq!((over.version(), steers(&over).len()), (version, STEERS_PER_TURN_MAX));
}

/// The timeline's `steer` event: the machine says what became of a steer its turn took,
/// delivered or undelivered with why; it moves no version and leaves the question open, and
/// one naming a steer the turn did not take is 400 and stores nothing.
#[test]
fn a_steer_event_names_a_steer_of_its_turn_moves_no_version_and_an_unknown_one_is_refused() {
    let c = Client::shared();
    let (alice, id, machine) = at_turn_two(&c);
    let sent = steer(&c, &id, &alice, 2, "Use SQLite instead.");
    let steer_id = steers(&sent)[0]["id"].as_str().unwrap().to_string();
    let asked = c.post(
        &format!("/v1/handoffs/{id}/report"),
        &machine,
        json!({"turn": 2, "status": "needs-you", "summary": "Which?", "question": {"kind": "choice", "text": "Which?", "options": [{"id": "a", "label": "A"}]}}),
    );
    assert_eq!(asked.status, 200, "{}", asked.text);
    let events = format!("/v1/handoffs/{id}/events");
    let unknown = c.post(
        &events,
        &machine,
        json!({"turn": 2, "events": [{"seq": 1, "kind": "steer", "id": "st_1_1", "state": "delivered"}]}),
    );
    assert_eq!((unknown.status, unknown.code()), (400, "request.invalid"), "{}", unknown.text);
    assert!(unknown.text.contains("events[0].id"), "{}", unknown.text);
    let why = "the turn's harness had ended (exit 0)";
    let taken = c.post(
        &events,
        &machine,
        json!({"turn": 2, "events": [{"seq": 1, "kind": "steer", "id": steer_id, "state": "undelivered", "why": why}]}),
    );
    assert_eq!((taken.status, &taken.body["next"]), (200, &json!(2)), "{}", taken.text);
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(after.version(), asked.version(), "no version moves");
    assert_eq!(after.handoff()["status"], "needs-you");
    assert!(after.handoff()["question"]["id"].is_string(), "the question stays open");
    let read = c.get(&format!("{events}?turn=2"), &alice);
    let event = &read.body["events"][0];
    assert_eq!(
        (&event["kind"], &event["id"], &event["state"], &event["why"]),
        (&json!("steer"), &json!(steer_id), &json!("undelivered"), &json!(why))
    );
    assert!(event["at"].is_string());
}
