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
use handoff_api::notifications;
use handoff_api::protocol::{self, Ask, Caller, Idempotency, Op};
use handoff_api::routes::{self, Found, Gate, IndexInput, Input, Kind, Route, Transport};
use handoff_api::token::{self, Claims, Role};
use handoff_core::limits::{CREATES_PER_OWNER_PERIOD_S, CREATES_PER_OWNER_PER_MINUTE_MAX, TOKEN_CLOCK_SKEW_S};
use handoff_core::decider::JSON;
use handoff_core::time::Timestamp;
use handoff_core::watch;
use crate::webcrypto as random;
use serde::Serialize;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::future_to_promise;
use worker::*;

/// The Rust side of the Worker's `fetch`: `src/entry.mjs` hands each request over in one call,
/// as plain values, and carries out the [`Step`] it gets back. Its static methods are called
/// with no per-request wrapper; a trap still resets the instance (the `worker` crate's panic
/// hook and wasm-bindgen's reinitialisation), and each object's guard makes it again.
#[wasm_bindgen]
pub struct Edge;

#[wasm_bindgen]
impl Edge {
    /// One request: the runtime's `request` (read only for its body), `env`, the method, URL
    /// and headers the service reads, and its body once the edge has read it ([`Step::ReadBody`]).
    /// A request is routed with no await but for a create and a body of undeclared length.
    #[allow(clippy::too_many_arguments)]
    pub fn route(
        request: web_sys::Request,
        env: Env,
        method: String,
        url: String,
        authorization: Option<String>,
        content_length: Option<String>,
        idempotency_key: Option<String>,
        if_none_match: Option<String>,
        upgrade: Option<String>,
        websocket_protocol: Option<String>,
        body: Option<Vec<u8>>,
    ) -> JsValue {
        let heads = http::Heads { authorization, content_length, idempotency_key, if_none_match, upgrade, websocket_protocol };
        route(Incoming::new(request, method, url, heads, body), env).value()
    }

    /// The one 503, for an object's answer that never came (its promise rejected: the object
    /// reset under it, the runtime failing), with the cause logged.
    pub fn unavailable(cause: JsValue) -> JsValue {
        Step::refusal(&unavailable("the object's answer", &Error::from(cause))).value()
    }

    /// 400 for a body the runtime could not read (the client sent less than it declared, or
    /// went away), with the cause logged.
    pub fn unreadable(cause: JsValue) -> JsValue {
        console_log!("a request's body was unreadable: {}", Error::from(cause));
        Step::refusal(&ApiError::invalid("body: unreadable")).value()
    }
}

/// What the edge does next with a request, as the router decided it.
enum Step {
    /// Answer this.
    Answer(http::Plain),
    /// Ask a hand-off over RPC (`handle(ask)`), its answer value made the response.
    Ask { namespace: &'static str, name: String, ask: String },
    /// Send an object a request and pass its answer on as it is: a held wait's stream, a
    /// watch's 101, the owner's index.
    Fetch { namespace: &'static str, name: String, url: &'static str, method: &'static str, headers: Vec<(&'static str, String)>, body: Option<String> },
    /// The step that follows once this promise settles (a body of undeclared length, a
    /// create's rate limit, the runtime's WebCrypto); it never rejects.
    Later(js_sys::Promise),
    /// Read the whole body, whose declared length is within the limit, and route the request
    /// again with it.
    ReadBody,
}

impl Step {
    fn refusal(error: &ApiError) -> Step {
        Step::Answer(http::Plain::refusal(error))
    }

    fn json(status: u16, body: &impl Serialize) -> Step {
        match serde_json::to_vec(body) {
            Ok(body) => Step::Answer(http::Plain::new(status, JSON, body, false, Vec::new())),
            Err(e) => Step::refusal(&unavailable("encoding the answer", &e)),
        }
    }

    /// An encoded ask (`protocol::encode`) sent by `fetch`: in [`protocol::ASK_HEADER`] when it
    /// fits, where the object reads it with no await, or else as the body.
    fn fetch_ask(namespace: &'static str, name: String, wire: String) -> Step {
        let (headers, body) = match protocol::header_of(&wire) {
            Some(value) => (vec![(protocol::ASK_HEADER, value)], None),
            None => (Vec::new(), Some(wire)),
        };
        Step::Fetch { namespace, name, url: "https://handoff/ask", method: "POST", headers, body }
    }

