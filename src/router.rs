//! The Worker's entry point: it finds the request's route in the table
//! (`handoff_api::routes`), authenticates it, reads its body, and sends the operation the
//! route reads to the hand-off's object (or the owner's index). Who may send a hand-off's
//! operation is the core's to decide; the router holds no state and no rule of its own, and
//! is the only place that reads HTTP requests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::{self, owner_index_name, HANDOFFS, OWNER_INDEX};
use crate::clock::{now_ms, now_s};
use crate::http::{self, Incoming};
use futures::StreamExt;
use handoff_api::error::{ApiError, Code};
use handoff_api::input;
use handoff_api::protocol::{self, Ask, Caller, Idempotency, IndexAsk, Op};
use handoff_api::routes::{self, Found, Gate, IndexInput, Input, Kind, Route, Transport};
use handoff_api::token::{self, Claims, Role};
use handoff_core::time::Timestamp;
use handoff_core::limits::{BODY_BYTES_MAX, CREATES_PER_OWNER_PERIOD_S, CREATES_PER_OWNER_PER_MINUTE_MAX, TOKEN_CLOCK_SKEW_S};
use handoff_core::watch;
use handoff_api::notifications;
use crate::webcrypto as random;
use serde::Serialize;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::future_to_promise;
use worker::worker_sys::DurableObject as DurableObjectStub;
use worker::*;

/// The Worker's `fetch`. A request with no body is routed with no await: what it asks an
/// object goes to the runtime as the object's own promise, untouched; a request with a body
/// (or the list, whose `ETag` is its body's) is one promise of ours.
#[wasm_bindgen(js_name = fetch)]
pub fn fetch(req: web_sys::Request, env: Env, _ctx: worker::worker_sys::Context) -> JsValue {
    let req = Incoming::new(req);
    let admitted = match admit(&req, &env) {
        Ok(Admitted::Answered(response)) => return response.into(),
        Ok(Admitted::Route(admitted)) => admitted,
        Err(error) => return error_value(&error),
    };
    // A create is read (and counted) before it is routed, so it always takes the async path.
    let creates = matches!(admitted.route.kind, Kind::Create);
    if !req.has_body() && !creates {
        return match dispatch(&req, &env, &admitted, Vec::new(), None) {
            Ok(Outgoing::Answer(response)) => response.into(),
            Ok(Outgoing::Object(answer)) => unavailable_on_rejection(answer).into(),
            Ok(Outgoing::Page(page)) => future_to_promise(async move { Ok(settle(conditional(&req, page).await)) }).into(),
            Err(error) => error_value(&error),
        };
    }
    let routed = async move {
        let routed = async {
            let body = read_body(&req, admitted.method == "GET").await?;
            let create = if creates { Some(input::parse_create(&body)?) } else { None };
            rate_limit(&env, &admitted).await?;
            dispatch(&req, &env, &admitted, body, create)
        }
        .await;
        Ok(match routed {
            Ok(Outgoing::Answer(response)) => response.into(),
            Ok(Outgoing::Object(answer)) => settle(http::await_answer(answer).await.map_err(|e| unavailable("the object's fetch", &e))),
            Ok(Outgoing::Page(page)) => settle(conditional(&req, page).await),
            Err(error) => error_value(&error),
        })
    };
    future_to_promise(routed).into()
}

/// What a route ends in: a response, or a refusal that `fetch` turns into the error body.
type Routed = std::result::Result<web_sys::Response, ApiError>;

#[derive(Serialize)]
struct Health {
    ok: bool,
    store: &'static str,
    auth: &'static str,
    push: &'static str,
}

#[derive(Serialize)]
struct ObjectStarts {
    handoff_objects: u64,
}

/// What a request has come to once it is routed and authenticated.
enum Admitted {
    /// Answered by the Worker alone (`/v1/health`, 405).
    Answered(web_sys::Response),
    Route(Box<Route_>),
}

/// A routed, authenticated request, owning what its dispatch reads.
struct Route_ {
    route: &'static Route,
    method: String,
    url: String,
    id: Option<String>,
    blocker: Option<String>,
    /// `None` for the bench floor, which takes no token.
    claims: Option<Claims>,
    offered: Option<watch::Offered>,
}

/// What dispatching a request produced.
enum Outgoing {
    Answer(web_sys::Response),
    /// An object's answer on its way, to go back as it is.
    Object(js_sys::Promise),
    /// The owner index's page, to be answered with its `ETag`.
    Page(js_sys::Promise),
}

