//! The Worker's HTTP edges, written against the runtime's own `Request` and `Response`
//! (web-sys) instead of the `worker` crate's wrappers.
//!
//! Why (issue 12, `scripts/profile`): converting a `web_sys::Request` into a `worker::Request`
//! reads its `cf` object, its URL, its method and its headers across the boundary whatever the
//! route reads; a `worker::Response` is built in pieces (a `Headers`, a `Uint8Array` copied
//! into, a `ResponseInit`) and, when it wraps an object's answer, is taken apart and built
//! again on the way out. Here a route reads only what it needs, an answer is built in one
//! constructor call, and an object's answer goes back to the client as the runtime gave it.
//! Nothing else changes: the rules of each route stay in the router and in `handoff-api`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use handoff_api::error::ApiError;
use handoff_api::protocol;
use serde::de::DeserializeOwned;
use worker::js_sys::{Promise, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

/// What went wrong in the runtime, for the log (never for the client).
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Failed> for worker::Error {
    fn from(failed: Failed) -> worker::Error {
        worker::Error::RustError(failed.0)
    }
}

impl From<JsValue> for Failed {
    fn from(value: JsValue) -> Failed {
        Failed(value.as_string().unwrap_or_else(|| format!("{value:?}")))
    }
}

/// A client's request: its headers are fetched from the runtime once and read one by one.
pub struct Incoming {
    raw: web_sys::Request,
    headers: web_sys::Headers,
}

impl Incoming {
    pub fn new(raw: web_sys::Request) -> Incoming {
        let headers = raw.headers();
        Incoming { raw, headers }
    }

    pub fn url(&self) -> String {
        self.raw.url()
    }

    pub fn method(&self) -> String {
        self.raw.method()
    }

    /// One header's value, if the request has it.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).ok().flatten()
    }

    pub fn has_body(&self) -> bool {
        self.raw.body().is_some()
    }

    /// The whole body in one call (for a body whose length was declared and checked).
    pub async fn bytes(&self) -> Result<Vec<u8>, Failed> {
        read_bytes(self.raw.array_buffer()?).await
    }

    /// The `worker` crate's request, for reading a body of undeclared length chunk by chunk.
    pub fn to_worker(&self) -> worker::Request {
        // `Clone::clone`, not the method of the same name, which would copy the body.
        worker::Request::from(<web_sys::Request as Clone>::clone(&self.raw))
    }
}

/// A whole answer built in one call: its status, its `Content-Type` (none for an empty body)
/// and any further headers. The body is taken, not borrowed: the runtime copies it from the
/// wasm memory once, with no copy of ours before.
pub fn respond(status: u16, content_type: Option<&str>, mut body: Vec<u8>, extra: &[(&str, &str)]) -> Result<web_sys::Response, Failed> {
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    if content_type.is_some() || !extra.is_empty() {
        let headers = web_sys::Headers::new()?;
        if let Some(content_type) = content_type {
            headers.set("Content-Type", content_type)?;
        }
        for (name, value) in extra {
            headers.set(name, value)?;
        }
        init.set_headers(&headers);
    }
    // A null body for 304 and other bodiless answers: the runtime refuses a body on them.
    let body = (!body.is_empty()).then_some(body.as_mut_slice());
    Ok(web_sys::Response::new_with_opt_u8_array_and_init(body, &init)?)
}

/// A plain-text answer (an alarm's, which only the runtime reads).
pub fn plain(text: &str) -> worker::Result<web_sys::Response> {
    Ok(respond(200, Some("text/plain; charset=utf-8"), text.as_bytes().to_vec(), &[])?)
}

/// A JSON answer.
pub fn json(status: u16, body: &impl serde::Serialize, extra: &[(&str, &str)]) -> Result<web_sys::Response, Failed> {
    let text = serde_json::to_vec(body).map_err(|e| Failed(e.to_string()))?;
    respond(status, Some("application/json"), text, extra)
}