    /// `[0, answer]`, `[1, namespace, name, ask]`, `[2, namespace, name, url, method, headers,
    /// body]`, `[3, promise of a step]` or `[4]`: the plain value `src/entry.mjs` reads.
    fn value(self) -> JsValue {
        let s = |s: &str| JsValue::from_str(s);
        match self {
            Step::Answer(answer) => js_sys::Array::of2(&JsValue::from(0), &answer.value()).into(),
            Step::Ask { namespace, name, ask } => js_sys::Array::of4(&JsValue::from(1), &s(namespace), &s(&name), &s(&ask)).into(),
            Step::Fetch { namespace, name, url, method, headers, body } => {
                let headers: js_sys::Array = headers.iter().map(|(n, v)| JsValue::from(js_sys::Array::of2(&s(n), &s(v)))).collect();
                let body = body.as_deref().map_or(JsValue::NULL, s);
                let parts = [JsValue::from(2), s(namespace), s(&name), s(url), s(method), headers.into(), body];
                parts.iter().collect::<js_sys::Array>().into()
            }
            Step::Later(promise) => js_sys::Array::of2(&JsValue::from(3), &promise).into(),
            Step::ReadBody => js_sys::Array::of1(&JsValue::from(4)).into(),
        }
    }
}

/// Routes one request to its step. A body is read before the request is routed: the edge
/// reads one of declared length, and a promise of ours one of undeclared length; a create is
/// counted against its owner's rate first, which takes a promise too.
fn route(mut req: Incoming, env: Env) -> Step {
    let admitted = match admit(&req, &env) {
        Ok(Admitted::Answered(step)) => return step,
        Ok(Admitted::Route(admitted)) => admitted,
        Err(error) => return Step::refusal(&error),
    };
    let creates = matches!(admitted.route.kind, Kind::Create);
    let bodiless = admitted.method == "GET";
    let cap = admitted.route.body_bytes_max;
    let body = match body_of(&mut req, bodiless, cap) {
        Ok(Body::Declared) => return Step::ReadBody,
        Ok(Body::Read(body)) if !creates => return dispatch(&req, &env, &admitted, body, None).unwrap_or_else(|e| Step::refusal(&e)),
        Ok(body) => body,
        Err(error) => return Step::refusal(&error),
    };
    let routed = async move {
        let routed = async {
            let body = match body {
                Body::Read(body) => body,
                _ => stream_body(&req, bodiless, cap).await?,
            };
            let create = if creates { Some(input::parse_create(&body)?) } else { None };
            rate_limit(&env, &admitted).await?;
            dispatch(&req, &env, &admitted, body, create)
        }
        .await;
        Ok(routed.unwrap_or_else(|e| Step::refusal(&e)).value())
    };
    Step::Later(future_to_promise(routed))
}

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
    Answered(Step),
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

