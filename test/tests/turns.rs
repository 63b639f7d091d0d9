//! The turn lifecycle of issue 2, against the real local Worker, in the contract's words.

use handoff_it::{owner, unique, Answer, Client};
use serde_json::json;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

fn open_turn(c: &Client, id: &str, token: &str, after: u64) -> Answer {
    c.post(&format!("/v1/handoffs/{id}/turns"), token, json!({"after": after}))
}

#[test]
fn a_new_hand_off_starts_at_turn_one_and_a_second_create_answers_the_same() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let body = json!({"session": session, "machine": "m1", "size": "large"});
    let first = c.post("/v1/handoffs", &alice, body.clone());
    assert_eq!(first.status, 201, "{}", first.text);
    let h = first.handoff();
    assert_eq!(
        (h["turn"].as_u64(), h["state"].as_str(), h["status"].as_str(), h["version"].as_u64()),
        (Some(1), Some("open"), Some("running"), Some(1))
    );
    assert!(h["id"].as_str().unwrap().starts_with("ho_"));
    assert!(first.body["machine_token"].is_string());
    let again = c.post("/v1/handoffs", &alice, body);
    assert_eq!(again.status, 200);
    assert_eq!(again.handoff()["id"], h["id"]);
    assert!(again.body.get("machine_token").is_none(), "a repeated create answers the hand-off as it is");
    assert_eq!(again.version(), 1);
    let other_machine = c.post("/v1/handoffs", &alice, json!({"session": session, "machine": "m2", "size": "large"}));
    assert_eq!((other_machine.status, other_machine.code()), (409, "handoff.conflict"));
    assert_eq!(other_machine.handoff()["machine"], "m1");
}

#[test]
fn turn_one_finishes_turn_two_opens_and_reports_needs_you_and_get_and_wait_show_turn_two() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "done", Some("turn 1 done")).status, 200);
    let t2 = open_turn(&c, &id, &alice, 1);
    assert_eq!(t2.status, 200, "{}", t2.text);
    assert_eq!((t2.handoff()["turn"].as_u64(), t2.handoff()["status"].as_str()), (Some(2), Some("running")));
    assert!(t2.handoff()["summary"].is_null());
    let r = c.report(&id, &machine, 2, "needs-you", Some("which database?"));
    assert_eq!((r.status, r.handoff()["status"].as_str(), r.version()), (200, Some("needs-you"), 4));
    for token in [&alice, &machine] {
        let got = c.get(&format!("/v1/handoffs/{id}"), token);
        assert_eq!((got.handoff()["turn"].as_u64(), got.handoff()["status"].as_str()), (Some(2), Some("needs-you")));
        let waited = c.get(&format!("/v1/handoffs/{id}/wait?after=3&timeout=5"), token);
        assert_eq!((waited.status, waited.version(), waited.handoff()["turn"].as_u64()), (200, 4, Some(2)));
    }
}

#[test]
fn a_late_turn_one_report_is_stale_and_leaves_turn_two_unchanged() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    open_turn(&c, &id, &alice, 1);
    let before = c.get(&format!("/v1/handoffs/{id}"), &alice);
    for status in ["running", "needs-you", "done", "failed"] {
        let late = c.report(&id, &machine, 1, status, Some("late"));
        assert_eq!((late.status, late.code()), (409, "handoff.stale"), "{}", late.text);
        assert_eq!(late.handoff()["turn"].as_u64(), Some(2), "the refusal tells the machine the current turn");
    }
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(after.handoff(), before.handoff());
}

#[test]
fn the_machine_cannot_open_a_turn_nor_skip_one() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let by_machine = open_turn(&c, &id, &machine, 1);
    assert_eq!((by_machine.status, by_machine.code()), (403, "auth.forbidden"));
    let skip = open_turn(&c, &id, &alice, 2);
    assert_eq!((skip.status, skip.code()), (409, "handoff.turn_conflict"));
    let ahead = c.report(&id, &machine, 2, "running", None);
    assert_eq!((ahead.status, ahead.code()), (409, "handoff.turn_out_of_order"));
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 2);
}

