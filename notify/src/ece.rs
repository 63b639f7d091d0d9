//! Web Push message encryption (RFC 8291) in the `aes128gcm` content coding (RFC 8188).
//!
//! One message is one record: the header (salt, record size, the sender's public key as the
//! key id), then AES-128-GCM over the plaintext, the last-record delimiter `0x02` and any
//! zero padding. The keys come from ECDH on P-256 and HKDF-SHA256 as RFC 8291 section 3
//! says; each message has its own sender key pair and salt, drawn by the caller.

use crate::b64;
use crate::limits::{PUSH_HEADER_BYTES, PUSH_PLAINTEXT_BYTES_MAX, PUSH_RECORD_BYTES, PUSH_TAG_BYTES};
#[cfg(feature = "software")]
use aes_gcm::aead::{Aead, KeyInit};
#[cfg(feature = "software")]
use aes_gcm::{Aes128Gcm, Nonce};
use hkdf::Hkdf;
#[cfg(feature = "software")]
use p256::elliptic_curve::sec1::ToEncodedPoint;
#[cfg(feature = "software")]
use p256::{PublicKey, SecretKey};
use sha2::Sha256;
use std::fmt;

/// The uncompressed SEC1 form of a P-256 point: `0x04 || x || y`.
pub const P256_POINT_BYTES: usize = 65;
/// The user agent's authentication secret (`auth`).
pub const AUTH_SECRET_BYTES: usize = 16;
/// The salt of one message.
pub const SALT_BYTES: usize = 16;
/// The smallest record size RFC 8188 allows: a delimiter octet and the tag.
pub const RECORD_BYTES_MIN: u32 = 18;
/// The value of the `Content-Encoding` header of an encrypted push message.
pub const CONTENT_ENCODING: &str = "aes128gcm";

const DELIMITER_LAST: u8 = 0x02;

/// The keys of a browser's `PushSubscription` (`keys.p256dh`, `keys.auth`), checked: an
/// uncompressed point and 16 bytes. That the point is on the curve is checked here with the
/// `software` feature, and by the Worker's WebCrypto without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionKeys {
    p256dh: [u8; P256_POINT_BYTES],
    auth: [u8; AUTH_SECRET_BYTES],
}

/// Why a subscription's keys were refused, and the field that carried them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRefusal {
    pub field: &'static str,
    pub problem: KeyProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyProblem {
    /// Not URL-safe base64.
    Base64,
    /// Not this many bytes.
    Length { expected: usize },
    /// Not an uncompressed point on P-256.
    NotOnCurve,
}

impl fmt::Display for KeyRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problem {
            KeyProblem::Base64 => write!(f, "{} is not URL-safe base64", self.field),
            KeyProblem::Length { expected } => write!(f, "{} must hold {expected} bytes", self.field),
            KeyProblem::NotOnCurve => write!(f, "{} is not an uncompressed P-256 public key", self.field),
        }
    }
}

impl std::error::Error for KeyRefusal {}

impl SubscriptionKeys {
    /// The field names of a `PushSubscription`'s keys, as refusals name them.
    pub const P256DH_FIELD: &'static str = "keys.p256dh";
    pub const AUTH_FIELD: &'static str = "keys.auth";

    /// Reads the two keys as a browser's `PushSubscription.toJSON()` gives them.
    pub fn parse(p256dh: &str, auth: &str) -> Result<SubscriptionKeys, KeyRefusal> {
        let p256dh = decode_fixed::<P256_POINT_BYTES>(Self::P256DH_FIELD, p256dh)?;
        if p256dh[0] != 0x04 || !on_curve(&p256dh) {
            return Err(SubscriptionKeys::not_on_curve());
        }
        let auth = decode_fixed::<AUTH_SECRET_BYTES>(Self::AUTH_FIELD, auth)?;
        Ok(SubscriptionKeys { p256dh, auth })
    }

    /// The refusal of a `keys.p256dh` that is not an uncompressed point on P-256.
    pub fn not_on_curve() -> KeyRefusal {
        KeyRefusal { field: Self::P256DH_FIELD, problem: KeyProblem::NotOnCurve }
    }

    /// `keys.p256dh` in its normal form (unpadded URL-safe base64).
    pub fn p256dh(&self) -> String {
        b64::url_encode(&self.p256dh)
    }

    /// `keys.auth` in its normal form.
    pub fn auth(&self) -> String {
        b64::url_encode(&self.auth)
    }

    /// `keys.p256dh` as its uncompressed point, for an ECDH made elsewhere ([`prepare_with`]).
    pub fn p256dh_point(&self) -> [u8; P256_POINT_BYTES] {
        self.p256dh
    }
}