/// Finds the route, checks the store and the key, authenticates.
fn admit(req: &Incoming, env: &Env) -> std::result::Result<Admitted, ApiError> {
    let config = bindings::config(env);
    let url = req.url.clone();
    let split = input::RequestUrl::split(&url);
    let on = |gate: Gate| match gate {
        Gate::Always => true,
        Gate::TestHooks => config.test_hooks,
        Gate::BenchFloor => config.bench_floor,
    };
    let method = req.method.clone();
    let (route, params) = match routes::find(&method, split.path, on)? {
        Found::Route(route, params) => (route, params),
        Found::MethodNotAllowed(allowed) => return Ok(Admitted::Answered(method_not_allowed(&method, &allowed))),
    };
    if let Kind::Health = route.kind {
        let store = if config.store_bound { "bound" } else { "unbound" };
        let auth = if config.key.is_some() { "ok" } else { "misconfigured" };
        let push = if config.push_key.is_some() { "ok" } else { "misconfigured" };
        return Ok(Admitted::Answered(Step::json(200, &Health { ok: true, store, auth, push })));
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
    let offered = if upgrade { Some(watch::offered(req.heads.websocket_protocol.as_deref())?) } else { None };
    let bearer = offered.as_ref().and_then(|o| o.bearer.as_deref());
    let claims = authenticate(req, bearer, key, &config.expect)?;
    handoff_core::decider::admit_role(route.role, claims.role)?;
    Ok(Admitted::Route(Box::new(Route_ { route, method, url, id, blocker, claims: Some(claims), offered })))
}

/// Reads the operation the route says from the query and `body`, and sends it where it goes.
/// `create` is a create's body, already read.
fn dispatch(req: &Incoming, env: &Env, admitted: &Route_, body: Vec<u8>, create: Option<input::CreateInput>) -> std::result::Result<Step, ApiError> {
    let url = input::RequestUrl::split(&admitted.url);
    let Some(claims) = &admitted.claims else {
        let floor = Ask { caller: Caller { owner: "bench".into(), role: Role::Owner, incarnation: 0, hid: None }, op: Op::Floor, idempotency: None };
        return send("bench-floor".into(), &floor);
    };
    // Every machine token carries `inc` (a token without it is refused as it is verified); an
    // owner's acts on every life of its hand-offs.
    let caller = Caller { owner: claims.sub.clone(), role: claims.role, incarnation: claims.inc.unwrap_or(0), hid: claims.hid.clone() };
    match admitted.route.kind {
        Kind::Health | Kind::BenchFloor => Err(ApiError::new(Code::RouteNotFound, "no such route")),
        Kind::Index { read } => {
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
                if_none_match: req.heads.if_none_match.as_deref(),
            };
            let ask = read(&given)?;
            let wire = protocol::encode(&ask).map_err(|e| unavailable("encoding the index ask", &e))?;
            Ok(Step::fetch_ask(OWNER_INDEX, owner_index_name(&claims.sub), wire))
        }
        Kind::Create => {
            let Some(create) = create else { return Err(ApiError::invalid("body: expected a JSON object")) };
            let id = input::handoff_id(&claims.sub, &create.session);
            let config = bindings::config(env);
            let key = config.key.clone().unwrap_or_default();
            // The token's `inc` is the moment a new hand-off takes as its life, and the one
            // below which this create ends the machine tokens minted before.
            let incarnation = now_ms();
            let machine_token = token::machine_token_at(&claims.sub, &id, key.as_bytes(), incarnation, &config.expect);
            let (session, machine, size, prompt) = (create.session, create.machine, create.size, create.prompt);
            let op = Op::Create { id: id.clone(), session, machine, size, machine_token, incarnation: incarnation.max(0) as u64, prompt };
            send(id, &Ask { caller, op, idempotency: None })
        }
        Kind::TestObjectStarts => {
            no_query(url.query)?;
            let starts = crate::handoff_object::STARTS.load(std::sync::atomic::Ordering::Relaxed);
            Ok(Step::json(200, &ObjectStarts { handoff_objects: starts }))
        }
        Kind::PushKey => {
            let Some(pkcs8) = bindings::config(env).push_key.clone() else {
                return Err(routes::push_misconfigured());
            };
            no_query(url.query)?;
            // The runtime derives the public key (WebCrypto is asynchronous): an answer on its way.
            let answer = async move {
                let answered = match random::vapid_key(&pkcs8).await {
                    Ok((_, public_key)) => Step::json(200, &notifications::PushKey { public_key }),
                    Err(e) => {
                        console_error!("the VAPID key did not import: {}", e.as_string().unwrap_or_default());
                        Step::refusal(&routes::push_misconfigured())
                    }
                };
                Ok(answered.value())
            };
            Ok(Step::Later(future_to_promise(answer)))
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
            match transport {
                Transport::Ask => send(id.to_string(), &ask),
                Transport::Upgrade => {
                    // Every other refusal first: a watch asked for without the upgrade is 426.
                    require_upgrade(req)?;
                    forward_upgrade(id.to_string(), &ask)
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

/// A watch is a WebSocket: `Upgrade: websocket`, or 426 `request.upgrade_required`.
fn require_upgrade(req: &Incoming) -> std::result::Result<(), ApiError> {
    let upgrade = req.heads.upgrade.as_deref();
    if !upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::new(Code::UpgradeRequired, "a watch is a WebSocket: send Upgrade: websocket (or use /wait)"));
    }
    Ok(())
}

/// Forwards a watch's upgrade to the hand-off's object, its ask in a header.
fn forward_upgrade(id: String, ask: &Ask) -> std::result::Result<Step, ApiError> {
    let header = protocol::encode_header(ask).map_err(|e| unavailable("encoding the ask", &e))?;
    let headers = vec![("Upgrade", "websocket".to_string()), (protocol::ASK_HEADER, header)];
    Ok(Step::Fetch { namespace: HANDOFFS, name: id, url: "https://handoff/watch", method: "GET", headers, body: None })
}

fn no_query(query: &str) -> std::result::Result<(), ApiError> {
    match input::query_pairs(query).next() {
        Some((k, _)) => Err(ApiError::invalid(format!("{k}: unknown query parameter"))),
        None => Ok(()),
    }
}

fn idempotency(req: &Incoming, route: &Route, path: &str, query: &str, claims: &Claims, body: &[u8]) -> std::result::Result<Option<Idempotency>, ApiError> {
    let Some(key) = req.heads.idempotency_key.clone() else {
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
    let header = req.heads.authorization.as_deref();
    let bearer = match (&header, subprotocol_bearer) {
        (Some(header), _) => header.strip_prefix("Bearer ").ok_or_else(|| ApiError::new(Code::AuthInvalid, "the Authorization header is not a Bearer token"))?,
        (None, Some(bearer)) => bearer,
        (None, None) => return Err(ApiError::new(Code::AuthRequired, "this route needs Authorization: Bearer <token>")),
    };
    token::verify_with(bearer.trim(), key.as_bytes(), now_s(), expect).map_err(|e| ApiError::new(Code::AuthInvalid, e.message()))
}

/// What a request's body comes to before it is streamed.
enum Body {
    /// Read already: none, or what the edge read and handed over.
    Read(Vec<u8>),
    /// Of a declared length within the limit, for the edge to read in one call.
    Declared,
    /// Of no declared length: [`stream_body`] reads it.
    Undeclared,
}

/// The checks a body passes before any of it is read: a declared length over the route's
/// `cap` (its `body_bytes_max`: [`handoff_core::limits::BODY_BYTES_MAX`] but on the words' routes) is refused unread,
/// and a GET takes no body. A body the edge read must have the length declared.
fn body_of(req: &mut Incoming, bodiless: bool, cap: usize) -> std::result::Result<Body, ApiError> {
    let declared = req.heads.content_length.as_deref().and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(too_large(cap));
    }
    if bodiless && declared.is_some_and(|n| n > 0) {
        return Err(no_body());
    }
    if let Some(body) = req.body.take() {
        if declared != Some(body.len() as u64) {
            return Err(ApiError::invalid("body: its length is not the Content-Length declared"));
        }
        return Ok(Body::Read(body));
    }
    Ok(match declared {
        _ if !req.has_body() => Body::Read(Vec::new()),
        Some(n) if n > 0 => Body::Declared,
        _ => Body::Undeclared,
    })
}

fn too_large(cap: usize) -> ApiError {
    ApiError::new(Code::RequestTooLarge, format!("the body is over {cap} bytes"))
}

fn no_body() -> ApiError {
    ApiError::invalid("body: this route takes no body")
}

/// A body of undeclared length, read as a stream and given up as soon as it passes the
/// route's `cap`, so that no request makes the isolate hold more than that.
async fn stream_body(req: &Incoming, bodiless: bool, cap: usize) -> std::result::Result<Vec<u8>, ApiError> {
    let mut stream = req.to_worker().stream().map_err(|_| ApiError::invalid("body: unreadable"))?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::invalid("body: unreadable"))?;
        if body.len() + chunk.len() > cap {
            return Err(too_large(cap));
        }
        body.extend_from_slice(&chunk);
    }
    if bodiless && !body.is_empty() {
        return Err(no_body());
    }
    Ok(body)
}

use crate::bindings::unavailable;

/// One ask of a hand-off's object: over RPC, its answer a value made the client's response;
/// a held wait (a streamed body) by `fetch`, its answer passed on as it is.
fn send(id: String, ask: &Ask) -> std::result::Result<Step, ApiError> {
    let wire = protocol::encode(ask).map_err(|e| unavailable("encoding the ask", &e))?;
    Ok(match ask.op {
        Op::Wait { .. } => Step::fetch_ask(HANDOFFS, id, wire),
        _ => Step::Ask { namespace: HANDOFFS, name: id, ask: wire },
    })
}

/// 405, naming the methods the route does allow in `Allow` (RFC 9110).
fn method_not_allowed(method: &str, allowed: &[&str]) -> Step {
    let (r, headers) = handoff_api::wire::method_not_allowed(method, allowed);
    Step::Answer(http::Plain::rendered(r, headers))
}