/// Finds the route, checks the store and the key, authenticates.
fn admit(req: &Incoming, env: &Env) -> std::result::Result<Admitted, ApiError> {
    let config = bindings::config(env);
    let url = req.url();
    let split = input::RequestUrl::split(&url);
    let on = |gate: Gate| match gate {
        Gate::Always => true,
        Gate::TestHooks => config.test_hooks,
        Gate::BenchFloor => config.bench_floor,
    };
    let method = req.method();
    let (route, params) = match routes::find(&method, split.path, on)? {
        Found::Route(route, params) => (route, params),
        Found::MethodNotAllowed(allowed) => return method_not_allowed(&method, &allowed).map(Admitted::Answered),
    };
    if let Kind::Health = route.kind {
        let store = if config.store_bound { "bound" } else { "unbound" };
        let auth = if config.key.is_some() { "ok" } else { "misconfigured" };
        let push = if config.push_key.is_some() { "ok" } else { "misconfigured" };
        return json_response(200, &Health { ok: true, store, auth, push }).map(Admitted::Answered);
    }
    // The store is bound only when both of its objects are.
    if !config.store_bound {
        return Err(ApiError::new(Code::StoreUnbound, "this environment has no hand-off store"));
    }
    let (id, blocker) = (params.id.map(str::to_string), params.blocker.map(str::to_string));
    if let Kind::BenchFloor = route.kind {
        return Ok(Admitted::Route(Box::new(Route_ { route, method, url, id, blocker, claims: None, offered: None })));
    }
    let Some(key) = config.key.as_deref() else {
        // Fail closed: no token is accepted until the operator sets a usable key.
        return Err(ApiError::new(
            Code::AuthMisconfigured,
            "this environment's signing key is missing, the public development key, or too short",
        ));
    };
    // A watch may carry its token as a subprotocol (a browser cannot set Authorization).
    let upgrade = matches!(route.kind, Kind::Handoff { transport: Transport::Upgrade, .. });
    let offered = if upgrade { Some(watch::offered(req.header("Sec-WebSocket-Protocol").as_deref())?) } else { None };
    let bearer = offered.as_ref().and_then(|o| o.bearer.as_deref());
    let claims = authenticate(req, bearer, key, &config.expect)?;
    handoff_core::session::admit_role(route.role, claims.role)?;
    Ok(Admitted::Route(Box::new(Route_ { route, method, url, id, blocker, claims: Some(claims), offered })))
}