#[test]
fn no_turn_opens_while_one_is_running_or_needs_you() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let running = open_turn(&c, &id, &alice, 1);
    assert_eq!((running.status, running.code()), (409, "handoff.turn_running"));
    assert_eq!(running.handoff()["status"], "running");
    c.report(&id, &machine, 1, "needs-you", None);
    let needs_you = open_turn(&c, &id, &alice, 1);
    assert_eq!((needs_you.status, needs_you.code()), (409, "handoff.turn_running"));
}

#[test]
fn a_repeat_of_the_open_turn_call_answers_the_same_turn_without_a_version_move() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "failed", Some("tests red"));
    let first = open_turn(&c, &id, &alice, 1);
    let again = open_turn(&c, &id, &alice, 1);
    assert_eq!((again.status, again.handoff()), (200, first.handoff()));
    assert_eq!(again.version(), 3);
}

#[test]
fn cancel_stops_the_current_turn_and_refuses_a_finished_or_other_turn() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let other = c.post(&format!("/v1/handoffs/{id}/cancel"), &alice, json!({"turn": 2}));
    assert_eq!((other.status, other.code()), (409, "handoff.turn_conflict"));
    let cancelled = c.post(&format!("/v1/handoffs/{id}/cancel"), &alice, json!({}));
    assert_eq!(
        (cancelled.status, cancelled.handoff()["status"].as_str(), cancelled.version()),
        (200, Some("cancelled"), 2)
    );
    let again = c.send("POST", &format!("/v1/handoffs/{id}/cancel"), Some(&alice), &[], None);
    assert_eq!((again.status, again.version()), (200, 2));
    open_turn(&c, &id, &alice, 1);
    c.report(&id, &machine, 2, "done", None);
    let finished = c.post(&format!("/v1/handoffs/{id}/cancel"), &alice, json!({"turn": 2}));
    assert_eq!((finished.status, finished.code()), (409, "handoff.turn_finished"));
    let by_machine = c.post(&format!("/v1/handoffs/{id}/cancel"), &machine, json!({}));
    assert_eq!(by_machine.status, 403);
}

#[test]
fn a_report_on_an_ended_turn_is_refused_unless_it_repeats_the_final_report() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", Some("ok"));
    let repeat = c.report(&id, &machine, 1, "done", Some("ok"));
    assert_eq!((repeat.status, repeat.version()), (200, 2));
    let changed = c.report(&id, &machine, 1, "failed", Some("ok"));
    assert_eq!((changed.status, changed.code()), (409, "handoff.turn_finished"));
    let same_as_now = c.report(&id, &machine, 1, "done", Some("ok"));
    assert_eq!(same_as_now.version(), 2);
}

/// Holds a wait in a thread; answers the wait's answer and how long it took.
fn hold_wait(c: &Client, id: &str, token: &str, after: u64, timeout_s: u64) -> thread::JoinHandle<(Answer, Duration)> {
    let (c, path, token) =
        (c.clone(), format!("/v1/handoffs/{id}/wait?after={after}&timeout={timeout_s}"), token.to_string());
    thread::spawn(move || {
        let start = Instant::now();
        let a = c.get(&path, &token);
        (a, start.elapsed())
    })
}

#[test]
fn a_wait_holds_until_the_next_version_move_and_answers_with_it() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let waiter = hold_wait(&c, &id, &alice, 1, 30);
    thread::sleep(Duration::from_millis(500));
    c.report(&id, &machine, 1, "needs-you", Some("?"));
    let (a, took) = waiter.join().unwrap();
    assert_eq!((a.status, a.version(), a.handoff()["status"].as_str()), (200, 2, Some("needs-you")));
    assert!(took < Duration::from_secs(10), "woken by the report, not the timeout ({took:?})");
}

#[test]
fn a_wait_with_nothing_new_answers_the_current_record_at_its_timeout() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    let (a, took) = hold_wait(&c, &id, &alice, 1, 1).join().unwrap();
    assert_eq!((a.status, a.version()), (200, 1));
    assert!(took >= Duration::from_secs(1), "held for its timeout ({took:?})");
}

#[test]
fn an_exact_repeat_of_the_final_report_wakes_no_watcher() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", Some("final"));
    let waiter = hold_wait(&c, &id, &alice, 2, 3);
    thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        assert_eq!(c.report(&id, &machine, 1, "done", Some("final")).status, 200);
    }
    let (a, took) = waiter.join().unwrap();
    assert_eq!(a.version(), 2);
    assert!(took >= Duration::from_secs(3), "the wait stayed open across the repeats ({took:?})");
}

