//! Authentication and bad input (issue 2): every refusal is a typed 4xx and changes nothing.

use handoff_api::token::{machine_key, mint, Claims, Role};
use handoff_it::{key, now_s, owner, temp_state, unique, Client, Server};
use serde_json::{json, Value};
use std::time::Duration;

fn token(claims: Claims, signing_key: &[u8]) -> String {
    mint(&claims, signing_key)
}

#[test]
fn an_unsigned_request_is_401_auth_required_with_www_authenticate() {
    let c = Client::shared();
    for (method, path) in [
        ("GET", "/v1/handoffs"),
        ("POST", "/v1/handoffs"),
        ("GET", "/v1/handoffs/ho_00000000000000000000000000000000/wait"),
    ] {
        let a = c.send(method, path, None, &[], None);
        assert_eq!((a.status, a.code()), (401, "auth.required"), "{method} {path}");
        assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"));
    }
}

#[test]
fn an_expired_forged_or_malformed_token_is_401_auth_invalid() {
    let c = Client::shared();
    let expired = token(
        Claims {
            sub: "alice".into(),
            role: Role::Owner,
            hid: None,
            exp: now_s() - 61,
            nbf: None,
            inc: None,
            mch: None,
        },
        &key(),
    );
    let wrong_key = token(
        Claims {
            sub: "alice".into(),
            role: Role::Owner,
            hid: None,
            exp: now_s() + 60,
            nbf: None,
            inc: None,
            mch: None,
        },
        b"not-the-key",
    );
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
    let lifeless = token(
        Claims {
            sub: name,
            role: Role::Machine,
            hid: Some(id.clone()),
            exp: now_s() + 600,
            nbf: None,
            inc: None,
            mch: None,
        },
        &machine_key(&key()),
    );
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
    let huge = vec![b' '; handoff_core::limits::REPORT_BODY_BYTES_MAX + 1];
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
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The claims of a token, read without checking it.
fn payload(token: &str) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

/// Whether a service that verifies HS256 with the signing key alone (and reads `sub` and
/// `exp`) would accept `token`.
fn verifies_with_the_signing_key(token: &str, signing_key: &[u8]) -> bool {
    use base64::Engine;
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(signing_key).unwrap();
    hmac::Mac::update(&mut mac, signed.as_bytes());
    hmac::Mac::verify_slice(mac, &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(signature).unwrap()).is_ok()
}

/// Where the issuer settings are unset (the shared Worker) and where they are set (a Worker
/// started with both), a create's machine token carries `iss`/`aud` exactly where they are
/// set, works for the machine, is never an owner's, and fails at any service that verifies
/// with the signing key alone.
#[test]
fn machine_tokens_follow_the_issuer_settings_work_here_and_are_never_acceptable_as_an_owners_anywhere() {
    let signing = "k".repeat(48);
    let state = temp_state("issuer");
    let issuer_vars = [
        ("HANDOFF_SIGNING_KEY", signing.as_str()),
        ("HANDOFF_TOKEN_ISSUER", "https://id.example"),
        ("HANDOFF_TOKEN_AUDIENCE", "handoff"),
    ];
    let server = Server::start_with_vars(&state, None, &issuer_vars);
    let name = unique("alice");
    let owner_with_claims = {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let head = b64(br#"{"alg":"HS256"}"#);
        let body = b64(json!({"sub": name, "role": "owner", "exp": now_s() + 600, "iss": "https://id.example", "aud": ["handoff"]}).to_string().as_bytes());
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(signing.as_bytes()).unwrap();
        hmac::Mac::update(&mut mac, format!("{head}.{body}").as_bytes());
        format!("{head}.{body}.{}", b64(&hmac::Mac::finalize(mac).into_bytes()))
    };
    let configured =
        (server.client(), owner_with_claims, signing.into_bytes(), Some("https://id.example"), Some("handoff"));
    let shared = (Client::shared(), owner(&unique("alice")), key(), None, None);
    for (c, owner_token, signing_key, iss, aud) in [configured, shared] {
        let (id, machine, _) = c.create(&owner_token);
        let claims = payload(&machine);
        assert_eq!(
            (claims["iss"].as_str(), claims["aud"].as_str()),
            (iss, aud),
            "iss and aud exactly where they are set: {claims}"
        );
        assert_eq!(claims["role"], "machine");
        let reported = c.report(&id, &machine, 1, "running", Some("on it"));
        assert_eq!(reported.status, 200, "the machine's calls succeed ({iss:?}): {}", reported.text);
        assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &machine).status, 200);
        let as_owner = c.get("/v1/handoffs", &machine);
        assert_eq!((as_owner.status, as_owner.code()), (403, "auth.forbidden"), "never an owner's here");
        assert!(!verifies_with_the_signing_key(&machine, &signing_key), "nor at a service sharing the signing key");
        assert!(
            verifies_with_the_signing_key(&owner_token, &signing_key),
            "owner tokens stay the identity provider's kind"
        );
        // A machine token signed with the signing key (as anyone holding it could) is refused.
        let forged = mint(
            &Claims {
                sub: claims["sub"].as_str().unwrap().into(),
                role: Role::Machine,
                hid: Some(id.clone()),
                exp: now_s() + 600,
                nbf: None,
                inc: claims["inc"].as_u64(),
                mch: None,
            },
            &signing_key,
        );
        let refused = c.report(&id, &forged, 1, "done", None);
        assert_eq!((refused.status, refused.code()), (401, "auth.invalid"), "{}", refused.text);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_repeated_create_ends_no_token_and_the_owners_machine_token_route_ends_the_ones_before_it_with_401_auth_revoked() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let create = || c.post("/v1/handoffs", &alice, json!({"session": session, "machine": "m1", "size": "large"}));
    let created = create();
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.handoff()["id"].as_str().unwrap().to_string();
    let first = created.body["machine_token"].as_str().unwrap().to_string();
    assert_eq!(c.report(&id, &first, 1, "running", Some("a")).status, 200);
    std::thread::sleep(Duration::from_millis(5));
    let again = create();
    assert_eq!((again.status, again.version()), (200, 2), "answered as it is: {}", again.text);
    assert!(again.body.get("machine_token").is_none(), "a repeated create mints nothing: {}", again.text);
    assert_eq!(c.report(&id, &first, 1, "running", Some("b")).status, 200, "and ends nothing");
    let mint = |token: &str| c.post(&format!("/v1/handoffs/{id}/machine-token"), token, json!({}));
    let by_machine = mint(&first);
    assert_eq!((by_machine.status, by_machine.code()), (403, "auth.forbidden"), "{}", by_machine.text);
    std::thread::sleep(Duration::from_millis(5));
    let minted = mint(&alice);
    assert_eq!(
        (minted.status, minted.version()),
        (200, 3),
        "a fresh token is no change of the record: {}",
        minted.text
    );
    let second = minted.body["machine_token"].as_str().unwrap().to_string();
    for (what, a) in [
        ("report", c.report(&id, &first, 1, "done", Some("late"))),
        ("get", c.get(&format!("/v1/handoffs/{id}"), &first)),
        ("wait", c.get(&format!("/v1/handoffs/{id}/wait?after=0&timeout=1"), &first)),
    ] {
        assert_eq!((a.status, a.code()), (401, "auth.revoked"), "{what}: {}", a.text);
        assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"), "{what}");
    }
    let record = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(
        (record.version(), record.handoff()["status"].as_str()),
        (3, Some("running")),
        "the ended token changed nothing"
    );
    assert_eq!(c.report(&id, &second, 1, "done", Some("by the newest")).status, 200, "the newest token works");
    assert_eq!(create().version(), 4, "a create on a finished turn moves nothing either");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &second).status, 200, "nor ends the newest token");
    let other = owner(&unique("bob"));
    assert_eq!(mint(&other).code(), "handoff.not_found", "another owner's hand-off is not there");
    assert_eq!(c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({})).status, 200);
    assert_eq!(mint(&alice).code(), "handoff.closed");
}

