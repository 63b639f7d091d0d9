//! The smoke's verdicts and the checked-in route list, without a server.

use super::*;

const CHECKED_IN: &str = include_str!("../../../release-smoke.json");

fn route(bound: Expect, unbound: Expect) -> Route {
    Route {
        name: "report-unsigned".into(),
        method: "POST".into(),
        path: "/v1/handoffs/ho_1/report".into(),
        headers: BTreeMap::new(),
        body: None,
        token: None,
        bound: Expects(vec![bound]),
        unbound: Expects(vec![unbound]),
        why: "because".into(),
    }
}

fn expect(status: u16, code: Option<&str>) -> Expect {
    Expect { status, code: code.map(str::to_string) }
}

fn answer(status: u16, code: &str) -> Answer {
    Answer::Http { status, body: format!(r#"{{"error": {{"code": "{code}", "message": "m"}}}}"#) }
}

fn report() -> Route {
    route(expect(401, Some("auth.required")), expect(404, Some("store.unbound")))
}

#[test]
fn the_checked_in_routes_parse() {
    let routes = parse_routes(CHECKED_IN).expect("release-smoke.json is valid");
    assert!(routes.routes.len() >= 3);
}

fn checked_in(method: &str, path_start: &str, path_end: &str, authorized: bool) -> Route {
    let routes = parse_routes(CHECKED_IN).unwrap().routes;
    routes
        .into_iter()
        .find(|r| {
            r.method == method
                && r.path.starts_with(path_start)
                && r.path.ends_with(path_end)
                && r.token.is_none()
                && r.headers.contains_key("Authorization") == authorized
                && r.body.is_some() == (method == "POST")
        })
        .unwrap_or_else(|| panic!("release-smoke.json has no {method} {path_start}…{path_end}"))
}

#[test]
fn health_answers_200_where_the_store_is_bound_and_where_it_is_not() {
    let health = checked_in("GET", "/v1/health", "/v1/health", false);
    assert_eq!(
        (&health.bound, &health.unbound),
        (&Expects(vec![expect(200, None)]), &Expects(vec![expect(200, None)]))
    );
}

#[test]
fn an_unsigned_list_answers_401_where_the_store_is_bound_and_404_where_it_is_not() {
    let list = checked_in("GET", "/v1/handoffs", "/v1/handoffs", false);
    assert_eq!(list.bound, Expects(vec![expect(401, Some("auth.required"))]));
    assert_eq!(list.unbound, Expects(vec![expect(404, Some("store.unbound"))]));
}

#[test]
fn an_unsigned_report_answers_401_or_404_likewise_never_500() {
    let report = checked_in("POST", "/v1/handoffs/", "/report", false);
    assert_eq!(report.bound, Expects(vec![expect(401, Some("auth.required"))]));
    assert_eq!(report.unbound, Expects(vec![expect(404, Some("store.unbound"))]));
}

#[test]
fn a_route_passes_on_the_expected_status_and_code_for_its_store() {
    let route = report();
    assert!(judge(&route, Store::Bound, &answer(401, "auth.required")).pass);
    assert!(judge(&route, Store::Unbound, &answer(404, "store.unbound")).pass);
}

#[test]
fn a_route_fails_on_the_other_stores_answer() {
    let route = report();
    let verdict = judge(&route, Store::Bound, &answer(404, "store.unbound"));
    assert!(!verdict.pass);
    assert!(verdict.line.starts_with("FAIL  report-unsigned"), "{}", verdict.line);
    assert!(verdict.line.contains("expected 401 auth.required  got 404 store.unbound"), "{}", verdict.line);
}

#[test]
fn a_404_from_the_router_is_not_a_store_unbound() {
    let verdict = judge(&report(), Store::Unbound, &answer(404, "route.not_found"));
    assert!(!verdict.pass, "{}", verdict.line);
}

#[test]
fn a_500_never_passes_even_when_the_file_expects_it() {
    let route = route(expect(500, None), expect(500, None));
    let verdict = judge(&route, Store::Bound, &Answer::Http { status: 500, body: "boom".into() });
    assert!(!verdict.pass);
    assert!(verdict.line.contains("got 500 (boom)"), "{}", verdict.line);
}

#[test]
fn no_answer_is_a_failure_that_says_why() {
    let verdict = judge(&report(), Store::Bound, &Answer::Transport("connection refused".into()));
    assert!(!verdict.pass);
    assert!(verdict.line.ends_with("got no answer (connection refused)"), "{}", verdict.line);
}

#[test]
fn a_long_body_is_shown_cut_on_one_line() {
    let body = format!("line one\nline two {}", "x".repeat(500));
    let verdict = judge(&report(), Store::Bound, &Answer::Http { status: 502, body });
    assert!(verdict.line.contains("got 502 (line one line two xxx"), "{}", verdict.line);
    assert!(verdict.line.ends_with("…)"));
    assert!(verdict.line.len() < 400);
}

#[test]
fn health_says_which_store() {
    let said = |body: &str| health_of(body).map(|h| h.store);
    assert_eq!(said(r#"{"ok": true, "store": "bound"}"#), Ok(Store::Bound));
    assert_eq!(said(r#"{"ok": true, "store": "unbound", "auth": "ok"}"#), Ok(Store::Unbound));
    assert!(said(r#"{"ok": false, "store": "bound"}"#).is_err());
    assert!(said(r#"{"ok": true}"#).is_err());
    assert!(said("ok").is_err());
    assert!(health(&Answer::Http { status: 503, body: String::new() }).is_err());
    assert!(health(&Answer::Transport("refused".into())).is_err());
}

#[test]
fn expect_defaults_to_what_health_says() {
    let (store, verdict) = judge_store(None, &Ok(Store::Unbound));
    assert_eq!(store, Some(Store::Unbound));
    assert!(verdict.pass);
}

#[test]
fn expect_must_agree_with_health() {
    let (store, verdict) = judge_store(Some(Store::Bound), &Ok(Store::Unbound));
    assert_eq!(store, Some(Store::Bound), "the routes still run against what was expected");
    assert!(!verdict.pass);
    assert!(verdict.line.contains("expected store bound (--expect)  got store unbound"), "{}", verdict.line);
}

#[test]
fn without_expect_an_unusable_health_stops_the_run() {
    let (store, verdict) = judge_store(None, &Err("status 500".into()));
    assert_eq!(store, None);
    assert!(!verdict.pass);
}

#[test]
fn a_routes_file_that_cannot_mean_what_it_says_is_refused() {
    let one = |fields: &str| {
        format!(
            r#"{{"routes": [{{"name": "r", "method": "GET", "path": "/v1/health",
            "bound": {{"status": 200}}, "unbound": {{"status": 200}}, "why": "w"{fields}}}]}}"#
        )
    };
    assert!(parse_routes(&one("")).is_ok());
    assert!(parse_routes(&one(r#", "body": {}"#)).is_err(), "GET with a body");
    assert!(parse_routes(&one(r#", "expect": 200"#)).is_err(), "unknown field");
    assert!(parse_routes(&one("").replace("\"GET\"", "\"FETCH\"")).is_err());
    assert!(parse_routes(&one("").replace("\"/v1/health\"", "\"v1/health\"")).is_err());
    assert!(parse_routes(&one("").replace("\"why\": \"w\"", "\"why\": \" \"")).is_err());
    assert!(parse_routes(&one("").replace("200}, \"why", "999}, \"why")).is_err());
    assert!(parse_routes(r#"{"routes": []}"#).is_err());
    let route = r#"{"name": "r", "method": "GET", "path": "/", "bound": {"status": 404},
        "unbound": {"status": 404}, "why": "w"}"#;
    let twice = format!(r#"{{"routes": [{route}, {route}]}}"#);
    assert!(parse_routes(&twice).unwrap_err().contains("appears twice"));
}

/// The checked-in route named `name`.
fn named(name: &str) -> Route {
    let routes = parse_routes(CHECKED_IN).unwrap().routes;
    routes.into_iter().find(|r| r.name == name).unwrap_or_else(|| panic!("release-smoke.json has no route {name}"))
}

const NOW: i64 = 1_800_000_000;

#[test]
fn the_development_key_token_is_a_valid_owner_token_signed_with_the_public_key() {
    let route = named("list-development-key");
    assert_eq!(route.token, Some(Token::DevelopmentKey));
    let headers = route.request_headers(NOW);
    let token = headers["Authorization"].strip_prefix("Bearer ").expect("a bearer token");
    assert_eq!(DEVELOPMENT_KEY, handoff_api::token::DEV_SIGNING_KEY);
    let key = handoff_api::token::DEV_SIGNING_KEY.as_bytes();
    let claims = handoff_api::token::verify(token, key, NOW).expect("valid under the development key");
    assert_eq!(claims.role, handoff_api::token::Role::Owner);
    assert_eq!(claims.sub, TOKEN_OWNER);
    assert_eq!(claims.exp, NOW + TOKEN_TTL_S);
    assert_eq!(token, handoff_api::token::owner_token(TOKEN_OWNER, TOKEN_TTL_S, key, NOW), "byte for byte the core's");
    assert!(handoff_api::token::verify(token, b"another key of thirty-two bytes!", NOW).is_err());
}

#[test]
fn a_development_key_token_passes_only_when_refused_with_401_or_503_misconfigured() {
    let route = named("list-development-key");
    for store in [Store::Bound, Store::Unbound] {
        assert!(judge(&route, store, &answer(503, "auth.misconfigured")).pass);
        for refused in [answer(200, "none"), answer(201, "none"), answer(503, "store.unavailable")] {
            let verdict = judge(&route, store, &refused);
            assert!(!verdict.pass, "{}", verdict.line);
        }
        let no_code = Answer::Http { status: 503, body: String::new() };
        assert!(!judge(&route, store, &no_code).pass);
        let ok = Answer::Http { status: 200, body: r#"{"cursor": null, "handoffs": []}"#.into() };
        assert!(!judge(&route, store, &ok).pass);
    }
    assert!(judge(&route, Store::Bound, &answer(401, "auth.invalid")).pass);
    assert!(judge(&route, Store::Unbound, &answer(404, "store.unbound")).pass);
    let verdict = judge(&route, Store::Bound, &answer(200, "none"));
    assert!(verdict.line.contains("expected 401 auth.invalid or 503 auth.misconfigured  got 200"), "{}", verdict.line);
}

#[test]
fn the_bench_floor_and_every_test_route_answer_the_routers_404_on_every_deployment() {
    let routes = parse_routes(CHECKED_IN).unwrap().routes;
    let hooks: Vec<&Route> =
        routes.iter().filter(|r| r.path.starts_with("/v1/test/") || r.path.starts_with("/v1/bench/")).collect();
    let paths: Vec<(&str, &str)> = hooks.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
    for wanted in [("GET", "/v1/bench/floor"), ("POST", "/v1/test/refuse-index")] {
        assert!(paths.contains(&wanted), "{wanted:?} is not checked");
    }
    assert!(paths.iter().any(|(_, p)| p.starts_with("/v1/test/handoffs/")), "{paths:?}");
    let closed = Expects(vec![expect(404, Some("route.not_found"))]);
    for route in hooks {
        assert_eq!((&route.bound, &route.unbound), (&closed, &closed), "{}", route.name);
        assert!(route.token.is_none() && route.body.is_none(), "{}: the smoke never asks a hook to act", route.name);
        for store in [Store::Bound, Store::Unbound] {
            assert!(judge(route, store, &answer(404, "route.not_found")).pass);
            // An open hook answers something else: its auth, its store check, or itself.
            for open in [answer(401, "auth.required"), answer(404, "store.unbound"), answer(200, "none")] {
                assert!(!judge(route, store, &open).pass, "{} passed {open:?}", route.name);
            }
        }
    }
}

#[test]
fn a_5xx_passes_only_when_expected_with_its_code_and_a_500_never() {
    let misconfigured = expect(503, Some("auth.misconfigured"));
    assert!(misconfigured.accepts(503, Some("auth.misconfigured")));
    assert!(!misconfigured.accepts(503, Some("store.unavailable")));
    assert!(!misconfigured.accepts(503, None));
    assert!(!expect(503, None).accepts(503, None), "a bare 503 could be anything");
    assert!(!expect(500, Some("x")).accepts(500, Some("x")));
    assert!(expect(404, None).accepts(404, Some("anything")));
}

#[test]
fn expected_answers_are_one_object_or_a_short_list() {
    let with = |bound: &str| {
        format!(
            r#"{{"routes": [{{"name": "r", "method": "GET", "path": "/v1/handoffs",
            "bound": {bound}, "unbound": {{"status": 404}}, "why": "w"}}]}}"#
        )
    };
    let list = r#"[{"status": 401, "code": "auth.invalid"}, {"status": 503, "code": "auth.misconfigured"}]"#;
    assert_eq!(parse_routes(&with(list)).unwrap().routes[0].bound.0.len(), 2);
    assert!(parse_routes(&with(r#"{"status": 401}"#)).is_ok());
    assert!(parse_routes(&with("[]")).unwrap_err().contains("1 to 4 expected answers"));
    let five = format!("[{}]", [r#"{"status": 401}"#; 5].join(", "));
    assert!(parse_routes(&with(&five)).is_err());
    assert!(parse_routes(&with(r#"{"status": 500, "code": "x"}"#)).unwrap_err().contains("a 500 never passes"));
    assert!(parse_routes(&with(r#"[{"status": 401}, {"status": 503}]"#))
        .unwrap_err()
        .contains("only with its error code"));
    assert!(parse_routes(&with(r#"{"status": 401, "cod": "x"}"#)).unwrap_err().contains("unknown field"));
    assert!(parse_routes(&with("401")).is_err());
}

#[test]
fn a_route_has_a_token_or_an_authorization_header_not_both() {
    let route = |fields: &str| {
        format!(
            r#"{{"routes": [{{"name": "r", "method": "GET", "path": "/v1/handoffs",
            "bound": {{"status": 401}}, "unbound": {{"status": 404}}, "why": "w"{fields}}}]}}"#
        )
    };
    assert!(parse_routes(&route(r#", "token": "development-key""#)).is_ok());
    assert!(parse_routes(&route(r#", "token": "production-key""#)).is_err(), "only tokens anyone may sign");
    let both = route(r#", "token": "development-key", "headers": {"authorization": "Bearer x"}"#);
    assert!(parse_routes(&both).unwrap_err().contains("a token and an Authorization header"));
    let plain = &parse_routes(&route(r#", "headers": {"X-A": "b"}"#)).unwrap().routes[0];
    assert_eq!(plain.request_headers(NOW), BTreeMap::from([("X-A".to_string(), "b".to_string())]));
}

fn health_of(body: &str) -> Result<Health, String> {
    health(&Answer::Http { status: 200, body: body.into() })
}

#[test]
fn health_says_whether_the_signing_key_is_usable() {
    let said = health_of(r#"{"ok": true, "store": "bound", "auth": "ok"}"#);
    assert_eq!(said, Ok(Health { store: Store::Bound, auth: Some("ok".into()) }));
    let verdict = judge_auth(&said);
    assert!(verdict.pass);
    assert!(verdict.line.starts_with("pass  auth"), "{}", verdict.line);
    assert!(verdict.line.ends_with("GET /v1/health  expected auth ok  got auth ok"), "{}", verdict.line);
}

#[test]
fn a_deployment_with_a_misconfigured_key_fails_the_auth_line() {
    let said = health_of(r#"{"ok": true, "store": "unbound", "auth": "misconfigured"}"#);
    let verdict = judge_auth(&said);
    assert!(!verdict.pass);
    assert!(verdict.line.ends_with("expected auth ok  got auth misconfigured"), "{}", verdict.line);
    // The store is still read, so the routes run and show what the key breaks.
    assert_eq!(said.unwrap().store, Store::Unbound);
}

#[test]
fn a_health_answer_that_does_not_name_the_key_fails_the_auth_line() {
    let verdict = judge_auth(&health_of(r#"{"ok": true, "store": "bound"}"#));
    assert!(!verdict.pass);
    assert!(verdict.line.ends_with("got no auth in the health answer"), "{}", verdict.line);
    assert!(!judge_auth(&Err("status 500".into())).pass);
}

#[test]
fn a_config_whose_environments_expose_no_hook_passes_in_one_line() {
    let verdicts = judge_config("wrangler.toml", &[]);
    assert_eq!(verdicts.len(), 1);
    assert!(verdicts[0].pass);
    assert!(verdicts[0].line.starts_with("pass  config"), "{}", verdicts[0].line);
}

#[test]
fn every_hook_variable_of_a_deployable_environment_fails_the_smoke_by_name() {
    let exposed = [
        Exposure::HookVar { env: "development".into(), var: "HANDOFF_TEST_HOOKS".into() },
        Exposure::HookVar { env: "production".into(), var: "HANDOFF_BENCH_FLOOR".into() },
    ];
    let verdicts = judge_config("wrangler.toml", &exposed);
    assert_eq!(verdicts.len(), 2);
    assert!(verdicts.iter().all(|v| !v.pass));
    assert!(verdicts[0].line.starts_with("FAIL  config"), "{}", verdicts[0].line);
    assert!(
        verdicts[0].line.contains("wrangler.toml  env.development sets the hook variable HANDOFF_TEST_HOOKS"),
        "{}",
        verdicts[0].line
    );
    assert!(verdicts[1].line.contains("env.production sets the hook variable HANDOFF_BENCH_FLOOR"));
}
