//! An owner's webhooks and their deliveries, in the owner's index: tables of their own, written
//! only here. A row the index stores writes the deliveries it owes (`handoff_core::notice`) in
//! the same transaction, so a delivery survives the runtime dying between the commit and the
//! send; the index's alarm sends what is due. Each send runs on its own (spawned, with its own
//! timeout), so one slow receiver delays no other, and the report that caused the event never
//! waits for any. Nothing is decided here: when an event is owed, the cap and the retry schedule
//! are the core's.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::send::NotSent;
use crate::clock::now_ms;
use handoff_api::error::{ApiError, Code};
use handoff_api::notifications::{
    Deliveries, Delivery, DeliveryState, Webhook, WebhookBody, WebhookCreated, Webhooks,
};
use handoff_core::index::Row;
use handoff_core::limits::{WEBHOOK_DELIVERIES_KEPT, WEBHOOK_SENDS_PER_ALARM_MAX, WEBHOOK_TIMEOUT_MS};
use handoff_core::notice::{self, Notice};
use handoff_core::time::Timestamp;
use handoff_notify::webhook::{self, MessageId, WebhookSecret};
use wasm_bindgen::{JsCast, JsValue};
use worker::*;

/// The webhooks and each one's deliveries (`seq` orders them, newest highest), and the push
/// subscriptions and theirs (`push.rs`): written together, so the alarm reads both.
pub const SCHEMA: [&str; 7] = [
    "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL, created_at INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS webhook_deliveries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, webhook TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, last_attempt_at INTEGER, next_attempt_at INTEGER, created_at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at)",
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_of ON webhook_deliveries (webhook, seq)",
    super::push::SCHEMA[0],
    super::push::SCHEMA[1],
    super::push::SCHEMA[2],
];

/// A statement and its arguments, to run in a transaction.
pub type Statement = (String, Vec<SqlStorageValue>);

const INSERT_DELIVERY: &str = "INSERT OR IGNORE INTO webhook_deliveries (id, webhook, type, handoff, version, body, state, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)";

/// The pending deliveries past the owner's cap, oldest first: counted on their webhooks, then
/// dropped.
const COUNT_DROPPED: &str = "UPDATE webhooks SET dropped = dropped + (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook = webhooks.id AND d.seq IN (SELECT seq FROM webhook_deliveries WHERE state = 'pending' ORDER BY seq DESC LIMIT -1 OFFSET ?1))";
const DROP_OLDEST: &str = "DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE state = 'pending' ORDER BY seq DESC LIMIT -1 OFFSET ?1)";

#[derive(serde::Deserialize)]
struct Subscribed {
    id: String,
    events: String,
}

#[derive(serde::Deserialize)]
struct WebhookRow {
    id: String,
    url: String,
    events: String,
    created_at: i64,
}

#[derive(serde::Deserialize)]
struct Dropped {
    dropped: i64,
}

#[derive(serde::Deserialize)]
struct DeliveryRow {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    handoff: String,
    version: i64,
    state: String,
    attempts: i64,
    last_status: Option<i64>,
    last_attempt_at: Option<i64>,
    next_attempt_at: Option<i64>,
}

#[derive(serde::Deserialize)]
struct Due {
    seq: i64,
    id: String,
    body: String,
    attempts: i64,
    created_at: i64,
    url: String,
    secret: String,
}

#[derive(serde::Deserialize)]
struct Next {
    at: Option<i64>,
}

fn events_of(stored: &str) -> Vec<Notice> {
    stored.split(',').filter_map(Notice::parse).collect()
}

fn names(events: &[Notice]) -> Vec<String> {
    events.iter().map(|e| e.name().to_string()).collect()
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::RustError(e.to_string())
}

/// Whether the notification tables exist (the last of them written) (from the catalogue alone: reading writes nothing).
pub fn has_schema(sql: &SqlStorage) -> Result<bool> {
    #[derive(serde::Deserialize)]
    struct Name {
        #[allow(dead_code)]
        name: String,
    }
    let found: Vec<Name> = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'push_deliveries'", None)?.to_array()?;
    Ok(!found.is_empty())
}