#[test]
fn a_turn_that_ended_does_not_end_a_wait_but_the_next_version_does() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let waiter = hold_wait(&c, &id, &alice, 2, 30);
    thread::sleep(Duration::from_millis(500));
    open_turn(&c, &id, &alice, 1);
    let (a, _) = waiter.join().unwrap();
    assert_eq!((a.version(), a.handoff()["turn"].as_u64()), (3, Some(2)));
}

#[test]
fn close_is_terminal_and_ends_a_wait_at_once() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let waiter = hold_wait(&c, &id, &machine, 1, 60);
    thread::sleep(Duration::from_millis(500));
    let closed = c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({}));
    assert_eq!(
        (closed.status, closed.handoff()["state"].as_str(), closed.handoff()["status"].as_str()),
        (200, Some("closed"), Some("cancelled"))
    );
    let (a, took) = waiter.join().unwrap();
    assert_eq!(a.handoff()["state"], "closed");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A wait on a closed hand-off answers at once, whatever version it names.
    let (late, took) = hold_wait(&c, &id, &alice, 99, 60).join().unwrap();
    assert_eq!(late.handoff()["state"], "closed");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let again = c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({}));
    assert_eq!((again.status, again.version()), (200, closed.version()));
    for refused in [
        c.report(&id, &machine, 1, "done", None),
        open_turn(&c, &id, &alice, 1),
        c.post(&format!("/v1/handoffs/{id}/cancel"), &alice, json!({})),
    ] {
        assert_eq!((refused.status, refused.code()), (409, "handoff.closed"), "{}", refused.text);
    }
}

/// Fires `a` and `b` at the same moment; answers both.
fn race(
    c: &Client,
    a: (String, String, serde_json::Value),
    b: (String, String, serde_json::Value),
) -> (Answer, Answer) {
    let barrier = Arc::new(Barrier::new(2));
    let fire = |(path, token, body): (String, String, serde_json::Value)| {
        let (c, barrier) = (c.clone(), barrier.clone());
        thread::spawn(move || {
            barrier.wait();
            c.post(&path, &token, body)
        })
    };
    let (ta, tb) = (fire(a), fire(b));
    (ta.join().unwrap(), tb.join().unwrap())
}

#[test]
fn a_cancel_racing_a_same_turn_final_report_has_one_whole_winner() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    for _ in 0..25 {
        let (id, machine, _) = c.create(&alice);
        let (cancel, report) = race(
            &c,
            (format!("/v1/handoffs/{id}/cancel"), alice.clone(), json!({"turn": 1})),
            (
                format!("/v1/handoffs/{id}/report"),
                machine.clone(),
                json!({"turn": 1, "status": "done", "summary": "s"}),
            ),
        );
        let now = c.get(&format!("/v1/handoffs/{id}"), &alice);
        assert_eq!(now.version(), 2, "exactly one change landed");
        match (cancel.status, report.status) {
            (200, 409) => {
                assert_eq!(
                    (report.code(), report.handoff()["status"].as_str()),
                    ("handoff.turn_finished", Some("cancelled"))
                );
                assert_eq!(now.handoff()["status"], "cancelled");
            }
            (409, 200) => {
                assert_eq!(
                    (cancel.code(), cancel.handoff()["status"].as_str()),
                    ("handoff.turn_finished", Some("done"))
                );
                assert_eq!(
                    (now.handoff()["status"].as_str(), now.handoff()["summary"].as_str()),
                    (Some("done"), Some("s"))
                );
            }
            other => panic!("not one whole winner: {other:?} {} {}", cancel.text, report.text),
        }
    }
}

