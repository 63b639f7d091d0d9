//! VAPID (RFC 8292): the application server's key pair and the `Authorization: vapid` header.
//!
//! The key pair is read from one secret, the base64url (unpadded) raw 32-byte P-256 private
//! scalar, as web-push libraries generate it; its public key is the base64url uncompressed
//! point a browser takes as `applicationServerKey`. Tokens are ES256 JWTs (RFC 7515/7518:
//! the signature is `r || s`), signed deterministically (RFC 6979), so no randomness is needed.

use crate::b64;
use crate::endpoint::Endpoint;
#[cfg(feature = "software")]
use crate::limits::VAPID_TOKEN_TTL_S;
use crate::limits::{VAPID_SUBJECT_BYTES_MAX, VAPID_TOKEN_TTL_S_MAX};
#[cfg(feature = "software")]
use p256::ecdsa::signature::{Signer, Verifier};
#[cfg(feature = "software")]
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The public development private key: its text says what it is. Only a `local` Worker may
/// use it; every other environment refuses it, as it refuses the development signing key.
/// DO NOT DEPLOY: anyone can sign push messages with it.
pub const DEV_VAPID_PRIVATE_KEY: &str = "handoff-development-push-key-do-not-deploy0";
/// The development key's public half (the `applicationServerKey` of a local console).
pub const DEV_VAPID_PUBLIC_KEY: &str =
    "BFKFpDLat7viT6Z2G6t8qLLDFW1EnutCdxVU3r5F3s9cZwgXqb8fxy-z49LMnMQbw92g7e1bVrmRRq5FNS3SYEI";

/// The JOSE header of every token: `{"typ":"JWT","alg":"ES256"}`.
const JWT_HEADER: &str = r#"{"typ":"JWT","alg":"ES256"}"#;

/// The application server's key pair: the private scalar, checked in range, and its public
/// key, derived in software the first time it is asked for. The Worker never asks: it derives
/// it with the runtime's WebCrypto from [`VapidKey::pkcs8`], which keeps P-256 point
/// arithmetic out of its `.wasm`.
#[derive(Clone)]
pub struct VapidKey {
    secret: [u8; 32],
    #[cfg(feature = "software")]
    public: std::cell::OnceCell<String>,
}

/// Why a VAPID private key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VapidKeyError {
    /// Not URL-safe base64.
    Base64,
    /// Not 32 bytes.
    Length { bytes: usize },
    /// Zero, or not below the group order.
    OutOfRange,
}

impl fmt::Display for VapidKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VapidKeyError::Base64 => f.write_str("the VAPID private key is not URL-safe base64"),
            VapidKeyError::Length { bytes } => write!(f, "the VAPID private key holds 32 bytes, not {bytes}"),
            VapidKeyError::OutOfRange => f.write_str("the VAPID private key is not a P-256 private key"),
        }
    }
}

impl std::error::Error for VapidKeyError {}

impl VapidKey {
    /// Reads the secret: the base64url raw private scalar (padding tolerated).
    pub fn parse(secret: &str) -> Result<VapidKey, VapidKeyError> {
        let bytes = b64::url_decode(secret.trim()).ok_or(VapidKeyError::Base64)?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| VapidKeyError::Length { bytes: b.len() })?;
        VapidKey::from_bytes(&bytes)
    }

    /// A key from 32 random bytes (to make a new pair), or from the stored scalar.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<VapidKey, VapidKeyError> {
        if !is_private_scalar(bytes) {
            return Err(VapidKeyError::OutOfRange);
        }
        Ok(VapidKey {
            secret: *bytes,
            #[cfg(feature = "software")]
            public: std::cell::OnceCell::new(),
        })
    }

    #[cfg(feature = "software")]
    fn signing(&self) -> SigningKey {
        match SigningKey::from_slice(&self.secret) {
            Ok(key) => key,
            Err(_) => unreachable!("the scalar was checked in range when the key was read"),
        }
    }

    /// The secret's normal form: unpadded base64url of the scalar.
    pub fn reveal(&self) -> String {
        b64::url_encode(&self.secret)
    }

    /// The private key as PKCS#8 (RFC 5915's `ECPrivateKey` without its optional public key),
    /// for importing it elsewhere: WebCrypto derives the public key from it.
    pub fn pkcs8(&self) -> Vec<u8> {
        let mut der = PKCS8_P256_PREFIX.to_vec();
        der.extend_from_slice(&self.secret);
        der
    }

    /// The public key, base64url of the uncompressed point: `applicationServerKey`, and the
    /// `k=` of every header.
    #[cfg(feature = "software")]
    pub fn public_key(&self) -> &str {
        self.public.get_or_init(|| b64::url_encode(self.signing().verifying_key().to_encoded_point(false).as_bytes()))
    }

    /// Whether this is the public development pair, which only `local` may use.
    pub fn is_development(&self) -> bool {
        b64::url_decode(DEV_VAPID_PRIVATE_KEY).is_some_and(|dev| dev == self.secret)
    }

    /// An ES256 JWT for a push to `endpoint`: `aud` its origin, `exp` `ttl_s` after `now_ms`
    /// (1..=`VAPID_TOKEN_TTL_S_MAX`, clamped into that range), `sub` the contact.
    #[cfg(feature = "software")]
    pub fn token(&self, endpoint: &Endpoint, subject: &VapidSubject, now_ms: i64, ttl_s: i64) -> String {
        let signing_input = signing_input(endpoint, subject, now_ms, ttl_s);
        let signature: Signature = self.signing().sign(signing_input.as_bytes());
        signed_token(&signing_input, &signature.to_bytes().into())
    }

    /// The `Authorization` header's value for a push to `endpoint`, with a token that lives
    /// `VAPID_TOKEN_TTL_S`: `vapid t=<JWT>, k=<public key>`.
    #[cfg(feature = "software")]
    pub fn authorization(&self, endpoint: &Endpoint, subject: &VapidSubject, now_ms: i64) -> String {
        header(&self.token(endpoint, subject, now_ms, VAPID_TOKEN_TTL_S), self.public_key())
    }

    /// The private key as a JWK's `d`, `x` and `y` (base64url), for importing it elsewhere.
    #[cfg(feature = "software")]
    pub fn jwk(&self) -> (String, String, String) {
        let point = self.signing().verifying_key().to_encoded_point(false);
        let bytes = point.as_bytes();
        (b64::url_encode(&self.secret), b64::url_encode(&bytes[1..33]), b64::url_encode(&bytes[33..65]))
    }
}

