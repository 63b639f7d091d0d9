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
    let policy = c.put(
        &path("/policy"),
        &alice,
        json!({"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80, "quota_threshold": 10}),
    );
    assert_eq!(policy.status, 200, "{}", policy.text);
    let not_reported = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 1, "status": "running", "usage": {"context_used": 190000, "context_window": 200000}}),
    );
    assert!(not_reported.handoff()["suggestion"].is_null(), "a machine that reported no runtimes has none available");
    let both = json!({"runtimes": [{"name": "claude-code", "signed_in": true}, {"name": "codex", "signed_in": true}]});
    let v = c.put(&path("/runtimes"), &machine, both).version();

    let raised = c.post(&path("/report"), &machine, hot.clone());
    let s = &raised.handoff()["suggestion"];
    assert_eq!((s["reason"].as_str(), s["turn"].as_u64()), (Some("context-threshold"), Some(1)));
    assert_eq!(s["runtimes"], json!(["claude-code", "codex"]));
    assert!(s["command"].as_str().unwrap().starts_with(&format!("handoff turn {id}")));
    assert_eq!(raised.version(), v + 1, "a suggestion is a version move, so waiters see it");
    assert_eq!(c.post(&path("/report"), &machine, hot).version(), v + 1, "raised once per turn and reason");

    let quota =
        c.post(&path("/report"), &machine, json!({"turn": 1, "status": "running", "usage": {"quota_remaining": 3}}));
    assert_eq!(quota.handoff()["suggestion"]["reason"], "quota-threshold");
    let capped = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 1, "status": "failed", "usage": {"limit": "provider-limit"}}),
    );
    assert_eq!(capped.handoff()["suggestion"]["reason"], "provider-limit");
    let now = c.get(&path(""), &alice);
    assert_eq!(
        (now.handoff()["turn"].as_u64(), now.handoff()["runtime"].clone()),
        (Some(1), serde_json::Value::Null),
        "nothing switched by itself"
    );

    let next = c.post(&path("/turns"), &alice, json!({"after": 1}));
    assert!(next.handoff()["suggestion"].is_null(), "cleared when the next turn opens");
    let again = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 2, "status": "running", "usage": {"context_used": 90, "context_window": 100}}),
    );
    assert_eq!(again.handoff()["suggestion"]["turn"], 2, "a new turn may raise it again");
}

#[test]
fn no_eligible_runtime_means_no_suggestion() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    c.put(
        &format!("/v1/handoffs/{id}/work"),
        &alice,
        json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []}),
    );
    c.post(
        &format!("/v1/handoffs/{id}/turns"),
        &alice,
        json!({"after": 1, "handoff": {"runtime": "codex", "objective": "o", "purpose": "p"}}),
    );
    c.put(&format!("/v1/handoffs/{id}/policy"), &alice, json!({"runtimes": ["codex"], "context_threshold_pct": 50}));
    c.put(
        &format!("/v1/handoffs/{id}/runtimes"),
        &machine,
        json!({"runtimes": [{"name": "codex", "signed_in": true}]}),
    );
    let hot = c.post(
        &format!("/v1/handoffs/{id}/report"),
        &machine,
        json!({"turn": 2, "status": "running", "usage": {"context_used": 99, "context_window": 100}}),
    );
    assert_eq!(hot.status, 200, "{}", hot.text);
    assert!(hot.handoff()["suggestion"].is_null(), "the current turn's runtime is not eligible");
    let bad =
        c.put(&format!("/v1/handoffs/{id}/policy"), &alice, json!({"runtimes": [], "context_threshold_pct": 100}));
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));
    let by_machine =
        c.put(&format!("/v1/handoffs/{id}/policy"), &machine, json!({"runtimes": [], "context_threshold_pct": 50}));
    assert_eq!(by_machine.status, 403);
}

