//! The Worker's entry point: it routes, authenticates and validates, then asks the hand-off's
//! Durable Object. It holds no state and applies no rules of the turn machine.

use crate::error::{ApiError, Code};
use crate::handoff_object::owner_index_name;
use crate::index;
use crate::input;
use crate::limits::BODY_BYTES_MAX;
use crate::protocol::{Ask, Caller, IndexAsk, Op};
use crate::token::{self, Claims, Role};
use crate::turn::Command;
use serde_json::json;
use worker::*;

/// Binding names, as in wrangler.toml.
const HANDOFFS: &str = "HANDOFFS";
const OWNER_INDEX: &str = "OWNER_INDEX";
const SIGNING_KEY: &str = "HANDOFF_SIGNING_KEY";
/// Set to "1" only on the command line of `scripts/test`; never in wrangler.toml, so never
/// in a deployed environment. It opens the `/v1/test/*` routes.
use crate::handoff_object::TEST_HOOKS;
/// Set to "1" only by `scripts/bench`: opens the floor route `/v1/bench/floor`.
const BENCH_FLOOR: &str = "HANDOFF_BENCH_FLOOR";

/// The routes, by path shape. `Id` routes carry the hand-off id from the path.
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
    /// Test hook: make an owner's index refuse (or accept again) deliveries.
    TestRefuseIndex,
    /// Benchmark floor: a Durable Object round trip with no authentication and no storage.
    BenchFloor,
}

impl Route {
    /// The methods each route answers; any other is 405.
    fn allows(self) -> &'static [Method] {
        match self {
            Route::Health | Route::Handoff | Route::Wait => &[Method::Get],
            Route::Handoffs => &[Method::Get, Method::Post],
            Route::TestRefuseIndex => &[Method::Post],
            Route::BenchFloor => &[Method::Get],
            Route::Turns | Route::Report | Route::Cancel | Route::Close => &[Method::Post],
        }
    }
}

