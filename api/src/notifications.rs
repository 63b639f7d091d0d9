//! The notifications' HTTP contract: reading a webhook's registration, and the shapes of the
//! webhook routes' answers and of a delivery's body. Which URLs may receive is
//! `handoff-notify`'s endpoint rule; when a delivery is owed is `handoff_core::notice`.

use crate::error::ApiError;
use handoff_core::index::Row;
use handoff_core::json::parse_json;
use handoff_core::notice::Notice;
use handoff_core::time::Timestamp;
use handoff_notify::endpoint::{Endpoint, Environment};
use serde::{Deserialize, Serialize};

/// What a webhook's id starts with.
pub const WEBHOOK_ID_PREFIX: &str = "wh_";
/// Random bytes in a webhook's id (shown as their unpadded base64url).
pub const WEBHOOK_ID_BYTES: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookInput {
    url: String,
    #[serde(default)]
    events: Option<Vec<String>>,
}

/// `POST /v1/webhooks`, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWebhook {
    /// The URL as it will be sent to (its origin in lower case).
    pub url: String,
    /// What it is told of, in the contract's order, each once.
    pub events: Vec<Notice>,
}

/// Reads `POST /v1/webhooks`: `url` must pass the endpoint rule of `env`, `events` (default:
/// all four) must be known names, at least one.
pub fn parse_webhook_create(body: &[u8], env: Environment) -> Result<NewWebhook, ApiError> {
    let input: WebhookInput = parse_json(body)?;
    let url = Endpoint::parse("url", &input.url, env).map_err(|refusal| ApiError::invalid(refusal.to_string()))?.url();
    Ok(NewWebhook { url, events: parse_events(input.events)? })
}

fn parse_events(names: Option<Vec<String>>) -> Result<Vec<Notice>, ApiError> {
    let Some(names) = names else {
        return Ok(Notice::ALL.to_vec());
    };
    if names.is_empty() {
        return Err(ApiError::invalid("events: name at least one event, or leave it out for all"));
    }
    let mut events = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let event = Notice::parse(name)
            .ok_or_else(|| ApiError::invalid(format!("events[{i}]: unknown event; one of needs-you, done, failed, closed")))?;
        events.push(event);
    }
    events.sort();
    events.dedup();
    Ok(events)
}

/// Whether `id` has the shape of a webhook's id, `wh_` and 22 base64url characters.
pub fn is_webhook_id(id: &str) -> bool {
    id.strip_prefix(WEBHOOK_ID_PREFIX)
        .is_some_and(|rest| rest.len() == 22 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// A new webhook's id, from `WEBHOOK_ID_BYTES` random bytes the caller drew.
pub fn webhook_id(random: [u8; WEBHOOK_ID_BYTES]) -> String {
    use base64::Engine;
    format!("{WEBHOOK_ID_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random))
}

/// The names of `events` as a request writes them.
pub fn event_names(events: &[Notice]) -> Vec<String> {
    events.iter().map(|e| e.name().to_string()).collect()
}

/// A webhook as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    pub created_at: Timestamp,
}

/// `POST /v1/webhooks` → 201: the webhook and its secret, shown only here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookCreated {
    pub webhook: Webhook,
    pub secret: String,
}

/// `GET /v1/webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhooks {
    pub webhooks: Vec<Webhook>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<DeliveryState> {
        [DeliveryState::Pending, DeliveryState::Delivered, DeliveryState::Failed].into_iter().find(|s| s.as_str() == text)
    }
}

/// One delivery of one event to one webhook, and its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The message id (`webhook-id`), the same on every attempt.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub handoff: String,
    pub version: u64,
    pub state: DeliveryState,
    pub attempts: u32,
    /// The receiver's status on the last attempt; `null` before the first, or when none came
    /// within the timeout.
    pub last_status: Option<u16>,
    pub last_attempt_at: Option<Timestamp>,
    /// When a pending delivery is tried next; `null` once it is delivered or failed.
    pub next_attempt_at: Option<Timestamp>,
}

/// `GET /v1/webhooks/{id}/deliveries`: the newest first, and how many pending deliveries the
/// owner's cap dropped before they were sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliveries {
    pub deliveries: Vec<Delivery>,
    pub dropped: u64,
}

/// The body of a webhook delivery: the event's type, when it was stored, and the owner's list
/// row at that version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub timestamp: Timestamp,
    pub data: Row,
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::error::Code;

    #[test]
    fn a_registration_defaults_to_every_event_and_reads_the_named_ones_once_in_order() {
        let all = parse_webhook_create(br#"{"url": "https://chat.example.com/hooks"}"#, Environment::Deployed).unwrap();
        assert_eq!(all, NewWebhook { url: "https://chat.example.com/hooks".into(), events: Notice::ALL.to_vec() });
        let some = parse_webhook_create(br#"{"url": "https://a.example/x", "events": ["closed", "needs-you", "closed"]}"#, Environment::Deployed).unwrap();
        assert_eq!(some.events, [Notice::NeedsYou, Notice::Closed]);
    }

    #[test]
    fn a_url_outside_the_endpoint_rule_or_an_unknown_event_is_refused_naming_its_field() {
        let refused = |body: &str, env| parse_webhook_create(body.as_bytes(), env).unwrap_err();
        for url in ["http://chat.example.com/x", "https://127.0.0.1/x", "https://localhost/x", "http://127.0.0.1:9/x", "not a url"] {
            let e = refused(&format!(r#"{{"url": "{url}"}}"#), Environment::Deployed);
            assert_eq!(e.code, Code::RequestInvalid);
            assert!(e.message.starts_with("url"), "{url}: {}", e.message);
        }
        assert!(parse_webhook_create(br#"{"url": "http://127.0.0.1:9/x"}"#, Environment::Local).is_ok(), "loopback in local");
        assert!(refused(r#"{"url": "https://a.example", "events": []}"#, Environment::Local).message.starts_with("events"));
        assert!(refused(r#"{"url": "https://a.example", "events": ["running"]}"#, Environment::Local).message.starts_with("events[0]"));
        assert!(refused(r#"{"url": "https://a.example", "secret": "x"}"#, Environment::Local).message.contains("secret"));
    }

    #[test]
    fn a_webhook_id_is_wh_and_22_base64url_characters() {
        assert!(is_webhook_id(&webhook_id([0xfb; WEBHOOK_ID_BYTES])));
        assert!(is_webhook_id("wh_AAAAAAAAAAAAAAAAAAAA-_"));
        for bad in ["wh_", "wh_AAAA", "ho_AAAAAAAAAAAAAAAAAAAA-_", "wh_AAAAAAAAAAAAAAAAAAAA/_"] {
            assert!(!is_webhook_id(bad), "{bad}");
        }
    }
}