#[test]
fn a_summary_with_a_control_character_other_than_newline_and_tab_is_400_naming_summary_and_changes_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    // An OSC title, a clipboard write, a line erase, a carriage return, a C1 CSI.
    for bad in [
        "\u{1b}]0;owned\u{7}done",
        "\u{1b}]52;c;Y3VybCBldmls\u{7}",
        "ok\u{1b}[2K\u{1b}[1A",
        "done\rall good",
        "\u{9b}31mred",
    ] {
        let a = c.report(&id, &machine, 1, "done", Some(bad));
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{bad:?}: {}", a.text);
        assert!(a.body["error"]["message"].as_str().unwrap().starts_with("summary:"), "{}", a.text);
    }
    let asked = json!({"turn": 1, "status": "needs-you", "question": {"kind": "permission", "text": "Bash", "input": "ls\r\u{1b}[2Krm -rf ~", "options": [{"id": "allow", "label": "Allow"}]}});
    let a = c.post(&format!("/v1/handoffs/{id}/report"), &machine, asked);
    assert_eq!((a.status, a.code()), (400, "request.invalid"), "{}", a.text);
    assert!(a.body["error"]["message"].as_str().unwrap().starts_with("question.input"), "{}", a.text);
    let version = c.put(
        &format!("/v1/handoffs/{id}/runtimes"),
        &machine,
        json!({"runtimes": [{"name": "codex", "version": "0.1\u{1b}]0;x\u{7}"}]}),
    );
    assert_eq!(
        (version.status, version.code()),
        (400, "request.invalid"),
        "a runtime's version text: {}",
        version.text
    );
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1, "nothing changed");
    let ok = c.report(&id, &machine, 1, "done", Some("two lines\n\tand a tab"));
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.handoff()["summary"], "two lines\n\tand a tab");
}