fn decode_fixed<const N: usize>(field: &'static str, text: &str) -> Result<[u8; N], KeyRefusal> {
    let bytes = b64::url_decode(text).ok_or(KeyRefusal { field, problem: KeyProblem::Base64 })?;
    bytes.try_into().map_err(|_| KeyRefusal { field, problem: KeyProblem::Length { expected: N } })
}

#[cfg(feature = "software")]
fn on_curve(point: &[u8; P256_POINT_BYTES]) -> bool {
    public_key(point).is_some()
}

/// Without the `software` feature the Worker checks the curve with WebCrypto.
#[cfg(not(feature = "software"))]
fn on_curve(_: &[u8; P256_POINT_BYTES]) -> bool {
    true
}

/// An uncompressed point only: RFC 8291 puts that form into the key derivation.
#[cfg(feature = "software")]
fn public_key(point: &[u8; P256_POINT_BYTES]) -> Option<PublicKey> {
    (point[0] == 0x04).then(|| PublicKey::from_sec1_bytes(point).ok()).flatten()
}

#[cfg(feature = "software")]
fn uncompressed(key: &PublicKey) -> [u8; P256_POINT_BYTES] {
    let point = key.to_encoded_point(false);
    let mut out = [0u8; P256_POINT_BYTES];
    out.copy_from_slice(point.as_bytes());
    out
}

#[cfg(feature = "software")]
/// The randomness one message needs: the sender's ephemeral private key and the salt. Draw
/// `MessageEntropy::BYTES` fresh random bytes per message; never reuse them.
#[derive(Clone)]
pub struct MessageEntropy {
    key: SecretKey,
    salt: [u8; SALT_BYTES],
}

/// The random bytes could not be a P-256 private key (zero, or not below the group order:
/// about one draw in 2^32). Draw again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyOutOfRange;

impl fmt::Display for KeyOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the random bytes are not a P-256 private key; draw again")
    }
}

impl std::error::Error for KeyOutOfRange {}

#[cfg(feature = "software")]
impl MessageEntropy {
    /// 32 bytes of private key, then 16 of salt.
    pub const BYTES: usize = 32 + SALT_BYTES;

    pub fn from_bytes(bytes: &[u8; MessageEntropy::BYTES]) -> Result<MessageEntropy, KeyOutOfRange> {
        let (key, salt) = bytes.split_at(32);
        let key = SecretKey::from_slice(key).map_err(|_| KeyOutOfRange)?;
        let mut fixed = [0u8; SALT_BYTES];
        fixed.copy_from_slice(salt);
        Ok(MessageEntropy { key, salt: fixed })
    }
}

#[cfg(feature = "software")]
impl fmt::Debug for MessageEntropy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MessageEntropy(..)")
    }
}

/// Why a message was not encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncryptError {
    /// Plaintext and padding together hold this many bytes, over `PUSH_PLAINTEXT_BYTES_MAX`.
    TooLong { bytes: usize },
}

impl fmt::Display for EncryptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncryptError::TooLong { bytes } => {
                write!(f, "a push message holds at most {PUSH_PLAINTEXT_BYTES_MAX} bytes of plaintext, not {bytes}")
            }
        }
    }
}

impl std::error::Error for EncryptError {}

#[cfg(feature = "software")]
/// The body of one push message to `to`, with no padding beyond the delimiter.
pub fn encrypt(plaintext: &[u8], to: &SubscriptionKeys, entropy: &MessageEntropy) -> Result<Vec<u8>, EncryptError> {
    encrypt_padded(plaintext, 0, to, entropy)
}

#[cfg(feature = "software")]
/// As [`encrypt`], with `padding_bytes` zero octets after the delimiter, so that the length
/// of the body says less about the plaintext.
pub fn encrypt_padded(
    plaintext: &[u8],
    padding_bytes: usize,
    to: &SubscriptionKeys,
    entropy: &MessageEntropy,
) -> Result<Vec<u8>, EncryptError> {
    let unsealed = prepare(plaintext, padding_bytes, to, entropy)?;
    let sealed = unsealed.keys.seal(&unsealed.record);
    Ok(unsealed.finish(&sealed))
}

/// One message with everything done but its AES-128-GCM sealing, for a caller that seals with
/// another implementation of it (the Worker uses the runtime's WebCrypto, which keeps a second
/// AES out of its `.wasm`): seal [`Unsealed::record`] under [`Unsealed::cek`] and
/// [`Unsealed::nonce`] (the ciphertext followed by the 16-byte tag), then [`Unsealed::finish`].
pub struct Unsealed {
    keys: ContentKeys,
    record: Vec<u8>,
    header: Vec<u8>,
}

impl Unsealed {
    /// The content-encryption key (AES-128).
    pub fn cek(&self) -> &[u8; 16] {
        &self.keys.cek
    }

    /// The nonce of the one record (96 bits).
    pub fn nonce(&self) -> &[u8; 12] {
        &self.keys.nonce
    }

