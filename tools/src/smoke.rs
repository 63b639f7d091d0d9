//! The post-deploy smoke: the routes in release-smoke.json, what each must answer where the
//! store is bound and where it is not, and the verdict on an answer.
//!
//! **Architecture Invariant:** nothing here does I/O. The binary sends the requests and hands
//! each `Answer` to `judge`; a test can judge any answer without a server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;

/// Routes one file may hold: a smoke is a handful of checks, not a test suite.
pub const ROUTES_MAX: usize = 64;
/// The route that says whether this deployment has the store.
pub const HEALTH_PATH: &str = "/v1/health";
/// Methods a route may use.
pub const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// Characters of an unexpected answer's body shown on a failing line.
pub const BODY_SHOWN_CHARS_MAX: usize = 160;

/// Whether the deployment binds the hand-off Durable Objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    Bound,
    Unbound,
}

impl Store {
    pub fn parse(text: &str) -> Option<Store> {
        match text {
            "bound" => Some(Store::Bound),
            "unbound" => Some(Store::Unbound),
            _ => None,
        }
    }
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Store::Bound => "bound",
            Store::Unbound => "unbound",
        })
    }
}

/// release-smoke.json.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Routes {
    pub routes: Vec<Route>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub name: String,
    pub method: String,
    pub path: String,
    /// Extra request headers, e.g. a deliberately bad `Authorization`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Sent as JSON when present.
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    pub bound: Expect,
    pub unbound: Expect,
    pub why: String,
}

impl Route {
    pub fn expect(&self, store: Store) -> &Expect {
        match store {
            Store::Bound => &self.bound,
            Store::Unbound => &self.unbound,
        }
    }
}

/// What a route must answer in one kind of deployment.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub status: u16,
    /// When set, the body must be `{"error": {"code": <this>, …}}`.
    #[serde(default)]
    pub code: Option<String>,
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} {code}", self.status),
            None => write!(f, "{}", self.status),
        }
    }
}

/// What came back for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Http { status: u16, body: String },
    /// No HTTP answer at all: refused connection, timeout, TLS failure.
    Transport(String),
}

impl Answer {
    /// `error.code` of a JSON error body.
    pub fn error_code(&self) -> Option<String> {
        let Answer::Http { body, .. } = self else { return None };
        let value: serde_json::Value = serde_json::from_str(body).ok()?;
        value.get("error")?.get("code")?.as_str().map(str::to_string)
    }
}

/// The verdict on one route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub pass: bool,
    pub line: String,
}

pub fn parse_routes(text: &str) -> Result<Routes, String> {
    let routes: Routes =
        serde_json::from_str(text).map_err(|e| format!("release-smoke.json: {e}"))?;
    check_routes(&routes)?;
    Ok(routes)
}

/// A routes file that could not mean what its author meant is an error, not a failing smoke.
fn check_routes(routes: &Routes) -> Result<(), String> {
    if routes.routes.is_empty() {
        return Err("release-smoke.json: no routes".to_string());
    }
    if routes.routes.len() > ROUTES_MAX {
        return Err(format!("release-smoke.json: more than {ROUTES_MAX} routes"));
    }
    let mut names = BTreeSet::new();
    for route in &routes.routes {
        let name = &route.name;
        if name.trim().is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("release-smoke.json: route name {name:?} must be one word"));
        }
        if !names.insert(name.as_str()) {
            return Err(format!("release-smoke.json: route {name} appears twice"));
        }
        if !METHODS.contains(&route.method.as_str()) {
            return Err(format!("release-smoke.json: route {name}: method {} is not one of {METHODS:?}", route.method));
        }
        if !route.path.starts_with('/') {
            return Err(format!("release-smoke.json: route {name}: path must start with /"));
        }
        let no_body = route.method == "GET" || route.method == "HEAD";
        if no_body && route.body.is_some() {
            return Err(format!("release-smoke.json: route {name}: {} takes no body", route.method));
        }
        for expect in [&route.bound, &route.unbound] {
            if !(100..=599).contains(&expect.status) {
                return Err(format!("release-smoke.json: route {name}: status {} is not HTTP", expect.status));
            }
        }
        if route.why.trim().is_empty() {
            return Err(format!("release-smoke.json: route {name}: say why it is checked"));
        }
    }
    Ok(())
}

