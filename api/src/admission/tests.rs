use super::*;
use crate::protocol::{IndexAsk, ToIndex};
use handoff_core::limits::{BODY_BYTES_MAX, MACHINE_TOKEN_TTL_S, WORDS_BODY_BYTES_MAX};
use handoff_notify::Environment;

const KEY: &str = "a signing key of this environment, long enough";
const NOW_S: i64 = 1_800_000_000;
const NOW_MS: i64 = NOW_S * 1000 + 250;
const HID: &str = "ho_0123456789abcdef0123456789abcdef";

fn setting() -> Setting {
    Setting {
        store_bound: true,
        machines_bound: true,
        key: Some(KEY.into()),
        expect: Expect::default(),
        test_hooks: false,
        bench_floor: false,
        push_key: Some(b"pkcs8".to_vec()),
        endpoints: Environment::Local,
    }
}

fn head(method: &str, path: &str, token: Option<&str>) -> Head {
    Head {
        method: method.into(),
        url: format!("https://handoff.example{path}"),
        authorization: token.map(|t| format!("Bearer {t}")),
        ..Head::default()
    }
}

fn owner() -> String {
    token::owner_token("alice", 3600, KEY.as_bytes(), NOW_S)
}

fn machine(hid: &str) -> String {
    token::machine_token_at("alice", hid, KEY.as_bytes(), NOW_MS - 1000, &Expect::default())
}

fn admitted(head: &Head, setting: &Setting) -> Result<Box<Admission>, ApiError> {
    match admit(head, setting, NOW_S)? {
        Admitted::Route(admission) => Ok(admission),
        other => panic!("{} {} is answered by the Worker: {other:?}", head.method, head.url),
    }
}

fn refused(head: &Head, setting: &Setting) -> Code {
    admitted(head, setting).expect_err("refused").code
}

/// The ask a request comes to, from its head and body, at `NOW_MS`: what the router sends and
/// the object reads of it.
fn next(head: &Head, body: &[u8]) -> Result<(String, Ask, Carrier), ApiError> {
    let admission = admitted(head, &setting())?;
    let create = admission.create_input(body)?;
    match admission.next(head, body, create, &setting(), || NOW_MS, &ones)? {
        Next::Send { name, sent, carrier } => Ok((name, sent_ask(&sent, body)?, carrier)),
        _ => panic!("{} {} sends no ask", head.method, head.url),
    }
}

/// What the object reads of a request sent to it, after the request has travelled as text.
fn sent_ask(sent: &Sent, body: &[u8]) -> Result<Ask, ApiError> {
    let wire = crate::protocol::encode(sent).unwrap();
    read(&crate::protocol::decode(&wire).unwrap(), body)
}

fn ones(buf: &mut [u8]) -> Result<(), ApiError> {
    buf.fill(1);
    Ok(())
}

fn watch(token: Option<&str>, protocol: Option<&str>, upgrade: Option<&str>) -> Head {
    let mut head = head("GET", &format!("/v1/handoffs/{HID}/watch"), token);
    head.websocket_protocol = protocol.map(str::to_string);
    head.upgrade = upgrade.map(str::to_string);
    head
}

// The Worker's own answers.

