//! The runtime's WebCrypto, for what the Worker does not link an implementation of: random
//! bytes (`crypto.getRandomValues`) for what must not be guessed, and AES-128-GCM and ES256
//! signing (`crypto.subtle`) for Web Push, which keeps an AES and ECDSA signing out of the
//! `.wasm` (the pure crate's own, tested against the RFCs, stay for native use and its tests).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use js_sys::{Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::wasm_bindgen_futures;

fn crypto() -> Result<JsValue, JsValue> {
    Reflect::get(&js_sys::global(), &JsValue::from_str("crypto"))
}

fn method(this: &JsValue, name: &str) -> Result<js_sys::Function, JsValue> {
    Reflect::get(this, &JsValue::from_str(name))?.dyn_into()
}

/// `N` random bytes, or the runtime's error.
pub fn bytes<const N: usize>() -> Result<[u8; N], JsValue> {
    let mut out = [0u8; N];
    fill(&mut out)?;
    Ok(out)
}

/// `out` filled with random bytes (`crypto.getRandomValues`), or the runtime's error.
pub fn fill(out: &mut [u8]) -> Result<(), JsValue> {
    let crypto = crypto()?;
    let array = Uint8Array::new_with_length(out.len() as u32);
    method(&crypto, "getRandomValues")?.call1(&crypto, &array)?;
    array.copy_to(out);
    Ok(())
}

/// AES-128-GCM of `plaintext` under `key` and `nonce`, no associated data: the ciphertext
/// followed by the 16-byte tag.
pub async fn seal_aes128gcm(key: &[u8; 16], nonce: &[u8; 12], plaintext: &[u8]) -> Result<Vec<u8>, JsValue> {
    let subtle = Reflect::get(&crypto()?, &JsValue::from_str("subtle"))?;
    let algorithm = Object::new();
    Reflect::set(&algorithm, &JsValue::from_str("name"), &JsValue::from_str("AES-GCM"))?;
    let usages = js_sys::Array::of1(&JsValue::from_str("encrypt"));
    let import = method(&subtle, "importKey")?;
    let args = js_sys::Array::of5(&JsValue::from_str("raw"), &Uint8Array::from(&key[..]), &algorithm, &JsValue::FALSE, &usages);
    let imported: js_sys::Promise = import.apply(&subtle, &args)?.dyn_into()?;
    let crypto_key = JsFuture::from(imported).await?;
    Reflect::set(&algorithm, &JsValue::from_str("iv"), &Uint8Array::from(&nonce[..]))?;
    let encrypt = method(&subtle, "encrypt")?;
    let sealed: js_sys::Promise = encrypt.call3(&subtle, &algorithm, &crypto_key, &Uint8Array::from(plaintext))?.dyn_into()?;
    Ok(Uint8Array::new(&JsFuture::from(sealed).await?).to_vec())
}

/// An ES256 signature (`r || s`, as a JWT carries it) of `data` under the P-256 key whose JWK
/// members `d`, `x`, `y` are given (base64url).
pub async fn sign_es256(d: &str, x: &str, y: &str, data: &[u8]) -> Result<[u8; 64], JsValue> {
    let subtle = Reflect::get(&crypto()?, &JsValue::from_str("subtle"))?;
    let set = |object: &Object, name: &str, value: &JsValue| Reflect::set(object, &JsValue::from_str(name), value).map(|_| ());
    let jwk = Object::new();
    for (name, value) in [("kty", "EC"), ("crv", "P-256"), ("d", d), ("x", x), ("y", y)] {
        set(&jwk, name, &JsValue::from_str(value))?;
    }
    let algorithm = Object::new();
    set(&algorithm, "name", &JsValue::from_str("ECDSA"))?;
    set(&algorithm, "namedCurve", &JsValue::from_str("P-256"))?;
    let usages = js_sys::Array::of1(&JsValue::from_str("sign"));
    let args = js_sys::Array::of5(&JsValue::from_str("jwk"), &jwk, &algorithm, &JsValue::FALSE, &usages);
    let imported: js_sys::Promise = method(&subtle, "importKey")?.apply(&subtle, &args)?.dyn_into()?;
    let key = JsFuture::from(imported).await?;
    set(&algorithm, "hash", &JsValue::from_str("SHA-256"))?;
    let signed: js_sys::Promise = method(&subtle, "sign")?.call3(&subtle, &algorithm, &key, &Uint8Array::from(data))?.dyn_into()?;
    let signature = Uint8Array::new(&JsFuture::from(signed).await?).to_vec();
    signature.try_into().map_err(|_| JsValue::from_str("an ES256 signature is 64 bytes"))
}
