//! The post-deploy smoke: the routes in release-smoke.json, what each must answer where the
//! store is bound and where it is not, and the verdict on an answer; what `/v1/health` must
//! say about the store and the signing key; and the deployable environments' variables.
//!
//! **Architecture Invariant:** nothing here does I/O. The binary sends the requests and hands
//! each `Answer` to `judge`; a test can judge any answer without a server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;

use crate::hooks::Exposure;

/// Routes one file may hold: a smoke is a handful of checks, not a test suite.
pub const ROUTES_MAX: usize = 64;
/// The route that says whether this deployment has the store.
pub const HEALTH_PATH: &str = "/v1/health";
/// Methods a route may use.
pub const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// Characters of an unexpected answer's body shown on a failing line.
pub const BODY_SHOWN_CHARS_MAX: usize = 160;
/// Alternatives one route may accept: "401 or 503", not a catalogue.
pub const EXPECTS_MAX: usize = 4;
/// How long a token the smoke signs itself is valid: long enough for one run.
pub const TOKEN_TTL_S: i64 = 300;
/// The owner a token the smoke signs itself names.
pub const TOKEN_OWNER: &str = "release-smoke";

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
    /// A token the smoke signs itself and sends as `Authorization: Bearer …`.
    #[serde(default)]
    pub token: Option<Token>,
    pub bound: Expects,
    pub unbound: Expects,
    pub why: String,
}

impl Route {
    pub fn expect(&self, store: Store) -> &Expects {
        match store {
            Store::Bound => &self.bound,
            Store::Unbound => &self.unbound,
        }
    }

    /// The headers to send at `now_s`: the file's, and the `Authorization` of `token`.
    pub fn request_headers(&self, now_s: i64) -> BTreeMap<String, String> {
        let mut headers = self.headers.clone();
        if let Some(token) = self.token {
            headers.insert("Authorization".to_string(), format!("Bearer {}", token.sign(now_s)));
        }
        headers
    }
}

/// Tokens the smoke signs itself, with a key anyone can know; never a deployment's secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Token {
    /// An owner token, valid for `TOKEN_TTL_S` from now, signed with the public development
    /// key. A deployment must refuse it: 401 where its key is another, 503
    /// `auth.misconfigured` where its key is this one.
    #[serde(rename = "development-key")]
    DevelopmentKey,
}

/// The public development key: `DEV_SIGNING_KEY` in src/token.rs and scripts/env.sh (a test
/// pins it to the core's).
pub const DEVELOPMENT_KEY: &str = "handoff-development-key-do-not-deploy";

impl Token {
    /// An HS256 JWT as the service's tokens are (src/token.rs; a test checks it is byte for
    /// byte the core's `owner_token`): `{"sub", "role": "owner", "exp"}`.
    pub fn sign(self, now_s: i64) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine;
        use hmac::{Hmac, Mac};

        let key = match self {
            Token::DevelopmentKey => DEVELOPMENT_KEY.as_bytes(),
        };
        #[derive(serde::Serialize)]
        struct Claims {
            sub: &'static str,
            role: &'static str,
            exp: i64,
        }
        let claims = Claims { sub: TOKEN_OWNER, role: "owner", exp: now_s + TOKEN_TTL_S };
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("claims serialise"));
        let mut signer = Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
        signer.update(format!("{header}.{payload}").as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(signer.finalize().into_bytes());
        format!("{header}.{payload}.{signature}")
    }
}

/// What a route may answer in one kind of deployment: one answer, or a list of alternatives
/// (`[{"status": 401, "code": "auth.invalid"}, {"status": 503, "code": "auth.misconfigured"}]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expects(pub Vec<Expect>);

impl<'de> Deserialize<'de> for Expects {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // By hand rather than `untagged`, whose error says only "did not match any variant".
        let value = serde_json::Value::deserialize(deserializer)?;
        let expects = if value.is_array() {
            serde_json::from_value::<Vec<Expect>>(value)
        } else {
            serde_json::from_value::<Expect>(value).map(|expect| vec![expect])
        };
        expects.map(Expects).map_err(serde::de::Error::custom)
    }
}

impl Expects {
    /// True when the answer matches one of the alternatives.
    pub fn accept(&self, status: u16, code: Option<&str>) -> bool {
        self.0.iter().any(|expect| expect.accepts(status, code))
    }
}

impl fmt::Display for Expects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let alternatives: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&alternatives.join(" or "))
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