    /// The record to seal: the plaintext, the last-record delimiter and the padding.
    pub fn record(&self) -> &[u8] {
        &self.record
    }

    /// The message's body: the header, then `sealed` (the record's ciphertext and tag).
    pub fn finish(self, sealed: &[u8]) -> Vec<u8> {
        let mut body = self.header;
        body.extend_from_slice(sealed);
        debug_assert!(body.len() <= crate::limits::PUSH_BODY_BYTES_MAX);
        body
    }
}

#[cfg(feature = "software")]
/// As [`encrypt_padded`], up to the sealing, which the caller does (see [`Unsealed`]).
pub fn prepare(
    plaintext: &[u8],
    padding_bytes: usize,
    to: &SubscriptionKeys,
    entropy: &MessageEntropy,
) -> Result<Unsealed, EncryptError> {
    let as_public = uncompressed(&entropy.key.public_key());
    let Some(ua) = public_key(&to.p256dh) else { unreachable!("the point was checked on the curve when it was read") };
    let shared = p256::ecdh::diffie_hellman(entropy.key.to_nonzero_scalar(), ua.as_affine());
    let mut secret = [0u8; 32];
    secret.copy_from_slice(shared.raw_secret_bytes());
    prepare_with(plaintext, padding_bytes, to, &Exchanged { as_public, secret, salt: entropy.salt })
}

/// What one message's ECDH gave, made elsewhere (the Worker uses the runtime's WebCrypto,
/// which keeps P-256 point arithmetic out of its `.wasm`): the sender's ephemeral public key
/// (uncompressed), the shared secret (the x-coordinate), and a fresh random salt.
pub struct Exchanged {
    pub as_public: [u8; P256_POINT_BYTES],
    pub secret: [u8; 32],
    pub salt: [u8; SALT_BYTES],
}

/// As [`prepare`], from an ECDH made elsewhere.
pub fn prepare_with(
    plaintext: &[u8],
    padding_bytes: usize,
    to: &SubscriptionKeys,
    exchanged: &Exchanged,
) -> Result<Unsealed, EncryptError> {
    let bytes = plaintext.len().saturating_add(padding_bytes);
    if bytes > PUSH_PLAINTEXT_BYTES_MAX {
        return Err(EncryptError::TooLong { bytes });
    }
    let Exchanged { as_public, secret, salt } = exchanged;
    let keys = ContentKeys::derive(secret, &to.auth, &to.p256dh, as_public, salt);

    let mut record = Vec::with_capacity(bytes + 1 + PUSH_TAG_BYTES);
    record.extend_from_slice(plaintext);
    record.push(DELIMITER_LAST);
    record.resize(record.len() + padding_bytes, 0);

    let mut header = Vec::with_capacity(PUSH_HEADER_BYTES + record.len() + PUSH_TAG_BYTES);
    header.extend_from_slice(salt);
    header.extend_from_slice(&PUSH_RECORD_BYTES.to_be_bytes());
    header.push(P256_POINT_BYTES as u8);
    header.extend_from_slice(as_public);
    Ok(Unsealed { keys, record, header })
}

/// The content-encryption key and nonce of one message (RFC 8291 section 3.4, RFC 8188
/// section 2.2 and 2.3; one record, so the sequence number is zero).
struct ContentKeys {
    cek: [u8; 16],
    nonce: [u8; 12],
}

impl ContentKeys {
    fn derive(
        ecdh_secret: &[u8],
        auth: &[u8; AUTH_SECRET_BYTES],
        ua_public: &[u8; P256_POINT_BYTES],
        as_public: &[u8; P256_POINT_BYTES],
        salt: &[u8; SALT_BYTES],
    ) -> ContentKeys {
        let mut key_info = Vec::with_capacity(14 + 2 * P256_POINT_BYTES);
        key_info.extend_from_slice(b"WebPush: info\0");
        key_info.extend_from_slice(ua_public);
        key_info.extend_from_slice(as_public);
        let mut ikm = [0u8; 32];
        expand(&Hkdf::<Sha256>::new(Some(auth), ecdh_secret), &key_info, &mut ikm);

        let prk = Hkdf::<Sha256>::new(Some(salt), &ikm);
        let mut keys = ContentKeys { cek: [0; 16], nonce: [0; 12] };
        expand(&prk, b"Content-Encoding: aes128gcm\0", &mut keys.cek);
        expand(&prk, b"Content-Encoding: nonce\0", &mut keys.nonce);
        keys
    }

    #[cfg(feature = "software")]
    fn cipher(&self) -> Aes128Gcm {
        Aes128Gcm::new(&self.cek.into())
    }

    #[cfg(feature = "software")]
    fn seal(&self, record: &[u8]) -> Vec<u8> {
        match self.cipher().encrypt(Nonce::from_slice(&self.nonce), record) {
            Ok(sealed) => sealed,
            // AES-GCM refuses only inputs of gigabytes; a record is at most a few kilobytes.
            Err(_) => unreachable!("AES-GCM seals any record under 64 GiB"),
        }
    }