/// `PUT …/runtimes` (issue 14): what the machine reported decides what is suggested, and a
/// hand-off to a runtime it reported absent or signed out is refused with the hand-off.
#[test]
fn suggestions_and_handoffs_follow_the_runtimes_the_machine_reported() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let path = |rest: &str| format!("/v1/handoffs/{id}{rest}");
    c.put(
        &path("/policy"),
        &alice,
        json!({"runtimes": ["claude-code", "codex", "gemini"], "context_threshold_pct": 80}),
    );
    let report = json!({"runtimes": [
        {"name": "claude-code", "version": "2.1.3 (Claude Code)", "signed_in": true},
        {"name": "codex", "version": "codex-cli 0.50.0", "signed_in": false},
        {"name": "aider", "signed_in": null},
    ]});
    let by_owner = c.put(&path("/runtimes"), &alice, report.clone());
    assert_eq!((by_owner.status, by_owner.code()), (403, "auth.forbidden"), "only the machine reports what it has");
    let bad = c.put(&path("/runtimes"), &machine, json!({"runtimes": [{"name": "codex"}, {"name": "codex"}]}));
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));
    let before = c.get(&path(""), &alice).version();
    let put = c.put(&path("/runtimes"), &machine, report);
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.version(), before + 1, "a report is a version move");
    let shown = &put.handoff()["machine_runtimes"];
    assert_eq!(shown["runtimes"][1], json!({"name": "codex", "version": "codex-cli 0.50.0", "signed_in": false}));
    assert!(shown["reported_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{shown}");
    assert_eq!(c.get(&path(""), &alice).handoff()["machine_runtimes"], *shown, "the record shows it");

    let hot = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 1, "status": "done", "usage": {"context_used": 90, "context_window": 100}}),
    );
    assert_eq!(
        hot.handoff()["suggestion"]["runtimes"],
        json!(["claude-code"]),
        "codex is signed out and gemini absent"
    );

    c.put(&path("/work"), &alice, json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []}));
    let v = c.get(&path(""), &alice).version();
    for (runtime, why) in [("codex", "reported signed out"), ("gemini", "not in the report")] {
        let refused = c.post(
            &path("/turns"),
            &alice,
            json!({"after": 1, "handoff": {"runtime": runtime, "objective": "o", "purpose": "p"}}),
        );
        assert_eq!(
            (refused.status, refused.code()),
            (409, "runtime.unavailable"),
            "{runtime}: {why}: {}",
            refused.text
        );
        assert_eq!(refused.handoff()["version"], v, "the refusal carries the hand-off, unchanged");
        assert_eq!(refused.handoff()["turn"], 1);
    }
    let unchecked = c.post(
        &path("/turns"),
        &alice,
        json!({"after": 1, "handoff": {"runtime": "aider", "objective": "o", "purpose": "p"}}),
    );
    assert_eq!(unchecked.status, 200, "a runtime whose sign-in was not checked may be handed to: {}", unchecked.text);
    assert_eq!(unchecked.handoff()["runtime"], "aider");

    let closed = c.post(&path("/close"), &alice, json!({}));
    assert_eq!(closed.status, 200);
    let after_close = c.put(&path("/runtimes"), &machine, json!({"runtimes": []}));
    assert_eq!((after_close.status, after_close.code()), (409, "handoff.closed"));
}

/// A machine that never reported may be handed any runtime (an orchestrator with machines of
/// its own), but is offered none.
#[test]
fn a_machine_that_never_reported_is_offered_nothing_and_refused_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let path = |rest: &str| format!("/v1/handoffs/{id}{rest}");
    c.put(&path("/policy"), &alice, json!({"runtimes": ["claude-code", "codex"], "context_threshold_pct": 50}));
    let hot = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 1, "status": "done", "usage": {"context_used": 99, "context_window": 100}}),
    );
    assert!(hot.handoff()["suggestion"].is_null(), "{}", hot.text);
    c.put(&path("/work"), &alice, json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []}));
    let handed = c.post(
        &path("/turns"),
        &alice,
        json!({"after": 1, "handoff": {"runtime": "anything", "objective": "o", "purpose": "p"}}),
    );
    assert_eq!(handed.status, 200, "{}", handed.text);
}

/// A report older than the freshness window (sent late, it says when the machine looked)
/// makes nothing available and refuses nothing.
#[test]
fn a_stale_runtimes_report_offers_nothing_and_refuses_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let path = |rest: &str| format!("/v1/handoffs/{id}{rest}");
    c.put(&path("/policy"), &alice, json!({"runtimes": ["claude-code", "codex"], "context_threshold_pct": 50}));
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let looked = handoff_core::time::rfc3339(now_ms - handoff_core::limits::RUNTIMES_FRESH_MS - 60_000);
    let stale = json!({"runtimes": [{"name": "claude-code", "signed_in": true}, {"name": "codex", "signed_in": false}], "checked_at": looked});
    let put = c.put(&path("/runtimes"), &machine, stale);
    assert_eq!(put.handoff()["machine_runtimes"]["reported_at"], looked, "it counts from when the machine looked");
    let hot = c.post(
        &path("/report"),
        &machine,
        json!({"turn": 1, "status": "done", "usage": {"context_used": 99, "context_window": 100}}),
    );
    assert!(hot.handoff()["suggestion"].is_null(), "a stale report makes nothing available: {}", hot.text);
    c.put(&path("/work"), &alice, json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []}));
    let handed = c.post(
        &path("/turns"),
        &alice,
        json!({"after": 1, "handoff": {"runtime": "codex", "objective": "o", "purpose": "p"}}),
    );
    assert_eq!(handed.status, 200, "a stale signed-out report refuses nothing: {}", handed.text);
    let future = c.put(&path("/runtimes"), &machine, json!({"runtimes": [], "checked_at": "tomorrow"}));
    assert_eq!((future.status, future.code()), (400, "request.invalid"));
}
