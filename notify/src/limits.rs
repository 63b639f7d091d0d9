//! Every limit of the notifications, named once. Units are last in the names.

/// Fewest random bytes in a webhook secret (Standard Webhooks: at least 192 bits).
pub const WEBHOOK_SECRET_BYTES_MIN: usize = 24;
/// Most random bytes in a webhook secret (Standard Webhooks: at most 512 bits).
pub const WEBHOOK_SECRET_BYTES_MAX: usize = 64;
/// Random bytes in the secrets this service makes: the most the format allows.
pub const WEBHOOK_SECRET_BYTES: usize = WEBHOOK_SECRET_BYTES_MAX;
/// A webhook message id (`webhook-id`): 1..=this many characters of `[A-Za-z0-9_-]`, so that
/// it can never carry the `.` that separates the signed parts.
pub const WEBHOOK_ID_CHARS_MAX: usize = 128;
/// How far a delivery's `webhook-timestamp` may be from the receiver's clock, either way, before
/// a verifier refuses it as a possible replay (the value the reference libraries use).
pub const WEBHOOK_TIMESTAMP_TOLERANCE_S: i64 = 5 * 60;
/// Signatures one `webhook-signature` header may list (a key rotation sends two); a verifier
/// reads no more than this.
pub const WEBHOOK_SIGNATURES_MAX: usize = 8;

/// The longest webhook URL or push endpoint accepted (bytes). Push services' endpoints are
/// a few hundred bytes; browsers keep URLs far longer, but nothing here needs to.
pub const ENDPOINT_BYTES_MAX: usize = 2048;

/// The body a push service must accept (RFC 8291 section 4: at least 4096 octets); no push
/// message this service sends is longer.
pub const PUSH_BODY_BYTES_MAX: usize = 4096;
/// The `aes128gcm` header of a Web Push message: salt (16), record size (4), key id length
/// (1) and the application server's public key (65).
pub const PUSH_HEADER_BYTES: usize = 16 + 4 + 1 + 65;
/// The AEAD_AES_128_GCM tag ending the one record.
pub const PUSH_TAG_BYTES: usize = 16;
/// The largest plaintext one push message carries, with no padding beyond the one delimiter
/// octet: 4096 - 86 - 1 - 16 = 3993 octets (RFC 8291 section 4).
pub const PUSH_PLAINTEXT_BYTES_MAX: usize = PUSH_BODY_BYTES_MAX - PUSH_HEADER_BYTES - 1 - PUSH_TAG_BYTES;
/// The record size written in every message's header. A message is one record (RFC 8291
/// section 4), and a record of this size holds the largest body above.
pub const PUSH_RECORD_BYTES: u32 = 4096;
/// How long a push service keeps an undelivered message (the `TTL` header), and so the longest
/// a failed push is retried: a notification a day old is no longer news.
pub const PUSH_TTL_S: u32 = 24 * 60 * 60;

/// The longest a VAPID token may live: RFC 8292 section 2 says no more than 24 hours.
pub const VAPID_TOKEN_TTL_S_MAX: i64 = 24 * 60 * 60;
/// The lifetime of the tokens this service signs: half the most allowed, so that a push
/// service whose clock runs a little fast still accepts them.
pub const VAPID_TOKEN_TTL_S: i64 = 12 * 60 * 60;
/// The longest VAPID subject (`sub`, a `mailto:` or `https:` URI) accepted (bytes).
pub const VAPID_SUBJECT_BYTES_MAX: usize = 256;

/// A push `Topic` (RFC 8030 section 5.4): at most 32 characters of the URL-safe base64
/// alphabet.
pub const TOPIC_CHARS_MAX: usize = 32;