/// The `Authorization` header's value from a token's signing input ([`signing_input`]), its
/// ES256 signature (`r || s`) and the public key (base64url), both made elsewhere: the Worker
/// signs and derives with the runtime's WebCrypto, which keeps ECDSA and point arithmetic out
/// of its `.wasm`.
pub fn authorization_signed(signing_input: &str, signature: &[u8; 64], public_key: &str) -> String {
    header(&signed_token(signing_input, signature), public_key)
}

/// `vapid t=<JWT>, k=<public key>`.
fn header(token: &str, public_key: &str) -> String {
    format!("vapid t={token}, k={public_key}")
}

/// The public key (base64url of the uncompressed point) from a JWK's `x` and `y`, or `None`
/// where either is not 32 bytes of base64url.
pub fn public_key_of_jwk(x: &str, y: &str) -> Option<String> {
    let (x, y) = (b64::url_decode(x)?, b64::url_decode(y)?);
    (x.len() == 32 && y.len() == 32).then(|| {
        let mut point = vec![0x04];
        point.extend_from_slice(&x);
        point.extend_from_slice(&y);
        b64::url_encode(&point)
    })
}

/// The order of P-256's group, big-endian (SEC 2, section 2.4.2).
const P256_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa,
    0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// Whether 32 big-endian bytes are a P-256 private key: not zero, and below the group order.
fn is_private_scalar(bytes: &[u8; 32]) -> bool {
    *bytes != [0; 32] && bytes.as_slice() < P256_ORDER.as_slice()
}

/// The DER of a P-256 PKCS#8 `PrivateKeyInfo` up to the 32 bytes of its scalar: version 0,
/// `id-ecPublicKey` with `prime256v1`, then an `ECPrivateKey` (version 1) with no parameters
/// and no public key.
const PKCS8_P256_PREFIX: [u8; 35] = [
    0x30, 0x41, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x27, 0x30, 0x25, 0x02, 0x01, 0x01, 0x04, 0x20,
];

/// The signing input of an ES256 JWT for a push to `endpoint` (see [`VapidKey::token`]):
/// the base64url header and claims, joined by a dot.
pub fn signing_input(endpoint: &Endpoint, subject: &VapidSubject, now_ms: i64, ttl_s: i64) -> String {
    let claims = Claims {
        aud: endpoint.origin().to_string(),
        exp: now_ms.max(0) / 1000 + ttl_s.clamp(1, VAPID_TOKEN_TTL_S_MAX),
        sub: Some(subject.0.clone()),
    };
    let claims = match serde_json::to_string(&claims) {
        Ok(json) => json,
        // Two strings and a number always serialize.
        Err(_) => unreachable!("VAPID claims serialize"),
    };
    format!("{}.{}", b64::url_encode(JWT_HEADER.as_bytes()), b64::url_encode(claims.as_bytes()))
}

fn signed_token(signing_input: &str, signature: &[u8; 64]) -> String {
    format!("{signing_input}.{}", b64::url_encode(signature))
}

impl fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VapidKey(..)")
    }
}

/// Whether the secret text is the public development key (in any accepted spelling).
pub fn is_development_key(secret: &str) -> bool {
    VapidKey::parse(secret).is_ok_and(|key| key.is_development())
}

/// The contact a token names (`sub`): a `mailto:` or `https:` URI, as RFC 8292 section 2.1
/// asks, of printable ASCII without spaces or quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VapidSubject(String);

/// Why a subject was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectError {
    /// Neither `mailto:` nor `https://`.
    Scheme,
    /// Empty after the scheme, longer than `VAPID_SUBJECT_BYTES_MAX`, or with a space, a
    /// quote, a backslash or a byte that is not printable ASCII.
    Text,
}