/// Every route that takes a hand-off's id answers another owner's hand-off and one that is not
/// there alike (status and code), DELETE included; a machine token of another hand-off too.
#[test]
fn not_yours_and_not_there_are_one_answer_on_every_route_that_takes_an_id() {
    use handoff_api::routes::{Gate, ROUTES};
    let c = Client::shared();
    let (alice, bob_name) = (owner(&unique("alice")), unique("bob"));
    let bob = owner(&bob_name);
    let (theirs, _, _) = c.create(&alice);
    let (_, bobs_machine, _) = c.create(&bob);
    let absent = handoff_core::ids::handoff_id(&bob_name, &unique("never"));
    let body_of = |path: &str| match path.rsplit('/').next().unwrap() {
        "report" => json!({"turn": 1, "status": "running"}),
        "turns" => json!({"after": 1}),
        "answer" => json!({"question": "q_2_1", "option": "allow"}),
        "decisions" => json!({"statement": "s", "rationale": "r"}),
        "package" => json!({"objective": "o", "purpose": "p", "runtime": "codex"}),
        "accept" => json!({"package_hash": "ab".repeat(32)}),
        "policy" => json!({"runtimes": ["codex"]}),
        "runtimes" => json!({"runtimes": []}),
        _ => json!({}),
    };
    let mut checked = 0;
    for route in ROUTES.iter().filter(|r| r.path.starts_with("/v1/handoffs/{id}") && r.gate == Gate::Always) {
        let at = |id: &str| route.path.replace("{id}", id).replace("{bid}", "b_1");
        let send = |id: &str, token: &str| {
            let body = (route.method != "GET").then(|| body_of(route.path).to_string().into_bytes());
            c.send(route.method, &at(id), Some(token), &[], body.as_deref())
        };
        for (who, token) in
            [("another owner", bob.as_str()), ("a machine token of another hand-off", bobs_machine.as_str())]
        {
            let (not_yours, not_there) = (send(&theirs, token), send(&absent, token));
            assert_eq!(
                (not_yours.status, not_yours.code(), not_yours.body.get("handoff").is_some()),
                (not_there.status, not_there.code(), not_there.body.get("handoff").is_some()),
                "{} {} for {who}: {} / {}",
                route.method,
                route.path,
                not_yours.text,
                not_there.text
            );
        }
        checked += 1;
    }
    assert!(checked >= 20, "every hand-off route: {checked}");
    for (method, path) in [
        ("GET", format!("/v1/handoffs/{theirs}")),
        ("DELETE", format!("/v1/handoffs/{theirs}")),
        ("POST", format!("/v1/handoffs/{theirs}/close")),
    ] {
        let a = c.send(method, &path, Some(&bob), &[], (method == "POST").then_some(b"{}".as_slice()));
        assert_eq!((a.status, a.code()), (404, "handoff.not_found"), "{method} {path}");
    }
    let gone = c.send("DELETE", &format!("/v1/handoffs/{absent}"), Some(&bob), &[], None);
    assert_eq!((gone.status, gone.code()), (404, "handoff.not_found"), "DELETE of an id never there");
    assert_eq!(c.get(&format!("/v1/handoffs/{theirs}"), &alice).status, 200, "alice's hand-off is whole");
    // A retried DELETE of one's own erased hand-off finds it gone.
    assert_eq!(c.send("DELETE", &format!("/v1/handoffs/{theirs}"), Some(&alice), &[], None).status, 204);
    let retry = c.send("DELETE", &format!("/v1/handoffs/{theirs}"), Some(&alice), &[], None);
    assert_eq!((retry.status, retry.code()), (404, "handoff.not_found"));
}