/// The statements that store what a delivery owes the owner's webhooks: one delivery per
/// webhook subscribed to each notice [`notice::owed_chain`] found, in its order, with the row it
/// is owed for; then the owner's pending cap applied. Empty when nothing is owed (or the owner
/// has no webhook).
pub fn owed(sql: &SqlStorage, notices: &[(&Row, Notice)], pending_max: usize, now: i64) -> Result<Vec<Statement>> {
    if notices.is_empty() {
        return Ok(Vec::new());
    }
    let hooks: Vec<Subscribed> = sql.exec("SELECT id, events FROM webhooks ORDER BY created_at, id", None)?.to_array()?;
    let mut statements = Vec::new();
    for &(row, notice) in notices {
        let body = WebhookBody { kind: notice.message_type().into(), timestamp: Timestamp::from_ms(now), data: row.clone() };
        let body = serde_json::to_string(&body).map_err(internal)?;
        for hook in hooks.iter().filter(|h| events_of(&h.events).contains(&notice)) {
            let id = MessageId::from_random(notice::message_key(&hook.id, &row.id, row.version, notice));
            let args = vec![
                id.as_str().into(),
                hook.id.as_str().into(),
                notice.message_type().into(),
                row.id.as_str().into(),
                (row.version as i64).into(),
                body.as_str().into(),
                now.into(),
                now.into(),
            ];
            statements.push((INSERT_DELIVERY.to_string(), args));
        }
    }
    if !statements.is_empty() {
        statements.push((COUNT_DROPPED.to_string(), vec![(pending_max as i64).into()]));
        statements.push((DROP_OLDEST.to_string(), vec![(pending_max as i64).into()]));
    }
    Ok(statements)
}

/// `POST /v1/webhooks`, within the owner's cap.
pub fn add(sql: &SqlStorage, hook: Webhook, secret: String) -> std::result::Result<WebhookCreated, ApiError> {
    let count = crate::sqlite::count(sql, "SELECT COUNT(*) AS n FROM webhooks", vec![]).map_err(store)?;
    notice::admit_webhook(count as usize)?;
    let events = hook.events.join(",");
    let args = vec![hook.id.as_str().into(), hook.url.as_str().into(), events.into(), secret.as_str().into(), hook.created_at.ms().into()];
    sql.exec("INSERT INTO webhooks (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)", args).map_err(store)?;
    Ok(WebhookCreated { webhook: hook, secret })
}

/// A storage failure under a webhook route: 503, its cause logged.
fn store(e: Error) -> ApiError {
    console_error!("owner index webhooks: {e}");
    ApiError::new(Code::StoreUnavailable, "the hand-off store is unavailable; try again")
}

fn not_found() -> ApiError {
    ApiError::new(Code::WebhookNotFound, "no such webhook")
}

pub fn list(sql: &SqlStorage) -> Result<Webhooks> {
    let rows: Vec<WebhookRow> = sql.exec("SELECT id, url, events, created_at FROM webhooks ORDER BY created_at, id", None)?.to_array()?;
    let webhooks = rows
        .into_iter()
        .map(|r| Webhook { id: r.id, url: r.url, events: names(&events_of(&r.events)), created_at: Timestamp::from_ms(r.created_at) })
        .collect();
    Ok(Webhooks { webhooks })
}

fn exists(sql: &SqlStorage, id: &str) -> std::result::Result<bool, ApiError> {
    Ok(crate::sqlite::count(sql, "SELECT COUNT(*) AS n FROM webhooks WHERE id = ?", vec![id.into()]).map_err(store)? > 0)
}