/// A refusal: its code's status and the error body.
pub fn refusal(error: &ApiError) -> worker::Result<web_sys::Response> {
    rendered(handoff_api::wire::refusal(error), &handoff_api::wire::refusal_headers(error.code))
}

/// An answer the wire rendered, with the headers it named.
pub fn rendered(r: handoff_core::session::Rendered, headers: &[(&'static str, String)]) -> worker::Result<web_sys::Response> {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    Ok(respond(r.status, Some(r.content_type), r.body.into_bytes(), &headers)?)
}

/// The whole body of an answer, as bytes.
pub async fn bytes(response: &web_sys::Response) -> Result<Vec<u8>, Failed> {
    read_bytes(response.array_buffer()?).await
}

/// What a body's `arrayBuffer()` resolves to, copied into the wasm memory.
async fn read_bytes(array_buffer: Promise) -> Result<Vec<u8>, Failed> {
    Ok(Uint8Array::new(&JsFuture::from(array_buffer).await?).to_vec())
}

/// What a body's `text()` resolves to.
async fn read_text(text: Promise) -> Result<String, Failed> {
    JsFuture::from(text).await?.as_string().ok_or_else(|| Failed("a body is not text".into()))
}

/// A Durable Object's stub, as the runtime's own object.
pub fn raw_stub(stub: worker::Stub) -> worker::worker_sys::DurableObject {
    stub.into_rpc()
}

/// Sends `request` to an object: the promise of its answer as the runtime will give it (a
/// stream, a WebSocket's 101), untouched.
pub fn fetch(stub: &worker::worker_sys::DurableObject, request: &web_sys::Request) -> Result<Promise, Failed> {
    Ok(stub.fetch_with_request(request)?)
}

#[worker::wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// A promise whose rejection is handed to a function that answers in its place.
    #[wasm_bindgen(extends = Promise)]
    type Rejectable;
    /// `promise.catch(onRejected)`: the promise then resolves to the handler's value.
    #[wasm_bindgen(method, js_name = catch)]
    fn catch_with(this: &Rejectable, on_rejected: &worker::js_sys::Function) -> Promise;
    /// `promise.then(onFulfilled)`.
    #[wasm_bindgen(method, js_name = then)]
    fn then_call(this: &Rejectable, on_fulfilled: &worker::js_sys::Function) -> Promise;
}

/// What `on_fulfilled` makes of `answer`.
pub fn and_then(answer: &Promise, on_fulfilled: &worker::js_sys::Function) -> Promise {
    answer.unchecked_ref::<Rejectable>().then_call(on_fulfilled)
}

/// `answer`, or what `on_rejected` answers when it rejects.
pub fn or_else(answer: &Promise, on_rejected: &worker::js_sys::Function) -> Promise {
    answer.unchecked_ref::<Rejectable>().catch_with(on_rejected)
}

/// An object's answer, awaited where the Worker reads it.
pub async fn await_answer(answer: Promise) -> Result<web_sys::Response, Failed> {
    let answer = JsFuture::from(answer).await?;
    answer.dyn_into::<web_sys::Response>().map_err(|_| Failed("an object answered something other than a Response".into()))
}

/// Sends an encoded ask (`protocol::encode`) to an object: in [`protocol::ASK_HEADER`] when it
/// fits, where the object reads it with no await, or else as the body.
pub fn ask(stub: &worker::worker_sys::DurableObject, url: &str, wire: &str) -> Result<Promise, Failed> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    match protocol::header_of(wire) {
        Some(value) => {
            let headers = web_sys::Headers::new()?;
            headers.set(protocol::ASK_HEADER, &value)?;
            init.set_headers(&headers);
        }
        None => init.set_body(&JsValue::from_str(wire)),
    }
    fetch(stub, &web_sys::Request::new_with_str_and_init(url, &init)?)
}

