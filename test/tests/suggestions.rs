//! Suggestions (issue 6, server side): raised once per turn and reason, as a version move
//! that waiters see, cleared when the next turn opens, and never acted on.

use handoff_it::{owner, unique, Client};
use serde_json::json;

#[test]
fn each_suggestion_reason_is_raised_once_and_never_acted_on() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let path = |rest: &str| format!("/v1/handoffs/{id}{rest}");
    let hot = json!({"turn": 1, "status": "running", "usage": {"context_used": 170000, "context_window": 200000}});
    let no_policy = c.post(&path("/report"), &machine, hot.clone());
    assert!(no_policy.handoff()["suggestion"].is_null(), "without a policy nothing is suggested");
    let policy = c.put(&path("/policy"), &alice, json!({"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80, "quota_threshold": 10}));
    assert_eq!(policy.status, 200, "{}", policy.text);
    let v = policy.version();

    let raised = c.post(&path("/report"), &machine, hot.clone());
    let s = &raised.handoff()["suggestion"];
    assert_eq!((s["reason"].as_str(), s["turn"].as_u64()), (Some("context-threshold"), Some(1)));
    assert_eq!(s["runtimes"], json!(["claude-code", "codex"]));
    assert!(s["command"].as_str().unwrap().starts_with(&format!("handoff turn {id}")));
    assert_eq!(raised.version(), v + 1, "a suggestion is a version move, so waiters see it");
    assert_eq!(c.post(&path("/report"), &machine, hot).version(), v + 1, "raised once per turn and reason");

    let quota = c.post(&path("/report"), &machine, json!({"turn": 1, "status": "running", "usage": {"quota_remaining": 3}}));
    assert_eq!(quota.handoff()["suggestion"]["reason"], "quota-threshold");
    let capped = c.post(&path("/report"), &machine, json!({"turn": 1, "status": "failed", "usage": {"limit": "provider-limit"}}));
    assert_eq!(capped.handoff()["suggestion"]["reason"], "provider-limit");
    let now = c.get(&path(""), &alice);
    assert_eq!((now.handoff()["turn"].as_u64(), now.handoff()["runtime"].clone()), (Some(1), serde_json::Value::Null), "nothing switched by itself");

    let next = c.post(&path("/turns"), &alice, json!({"after": 1}));
    assert!(next.handoff()["suggestion"].is_null(), "cleared when the next turn opens");
    let again = c.post(&path("/report"), &machine, json!({"turn": 2, "status": "running", "usage": {"context_used": 90, "context_window": 100}}));
    assert_eq!(again.handoff()["suggestion"]["turn"], 2, "a new turn may raise it again");
}

#[test]
fn no_eligible_runtime_means_no_suggestion() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    c.put(&format!("/v1/handoffs/{id}/work"), &alice, json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []}));
    c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1, "handoff": {"runtime": "codex", "objective": "o", "purpose": "p"}}));
    c.put(&format!("/v1/handoffs/{id}/policy"), &alice, json!({"runtimes": ["codex"], "context_threshold_pct": 50}));
    let hot = c.post(&format!("/v1/handoffs/{id}/report"), &machine, json!({"turn": 2, "status": "running", "usage": {"context_used": 99, "context_window": 100}}));
    assert_eq!(hot.status, 200, "{}", hot.text);
    assert!(hot.handoff()["suggestion"].is_null(), "the current turn's runtime is not eligible");
    let bad = c.put(&format!("/v1/handoffs/{id}/policy"), &alice, json!({"runtimes": [], "context_threshold_pct": 100}));
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));
    let by_machine = c.put(&format!("/v1/handoffs/{id}/policy"), &machine, json!({"runtimes": [], "context_threshold_pct": 50}));
    assert_eq!(by_machine.status, 403);
}