#[test]
fn health_says_whether_the_store_is_bound_and_whether_tokens_and_push_can_be_used() {
    let json = |setting: &Setting| serde_json::to_string(&health(setting)).unwrap();
    assert_eq!(json(&setting()), r#"{"ok":true,"store":"bound","auth":"ok","push":"ok"}"#);
    let bare = Setting { store_bound: false, key: None, push_key: None, ..setting() };
    assert_eq!(json(&bare), r#"{"ok":true,"store":"unbound","auth":"misconfigured","push":"misconfigured"}"#);
    let no_push = Setting { push_key: None, ..setting() };
    assert_eq!(json(&no_push), r#"{"ok":true,"store":"bound","auth":"ok","push":"misconfigured"}"#);
}

#[test]
fn health_is_answered_with_no_token_even_where_nothing_is_configured() {
    let bare = Setting { store_bound: false, key: None, push_key: None, ..setting() };
    assert!(
        matches!(admit(&head("GET", "/v1/health", None), &bare, NOW_S), Ok(Admitted::Health(h)) if h == health(&bare))
    );
}

#[test]
fn another_method_on_a_routes_path_is_405_naming_the_methods_it_takes_and_an_unknown_path_404() {
    let allowed = admit(&head("DELETE", "/v1/handoffs", None), &setting(), NOW_S);
    assert!(matches!(allowed, Ok(Admitted::MethodNotAllowed(m)) if m == ["GET", "POST"]));
    assert_eq!(refused(&head("GET", "/v2/handoffs", Some(&owner())), &setting()), Code::RouteNotFound);
}

#[test]
fn test_and_bench_routes_exist_only_where_their_switch_is_on() {
    let starts = head("GET", "/v1/test/object-starts", Some(&owner()));
    assert_eq!(refused(&starts, &setting()), Code::RouteNotFound);
    assert!(admitted(&starts, &Setting { test_hooks: true, ..setting() }).is_ok());
    let floor = head("GET", "/v1/bench/floor", None);
    assert_eq!(refused(&floor, &Setting { test_hooks: true, ..setting() }), Code::RouteNotFound);
    assert!(admitted(&floor, &Setting { bench_floor: true, ..setting() }).is_ok());
}

// Who is asking.

#[test]
fn an_unbound_store_is_refused_before_any_token_is_read() {
    let unbound = Setting { store_bound: false, key: None, ..setting() };
    assert_eq!(refused(&head("GET", "/v1/handoffs", None), &unbound), Code::StoreUnbound);
}

#[test]
fn the_bench_floor_takes_no_token_and_asks_its_own_object_over_rpc() {
    let on = Setting { bench_floor: true, key: None, ..setting() };
    let floor = head("GET", "/v1/bench/floor", None);
    let admission = admitted(&floor, &on).unwrap();
    assert_eq!(admission.counted(), None);
    let Ok(Next::Send { name, sent, carrier }) =
        admission.next(&floor, b"", None, &on, || unreachable!("the floor reads no clock"), &ones)
    else {
        panic!("the floor sends")
    };
    let ask = sent_ask(&sent, b"").unwrap();
    assert_eq!((name.as_str(), carrier), (BENCH_FLOOR_OBJECT, Carrier::Rpc));
    assert!(matches!(ask.op, Op::Floor));
    assert_eq!((ask.caller.owner.as_str(), ask.caller.role), ("bench", Role::Owner));
}

#[test]
fn without_a_usable_signing_key_every_token_is_refused_as_auth_misconfigured() {
    let no_key = Setting { key: None, ..setting() };
    assert_eq!(refused(&head("GET", "/v1/handoffs", Some(&owner())), &no_key), Code::AuthMisconfigured);
}

#[test]
fn no_token_is_auth_required_and_a_header_that_is_not_bearer_is_auth_invalid() {
    assert_eq!(refused(&head("GET", "/v1/handoffs", None), &setting()), Code::AuthRequired);
    let mut basic = head("GET", "/v1/handoffs", None);
    basic.authorization = Some(format!("Basic {}", owner()));
    assert_eq!(refused(&basic, &setting()), Code::AuthInvalid);
    let mut spaced = head("GET", "/v1/handoffs", None);
    spaced.authorization = Some(format!("Bearer  {} ", owner()));
    assert!(admitted(&spaced, &setting()).is_ok(), "the token is read trimmed");
}

#[test]
fn a_token_is_verified_under_the_environments_key_at_the_time_given_with_the_skew_tolerated() {
    let other = token::owner_token("alice", 3600, b"another key of the same length, or so", NOW_S);
    assert_eq!(refused(&head("GET", "/v1/handoffs", Some(&other)), &setting()), Code::AuthInvalid);
    let expiring = token::owner_token("alice", 0, KEY.as_bytes(), NOW_S);
    let list = head("GET", "/v1/handoffs", Some(&expiring));
    assert!(admit(&list, &setting(), NOW_S + TOKEN_CLOCK_SKEW_S).is_ok());
    assert_eq!(admit(&list, &setting(), NOW_S + TOKEN_CLOCK_SKEW_S + 1).unwrap_err().code, Code::AuthInvalid);
}

#[test]
fn a_deployments_issuer_is_required_of_every_token() {
    let expect = Expect { issuer: Some("https://id.example".into()), audience: None };
    let strict = Setting { expect: expect.clone(), ..setting() };
    assert_eq!(refused(&head("GET", "/v1/handoffs", Some(&owner())), &strict), Code::AuthInvalid);
}

#[test]
fn a_machine_token_is_forbidden_an_owners_route() {
    assert_eq!(refused(&head("GET", "/v1/handoffs", Some(&machine(HID))), &setting()), Code::AuthForbidden);
    assert!(admitted(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&machine(HID))), &setting()).is_ok());
}

#[test]
fn a_watch_may_carry_its_token_as_a_bearer_subprotocol() {
    let offered = format!("handoff.v1, bearer.{}", owner());
    let admission = admitted(&watch(None, Some(&offered), Some("websocket")), &setting()).unwrap();
    assert_eq!(admission.signed.as_ref().map(|s| s.claims.sub.as_str()), Some("alice"));
    assert!(admission.subprotocol);
}

#[test]
fn authorization_wins_over_a_watchs_subprotocol_token() {
    let good = format!("handoff.v1, bearer.{}", owner());
    assert_eq!(refused(&watch(Some("not-a-token"), Some(&good), None), &setting()), Code::AuthInvalid);
    let bad = "handoff.v1, bearer.not-a-token";
    let admission = admitted(&watch(Some(&owner()), Some(bad), None), &setting()).unwrap();
    assert_eq!(admission.signed.as_ref().map(|s| s.claims.role), Some(Role::Owner));
}

#[test]
fn only_a_watch_reads_a_token_from_its_subprotocols() {
    let mut get = head("GET", &format!("/v1/handoffs/{HID}"), None);
    get.websocket_protocol = Some(format!("handoff.v1, bearer.{}", owner()));
    assert_eq!(refused(&get, &setting()), Code::AuthRequired);
    let admission = admitted(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&owner())), &setting()).unwrap();
    assert!(!admission.subprotocol);
}

#[test]
fn a_watch_offering_subprotocols_without_handoff_v1_is_refused_before_its_token_is_read() {
    let offered = format!("bearer.{}", owner());
    assert_eq!(refused(&watch(None, Some(&offered), Some("websocket")), &setting()), Code::RequestInvalid);
    let admission = admitted(&watch(Some(&owner()), None, Some("websocket")), &setting()).unwrap();
    assert!(!admission.subprotocol, "no subprotocol offered: none taken");
}

// The body.