#[worker::wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// An object's stub, for its RPC methods (`src/entry.mjs` declares them).
    #[wasm_bindgen(extends = worker::js_sys::Object)]
    type RpcStub;
    /// `stub.handle(ask)`: a hand-off object's answer to one encoded ask, as a value.
    #[wasm_bindgen(method, catch, js_name = handle)]
    fn handle(this: &RpcStub, ask: &str) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_name = Response)]
    type BodyResponse;
    /// `new Response(body, init)` with a body that is already the runtime's (no copy of ours).
    #[wasm_bindgen(constructor, catch, js_class = "Response")]
    fn new_with_body(body: &JsValue, init: &web_sys::ResponseInit) -> Result<BodyResponse, JsValue>;
}

/// Sends an encoded ask to a hand-off object over RPC: the promise of its answer as a value
/// ([`answer_value`]).
pub fn handle(stub: &worker::worker_sys::DurableObject, wire: &str) -> Result<Promise, Failed> {
    Ok(stub.unchecked_ref::<RpcStub>().handle(wire)?)
}

/// An object's answer as the value RPC carries: `[status, body or null, Content-Type or null,
/// replayed]`, the body as bytes the runtime copies once.
pub fn answer_value(status: u16, content_type: Option<&str>, body: &[u8], replayed: bool) -> JsValue {
    let body = if body.is_empty() { JsValue::NULL } else { Uint8Array::from(body).into() };
    let content_type = content_type.map_or(JsValue::NULL, JsValue::from_str);
    worker::js_sys::Array::of4(&JsValue::from(status), &body, &content_type, &JsValue::from(replayed)).into()
}

/// An [`answer_value`] as the client's response, its body passed on as the runtime holds it.
pub fn response_of_value(value: &JsValue) -> Result<web_sys::Response, Failed> {
    let parts = value.dyn_ref::<worker::js_sys::Array>().ok_or_else(|| Failed("an object's answer is not an answer value".into()))?;
    let status = parts.get(0).as_f64().ok_or_else(|| Failed("an answer value without a status".into()))?;
    let init = web_sys::ResponseInit::new();
    init.set_status(status as u16);
    let content_type = parts.get(2).as_string();
    let replayed = parts.get(3).is_truthy();
    if content_type.is_some() || replayed {
        let headers = web_sys::Headers::new()?;
        if let Some(content_type) = content_type {
            headers.set("Content-Type", &content_type)?;
        }
        if replayed {
            headers.set("Idempotent-Replayed", "true")?;
        }
        init.set_headers(&headers);
    }
    Ok(BodyResponse::new_with_body(&parts.get(1), &init)?.unchecked_into())
}

/// The ask an object was sent by [`ask`] (or by a watch's forwarded upgrade) when it came in
/// [`protocol::ASK_HEADER`], read with no await; `None` when it is the body. The outer error is
/// the runtime's; the inner one an ask this build cannot read.
pub fn ask_in_header<T: DeserializeOwned>(req: &web_sys::Request) -> Result<Option<Result<T, protocol::Unreadable>>, Failed> {
    Ok(req.headers().get(protocol::ASK_HEADER)?.map(|value| protocol::decode_header(&value)))
}

/// The ask an object was sent as the body.
pub async fn ask_in_body<T: DeserializeOwned>(req: &web_sys::Request) -> Result<Result<T, protocol::Unreadable>, Failed> {
    Ok(protocol::decode(&read_text(req.text()?).await?))
}

/// The ask an object was sent, from the header when it is there, else from the body.
pub async fn read_ask<T: DeserializeOwned>(req: &web_sys::Request) -> Result<Result<T, protocol::Unreadable>, Failed> {
    match ask_in_header(req)? {
        Some(decoded) => Ok(decoded),
        None => ask_in_body(req).await,
    }
}

/// A `GET` to an object's internal URL with these headers (a watch's forwarded upgrade).
pub fn get_with(url: &str, headers: &[(&str, &str)]) -> Result<web_sys::Request, Failed> {
    let init = web_sys::RequestInit::new();
    init.set_method("GET");
    let set = web_sys::Headers::new()?;
    for (name, value) in headers {
        set.set(name, value)?;
    }
    init.set_headers(&set);
    Ok(web_sys::Request::new_with_str_and_init(url, &init)?)
}
