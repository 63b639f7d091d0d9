//! The base64 forms the specifications use, in one place.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine;

/// Reads URL-safe base64 with or without `=` padding: browsers send `p256dh` and `auth`
/// unpadded, some libraries pad them. Trailing bits must be zero (one text per value).
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// URL-safe base64 without padding: JWTs, keys, VAPID's `k=`.
pub fn url_encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn url_decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_ANY_PAD.decode(text).ok()
}

/// Standard base64 with padding: Standard Webhooks' secrets and signatures.
pub fn std_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub fn std_decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}
