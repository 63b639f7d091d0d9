//! One Web Push request (RFC 8030): the events, their `Urgency` and `Topic`, the headers and
//! the encrypted body, and what the push service's answer means.

use crate::b64;
use crate::ece::{self, SubscriptionKeys};
#[cfg(feature = "software")]
use crate::ece::{EncryptError, MessageEntropy};
use crate::endpoint::Endpoint;
use crate::limits::{PUSH_TTL_S, TOPIC_CHARS_MAX};
use crate::vapid::{VapidKey, VapidSubject};
use sha2::{Digest, Sha256};

/// What a webhook or a push subscription may ask to be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    NeedsYou,
    Done,
    Failed,
    Closed,
}

impl Event {
    /// Every event, in the order the contract lists them (the default subscription).
    pub const ALL: [Event; 4] = [Event::NeedsYou, Event::Done, Event::Failed, Event::Closed];

    /// The name in `events` of a request: `needs-you`, `done`, `failed`, `closed`.
    pub fn name(self) -> &'static str {
        match self {
            Event::NeedsYou => "needs-you",
            Event::Done => "done",
            Event::Failed => "failed",
            Event::Closed => "closed",
        }
    }

    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|event| event.name() == name)
    }

    /// The `type` of a webhook's body and of a push message: `handoff.needs_you`, ….
    pub fn message_type(self) -> &'static str {
        match self {
            Event::NeedsYou => "handoff.needs_you",
            Event::Done => "handoff.done",
            Event::Failed => "handoff.failed",
            Event::Closed => "handoff.closed",
        }
    }

    /// A person is waiting on a needs-you; everything else can wait for the device.
    pub fn urgency(self) -> Urgency {
        match self {
            Event::NeedsYou => Urgency::High,
            Event::Done | Event::Failed | Event::Closed => Urgency::Normal,
        }
    }
}

/// RFC 8030 section 5.3: how soon the push service should wake the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    VeryLow,
    Low,
    Normal,
    High,
}

impl Urgency {
    /// The `Urgency` header's value.
    pub fn header_value(self) -> &'static str {
        match self {
            Urgency::VeryLow => "very-low",
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::High => "high",
        }
    }
}

/// RFC 8030 section 5.4: a push service keeps one undelivered message per topic, so a newer
/// notification of a hand-off replaces an unread older one. Derived from the hand-off id by
/// SHA-256, so the push service never learns the id: the first 24 bytes of the digest as
/// unpadded URL-safe base64, exactly `TOPIC_CHARS_MAX` characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic(String);

impl Topic {
    pub fn for_handoff(handoff_id: &str) -> Topic {
        let digest = Sha256::digest(handoff_id.as_bytes());
        let topic = b64::url_encode(&digest[..TOPIC_CHARS_MAX / 4 * 3]);
        debug_assert_eq!(topic.len(), TOPIC_CHARS_MAX);
        Topic(topic)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub const HEADER_AUTHORIZATION: &str = "authorization";
pub const HEADER_CONTENT_ENCODING: &str = "content-encoding";
pub const HEADER_CONTENT_TYPE: &str = "content-type";
pub const HEADER_TTL: &str = "ttl";
pub const HEADER_URGENCY: &str = "urgency";
pub const HEADER_TOPIC: &str = "topic";

/// One push message as the Worker sends it: `POST` the body to the endpoint with the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest {
    pub endpoint: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// Who the message is for: the subscription's endpoint and keys, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub endpoint: Endpoint,
    pub keys: SubscriptionKeys,
}

/// The sender: the VAPID key pair and the contact its tokens name.
#[derive(Debug, Clone)]
pub struct Sender {
    pub key: VapidKey,
    pub subject: VapidSubject,
}

#[cfg(feature = "software")]
/// The push of `plaintext` (the notification's JSON) about `handoff_id`'s `event`, at `now_ms`,
/// encrypted with `entropy` (fresh for this message).
pub fn request(
    to: &Subscription,
    from: &Sender,
    event: Event,
    handoff_id: &str,
    plaintext: &[u8],
    entropy: &MessageEntropy,
    now_ms: i64,
) -> Result<PushRequest, EncryptError> {
    let body = ece::encrypt(plaintext, &to.keys, entropy)?;
    Ok(PushRequest { endpoint: to.endpoint.url(), headers: headers(to, from, event, handoff_id, now_ms), body })
}

/// The headers of a push to `to` about `handoff_id`'s `event` at `now_ms`, for a body
/// encrypted apart ([`ece::prepare`]); [`request`] sends exactly these.
#[cfg(feature = "software")]
pub fn headers(
    to: &Subscription,
    from: &Sender,
    event: Event,
    handoff_id: &str,
    now_ms: i64,
) -> Vec<(&'static str, String)> {
    headers_signed(from.key.authorization(&to.endpoint, &from.subject, now_ms), event, handoff_id)
}

/// As [`headers`], with the `Authorization` value made apart
/// ([`crate::vapid::authorization_signed`]).
pub fn headers_signed(authorization: String, event: Event, handoff_id: &str) -> Vec<(&'static str, String)> {
    vec![
        (HEADER_AUTHORIZATION, authorization),
        (HEADER_CONTENT_ENCODING, ece::CONTENT_ENCODING.to_string()),
        (HEADER_CONTENT_TYPE, "application/octet-stream".to_string()),
        (HEADER_TTL, PUSH_TTL_S.to_string()),
        (HEADER_URGENCY, event.urgency().header_value().to_string()),
        (HEADER_TOPIC, Topic::for_handoff(handoff_id).0),
    ]
}

/// What the push service's answer means for the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// 2xx (201 Created, as RFC 8030 answers): the message is the push service's now.
    Delivered,
    /// 404 or 410: the subscription has expired or was withdrawn; delete it.
    Gone,
    /// Anything else, or no answer: retry with backoff, for at most the TTL.
    Retry,
}

impl PushOutcome {
    pub fn of_status(status: u16) -> PushOutcome {
        match status {
            200..=299 => PushOutcome::Delivered,
            404 | 410 => PushOutcome::Gone,
            _ => PushOutcome::Retry,
        }
    }
}

#[cfg(test)]
mod tests;