#[test]
fn a_declared_length_over_the_routes_cap_is_413_before_any_of_it_is_read() {
    let words = BodyRules { cap: WORDS_BODY_BYTES_MAX, bodiless: false };
    let asked = || panic!("not asked");
    let over = (WORDS_BODY_BYTES_MAX + 1).to_string();
    let error = words.before(Some(&over), None, asked).unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (Code::RequestTooLarge, "the body is over 65536 bytes"));
    assert_eq!(words.before(Some(&WORDS_BODY_BYTES_MAX.to_string()), None, || true), Ok(Body::Declared));
    assert_eq!(words.before(Some(" 12 "), None, || true), Ok(Body::Declared), "the length is read trimmed");
    let get = BodyRules { cap: BODY_BYTES_MAX, bodiless: true };
    assert_eq!(
        get.before(Some(&over), None, asked).unwrap_err().code,
        Code::RequestTooLarge,
        "413 before a GET's no body"
    );
}

#[test]
fn a_get_takes_no_body() {
    let get = BodyRules { cap: BODY_BYTES_MAX, bodiless: true };
    let error = get.before(Some("1"), None, || true).unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (Code::RequestInvalid, "body: this route takes no body"));
    assert_eq!(get.before(Some("0"), None, || true), Ok(Body::Undeclared));
    assert_eq!(get.before(None, None, || false), Ok(Body::Empty));
    assert_eq!(get.streamed(1).unwrap_err().code, Code::RequestInvalid);
    assert_eq!(get.streamed(0), Ok(()));
    let post = BodyRules { cap: BODY_BYTES_MAX, bodiless: false };
    assert_eq!(post.streamed(1), Ok(()));
    assert_eq!(post.before(Some("1"), None, || true), Ok(Body::Declared));
}

#[test]
fn a_body_the_edge_read_must_have_the_length_declared() {
    let post = BodyRules { cap: BODY_BYTES_MAX, bodiless: false };
    let asked = || panic!("a body was given");
    assert_eq!(post.before(Some("3"), Some(3), asked), Ok(Body::Given));
    for declared in [Some("2"), Some("4"), None] {
        let error = post.before(declared, Some(3), asked).unwrap_err();
        assert_eq!(error.message, "body: its length is not the Content-Length declared", "{declared:?}");
    }
}

