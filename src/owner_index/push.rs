//! An owner's Web Push subscriptions, in the owner's index: the table of them, written here (but
//! for its `dropped` counts, which `deliveries.rs` raises), and one attempt of a message to one. What each is owed, and when, is `deliveries.rs`'s.
//! A message is encrypted when it is sent (RFC 8291, fresh key pair and salt each time: the
//! runtime's WebCrypto makes the ECDH, `handoff-notify` derives the keys and frames the record,
//! WebCrypto seals it) and carries a VAPID token (RFC 8292) that WebCrypto signs.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::deliveries::{events_of, Due};
use super::send::{refused, NotSent};
use super::Statement;
use crate::clock::now_ms;
use handoff_api::error::{ApiError, Code};
use handoff_api::notifications::{event_names, PushSubscription, PushSubscriptions, StoredSubscription, SubscriptionCreated};
use handoff_core::notice;
use handoff_core::time::Timestamp;
use handoff_notify::limits::VAPID_TOKEN_TTL_S;
use handoff_notify::push::{self, Event, Sender, Subscription};
use handoff_notify::vapid;
use handoff_notify::{ece, Endpoint, Environment, SubscriptionKeys};
use worker::*;

/// The subscriptions; `dropped` counts their messages dropped past the owner's pending cap.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS push_subscriptions (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, origin TEXT NOT NULL, p256dh TEXT NOT NULL, auth TEXT NOT NULL, events TEXT NOT NULL, console TEXT NOT NULL, created_at INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0)";

/// The message retry window is the TTL the push service is told.
const _: () = assert!(handoff_core::limits::PUSH_RETRY_WINDOW_MS == handoff_notify::limits::PUSH_TTL_S as i64 * 1000);

#[derive(serde::Deserialize)]
struct Listed {
    id: String,
    origin: String,
    events: String,
    created_at: i64,
    dropped: i64,
}

fn store(e: Error) -> ApiError {
    crate::bindings::unavailable("owner index push", &e)
}

/// The curve check of a subscription's key, which the api's reader leaves to the runtime: a
/// point off P-256 is refused as the reader refuses any other key (400 `request.invalid`).
pub async fn check_curve(s: &StoredSubscription) -> std::result::Result<(), ApiError> {
    let keys = SubscriptionKeys::parse(&s.p256dh, &s.auth).map_err(handoff_api::notifications::refuse_keys)?;
    if crate::webcrypto::is_p256_point(&keys.p256dh_point()).await {
        Ok(())
    } else {
        Err(handoff_api::notifications::refuse_keys(SubscriptionKeys::not_on_curve()))
    }
}

/// `POST /v1/push/subscriptions`, within the owner's cap.
pub fn subscribe(sql: &SqlStorage, s: StoredSubscription) -> std::result::Result<SubscriptionCreated, ApiError> {
    let count = crate::sqlite::count(sql, "SELECT COUNT(*) AS n FROM push_subscriptions", vec![]).map_err(store)?;
    notice::admit_subscription(count as usize)?;
    let args = vec![
        s.id.as_str().into(),
        s.endpoint.as_str().into(),
        s.origin.as_str().into(),
        s.p256dh.as_str().into(),
        s.auth.as_str().into(),
        s.events.join(",").into(),
        s.console.as_str().into(),
        s.created_at.ms().into(),
    ];
    sql.exec("INSERT INTO push_subscriptions (id, endpoint, origin, p256dh, auth, events, console, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", args).map_err(store)?;
    Ok(SubscriptionCreated { subscription: s.listed() })
}

pub fn list(sql: &SqlStorage) -> Result<PushSubscriptions> {
    let rows: Vec<Listed> = sql.exec("SELECT id, origin, events, created_at, dropped FROM push_subscriptions ORDER BY created_at, id", None)?.to_array()?;
    let subscriptions = rows
        .into_iter()
        .map(|r| PushSubscription {
            id: r.id,
            origin: r.origin,
            events: event_names(&events_of(&r.events)),
            created_at: Timestamp::from_ms(r.created_at),
            dropped: r.dropped.max(0) as u64,
        })
        .collect();
    Ok(PushSubscriptions { subscriptions })
}

/// `DELETE /v1/push/subscriptions/{id}`: the subscription and the messages it is owed.
pub fn unsubscribe(sql: &SqlStorage, id: &str) -> std::result::Result<Vec<Statement>, ApiError> {
    let held = crate::sqlite::count(sql, "SELECT COUNT(*) AS n FROM push_subscriptions WHERE id = ?", vec![id.into()]).map_err(store)?;
    if held == 0 {
        return Err(ApiError::new(Code::SubscriptionNotFound, "no such push subscription"));
    }
    Ok(forget(id))
}

/// The subscription and every message owed to it.
pub fn forget(id: &str) -> Vec<Statement> {
    vec![
        ("DELETE FROM deliveries WHERE kind = 'push' AND receiver = ?".to_string(), vec![id.into()]),
        ("DELETE FROM push_subscriptions WHERE id = ?".to_string(), vec![id.into()]),
    ]
}

/// One push: the push service's status, or why there is none.
pub async fn attempt(d: &Due, sender: &Sender) -> std::result::Result<u16, NotSent> {
    let (Some(endpoint), Some(p256dh), Some(auth)) = (&d.endpoint, &d.p256dh, &d.auth) else {
        return Err(NotSent::Unreadable("the subscription's address"));
    };
    // Checked when it was registered, under this environment's rule; `Local` admits both forms.
    let endpoint = Endpoint::parse("endpoint", endpoint, Environment::Local).map_err(|_| NotSent::Unreadable("endpoint"))?;
    let keys = SubscriptionKeys::parse(p256dh, auth).map_err(|_| NotSent::Unreadable("subscription keys"))?;
    let event = Event::ALL.into_iter().find(|e| e.message_type() == d.message_type).ok_or(NotSent::Unreadable("event type"))?;
    let to = Subscription { endpoint, keys };
    // Everything of RFC 8291 and 8292 but the ECDH, the AES-128-GCM and the ECDSA, which the runtime does.
    let (as_public, secret) = crate::webcrypto::ecdh_p256(&to.keys.p256dh_point()).await.map_err(refused("the message's ECDH"))?;
    let salt = crate::webcrypto::bytes::<{ ece::SALT_BYTES }>().map_err(refused("drawing the message's salt"))?;
    let exchanged = ece::Exchanged { as_public, secret, salt };
    let unsealed = ece::prepare_with(d.body.as_bytes(), 0, &to.keys, &exchanged).map_err(|e| NotSent::Refused("deriving the message's keys", e.to_string()))?;
    let sealed = crate::webcrypto::seal_aes128gcm(unsealed.cek(), unsealed.nonce(), unsealed.record()).await.map_err(refused("sealing the message"))?;
    let body = unsealed.finish(&sealed);
    let url = to.endpoint.url();
    let input = vapid::signing_input(&to.endpoint, &sender.subject, now_ms(), VAPID_TOKEN_TTL_S);
    let (key, public_key) = crate::webcrypto::vapid_key(&sender.key.pkcs8()).await.map_err(refused("importing the VAPID key"))?;
    let signature = crate::webcrypto::sign_es256(&key, input.as_bytes()).await.map_err(refused("signing the VAPID token"))?;
    let request_headers = push::headers_signed(vapid::authorization_signed(&input, &signature, &public_key), event, &d.handoff);
    let headers: Vec<(&str, &str)> = request_headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    Ok(super::send::post(&url, &headers, &body).await?)
}
