//! Enrolled machines, against the real Worker: a machine starts an enrolment and shows a code,
//! its owner looks the code up and approves (or refuses) it, and the machine collects a
//! credential by proving the key it enrolled with, accepting only the owner it expects. The
//! credential takes only the machine routes (presence, its hand-offs, their machine tokens) and
//! never an owner's or a hand-off's; an owner's and a machine token take none of its routes.
//! Creates for a machine that reported are held to what it reported; a revoke ends the
//! credential. A machine follows its list: a follow held until a hand-off is listed for it, at
//! most its timeout, within its machine's cap, ended by a revoke.

use handoff_core::enrolment::public_key_of;
use handoff_core::limits::{
    ENROLMENT_CODE_TRIES_PER_MINUTE_MAX, MACHINE_FOLLOWS_PER_MACHINE_MAX, MACHINE_FOLLOW_TIMEOUT_S_MAX,
    PENDING_CODES_PER_ADDRESS_MAX,
};
use handoff_it::{owner, temp_state, unique, Answer, Client, Server};
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A machine about to enrol: its name, its secret key and the address it calls from.
struct Machine {
    name: String,
    key: Vec<u8>,
    address: String,
}

impl Machine {
    fn new() -> Machine {
        let name = unique("vm");
        let key = public_key_of(name.as_bytes()).into_bytes()[..32].to_vec();
        let n = name.bytes().fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
        Machine { name, key, address: format!("10.{}.{}.{}", n % 250, (n >> 8) % 250, (n >> 16) % 250) }
    }

    fn start(&self, c: &Client) -> Answer {
        let body = json!({"name": self.name, "host": format!("{}.internal", self.name), "public_key": public_key_of(&self.key)});
        c.send(
            "POST",
            "/v1/enrolments",
            None,
            &[("CF-Connecting-IP", &self.address)],
            Some(body.to_string().as_bytes()),
        )
    }

    fn started(&self, c: &Client) -> String {
        let a = self.start(c);
        assert_eq!(a.status, 201, "{}", a.text);
        a.body["enrolment"]["code"].as_str().unwrap().to_string()
    }

    fn collect(&self, c: &Client, code: &str, expected: Option<&str>) -> Answer {
        let mut body = json!({"code": code, "key": hex(&self.key)});
        if let Some(owner) = expected {
            body["owner"] = Value::from(owner);
        }
        c.send("POST", "/v1/enrolments/collect", None, &[], Some(body.to_string().as_bytes()))
    }

    /// Enrolled by `subject` (whose token is `token`): the credential.
    fn enrolled(&self, c: &Client, subject: &str, token: &str) -> String {
        let code = self.started(c);
        assert_eq!(c.post(&format!("/v1/enrolments/{code}/approve"), token, json!({})).status, 200);
        let a = self.collect(c, &code, Some(subject));
        assert_eq!(a.status, 200, "{}", a.text);
        a.body["credential"].as_str().unwrap().to_string()
    }
}

fn presence(c: &Client, credential: &str) -> Answer {
    let body = json!({
        "workspaces": ["api", "web"],
        "runtimes": [{"name": "claude-code", "models": ["opus", "sonnet"]}, {"name": "codex", "models": ["gpt-5-codex"]}],
        "sessions": [],
    });
    c.post("/v1/machine/presence", credential, body)
}

