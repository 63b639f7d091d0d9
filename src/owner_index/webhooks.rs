//! An owner's webhooks, in the owner's index: the table of them, written here (but for its
//! `dropped` counts, which `deliveries.rs` raises), and one signed attempt of a delivery to one. What each is owed, and when, is `deliveries.rs`'s.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::deliveries::{events_of, Due};
use super::send::NotSent;
use super::Statement;
use crate::clock::now_ms;
use handoff_api::error::{ApiError, Code};
use handoff_api::notifications::{event_names, Deliveries, Delivery, DeliveryState, Webhook, WebhookCreated, Webhooks};
use handoff_core::limits::WEBHOOK_DELIVERIES_KEPT;
use handoff_core::notice;
use handoff_core::time::Timestamp;
use handoff_notify::webhook::{self, MessageId, WebhookSecret};
use worker::*;

/// The webhooks; `dropped` counts their deliveries dropped past the owner's pending cap.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL, created_at INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0)";

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
    crate::bindings::unavailable("owner index webhooks", &e)
}

fn not_found() -> ApiError {
    ApiError::new(Code::WebhookNotFound, "no such webhook")
}

pub fn list(sql: &SqlStorage) -> Result<Webhooks> {
    let rows: Vec<WebhookRow> = sql.exec("SELECT id, url, events, created_at FROM webhooks ORDER BY created_at, id", None)?.to_array()?;
    let webhooks = rows
        .into_iter()
        .map(|r| Webhook { id: r.id, url: r.url, events: event_names(&events_of(&r.events)), created_at: Timestamp::from_ms(r.created_at) })
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
        ("DELETE FROM deliveries WHERE kind = 'webhook' AND receiver = ?".to_string(), vec![id.into()]),
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
            "SELECT id, type, handoff, version, state, attempts, last_status, last_attempt_at, next_attempt_at FROM deliveries WHERE kind = 'webhook' AND receiver = ? ORDER BY seq DESC LIMIT ?",
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

/// One signed attempt: the receiver's status, or why there is none.
pub async fn attempt(d: &Due) -> std::result::Result<u16, NotSent> {
    let (Some(url), Some(secret)) = (&d.url, &d.secret) else {
        return Err(NotSent::Unreadable("the webhook's address"));
    };
    let secret = WebhookSecret::parse(secret).map_err(|_| NotSent::Unreadable("webhook secret"))?;
    let id = MessageId::parse(&d.id).ok_or(NotSent::Unreadable("message id"))?;
    let signed = webhook::sign(&secret, &id, now_ms(), d.body.as_bytes());
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(signed.pairs());
    Ok(super::send::post(url, &headers, d.body.as_bytes()).await?)
}
