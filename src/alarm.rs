//! Setting a Durable Object's alarm without an await, and still seeing when the runtime
//! refuses it: the write is issued at once (so it joins the event's implicit transaction,
//! after the writes before it), and its promise is awaited on its own with a failure logged.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::{self, JsFuture};
use worker::{console_error, worker_sys, Result};

/// Sets the alarm of `storage` to `at_ms`; `concerns` names what it is for in the log line a
/// refusal writes.
pub fn set(storage: &worker_sys::DurableObjectStorage, at_ms: i64, concerns: &'static str) -> Result<()> {
    let at = js_sys::Date::new(&JsValue::from_f64(at_ms as f64));
    let set = storage.set_alarm(at, js_sys::Object::new())?;
    wasm_bindgen_futures::spawn_local(async move {
        if let Err(e) = JsFuture::from(set).await {
            console_error!("the alarm for {concerns} at {at_ms} was refused: {e:?}");
        }
    });
    Ok(())
}
