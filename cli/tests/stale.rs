//! A machine reporter retries: a late turn-1 report must never touch turn 2.

mod common;
use common::*;

#[test]
fn a_retried_stale_report_exits_1_with_handoff_stale_and_changes_nothing() {
    let owner = owner();
    let (id, machine) = create(&owner);
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "first turn done"]);
    ok(Some(&owner), &["turn", &id]);
    let before = record(&owner, &id);
    assert_eq!((before["turn"].as_u64(), before["version"].as_u64()), (Some(2), Some(3)));

    // The reporter, restarted, sends its last turn-1 report again (a new process, a new key).
    let late = run(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "first turn done"]);
    assert_eq!(late.code, 1, "{late:?}");
    assert_eq!(late.stderr.trim(), "handoff.stale: turn 2 is current (version 3)");
    assert!(late.stdout.is_empty(), "{late:?}");

    // With --json it prints the API's refusal, which carries the hand-off as it stands.
    let late = run(Some(&machine), &["report", &id, "--turn", "1", "--status", "needs-you", "--json"]);
    assert_eq!(late.code, 1, "{late:?}");
    let body = late.json();
    assert_eq!(body["error"]["code"], "handoff.stale");
    assert_eq!(body["handoff"]["turn"], 2);

    assert_eq!(record(&owner, &id), before, "the stale reports changed nothing");
}

#[test]
fn a_retry_with_the_same_idempotency_key_gets_the_first_answer_back() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let key = unique("key");
    let args = ["report", &id, "--turn", "1", "--status", "done", "--idempotency-key", &key, "--json"];
    let first = run(Some(&machine), &args);
    assert_eq!(first.code, 0, "{first:?}");
    ok(Some(&owner), &["turn", &id]);
    // The answer to the first try was lost; the reporter sends the same request with the
    // same key after turn 2 opened, and is answered as the first time, changing nothing.
    let again = run(Some(&machine), &args);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(again.json(), first.json());
    assert_eq!(version(&owner, &id), 3);
    // The same key with another body is refused.
    let other = run(Some(&machine), &["report", &id, "--turn", "1", "--status", "failed", "--idempotency-key", &key]);
    assert_eq!(other.code, 1, "{other:?}");
    assert!(other.stderr.starts_with("idempotency.mismatch"), "{other:?}");
}
