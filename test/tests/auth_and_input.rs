//! Authentication and bad input (issue 2): every refusal is a typed 4xx and changes nothing.

use handoff_api::token::{mint, Claims, Role};
use handoff_it::{key, now_s, owner, unique, Client};
use serde_json::json;

fn token(claims: Claims, signing_key: &[u8]) -> String {
    mint(&claims, signing_key)
}

#[test]
fn an_unsigned_request_is_401_auth_required_with_www_authenticate() {
    let c = Client::shared();
    for (method, path) in [("GET", "/v1/handoffs"), ("POST", "/v1/handoffs"), ("GET", "/v1/handoffs/ho_00000000000000000000000000000000/wait")] {
        let a = c.send(method, path, None, &[], None);
        assert_eq!((a.status, a.code()), (401, "auth.required"), "{method} {path}");
        assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"));
    }
}

#[test]
fn an_expired_forged_or_malformed_token_is_401_auth_invalid() {
    let c = Client::shared();
    let expired = token(Claims { sub: "alice".into(), role: Role::Owner, hid: None, exp: now_s() - 61, nbf: None, inc: None }, &key());
    let wrong_key = token(Claims { sub: "alice".into(), role: Role::Owner, hid: None, exp: now_s() + 60, nbf: None, inc: None }, b"not-the-key");
    for bad in [expired.as_str(), wrong_key.as_str(), "not.a.jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."] {
        let a = c.get("/v1/handoffs", bad);
        assert_eq!((a.status, a.code()), (401, "auth.invalid"), "{bad}");
        assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"));
    }
    let basic = c.send("GET", "/v1/handoffs", None, &[("Authorization", "Basic YTpi")], None);
    assert_eq!((basic.status, basic.code()), (401, "auth.invalid"));
}

#[test]
fn a_machine_token_without_the_life_of_its_hand_off_is_401_auth_invalid_and_changes_nothing() {
    // Bound to no life (no `inc`), it would act on the hand-off after an erasure and a re-create.
    let c = Client::shared();
    let name = unique("alice");
    let alice = owner(&name);
    let (id, _, _) = c.create(&alice);
    let lifeless = token(Claims { sub: name, role: Role::Machine, hid: Some(id.clone()), exp: now_s() + 600, nbf: None, inc: None }, &key());
    let a = c.report(&id, &lifeless, 1, "done", Some("should not land"));
    assert_eq!((a.status, a.code()), (401, "auth.invalid"), "{}", a.text);
    assert!(a.text.contains("(inc)"), "the refusal says what is missing: {}", a.text);
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1, "nothing changed");
}

#[test]
fn a_token_of_the_wrong_role_is_403_and_another_owners_hand_off_is_404() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let bob = owner(&unique("bob"));
    let (id, machine, _) = c.create(&alice);
    let as_machine = c.post("/v1/handoffs", &machine, json!({"session": "x", "machine": "m", "size": "s"}));
    assert_eq!((as_machine.status, as_machine.code()), (403, "auth.forbidden"));
    let owner_reports = c.report(&id, &alice, 1, "done", None);
    assert_eq!((owner_reports.status, owner_reports.code()), (403, "auth.forbidden"));
    let foreign = c.get(&format!("/v1/handoffs/{id}"), &bob);
    assert_eq!((foreign.status, foreign.code()), (404, "handoff.not_found"));
    assert!(foreign.handoff().is_null(), "never reveal the hand-off");
    let foreign_close = c.post(&format!("/v1/handoffs/{id}/close"), &bob, json!({}));
    assert_eq!((foreign_close.status, foreign_close.code()), (404, "handoff.not_found"));
    let (other, other_machine, _) = c.create(&alice);
    let crossed = c.report(&id, &other_machine, 1, "done", None);
    assert_eq!((crossed.status, crossed.code()), (404, "handoff.not_found"), "a machine token for another hand-off");
    let unknown = c.get("/v1/handoffs/ho_00000000000000000000000000000000", &alice);
    assert_eq!((unknown.status, unknown.code()), (404, "handoff.not_found"));
    let _ = other;
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1, "nothing changed");
}

