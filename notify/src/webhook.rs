//! Standard Webhooks (version 1.0.0): the symmetric secret and the signature of a delivery.
//!
//! The signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the signature is
//! `v1,` and the standard base64 of its HMAC-SHA256 under the secret's bytes.

use crate::b64;
use crate::limits::{
    WEBHOOK_ID_CHARS_MAX, WEBHOOK_SECRET_BYTES_MAX, WEBHOOK_SECRET_BYTES_MIN, WEBHOOK_SIGNATURES_MAX,
    WEBHOOK_TIMESTAMP_TOLERANCE_S,
};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// How a secret is shown to the people who use it.
pub const SECRET_PREFIX: &str = "whsec_";
/// The message id: the same on every attempt of one event.
pub const HEADER_ID: &str = "webhook-id";
/// The attempt's time, in seconds since the epoch.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Space-separated `version,signature` pairs.
pub const HEADER_SIGNATURE: &str = "webhook-signature";
/// The identifier of a symmetric (HMAC-SHA256) signature.
pub const SIGNATURE_VERSION: &str = "v1";
/// What this service's message ids start with.
pub const MESSAGE_ID_PREFIX: &str = "msg_";

type HmacSha256 = Hmac<Sha256>;

/// A webhook's signing secret: 24 to 64 random bytes, shown as `whsec_` and their base64.
/// Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

/// Why a secret was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretError {
    /// It does not start with `whsec_`.
    Prefix,
    /// What follows the prefix is not standard base64.
    Base64,
    /// It holds this many bytes, outside 24..=64.
    Length { bytes: usize },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Prefix => write!(f, "a webhook secret starts with {SECRET_PREFIX}"),
            SecretError::Base64 => write!(f, "a webhook secret is {SECRET_PREFIX} and standard base64"),
            SecretError::Length { bytes } => write!(
                f,
                "a webhook secret holds {WEBHOOK_SECRET_BYTES_MIN} to {WEBHOOK_SECRET_BYTES_MAX} bytes, not {bytes}"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

impl WebhookSecret {
    /// A secret from random bytes the caller drew (`WEBHOOK_SECRET_BYTES` of them for a new
    /// webhook); refused outside 24..=64 bytes.
    pub fn from_random(bytes: &[u8]) -> Result<WebhookSecret, SecretError> {
        check_length(bytes.len())?;
        Ok(WebhookSecret { key: bytes.to_vec() })
    }

    /// Reads `whsec_…` as shown to a receiver.
    pub fn parse(text: &str) -> Result<WebhookSecret, SecretError> {
        let encoded = text.strip_prefix(SECRET_PREFIX).ok_or(SecretError::Prefix)?;
        let key = b64::std_decode(encoded).ok_or(SecretError::Base64)?;
        check_length(key.len())?;
        Ok(WebhookSecret { key })
    }

    /// The secret as shown once to the webhook's owner: `whsec_` and standard base64.
    pub fn reveal(&self) -> String {
        format!("{SECRET_PREFIX}{}", b64::std_encode(&self.key))
    }

    /// The HMAC key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.key
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        match HmacSha256::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of every length"),
        }
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookSecret({} bytes)", self.key.len())
    }
}

fn check_length(bytes: usize) -> Result<(), SecretError> {
    if (WEBHOOK_SECRET_BYTES_MIN..=WEBHOOK_SECRET_BYTES_MAX).contains(&bytes) {
        Ok(())
    } else {
        Err(SecretError::Length { bytes })
    }
}

/// A message id (`webhook-id`): 1..=`WEBHOOK_ID_CHARS_MAX` characters of `[A-Za-z0-9_-]`,
/// so it never holds the `.` that separates the signed parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageId(String);

impl MessageId {
    /// `msg_` and the URL-safe base64 of 16 random bytes the caller drew.
    pub fn from_random(bytes: [u8; 16]) -> MessageId {
        MessageId(format!("{MESSAGE_ID_PREFIX}{}", b64::url_encode(&bytes)))
    }

    /// An id as stored or received; `None` if it breaks the rule above.
    pub fn parse(text: &str) -> Option<MessageId> {
        let fits = !text.is_empty() && text.len() <= WEBHOOK_ID_CHARS_MAX;
        let plain = text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        (fits && plain).then(|| MessageId(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The three headers that sign one delivery attempt, as their values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
}

impl SignedHeaders {
    /// `(name, value)` for each header, to set on the request.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [(HEADER_ID, &self.id), (HEADER_TIMESTAMP, &self.timestamp), (HEADER_SIGNATURE, &self.signature)]
    }
}

/// Signs one attempt of a delivery: `body` exactly as it will be sent, at `at_ms` (the
/// attempt's time; the header carries whole seconds).
pub fn sign(secret: &WebhookSecret, id: &MessageId, at_ms: i64, body: &[u8]) -> SignedHeaders {
    let timestamp = (at_ms.max(0) / 1000).to_string();
    let tag = signature(secret, id.as_str(), &timestamp, body);
    SignedHeaders { id: id.0.clone(), timestamp, signature: format!("{SIGNATURE_VERSION},{}", b64::std_encode(&tag)) }
}

fn signed_mac(secret: &WebhookSecret, id: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut mac = secret.mac();
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

fn signature(secret: &WebhookSecret, id: &str, timestamp: &str, body: &[u8]) -> [u8; 32] {
    signed_mac(secret, id, timestamp, body).finalize().into_bytes().into()
}

/// Why a received delivery was refused by [`verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// `webhook-id` is not a message id.
    Id,
    /// `webhook-timestamp` is not whole seconds.
    Timestamp,
    /// The timestamp is further from now than `WEBHOOK_TIMESTAMP_TOLERANCE_S`.
    Stale,
    /// No `v1` signature in the header matches.
    Signature,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VerifyError::Id => "webhook-id is not a message id",
            VerifyError::Timestamp => "webhook-timestamp is not whole seconds",
            VerifyError::Stale => "webhook-timestamp is too far from now",
            VerifyError::Signature => "no v1 signature matches",
        })
    }
}

impl std::error::Error for VerifyError {}

/// A receiver's check of one delivery, given its three header values and raw body: the id is
/// well formed, the timestamp is within `WEBHOOK_TIMESTAMP_TOLERANCE_S` of `now_ms`, and one
/// of the header's `v1` signatures matches (compared in constant time).
pub fn verify(
    secret: &WebhookSecret,
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now_ms: i64,
) -> Result<(), VerifyError> {
    MessageId::parse(id).ok_or(VerifyError::Id)?;
    let plain = !timestamp.is_empty() && timestamp.bytes().all(|b| b.is_ascii_digit());
    if !plain {
        return Err(VerifyError::Timestamp);
    }
    let at_s: i64 = timestamp.parse().map_err(|_| VerifyError::Timestamp)?;
    if (now_ms / 1000).abs_diff(at_s) > WEBHOOK_TIMESTAMP_TOLERANCE_S.unsigned_abs() {
        return Err(VerifyError::Stale);
    }
    let matches = signatures
        .split(' ')
        .take(WEBHOOK_SIGNATURES_MAX)
        .filter_map(|pair| pair.strip_prefix("v1,"))
        .filter_map(b64::std_decode)
        .any(|tag| signed_mac(secret, id, timestamp, body).verify_slice(&tag).is_ok());
    if matches {
        Ok(())
    } else {
        Err(VerifyError::Signature)
    }
}

#[cfg(test)]
mod tests;
