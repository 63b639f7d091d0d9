//! Beginning a session from anywhere: the create carries where and how turn 1 runs,
//! and a repeated create ends no machine token, against the real local Worker.

use handoff_it::{owner, unique, Client};
use serde_json::json;

#[test]
fn a_create_carries_workspace_runtime_model_and_permission_mode_onto_the_record_and_turn_1() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let body = json!({"session": session, "machine": "m1", "size": "large", "prompt": "Say hello.",
        "workspace": "api", "runtime": "codex", "model": "gpt-5-codex", "requested_permission_mode": "untrusted"});
    let created = c.post("/v1/handoffs", &alice, body.clone());
    assert_eq!(created.status, 201, "{}", created.text);
    let h = created.handoff();
    assert_eq!(
        (h["workspace"].as_str(), h["requested_runtime"].as_str(), h["model"].as_str()),
        (Some("api"), Some("codex"), Some("gpt-5-codex"))
    );
    assert_eq!(h["requested_permission_mode"], "untrusted");
    assert!(h.get("permission_mode").is_none(), "the record's permission_mode stays the machine's to report");
    assert!(h["runtime"].is_null(), "the record's runtime stays the machine's to report");
    let id = h["id"].as_str().unwrap().to_string();
    let turns = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    let first = &turns.body["turns"][0];
    assert_eq!(
        (first["workspace"].as_str(), first["requested_runtime"].as_str(), first["model"].as_str()),
        (Some("api"), Some("codex"), Some("gpt-5-codex")),
        "turn 1's lineage entry shows them: {}",
        turns.text
    );
    assert_eq!(first["requested_permission_mode"], "untrusted");
    let machine = created.body["machine_token"].as_str().unwrap().to_string();
    let again = c.post("/v1/handoffs", &alice, body.clone());
    assert_eq!((again.status, again.version()), (200, 1), "the same values answer the hand-off: {}", again.text);
    let look_up = c.post("/v1/handoffs", &alice, json!({"session": session, "machine": "m1", "size": "large"}));
    assert_eq!(look_up.status, 200, "none named: a look-up: {}", look_up.text);
    for (field, value) in
        [("workspace", "web"), ("runtime", "claude-code"), ("model", "o3"), ("requested_permission_mode", "never")]
    {
        let mut other = body.clone();
        other[field] = json!(value);
        let a = c.post("/v1/handoffs", &alice, other);
        assert_eq!((a.status, a.code()), (409, "handoff.conflict"), "{field}: {}", a.text);
        assert_eq!(a.handoff()["model"], "gpt-5-codex", "{field}: the hand-off as it was");
    }
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &machine).version(), 1, "nothing moved, no token ended");
}

#[test]
fn a_bad_workspace_runtime_model_or_permission_mode_is_400_naming_its_field_and_nothing_is_created() {
    let c = Client::shared();
    let name = unique("alice");
    let alice = owner(&name);
    for (field, value) in [
        ("workspace", json!("a b")),
        ("runtime", json!("")),
        ("model", json!("m".repeat(129))),
        ("requested_permission_mode", json!(7)),
    ] {
        let session = unique("s");
        let mut body = json!({"session": session, "machine": "m1", "size": "large"});
        body[field] = value;
        let a = c.post("/v1/handoffs", &alice, body);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{field}: {}", a.text);
        assert!(a.text.contains(field), "{field} is named: {}", a.text);
        let id = handoff_api::input::handoff_id(&name, &session);
        assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).status, 404, "{field}: nothing was created");
    }
}