    #[cfg(feature = "software")]
    fn open(&self, sealed: &[u8]) -> Option<Vec<u8>> {
        self.cipher().decrypt(Nonce::from_slice(&self.nonce), sealed).ok()
    }
}

fn expand(prk: &Hkdf<Sha256>, info: &[u8], out: &mut [u8]) {
    // HKDF-SHA256 expands to at most 255 * 32 bytes; these are 12 to 32.
    if prk.expand(info, out).is_err() {
        unreachable!("HKDF-SHA256 expands to 32 bytes and fewer");
    }
}

/// A browser's side of a subscription: its private key and authentication secret. The push
/// service stand-in and the tests decrypt with it; the Worker never holds one.
#[cfg(feature = "software")]
#[derive(Clone)]
pub struct UserAgent {
    key: SecretKey,
    auth: [u8; AUTH_SECRET_BYTES],
}

/// Why a push message body did not decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecryptError {
    /// Shorter than its header, or its key id is not a 65-byte point.
    Header,
    /// A record size under `RECORD_BYTES_MIN`.
    RecordSize,
    /// More than one record (RFC 8291 allows one), or a record shorter than a tag.
    NotOneRecord,
    /// The tag does not match: wrong keys, or the body was changed.
    Tag,
    /// The record's delimiter is missing, not the last-record one, or padding is not zero.
    Padding,
}

impl fmt::Display for DecryptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecryptError::Header => "the aes128gcm header is malformed",
            DecryptError::RecordSize => "the record size is under 18",
            DecryptError::NotOneRecord => "the body is not exactly one record",
            DecryptError::Tag => "the record does not authenticate",
            DecryptError::Padding => "the record's delimiter or padding is wrong",
        })
    }
}

impl std::error::Error for DecryptError {}

#[cfg(feature = "software")]
impl UserAgent {
    /// From a 32-byte private key and a 16-byte authentication secret.
    pub fn from_bytes(private_key: &[u8; 32], auth: [u8; AUTH_SECRET_BYTES]) -> Result<UserAgent, KeyOutOfRange> {
        let key = SecretKey::from_slice(private_key).map_err(|_| KeyOutOfRange)?;
        Ok(UserAgent { key, auth })
    }

    /// The keys this user agent would hand to the application in its `PushSubscription`.
    pub fn subscription_keys(&self) -> SubscriptionKeys {
        SubscriptionKeys { p256dh: uncompressed(&self.key.public_key()), auth: self.auth }
    }

    /// Decrypts a push message body sent to this user agent.
    pub fn decrypt(&self, body: &[u8]) -> Result<Vec<u8>, DecryptError> {
        if body.len() < PUSH_HEADER_BYTES {
            return Err(DecryptError::Header);
        }
        let (salt, rest) = body.split_at(SALT_BYTES);
        let (rs, rest) = rest.split_at(4);
        let record_bytes = u32::from_be_bytes([rs[0], rs[1], rs[2], rs[3]]);
        if record_bytes < RECORD_BYTES_MIN {
            return Err(DecryptError::RecordSize);
        }
        if usize::from(rest[0]) != P256_POINT_BYTES {
            return Err(DecryptError::Header);
        }
        let (key_id, sealed) = rest[1..].split_at(P256_POINT_BYTES);
        let mut as_point = [0u8; P256_POINT_BYTES];
        as_point.copy_from_slice(key_id);
        let as_public = public_key(&as_point).ok_or(DecryptError::Header)?;
        let one_record = sealed.len() > PUSH_TAG_BYTES && sealed.len() <= record_bytes as usize;
        if !one_record {
            return Err(DecryptError::NotOneRecord);
        }
        let mut fixed_salt = [0u8; SALT_BYTES];
        fixed_salt.copy_from_slice(salt);
        let ua_public = uncompressed(&self.key.public_key());
        let shared = p256::ecdh::diffie_hellman(self.key.to_nonzero_scalar(), as_public.as_affine());
        let keys = ContentKeys::derive(shared.raw_secret_bytes(), &self.auth, &ua_public, &as_point, &fixed_salt);
        let mut record = keys.open(sealed).ok_or(DecryptError::Tag)?;
        let end = record.iter().rposition(|&b| b != 0).ok_or(DecryptError::Padding)?;
        // The one record is the last: `0x01` (another record follows) is refused like any
        // other octet.
        if record[end] != DELIMITER_LAST {
            return Err(DecryptError::Padding);
        }
        record.truncate(end);
        Ok(record)
    }
}

#[cfg(feature = "software")]
impl fmt::Debug for UserAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UserAgent(..)")
    }
}

#[cfg(test)]
mod tests;
