//! `--json` prints the API's JSON, unchanged: what the binary prints parses to exactly what
//! the API answers to a direct request.

mod common;
use common::*;
use serde_json::Value;

#[test]
fn json_output_parses_as_the_apis_json() {
    let owner = owner();
    let session = unique("session");
    let created = run(Some(&owner), &["create", &session, "--machine", "m1", "--size", "large", "--json"]);
    assert_eq!(created.code, 0, "{created:?}");
    let created = created.json();
    let id = created["handoff"]["id"].as_str().unwrap().to_string();
    let machine = created["machine_token"].as_str().unwrap().to_string();

    let (status, direct) = api_get(&owner, &format!("/v1/handoffs/{id}"));
    assert_eq!(status, 200);
    assert_eq!(direct["handoff"], created["handoff"]);
    assert_eq!(run(Some(&owner), &["show", &id, "--json"]).json(), direct);
    // The record lists the caller's own actions, so the machine's is its own direct read.
    assert_eq!(
        run(Some(&machine), &["show", &id, "--json"]).json(),
        api_get(&machine, &format!("/v1/handoffs/{id}")).1
    );
    assert_eq!(run(Some(&owner), &["wait", &id, "--after", "0", "--json"]).json(), direct);

    let reported = run(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--json"]);
    let reported = reported.json();
    assert_eq!(reported, api_get(&machine, &format!("/v1/handoffs/{id}")).1);

    // The list, every page of it, as one {"handoffs": [...]} of the API's rows.
    let listed = run(Some(&owner), &["list", "--json"]).json();
    let (_, page) = api_get(&owner, "/v1/handoffs");
    assert_eq!(listed["handoffs"], page["handoffs"]);

    // The lineage, as the API lists it.
    let turns = run(Some(&owner), &["turns", &id, "--json"]).json();
    assert_eq!(turns, api_get(&owner, &format!("/v1/handoffs/{id}/turns")).1);

    // A refusal: the API's error body on stdout, exit 1.
    let refused = run(Some(&owner), &["cancel", &id, "--json"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    let body = refused.json();
    assert_eq!(body["error"]["code"], "handoff.turn_finished");
    assert_eq!(body["handoff"], api_get(&owner, &format!("/v1/handoffs/{id}")).1["handoff"]);
    assert!(matches!(body["error"]["message"], Value::String(_)));

    // A token is JSON too.
    let t = run(None, &["token", "--owner", "alice", "--json"]).json();
    assert!(t["token"].as_str().unwrap().split('.').count() == 3);
}