#[test]
fn bad_input_is_a_typed_4xx_naming_the_field_and_changes_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let report = format!("/v1/handoffs/{id}/report");
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{", "body"),
        (br#"{"turn":"1","status":"done"}"#, "turn"),
        (br#"{"turn":1,"status":"finished"}"#, "status"),
        (br#"{"turn":1,"status":"done","colour":"red"}"#, "colour"),
        (br#"{"turn":-1,"status":"done"}"#, "turn"),
        (br#"{"status":"done"}"#, "turn"),
    ];
    for (body, field) in cases {
        let a = c.send("POST", &report, Some(&machine), &[], Some(body));
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{}", String::from_utf8_lossy(body));
        assert!(a.body["error"]["message"].as_str().unwrap().contains(field), "{} names {field}", a.text);
    }
    let long_summary = json!({"turn": 1, "status": "done", "summary": "x".repeat(4097)});
    let a = c.post(&report, &machine, long_summary);
    assert_eq!((a.status, a.code()), (400, "request.invalid"));
    let huge = vec![b' '; handoff_core::limits::WORDS_BODY_BYTES_MAX + 1];
    let a = c.send("POST", &report, Some(&machine), &[], Some(&huge));
    assert_eq!((a.status, a.code()), (413, "request.too_large"));
    for (field, value) in [("session", "a/b"), ("machine", ""), ("size", &"s".repeat(129)[..])] {
        let mut body = json!({"session": unique("s"), "machine": "m", "size": "s"});
        body[field] = json!(value);
        let a = c.post("/v1/handoffs", &alice, body);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{field}");
        assert!(a.text.contains(field));
    }
    let timeout = c.get(&format!("/v1/handoffs/{id}/wait?timeout=301"), &alice);
    assert_eq!((timeout.status, timeout.code()), (400, "request.invalid"));
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1, "nothing changed");
}

#[test]
fn an_unknown_route_is_404_and_a_wrong_method_is_405() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let a = c.get("/v1/nothing-here", &alice);
    assert_eq!((a.status, a.code()), (404, "route.not_found"));
    let a = c.send("DELETE", "/v1/handoffs", Some(&alice), &[], None);
    assert_eq!((a.status, a.code()), (405, "request.method_not_allowed"));
    let a = c.send("GET", "/v1/handoffs/ho_00000000000000000000000000000000/report", Some(&alice), &[], None);
    assert_eq!((a.status, a.allow.as_deref()), (405, Some("POST")), "a 405 names what is allowed");
    // A method the runtime's Request type does not know must not be read as GET.
    let (id, _, _) = c.create(&alice);
    for method in ["QUERY", "PROPFIND"] {
        let answer = raw_request(&c, method, &format!("/v1/handoffs/{id}"), &alice);
        assert!(answer.starts_with("HTTP/1.1 405"), "{method}: {answer}");
        assert!(answer.to_ascii_lowercase().contains("\r\nallow: get, delete\r\n"), "{method}: {answer}");
        assert!(answer.contains("request.method_not_allowed"), "{method}: {answer}");
    }
    let floor = c.send("GET", "/v1/bench/floor", None, &[], None);
    assert_eq!(floor.status, 404, "the bench floor is off unless switched on");
}

#[test]
fn health_says_the_store_is_bound_and_the_key_usable() {
    let a = Client::shared().send("GET", "/v1/health", None, &[], None);
    assert_eq!((a.status, a.body.clone()), (200, json!({"ok": true, "store": "bound", "auth": "ok", "push": "ok"})));
}

/// A request with a method the HTTP client refuses to send, on a raw connection; the whole answer.
fn raw_request(c: &Client, method: &str, path: &str, token: &str) -> String {
    use std::io::{Read, Write};
    let host = c.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}