/// `DELETE /v1/webhooks/{id}`: the webhook and every delivery of it, pending ones too.
pub fn delete(sql: &SqlStorage, id: &str) -> std::result::Result<Vec<Statement>, ApiError> {
    if !exists(sql, id)? {
        return Err(not_found());
    }
    Ok(vec![
        ("DELETE FROM webhook_deliveries WHERE webhook = ?".to_string(), vec![id.into()]),
        ("DELETE FROM webhooks WHERE id = ?".to_string(), vec![id.into()]),
    ])
}

/// `GET /v1/webhooks/{id}/deliveries`: the newest first.
pub fn deliveries(sql: &SqlStorage, id: &str) -> std::result::Result<Deliveries, ApiError> {
    let dropped: Vec<Dropped> = sql.exec("SELECT dropped FROM webhooks WHERE id = ?", vec![id.into()]).map_err(store)?.to_array().map_err(store)?;
    let Some(dropped) = dropped.first().map(|d| d.dropped) else {
        return Err(not_found());
    };
    let rows: Vec<DeliveryRow> = sql
        .exec(
            "SELECT id, type, handoff, version, state, attempts, last_status, last_attempt_at, next_attempt_at FROM webhook_deliveries WHERE webhook = ? ORDER BY seq DESC LIMIT ?",
            vec![id.into(), (WEBHOOK_DELIVERIES_KEPT as i64).into()],
        )
        .map_err(store)?
        .to_array()
        .map_err(store)?;
    let deliveries = rows
        .into_iter()
        .map(|r| Delivery {
            id: r.id,
            kind: r.kind,
            handoff: r.handoff,
            version: r.version.max(0) as u64,
            state: DeliveryState::parse(&r.state).unwrap_or(DeliveryState::Failed),
            attempts: r.attempts.clamp(0, u32::MAX as i64) as u32,
            last_status: r.last_status.and_then(|s| u16::try_from(s).ok()),
            last_attempt_at: r.last_attempt_at.map(Timestamp::from_ms),
            next_attempt_at: r.next_attempt_at.map(Timestamp::from_ms),
        })
        .collect();
    Ok(Deliveries { deliveries, dropped: dropped.max(0) as u64 })
}

/// When the next pending delivery, webhook or push, is due, if any is: only the oldest of each
/// hand-off's deliveries to one receiver counts, as only it is sent (a later one waiting behind a
/// failing one would otherwise have the alarm fire again and again for nothing).
fn next_due(sql: &SqlStorage) -> Result<Option<i64>> {
    let next: Vec<Next> = sql
        .exec(
            "SELECT MIN(at) AS at FROM (
               SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d WHERE d.state = 'pending'
               AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook = d.webhook AND e.handoff = d.handoff AND e.state = 'pending' AND e.seq < d.seq)
             UNION ALL
               SELECT MIN(d.next_attempt_at) AS at FROM push_deliveries d
               WHERE NOT EXISTS (SELECT 1 FROM push_deliveries e WHERE e.subscription = d.subscription AND e.handoff = d.handoff AND e.seq < d.seq))",
            None,
        )?
        .to_array()?;
    Ok(next.first().and_then(|n| n.at))
}

/// Sets the alarm for the next pending delivery of either kind (one alarm serves both), with
/// no await: within an event it joins that event's implicit transaction, after its writes.
pub fn arm(sql: &SqlStorage, storage: &worker_sys::DurableObjectStorage) -> Result<()> {
    if let Some(at) = next_due(sql)? {
        crate::alarm::set(storage, at.max(now_ms()), "the owner's next notification")?;
    }
    Ok(())
}

