//! The runtime's WebCrypto, for what the Worker does not link an implementation of: random
//! bytes (`crypto.getRandomValues`) for what must not be guessed, and for Web Push AES-128-GCM,
//! P-256 ECDH, ES256 signing and the VAPID public key (`crypto.subtle`), which keeps an AES,
//! ECDSA and P-256 point arithmetic out of the `.wasm` (the pure crate's own, tested against the
//! RFCs, stay for native use and its tests).
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

fn subtle() -> Result<JsValue, JsValue> {
    Reflect::get(&crypto()?, &JsValue::from_str("subtle"))
}

fn set(object: &Object, name: &str, value: &JsValue) -> Result<(), JsValue> {
    Reflect::set(object, &JsValue::from_str(name), value).map(|_| ())
}

/// `{name, namedCurve: "P-256"}`.
fn p256(name: &str) -> Result<Object, JsValue> {
    let algorithm = Object::new();
    set(&algorithm, "name", &JsValue::from_str(name))?;
    set(&algorithm, "namedCurve", &JsValue::from_str("P-256"))?;
    Ok(algorithm)
}

/// Awaits `subtle.<name>(args…)`.
async fn call(name: &str, args: &js_sys::Array) -> Result<JsValue, JsValue> {
    let subtle = subtle()?;
    let promise: js_sys::Promise = method(&subtle, name)?.apply(&subtle, args)?.dyn_into()?;
    JsFuture::from(promise).await
}

fn bytes_of(value: &JsValue) -> Vec<u8> {
    Uint8Array::new(value).to_vec()
}

/// AES-128-GCM of `plaintext` under `key` and `nonce`, no associated data: the ciphertext
/// followed by the 16-byte tag.
pub async fn seal_aes128gcm(key: &[u8; 16], nonce: &[u8; 12], plaintext: &[u8]) -> Result<Vec<u8>, JsValue> {
    let algorithm = Object::new();
    set(&algorithm, "name", &JsValue::from_str("AES-GCM"))?;
    let usages = js_sys::Array::of1(&JsValue::from_str("encrypt"));
    let args = js_sys::Array::of5(
        &JsValue::from_str("raw"),
        &Uint8Array::from(&key[..]),
        &algorithm,
        &JsValue::FALSE,
        &usages,
    );
    let crypto_key = call("importKey", &args).await?;
    set(&algorithm, "iv", &Uint8Array::from(&nonce[..]))?;
    Ok(bytes_of(&call("encrypt", &js_sys::Array::of3(&algorithm, &crypto_key, &Uint8Array::from(plaintext))).await?))
}

/// A P-256 public key (uncompressed) imported for ECDH; the runtime refuses a point off the curve.
async fn import_p256_public(point: &[u8; 65]) -> Result<JsValue, JsValue> {
    let algorithm = p256("ECDH")?;
    let args = js_sys::Array::of5(
        &JsValue::from_str("raw"),
        &Uint8Array::from(&point[..]),
        &algorithm,
        &JsValue::FALSE,
        &js_sys::Array::new(),
    );
    call("importKey", &args).await
}

/// One message's ECDH with a subscription's key `ua_public` (uncompressed P-256): a fresh
/// key pair, its public key (uncompressed) and the shared secret (32 bytes).
pub async fn ecdh_p256(ua_public: &[u8; 65]) -> Result<([u8; 65], [u8; 32]), JsValue> {
    let usages = js_sys::Array::of1(&JsValue::from_str("deriveBits"));
    let algorithm = p256("ECDH")?;
    let pair = call("generateKey", &js_sys::Array::of3(&algorithm, &JsValue::TRUE, &usages)).await?;
    let private = Reflect::get(&pair, &JsValue::from_str("privateKey"))?;
    let public = Reflect::get(&pair, &JsValue::from_str("publicKey"))?;
    let as_public = bytes_of(&call("exportKey", &js_sys::Array::of2(&JsValue::from_str("raw"), &public)).await?);
    let peer = import_p256_public(ua_public).await?;
    set(&algorithm, "public", &peer)?;
    let secret =
        bytes_of(&call("deriveBits", &js_sys::Array::of3(&algorithm, &private, &JsValue::from_f64(256.0))).await?);
    let as_public = as_public.try_into().map_err(|_| JsValue::from_str("an exported P-256 public key is 65 bytes"))?;
    let secret = secret.try_into().map_err(|_| JsValue::from_str("a P-256 ECDH secret is 32 bytes"))?;
    Ok((as_public, secret))
}

/// Whether `point` (uncompressed) is on P-256: the runtime imports no other.
pub async fn is_p256_point(point: &[u8; 65]) -> bool {
    import_p256_public(point).await.is_ok()
}

/// The VAPID private key (PKCS#8, `VapidKey::pkcs8`) imported for signing, and its public key
/// (base64url of the uncompressed point), which the runtime derives.
pub async fn vapid_key(pkcs8: &[u8]) -> Result<(JsValue, String), JsValue> {
    let usages = js_sys::Array::of1(&JsValue::from_str("sign"));
    let algorithm = p256("ECDSA")?;
    let args =
        js_sys::Array::of5(&JsValue::from_str("pkcs8"), &Uint8Array::from(pkcs8), &algorithm, &JsValue::TRUE, &usages);
    let key = call("importKey", &args).await?;
    let jwk = call("exportKey", &js_sys::Array::of2(&JsValue::from_str("jwk"), &key)).await?;
    let coordinate = |name: &str| Reflect::get(&jwk, &JsValue::from_str(name)).ok().and_then(|v| v.as_string());
    let (Some(x), Some(y)) = (coordinate("x"), coordinate("y")) else {
        return Err(JsValue::from_str("the exported VAPID key has no x or y"));
    };
    Ok((
        key,
        handoff_notify::vapid::public_key_of_jwk(&x, &y)
            .ok_or_else(|| JsValue::from_str("the exported VAPID key's x or y is not 32 bytes"))?,
    ))
}

/// An ES256 signature (`r || s`, as a JWT carries it) of `data` under `key` ([`vapid_key`]).
pub async fn sign_es256(key: &JsValue, data: &[u8]) -> Result<[u8; 64], JsValue> {
    let algorithm = Object::new();
    set(&algorithm, "name", &JsValue::from_str("ECDSA"))?;
    set(&algorithm, "hash", &JsValue::from_str("SHA-256"))?;
    let signature = bytes_of(&call("sign", &js_sys::Array::of3(&algorithm, key, &Uint8Array::from(data))).await?);
    signature.try_into().map_err(|_| JsValue::from_str("an ES256 signature is 64 bytes"))
}