#[test]
fn a_hand_offs_ask_is_made_without_its_body_so_the_edge_passes_the_body_on_unread() {
    let mut passed = 0;
    for route in ROUTES.iter().filter(|r| matches!(r.kind, Kind::Handoff { .. })) {
        let path = route.path.replace("{id}", HID).replace("{bid}", "blk_1");
        let setting = Setting { test_hooks: true, ..setting() };
        let mut head = head(route.method, &path, None);
        head.idempotency_key = Some("k1".into());
        // Each route is admitted for the owner's token or the machine's, whichever its role takes.
        let admission = [owner(), machine(HID)].iter().find_map(|token| {
            head.authorization = Some(format!("Bearer {token}"));
            admitted(&head, &setting).ok()
        });
        let admission = admission.unwrap_or_else(|| panic!("{} {path} admits neither token", route.method));
        if !admission.object_reads_body() {
            assert_eq!(route.method, "GET", "{} {}: only a GET's body is the edge's to read", route.method, path);
            continue;
        }
        let send = |body: &[u8]| match admission.next(&head, body, None, &setting, || NOW_MS, &ones) {
            Ok(Next::Send { name, sent, carrier }) => (name, crate::protocol::encode(&sent).unwrap(), carrier),
            other => panic!("{} {path} sends no ask: {other:?}", route.method),
        };
        assert_eq!(send(b""), send(br#"{"text":"a body the edge never reads"}"#), "{} {path}", route.method);
        assert_eq!(send(b"").2, Carrier::Rpc, "{} {path}", route.method);
        passed += 1;
    }
    let with_body = ROUTES.iter().filter(|r| matches!(r.kind, Kind::Handoff { .. }) && r.method != "GET").count();
    assert_eq!(passed, with_body, "every hand-off route with a body was checked");
}

#[test]
fn the_object_refuses_a_body_over_its_routes_cap_that_the_edge_passed_on_unread() {
    let report = head("POST", &format!("/v1/handoffs/{HID}/report"), Some(&machine(HID)));
    let admission = admitted(&report, &setting()).unwrap();
    let Ok(Next::Send { sent, .. }) = admission.next(&report, b"", None, &setting(), || NOW_MS, &ones) else {
        panic!("a report sends an ask");
    };
    let cap = admission.body().cap;
    let over = vec![b' '; cap + 1];
    let error = sent_ask(&sent, &over).unwrap_err();
    assert_eq!((error.code, error.message), (Code::RequestTooLarge, format!("the body is over {cap} bytes")));
    let within = br#"{"turn":1,"status":"running"}"#;
    assert!(sent_ask(&sent, within).is_ok(), "a report within the cap is read");
}

#[test]
fn a_body_of_undeclared_length_is_streamed_and_given_up_as_soon_as_it_passes_the_cap() {
    let post = BodyRules { cap: 10, bodiless: false };
    assert_eq!(post.before(None, None, || true), Ok(Body::Undeclared));
    assert_eq!(post.before(None, None, || false), Ok(Body::Empty));
    assert_eq!(post.before(Some("0"), None, || false), Ok(Body::Empty));
    assert_eq!(post.chunk(4, 6), Ok(()));
    let error = post.chunk(4, 7).unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (Code::RequestTooLarge, "the body is over 10 bytes"));
}

#[test]
fn a_routes_body_rules_are_its_cap_and_whether_it_is_a_get() {
    let rules = |method: &str, path: &str| admitted(&head(method, path, Some(&owner())), &setting()).unwrap().body();
    assert_eq!(rules("POST", "/v1/handoffs"), BodyRules { cap: WORDS_BODY_BYTES_MAX, bodiless: false });
    assert_eq!(rules("GET", "/v1/handoffs"), BodyRules { cap: BODY_BYTES_MAX, bodiless: true });
    assert_eq!(rules("DELETE", &format!("/v1/handoffs/{HID}")), BodyRules { cap: BODY_BYTES_MAX, bodiless: false });
}

// A create.

#[test]
fn a_create_mints_its_machine_token_under_the_verified_key_its_inc_now_ms_the_new_lifes() {
    let create = head("POST", "/v1/handoffs", Some(&owner()));
    let (name, ask, carrier) = next(&create, br#"{"session": "s1", "machine": "m1", "size": "small"}"#).unwrap();
    assert_eq!(name, input::handoff_id("alice", "s1"));
    assert_eq!(carrier, Carrier::Rpc);
    let Op::Create { id, machine_token, incarnation, session, machine, size, prompt, placement } = ask.op else {
        panic!("{:?}", ask.op)
    };
    assert!(placement.is_empty());
    assert_eq!(
        (id.as_str(), session.as_str(), machine.as_str(), size.as_str(), prompt),
        (name.as_str(), "s1", "m1", "small", None)
    );
    assert_eq!(incarnation, NOW_MS as u64);
    let claims = token::verify(&machine_token, KEY.as_bytes(), NOW_S).unwrap();
    assert_eq!(
        (claims.role, claims.hid.as_deref(), claims.inc),
        (Role::Machine, Some(name.as_str()), Some(NOW_MS as u64))
    );
    assert_eq!(claims.exp, NOW_S + MACHINE_TOKEN_TTL_S);
    assert_eq!((ask.caller.owner.as_str(), ask.caller.role, ask.idempotency), ("alice", Role::Owner, None));
}

#[test]
fn a_create_carries_its_workspace_runtime_model_and_permission_mode_and_refuses_a_bad_one_by_its_field() {
    let create = head("POST", "/v1/handoffs", Some(&owner()));
    let body = br#"{"session": "s1", "machine": "m1", "size": "small", "workspace": "api", "runtime": "codex", "model": "gpt-5-codex", "requested_permission_mode": "untrusted"}"#;
    let (_, ask, _) = next(&create, body).unwrap();
    let Op::Create { placement, .. } = ask.op else { panic!("{:?}", ask.op) };
    assert_eq!(
        (placement.workspace.as_deref(), placement.runtime.as_deref(), placement.model.as_deref()),
        (Some("api"), Some("codex"), Some("gpt-5-codex"))
    );
    assert_eq!(placement.requested_permission_mode.as_deref(), Some("untrusted"));
    for (field, body) in [
        ("workspace", &br#"{"session": "s1", "machine": "m1", "size": "small", "workspace": "a b"}"#[..]),
        ("model", br#"{"session": "s1", "machine": "m1", "size": "small", "model": ""}"#),
        ("runtime", br#"{"session": "s1", "machine": "m1", "size": "small", "runtime": "c/d"}"#),
    ] {
        let e = input::parse_create(body).unwrap_err();
        assert_eq!(e.code, Code::RequestInvalid);
        assert!(e.message.starts_with(field), "{field}: {}", e.message);
    }
}

#[test]
fn the_owners_machine_token_route_mints_a_token_for_that_hand_off_and_a_machine_token_may_not() {
    let id = input::handoff_id("alice", "s1");
    let path = format!("/v1/handoffs/{id}/machine-token");
    let (name, ask, _) = next(&head("POST", &path, Some(&owner())), b"").unwrap();
    assert_eq!(name, id);
    let Op::MachineToken { machine_token, incarnation, .. } = ask.op else { panic!("{:?}", ask.op) };
    assert_eq!(incarnation, NOW_MS as u64);
    let claims = token::verify(&machine_token, KEY.as_bytes(), NOW_S).unwrap();
    assert_eq!(
        (claims.role, claims.hid.as_deref(), claims.inc),
        (Role::Machine, Some(id.as_str()), Some(NOW_MS as u64))
    );
    let refused = next(&head("POST", &path, Some(&machine(&id))), b"").unwrap_err();
    assert_eq!(refused.code, Code::AuthForbidden);
}

#[test]
fn a_create_mints_with_the_deployments_issuer_and_audience() {
    let expect = Expect { issuer: Some("https://id.example".into()), audience: Some("handoff".into()) };
    let strict = Setting { expect: expect.clone(), ..setting() };
    let claims =
        Claims { sub: "alice".into(), role: Role::Owner, hid: None, exp: NOW_S + 60, nbf: None, inc: None, mch: None };
    let create = head("POST", "/v1/handoffs", Some(&token::mint_with(&claims, &expect, KEY.as_bytes())));
    let admission = admitted(&create, &strict).unwrap();
    let body = br#"{"session": "s1", "machine": "m1", "size": "small"}"#;
    let created = admission.next(&create, body, admission.create_input(body).unwrap(), &strict, || NOW_MS, &ones);
    let Ok(Next::Send { sent, .. }) = created else { panic!("a create") };
    let Ok(Ask { op: Op::Create { machine_token, .. }, .. }) = sent_ask(&sent, body) else { panic!("a create") };
    assert!(token::verify_with(&machine_token, KEY.as_bytes(), NOW_S, &expect).is_ok());
}

#[test]
fn a_create_at_a_clock_before_the_epoch_takes_life_zero() {
    let create = head("POST", "/v1/handoffs", Some(&owner()));
    let admission = admitted(&create, &setting()).unwrap();
    let body = br#"{"session": "s1", "machine": "m1", "size": "small"}"#;
    let created = admission.next(&create, body, admission.create_input(body).unwrap(), &setting(), || -5, &ones);
    let Ok(Next::Send { sent, .. }) = created else { panic!("a create") };
    assert!(matches!(sent_ask(&sent, body), Ok(Ask { op: Op::Create { incarnation: 0, .. }, .. })));
}

#[test]
fn a_creates_body_is_read_before_it_is_counted_and_a_create_without_one_is_invalid() {
    let create = head("POST", "/v1/handoffs", Some(&owner()));
    let admission = admitted(&create, &setting()).unwrap();
    assert_eq!(admission.create_input(b"{}").unwrap_err().code, Code::RequestInvalid);
    assert!(admission.create_input(br#"{"session": "s1", "machine": "m1", "size": "small"}"#).unwrap().is_some());
    let missing = admission.next(&create, b"", None, &setting(), || NOW_MS, &ones);
    assert!(matches!(missing, Err(e) if e.message == "body: expected a JSON object"));
    let get = admitted(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&owner())), &setting()).unwrap();
    assert_eq!(get.create_input(b"not json").unwrap(), None, "only a create reads a create's body");
}

#[test]
fn only_an_owners_create_counts_against_the_owners_creations_per_minute() {
    assert_eq!(admitted(&head("POST", "/v1/handoffs", Some(&owner())), &setting()).unwrap().counted(), Some("alice"));
    assert_eq!(admitted(&head("POST", "/v1/handoffs", Some(&machine(HID))), &setting()).unwrap().counted(), None);
    assert_eq!(admitted(&head("GET", "/v1/handoffs", Some(&owner())), &setting()).unwrap().counted(), None);
    let limited = rate_limited();
    assert_eq!((limited.code, limited.message.as_str()), (Code::OwnerRateLimited, format!("this owner may create {CREATES_PER_OWNER_PER_MINUTE_MAX} hand-offs per minute; try again in {CREATES_PER_OWNER_PERIOD_S} s").as_str()));
}

// A hand-off's ask.

#[test]
fn a_hand_off_a_token_cannot_reach_is_not_found_before_its_object_wakes() {
    let other = "ho_ffffffffffffffffffffffffffffffff";
    assert_eq!(
        next(&head("GET", &format!("/v1/handoffs/{other}"), Some(&machine(HID))), b"").unwrap_err().code,
        Code::HandoffNotFound
    );
    assert_eq!(
        next(&head("GET", "/v1/handoffs/ho_nope", Some(&owner())), b"").unwrap_err().code,
        Code::HandoffNotFound
    );
    let (name, ask, _) = next(&head("GET", &format!("/v1/handoffs/{other}"), Some(&owner())), b"").unwrap();
    assert_eq!((name.as_str(), ask.op), (other, Op::Get));
    let (name, _, _) = next(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&machine(HID))), b"").unwrap();
    assert_eq!(name, HID);
}

#[test]
fn a_machines_ask_carries_its_tokens_hand_off_and_life_and_an_owners_every_life() {
    let (_, ask, _) = next(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&machine(HID))), b"").unwrap();
    let life = (NOW_MS - 1000) as u64;
    assert_eq!(
        ask.caller,
        Caller { owner: "alice".into(), role: Role::Machine, incarnation: life, hid: Some(HID.into()) }
    );
    let (_, ask, _) = next(&head("GET", &format!("/v1/handoffs/{HID}"), Some(&owner())), b"").unwrap();
    assert_eq!(ask.caller, Caller { owner: "alice".into(), role: Role::Owner, incarnation: 0, hid: None });
}

#[test]
fn a_watch_is_held_to_its_tokens_exp_and_the_skew_and_to_the_subprotocol_it_offered() {
    let offered = format!("handoff.v1, bearer.{}", owner());
    let (_, ask, carrier) = next(&watch(None, Some(&offered), Some("websocket")), b"").unwrap();
    assert_eq!(carrier, Carrier::Upgrade);
    let until_s = NOW_S + 3600 + TOKEN_CLOCK_SKEW_S;
    assert_eq!(ask.op, Op::Watch { after: 0, valid_until_s: until_s, subprotocol: true, timeline: None });
    let (_, ask, _) = next(&watch(Some(&owner()), None, Some(" WebSocket ")), b"").unwrap();
    assert!(matches!(ask.op, Op::Watch { subprotocol: false, .. }));
    let claims = token::verify(&owner(), KEY.as_bytes(), NOW_S).unwrap();
    assert_eq!(valid_until_s(&Claims { exp: i64::MAX, ..claims }), i64::MAX);
}

#[test]
fn a_watch_offering_handoff_v2_follows_the_timeline_from_where_it_says_and_v1_may_not_name_it() {
    let offered = format!("handoff.v1, handoff.v2, bearer.{}", owner());
    let mut head = watch(None, Some(&offered), Some("websocket"));
    head.url = format!("{}?after=3&turn=2&seq=5", head.url);
    let (_, ask, _) = next(&head, b"").unwrap();
    let seen = handoff_core::watch::Seen { turn: 2, seq: 5 };
    assert!(matches!(ask.op, Op::Watch { after: 3, subprotocol: true, timeline: Some(s), .. } if s == seen));
    let fresh = next(&watch(None, Some(&offered), Some("websocket")), b"").unwrap().1;
    assert!(matches!(fresh.op, Op::Watch { timeline: Some(s), .. } if s == Default::default()), "none seen yet");
    let v1 = format!("handoff.v1, bearer.{}", owner());
    let mut head = watch(None, Some(&v1), Some("websocket"));
    head.url = format!("{}?turn=2&seq=5", head.url);
    assert_eq!(next(&head, b"").unwrap_err().code, Code::RequestInvalid, "a v1 watch follows no timeline");
}

#[test]
fn a_watch_asked_for_without_the_upgrade_is_426_after_every_other_refusal() {
    let bare = watch(Some(&owner()), None, None);
    let error = next(&bare, b"").unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (Code::UpgradeRequired, "a watch is a WebSocket: send Upgrade: websocket (or use /wait)")
    );
    assert_eq!(next(&watch(Some(&owner()), None, Some("h2c")), b"").unwrap_err().code, Code::UpgradeRequired);
    let mut bad_query = bare.clone();
    bad_query.url.push_str("?after=x");
    assert_eq!(next(&bad_query, b"").unwrap_err().code, Code::RequestInvalid, "a bad query before 426");
    let mut unreachable = bare.clone();
    unreachable.url = unreachable.url.replace(HID, "ho_nope");
    assert_eq!(next(&unreachable, b"").unwrap_err().code, Code::HandoffNotFound, "404 before 426");
}

