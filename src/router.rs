//! The Worker's entry point: it routes, authenticates and validates, then asks the hand-off's
//! (or the owner's index) Durable Object. It holds no state and applies no rules of the core;
//! it is the only place that reads HTTP requests.

use crate::briefing;
use crate::error::{ApiError, Code};
use crate::handoff::Change;
use crate::handoff_object::{owner_index_name, TEST_HOOKS};
use crate::index;
use crate::input;
use crate::limits::BODY_BYTES_MAX;
use crate::package;
use crate::protocol::{Ask, Caller, Idempotency, IndexAsk, Op};
use crate::suggestion;
use crate::token::{self, Claims, Role};
use crate::turn::Command;
use crate::work;
use serde_json::json;
use worker::*;

/// Binding names, as in wrangler.toml.
const HANDOFFS: &str = "HANDOFFS";
const OWNER_INDEX: &str = "OWNER_INDEX";
const SIGNING_KEY: &str = "HANDOFF_SIGNING_KEY";
/// Set to "1" only by `scripts/bench`: opens the floor route `/v1/bench/floor`.
const BENCH_FLOOR: &str = "HANDOFF_BENCH_FLOOR";

/// Every route, by path shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Health,
    Handoffs,
    Handoff,
    Turns,
    Report,
    Cancel,
    Close,
    Wait,
    Work,
    Decisions,
    Artifacts,
    Blockers,
    ResolveBlocker,
    Workspace,
    Package,
    AcceptPackage,
    RejectPackage,
    Briefing,
    Policy,
    /// Test hook: make an owner's index refuse (or accept again) deliveries.
    TestRefuseIndex,
    /// Benchmark floor: a Durable Object round trip with no authentication and no storage.
    BenchFloor,
}

impl Route {
    /// The methods each route answers; any other is 405.
    fn allows(self) -> &'static [Method] {
        match self {
            Route::Health | Route::Handoff | Route::Wait | Route::Briefing | Route::BenchFloor => &[Method::Get],
            Route::Handoffs | Route::Turns | Route::Package => &[Method::Get, Method::Post],
            Route::Work | Route::Policy => &[Method::Put],
            Route::Report
            | Route::Cancel
            | Route::Close
            | Route::Decisions
            | Route::Artifacts
            | Route::Blockers
            | Route::ResolveBlocker
            | Route::Workspace
            | Route::AcceptPackage
            | Route::RejectPackage
            | Route::TestRefuseIndex => &[Method::Post],
        }
    }

    /// Who may call it: `None` for either role.
    fn role(self, method: &Method) -> Option<Role> {
        let reading = *method == Method::Get;
        match self {
            Route::Handoffs | Route::Cancel | Route::Close | Route::Work | Route::Policy => Some(Role::Owner),
            Route::Turns | Route::Package if !reading => Some(Role::Owner),
            Route::Report | Route::Workspace => Some(Role::Machine),
            _ => None,
        }
    }
}

/// The route, the hand-off id and a blocker id, from the path.
fn match_route(path: &str) -> Option<(Route, Option<&str>, Option<&str>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["v1", "health"] => Some((Route::Health, None, None)),
        ["v1", "handoffs"] => Some((Route::Handoffs, None, None)),
        ["v1", "test", "refuse-index"] => Some((Route::TestRefuseIndex, None, None)),
        ["v1", "bench", "floor"] => Some((Route::BenchFloor, None, None)),
        ["v1", "handoffs", id] => Some((Route::Handoff, Some(*id), None)),
        ["v1", "handoffs", id, "turns"] => Some((Route::Turns, Some(*id), None)),
        ["v1", "handoffs", id, "report"] => Some((Route::Report, Some(*id), None)),
        ["v1", "handoffs", id, "cancel"] => Some((Route::Cancel, Some(*id), None)),
        ["v1", "handoffs", id, "close"] => Some((Route::Close, Some(*id), None)),
        ["v1", "handoffs", id, "wait"] => Some((Route::Wait, Some(*id), None)),
        ["v1", "handoffs", id, "work"] => Some((Route::Work, Some(*id), None)),
        ["v1", "handoffs", id, "decisions"] => Some((Route::Decisions, Some(*id), None)),
        ["v1", "handoffs", id, "artifacts"] => Some((Route::Artifacts, Some(*id), None)),
        ["v1", "handoffs", id, "blockers"] => Some((Route::Blockers, Some(*id), None)),
        ["v1", "handoffs", id, "blockers", bid, "resolve"] => Some((Route::ResolveBlocker, Some(*id), Some(*bid))),
        ["v1", "handoffs", id, "workspace"] => Some((Route::Workspace, Some(*id), None)),
        ["v1", "handoffs", id, "package"] => Some((Route::Package, Some(*id), None)),
        ["v1", "handoffs", id, "package", "accept"] => Some((Route::AcceptPackage, Some(*id), None)),
        ["v1", "handoffs", id, "package", "reject"] => Some((Route::RejectPackage, Some(*id), None)),
        ["v1", "handoffs", id, "briefing"] => Some((Route::Briefing, Some(*id), None)),
        ["v1", "handoffs", id, "policy"] => Some((Route::Policy, Some(*id), None)),
        _ => None,
    }
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    match handle(req, &env).await {
        Ok(response) => Ok(response),
        Err(error) => error_response(&error),
    }
}