fn create(c: &Client, token: &str, machine: &str, extra: Value) -> Answer {
    let mut body = json!({"session": unique("s"), "machine": machine, "size": "large"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    c.post("/v1/handoffs", token, body)
}

fn listed_ids(c: &Client, credential: &str) -> Vec<String> {
    let a = c.get("/v1/machine/handoffs", credential);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["handoffs"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_machine_is_enrolled_by_code_approved_by_its_owner_and_reports_its_presence() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let started = m.start(&c);
    assert_eq!(started.status, 201, "{}", started.text);
    let code = started.body["enrolment"]["code"].as_str().unwrap().to_string();
    let shape = code.len() == 9
        && code.as_bytes()[4] == b'-'
        && code.bytes().filter(|b| *b != b'-').all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    assert!(shape, "XXXX-XXXX: {code}");
    assert_eq!(m.collect(&c, &code, Some(&subject)).body["status"], "waiting");

    let looked = c.get(&format!("/v1/enrolments/{}", code.to_lowercase()), &alice);
    assert_eq!(looked.status, 200, "{}", looked.text);
    let e = &looked.body["enrolment"];
    assert_eq!(e["name"], m.name.as_str());
    assert_eq!(e["host"], format!("{}.internal", m.name).as_str());
    assert!(e["fingerprint"].as_str().unwrap().starts_with("SHA256:"), "{e}");
    assert_eq!(c.post(&format!("/v1/enrolments/{code}/approve"), &alice, json!({})).status, 200);

    let told = m.collect(&c, &code, None);
    assert_eq!((told.body["status"].as_str(), told.body["approved_by"].as_str()), (Some("approved"), Some(&*subject)));
    assert!(told.body.get("credential").is_none(), "nothing is issued before the machine accepts the owner");
    let accepted = m.collect(&c, &code, Some(&subject));
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    let credential = accepted.body["credential"].as_str().unwrap().to_string();
    assert_eq!(m.collect(&c, &code, Some(&subject)).body["error"]["code"], "enrolment.not_found", "collected once");

    let p = presence(&c, &credential);
    assert_eq!(p.status, 200, "{}", p.text);
    assert!(p.body["heartbeat_s"].as_i64().unwrap() < 30);
    let listed = c.get("/v1/machines", &alice);
    assert_eq!(listed.status, 200, "{}", listed.text);
    let machine = &listed.body["machines"][0];
    assert_eq!((machine["name"].as_str(), machine["online"].as_bool()), (Some(&*m.name), Some(true)));
    assert!(machine["last_seen_at"].is_string(), "{machine}");
    assert_eq!(machine["workspaces"], json!(["api", "web"]));
    assert_eq!(machine["runtimes"][0], json!({"name": "claude-code", "models": ["opus", "sonnet"]}));
    assert_eq!(c.get("/v1/machines", &owner(&unique("bob"))).body["machines"], json!([]), "another owner's");
}

#[test]
fn a_wrong_code_is_refused_and_an_owners_tries_are_bounded() {
    let c = Client::shared();
    let (alice, m) = (owner(&unique("alice")), Machine::new());
    let code = m.started(&c);
    for _ in 0..ENROLMENT_CODE_TRIES_PER_MINUTE_MAX - 1 {
        let a = c.get("/v1/enrolments/AAAA-AAAA", &alice);
        assert_eq!((a.status, a.body["error"]["code"].as_str()), (404, Some("enrolment.not_found")));
    }
    assert_eq!(c.get(&format!("/v1/enrolments/{code}"), &alice).status, 200, "the last try of the minute");
    let a = c.get(&format!("/v1/enrolments/{code}"), &alice);
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (429, Some("enrolment.rate_limited")),
        "even the right code"
    );
    assert_eq!(c.get("/v1/enrolments/not-a-code", &owner(&unique("bob"))).status, 404);
}

#[test]
fn an_approval_by_an_owner_the_machine_did_not_expect_is_refused_and_ends_the_enrolment() {
    let c = Client::shared();
    let (subject, mallory, m) = (unique("alice"), owner(&unique("mallory")), Machine::new());
    let code = m.started(&c);
    assert_eq!(c.post(&format!("/v1/enrolments/{code}/approve"), &mallory, json!({})).status, 200);
    let a = m.collect(&c, &code, Some(&subject));
    assert_eq!((a.status, a.body["error"]["code"].as_str()), (403, Some("enrolment.refused")));
    assert!(a.body.get("credential").is_none());
    assert_eq!(m.collect(&c, &code, Some(&subject)).status, 404, "the enrolment is over");
    assert_eq!(c.get("/v1/machines", &mallory).body["machines"], json!([]), "mallory enrolled nothing");
}

#[test]
fn a_refused_enrolment_is_told_to_the_machine_and_a_wrong_key_collects_nothing() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let code = m.started(&c);
    let thief = Machine { key: vec![7; 32], ..Machine::new() };
    assert_eq!(thief.collect(&c, &code, None).status, 404, "the key is proved");
    assert_eq!(c.post(&format!("/v1/enrolments/{code}/refuse"), &alice, json!({})).status, 204);
    let a = m.collect(&c, &code, Some(&subject));
    assert_eq!((a.status, a.body["error"]["code"].as_str()), (403, Some("enrolment.refused")));
}

#[test]
fn live_codes_are_bounded_per_client_address() {
    let c = Client::shared();
    let first = Machine::new();
    for _ in 0..PENDING_CODES_PER_ADDRESS_MAX {
        let m = Machine { address: first.address.clone(), ..Machine::new() };
        assert_eq!(m.start(&c).status, 201);
    }
    let a = Machine { address: first.address.clone(), ..Machine::new() }.start(&c);
    assert_eq!((a.status, a.body["error"]["code"].as_str()), (429, Some("enrolment.too_many")));
    assert_eq!(Machine::new().start(&c).status, 201, "another address is not held back");
}

#[test]
fn the_credential_takes_only_its_own_routes_and_owner_and_machine_tokens_take_none_of_them() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let credential = m.enrolled(&c, &subject, &alice);
    let (id, machine_token, _) = c.create(&alice);
    let forbidden = |a: Answer, what: &str| {
        assert_eq!((a.status, a.body["error"]["code"].as_str()), (403, Some("auth.forbidden")), "{what}: {}", a.text);
    };
    forbidden(c.get("/v1/handoffs", &credential), "the owner's list");
    forbidden(c.get(&format!("/v1/handoffs/{id}"), &credential), "a hand-off");
    forbidden(create(&c, &credential, &m.name, json!({})), "a create");
    forbidden(c.get("/v1/machines", &credential), "the owner's machines");
    forbidden(c.post(&format!("/v1/handoffs/{id}/machine-token"), &credential, json!({})), "the owner's mint");
    forbidden(presence(&c, &alice), "an owner's presence");
    forbidden(c.get("/v1/machine/handoffs", &alice), "an owner on the machine's list");
    forbidden(c.get("/v1/machine/handoffs", &machine_token), "a machine token on the machine's list");
    forbidden(c.post(&format!("/v1/machine/handoffs/{id}/machine-token"), &machine_token, json!({})), "a token");
}

