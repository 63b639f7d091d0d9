//! An owner's Web Push subscriptions and the messages owed to them, in the owner's index: as
//! `webhooks.rs` does for webhooks, a row writes the messages it owes in its own transaction
//! and the alarm sends them, each on its own. A message is encrypted when it is sent (RFC 8291,
//! fresh key pair and salt each time; `handoff-notify` derives the keys and frames the record,
//! the runtime's WebCrypto seals it) and carries a VAPID token (RFC 8292); the push service's
//! 404 or 410 deletes the subscription, other failures are retried for at most the TTL.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::clock::now_ms;
use handoff_api::error::{ApiError, Code};
use handoff_api::notifications::{PushPayload, PushSubscription, PushSubscriptions, StoredSubscription, SubscriptionCreated};
use handoff_core::index::Row;
use handoff_core::limits::{WEBHOOK_PENDING_PER_OWNER_MAX, WEBHOOK_SENDS_PER_ALARM_MAX, WEBHOOK_TIMEOUT_MS};
use handoff_core::notice::{self, Notice};
use handoff_core::time::Timestamp;
use handoff_notify::limits::{PUSH_TTL_S, VAPID_TOKEN_TTL_S};
use handoff_notify::vapid;
use handoff_notify::push::{self, Event, PushOutcome, Sender, Subscription};
use handoff_notify::{ece, Endpoint, Environment, MessageEntropy, SubscriptionKeys};
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};
use worker::*;

use super::send::{refused, NotSent};
use super::webhooks::Statement;

/// Created with the webhook tables (`webhooks::SCHEMA`).
pub const SCHEMA: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS push_subscriptions (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, origin TEXT NOT NULL, p256dh TEXT NOT NULL, auth TEXT NOT NULL, events TEXT NOT NULL, console TEXT NOT NULL, created_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS push_deliveries (seq INTEGER PRIMARY KEY, subscription TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, created_at INTEGER NOT NULL, UNIQUE (subscription, handoff, version, type))",
    "CREATE INDEX IF NOT EXISTS push_deliveries_due ON push_deliveries (next_attempt_at)",
];

const INSERT: &str = "INSERT OR IGNORE INTO push_deliveries (subscription, type, handoff, version, payload, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)";
/// The most draws of fresh entropy one message makes before it counts as not made.
const ENTROPY_DRAWS_MAX: usize = 8;
/// Past the owner's cap the oldest messages owed are dropped: a notification that old is stale.
const DROP_OLDEST: &str = "DELETE FROM push_deliveries WHERE seq IN (SELECT seq FROM push_deliveries ORDER BY seq DESC LIMIT -1 OFFSET ?1)";

#[derive(serde::Deserialize)]
struct Subscribed {
    id: String,
    events: String,
    console: String,
}

#[derive(serde::Deserialize)]
struct Listed {
    id: String,
    origin: String,
    events: String,
    created_at: i64,
}

#[derive(serde::Deserialize)]
struct Due {
    seq: i64,
    subscription: String,
    #[serde(rename = "type")]
    kind: String,
    handoff: String,
    payload: String,
    attempts: i64,
    created_at: i64,
    endpoint: String,
    p256dh: String,
    auth: String,
}

fn events_of(stored: &str) -> Vec<Notice> {
    stored.split(',').filter_map(Notice::parse).collect()
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::RustError(e.to_string())
}

fn store(e: Error) -> ApiError {
    console_error!("owner index push: {e}");
    ApiError::new(Code::StoreUnavailable, "the hand-off store is unavailable; try again")
}

