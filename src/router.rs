//! The Worker's entry point: it routes, authenticates and validates, then asks the hand-off's
//! (or the owner's index) Durable Object. It holds no state and applies no rules of the core;
//! it is the only place that reads HTTP requests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::{self, owner_index_name, HANDOFFS, OWNER_INDEX};
use futures::StreamExt;
use handoff_api::error::{ApiError, Code};
use handoff_api::input;
use handoff_api::protocol::{self, Ask, Caller, Fault, Idempotency, IndexAsk, Op};
use handoff_api::token::{self, Claims, Role};
use handoff_core::briefing;
use handoff_core::handoff::Change;
use handoff_core::limits::BODY_BYTES_MAX;
use handoff_core::package;
use handoff_core::turn::Command;
use handoff_core::watch;
use handoff_core::work;
use crate::clock::now_s;
use crate::http::{self, Incoming};
use serde_json::json;
use worker::worker_sys::DurableObject as DurableObjectStub;
use worker::*;

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
    /// `GET …/watch`: a hibernatable WebSocket that is sent every published version.
    Watch,
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
    Runtimes,
    /// Test hook: make an owner's index refuse (or accept again) deliveries.
    TestRefuseIndex,
    /// Test hook: deliver a row to the caller's own index, as an outbox would (replays, reorders).
    TestIndexPut,
    /// Test hook: make a hand-off's next change fail at a statement or at its commit.
    TestFault,
    /// Test hook: the bytes and rows a hand-off's storage holds.
    TestStorage,
    /// Test hook: how many hand-off objects this isolate has started (an evicted one starts
    /// again when next needed).
    TestObjectStarts,
    /// Benchmark floor: a Durable Object round trip with no authentication and no storage.
    BenchFloor,
}