/// What `GET /v1/health` says about the store: `{"ok": true, "store": "bound"|"unbound"}`.
pub fn health_store(answer: &Answer) -> Result<Store, String> {
    let Answer::Http { status, body } = answer else {
        let Answer::Transport(error) = answer else { unreachable!() };
        return Err(format!("no answer: {error}"));
    };
    if *status != 200 {
        return Err(format!("status {status}"));
    }
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|_| format!("a body that is not JSON: {}", shown(body)))?;
    let ok = value.get("ok").and_then(serde_json::Value::as_bool) == Some(true);
    let store = value.get("store").and_then(serde_json::Value::as_str).and_then(Store::parse);
    match (ok, store) {
        (true, Some(store)) => Ok(store),
        _ => Err(format!("not {{\"ok\": true, \"store\": \"bound\"|\"unbound\"}}: {}", shown(body))),
    }
}

/// Judges one answer. A 5xx never passes, whatever the file says.
pub fn judge(route: &Route, store: Store, answer: &Answer) -> Verdict {
    let expect = route.expect(store);
    let (pass, got) = match answer {
        Answer::Transport(error) => (false, format!("no answer ({error})")),
        Answer::Http { status, body } => {
            let code = answer.error_code();
            let status_ok = *status == expect.status && *status < 500;
            let code_ok = expect.code.is_none() || code == expect.code;
            let got = match &code {
                Some(code) => format!("{status} {code}"),
                None => status.to_string(),
            };
            let pass = status_ok && code_ok;
            let got = if pass { got } else { format!("{got} {}", shown(body)) };
            (pass, got)
        }
    };
    let word = if pass { "pass" } else { "FAIL" };
    let line = format!(
        "{word}  {:<24} {} {}  expected {expect}  got {got}",
        route.name, route.method, route.path
    );
    Verdict { pass, line }
}

/// The store line: what the run expects, what /v1/health said, and whether they agree.
pub fn judge_store(expected: Option<Store>, health: &Result<Store, String>) -> (Option<Store>, Verdict) {
    match (expected, health) {
        (Some(expected), Ok(said)) => {
            let pass = expected == *said;
            let word = if pass { "pass" } else { "FAIL" };
            let line = format!(
                "{word}  {:<24} GET {HEALTH_PATH}  expected store {expected} (--expect)  got store {said}",
                "store"
            );
            (Some(expected), Verdict { pass, line })
        }
        (Some(expected), Err(problem)) => {
            let line = format!(
                "FAIL  {:<24} GET {HEALTH_PATH}  expected store {expected} (--expect)  got {problem}",
                "store"
            );
            (Some(expected), Verdict { pass: false, line })
        }
        (None, Ok(said)) => {
            let line = format!(
                "pass  {:<24} GET {HEALTH_PATH}  expected store bound|unbound  got store {said} (used as --expect)",
                "store"
            );
            (Some(*said), Verdict { pass: true, line })
        }
        (None, Err(problem)) => {
            let line = format!(
                "FAIL  {:<24} GET {HEALTH_PATH}  expected store bound|unbound  got {problem}; \
                 pass --expect to run the routes anyway",
                "store"
            );
            (None, Verdict { pass: false, line })
        }
    }
}

/// A body on one line, cut to `BODY_SHOWN_CHARS_MAX`.
fn shown(body: &str) -> String {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(empty body)".to_string();
    }
    let cut: String = flat.chars().take(BODY_SHOWN_CHARS_MAX).collect();
    if cut.len() < flat.len() {
        format!("({cut}…)")
    } else {
        format!("({cut})")
    }
}

#[cfg(test)]
mod tests;
