//! Random bytes from the runtime's `crypto.getRandomValues`, for what must not be guessed: a
//! webhook's id and secret.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use wasm_bindgen::{JsCast, JsValue};

/// `N` random bytes, or the runtime's error.
pub fn bytes<const N: usize>() -> Result<[u8; N], JsValue> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crypto"))?;
    let get: js_sys::Function = js_sys::Reflect::get(&crypto, &JsValue::from_str("getRandomValues"))?.dyn_into()?;
    let array = js_sys::Uint8Array::new_with_length(N as u32);
    get.call1(&crypto, &array)?;
    let mut out = [0u8; N];
    array.copy_to(&mut out);
    Ok(out)
}