#[test]
fn a_machine_lists_and_gets_tokens_only_for_hand_offs_created_for_it_since_it_enrolled_and_ends_none() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let earlier = create(&c, &alice, &m.name, json!({}));
    assert_eq!(earlier.status, 201);
    let credential = m.enrolled(&c, &subject, &alice);
    let mine = create(&c, &alice, &m.name, json!({"prompt": "Say hello."}));
    let other = create(&c, &alice, "vm-elsewhere", json!({}));
    assert_eq!((mine.status, other.status), (201, 201));
    let id = |a: &Answer| a.handoff()["id"].as_str().unwrap().to_string();
    assert_eq!(listed_ids(&c, &credential), [id(&mine)], "only the hand-offs created for it since it enrolled");

    let got = c.post(&format!("/v1/machine/handoffs/{}/machine-token", id(&mine)), &credential, json!({}));
    assert_eq!(got.status, 200, "{}", got.text);
    let token = got.body["machine_token"].as_str().unwrap();
    assert_eq!(c.get(&format!("/v1/handoffs/{}", id(&mine)), token).status, 200, "the token works");
    let first = mine.body["machine_token"].as_str().unwrap();
    assert_eq!(c.get(&format!("/v1/handoffs/{}", id(&mine)), first).status, 200, "and ends no other token");
    for other in [id(&earlier), id(&other)] {
        let a = c.post(&format!("/v1/machine/handoffs/{other}/machine-token"), &credential, json!({}));
        assert_eq!((a.status, a.body["error"]["code"].as_str()), (404, Some("handoff.not_found")), "{other}");
    }
}

#[test]
fn a_create_for_a_machine_that_reported_is_refused_what_it_did_not_report_and_creates_nothing() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let credential = m.enrolled(&c, &subject, &alice);
    assert_eq!(presence(&c, &credential).status, 200);
    for (extra, code, field) in [
        (json!({"workspace": "docs"}), "workspace.unavailable", "workspace:"),
        (json!({"runtime": "aider"}), "runtime.unavailable", "runtime:"),
        (json!({"runtime": "codex", "model": "opus"}), "model.unavailable", "model:"),
    ] {
        let a = create(&c, &alice, &m.name, extra);
        assert_eq!((a.status, a.body["error"]["code"].as_str()), (409, Some(code)), "{}", a.text);
        assert!(a.body["error"]["message"].as_str().unwrap().starts_with(field), "{}", a.text);
    }
    assert_eq!(c.get("/v1/handoffs", &alice).body["handoffs"], json!([]), "nothing was created");
    assert!(listed_ids(&c, &credential).is_empty());
    let a = create(&c, &alice, &m.name, json!({"runtime": "claude-code", "model": "sonnet"}));
    assert_eq!(a.status, 201, "{}", a.text);
    assert_eq!(a.handoff()["workspace"], "api", "no workspace: the machine's first");
}