#[test]
fn a_held_wait_goes_by_fetch_a_watch_as_its_upgrade_and_every_other_ask_over_rpc() {
    let wait = Op::Wait { after: 0, timeout_s: 30 };
    assert_eq!(carrier(&wait, Transport::Ask), Carrier::Fetch);
    assert_eq!(carrier(&Op::Get, Transport::Ask), Carrier::Rpc);
    assert_eq!(carrier(&Op::Get, Transport::Upgrade), Carrier::Upgrade);
    let (_, _, by) = next(&head("GET", &format!("/v1/handoffs/{HID}/wait"), Some(&owner())), b"").unwrap();
    assert_eq!(by, Carrier::Fetch);
    let (_, _, by) = next(&head("POST", &format!("/v1/handoffs/{HID}/close"), Some(&owner())), b"{}").unwrap();
    assert_eq!(by, Carrier::Rpc);
}

#[test]
fn a_change_sent_with_an_idempotency_key_carries_its_requests_fingerprint_and_a_read_none() {
    let mut close = head("POST", &format!("/v1/handoffs/{HID}/close?b=2&a=1"), Some(&owner()));
    close.idempotency_key = Some("key-1".into());
    let (_, ask, _) = next(&close, b"{}").unwrap();
    let fingerprint =
        input::request_fingerprint("POST", &format!("/v1/handoffs/{HID}/close"), "b=2&a=1", "owner", b"{}");
    assert_eq!(ask.idempotency, Some(Idempotency { key: "key-1".into(), fingerprint }));
    close.idempotency_key = Some("a key with spaces".into());
    let error = next(&close, b"{}").unwrap_err();
    assert_eq!(error.message, "Idempotency-Key: 1-128 printable ASCII characters without spaces");
    let mut get = head("GET", &format!("/v1/handoffs/{HID}"), Some(&owner()));
    get.idempotency_key = Some("a key with spaces".into());
    assert_eq!(next(&get, b"").unwrap().1.idempotency, None);
}

