//! The Worker's entry point: `handoff_api::admission` finds the request's route, authenticates
//! it, and says how its body is read and what its ask is and where it goes; the router reads
//! the body, awaits what must be awaited, and sends the ask to the hand-off's object (or the
//! owner's index). Who may send a hand-off's operation is the core's to decide; the router
//! holds no state and no rule of its own, and is the only place that reads HTTP requests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::{
    self, machines_name, owner_index_name, unavailable, ENROLMENTS, HANDOFFS, MACHINES, OWNER_INDEX,
};
use crate::clock::{now_ms, now_s};
use crate::http::{self, Incoming};
use crate::webcrypto;
use futures::StreamExt;
use handoff_api::admission::{self, Admission, Admitted, Body, BodyRules, Carrier, Head, Next, Setting};
use handoff_api::error::ApiError;
use handoff_api::input::CreateInput;
use handoff_api::machines::{self, CollectAnswer, Enrolled, MachinesAsk, Placed, ENROLMENTS_OBJECT};
use handoff_api::notifications;
use handoff_api::protocol::{self, Sent};
use handoff_api::routes::Kind;
use handoff_core::decider::JSON;
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
        cookie: Option<String>,
        origin: Option<String>,
        refresh: Option<String>,
        body: Option<Vec<u8>>,
    ) -> JsValue {
        let client_address = request.headers().get("cf-connecting-ip").ok().flatten();
        let head = Head {
            client_address,
            method,
            url,
            authorization,
            content_length,
            idempotency_key,
            if_none_match,
            upgrade,
            websocket_protocol,
            cookie,
            origin,
            refresh,
        };
        route(Incoming::new(request, head, body), env).value()
    }

    /// The one 503 as an answer (not a step), for an object's answer that never came (its
    /// promise rejected: the object reset under it, the runtime failing), with the cause logged.
    pub fn unavailable(cause: JsValue) -> JsValue {
        http::Plain::refusal(&unavailable("the object's answer", &Error::from(cause))).value()
    }

    /// 400 as an answer (not a step), for a body the runtime could not read (the client sent
    /// less than it declared, or went away), with the cause logged.
    pub fn unreadable(cause: JsValue) -> JsValue {
        console_log!("a request's body was unreadable: {}", Error::from(cause));
        http::Plain::refusal(&ApiError::invalid("body: unreadable")).value()
    }
}

