//! Every outcome a turn keeps: a done report's whole reply, the turn's summary, its
//! questions with their answers, and the sync mode it ran in, on the record and on the lineage
//! that `GET …/turns` pages, against the real local Worker.

use handoff_it::{owner, unique, Answer, Client};
use serde_json::{json, Value};

fn report(c: &Client, id: &str, machine: &str, body: Value) -> Answer {
    c.post(&format!("/v1/handoffs/{id}/report"), machine, body)
}

fn turns(c: &Client, id: &str, token: &str) -> Vec<Value> {
    let a = c.get(&format!("/v1/handoffs/{id}/turns"), token);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["turns"].as_array().unwrap().clone()
}

#[test]
fn a_turns_reply_summary_and_questions_with_their_answers_are_on_the_lineage_for_every_page() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let running = report(&c, &id, &machine, json!({"turn": 1, "status": "running", "sync_mode": "messages"}));
    assert_eq!(running.handoff()["sync_mode"], "messages", "{}", running.text);
    let question = json!({"kind": "permission", "text": "Run cargo test?", "input": "cargo test", "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]});
    let asked =
        report(&c, &id, &machine, json!({"turn": 1, "status": "needs-you", "summary": "May I?", "question": question}));
    assert_eq!(asked.status, 200, "{}", asked.text);
    let q = asked.handoff()["question"]["id"].as_str().unwrap().to_string();
    let answered = c.post(&format!("/v1/handoffs/{id}/answer"), &alice, json!({"question": q, "option": "allow"}));
    assert_eq!(answered.status, 200, "{}", answered.text);
    let reply = "All tests pass.\n\n- `parse` keeps the old API\n- 12 tests added";
    let done =
        report(&c, &id, &machine, json!({"turn": 1, "status": "done", "summary": "All tests pass.", "reply": reply}));
    assert_eq!((done.status, done.handoff()["reply"].as_str()), (200, Some(reply)), "{}", done.text);

    // A reload, a second tab or another device: every outcome, from the lineage alone.
    for token in [&alice, &machine] {
        let entry = &turns(&c, &id, token)[0];
        assert_eq!((entry["reply"].as_str(), entry["summary"].as_str()), (Some(reply), Some("All tests pass.")));
        assert_eq!(entry["sync_mode"], "messages");
        let questions = entry["questions"].as_array().unwrap();
        assert_eq!(questions.len(), 1, "{entry}");
        assert_eq!(
            (questions[0]["id"].as_str(), questions[0]["input"].as_str()),
            (Some(q.as_str()), Some("cargo test"))
        );
        assert_eq!(questions[0]["answer"]["option"], "allow");
    }
    // The next turn starts with none of it on the record; the lineage keeps turn 1's.
    let t2 = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1}));
    assert!(t2.handoff().get("reply").is_none() && t2.handoff().get("sync_mode").is_none(), "{}", t2.text);
    let lineage = turns(&c, &id, &alice);
    assert_eq!((lineage[0]["reply"].as_str(), lineage[1]["reply"].clone()), (Some(reply), Value::Null));
    assert_eq!(lineage[1]["questions"], json!([]));
}

#[test]
fn the_reply_is_part_of_what_makes_a_final_report_a_repeat() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let body = json!({"turn": 1, "status": "done", "summary": "done", "reply": "The whole answer."});
    let first = report(&c, &id, &machine, body.clone());
    assert_eq!(first.status, 200, "{}", first.text);
    let again = report(&c, &id, &machine, body);
    assert_eq!((again.status, again.version()), (200, first.version()), "the same report again moves nothing");
    let other =
        report(&c, &id, &machine, json!({"turn": 1, "status": "done", "summary": "done", "reply": "Another answer."}));
    assert_eq!((other.status, other.code()), (409, "handoff.turn_finished"), "{}", other.text);
    let none = report(&c, &id, &machine, json!({"turn": 1, "status": "done", "summary": "done"}));
    assert_eq!(none.code(), "handoff.turn_finished", "a done without the reply is another report");
}

#[test]
fn a_reply_is_a_done_reports_and_a_sync_mode_a_running_ones_within_their_rules() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    for (body, field) in [
        (json!({"turn": 1, "status": "running", "reply": "x"}), "reply"),
        (json!({"turn": 1, "status": "done", "sync_mode": "full"}), "sync_mode"),
        (json!({"turn": 1, "status": "running", "sync_mode": "everything"}), "sync_mode"),
        (json!({"turn": 1, "status": "done", "reply": "a\u{1b}[2Jb"}), "reply"),
        (json!({"turn": 1, "status": "done", "reply": "x".repeat(64 * 1024 + 1)}), "reply"),
    ] {
        let a = report(&c, &id, &machine, body);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{field}: {}", a.text);
        assert!(a.body["error"]["message"].as_str().unwrap().starts_with(field), "{}", a.text);
    }
    // The longest reply, every byte escaped, fits the report route's cap.
    let longest = "\"".repeat(64 * 1024);
    let a = report(&c, &id, &machine, json!({"turn": 1, "status": "done", "summary": "done", "reply": longest}));
    assert_eq!(
        (a.status, a.handoff()["reply"].as_str().map(str::len)),
        (200, Some(64 * 1024)),
        "{}",
        &a.text[..200.min(a.text.len())]
    );
    let entry = &turns(&c, &id, &alice)[0];
    assert_eq!(entry["reply"].as_str().map(str::len), Some(64 * 1024));
}

#[test]
fn a_new_sync_mode_moves_the_version_once_and_the_same_one_again_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let metadata = report(&c, &id, &machine, json!({"turn": 1, "status": "running", "sync_mode": "metadata"}));
    let again = report(&c, &id, &machine, json!({"turn": 1, "status": "running", "sync_mode": "metadata"}));
    assert_eq!(again.version(), metadata.version());
    let full = report(&c, &id, &machine, json!({"turn": 1, "status": "running", "sync_mode": "full"}));
    assert_eq!((full.version(), full.handoff()["sync_mode"].as_str()), (metadata.version() + 1, Some("full")));
    assert_eq!(turns(&c, &id, &alice)[0]["sync_mode"], "full");
}
