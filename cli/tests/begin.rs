//! `handoff create` names where and how turn 1 runs; a repeat prints the id alone and ends no
//! token; `handoff machine-token` mints the fresh one that ends the ones before it.

mod common;
use common::harness::*;
use common::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn create_names_workspace_runtime_model_and_permission_mode_and_a_repeat_prints_the_id_alone() {
    let owner = owner();
    let session = unique("session");
    let args = [
        "create",
        &session,
        "--machine",
        "m1",
        "--size",
        "large",
        "--workspace",
        "api",
        "--runtime",
        "claude-code",
        "--model",
        "opus",
        "--permission-mode",
        "acceptEdits",
    ];
    let first = ok(Some(&owner), &args);
    let mut lines = first.lines();
    let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    let (_, record) = api_get(&owner, &format!("/v1/handoffs/{id}"));
    let h = &record["handoff"];
    assert_eq!(
        (h["workspace"].as_str(), h["requested_runtime"].as_str(), h["model"].as_str()),
        (Some("api"), Some("claude-code"), Some("opus"))
    );
    assert_eq!(h["requested_permission_mode"], "acceptEdits");
    let again = ok(Some(&owner), &args);
    assert_eq!(again.lines().collect::<Vec<_>>(), [id.as_str()], "a repeat mints no token");
    assert_eq!(api_get(&token, &format!("/v1/handoffs/{id}")).0, 200, "and ends none");
    let other = run(Some(&owner), &["create", &session, "--machine", "m1", "--size", "large", "--model", "sonnet"]);
    assert_ne!(other.code, 0, "another model: a conflict");
    assert!(other.stderr.contains("handoff.conflict"), "{other:?}");
    let fresh = ok(Some(&owner), &["machine-token", &id]);
    let fresh = fresh.trim();
    assert!(!fresh.is_empty() && !fresh.contains('\n'), "the token alone: {fresh}");
    assert_eq!(api_get(fresh, &format!("/v1/handoffs/{id}")).0, 200);
    assert_eq!(api_get(&token, &format!("/v1/handoffs/{id}")).0, 401, "the fresh token ends the one before");
}

#[test]
fn serve_passes_the_records_model_to_the_real_claude_code() {
    let model = ScriptedModel::start(vec![Step::text("Served on the asked model.")]);
    let owner = owner();
    let out = ok(
        Some(&owner),
        &[
            "create",
            &unique("session"),
            "--machine",
            "m1",
            "--size",
            "large",
            "--prompt",
            "Say hello.",
            "--model",
            "claude-scripted-58",
        ],
    );
    let mut lines = out.lines();
    let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    let m = Machine::new(&id, &token, &model);
    let mut serve = m.handoff(&["serve", &id]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let done = eventually(
        "turn 1 is done",
        Duration::from_secs(60),
        || Some(record(&owner, &id)).filter(|r| r["status"] == "done"),
        || m.log(),
    );
    assert_eq!(done["summary"], "Served on the asked model.", "{done}");
    let asked: Vec<String> =
        model.requests().iter().filter_map(|r| r.body["model"].as_str().map(str::to_string)).collect();
    assert!(asked.iter().any(|name| name == "claude-scripted-58"), "the asked model reached the model: {asked:?}");
    ok(Some(&owner), &["close", &id]);
    let status = eventually("serve exits on close", Duration::from_secs(60), || serve.try_wait().unwrap(), || m.log());
    assert_eq!(status.code(), Some(0));
}