impl fmt::Display for SubjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubjectError::Scheme => "the VAPID subject is a mailto: or https: URI",
            SubjectError::Text => "the VAPID subject is printable ASCII, without spaces or quotes, of bounded length",
        })
    }
}

impl std::error::Error for SubjectError {}

impl VapidSubject {
    pub fn parse(text: &str) -> Result<VapidSubject, SubjectError> {
        let rest =
            text.strip_prefix("mailto:").or_else(|| text.strip_prefix("https://")).ok_or(SubjectError::Scheme)?;
        let printable = text.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if rest.is_empty() || text.len() > VAPID_SUBJECT_BYTES_MAX || !printable {
            return Err(SubjectError::Text);
        }
        Ok(VapidSubject(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Claims {
    aud: String,
    exp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub: Option<String>,
}

#[cfg(feature = "software")]
#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
}

/// What a push service reads from a valid token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VapidClaims {
    pub aud: String,
    pub exp: i64,
    pub sub: Option<String>,
    /// The `k=` key that verified the token.
    pub public_key: String,
}

/// Why a push service refuses an `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VapidRejection {
    /// Not `vapid t=…, k=…`.
    Header,
    /// `k=` is not a P-256 public key, or not the one expected.
    Key,
    /// The token is not three base64url parts, or its header is not ES256.
    Token,
    /// The signature does not verify with `k=`.
    Signature,
    /// `aud` is not the endpoint's origin.
    Audience,
    /// `exp` has passed, or is more than `VAPID_TOKEN_TTL_S_MAX` ahead.
    Expiry,
}

impl fmt::Display for VapidRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VapidRejection::Header => "Authorization is not vapid t=…, k=…",
            VapidRejection::Key => "k is not the expected P-256 public key",
            VapidRejection::Token => "t is not an ES256 JWT",
            VapidRejection::Signature => "the JWT's signature does not verify",
            VapidRejection::Audience => "aud is not the endpoint's origin",
            VapidRejection::Expiry => "exp has passed or is more than 24 hours ahead",
        })
    }
}

impl std::error::Error for VapidRejection {}

#[cfg(feature = "software")]
/// A push service's check of an `Authorization` header (RFC 8292 sections 3 and 4.2): the
/// scheme and both parameters, `k=` equal to `expected_key` when one is given, the ES256
/// signature, `aud` equal to `origin`, and `exp` in the future but within 24 hours of `now_ms`.
pub fn verify(
    authorization: &str,
    expected_key: Option<&str>,
    origin: &str,
    now_ms: i64,
) -> Result<VapidClaims, VapidRejection> {
    let (token, key) = parse_header(authorization).ok_or(VapidRejection::Header)?;
    if expected_key.is_some_and(|expected| expected != key) {
        return Err(VapidRejection::Key);
    }
    let point = b64::url_decode(key).ok_or(VapidRejection::Key)?;
    let verifying = VerifyingKey::from_sec1_bytes(&point).map_err(|_| VapidRejection::Key)?;

    let (signing_input, signature) = token.rsplit_once('.').ok_or(VapidRejection::Token)?;
    let (header, claims) = signing_input.split_once('.').ok_or(VapidRejection::Token)?;
    let header: JoseHeader = decode_json(header).ok_or(VapidRejection::Token)?;
    if header.alg != "ES256" || claims.contains('.') {
        return Err(VapidRejection::Token);
    }
    let signature = b64::url_decode(signature).ok_or(VapidRejection::Token)?;
    let signature = Signature::from_slice(&signature).map_err(|_| VapidRejection::Token)?;
    verifying.verify(signing_input.as_bytes(), &signature).map_err(|_| VapidRejection::Signature)?;

    let claims: Claims = decode_json(claims).ok_or(VapidRejection::Token)?;
    if claims.aud != origin {
        return Err(VapidRejection::Audience);
    }
    let now_s = now_ms / 1000;
    if claims.exp <= now_s || claims.exp > now_s + VAPID_TOKEN_TTL_S_MAX {
        return Err(VapidRejection::Expiry);
    }
    Ok(VapidClaims { aud: claims.aud, exp: claims.exp, sub: claims.sub, public_key: key.to_string() })
}

#[cfg(feature = "software")]
fn decode_json<T: for<'de> Deserialize<'de>>(part: &str) -> Option<T> {
    serde_json::from_slice(&b64::url_decode(part)?).ok()
}

/// `vapid t=…, k=…` with the parameters in either order, separated by a comma and optional
/// spaces; `None` for any other shape.
#[cfg(feature = "software")]
fn parse_header(value: &str) -> Option<(&str, &str)> {
    let (scheme, params) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("vapid") {
        return None;
    }
    let (mut token, mut key) = (None, None);
    for param in params.split(',') {
        let (name, value) = param.trim().split_once('=')?;
        let slot = match name.trim() {
            "t" => &mut token,
            "k" => &mut key,
            _ => return None,
        };
        if slot.replace(value.trim()).is_some() {
            return None;
        }
    }
    Some((token?, key?))
}

#[cfg(test)]
mod tests;