impl Expect {
    /// A 500 never passes, and another 5xx only where its error code is expected with it:
    /// "503 auth.misconfigured" is a deployment refusing a key, "503" alone could be anything.
    pub fn accepts(&self, status: u16, code: Option<&str>) -> bool {
        let status_ok = status == self.status;
        let server_error = status >= 500;
        let server_error_named = status != 500 && self.code.is_some();
        let code_ok = self.code.is_none() || code == self.code.as_deref();
        status_ok && code_ok && (!server_error || server_error_named)
    }
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
    Http {
        status: u16,
        body: String,
    },
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
    let routes: Routes = serde_json::from_str(text).map_err(|e| format!("release-smoke.json: {e}"))?;
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
        let has_authorization = route.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization"));
        if route.token.is_some() && has_authorization {
            return Err(format!("release-smoke.json: route {name}: a token and an Authorization header"));
        }
        for expects in [&route.bound, &route.unbound] {
            check_expects(name, expects)?;
        }
        if route.why.trim().is_empty() {
            return Err(format!("release-smoke.json: route {name}: say why it is checked"));
        }
    }
    Ok(())
}

fn check_expects(name: &str, expects: &Expects) -> Result<(), String> {
    let count = expects.0.len();
    if count == 0 || count > EXPECTS_MAX {
        return Err(format!("release-smoke.json: route {name}: 1 to {EXPECTS_MAX} expected answers, not {count}"));
    }
    for expect in &expects.0 {
        let status = expect.status;
        if !(100..=599).contains(&status) {
            return Err(format!("release-smoke.json: route {name}: status {status} is not HTTP"));
        }
        if status == 500 {
            return Err(format!("release-smoke.json: route {name}: a 500 never passes"));
        }
        if status > 500 && expect.code.is_none() {
            return Err(format!("release-smoke.json: route {name}: a {status} passes only with its error code"));
        }
    }
    Ok(())
}

/// What `GET /v1/health` says: `{"ok": true, "store": "bound"|"unbound", "auth": "ok"|…}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub store: Store,
    /// `"ok"` when the deployment's signing key is usable, `"misconfigured"` when it is the
    /// public development key or under 32 bytes; `None` when health does not say.
    pub auth: Option<String>,
}

/// The word health uses for a usable signing key.
pub const AUTH_OK: &str = "ok";

pub fn health(answer: &Answer) -> Result<Health, String> {
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
    let auth = value.get("auth").and_then(serde_json::Value::as_str).map(str::to_string);
    match (ok, store) {
        (true, Some(store)) => Ok(Health { store, auth }),
        _ => Err(format!("not {{\"ok\": true, \"store\": \"bound\"|\"unbound\"}}: {}", shown(body))),
    }
}

/// The auth line: health must say the signing key is usable. A deployment whose key is the
/// public development key (or too short to be secret) answers every authenticated route
/// with 503, so it is not a working deployment even though nothing there is a 5xx yet.
pub fn judge_auth(health: &Result<Health, String>) -> Verdict {
    let got = match health {
        Ok(Health { auth: Some(auth), .. }) => format!("auth {auth}"),
        Ok(Health { auth: None, .. }) => "no auth in the health answer".to_string(),
        Err(problem) => problem.clone(),
    };
    let pass = matches!(health, Ok(Health { auth: Some(auth), .. }) if auth == AUTH_OK);
    let word = if pass { "pass" } else { "FAIL" };
    let line = format!("{word}  {:<24} GET {HEALTH_PATH}  expected auth {AUTH_OK}  got {got}", "auth");
    Verdict { pass, line }
}

/// The config lines: no deployable part of wrangler.toml (`config`, as the run names it: the
/// top level or an `[env.*]`) sets a hook variable or calls itself local. One line when none
/// does, else one per finding.
pub fn judge_config(config: &str, exposed: &[Exposure]) -> Vec<Verdict> {
    if exposed.is_empty() {
        let line = format!(
            "pass  {:<24} {config}  expected no hook variable and no HANDOFF_ENV = \"local\" in the top-level or any [env.*] vars  got none",
            "config"
        );
        return vec![Verdict { pass: true, line }];
    }
    exposed
        .iter()
        .map(|exposure| Verdict { pass: false, line: format!("FAIL  {:<24} {config}  {exposure}", "config") })
        .collect()
}

/// Judges one answer. A 500 never passes, whatever the file says; another 5xx only with the
/// error code the file expects with it.
pub fn judge(route: &Route, store: Store, answer: &Answer) -> Verdict {
    let expect = route.expect(store);
    let (pass, got) = match answer {
        Answer::Transport(error) => (false, format!("no answer ({error})")),
        Answer::Http { status, body } => {
            let code = answer.error_code();
            let got = match &code {
                Some(code) => format!("{status} {code}"),
                None => status.to_string(),
            };
            let pass = expect.accept(*status, code.as_deref());
            let got = if pass { got } else { format!("{got} {}", shown(body)) };
            (pass, got)
        }
    };
    let word = if pass { "pass" } else { "FAIL" };
    let line = format!("{word}  {:<24} {} {}  expected {expect}  got {got}", route.name, route.method, route.path);
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
            let line =
                format!("FAIL  {:<24} GET {HEALTH_PATH}  expected store {expected} (--expect)  got {problem}", "store");
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