fn match_route(path: &str) -> Option<(Route, Option<&str>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["v1", "health"] => Some((Route::Health, None)),
        ["v1", "handoffs"] => Some((Route::Handoffs, None)),
        ["v1", "test", "refuse-index"] => Some((Route::TestRefuseIndex, None)),
        ["v1", "bench", "floor"] => Some((Route::BenchFloor, None)),
        ["v1", "handoffs", id] => Some((Route::Handoff, Some(*id))),
        ["v1", "handoffs", id, "turns"] => Some((Route::Turns, Some(*id))),
        ["v1", "handoffs", id, "report"] => Some((Route::Report, Some(*id))),
        ["v1", "handoffs", id, "cancel"] => Some((Route::Cancel, Some(*id))),
        ["v1", "handoffs", id, "close"] => Some((Route::Close, Some(*id))),
        ["v1", "handoffs", id, "wait"] => Some((Route::Wait, Some(*id))),
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

async fn handle(mut req: Request, env: &Env) -> std::result::Result<Response, ApiError> {
    let url = req.url().map_err(|_| ApiError::new(Code::RouteNotFound, "no such route"))?;
    let var_on = |name: &str| env.var(name).is_ok_and(|v| v.to_string() == "1");
    let switched_on = |route: Route| match route {
        Route::TestRefuseIndex => var_on(TEST_HOOKS),
        Route::BenchFloor => var_on(BENCH_FLOOR),
        _ => true,
    };
    let Some((route, id)) = match_route(url.path()).filter(|(r, _)| switched_on(*r)) else {
        return Err(ApiError::new(Code::RouteNotFound, "no such route"));
    };
    let method = req.method();
    if !route.allows().contains(&method) {
        return Err(ApiError::new(Code::MethodNotAllowed, format!("{method} is not allowed here")));
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
        let stub = store.get_by_name("bench-floor").map_err(|_| unavailable("stub"))?;
        let payload = json!({"caller": {"owner": "bench", "role": "owner"}, "op": {"op": "floor"}}).to_string();
        let answer = send(&stub, payload).await?;
        return json_response(answer.status, &answer.body);
    }
    let key = signing_key(env);
    let claims = authenticate(&req, key.as_deref())?;
    let body = read_body(&mut req).await?;

    if route == Route::TestRefuseIndex {
        let on = input::parse_json::<RefuseIndex>(&body)?.on;
        let answer = ask_index(&owners, &claims.sub, &IndexAsk::RefuseDeliveries { on }).await?;
        return json_response(answer.status, &answer.body);
    }
    if route == Route::Handoffs && method == Method::Get {
        require_role(&claims, Role::Owner)?;
        let query = index::parse_list_query(url.query().unwrap_or(""))?;
        let answer = ask_index(&owners, &claims.sub, &IndexAsk::List { query }).await?;
        return json_response(answer.status, &answer.body);
    }
    if route == Route::Handoffs {
        require_role(&claims, Role::Owner)?;
        let create = input::parse_create(&body)?;
        let id = input::handoff_id(&claims.sub, &create.session);
        let op = Op::Create { id: id.clone(), session: create.session, machine: create.machine, size: create.size };
        let mut answer = ask(&store, &id, &claims, op).await?;
        if answer.status < 300 {
            let key = key.as_deref().unwrap_or_default().as_bytes();
            answer.body["machine_token"] = json!(token::machine_token(&claims.sub, &id, key, now_s()));
        }
        return json_response(answer.status, &answer.body);
    }

    let id = id.expect("every route but health and the collection names a hand-off");
    let not_found = || ApiError::new(Code::HandoffNotFound, "no such hand-off");
    if !input::is_handoff_id(id) {
        return Err(not_found());
    }
    if claims.role == Role::Machine && claims.hid.as_deref() != Some(id) {
        return Err(not_found());
    }
    let op = match route {
        Route::Handoff => Op::Get,
        Route::Wait => {
            let q = input::parse_wait_query(url.query().unwrap_or(""))?;
            Op::Wait { after: q.after, timeout_s: q.timeout_s }
        }
        Route::Turns => {
            require_role(&claims, Role::Owner)?;
            let t = input::parse_open_turn(&body)?;
            Op::Apply { command: Command::OpenTurn { after: t.after } }
        }
        Route::Report => {
            require_role(&claims, Role::Machine)?;
            let r = input::parse_report(&body)?;
            Op::Apply { command: Command::Report { turn: r.turn, status: r.status, summary: r.summary } }
        }
        Route::Cancel => {
            require_role(&claims, Role::Owner)?;
            let c = input::parse_cancel(&body)?;
            Op::Apply { command: Command::Cancel { turn: c.turn } }
        }
        Route::Close => {
            require_role(&claims, Role::Owner)?;
            input::parse_close(&body)?;
            Op::Apply { command: Command::Close }
        }
        Route::Health | Route::Handoffs | Route::TestRefuseIndex | Route::BenchFloor => unreachable!("answered above"),
    };
    let answer = ask(&store, id, &claims, op).await?;
    json_response(answer.status, &answer.body)
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

fn require_role(claims: &Claims, role: Role) -> std::result::Result<(), ApiError> {
    if claims.role == role {
        Ok(())
    } else {
        Err(ApiError::new(Code::AuthForbidden, "this route is not for this token's role"))
    }
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

struct Answer {
    status: u16,
    body: serde_json::Value,
}

fn unavailable(what: &str) -> ApiError {
    ApiError::new(Code::StoreUnavailable, format!("the hand-off store failed: {what}"))
}

/// Sends one operation to the hand-off's Durable Object and reads its answer.
async fn ask(store: &ObjectNamespace, id: &str, claims: &Claims, op: Op) -> std::result::Result<Answer, ApiError> {
    let caller = Caller { owner: claims.sub.clone(), role: claims.role };
    let payload = serde_json::to_string(&Ask { caller, op }).map_err(|_| unavailable("encode"))?;
    let stub = store.get_by_name(id).map_err(|_| unavailable("stub"))?;
    send(&stub, payload).await
}

/// Asks the owner's index object.
async fn ask_index(owners: &ObjectNamespace, owner: &str, ask: &IndexAsk) -> std::result::Result<Answer, ApiError> {
    let payload = serde_json::to_string(ask).map_err(|_| unavailable("encode"))?;
    let stub = owners.get_by_name(&owner_index_name(owner)).map_err(|_| unavailable("stub"))?;
    send(&stub, payload).await
}

async fn send(stub: &Stub, payload: String) -> std::result::Result<Answer, ApiError> {
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(payload.into()));
    let request = Request::new_with_init("https://handoff/ask", &init).map_err(|_| unavailable("request"))?;
    let mut response = stub.fetch_with_request(request).await.map_err(|e| unavailable(&e.to_string()))?;
    let status = response.status_code();
    let body = response.json().await.map_err(|_| unavailable("answer"))?;
    Ok(Answer { status, body })
}

fn json_response(status: u16, body: &serde_json::Value) -> std::result::Result<Response, ApiError> {
    Response::from_json(body)
        .map(|r| r.with_status(status))
        .map_err(|_| ApiError::new(Code::StoreUnavailable, "could not encode the answer"))
}

fn error_response(error: &ApiError) -> Result<Response> {
    let mut response = Response::from_json(&error.body())?.with_status(error.code.status());
    if error.code.status() == 401 {
        response.headers_mut().set("WWW-Authenticate", "Bearer")?;
    }
    Ok(response)
}
