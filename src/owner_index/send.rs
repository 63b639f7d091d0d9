//! One notification's `POST`, made with the runtime's own `fetch` (the `worker` crate's request
//! types add conversions this needs none of): the status, or a [`PostFailure`] when no answer
//! came within `WEBHOOK_TIMEOUT_MS` or the request could not be made. A redirect is an answer,
//! not another place to send the body.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use handoff_core::limits::WEBHOOK_TIMEOUT_MS;
use js_sys::Reflect;
use std::cell::Cell;
use std::time::Duration;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{wasm_bindgen_futures, web_sys, Delay};

thread_local! {
    /// Set where test hooks are on: a test or a fuzzer may register any `https` host, and a
    /// test run sends nothing beyond this machine.
    static LOOPBACK_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Sends notifications to `127.0.0.1` only, from now on in this isolate (a test Worker's).
pub fn loopback_only(on: bool) {
    LOOPBACK_ONLY.with(|c| c.set(on));
}

/// `http(s)://127.0.0.1[:port]/…`.
fn is_loopback(url: &str) -> bool {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or_default();
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    host == "127.0.0.1" || host.starts_with("127.0.0.1:")
}

/// Why a notification's `POST` has no status; each is retried as a missing answer is.
#[derive(Debug)]
pub enum PostFailure {
    /// A test Worker sends to 127.0.0.1 only.
    NotLoopback,
    /// The request could not be built or `fetch` not called (its reason).
    Request(String),
    /// `fetch` was refused: no connection, a TLS failure (its reason).
    Refused(String),
    /// No answer within `WEBHOOK_TIMEOUT_MS`.
    TimedOut,
}

impl std::fmt::Display for PostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostFailure::NotLoopback => write!(f, "not sent: a test Worker sends to 127.0.0.1 only"),
            PostFailure::Request(why) => write!(f, "the request could not be made: {why}"),
            PostFailure::Refused(why) => write!(f, "the POST failed: {why}"),
            PostFailure::TimedOut => write!(f, "no answer within {WEBHOOK_TIMEOUT_MS} ms"),
        }
    }
}

/// Why a notification got no status: something stored this build cannot use, a step of its
/// encryption or signature the runtime refused, or its `POST`.
#[derive(Debug)]
pub enum NotSent {
    Unreadable(&'static str),
    Refused(&'static str, String),
    Post(PostFailure),
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSent::Unreadable(what) => write!(f, "its stored {what} is unreadable"),
            NotSent::Refused(step, why) => write!(f, "{step} was refused: {why}"),
            NotSent::Post(failure) => failure.fmt(f),
        }
    }
}

impl From<PostFailure> for NotSent {
    fn from(failure: PostFailure) -> NotSent {
        NotSent::Post(failure)
    }
}

/// `what`'s cause, as a `NotSent`.
pub fn refused(step: &'static str) -> impl FnOnce(JsValue) -> NotSent {
    move |e| NotSent::Refused(step, reason(&e))
}

fn reason(e: &JsValue) -> String {
    e.as_string().or_else(|| e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message()))).unwrap_or_else(|| format!("{e:?}"))
}

pub async fn post(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, PostFailure> {
    if LOOPBACK_ONLY.with(Cell::get) && !is_loopback(url) {
        return Err(PostFailure::NotLoopback);
    }
    let request = request(url, headers, body).map_err(|e| PostFailure::Request(reason(&e)))?;
    let fetch: js_sys::Function = Reflect::get(&js_sys::global(), &JsValue::from_str("fetch"))
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| PostFailure::Request("no global fetch".into()))?;
    let answer: js_sys::Promise = fetch
        .call1(&JsValue::UNDEFINED, &request)
        .map_err(|e| PostFailure::Request(reason(&e)))?
        .dyn_into()
        .map_err(|_| PostFailure::Request("fetch returned no promise".into()))?;
    let answer = Box::pin(JsFuture::from(answer));
    let timeout = Box::pin(Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS as u64)));
    match futures::future::select(answer, timeout).await {
        futures::future::Either::Left((Ok(response), _)) => {
            response.dyn_into::<web_sys::Response>().map(|r| r.status()).map_err(|_| PostFailure::Refused("fetch answered no Response".into()))
        }
        futures::future::Either::Left((Err(e), _)) => Err(PostFailure::Refused(reason(&e))),
        futures::future::Either::Right(_) => Err(PostFailure::TimedOut),
    }
}

fn request(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<web_sys::Request, JsValue> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    let set = web_sys::Headers::new()?;
    for (name, value) in headers {
        set.set(name, value)?;
    }
    init.set_headers(&set);
    init.set_body(&js_sys::Uint8Array::from(body));
    Reflect::set(&init, &JsValue::from_str("redirect"), &JsValue::from_str("manual"))?;
    web_sys::Request::new_with_str_and_init(url, &init)
}