/// Reads the operation the route says from the query and `body`, and sends it where it goes.
/// `create` is a create's body, already read.
fn dispatch(req: &Incoming, env: &Env, admitted: &Route_, body: Vec<u8>, create: Option<input::CreateInput>) -> std::result::Result<Outgoing, ApiError> {
    let url = input::RequestUrl::split(&admitted.url);
    // Each namespace is looked up only by a route that asks its objects.
    let namespace = |name: &str| env.durable_object(name).map_err(|e| unavailable("the store's binding", &e));
    let Some(claims) = &admitted.claims else {
        let floor = Ask { caller: Caller { owner: "bench".into(), role: Role::Owner, incarnation: 0, hid: None }, op: Op::Floor, idempotency: None };
        return send(&stub(&namespace(HANDOFFS)?, "bench-floor")?, &floor).map(Outgoing::Object);
    };
    // Every machine token carries `inc` (a token without it is refused as it is verified); an
    // owner's acts on every life of its hand-offs.
    let caller = Caller { owner: claims.sub.clone(), role: claims.role, incarnation: claims.inc.unwrap_or(0), hid: claims.hid.clone() };
    match admitted.route.kind {
        Kind::Health | Kind::BenchFloor => Err(ApiError::new(Code::RouteNotFound, "no such route")),
        Kind::Index { read, page } => {
            let config = bindings::config(env);
            let draw = |buf: &mut [u8]| random::fill(buf).map_err(|e| unavailable("drawing fresh randomness", &Error::from(e)));
            let given = IndexInput {
                query: url.query,
                body: &body,
                id: admitted.id.as_deref(),
                origin: url.origin,
                environment: bindings::endpoints(env),
                push: config.push_key.is_some(),
                now: Timestamp::from_ms(crate::clock::now_ms()),
                draw: &draw,
            };
            let ask = read(&given)?;
            let answer = ask_index(&namespace(OWNER_INDEX)?, &claims.sub, &ask)?;
            Ok(if page { Outgoing::Page(answer) } else { Outgoing::Object(answer) })
        }
        Kind::Create => {
            let Some(create) = create else { return Err(ApiError::invalid("body: expected a JSON object")) };
            let id = input::handoff_id(&claims.sub, &create.session);
            let key = bindings::config(env).key.clone().unwrap_or_default();
            // The token's `inc` is the moment a new hand-off takes as its life.
            let incarnation = now_ms();
            let machine_token = token::machine_token_at(&claims.sub, &id, key.as_bytes(), incarnation);
            let (session, machine, size) = (create.session, create.machine, create.size);
            let op = Op::Create { id: id.clone(), session, machine, size, machine_token, incarnation: incarnation.max(0) as u64 };
            send(&stub(&namespace(HANDOFFS)?, &id)?, &Ask { caller, op, idempotency: None }).map(Outgoing::Object)
        }
        Kind::TestObjectStarts => {
            no_query(url.query)?;
            let starts = crate::handoff_object::STARTS.load(std::sync::atomic::Ordering::Relaxed);
            json_response(200, &ObjectStarts { handoff_objects: starts }).map(Outgoing::Answer)
        }
        Kind::PushKey => {
            let Some(pkcs8) = bindings::config(env).push_key.clone() else {
                return Err(routes::push_misconfigured());
            };
            no_query(url.query)?;
            // The runtime derives the public key (WebCrypto is asynchronous): an answer on its way.
            let answer = async move {
                let answered = match random::vapid_key(&pkcs8).await {
                    Ok((_, public_key)) => json_response(200, &notifications::PushKey { public_key }),
                    Err(e) => {
                        console_error!("the VAPID key did not import: {}", e.as_string().unwrap_or_default());
                        Err(routes::push_misconfigured())
                    }
                };
                Ok(settle(answered))
            };
            Ok(Outgoing::Object(future_to_promise(answer)))
        }
        Kind::Handoff { read, change, transport } => {
            let id = admitted.id.as_deref().unwrap_or_default();
            // Checked again by the hand-off; here it spares waking an object a token cannot reach.
            if !input::is_handoff_id(id) || !caller.reaches(id) {
                return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
            }
            let given = Input {
                query: url.query,
                body: &body,
                blocker: admitted.blocker.as_deref(),
                origin: url.origin,
                valid_until_s: claims.exp.saturating_add(TOKEN_CLOCK_SKEW_S),
                subprotocol: admitted.offered.as_ref().is_some_and(|o| o.handoff_v1),
            };
            let op = read(&given)?;
            let idempotency = if change { idempotency(req, admitted.route, url.path, url.query, claims, &body)? } else { None };
            let ask = Ask { caller, op, idempotency };
            let object = stub(&namespace(HANDOFFS)?, id)?;
            match transport {
                Transport::Ask => send(&object, &ask).map(Outgoing::Object),
                Transport::Upgrade => {
                    // Every other refusal first: a watch asked for without the upgrade is 426.
                    require_upgrade(req)?;
                    forward_upgrade(&object, &ask).map(Outgoing::Object)
                }
            }
        }
    }
}

/// A create counts against its owner's creations per minute, which the runtime's rate-limiting
/// binding keeps: past them, 429 `owner.rate_limited` (with `Retry-After`). Bad input is
/// refused as such first (the caller reads the body before this), and is not counted.
async fn rate_limit(env: &Env, admitted: &Route_) -> std::result::Result<(), ApiError> {
    let Some(claims) = admitted.claims.as_ref().filter(|c| matches!(admitted.route.kind, Kind::Create) && c.role == Role::Owner) else {
        return Ok(());
    };
    if bindings::creation_allowed(env, &claims.sub).await {
        return Ok(());
    }
    Err(ApiError::new(
        Code::OwnerRateLimited,
        format!("this owner may create {CREATES_PER_OWNER_PER_MINUTE_MAX} hand-offs per minute; try again in {CREATES_PER_OWNER_PERIOD_S} s"),
    ))
}

/// An answer of ours as what `fetch` gives the runtime.
fn settle(routed: Routed) -> JsValue {
    match routed {
        Ok(response) => response.into(),
        Err(error) => error_value(&error),
    }
}

fn error_value(error: &ApiError) -> JsValue {
    match error_response(error) {
        Ok(response) => response.into(),
        // Building a JSON error cannot fail short of the runtime failing.
        Err(e) => js_sys::Promise::reject(&JsValue::from(e)).into(),
    }
}

thread_local! {
    /// Turns a rejected object answer (the object reset under it, the runtime failing) into
    /// 503 `store.unavailable`, which clients retry; made once per isolate.
    static UNAVAILABLE: Closure<dyn FnMut(JsValue) -> JsValue> = Closure::new(|cause: JsValue| {
        settle(Err(unavailable("the object's fetch", &Error::from(cause))))
    });
}

thread_local! {
    /// Makes a hand-off object's answer value (`http::answer_value`) the client's response;
    /// made once per isolate.
    static AS_RESPONSE: Closure<dyn FnMut(JsValue) -> std::result::Result<JsValue, JsValue>> = Closure::new(|value: JsValue| {
        http::response_of_value(&value).map(JsValue::from).map_err(|e| JsValue::from_str(&e.0))
    });
}

