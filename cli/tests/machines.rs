//! `handoff machine enrol` and `handoff machine approve`, as separate processes against the
//! real local Worker: the machine prints its code on a line of its own, the owner approves it
//! with no terminal (nothing asked), and the machine keeps its credential 0600 in its state
//! folder; without a terminal `--owner` is required, and an approval by anyone else is refused.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

/// A fresh owner: its subject and its token.
fn subject_and_token() -> (String, String) {
    let subject = unique("owner");
    let token = ok(None, &["token", "--owner", &subject]).trim().to_string();
    (subject, token)
}

fn state_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique("enrol-state"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_machine_enrols_by_a_code_its_owner_approves_without_a_terminal_and_keeps_its_credential_0600() {
    let (subject, token) = subject_and_token();
    let (state, name) = (state_dir(), unique("vm"));
    let (child, code, rest) = start_enrol(&state, &name, &subject);
    let approved = run(Some(&token), &["machine", "approve", &code.to_lowercase()]);
    assert_eq!(approved.code, 0, "{approved:?}");
    assert!(approved.stderr.contains(&format!("machine: {name}")), "{approved:?}");
    assert!(approved.stderr.contains("host: "), "{approved:?}");
    assert!(approved.stderr.contains("key fingerprint: SHA256:"), "{approved:?}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(rest.join().unwrap().starts_with(&format!("enrolled: {name} for {subject}")));
    let file = state.join("machine").join("credential.json");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!((stored["name"].as_str(), stored["owner"].as_str()), (Some(&*name), Some(&*subject)));
    let (status, machines) = api_get(&token, "/v1/machines");
    assert_eq!((status, machines["machines"][0]["name"].as_str()), (200, Some(&*name)));
    let _ = std::fs::remove_dir_all(state);
}

#[test]
fn without_a_terminal_enrol_needs_the_owner_it_accepts() {
    let r = run(None, &["machine", "enrol", "--name", "vm-x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--owner"), "{r:?}");
}

#[test]
fn an_approval_by_an_owner_the_machine_did_not_expect_is_refused_and_nothing_is_kept() {
    let (subject, _) = subject_and_token();
    let (_, mallory) = subject_and_token();
    let (state, name) = (state_dir(), unique("vm"));
    let (child, code, _rest) = start_enrol(&state, &name, &subject);
    assert_eq!(run(Some(&mallory), &["machine", "approve", &code]).code, 0);
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected another owner"), "{out:?}");
    assert!(!state.join("machine").join("credential.json").exists());
    let _ = std::fs::remove_dir_all(state);
}
