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
        bound,
        unbound,
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
                && r.headers.contains_key("Authorization") == authorized
                && r.body.is_some() == (method == "POST")
        })
        .unwrap_or_else(|| panic!("release-smoke.json has no {method} {path_start}…{path_end}"))
}

#[test]
fn health_answers_200_where_the_store_is_bound_and_where_it_is_not() {
    let health = checked_in("GET", "/v1/health", "/v1/health", false);
    assert_eq!((health.bound.status, health.unbound.status), (200, 200));
}

#[test]
fn an_unsigned_list_answers_401_where_the_store_is_bound_and_404_where_it_is_not() {
    let list = checked_in("GET", "/v1/handoffs", "/v1/handoffs", false);
    assert_eq!(list.bound, expect(401, Some("auth.required")));
    assert_eq!(list.unbound, expect(404, Some("store.unbound")));
}

#[test]
fn an_unsigned_report_answers_401_or_404_likewise_never_500() {
    let report = checked_in("POST", "/v1/handoffs/", "/report", false);
    assert_eq!(report.bound, expect(401, Some("auth.required")));
    assert_eq!(report.unbound, expect(404, Some("store.unbound")));
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
    let said = |body: &str| health_store(&Answer::Http { status: 200, body: body.into() });
    assert_eq!(said(r#"{"ok": true, "store": "bound"}"#), Ok(Store::Bound));
    assert_eq!(said(r#"{"ok": true, "store": "unbound"}"#), Ok(Store::Unbound));
    assert!(said(r#"{"ok": false, "store": "bound"}"#).is_err());
    assert!(said(r#"{"ok": true}"#).is_err());
    assert!(said("ok").is_err());
    assert!(health_store(&Answer::Http { status: 503, body: String::new() }).is_err());
    assert!(health_store(&Answer::Transport("refused".into())).is_err());
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