/// The object's answer as it comes, or 503 when it never does.
fn unavailable_on_rejection(answer: js_sys::Promise) -> js_sys::Promise {
    UNAVAILABLE.with(|on_rejection| http::or_else(&answer, on_rejection.as_ref().unchecked_ref()))
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
fn forward_upgrade(stub: &DurableObjectStub, ask: &Ask) -> std::result::Result<js_sys::Promise, ApiError> {
    let header = protocol::encode_header(ask).map_err(|e| unavailable("encoding the ask", &e))?;
    let request = http::get_with("https://handoff/watch", &[("Upgrade", "websocket"), (protocol::ASK_HEADER, &header)])
        .map_err(|e| unavailable("building the upgrade", &e))?;
    http::fetch(stub, &request).map_err(|e| unavailable("the object's fetch", &e))
}

fn no_query(query: &str) -> std::result::Result<(), ApiError> {
    match input::query_pairs(query).next() {
        Some((k, _)) => Err(ApiError::invalid(format!("{k}: unknown query parameter"))),
        None => Ok(()),
    }
}

fn idempotency(req: &Incoming, route: &Route, path: &str, query: &str, claims: &Claims, body: &[u8]) -> std::result::Result<Option<Idempotency>, ApiError> {
    let Some(key) = req.header("Idempotency-Key") else {
        return Ok(None);
    };
    if !input::is_idempotency_key(&key) {
        return Err(ApiError::invalid("Idempotency-Key: 1-128 printable ASCII characters without spaces"));
    }
    let fingerprint = input::request_fingerprint(route.method, path, query, claims.role.as_str(), body);
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

use crate::bindings::unavailable;

fn stub(namespace: &ObjectNamespace, name: &str) -> std::result::Result<DurableObjectStub, ApiError> {
    namespace.get_by_name(name).map(http::raw_stub).map_err(|e| unavailable("reaching the object", &e))
}

/// Asks the owner's index object.
fn ask_index(owners: &ObjectNamespace, owner: &str, ask: &IndexAsk) -> std::result::Result<js_sys::Promise, ApiError> {
    let payload = protocol::encode(ask).map_err(|e| unavailable("encoding the index ask", &e))?;
    http::ask(&stub(owners, &owner_index_name(owner))?, "https://handoff/ask", &payload).map_err(|e| unavailable("the object's fetch", &e))
}

/// A page answered with its `ETag`, or 304 with no body when the request's `If-None-Match`
/// names it: a client that polls the list pays one small exchange while nothing moves.
async fn conditional(req: &Incoming, page: js_sys::Promise) -> Routed {
    let page = http::await_answer(page).await.map_err(|e| unavailable("the index's answer", &e))?;
    if page.status() != 200 {
        return Ok(page);
    }
    let body = http::bytes(&page).await.map_err(|e| unavailable("reading the index's answer", &e))?;
    let answer = handoff_api::conditional::answer(body, req.header("If-None-Match").as_deref());
    let headers: Vec<(&str, &str)> = answer.headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let content_type = (answer.status == 200).then_some("application/json");
    http::respond(answer.status, content_type, answer.body, &headers).map_err(|e| unavailable("building the answer", &e))
}

/// Sends one ask to a hand-off's object: over RPC, its answer a value made the client's
/// response; a held wait (a streamed body) by `fetch`, its answer passed on as it is.
fn send(stub: &DurableObjectStub, ask: &Ask) -> std::result::Result<js_sys::Promise, ApiError> {
    let payload = protocol::encode(ask).map_err(|e| unavailable("encoding the ask", &e))?;
    if let Op::Wait { .. } = ask.op {
        return http::ask(stub, "https://handoff/ask", &payload).map_err(|e| unavailable("the object's fetch", &e));
    }
    let answer = http::handle(stub, &payload).map_err(|e| unavailable("the object's handle", &e))?;
    Ok(AS_RESPONSE.with(|as_response| http::and_then(&answer, as_response.as_ref().unchecked_ref())))
}

fn json_response(status: u16, body: &impl Serialize) -> Routed {
    http::json(status, body, &[]).map_err(|e| unavailable("encoding the answer", &e))
}

/// 405, naming the methods the route does allow in `Allow` (RFC 9110).
fn method_not_allowed(method: &str, allowed: &[&str]) -> std::result::Result<web_sys::Response, ApiError> {
    let (r, headers) = handoff_api::wire::method_not_allowed(method, allowed);
    http::rendered(r, &headers).map_err(|e| unavailable("encoding the answer", &e))
}

fn error_response(error: &ApiError) -> Result<web_sys::Response> {
    http::refusal(error)
}