type Answer = std::result::Result<Response, ApiError>;

async fn handle(mut req: Request, env: &Env) -> Answer {
    let raw_url = req.inner().url();
    let url = input::RequestUrl::split(&raw_url);
    let var_on = |name: &str| env.var(name).is_ok_and(|v| v.to_string() == "1");
    let switched_on = |route: Route| match route {
        Route::TestRefuseIndex => var_on(TEST_HOOKS),
        Route::BenchFloor => var_on(BENCH_FLOOR),
        _ => true,
    };
    let Some((route, id, bid)) = match_route(url.path).filter(|(r, _, _)| switched_on(*r)) else {
        return Err(ApiError::new(Code::RouteNotFound, "no such route"));
    };
    // `Request::method` reads any method it does not know as GET; compare the raw one.
    let raw_method = req.inner().method();
    let method = req.method();
    if raw_method != method.as_ref() || !route.allows().contains(&method) {
        return method_not_allowed(&raw_method, route.allows());
    }
    // The store is bound only when both of its objects are.
    let store = env.durable_object(HANDOFFS).ok().zip(env.durable_object(OWNER_INDEX).ok());
    if route == Route::Health {
        let bound = if store.is_some() { "bound" } else { "unbound" };
        return json_response(200, &json!({"ok": true, "store": bound}));
    }
    let Some((store, owners)) = store else {
        return Err(ApiError::new(Code::StoreUnbound, "this environment has no hand-off store"));
    };
    if route == Route::BenchFloor {
        let payload = json!({"caller": {"owner": "bench", "role": "owner"}, "op": {"op": "floor"}}).to_string();
        return send(&store.get_by_name("bench-floor").map_err(|_| unavailable("stub"))?, payload).await;
    }
    let key = signing_key(env);
    let claims = authenticate(&req, key.as_deref())?;
    if let Some(role) = route.role(&method) {
        if claims.role != role {
            return Err(ApiError::new(Code::AuthForbidden, "this route is not for this token's role"));
        }
    }
    let body = read_body(&mut req).await?;
    let query = url.query;

    match route {
        Route::TestRefuseIndex => {
            let on = input::parse_json::<RefuseIndex>(&body)?.on;
            return ask_index(&owners, &claims.sub, &IndexAsk::RefuseDeliveries { on }).await;
        }
        Route::Handoffs if method == Method::Get => {
            let query = index::parse_list_query(query)?;
            return ask_index(&owners, &claims.sub, &IndexAsk::List { query }).await;
        }
        Route::Handoffs => return create(&store, &claims, &body, key.as_deref()).await,
        _ => {}
    }

    let id = id.expect("every other route names a hand-off");
    if !input::is_handoff_id(id) || (claims.role == Role::Machine && claims.hid.as_deref() != Some(id)) {
        return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
    }
    let op = operation(route, &method, url.origin, query, &body, bid)?;
    let idempotency = match &op {
        Op::Change { .. } => idempotency(&req, &method, url.path, &claims, &body)?,
        _ => None,
    };
    let caller = Caller { owner: claims.sub.clone(), role: claims.role };
    let payload = serde_json::to_string(&Ask { caller, op, idempotency }).map_err(|_| unavailable("encode"))?;
    send(&store.get_by_name(id).map_err(|_| unavailable("stub"))?, payload).await
}

