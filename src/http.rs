//! The Worker's HTTP edges, written against the runtime's own `Request` and `Response`
//! (web-sys) instead of the `worker` crate's wrappers.
//!
//! Why (issue 12, `scripts/profile`): converting a `web_sys::Request` into a `worker::Request`
//! reads its `cf` object, its URL, its method and its headers across the boundary whatever the
//! route reads; a `worker::Response` is built in pieces (a `Headers`, a `Uint8Array` copied
//! into, a `ResponseInit`) and, when it wraps an object's answer, is taken apart and built
//! again on the way out. Here a route reads only what it needs, an answer is built in one
//! constructor call, and an object's answer goes back to the client as the runtime gave it.
//! Nothing else changes: the rules of each route stay in `handoff-api`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use handoff_api::admission::Head;
use handoff_api::error::ApiError;
use handoff_api::protocol;
use serde::de::DeserializeOwned;
use worker::js_sys::{Array, Promise, Uint8Array};
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

/// A client's request: its head (method, URL and the headers the service reads) as the edge
/// handed them over, its body once the edge has read it, and the runtime's request for a body
/// still to stream.
pub struct Incoming {
    raw: web_sys::Request,
    pub head: Head,
    pub body: Option<Vec<u8>>,
}

impl Incoming {
    pub fn new(raw: web_sys::Request, head: Head, body: Option<Vec<u8>>) -> Incoming {
        Incoming { raw, head, body }
    }

    pub fn has_body(&self) -> bool {
        self.raw.body().is_some()
    }

    /// The `worker` crate's request, for reading a body of undeclared length chunk by chunk.
    pub fn to_worker(&self) -> worker::Request {
        // `Clone::clone`, not the method of the same name, which would copy the body.
        worker::Request::from(<web_sys::Request as Clone>::clone(&self.raw))
    }
}