#[test]
fn a_close_racing_a_same_turn_final_report_has_one_whole_winner() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    for _ in 0..25 {
        let (id, machine, _) = c.create(&alice);
        let (close, report) = race(
            &c,
            (format!("/v1/handoffs/{id}/close"), alice.clone(), json!({})),
            (format!("/v1/handoffs/{id}/report"), machine.clone(), json!({"turn": 1, "status": "failed"})),
        );
        let now = c.get(&format!("/v1/handoffs/{id}"), &alice);
        assert_eq!(close.status, 200, "close is always accepted");
        assert_eq!(now.handoff()["state"], "closed");
        if report.status == 200 {
            // The report came first and ended the turn whole; the close then closed it.
            assert_eq!((now.version(), now.handoff()["status"].as_str()), (3, Some("failed")));
        } else {
            assert_eq!(
                (report.status, report.code(), report.handoff()["state"].as_str()),
                (409, "handoff.closed", Some("closed"))
            );
            assert_eq!((now.version(), now.handoff()["status"].as_str()), (2, Some("cancelled")));
        }
    }
}

#[test]
fn a_running_report_names_the_runtime_of_a_plain_turn_on_the_record_and_its_lineage_entry_once() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let before = open_turn(&c, &id, &alice, 1).version();
    let report = |runtime: &str| {
        c.post(
            &format!("/v1/handoffs/{id}/report"),
            &machine,
            json!({"turn": 2, "status": "running", "runtime": runtime}),
        )
    };
    let named = report("claude-code");
    assert_eq!(
        (named.status, named.version(), named.handoff()["runtime"].as_str()),
        (200, before + 1, Some("claude-code")),
        "{}",
        named.text
    );
    let again = report("claude-code");
    assert_eq!((again.status, again.version()), (200, before + 1), "the same runtime again moves nothing");
    let other = report("codex");
    assert_eq!((other.status, other.code()), (409, "handoff.turn_conflict"), "{}", other.text);
    assert_eq!(other.handoff()["runtime"], "claude-code");
    let on_done = c.post(
        &format!("/v1/handoffs/{id}/report"),
        &machine,
        json!({"turn": 2, "status": "done", "runtime": "claude-code"}),
    );
    assert_eq!((on_done.status, on_done.code()), (400, "request.invalid"), "{}", on_done.text);
    let turns = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    let entries = turns.body["turns"].as_array().unwrap_or_else(|| panic!("{}", turns.text));
    assert_eq!(
        entries.last().map(|t| (t["turn"].clone(), t["runtime"].clone())),
        Some((json!(2), json!("claude-code"))),
        "{}",
        turns.text
    );
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), before + 1, "nothing else moved");
}

#[test]
fn a_running_report_names_the_permission_mode_on_the_record_and_each_turn_keeps_its_own() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let report = |turn: u64, status: &str, mode: &str| {
        c.post(
            &format!("/v1/handoffs/{id}/report"),
            &machine,
            json!({"turn": turn, "status": status, "permission_mode": mode}),
        )
    };
    let created = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert!(created.handoff().get("permission_mode").is_none(), "absent until a report names one: {}", created.text);
    let named = report(1, "running", "acceptEdits");
    assert_eq!(
        (named.status, named.version(), named.handoff()["permission_mode"].as_str()),
        (200, created.version() + 1, Some("acceptEdits")),
        "{}",
        named.text
    );
    let again = report(1, "running", "acceptEdits");
    assert_eq!((again.status, again.version()), (200, named.version()), "the same mode again moves nothing");
    for (status, mode) in [("done", "plan"), ("running", "two words"), ("running", &"x".repeat(33))] {
        let refused = report(1, status, mode);
        assert_eq!((refused.status, refused.code()), (400, "request.invalid"), "{status} {mode}: {}", refused.text);
        assert!(
            refused.body["error"]["message"].as_str().is_some_and(|m| m.starts_with("permission_mode: ")),
            "{}",
            refused.text
        );
    }
    c.report(&id, &machine, 1, "done", None);
    let opened = open_turn(&c, &id, &alice, 1);
    assert!(
        opened.handoff().get("permission_mode").is_none(),
        "a new turn has no mode until a report names one: {}",
        opened.text
    );
    let two = report(2, "running", "plan");
    assert_eq!(two.handoff()["permission_mode"], "plan", "{}", two.text);
    let turns = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    let modes: Vec<serde_json::Value> = turns.body["turns"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", turns.text))
        .iter()
        .map(|t| t["permission_mode"].clone())
        .collect();
    assert_eq!(modes, [json!("acceptEdits"), json!("plan")], "each turn keeps its own mode: {}", turns.text);
}