/// The typed operation of a hand-off route, from its query and body.
fn operation(route: Route, method: &Method, origin: &str, query: &str, body: &[u8], bid: Option<&str>) -> std::result::Result<Op, ApiError> {
    let reading = *method == Method::Get;
    let change = |change: Change| Ok(Op::Change { change });
    let turn = |command: Command| Change::Turn { command, unmet: None, usage: None, handoff: None };
    let work = |command: work::Command| change(Change::Work { command });
    match route {
        Route::Handoff => Ok(Op::Get),
        Route::Wait => {
            let q = input::parse_wait_query(query)?;
            Ok(Op::Wait { after: q.after, timeout_s: q.timeout_s })
        }
        Route::Turns if reading => no_query(query).map(|_| Op::Turns),
        Route::Turns => {
            let t = input::parse_open_turn(body)?;
            change(Change::Turn { command: Command::OpenTurn { after: t.after }, unmet: None, usage: None, handoff: t.handoff })
        }
        Route::Report => {
            let r = input::parse_report(body)?;
            let command = Command::Report { turn: r.turn, status: r.status, summary: r.summary };
            change(Change::Turn { command, unmet: r.unmet, usage: r.usage, handoff: None })
        }
        Route::Cancel => change(turn(Command::Cancel { turn: input::parse_cancel(body)?.turn })),
        Route::Close => input::parse_close(body).and_then(|_| change(turn(Command::Close))),
        Route::Work => work(work::Command::SetWork(work::parse_work(body)?)),
        Route::Decisions => work(work::Command::RecordDecision(work::parse_decision(body)?)),
        Route::Artifacts => work(work::Command::AddArtifact(work::parse_artifact(body)?)),
        Route::Blockers => work(work::Command::AddBlocker(work::parse_blocker(body)?)),
        Route::ResolveBlocker => {
            input::parse_close(body)?;
            work(work::Command::ResolveBlocker { id: bid.unwrap_or_default().to_string() })
        }
        Route::Workspace => work(work::Command::ReportWorkspace(work::parse_workspace(body)?)),
        Route::Package if reading => Ok(Op::Package { markdown: input::parse_flag(query, "format", ("markdown", "json"))? }),
        Route::Package => {
            let dry_run = input::parse_flag(query, "dry_run", ("true", "false"))?;
            change(Change::Compile { request: package::parse_package_request(body)?, dry_run })
        }
        Route::AcceptPackage => change(Change::Accept { package_hash: package::parse_accept(body)?.package_hash }),
        Route::RejectPackage => change(Change::Reject { input: package::parse_reject(body)? }),
        Route::Briefing => {
            let (mut budget, mut reach) = (None, None);
            for (k, v) in input::query_pairs(query) {
                match k {
                    "budget" => budget = Some(v),
                    "reach" => reach = Some(v),
                    other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
                }
            }
            let (budget_bytes, reach) = briefing::parse_query(budget, reach)?;
            let base_url = origin.to_string();
            Ok(Op::Briefing { budget_bytes, reach_api: reach == briefing::ReachKind::Api, base_url })
        }
        Route::Policy => change(Change::SetPolicy { policy: suggestion::parse_policy(body)? }),
        Route::Health | Route::Handoffs | Route::TestRefuseIndex | Route::BenchFloor => {
            Err(ApiError::new(Code::RouteNotFound, "no such route"))
        }
    }
}

fn no_query(query: &str) -> std::result::Result<(), ApiError> {
    match input::query_pairs(query).next() {
        Some((k, _)) => Err(ApiError::invalid(format!("{k}: unknown query parameter"))),
        None => Ok(()),
    }
}

/// `POST /v1/handoffs`: the id derives from the owner and the session; the answer carries a
/// machine token for the new (or found) hand-off.
async fn create(store: &ObjectNamespace, claims: &Claims, body: &[u8], key: Option<&str>) -> Answer {
    let create = input::parse_create(body)?;
    let id = input::handoff_id(&claims.sub, &create.session);
    let op = Op::Create { id: id.clone(), session: create.session, machine: create.machine, size: create.size };
    let caller = Caller { owner: claims.sub.clone(), role: claims.role };
    let payload = serde_json::to_string(&Ask { caller, op, idempotency: None }).map_err(|_| unavailable("encode"))?;
    let mut response = send(&store.get_by_name(&id).map_err(|_| unavailable("stub"))?, payload).await?;
    let status = response.status_code();
    let mut answer: serde_json::Value = response.json().await.map_err(|_| unavailable("answer"))?;
    if status < 300 {
        let key = key.unwrap_or_default().as_bytes();
        answer["machine_token"] = json!(token::machine_token(&claims.sub, &id, key, now_s()));
    }
    json_response(status, &answer)
}

