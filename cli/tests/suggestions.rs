//! Suggestions: each reason is raised once per turn, waiters see it, and nothing switches by
//! itself. The owner's policy and the machine's usage are set through the binary.

mod common;
use common::*;
use serde_json::Value;

/// A hand-off whose owner can hand off to claude-code or codex, told at 80 % of the context
/// and at 5 requests of quota left, on a machine that reported both signed in.
fn with_policy() -> (String, String, String) {
    let owner = owner();
    let (id, machine) = create(&owner);
    let set = ok(
        Some(&owner),
        &[
            "policy",
            &id,
            "--runtime",
            "claude-code",
            "--runtime",
            "codex",
            "--context-threshold-pct",
            "80",
            "--quota-threshold",
            "5",
        ],
    );
    assert!(set.starts_with("policy set"), "{set}");
    let reported =
        ok(Some(&machine), &["runtimes", &id, "--runtime", "claude-code=signed-in", "--runtime", "codex=signed-in"]);
    assert!(reported.contains("runtime codex: signed in"), "{reported}");
    (owner, id, machine)
}

/// Nothing was acted on: still turn 1, no runtime, no package, one turn in the lineage.
fn assert_nothing_switched(owner: &str, id: &str) {
    let r = record(owner, id);
    assert_eq!(r["turn"], 1, "{r}");
    assert_eq!(r["runtime"], Value::Null, "{r}");
    assert_eq!(r["package_version"], Value::Null, "{r}");
    let lineage = run(Some(owner), &["turns", id, "--json"]).json();
    assert_eq!(lineage["turns"].as_array().map(Vec::len), Some(1), "{lineage}");
    let package = run(Some(owner), &["package", "show", id]);
    assert_eq!((package.code, package.stderr.split(':').next()), (1, Some("package.not_found")), "{package:?}");
}

fn suggestion(owner: &str, id: &str) -> Value {
    record(owner, id)["suggestion"].clone()
}

/// The machine's report on turn 1 with `status`, `summary` and the context it used of 100,000.
fn report_context(machine: &str, id: &str, status: &str, summary: &str, used: &str) -> String {
    let args = ["report", id, "--turn", "1", "--status", status, "--summary", summary, "--context-used", used];
    ok(Some(machine), &[&args[..], &["--context-window", "100000"]].concat())
}

#[test]
fn crossing_the_context_threshold_suggests_once_and_switches_nothing() {
    let (owner, id, machine) = with_policy();
    let v = version(&owner, &id);
    report_context(&machine, &id, "running", "working", "79000");
    assert_eq!(suggestion(&owner, &id), Value::Null, "79 % is below 80 %");

    let out = report_context(&machine, &id, "needs-you", "stuck", "85000");
    assert!(out.contains("suggestion (context-threshold): turn 1"), "{out}");
    let s = suggestion(&owner, &id);
    assert_eq!(s["reason"], "context-threshold");
    assert_eq!(s["turn"], 1);
    assert_eq!(s["runtimes"], serde_json::json!(["claude-code", "codex"]));
    assert!(s["command"].as_str().unwrap().starts_with(&format!("handoff turn {id} ")), "{s}");
    let raised = version(&owner, &id);
    assert!(raised > v + 1, "the suggestion moved the version");

    // The same state again, further over the threshold: not raised a second time.
    report_context(&machine, &id, "needs-you", "stuck", "95000");
    assert_eq!(version(&owner, &id), raised, "raised once per turn and reason");

    // show and wait print it (list: see below); nothing switched.
    assert!(ok(Some(&owner), &["show", &id]).contains("suggestion (context-threshold)"));
    let waited = ok(Some(&owner), &["wait", &id, "--after", &(raised - 1).to_string()]);
    assert!(waited.contains("suggestion (context-threshold)"), "{waited}");
    assert_nothing_switched(&owner, &id);
}

#[test]
fn a_turn_ending_on_a_provider_limit_suggests_once_and_the_next_turn_clears_it() {
    let (owner, id, machine) = with_policy();
    let mut watch = Follower::start(&owner, &["wait", &id, "--follow"]);
    watch.expect(&format!("v{} ", version(&owner, &id)));
    let end = ["report", &id, "--turn", "1", "--status", "failed", "--summary", "rate limited", "--provider-limit"];
    let out = ok(Some(&machine), &end);
    assert!(out.contains("suggestion (provider-limit): turn 1"), "{out}");
    watch.expect("suggestion (provider-limit): turn 1");
    let raised = version(&owner, &id);
    // The reporter retries its final report: accepted, and nothing is raised again.
    ok(Some(&machine), &end);
    assert_eq!(version(&owner, &id), raised);
    assert_nothing_switched(&owner, &id);
    assert_eq!(record(&owner, &id)["status"], "failed");

    // Only the owner acts; the next turn opens with no suggestion.
    ok(Some(&owner), &["turn", &id]);
    assert_eq!(suggestion(&owner, &id), Value::Null);
}

#[test]
fn quota_at_or_below_its_threshold_suggests_once() {
    let (owner, id, machine) = with_policy();
    ok(
        Some(&machine),
        &["report", &id, "--turn", "1", "--status", "running", "--summary", "a", "--quota-remaining", "6"],
    );
    assert_eq!(suggestion(&owner, &id), Value::Null, "6 is above 5");
    let out = ok(
        Some(&machine),
        &["report", &id, "--turn", "1", "--status", "running", "--summary", "b", "--quota-remaining", "5"],
    );
    assert!(out.contains("suggestion (quota-threshold): turn 1"), "{out}");
    let raised = version(&owner, &id);
    ok(
        Some(&machine),
        &["report", &id, "--turn", "1", "--status", "running", "--summary", "b", "--quota-remaining", "2"],
    );
    assert_eq!(version(&owner, &id), raised, "raised once per turn and reason");
    assert_eq!(suggestion(&owner, &id)["reason"], "quota-threshold");
    assert_nothing_switched(&owner, &id);
}

#[test]
fn without_a_policy_nothing_is_suggested() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let out = ok(
        Some(&machine),
        &[
            "report",
            &id,
            "--turn",
            "1",
            "--status",
            "done",
            "--context-used",
            "99",
            "--context-window",
            "100",
            "--quota-remaining",
            "0",
            "--provider-limit",
        ],
    );
    assert!(!out.contains("suggestion"), "{out}");
    assert_eq!(suggestion(&owner, &id), Value::Null);
}

/// The list prints a suggestion under its row. The rows come from the owner's index, so this
/// needs the index row to carry the record's `suggestion` (issue 6: "show, list and wait
/// --follow print a suggestion where there is one").
#[test]
fn list_prints_a_suggestion_under_its_row() {
    let (owner, id, machine) = with_policy();
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "running", "--quota-remaining", "1"]);
    assert_eq!(suggestion(&owner, &id)["reason"], "quota-threshold");
    let listed = ok(Some(&owner), &["list"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].starts_with(&id), "{listed}");
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("  suggestion (quota-threshold): turn 1")),
        "the row's suggestion is printed: {listed}"
    );
}