/// An answer as a plain value the JavaScript edge makes a `Response` of, in one constructor
/// call: `[status, [[name, value], …] or undefined, body text (or bytes) or null]`. An empty body is null
/// and has no `Content-Type` (the runtime refuses a body on 204 and 304).
pub struct Plain {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Plain {
    /// An answer with its `Content-Type` (kept only with a body), whether it is a replay, and
    /// any further headers.
    pub fn new(
        status: u16,
        content_type: &str,
        body: Vec<u8>,
        replayed: bool,
        mut headers: Vec<(&'static str, String)>,
    ) -> Plain {
        if !body.is_empty() {
            headers.insert(0, ("Content-Type", content_type.to_string()));
        }
        if replayed {
            headers.push(("Idempotent-Replayed", "true".to_string()));
        }
        // Every 401 says how to authenticate (RFC 6750 §3), an object's too (`auth.revoked`).
        if status == 401 && !headers.iter().any(|(name, _)| *name == "WWW-Authenticate") {
            headers.push(("WWW-Authenticate", "Bearer".to_string()));
        }
        Plain { status, headers, body }
    }

    /// An answer the wire rendered, with the headers it named.
    pub fn rendered(r: handoff_core::decider::Rendered, headers: Vec<(&'static str, String)>) -> Plain {
        Plain::new(r.status, r.content_type, r.body.into_bytes(), r.replayed, headers)
    }

    /// A refusal: its code's status, the error body and the headers its code names.
    pub fn refusal(error: &ApiError) -> Plain {
        Plain::rendered(handoff_api::wire::refusal(error), handoff_api::wire::refusal_headers(error.code))
    }

    /// The runtime's `Response` of this answer, for an object's `fetch`.
    pub fn response(self) -> Result<web_sys::Response, Failed> {
        let headers: Vec<(&str, &str)> = self.headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
        respond(self.status, self.body, &headers)
    }

    pub fn value(&self) -> JsValue {
        let headers = if self.headers.is_empty() {
            JsValue::UNDEFINED
        } else {
            self.headers
                .iter()
                .map(|(name, value)| JsValue::from(Array::of2(&JsValue::from_str(name), &JsValue::from_str(value))))
                .collect::<Array>()
                .into()
        };
        // Text goes as a string, which the runtime takes more cheaply than bytes (bench/HISTORY.md).
        let body = match std::str::from_utf8(&self.body) {
            _ if self.body.is_empty() => JsValue::NULL,
            Ok(text) => JsValue::from_str(text),
            Err(_) => Uint8Array::from(self.body.as_slice()).into(),
        };
        Array::of3(&JsValue::from(self.status), &headers, &body).into()
    }
}

/// A whole answer built in one call: its status, its headers and its body. The body is taken,
/// not borrowed: the runtime copies it from the wasm memory once, with no copy of ours before.
fn respond(status: u16, mut body: Vec<u8>, headers: &[(&str, &str)]) -> Result<web_sys::Response, Failed> {
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    if !headers.is_empty() {
        let set = web_sys::Headers::new()?;
        for (name, value) in headers {
            set.set(name, value)?;
        }
        init.set_headers(&set);
    }
    // A null body for 304 and other bodiless answers: the runtime refuses a body on them.
    let body = (!body.is_empty()).then_some(body.as_mut_slice());
    Ok(web_sys::Response::new_with_opt_u8_array_and_init(body, &init)?)
}

/// A JSON answer whose headers go out at once and whose body is the one chunk `body` comes to:
/// a held wait's or a held follow's. When the client goes away the runtime cancels the stream,
/// which drops `body` there and then. Boxed, so the stream's glue is compiled once for both.
pub fn streamed_json(
    body: std::pin::Pin<Box<dyn std::future::Future<Output = worker::Result<Vec<u8>>>>>,
) -> worker::Result<web_sys::Response> {
    let mut response = worker::Response::from_stream(futures::stream::once(body))?;
    response.headers_mut().set("Content-Type", "application/json")?;
    Ok(response.into())
}

/// A plain-text answer (an alarm's, which only the runtime reads).
pub fn plain(text: &str) -> worker::Result<web_sys::Response> {
    Ok(Plain::new(200, "text/plain; charset=utf-8", text.as_bytes().to_vec(), false, Vec::new()).response()?)
}

/// A refusal: its code's status and the error body.
pub fn refusal(error: &ApiError) -> worker::Result<web_sys::Response> {
    Ok(Plain::refusal(error).response()?)
}

/// An answer the wire rendered, with the headers it named.
pub fn rendered(
    r: handoff_core::decider::Rendered,
    headers: &[(&'static str, String)],
) -> worker::Result<web_sys::Response> {
    Ok(Plain::rendered(r, headers.to_vec()).response()?)
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

/// An object's answer, awaited where the Worker reads it.
pub async fn await_answer(answer: Promise) -> Result<web_sys::Response, Failed> {
    let answer = JsFuture::from(answer).await?;
    answer
        .dyn_into::<web_sys::Response>()
        .map_err(|_| Failed("an object answered something other than a Response".into()))
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

/// The ask an object was sent by [`ask`] (or by a watch's forwarded upgrade) when it came in
/// [`protocol::ASK_HEADER`], read with no await; `None` when it is the body. The outer error is
/// the runtime's; the inner one an ask this build cannot read.
pub fn ask_in_header<T: DeserializeOwned>(
    req: &web_sys::Request,
) -> Result<Option<Result<T, protocol::Unreadable>>, Failed> {
    Ok(req.headers().get(protocol::ASK_HEADER)?.map(|value| protocol::decode_header(&value)))
}

/// The ask an object was sent as the body.
pub async fn ask_in_body<T: DeserializeOwned>(
    req: &web_sys::Request,
) -> Result<Result<T, protocol::Unreadable>, Failed> {
    Ok(protocol::decode(&read_text(req.text()?).await?))
}

/// The wire text of the ask an object was sent, from the header when it is there, else from
/// the body: read once for every ask type (each object decodes its own).
pub async fn ask_text(req: &web_sys::Request) -> Result<Result<String, protocol::Unreadable>, Failed> {
    match req.headers().get(protocol::ASK_HEADER)? {
        Some(value) => Ok(protocol::header_text(&value)),
        None => Ok(Ok(read_text(req.text()?).await?)),
    }
}

/// The ask an object was sent, from the header when it is there, else from the body.
pub async fn read_ask<T: DeserializeOwned>(req: &web_sys::Request) -> Result<Result<T, protocol::Unreadable>, Failed> {
    match ask_in_header(req)? {
        Some(decoded) => Ok(decoded),
        None => ask_in_body(req).await,
    }
}