/// The statements that store the messages a delivery owes the owner's subscriptions, one per
/// notice [`notice::owed_chain`] found, with the row it is owed for.
pub fn owed(sql: &SqlStorage, notices: &[(&Row, Notice)], now: i64) -> Result<Vec<Statement>> {
    if notices.is_empty() {
        return Ok(Vec::new());
    }
    let subscriptions: Vec<Subscribed> = sql.exec("SELECT id, events, console FROM push_subscriptions ORDER BY created_at, id", None)?.to_array()?;
    let mut statements = Vec::new();
    for &(row, notice) in notices {
        for s in subscriptions.iter().filter(|s| events_of(&s.events).contains(&notice)) {
            let payload = serde_json::to_string(&PushPayload::of(notice, row, &s.console)).map_err(internal)?;
            let args = vec![
                s.id.as_str().into(),
                notice.message_type().into(),
                row.id.as_str().into(),
                (row.version as i64).into(),
                payload.into(),
                now.into(),
                now.into(),
            ];
            statements.push((INSERT.to_string(), args));
        }
    }
    if !statements.is_empty() {
        statements.push((DROP_OLDEST.to_string(), vec![(WEBHOOK_PENDING_PER_OWNER_MAX as i64).into()]));
    }
    Ok(statements)
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
    let rows: Vec<Listed> = sql.exec("SELECT id, origin, events, created_at FROM push_subscriptions ORDER BY created_at, id", None)?.to_array()?;
    let subscriptions = rows
        .into_iter()
        .map(|r| PushSubscription {
            id: r.id,
            origin: r.origin,
            events: events_of(&r.events).iter().map(|e| e.name().to_string()).collect(),
            created_at: Timestamp::from_ms(r.created_at),
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

/// Every message owed, dropped: where push is not configured they cannot be sent.
pub fn forget_all(sql: &SqlStorage) -> Result<()> {
    sql.exec("DELETE FROM push_deliveries", None)?;
    Ok(())
}

fn forget(id: &str) -> Vec<Statement> {
    vec![
        ("DELETE FROM push_deliveries WHERE subscription = ?".to_string(), vec![id.into()]),
        ("DELETE FROM push_subscriptions WHERE id = ?".to_string(), vec![id.into()]),
    ]
}

/// The alarm's share: starts every due push message (oldest first per subscription and
/// hand-off), each on its own, its next attempt leased first as `webhooks::send_due` does.
pub fn send_due(sql: &SqlStorage, storage: &worker_sys::DurableObjectStorage, sender: &Rc<Sender>) -> Result<()> {
    let now = now_ms();
    let due: Vec<Due> = sql
        .exec(
            "SELECT d.seq, d.subscription, d.type, d.handoff, d.payload, d.attempts, d.created_at, s.endpoint, s.p256dh, s.auth
             FROM push_deliveries d JOIN push_subscriptions s ON s.id = d.subscription
             WHERE d.next_attempt_at <= ?
             AND NOT EXISTS (SELECT 1 FROM push_deliveries e WHERE e.subscription = d.subscription AND e.handoff = d.handoff AND e.seq < d.seq)
             ORDER BY d.next_attempt_at, d.seq LIMIT ?",
            vec![now.into(), (WEBHOOK_SENDS_PER_ALARM_MAX as i64).into()],
        )?
        .to_array()?;
    for d in due {
        let attempts = (d.attempts.max(0) as u32).saturating_add(1);
        let lease = notice::retry_at(d.created_at, attempts, now + WEBHOOK_TIMEOUT_MS).unwrap_or(now + WEBHOOK_TIMEOUT_MS);
        sql.exec("UPDATE push_deliveries SET attempts = ?, next_attempt_at = ? WHERE seq = ?", vec![(attempts as i64).into(), lease.into(), d.seq.into()])?;
        let raw: &JsValue = storage.as_ref();
        let (sql, storage): (SqlStorage, worker_sys::DurableObjectStorage) = (sql.clone(), raw.clone().unchecked_into());
        let sender = Rc::clone(sender);
        wasm_bindgen_futures::spawn_local(async move {
            let sent = attempt(&d, &sender).await;
            if let Err(e) = &sent {
                console_log!("push message {} to subscription {} (attempt {attempts}): {e}", d.seq, d.subscription);
            }
            if let Err(e) = record(&sql, &d, attempts, sent.ok()).and_then(|_| super::webhooks::arm(&sql, &storage)) {
                console_error!("a push message's outcome: {e}");
            }
        });
    }
    Ok(())
}

/// One push: the push service's status, or why there is none.
async fn attempt(d: &Due, sender: &Sender) -> std::result::Result<u16, NotSent> {
    // Checked when it was registered, under this environment's rule; `Local` admits both forms.
    let endpoint = Endpoint::parse("endpoint", &d.endpoint, Environment::Local).map_err(|_| NotSent::Unreadable("endpoint"))?;
    let keys = SubscriptionKeys::parse(&d.p256dh, &d.auth).map_err(|_| NotSent::Unreadable("subscription keys"))?;
    let event = Event::ALL.into_iter().find(|e| e.message_type() == d.kind).ok_or(NotSent::Unreadable("event type"))?;
    // A draw is refused only when it is no valid scalar (about once in 2^32): a few draws are
    // always enough, and the bound keeps a broken source of randomness from looping forever.
    let entropy = (0..ENTROPY_DRAWS_MAX)
        .find_map(|_| {
            let bytes = crate::webcrypto::bytes::<{ MessageEntropy::BYTES }>().ok()?;
            MessageEntropy::from_bytes(&bytes).ok()
        })
        .ok_or(NotSent::Refused("drawing the message's entropy", format!("{ENTROPY_DRAWS_MAX} draws")))?;
    let to = Subscription { endpoint, keys };
    // Everything of RFC 8291 and 8292 but the AES-128-GCM and the ECDSA, which the runtime does.
    let unsealed = ece::prepare(d.payload.as_bytes(), 0, &to.keys, &entropy).map_err(|e| NotSent::Refused("deriving the message's keys", format!("{e:?}")))?;
    let sealed = crate::webcrypto::seal_aes128gcm(unsealed.cek(), unsealed.nonce(), unsealed.record()).await.map_err(refused("sealing the message"))?;
    let body = unsealed.finish(&sealed);
    let url = to.endpoint.url();
    let input = vapid::signing_input(&to.endpoint, &sender.subject, now_ms(), VAPID_TOKEN_TTL_S);
    let (jwk_d, jwk_x, jwk_y) = sender.key.jwk();
    let signature = crate::webcrypto::sign_es256(&jwk_d, &jwk_x, &jwk_y, input.as_bytes()).await.map_err(refused("signing the VAPID token"))?;
    let request_headers = push::headers_signed(sender.key.authorization_signed(&input, &signature), event, &d.handoff);
    let headers: Vec<(&str, &str)> = request_headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    Ok(super::send::post(&url, &headers, &body).await?)
}

/// Delivered: forgotten. Gone (404, 410): the subscription deleted. Otherwise retried as a
/// webhook is, for at most the message's TTL.
fn record(sql: &SqlStorage, d: &Due, attempts: u32, status: Option<u16>) -> Result<()> {
    let now = now_ms();
    let outcome = status.map_or(PushOutcome::Retry, PushOutcome::of_status);
    let ttl_ms = i64::from(PUSH_TTL_S) * 1000;
    let retry = notice::retry_at(d.created_at, attempts, now).filter(|at| *at - d.created_at <= ttl_ms);
    match (outcome, retry) {
        (PushOutcome::Gone, _) => {
            for (statement, args) in forget(&d.subscription) {
                sql.exec(&statement, args)?;
            }
        }
        (PushOutcome::Retry, Some(at)) => {
            sql.exec("UPDATE push_deliveries SET next_attempt_at = ? WHERE seq = ?", vec![at.into(), d.seq.into()])?;
        }
        (PushOutcome::Delivered, _) | (PushOutcome::Retry, None) => {
            sql.exec("DELETE FROM push_deliveries WHERE seq = ?", vec![d.seq.into()])?;
        }
    }
    Ok(())
}