impl Route {
    /// The methods each route answers; any other is 405.
    fn allows(self) -> &'static [Method] {
        match self {
            Route::Health | Route::Handoff | Route::Wait | Route::Watch | Route::Briefing | Route::BenchFloor | Route::TestStorage | Route::TestObjectStarts => {
                &[Method::Get]
            }
            Route::Handoffs | Route::Turns | Route::Package => &[Method::Get, Method::Post],
            Route::Work => &[Method::Get, Method::Put],
            Route::Policy | Route::Runtimes => &[Method::Put],
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
            | Route::TestRefuseIndex
            | Route::TestIndexPut
            | Route::TestFault => &[Method::Post],
        }
    }

    /// Who may call it: `None` for either role.
    fn role(self, method: &Method) -> Option<Role> {
        let reading = *method == Method::Get;
        match self {
            Route::Handoffs | Route::Cancel | Route::Close | Route::Policy => Some(Role::Owner),
            // A machine token must not freeze its owner's list or break the owner's hand-off.
            Route::TestRefuseIndex | Route::TestIndexPut | Route::TestFault | Route::TestStorage | Route::TestObjectStarts => Some(Role::Owner),
            Route::Turns | Route::Package | Route::Work if !reading => Some(Role::Owner),
            Route::Report | Route::Workspace | Route::Runtimes => Some(Role::Machine),
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
        ["v1", "test", "index-rows"] => Some((Route::TestIndexPut, None, None)),
        ["v1", "test", "handoffs", id, "fault"] => Some((Route::TestFault, Some(*id), None)),
        ["v1", "test", "handoffs", id, "storage"] => Some((Route::TestStorage, Some(*id), None)),
        ["v1", "test", "object-starts"] => Some((Route::TestObjectStarts, None, None)),
        ["v1", "bench", "floor"] => Some((Route::BenchFloor, None, None)),
        ["v1", "handoffs", id] => Some((Route::Handoff, Some(*id), None)),
        ["v1", "handoffs", id, "turns"] => Some((Route::Turns, Some(*id), None)),
        ["v1", "handoffs", id, "report"] => Some((Route::Report, Some(*id), None)),
        ["v1", "handoffs", id, "cancel"] => Some((Route::Cancel, Some(*id), None)),
        ["v1", "handoffs", id, "close"] => Some((Route::Close, Some(*id), None)),
        ["v1", "handoffs", id, "wait"] => Some((Route::Wait, Some(*id), None)),
        ["v1", "handoffs", id, "watch"] => Some((Route::Watch, Some(*id), None)),
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
        ["v1", "handoffs", id, "runtimes"] => Some((Route::Runtimes, Some(*id), None)),
        _ => None,
    }
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> Result<web_sys::Response> {
    let error = match handle(Incoming::new(req), &env).await {
        Ok(response) => return Ok(response),
        Err(error) => error,
    };
    match error_response(&error) {
        Ok(response) => Ok(response),
        // Building a JSON error cannot fail short of the runtime failing; say so plainly.
        Err(_) => Ok(Response::error("the hand-off service is unavailable", 503)?.into()),
    }
}

/// What a route ends in: a response, or a refusal that `fetch` turns into the error body.
type Routed = std::result::Result<web_sys::Response, ApiError>;

async fn handle(req: Incoming, env: &Env) -> Routed {
    let config = bindings::config(env);
    let raw_url = req.url();
    let url = input::RequestUrl::split(&raw_url);
    let switched_on = |route: Route| match route {
        Route::TestRefuseIndex | Route::TestIndexPut | Route::TestFault | Route::TestStorage | Route::TestObjectStarts => config.test_hooks,
        Route::BenchFloor => config.bench_floor,
        _ => true,
    };
    let Some((route, id, bid)) = match_route(url.path).filter(|(r, _, _)| switched_on(*r)) else {
        return Err(ApiError::new(Code::RouteNotFound, "no such route"));
    };
    // `Method::from` reads any method it does not know as GET; compare the raw one.
    let raw_method = req.method();
    let method = Method::from(raw_method.clone());
    if raw_method != method.as_ref() || !route.allows().contains(&method) {
        return method_not_allowed(&raw_method, route.allows());
    }
    if route == Route::Health {
        let bound = if config.store_bound { "bound" } else { "unbound" };
        let auth = if config.key.is_some() { "ok" } else { "misconfigured" };
        return json_response(200, &json!({"ok": true, "store": bound, "auth": auth}));
    }
    // The store is bound only when both of its objects are.
    if !config.store_bound {
        return Err(ApiError::new(Code::StoreUnbound, "this environment has no hand-off store"));
    }
    // Each namespace is looked up only by a route that asks its objects.
    let namespace = |name: &str| env.durable_object(name).map_err(|e| unavailable("the store's binding", &e));
    if route == Route::BenchFloor {
        let floor = Ask { caller: Caller { owner: "bench".into(), role: Role::Owner }, op: Op::Floor, idempotency: None };
        let payload = protocol::encode(&floor).map_err(|e| unavailable("encoding the ask", &e))?;
        return send(&stub(&namespace(HANDOFFS)?, "bench-floor")?, payload).await;
    }
    let Some(key) = config.key.as_deref() else {
        // Fail closed: no token is accepted until the operator sets a usable key.
        return Err(ApiError::new(
            Code::AuthMisconfigured,
            "this environment's signing key is missing, the public development key, or too short",
        ));
    };
    // A watch may carry its token as a subprotocol (a browser cannot set Authorization).
    let offered = match route {
        Route::Watch => Some(subprotocols(&req)?),
        _ => None,
    };
    let bearer = offered.as_ref().and_then(|o| o.bearer.as_deref());
    let claims = authenticate(&req, bearer, key, &config.expect)?;
    if let Some(role) = route.role(&method) {
        if claims.role != role {
            return Err(ApiError::new(Code::AuthForbidden, "this route is not for this token's role"));
        }
    }
    let body = read_body(&req, method == Method::Get).await?;
    let query = url.query;
    if route == Route::TestObjectStarts {
        no_query(query)?;
        let starts = crate::handoff_object::STARTS.load(std::sync::atomic::Ordering::Relaxed);
        return json_response(200, &json!({"handoff_objects": starts}));
    }

    let id = match route {
        Route::TestRefuseIndex => {
            let on = input::parse_json::<RefuseIndex>(&body)?.on;
            return ask_index(&namespace(OWNER_INDEX)?, &claims.sub, &IndexAsk::RefuseDeliveries { on }).await;
        }
        Route::TestIndexPut => {
            let row = input::parse_json::<handoff_core::index::IndexRow>(&body)?;
            return ask_index(&namespace(OWNER_INDEX)?, &claims.sub, &IndexAsk::Put { row }).await;
        }
        Route::Handoffs if method == Method::Get => {
            let query = input::parse_list_query(query)?;
            let page = ask_index(&namespace(OWNER_INDEX)?, &claims.sub, &IndexAsk::List { query }).await?;
            return conditional(&req, page).await;
        }
        Route::Handoffs => return create(&namespace(HANDOFFS)?, &claims, &body, key).await,
        _ => id.unwrap_or_default(),
    };
    if !input::is_handoff_id(id) || (claims.role == Role::Machine && claims.hid.as_deref() != Some(id)) {
        return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
    }
    let op = operation(route, &method, url.origin, query, &body, bid)?;
    // Every other refusal first: a watch asked for without the upgrade is 426.
    if route == Route::Watch {
        require_upgrade(&req)?;
    }
    // Only a change is remembered under a key; every other operation changes nothing.
    let idempotency = match &op {
        Op::Change { .. } => idempotency(&req, &method, url.path, query, &claims, &body)?,
        Op::Create { .. }
        | Op::Get
        | Op::Wait { .. }
        | Op::Watch { .. }
        | Op::Turns { .. }
        | Op::Package { .. }
        | Op::Briefing { .. }
        | Op::Work
        | Op::Preview { .. }
        | Op::Floor
        | Op::TestFault { .. }
        | Op::TestStorage => None,
    };
    let caller = Caller { owner: claims.sub.clone(), role: claims.role };
    if let Op::Watch { after, .. } = op {
        // The upgrade is forwarded as one: the object answers 101 with its end of the socket.
        // The token's expiry and the subprotocol are this request's.
        let valid_until_s = claims.exp.saturating_add(handoff_core::limits::TOKEN_CLOCK_SKEW_S);
        let op = Op::Watch { after, valid_until_s, subprotocol: offered.is_some_and(|o| o.handoff_v1) };
        let header = protocol::encode_header(&Ask { caller, op, idempotency }).map_err(|e| unavailable("encoding the ask", &e))?;
        return forward_upgrade(&stub(&namespace(HANDOFFS)?, id)?, header).await;
    }
    let payload = protocol::encode(&Ask { caller, op, idempotency }).map_err(|e| unavailable("encoding the ask", &e))?;
    send(&stub(&namespace(HANDOFFS)?, id)?, payload).await
}

/// What a watch's `Sec-WebSocket-Protocol` offers (which must include `handoff.v1` when it is
/// given).
fn subprotocols(req: &Incoming) -> std::result::Result<watch::Offered, ApiError> {
    let protocols = req.header("Sec-WebSocket-Protocol");
    Ok(watch::offered(protocols.as_deref())?)
}

/// A watch is a WebSocket: `Upgrade: websocket`, or 426 `request.upgrade_required`.
fn require_upgrade(req: &Incoming) -> std::result::Result<(), ApiError> {
    let upgrade = req.header("Upgrade");
    if !upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::new(Code::UpgradeRequired, "a watch is a WebSocket: send Upgrade: websocket (or use /wait)"));
    }
    Ok(())
}