/// What the edge does next with a request, as the router decided it.
enum Step {
    /// Answer this.
    Answer(http::Plain),
    /// Answer this answer value, as an object's RPC gave it (`[status, headers, body]`).
    Given(JsValue),
    /// Ask a hand-off over RPC (`handle(ask, body)`), its answer value made the response.
    Ask { namespace: &'static str, name: String, ask: String, body: Vec<u8> },
    /// Send an object a request and pass its answer on as it is: a held wait's stream, a
    /// watch's 101, the owner's index.
    Fetch {
        namespace: &'static str,
        name: String,
        url: &'static str,
        method: &'static str,
        headers: Vec<(&'static str, String)>,
        body: Option<String>,
    },
    /// The step that follows once this promise settles (a body of undeclared length, a
    /// create's rate limit, the runtime's WebCrypto); it never rejects.
    Later(js_sys::Promise),
    /// Read the whole body, whose declared length is within the limit, and route the request
    /// again with it.
    ReadBody,
    /// Read the whole body, of a declared length within the limit, and ask a hand-off over
    /// RPC with it, unread here: the object alone reads it (`Admission::object_reads_body`).
    ReadThenAsk { namespace: &'static str, name: String, ask: String },
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

    /// `[0, answer]`, `[1, namespace, name, ask, body or null]`, `[2, namespace, name, url, method, headers,
    /// body]`, `[3, promise of a step]`, `[4]` or `[5, namespace, name, ask]`: the plain value
    /// `src/entry.mjs` reads.
    fn value(self) -> JsValue {
        let s = |s: &str| JsValue::from_str(s);
        match self {
            Step::Answer(answer) => js_sys::Array::of2(&JsValue::from(0), &answer.value()).into(),
            Step::Given(answer) => js_sys::Array::of2(&JsValue::from(0), &answer).into(),
            Step::Ask { namespace, name, ask, body } => {
                let body =
                    if body.is_empty() { JsValue::NULL } else { js_sys::Uint8Array::from(body.as_slice()).into() };
                js_sys::Array::of5(&JsValue::from(1), &s(namespace), &s(&name), &s(&ask), &body).into()
            }
            Step::Fetch { namespace, name, url, method, headers, body } => {
                let headers: js_sys::Array =
                    headers.iter().map(|(n, v)| JsValue::from(js_sys::Array::of2(&s(n), &s(v)))).collect();
                let body = body.as_deref().map_or(JsValue::NULL, s);
                let parts = [JsValue::from(2), s(namespace), s(&name), s(url), s(method), headers.into(), body];
                parts.iter().collect::<js_sys::Array>().into()
            }
            Step::Later(promise) => js_sys::Array::of2(&JsValue::from(3), &promise).into(),
            Step::ReadBody => js_sys::Array::of1(&JsValue::from(4)).into(),
            Step::ReadThenAsk { namespace, name, ask } => {
                js_sys::Array::of4(&JsValue::from(5), &s(namespace), &s(&name), &s(&ask)).into()
            }
        }
    }
}

/// Routes one request to its step. A body is read before the request is routed: the edge
/// reads one of declared length, and a promise of ours one of undeclared length; a create is
/// counted against its owner's rate first, which takes a promise too. A hand-off's body of
/// declared length is the exception: routed first, it is read by the edge and passed on unread.
fn route(mut req: Incoming, env: Env) -> Step {
    let setting = bindings::setting(&env);
    let admitted = match admission::admit(&req.head, &setting, now_s()) {
        Ok(Admitted::Health(health)) => return Step::json(200, &health),
        Ok(Admitted::MethodNotAllowed(allowed)) => return method_not_allowed(&req.head.method, &allowed),
        Ok(Admitted::Route(admitted)) => admitted,
        Err(error) => return Step::refusal(&error),
    };
    let creates = matches!(admitted.route.kind, Kind::Create);
    let rules = admitted.body();
    let given = req.body.take();
    let read = match rules.before(req.head.content_length.as_deref(), given.as_ref().map(Vec::len), || req.has_body()) {
        Ok(Body::Declared) if admitted.object_reads_body() => {
            return match dispatch(&env, &req, &setting, &admitted, &[], None) {
                Ok(Step::Ask { namespace, name, ask, .. }) => Step::ReadThenAsk { namespace, name, ask },
                Ok(step) => step,
                Err(e) => Step::refusal(&e),
            };
        }
        Ok(Body::Declared) => return Step::ReadBody,
        // The body the edge read, or none at all.
        Ok(Body::Given | Body::Empty) => Some(given.unwrap_or_default()),
        Ok(Body::Undeclared) => None,
        Err(error) => return Step::refusal(&error),
    };
    if let (Some(body), false) = (&read, creates) {
        return dispatch(&env, &req, &setting, &admitted, body, None).unwrap_or_else(|e| Step::refusal(&e));
    }
    later(Box::pin(async move {
        let routed = async {
            let body = match read {
                Some(body) => body,
                None => stream_body(&req, rules).await?,
            };
            let create = admitted.create_input(&body)?;
            rate_limit(&env, &admitted).await?;
            let (create, listed) = match create {
                Some(create) if setting.machines_bound => match place(&env, &admitted, create).await {
                    Ok((create, true)) => {
                        let listed = admitted.listed(&create).map(|(owner, ask)| (owner.to_string(), ask));
                        (Some(create), listed)
                    }
                    Ok((create, false)) => (Some(create), None),
                    Err(answer) => return Ok(answer),
                },
                create => (create, None),
            };
            let step = dispatch(&env, &req, &setting, &admitted, &body, create)?;
            match listed {
                Some((owner, ask)) => Ok(create_listed(&env, step, &owner, ask).await.unwrap_or_else(|answer| answer)),
                None => Ok(step),
            }
        }
        .await;
        Ok(routed.unwrap_or_else(|e| Step::refusal(&e)))
    }))
}

#[derive(Serialize)]
struct ObjectStarts {
    handoff_objects: u64,
}

/// Carries out what admission says comes next: the ask, where it goes and how.
fn dispatch(
    env: &Env,
    req: &Incoming,
    setting: &Setting,
    admitted: &Admission,
    body: &[u8],
    create: Option<CreateInput>,
) -> std::result::Result<Step, ApiError> {
    let draw =
        |buf: &mut [u8]| webcrypto::fill(buf).map_err(|e| unavailable("drawing fresh randomness", &Error::from(e)));
    match admitted.next(&req.head, body, create, setting, now_ms, &draw)? {
        Next::Send { name, sent, carrier } => send(name, &sent, body, carrier),
        Next::Index { owner, ask } => {
            let wire = protocol::encode(&ask).map_err(|e| unavailable("encoding the index ask", &e))?;
            Ok(Step::fetch_ask(OWNER_INDEX, owner_index_name(owner), wire))
        }
        Next::Enrolments { ask } => {
            let wire = protocol::encode(&ask).map_err(|e| unavailable("encoding the enrolment ask", &e))?;
            Ok(Step::fetch_ask(ENROLMENTS, ENROLMENTS_OBJECT.to_string(), wire))
        }
        Next::Machines { owner, ask } => {
            let wire = protocol::encode(&ask).map_err(|e| unavailable("encoding the machines ask", &e))?;
            Ok(Step::fetch_ask(MACHINES, machines_name(owner), wire))
        }
        Next::Collect { ask } => Ok(later(Box::pin(collect(env.clone(), setting.clone(), ask)))),
        Next::CredentialToken { owner, check, id, sent } => {
            let (owner, env) = (owner.to_string(), env.clone());
            Ok(later(Box::pin(async move {
                ask_object(&env, MACHINES, &machines_name(&owner), wire(&check)?).await?;
                send(id, &sent, &[], Carrier::Rpc).map_err(|e| Step::refusal(&e))
            })))
        }
        Next::ObjectStarts => {
            let starts = crate::handoff_object::STARTS.load(std::sync::atomic::Ordering::Relaxed);
            Ok(Step::json(200, &ObjectStarts { handoff_objects: starts }))
        }
        Next::PushKey { pkcs8 } => {
            // The runtime derives the public key (WebCrypto is asynchronous): an answer on its way.
            Ok(later(Box::pin(async move {
                Ok(match webcrypto::vapid_key(&pkcs8).await {
                    Ok((_, public_key)) => Step::json(200, &notifications::PushKey { public_key }),
                    Err(e) => {
                        console_error!("the VAPID key did not import: {}", e.as_string().unwrap_or_default());
                        Step::refusal(&handoff_api::routes::push_misconfigured())
                    }
                })
            })))
        }
    }
}

/// A step that comes once `step` settles (its error is the answer to give). Boxed: every
/// awaited step of the router shares this one promise's code.
type Awaited = std::pin::Pin<Box<dyn std::future::Future<Output = std::result::Result<Step, Step>>>>;

fn later(step: Awaited) -> Step {
    Step::Later(future_to_promise(async move { Ok(step.await.unwrap_or_else(|answer| answer).value()) }))
}

/// The wire text of a machines' ask, or the one 503 as the step to answer.
fn wire(ask: &impl Serialize) -> std::result::Result<String, Step> {
    protocol::encode(ask).map_err(|e| Step::refusal(&unavailable("encoding a machines ask", &e)))
}

/// Asks an object (a machines' one) the ask of `wire` text and reads its 2xx answer's body; any
/// other answer is passed on to the client as it is. One function for every ask: only the
/// encoding is each ask type's own.
async fn ask_object(env: &Env, namespace: &str, name: &str, wire: String) -> std::result::Result<Vec<u8>, Step> {
    let failed = |what: &str, e: &dyn std::fmt::Display| Step::refusal(&unavailable(what, e));
    let stub = env.durable_object(namespace).and_then(|ns| ns.get_by_name(name)).map_err(|e| failed(namespace, &e))?;
    let pending = http::ask(&http::raw_stub(stub), "https://machines/ask", &wire).map_err(|e| failed(namespace, &e))?;
    let answer = http::await_answer(pending).await.map_err(|e| failed(namespace, &e))?;
    let body = http::bytes(&answer).await.map_err(|e| failed(namespace, &e))?;
    let status = answer.status();
    if !(200..300).contains(&status) {
        return Err(Step::Answer(http::Plain::new(status, JSON, body, false, Vec::new())));
    }
    Ok(body)
}

fn read<T: serde::de::DeserializeOwned>(body: &[u8]) -> std::result::Result<T, Step> {
    handoff_core::json::from_slice(body).map_err(|e| Step::refusal(&unavailable("reading a machines answer", &e)))
}

/// A create for an enrolled machine: its owner's `Machines` object fits the placement to what
/// the machine reported (or refuses it, and nothing is created); and whether it is enrolled.
async fn place(
    env: &Env,
    admitted: &Admission,
    mut create: CreateInput,
) -> std::result::Result<(CreateInput, bool), Step> {
    let Some((owner, ask)) = admitted.place(&create) else {
        return Ok((create, false));
    };
    let placed: Placed = read(&ask_object(env, MACHINES, &machines_name(owner), wire(&ask)?).await?)?;
    let enrolled = placed.placement.is_some();
    if let Some(placement) = placed.placement {
        create.place(placement);
    }
    Ok((create, enrolled))
}

#[wasm_bindgen]
extern "C" {
    /// A hand-off object's stub, as the Worker calls its RPC method `handle` (a method call on
    /// the stub: the runtime serves a stub's named methods, and no `Function.prototype.call`).
    type HandoffStub;
    #[wasm_bindgen(method)]
    fn handle(this: &HandoffStub, ask: &str, body: &JsValue) -> js_sys::Promise;
}

/// A create for an enrolled machine, sent to its hand-off (`step`, an RPC ask) here rather than
/// by the edge: once it answers 200 or 201, the hand-off is listed for the machine, which
/// wakes the machine's follows, so a machine is never told of a hand-off not yet created. A
/// listing that fails answers the one 503, and the create's retry lists it.
async fn create_listed(env: &Env, step: Step, owner: &str, listed: MachinesAsk) -> std::result::Result<Step, Step> {
    let Step::Ask { namespace, name, ask, body } = step else {
        return Ok(step);
    };
    let failed = |e: &dyn std::fmt::Display| Step::refusal(&unavailable("a create for an enrolled machine", e));
    let stub = env.durable_object(namespace).and_then(|ns| ns.get_by_name(&name)).map_err(|e| failed(&e))?;
    let stub: HandoffStub = JsValue::from(http::raw_stub(stub)).into();
    let body = if body.is_empty() { JsValue::NULL } else { js_sys::Uint8Array::from(body.as_slice()).into() };
    let answer = worker::wasm_bindgen_futures::JsFuture::from(stub.handle(&ask, &body))
        .await
        .map_err(|e| failed(&http::Failed::from(e)))?;
    let status = js_sys::Reflect::get_u32(&answer, 0).ok().and_then(|s| s.as_f64());
    if matches!(status, Some(s) if s == 200.0 || s == 201.0) {
        ask_object(env, MACHINES, &machines_name(owner), wire(&listed)?).await?;
    }
    Ok(Step::Given(answer))
}

/// A machine collects: once the owner it expects approved, its enrolment is over, the machine
/// is enrolled with that owner and its credential minted.
async fn collect(env: Env, setting: Setting, ask: machines::EnrolmentAsk) -> std::result::Result<Step, Step> {
    let body = ask_object(&env, ENROLMENTS, ENROLMENTS_OBJECT, wire(&ask)?).await?;
    let mut answer: CollectAnswer = read(&body)?;
    let (Some(owner), Some(name)) = (answer.approved_by.clone(), answer.machine.clone()) else {
        return Ok(Step::Answer(http::Plain::new(200, JSON, body, false, Vec::new())));
    };
    let enrol = MachinesAsk::Enrol(
        name.clone(),
        answer.host.clone().unwrap_or_default(),
        answer.fingerprint.clone().unwrap_or_default(),
    );
    let enrolled: Enrolled = read(&ask_object(&env, MACHINES, &machines_name(&owner), wire(&enrol)?).await?)?;
    let key = setting.key.as_deref().ok_or_else(|| Step::refusal(&handoff_api::error::ApiError::unavailable()))?;
    let credential = handoff_api::token::machine_credential(
        &owner,
        &name,
        enrolled.enrolled_at,
        key.as_bytes(),
        now_s(),
        &setting.expect,
    );
    answer.credential = Some(credential);
    Ok(Step::json(200, &answer))
}

/// A create counts against its owner's creations per minute, which the runtime's rate-limiting
/// binding keeps (`admission::rate_limited` past them).
async fn rate_limit(env: &Env, admitted: &Admission) -> std::result::Result<(), ApiError> {
    let Some(owner) = admitted.counted() else {
        return Ok(());
    };
    if bindings::creation_allowed(env, owner).await {
        return Ok(());
    }
    Err(admission::rate_limited())
}

/// A body of undeclared length, read as a stream and given up as soon as it passes the
/// route's cap, so that no request makes the isolate hold more than that.
async fn stream_body(req: &Incoming, rules: BodyRules) -> std::result::Result<Vec<u8>, ApiError> {
    let mut stream = req.to_worker().stream().map_err(|_| ApiError::invalid("body: unreadable"))?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::invalid("body: unreadable"))?;
        rules.chunk(body.len(), chunk.len())?;
        body.extend_from_slice(&chunk);
    }
    rules.streamed(body.len())?;
    Ok(body)
}

/// One request sent to a hand-off's object, as `carrier` says: over RPC with its body, its
/// answer a value made the client's response; by `fetch` (a GET: no body), its answer passed on
/// as it is; or as a watch's upgrade, forwarded with the ask in a header.
fn send(name: String, sent: &Sent, body: &[u8], carrier: Carrier) -> std::result::Result<Step, ApiError> {
    let wire = || protocol::encode(sent).map_err(|e| unavailable("encoding the ask", &e));
    Ok(match carrier {
        Carrier::Rpc => Step::Ask { namespace: HANDOFFS, name, ask: wire()?, body: body.to_vec() },
        Carrier::Fetch => Step::fetch_ask(HANDOFFS, name, wire()?),
        Carrier::Upgrade => {
            let header = protocol::encode_header(sent).map_err(|e| unavailable("encoding the ask", &e))?;
            let headers = vec![("Upgrade", "websocket".to_string()), (protocol::ASK_HEADER, header)];
            Step::Fetch { namespace: HANDOFFS, name, url: "https://handoff/watch", method: "GET", headers, body: None }
        }
    })
}

/// 405, naming the methods the route does allow in `Allow` (RFC 9110).
fn method_not_allowed(method: &str, allowed: &[&str]) -> Step {
    let (r, headers) = handoff_api::wire::method_not_allowed(method, allowed);
    Step::Answer(http::Plain::rendered(r, headers))
}