#[test]
fn a_revoked_machine_s_credential_stops_working_and_a_new_session_is_never_listed_for_it() {
    let c = Client::shared();
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let credential = m.enrolled(&c, &subject, &alice);
    assert_eq!(presence(&c, &credential).status, 200);
    let revoke = c.send("DELETE", &format!("/v1/machines/{}", m.name), Some(&alice), &[], None);
    assert_eq!(revoke.status, 204, "{}", revoke.text);
    let a = presence(&c, &credential);
    assert_eq!((a.status, a.body["error"]["code"].as_str()), (401, Some("auth.revoked")), "{}", a.text);
    assert!(a.body["error"]["message"].as_str().unwrap().contains("revoked"), "the daemon can say why");
    assert_eq!(c.get("/v1/machine/handoffs", &credential).status, 401);
    assert_eq!(create(&c, &alice, &m.name, json!({})).status, 201, "a create for the name is a plain one now");
    assert_eq!(c.get("/v1/machines", &alice).body["machines"], json!([]));
    let again = c.send("DELETE", &format!("/v1/machines/{}", m.name), Some(&alice), &[], None);
    assert_eq!((again.status, again.body["error"]["code"].as_str()), (404, Some("machine.not_found")));
}

/// The list's version as `GET /v1/machine/handoffs` answers it.
fn list_version(c: &Client, credential: &str) -> u64 {
    let a = c.get("/v1/machine/handoffs", credential);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["version"].as_u64().expect("the list carries its version")
}

/// A follow of the list after `after`, held up to `timeout_s`, on a thread of its own: its
/// answer and how long it was held.
fn follow(c: &Client, credential: &str, after: u64, timeout_s: u64) -> thread::JoinHandle<(Answer, Duration)> {
    let (c, credential) = (c.clone(), credential.to_string());
    thread::spawn(move || {
        let started = Instant::now();
        let a = c.get(&format!("/v1/machine/handoffs?after={after}&timeout={timeout_s}"), &credential);
        (a, started.elapsed())
    })
}