fn idempotency(req: &Request, method: &Method, path: &str, claims: &Claims, body: &[u8]) -> std::result::Result<Option<Idempotency>, ApiError> {
    let Some(key) = req.headers().get("Idempotency-Key").ok().flatten() else {
        return Ok(None);
    };
    if !input::is_idempotency_key(&key) {
        return Err(ApiError::invalid("Idempotency-Key: 1-128 printable ASCII characters without spaces"));
    }
    let role = if claims.role == Role::Owner { "owner" } else { "machine" };
    let fingerprint = input::request_fingerprint(method.as_ref(), path, role, body);
    Ok(Some(Idempotency { key, fingerprint }))
}

fn signing_key(env: &Env) -> Option<String> {
    env.secret(SIGNING_KEY).map(|s| s.to_string()).or_else(|_| env.var(SIGNING_KEY).map(|v| v.to_string())).ok()
}

fn now_s() -> i64 {
    (Date::now().as_millis() / 1000) as i64
}

fn authenticate(req: &Request, key: Option<&str>) -> std::result::Result<Claims, ApiError> {
    let header = req.headers().get("Authorization").ok().flatten();
    let Some(header) = header else {
        return Err(ApiError::new(Code::AuthRequired, "this route needs Authorization: Bearer <token>"));
    };
    let Some(bearer) = header.strip_prefix("Bearer ") else {
        return Err(ApiError::new(Code::AuthInvalid, "the Authorization header is not a Bearer token"));
    };
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        // Fail closed: an environment without a signing key accepts no token.
        return Err(ApiError::new(Code::AuthInvalid, "this environment has no signing key configured"));
    };
    token::verify(bearer.trim(), key.as_bytes(), now_s()).map_err(|e| ApiError::new(Code::AuthInvalid, e.message()))
}

async fn read_body(req: &mut Request) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::new(Code::RequestTooLarge, format!("the body is over {BODY_BYTES_MAX} bytes"));
    let declared = req.headers().get("Content-Length").ok().flatten().and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_BYTES_MAX) {
        return Err(too_large());
    }
    let body = req.bytes().await.map_err(|_| ApiError::invalid("body: unreadable"))?;
    if body.len() > BODY_BYTES_MAX {
        return Err(too_large());
    }
    Ok(body)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RefuseIndex {
    on: bool,
}

fn unavailable(what: &str) -> ApiError {
    ApiError::new(Code::StoreUnavailable, format!("the hand-off store failed: {what}"))
}

/// Asks the owner's index object.
async fn ask_index(owners: &ObjectNamespace, owner: &str, ask: &IndexAsk) -> Answer {
    let payload = serde_json::to_string(ask).map_err(|_| unavailable("encode"))?;
    send(&owners.get_by_name(&owner_index_name(owner)).map_err(|_| unavailable("stub"))?, payload).await
}

/// Sends one operation to a Durable Object; its answer goes back to the client as it is.
async fn send(stub: &Stub, payload: String) -> Answer {
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(payload.into()));
    let request = Request::new_with_init("https://handoff/ask", &init).map_err(|_| unavailable("request"))?;
    stub.fetch_with_request(request).await.map_err(|e| unavailable(&e.to_string()))
}

fn json_response(status: u16, body: &serde_json::Value) -> Answer {
    Response::from_json(body)
        .map(|r| r.with_status(status))
        .map_err(|_| ApiError::new(Code::StoreUnavailable, "could not encode the answer"))
}

/// 405, naming the methods the route does allow in `Allow` (RFC 9110).
fn method_not_allowed(method: &str, allowed: &[Method]) -> Answer {
    let allow: Vec<&str> = allowed.iter().map(|m| m.as_ref()).collect();
    let error = ApiError::new(Code::MethodNotAllowed, format!("{method} is not allowed here; allowed: {}", allow.join(", ")));
    let mut response = json_response(error.code.status(), &error.body())?;
    response.headers_mut().set("Allow", &allow.join(", ")).map_err(|_| unavailable("headers"))?;
    Ok(response)
}

fn error_response(error: &ApiError) -> Result<Response> {
    let mut response = Response::from_json(&error.body())?.with_status(error.code.status());
    if error.code.status() == 401 {
        response.headers_mut().set("WWW-Authenticate", "Bearer")?;
    }
    Ok(response)
}