// The Worker's other routes.

fn index(method: &str, path: &str, body: &[u8], setting: &Setting) -> Result<IndexAsk, ApiError> {
    let mut head = head(method, path, Some(&owner()));
    head.if_none_match = Some("\"held\"".into());
    let admission = admitted(&head, setting)?;
    match admission.next(&head, body, None, setting, || NOW_MS, &ones)? {
        Next::Index { owner, ask } => {
            assert_eq!(owner, "alice", "the caller's own index");
            index_reads(ask, setting)
        }
        _ => panic!("{method} {path} asks the index"),
    }
}

/// What the index reads of what the router sent it, after it travelled as text.
fn index_reads(ask: ToIndex, setting: &Setting) -> Result<IndexAsk, ApiError> {
    let wire = crate::protocol::encode(&ask).unwrap();
    read_index(crate::protocol::decode(&wire).unwrap(), setting, || NOW_MS, &ones)
}

#[test]
fn an_index_route_asks_the_callers_own_index_with_the_request_the_time_and_fresh_randomness() {
    let list = index("GET", "/v1/handoffs?limit=5", b"", &setting()).unwrap();
    assert!(
        matches!(&list, IndexAsk::List { if_none_match: Some(tag), query } if tag == "\"held\"" && query.limit == 5),
        "{list:?}"
    );
    let added = index("POST", "/v1/webhooks", br#"{"url": "http://127.0.0.1:9/hook"}"#, &setting()).unwrap();
    let IndexAsk::WebhookAdd { webhook, .. } = added else { panic!("{added:?}") };
    assert_eq!(webhook.created_at, handoff_core::time::Timestamp::from_ms(NOW_MS));
    assert_eq!(webhook.id, crate::notifications::webhook_id([1; crate::notifications::WEBHOOK_ID_BYTES]));
    let deployed = Setting { endpoints: Environment::Deployed, ..setting() };
    assert_eq!(
        index("POST", "/v1/webhooks", br#"{"url": "http://127.0.0.1:9/hook"}"#, &deployed).unwrap_err().code,
        Code::RequestInvalid,
        "a deployed Worker sends to no loopback"
    );
    let id = "wh_AAAAAAAAAAAAAAAAAAAA-_";
    assert!(
        matches!(index("DELETE", &format!("/v1/webhooks/{id}"), b"", &setting()), Ok(IndexAsk::WebhookDelete { id: i }) if i == id)
    );
}

#[test]
fn the_index_push_routes_are_push_misconfigured_where_no_vapid_key_is_set() {
    let unset = Setting { push_key: None, ..setting() };
    assert_eq!(index("GET", "/v1/push/subscriptions", b"", &unset).unwrap_err().code, Code::PushMisconfigured);
    assert!(matches!(index("GET", "/v1/push/subscriptions", b"", &setting()), Ok(IndexAsk::PushSubscriptions)));
}

#[test]
fn the_push_key_is_push_misconfigured_before_its_query_is_read() {
    let key = |path: &str, setting: &Setting| {
        let head = head("GET", path, Some(&owner()));
        let admission = admitted(&head, setting).unwrap();
        admission
            .next(&head, b"", None, setting, || unreachable!(), &ones)
            .map(|n| matches!(n, Next::PushKey { pkcs8 } if pkcs8 == b"pkcs8"))
    };
    let unset = Setting { push_key: None, ..setting() };
    assert_eq!(key("/v1/push/key?x=1", &unset).unwrap_err().code, Code::PushMisconfigured);
    assert_eq!(key("/v1/push/key?x=1", &setting()).unwrap_err().message, "x: unknown query parameter");
    assert_eq!(key("/v1/push/key", &setting()), Ok(true));
}

#[test]
fn the_object_starts_hook_takes_no_query() {
    let hooks = Setting { test_hooks: true, ..setting() };
    let starts = |path: &str| {
        let head = head("GET", path, Some(&owner()));
        admitted(&head, &hooks)
            .unwrap()
            .next(&head, b"", None, &hooks, || unreachable!(), &ones)
            .map(|n| matches!(n, Next::ObjectStarts))
    };
    assert_eq!(starts("/v1/test/object-starts"), Ok(true));
    assert_eq!(starts("/v1/test/object-starts?x").unwrap_err().code, Code::RequestInvalid);
}

// Devices: the refresh is the one route a cookie authenticates, behind its CSRF defence.

fn refresh_head(header: Option<&str>, origin: Option<&str>, cookie: Option<&str>) -> Head {
    let mut head = head("POST", "/v1/devices/refresh", None);
    head.refresh = header.map(str::to_string);
    head.origin = origin.map(str::to_string);
    head.cookie = cookie.map(str::to_string);
    head
}

fn credential() -> crate::device::Credential {
    crate::device::Credential::new("alice", [3; crate::device::DEVICE_ID_BYTES], [4; crate::device::SECRET_BYTES])
}

#[test]
fn a_refresh_needs_its_header_its_own_origin_and_a_credential_and_asks_the_credentials_owner_for_a_fresh_token() {
    let me = Some("https://handoff.example");
    let set = credential().set_cookie("https://handoff.example");
    let cookie = set.split(';').next().unwrap().to_string();
    assert_eq!(refused(&refresh_head(None, me, Some(&cookie)), &setting()), Code::AuthForbidden, "no header");
    assert_eq!(
        refused(&refresh_head(Some("1"), Some("https://evil.example"), Some(&cookie)), &setting()),
        Code::AuthForbidden,
        "another origin"
    );
    assert_eq!(refused(&refresh_head(Some("1"), None, Some(&cookie)), &setting()), Code::AuthForbidden, "no origin");
    assert_eq!(refused(&refresh_head(Some("1"), me, None), &setting()), Code::AuthRequired, "no credential");
    // A bearer token is no credential here: the refresh reads the cookie alone.
    let mut bearer = refresh_head(Some("1"), me, None);
    bearer.authorization = Some(format!("Bearer {}", owner()));
    assert_eq!(refused(&bearer, &setting()), Code::AuthRequired);

    let head = refresh_head(Some("1"), me, Some(&cookie));
    let admission = admitted(&head, &setting()).unwrap();
    let Next::Index { owner, ask } = admission.next(&head, b"", None, &setting(), || NOW_MS, &ones).unwrap() else {
        panic!("a refresh asks the owner's index")
    };
    assert_eq!(owner, "alice");
    let ask = index_reads(ask, &setting()).unwrap();
    let IndexAsk::DeviceRefresh(id, secret_hash, granted) = ask else { panic!("{ask:?}") };
    assert_eq!((id, secret_hash), (credential().device, credential().secret_hash()));
    let (claims, device) =
        token::verify_caller(&granted.access_token, KEY.as_bytes(), NOW_S, &Expect::default()).unwrap();
    assert_eq!((claims.sub.as_str(), device), ("alice", Some(credential().device)));
    assert_eq!((claims.exp, granted.cookie), (NOW_S + handoff_core::limits::ACCESS_TOKEN_TTL_S, None));
}

#[test]
fn a_devices_access_token_is_an_owners_everywhere_but_signing_a_device_in() {
    let access = token::access_token("alice", &credential().device, KEY.as_bytes(), NOW_S, &Expect::default());
    let read = head("GET", &format!("/v1/handoffs/{HID}"), Some(&access));
    assert!(next(&read, b"").is_ok(), "an owner's token on a hand-off's route");
    let sign_in = head("POST", "/v1/devices", Some(&access));
    let admission = admitted(&sign_in, &setting()).unwrap();
    let Ok(Next::Index { ask, .. }) = admission.next(&sign_in, b"{}", None, &setting(), || NOW_MS, &ones) else {
        panic!("sent to the index")
    };
    assert_eq!(index_reads(ask, &setting()).unwrap_err().code, Code::AuthForbidden);
    let by_owner = head("POST", "/v1/devices", Some(&owner()));
    let admission = admitted(&by_owner, &setting()).unwrap();
    let Ok(Next::Index { ask, .. }) = admission.next(&by_owner, b"{}", None, &setting(), || NOW_MS, &ones) else {
        panic!("sent to the index")
    };
    assert!(matches!(index_reads(ask, &setting()), Ok(IndexAsk::DeviceSignIn(..))));
    assert_eq!(refused_code(&head("POST", "/v1/devices", Some(&machine(HID)))), Code::AuthForbidden, "not a machine");
}

fn refused_code(head: &Head) -> Code {
    refused(head, &setting())
}

#[test]
fn a_body_is_read_once_by_the_object_and_a_gets_query_by_the_router_too() {
    let report = head("POST", &format!("/v1/handoffs/{HID}/report"), Some(&machine(HID)));
    let admission = admitted(&report, &setting()).unwrap();
    let Ok(Next::Send { sent, carrier, .. }) = admission.next(&report, b"not json", None, &setting(), || NOW_MS, &ones)
    else {
        panic!("a body is sent unread")
    };
    assert_eq!(carrier, Carrier::Rpc);
    assert_eq!(sent_ask(&sent, b"not json").unwrap_err().code, Code::RequestInvalid);
    let body = br#"{"turn": 1, "status": "running"}"#;
    assert!(matches!(sent_ask(&sent, body).unwrap().op, Op::Change { .. }));
    let wait = head("GET", &format!("/v1/handoffs/{HID}/wait?after=x"), Some(&owner()));
    let admission = admitted(&wait, &setting()).unwrap();
    let refused = admission.next(&wait, b"", None, &setting(), || NOW_MS, &ones);
    assert!(matches!(refused, Err(e) if e.code == Code::RequestInvalid), "refused before the object wakes");
}

#[test]
fn an_owners_request_is_read_once_by_its_index_and_a_body_that_is_not_text_by_the_router() {
    let mut add = head("POST", "/v1/webhooks", Some(&owner()));
    add.if_none_match = None;
    let admission = admitted(&add, &setting()).unwrap();
    let Ok(Next::Index { ask: ToIndex::Sent(sent), .. }) =
        admission.next(&add, b"{", None, &setting(), || NOW_MS, &ones)
    else {
        panic!("sent unread")
    };
    assert_eq!(sent.body, "{");
    let refused = admission.next(&add, b"\xff{", None, &setting(), || NOW_MS, &ones).unwrap_err();
    assert_eq!(refused.code, Code::RequestInvalid, "refused by the router");
}

/// What a machine credential's request on `path` asks its owner's `Machines` object.
fn machines_ask(method: &str, path: &str, body: &[u8]) -> Result<MachinesAsk, ApiError> {
    let credential = token::machine_credential("alice", "vm-1", 5_000, KEY.as_bytes(), NOW_S, &Expect::default());
    let head = head(method, path, Some(&credential));
    let admission = admitted(&head, &setting())?;
    match admission.next(&head, body, None, &setting(), || NOW_MS, &ones)? {
        Next::Machines { owner, ask } => {
            assert_eq!(owner, "alice", "the credential's owner's object");
            Ok(ask)
        }
        _ => panic!("{method} {path} asks no Machines object"),
    }
}

#[test]
fn a_credentials_follow_holds_its_timeout_in_ms_and_only_the_hand_offs_list_takes_a_query() {
    let list = machines_ask("GET", "/v1/machine/handoffs", b"").unwrap();
    assert_eq!(list, MachinesAsk::Handoffs("vm-1".into(), 5_000));
    let follow = machines_ask("GET", "/v1/machine/handoffs?after=3&timeout=7", b"").unwrap();
    assert_eq!(follow, MachinesAsk::Follow("vm-1".into(), 5_000, 3, 7_000), "the timeout's seconds as ms");
    let presence = br#"{"workspaces": [], "runtimes": [], "sessions": []}"#;
    let refused = machines_ask("POST", "/v1/machine/presence?after=3", presence).unwrap_err();
    assert_eq!(refused.code, Code::RequestInvalid, "no other machine route takes a query");
    assert!(matches!(machines_ask("POST", "/v1/machine/presence", presence), Ok(MachinesAsk::Presence(..))));
}

#[test]
fn an_owners_create_is_placed_on_its_machine_before_and_listed_for_it_after_and_no_other_create_is() {
    let body = br#"{"session": "s1", "machine": "m1", "size": "small", "workspace": "api"}"#;
    let create = input::parse_create(body).unwrap();
    let admission = admitted(&head("POST", "/v1/handoffs", Some(&owner())), &setting()).unwrap();
    let (owner, place) = admission.place(&create).expect("an owner's create is placed");
    assert_eq!((owner, place), ("alice", MachinesAsk::Place("m1".into(), create.placement())));
    let (owner, listed) = admission.listed(&create).expect("and listed once created");
    assert_eq!((owner, listed), ("alice", MachinesAsk::Listed("m1".into(), input::handoff_id("alice", "s1"))));
    let report = admitted(&head("POST", &format!("/v1/handoffs/{HID}/report"), Some(&machine(HID))), &setting());
    let report = report.unwrap();
    assert!(report.place(&create).is_none() && report.listed(&create).is_none(), "only a create is placed");
}