/// A follow sent on a raw connection, to be dropped unanswered.
fn raw_follow(c: &Client, credential: &str, after: u64) -> TcpStream {
    let host = c.base.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connects");
    let request = format!(
        "GET /v1/machine/handoffs?after={after} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {credential}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).expect("writes");
    s
}

/// Whether a raw follow has its answer (or its connection closed), so that it holds no place.
fn answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).expect("non-blocking");
    let peeked = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false).expect("blocking");
    !matches!(peeked, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// An enrolled machine that reported its presence: its name and credential, and its owner's token.
fn reported_machine(c: &Client) -> (Machine, String, String) {
    let (subject, m) = (unique("alice"), Machine::new());
    let alice = owner(&subject);
    let credential = m.enrolled(c, &subject, &alice);
    assert_eq!(presence(c, &credential).status, 200);
    (m, credential, alice)
}

#[test]
fn a_follow_is_held_until_a_hand_off_is_listed_for_its_machine_and_answers_the_new_list_with_its_version() {
    let c = Client::shared();
    let (m, credential, alice) = reported_machine(&c);
    let seen = list_version(&c, &credential);
    let held = follow(&c, &credential, seen, MACHINE_FOLLOW_TIMEOUT_S_MAX);
    thread::sleep(Duration::from_millis(1_000));
    assert_eq!(create(&c, &alice, "vm-elsewhere", json!({})).status, 201, "another machine's create wakes nobody here");
    thread::sleep(Duration::from_millis(500));
    assert!(!held.is_finished(), "held while its machine's list has not changed");
    let created = create(&c, &alice, &m.name, json!({"prompt": "Say hello."}));
    assert_eq!(created.status, 201, "{}", created.text);
    let (a, took) = held.join().unwrap();
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.body["version"].as_u64(), Some(seen + 1), "{}", a.text);
    assert_eq!(a.body["handoffs"][0]["id"], created.handoff()["id"], "the new hand-off, newest first");
    assert!(
        took < Duration::from_secs(MACHINE_FOLLOW_TIMEOUT_S_MAX - 10),
        "woken by the listing, not its timeout: {took:?}"
    );
    let token = c.post(
        &format!("/v1/machine/handoffs/{}/machine-token", created.handoff()["id"].as_str().unwrap()),
        &credential,
        json!({}),
    );
    assert_eq!(token.status, 200, "a hand-off a follow is told of is there already: {}", token.text);

    let again = create(&c, &alice, &m.name, json!({"session": created.handoff()["session"]}));
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(list_version(&c, &credential), seen + 1, "a repeated create lists nothing anew");
    let (behind, took) = follow(&c, &credential, seen, MACHINE_FOLLOW_TIMEOUT_S_MAX).join().unwrap();
    assert_eq!(behind.body["version"].as_u64(), Some(seen + 1), "a follow behind the list answers at once");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_follow_is_held_at_most_its_timeout_and_then_answers_the_unchanged_list() {
    let c = Client::shared();
    let (m, credential, alice) = reported_machine(&c);
    assert_eq!(create(&c, &alice, &m.name, json!({})).status, 201);
    let seen = list_version(&c, &credential);
    let before = c.get("/v1/machine/handoffs", &credential).body;
    let (a, took) = follow(&c, &credential, seen, 2).join().unwrap();
    assert_eq!((a.status, &a.body), (200, &before), "the unchanged list: {}", a.text);
    assert!(took >= Duration::from_millis(1_900) && took < Duration::from_secs(10), "held its timeout: {took:?}");
}

#[test]
fn a_bad_after_or_timeout_is_refused_by_name_and_holds_nothing() {
    let c = Client::shared();
    let (_, credential, _) = reported_machine(&c);
    let timeout = format!("after=0&timeout={}", MACHINE_FOLLOW_TIMEOUT_S_MAX + 1);
    for (query, field) in
        [("after=-1", "after:"), ("after=x", "after:"), ("timeout=5", "after:"), (&*timeout, "timeout:")]
    {
        let a = c.get(&format!("/v1/machine/handoffs?{query}"), &credential);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{query}: {}", a.text);
        assert!(a.body["error"]["message"].as_str().unwrap().starts_with(field), "{query}: {}", a.text);
    }
}

/// Fills `credential`'s machine with follows on raw connections (checked through the cap: the
/// next follow is 429 `wait.too_many`), drops them, and answers how long until a follow is held
/// again.
fn fill_drop_and_time_release(c: &Client, credential: &str) -> Duration {
    let seen = list_version(c, credential);
    let mut dropped: Vec<TcpStream> =
        (0..MACHINE_FOLLOWS_PER_MACHINE_MAX).map(|_| raw_follow(c, credential, seen)).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // A raw follow that came after a probe took the last place was refused: it holds none,
        // so it is sent again, or the probes would keep the cap from ever filling.
        for s in dropped.iter_mut().filter(|s| answered(s)) {
            *s = raw_follow(c, credential, seen);
        }
        let a = c.get(&format!("/v1/machine/handoffs?after={seen}&timeout=1"), credential);
        if a.status == 429 {
            assert_eq!(a.code(), "wait.too_many", "{}", a.text);
            assert!(a.text.contains("MACHINE_FOLLOWS_PER_MACHINE_MAX"), "{}", a.text);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{MACHINE_FOLLOWS_PER_MACHINE_MAX} follows never filled the machine's places"
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.get("/v1/machine/handoffs", credential).status, 200, "a list at once holds no place");
    drop(dropped);
    let left = Instant::now();
    while c.get(&format!("/v1/machine/handoffs?after={seen}&timeout=1"), credential).status != 200 {
        assert!(left.elapsed() < Duration::from_secs(MACHINE_FOLLOW_TIMEOUT_S_MAX + 5), "the places never came back");
        thread::sleep(Duration::from_millis(100));
    }
    left.elapsed()
}

/// On workerd itself: behind wrangler's dev proxy, which keeps a gone client's connection open
/// (and may queue raw connections), a gone follow's place comes back at its timeout instead.
#[test]
fn a_machine_holds_its_follows_within_its_cap_and_one_whose_client_is_gone_gives_its_place_back_at_once() {
    let state = temp_state("follows");
    let server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let (_, credential, _) = reported_machine(&c);
    let took = fill_drop_and_time_release(&c, &credential);
    assert!(
        took < Duration::from_secs(MACHINE_FOLLOW_TIMEOUT_S_MAX / 3),
        "given back long before its timeout: {took:?}"
    );
}

#[test]
fn a_revoke_ends_the_machines_held_follows_at_once_and_its_next_call_is_refused_revoked() {
    let c = Client::shared();
    let (m, credential, alice) = reported_machine(&c);
    let seen = list_version(&c, &credential);
    let before = c.get("/v1/machine/handoffs", &credential).body;
    let held = follow(&c, &credential, seen, MACHINE_FOLLOW_TIMEOUT_S_MAX);
    thread::sleep(Duration::from_millis(1_000));
    let revoke = c.send("DELETE", &format!("/v1/machines/{}", m.name), Some(&alice), &[], None);
    assert_eq!(revoke.status, 204, "{}", revoke.text);
    let (a, took) = held.join().unwrap();
    assert_eq!((a.status, &a.body), (200, &before), "the list it held: {}", a.text);
    assert!(took < Duration::from_secs(10), "ended by the revoke, not its timeout: {took:?}");
    let next = c.get(&format!("/v1/machine/handoffs?after={seen}"), &credential);
    assert_eq!((next.status, next.code()), (401, "auth.revoked"), "{}", next.text);
}

#[test]
fn a_hand_off_turn_carries_the_model_over_and_one_the_target_runtime_does_not_reach_on_that_machine_is_refused() {
    let c = Client::shared();
    let (m, _credential, alice) = reported_machine(&c);
    let created = create(&c, &alice, &m.name, json!({"runtime": "claude-code", "model": "opus"}));
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.handoff()["id"].as_str().unwrap().to_string();
    let machine_token = created.body["machine_token"].as_str().unwrap().to_string();
    let work = json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": ["a"]});
    assert_eq!(c.put(&format!("/v1/handoffs/{id}/work"), &alice, work).status, 200);
    assert_eq!(c.report(&id, &machine_token, 1, "done", Some("turn 1")).status, 200);
    let before = c.get(&format!("/v1/handoffs/{id}"), &alice);
    let turns = |query: &str, model: Option<&str>| {
        let mut handoff = json!({"runtime": "codex", "objective": "finish", "purpose": "a fresh view"});
        if let Some(model) = model {
            handoff["model"] = Value::from(model);
        }
        c.post(
            &format!("/v1/handoffs/{id}/turns{query}"),
            &alice,
            json!({"after": 1, "prompt": "go on", "handoff": handoff}),
        )
    };
    let open = |model: Option<&str>| turns("", model);
    let preview = turns("?dry_run=true", None);
    assert_eq!((preview.status, preview.code()), (409, "model.unavailable"), "a preview as the turn: {}", preview.text);
    assert_eq!(turns("?dry_run=true", Some("gpt-5-codex")).status, 200, "a model it reaches previews");

    let refused = open(None);
    assert_eq!((refused.status, refused.code()), (409, "model.unavailable"), "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"opus\"") && message.contains("codex"), "names the model and the runtime: {message}");
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(after.version(), before.version(), "nothing changes");
    assert_eq!((after.handoff()["turn"].as_u64(), after.handoff()["model"].as_str()), (Some(1), Some("opus")));
    assert_eq!(open(Some("o3")).code(), "model.unavailable", "a model the machine never reported is refused too");

    let opened = open(Some("gpt-5-codex"));
    assert_eq!(opened.status, 200, "{}", opened.text);
    let h = opened.handoff();
    assert_eq!(
        (h["turn"].as_u64(), h["model"].as_str(), h["requested_runtime"].as_str()),
        (Some(2), Some("gpt-5-codex"), Some("codex"))
    );
    let turns = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    let models: Vec<&str> =
        turns.body["turns"].as_array().unwrap().iter().map(|t| t["model"].as_str().unwrap_or("")).collect();
    assert_eq!(models, ["opus", "gpt-5-codex"], "each lineage entry shows its model: {}", turns.text);
}