/// Forwards a watch's upgrade to the hand-off's object, its ask in a header.
async fn forward_upgrade(stub: &DurableObjectStub, ask: String) -> Routed {
    let request = http::get_with("https://handoff/watch", &[("Upgrade", "websocket"), (protocol::ASK_HEADER, &ask)])
        .map_err(|e| unavailable("building the upgrade", &e))?;
    http::fetch(stub, &request).await.map_err(|e| unavailable("the object's fetch", &e))
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
        // The token's expiry and the subprotocol are filled in by `handle`, which has them.
        Route::Watch => Ok(Op::Watch { after: input::parse_watch_query(query)?, valid_until_s: 0, subprotocol: false }),
        Route::Turns if reading => {
            let q = input::parse_turns_query(query)?;
            Ok(Op::Turns { before: q.before, limit: q.limit })
        }
        Route::TestFault => Ok(Op::TestFault { fault: input::parse_json::<Fault>(body)? }),
        Route::TestStorage => no_query(query).map(|_| Op::TestStorage),
        Route::Turns => {
            let preview = input::parse_open_turn_query(query)?;
            let t = input::parse_open_turn(body)?;
            let handing_off = t.handoff.is_some();
            let open = Change::Turn { command: Command::OpenTurn { after: t.after }, unmet: None, usage: None, handoff: t.handoff };
            match preview {
                None => change(open),
                Some(_) if !handing_off => Err(ApiError::invalid("handoff: a dry run previews a hand-off, and this open has none")),
                Some((budget_bytes, reach)) => {
                    let reach_api = reach == briefing::ReachKind::Api;
                    Ok(Op::Preview { change: open, budget_bytes, reach_api, base_url: origin.to_string() })
                }
            }
        }
        Route::Report => {
            let r = input::parse_report(body)?;
            let command = Command::Report { turn: r.turn, status: r.status, summary: r.summary };
            change(Change::Turn { command, unmet: r.unmet, usage: r.usage, handoff: None })
        }
        Route::Cancel => change(turn(Command::Cancel { turn: input::parse_cancel(body)?.turn })),
        Route::Close => input::parse_close(body).and_then(|_| change(turn(Command::Close))),
        Route::Work if reading => no_query(query).map(|_| Op::Work),
        Route::Work => work(work::Command::SetWork(input::parse_body(body)?)),
        Route::Decisions => work(work::Command::RecordDecision(input::parse_body(body)?)),
        Route::Artifacts => work(work::Command::AddArtifact(input::parse_body(body)?)),
        Route::Blockers => work(work::Command::AddBlocker(input::parse_body(body)?)),
        Route::ResolveBlocker => {
            input::parse_close(body)?;
            work(work::Command::ResolveBlocker { id: bid.unwrap_or_default().to_string() })
        }
        Route::Workspace => work(work::Command::ReportWorkspace(input::parse_body(body)?)),
        Route::Package if reading => Ok(Op::Package { markdown: input::parse_flag(query, "format", ("markdown", "json"))? }),
        Route::Package => {
            let dry_run = input::parse_flag(query, "dry_run", ("true", "false"))?;
            change(Change::Compile { request: input::parse_body(body)?, dry_run })
        }
        Route::AcceptPackage => change(Change::Accept { package_hash: input::parse_body::<package::AcceptInput>(body)?.package_hash }),
        Route::RejectPackage => change(Change::Reject { input: input::parse_body(body)? }),
        Route::Briefing => {
            let (budget_bytes, reach) = input::parse_briefing_query(query)?;
            let base_url = origin.to_string();
            Ok(Op::Briefing { budget_bytes, reach_api: reach == briefing::ReachKind::Api, base_url })
        }
        Route::Policy => change(Change::SetPolicy { policy: input::parse_body(body)? }),
        Route::Runtimes => change(Change::SetRuntimes { input: input::parse_body(body)? }),
        Route::Health | Route::Handoffs | Route::TestRefuseIndex | Route::TestIndexPut | Route::TestObjectStarts | Route::BenchFloor => {
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
async fn create(store: &ObjectNamespace, claims: &Claims, body: &[u8], key: &str) -> Routed {
    let create = input::parse_create(body)?;
    let id = input::handoff_id(&claims.sub, &create.session);
    let op = Op::Create { id: id.clone(), session: create.session, machine: create.machine, size: create.size };
    let caller = Caller { owner: claims.sub.clone(), role: claims.role };
    let payload = protocol::encode(&Ask { caller, op, idempotency: None }).map_err(|e| unavailable("encoding the ask", &e))?;
    let response = send(&stub(store, &id)?, payload).await?;
    let status = response.status();
    let text = http::text(&response).await.map_err(|e| unavailable("reading the object's answer", &e))?;
    let mut answer: serde_json::Value = serde_json::from_str(&text).map_err(|e| unavailable("reading the object's answer", &e))?;
    if status < 300 {
        answer["machine_token"] = json!(token::machine_token(&claims.sub, &id, key.as_bytes(), now_s()));
    }
    json_response(status, &answer)
}

fn idempotency(req: &Incoming, method: &Method, path: &str, query: &str, claims: &Claims, body: &[u8]) -> std::result::Result<Option<Idempotency>, ApiError> {
    let Some(key) = req.header("Idempotency-Key") else {
        return Ok(None);
    };
    if !input::is_idempotency_key(&key) {
        return Err(ApiError::invalid("Idempotency-Key: 1-128 printable ASCII characters without spaces"));
    }
    let fingerprint = input::request_fingerprint(method.as_ref(), path, query, claims.role.as_str(), body);
    Ok(Some(Idempotency { key, fingerprint }))
}

/// The caller's claims, from `Authorization: Bearer <token>` or, where the header is absent,
/// from `subprotocol_bearer` (a watch's `bearer.<token>`, which is how a browser sends it).
fn authenticate(req: &Incoming, subprotocol_bearer: Option<&str>, key: &str, expect: &token::Expect) -> std::result::Result<Claims, ApiError> {
    let header = req.header("Authorization");
    let bearer = match (&header, subprotocol_bearer) {
        (Some(header), _) => header.strip_prefix("Bearer ").ok_or_else(|| ApiError::new(Code::AuthInvalid, "the Authorization header is not a Bearer token"))?,
        (None, Some(bearer)) => bearer,
        (None, None) => return Err(ApiError::new(Code::AuthRequired, "this route needs Authorization: Bearer <token>")),
    };
    token::verify_with(bearer.trim(), key.as_bytes(), now_s(), expect).map_err(|e| ApiError::new(Code::AuthInvalid, e.message()))
}

/// The body, read as a stream and given up as soon as it passes [`BODY_BYTES_MAX`] (with or
/// without `Content-Length`), so that no request makes the isolate hold more than that. A GET
/// takes no body: one that carries any is refused.
async fn read_body(req: &Incoming, bodiless: bool) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::new(Code::RequestTooLarge, format!("the body is over {BODY_BYTES_MAX} bytes"));
    let no_body = || ApiError::invalid("body: this route takes no body");
    let declared = req.header("Content-Length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_BYTES_MAX as u64) {
        return Err(too_large());
    }
    if bodiless && declared.is_some_and(|n| n > 0) {
        return Err(no_body());
    }
    if !req.has_body() {
        return Ok(Vec::new());
    }
    // A declared length bounds the body (HTTP frames it by that length): read it in one call
    // rather than chunk by chunk, each chunk an await and a crossing into JavaScript.
    if let Some(n) = declared.filter(|n| *n > 0) {
        let body = req.bytes().await.map_err(|_| ApiError::invalid("body: unreadable"))?;
        if body.len() as u64 != n {
            return Err(ApiError::invalid("body: its length is not the Content-Length declared"));
        }
        return Ok(body);
    }
    let mut stream = req.to_worker().stream().map_err(|_| ApiError::invalid("body: unreadable"))?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::invalid("body: unreadable"))?;
        if body.len() + chunk.len() > BODY_BYTES_MAX {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    if bodiless && !body.is_empty() {
        return Err(no_body());
    }
    Ok(body)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RefuseIndex {
    on: bool,
}

/// 503 `store.unavailable` with a fixed message; what failed goes to the log only.
fn unavailable(what: &str, cause: &dyn std::fmt::Display) -> ApiError {
    console_error!("{what}: {cause}");
    ApiError::new(Code::StoreUnavailable, "the hand-off store is unavailable; try again")
}

fn stub(namespace: &ObjectNamespace, name: &str) -> std::result::Result<DurableObjectStub, ApiError> {
    namespace.get_by_name(name).map(http::raw_stub).map_err(|e| unavailable("reaching the object", &e))
}

/// Asks the owner's index object.
async fn ask_index(owners: &ObjectNamespace, owner: &str, ask: &IndexAsk) -> Routed {
    let payload = protocol::encode(ask).map_err(|e| unavailable("encoding the index ask", &e))?;
    send(&stub(owners, &owner_index_name(owner))?, payload).await
}

/// A page answered with its `ETag`, or 304 with no body when the request's `If-None-Match`
/// names it: a client that polls the list pays one small exchange while nothing moves.
async fn conditional(req: &Incoming, page: web_sys::Response) -> Routed {
    if page.status() != 200 {
        return Ok(page);
    }
    let body = http::bytes(&page).await.map_err(|e| unavailable("reading the index's answer", &e))?;
    let etag = handoff_api::conditional::etag(&body);
    let not_modified = handoff_api::conditional::not_modified(req.header("If-None-Match").as_deref(), &etag);
    // A cache may keep the page, but asks each time whether it moved.
    let headers = [("ETag", etag.as_str()), ("Cache-Control", "private, no-cache")];
    let response = match not_modified {
        true => http::respond(304, None, Vec::new(), &headers),
        false => http::respond(200, Some("application/json"), body, &headers),
    };
    response.map_err(|e| unavailable("building the answer", &e))
}

/// Sends one operation to a Durable Object; its answer goes back to the client as it is.
async fn send(stub: &DurableObjectStub, payload: String) -> Routed {
    http::ask(stub, "https://handoff/ask", &payload).await.map_err(|e| unavailable("the object's fetch", &e))
}

fn json_response(status: u16, body: &serde_json::Value) -> Routed {
    http::json(status, body, &[]).map_err(|e| unavailable("encoding the answer", &e))
}

/// 405, naming the methods the route does allow in `Allow` (RFC 9110).
fn method_not_allowed(method: &str, allowed: &[Method]) -> Routed {
    let allow: Vec<&str> = allowed.iter().map(|m| m.as_ref()).collect();
    let error = ApiError::new(Code::MethodNotAllowed, format!("{method} is not allowed here; allowed: {}", allow.join(", ")));
    http::json(error.status(), &error.body(), &[("Allow", &allow.join(", "))]).map_err(|e| unavailable("encoding the answer", &e))
}

fn error_response(error: &ApiError) -> std::result::Result<web_sys::Response, http::Failed> {
    let challenge: &[(&str, &str)] = if error.status() == 401 { &[("WWW-Authenticate", "Bearer")] } else { &[] };
    http::json(error.status(), &error.body(), challenge)
}
