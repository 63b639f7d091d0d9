//! One notification's `POST`, made with the runtime's own `fetch` (the `worker` crate's request
//! types add conversions this needs none of): the status, or `None` when no answer came within
//! `WEBHOOK_TIMEOUT_MS` or the request could not be made. A redirect is an answer, not another
//! place to send the body.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use handoff_core::limits::WEBHOOK_TIMEOUT_MS;
use js_sys::Reflect;
use std::cell::Cell;
use std::time::Duration;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{console_log, wasm_bindgen_futures, web_sys, Delay};

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

pub async fn post(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<u16> {
    if LOOPBACK_ONLY.with(Cell::get) && !is_loopback(url) {
        console_log!("a notification to a host other than 127.0.0.1 is not sent by a test Worker");
        return None;
    }
    let request = request(url, headers, body).ok()?;
    let fetch: js_sys::Function = Reflect::get(&js_sys::global(), &JsValue::from_str("fetch")).ok()?.dyn_into().ok()?;
    let answer: js_sys::Promise = fetch.call1(&JsValue::UNDEFINED, &request).ok()?.dyn_into().ok()?;
    let answer = Box::pin(JsFuture::from(answer));
    let timeout = Box::pin(Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS as u64)));
    match futures::future::select(answer, timeout).await {
        futures::future::Either::Left((Ok(response), _)) => Some(response.dyn_into::<web_sys::Response>().ok()?.status()),
        futures::future::Either::Left((Err(e), _)) => {
            console_log!("a notification's POST failed: {:?}", e.as_string());
            None
        }
        futures::future::Either::Right(_) => None,
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