/// The alarm: starts every due delivery (up to `WEBHOOK_SENDS_PER_ALARM_MAX`), each on its own,
/// and sets the alarm for the next. Of one hand-off's deliveries to one webhook only the oldest
/// pending one is sent, so that they arrive in version order. Before a send starts, its attempt is counted and its next
/// attempt set as if it failed after the timeout, so that a send the runtime never finishes is
/// retried too.
pub fn send_due(sql: &SqlStorage, storage: &worker_sys::DurableObjectStorage) -> Result<()> {
    let now = now_ms();
    let due: Vec<Due> = sql
        .exec(
            "SELECT d.seq, d.id, d.body, d.attempts, d.created_at, w.url, w.secret FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook
             WHERE d.state = 'pending' AND d.next_attempt_at <= ?
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook = d.webhook AND e.handoff = d.handoff AND e.state = 'pending' AND e.seq < d.seq)
             ORDER BY d.next_attempt_at, d.seq LIMIT ?",
            vec![now.into(), (WEBHOOK_SENDS_PER_ALARM_MAX as i64).into()],
        )?
        .to_array()?;
    for d in due {
        let attempts = (d.attempts.max(0) as u32).saturating_add(1);
        let lease = notice::retry_at(d.created_at, attempts, now + WEBHOOK_TIMEOUT_MS).unwrap_or(now + WEBHOOK_TIMEOUT_MS);
        sql.exec(
            "UPDATE webhook_deliveries SET attempts = ?, last_attempt_at = ?, next_attempt_at = ? WHERE seq = ?",
            vec![(attempts as i64).into(), now.into(), lease.into(), d.seq.into()],
        )?;
        let raw: &JsValue = storage.as_ref();
        let (sql, storage): (SqlStorage, worker_sys::DurableObjectStorage) = (sql.clone(), raw.clone().unchecked_into());
        wasm_bindgen_futures::spawn_local(async move {
            let sent = attempt(&d.url, &d.secret, &d.id, &d.body).await;
            if let Err(e) = &sent {
                console_log!("webhook delivery {} (attempt {attempts}): {e}", d.id);
            }
            if let Err(e) = record(&sql, &d, attempts, sent.ok()).and_then(|_| arm(&sql, &storage)) {
                console_error!("a webhook delivery's outcome: {e}");
            }
        });
    }
    arm(sql, storage)
}

/// One attempt: the receiver's status, or why there is none.
async fn attempt(url: &str, secret: &str, id: &str, body: &str) -> std::result::Result<u16, NotSent> {
    let secret = WebhookSecret::parse(secret).map_err(|_| NotSent::Unreadable("webhook secret"))?;
    let id = MessageId::parse(id).ok_or(NotSent::Unreadable("message id"))?;
    let signed = webhook::sign(&secret, &id, now_ms(), body.as_bytes());
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(signed.pairs());
    Ok(super::send::post(url, &headers, body.as_bytes()).await?)
}

/// Stores how an attempt went: delivered on 2xx; otherwise retried when the core says, or failed.
fn record(sql: &SqlStorage, d: &Due, attempts: u32, status: Option<u16>) -> Result<()> {
    let now = now_ms();
    let delivered = status.is_some_and(|s| (200..300).contains(&s));
    let (state, next) = match (delivered, notice::retry_at(d.created_at, attempts, now)) {
        (true, _) => (DeliveryState::Delivered, None),
        (false, Some(at)) => (DeliveryState::Pending, Some(at)),
        (false, None) => (DeliveryState::Failed, None),
    };
    let status: Option<i64> = status.map(i64::from);
    sql.exec(
        "UPDATE webhook_deliveries SET state = ?, last_status = ?, next_attempt_at = ? WHERE seq = ?",
        vec![state.as_str().into(), status.into(), next.into(), d.seq.into()],
    )?;
    if state != DeliveryState::Pending {
        // Finished deliveries are kept for the list, the newest `WEBHOOK_DELIVERIES_KEPT` of each webhook.
        sql.exec(
            "DELETE FROM webhook_deliveries WHERE state != 'pending' AND webhook = (SELECT webhook FROM webhook_deliveries WHERE seq = ?1)
             AND seq NOT IN (SELECT seq FROM webhook_deliveries WHERE state != 'pending' AND webhook = (SELECT webhook FROM webhook_deliveries WHERE seq = ?1) ORDER BY seq DESC LIMIT ?2)",
            vec![d.seq.into(), (WEBHOOK_DELIVERIES_KEPT as i64).into()],
        )?;
    }
    Ok(())
}
