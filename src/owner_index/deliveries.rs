//! Every notification an owner is owed, to a webhook or a push subscription alike, in one table
//! written here (and where a receiver is removed, in `webhooks.rs` and `push.rs`): a row the
//! index stores writes the deliveries it owes in the same transaction (so one survives the
//! runtime dying between the commit and the send), and the index's alarm sends what is due,
//! each send on its own so that one slow receiver delays no other. What is owed, the one cap
//! over both kinds, the lease, the retry schedule, what an answer leads to and what is kept are
//! `handoff_core::owner::receiver`'s, and what one alarm sends is `handoff_core::owner::
//! sending`'s; this file turns them into SQL. `webhooks.rs` and `push.rs` hold the receivers
//! and make one attempt each.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::send::NotSent;
use super::Statement;
use crate::clock::now_ms;
use handoff_api::notifications::{DeliveryState, PushPayload, WebhookBody};
use handoff_core::index::Row;
use handoff_core::limits::WEBHOOK_PENDING_PER_OWNER_MAX;
use handoff_core::notice::Notice;
use handoff_core::owner::receiver::{self, Lease, Next, Receiver, Subscriber};
use handoff_core::owner::sending::{self, Pending};
use handoff_core::time::Timestamp;
use handoff_notify::webhook::MessageId;
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};
use worker::*;

/// The receivers (`webhooks.rs`, `push.rs`) and the deliveries to them (`seq` orders them,
/// oldest lowest); `kind` says which table `receiver` is in.
pub const SCHEMA: [&str; 5] = [
    super::webhooks::SCHEMA,
    super::push::SCHEMA,
    "CREATE TABLE IF NOT EXISTS deliveries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, receiver TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, last_attempt_at INTEGER, next_attempt_at INTEGER, created_at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (state, next_attempt_at)",
    "CREATE INDEX IF NOT EXISTS deliveries_of ON deliveries (receiver, seq)",
];

/// What the notification tables are, from the catalogue alone (reading writes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// The owner never registered a receiver.
    None,
    /// An earlier build's: a deliveries table per kind (push's maybe not yet), and push
    /// subscriptions that counted no drops.
    Earlier { push: bool },
    Current,
}

#[derive(serde::Deserialize)]
struct Name {
    name: String,
}

pub fn tables(sql: &SqlStorage) -> Result<Tables> {
    let found: Vec<Name> = sql
        .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('webhooks', 'push_subscriptions', 'deliveries')", None)?
        .to_array()?;
    let has = |t: &str| found.iter().any(|n| n.name == t);
    if has("deliveries") {
        return Ok(Tables::Current);
    }
    if !has("webhooks") {
        return Ok(Tables::None);
    }
    Ok(Tables::Earlier { push: has("push_subscriptions") })
}

/// The statements that bring `tables` to this build's: the one deliveries table, filled from
/// an earlier build's two in their order (a push message had no id: it gets one of its own).
pub fn schema(tables: Tables) -> Vec<Statement> {
    let mut statements: Vec<String> = SCHEMA.iter().map(|s| s.to_string()).collect();
    if let Tables::Earlier { push } = tables {
        if push {
            statements.push("ALTER TABLE push_subscriptions ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0".into());
        }
        statements.push(
            "INSERT INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, last_status, last_attempt_at, next_attempt_at, created_at)
             SELECT id, 'webhook', webhook, type, handoff, version, body, state, attempts, last_status, last_attempt_at, next_attempt_at, created_at FROM webhook_deliveries ORDER BY seq"
                .into(),
        );
        statements.push("DROP TABLE webhook_deliveries".into());
        if push {
            statements.push(
                "INSERT INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, next_attempt_at, created_at)
                 SELECT 'earlier-push-' || seq, 'push', subscription, type, handoff, version, payload, 'pending', attempts, next_attempt_at, created_at FROM push_deliveries ORDER BY seq"
                    .into(),
            );
            statements.push("DROP TABLE push_deliveries".into());
        }
    }
    statements.into_iter().map(|s| (s, Vec::new())).collect()
}

const INSERT: &str = "INSERT OR IGNORE INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)";
/// The `?1` oldest pending deliveries go, after they are counted on their receivers of either kind.
const DROP_OLDEST: &str = "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries WHERE state = 'pending' ORDER BY seq LIMIT ?1)";
const COUNT_DROPPED: [&str; 2] = [
    "UPDATE webhooks SET dropped = dropped + (SELECT COUNT(*) FROM deliveries d WHERE d.kind = 'webhook' AND d.receiver = webhooks.id AND d.seq IN (SELECT seq FROM deliveries WHERE state = 'pending' ORDER BY seq LIMIT ?1))",
    "UPDATE push_subscriptions SET dropped = dropped + (SELECT COUNT(*) FROM deliveries d WHERE d.kind = 'push' AND d.receiver = push_subscriptions.id AND d.seq IN (SELECT seq FROM deliveries WHERE state = 'pending' ORDER BY seq LIMIT ?1))",
];

#[derive(serde::Deserialize)]
struct Subscribed {
    id: String,
    events: String,
    #[serde(default)]
    console: String,
}

/// A receiver's events as its table stores them: their names, comma-separated.
pub fn events_of(stored: &str) -> Vec<Notice> {
    stored.split(',').filter_map(Notice::parse).collect()
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::RustError(e.to_string())
}

/// The statements that store what a delivery owes the owner's receivers (push subscriptions
/// only where push is configured: `push`), then the owner's one cap over them all. Empty when
/// nothing is owed.
pub fn owe(sql: &SqlStorage, notices: &[(&Row, Notice)], push: bool, pending_max: usize, now: i64) -> Result<Vec<Statement>> {
    if notices.is_empty() {
        return Ok(Vec::new());
    }
    let hooks: Vec<Subscribed> = sql.exec("SELECT id, events FROM webhooks ORDER BY created_at, id", None)?.to_array()?;
    let subscriptions: Vec<Subscribed> = if push {
        sql.exec("SELECT id, events, console FROM push_subscriptions ORDER BY created_at, id", None)?.to_array()?
    } else {
        Vec::new()
    };
    let receivers: Vec<(Receiver, &Subscribed, Vec<Notice>)> = (hooks.iter().map(|s| (Receiver::Webhook, s)))
        .chain(subscriptions.iter().map(|s| (Receiver::Push, s)))
        .map(|(kind, s)| (kind, s, events_of(&s.events)))
        .collect();
    let subscribers: Vec<Subscriber> = receivers.iter().map(|(kind, s, events)| Subscriber { receiver: *kind, id: &s.id, events }).collect();
    let owed = receiver::owed(notices, &subscribers);
    if owed.is_empty() {
        return Ok(Vec::new());
    }
    let mut statements = Vec::with_capacity(owed.len() + 3);
    for o in &owed {
        let body = match o.receiver {
            Receiver::Webhook => serde_json::to_string(&WebhookBody { kind: o.notice.message_type().into(), timestamp: Timestamp::from_ms(now), data: o.row.clone() }),
            Receiver::Push => {
                let console = receivers.iter().find(|(_, s, _)| s.id == o.to).map_or("", |(_, s, _)| s.console.as_str());
                serde_json::to_string(&PushPayload::of(o.notice, o.row, console))
            }
        }
        .map_err(internal)?;
        let args = vec![
            MessageId::from_random(o.key).as_str().into(),
            o.receiver.as_str().into(),
            o.to.into(),
            o.notice.message_type().into(),
            o.row.id.as_str().into(),
            (o.row.version as i64).into(),
            body.into(),
            now.into(),
            now.into(),
        ];
        statements.push((INSERT.to_string(), args));
    }
    let pending = crate::sqlite::count(sql, "SELECT COUNT(*) AS n FROM deliveries WHERE state = 'pending'", vec![])?;
    // A replay's insert is ignored, so this may drop one more than needed: never one too few.
    let drop = receiver::over_cap(pending.max(0) as usize + owed.len(), pending_max);
    if drop > 0 {
        let n: SqlStorageValue = (drop as i64).into();
        for count in COUNT_DROPPED {
            statements.push((count.to_string(), vec![n.clone()]));
        }
        statements.push((DROP_OLDEST.to_string(), vec![n]));
    }
    Ok(statements)
}

/// Every pending delivery, oldest first, with its body and its receiver's address: at most
/// the owner's cap of them are ever held, each body bounded by its kind's limit.
fn pending_rows(sql: &SqlStorage) -> Result<Vec<Due>> {
    sql.exec(
        "SELECT d.seq, d.id, d.kind, d.receiver, d.type, d.handoff, d.body, d.attempts, d.created_at, d.next_attempt_at,
                w.url, w.secret, s.endpoint, s.p256dh, s.auth
         FROM deliveries d
         LEFT JOIN webhooks w ON d.kind = 'webhook' AND w.id = d.receiver
         LEFT JOIN push_subscriptions s ON d.kind = 'push' AND s.id = d.receiver
         WHERE d.state = 'pending' ORDER BY d.seq LIMIT ?",
        vec![(WEBHOOK_PENDING_PER_OWNER_MAX as i64).into()],
    )?
    .to_array()
}

/// A row as the core reads it (`None`: of a kind this build does not know, or not scheduled).
fn pending_of(r: &Due) -> Option<Pending<'_>> {
    Some(Pending {
        seq: r.seq,
        receiver: Receiver::parse(&r.kind)?,
        to: &r.receiver,
        handoff: &r.handoff,
        created_at: r.created_at,
        attempts: r.attempts.max(0) as u32,
        next_attempt_at: r.next_attempt_at?,
    })
}

/// Has the alarm fire at once, with no await (within an event it joins that event's implicit
/// transaction, after its writes): a delivery was owed or an attempt ended, and the alarm's
/// round (`sending::round`) says what is sent now and when it fires next.
pub fn arm(storage: &worker_sys::DurableObjectStorage) -> Result<()> {
    crate::alarm::set(storage, now_ms(), "the owner's notifications")
}

/// A pending delivery as the alarm reads it: what decides when it is sent (`kind`, `attempts`,
/// `created_at`, `next_attempt_at`), its body, and its receiver's address (the columns of its
/// kind's table).
#[derive(serde::Deserialize)]
pub struct Due {
    seq: i64,
    pub id: String,
    kind: String,
    attempts: i64,
    next_attempt_at: Option<i64>,
    pub receiver: String,
    #[serde(rename = "type")]
    pub message_type: String,
    pub handoff: String,
    pub body: String,
    created_at: i64,
    pub url: Option<String>,
    pub secret: Option<String>,
    pub endpoint: Option<String>,
    pub p256dh: Option<String>,
    pub auth: Option<String>,
}

/// The alarm: what `sending::round` says (push messages that cannot be sent dropped, expired
/// ones ended, each due one leased and started on its own), then the alarm for the next.
pub fn send_due(sql: &SqlStorage, storage: &worker_sys::DurableObjectStorage, sender: Option<&Rc<handoff_notify::Sender>>) -> Result<()> {
    let now = now_ms();
    let rows = pending_rows(sql)?;
    let pending: Vec<Pending> = rows.iter().filter_map(pending_of).collect();
    let round = sending::round(&pending, now, sender.is_some());
    for r in rows.iter().filter(|r| Receiver::parse(&r.kind).is_none()) {
        console_error!("delivery {}: a kind this build does not know ({}); it ends failed", r.id, r.kind);
        finish(sql, r.seq, &r.receiver, Receiver::Webhook, DeliveryState::Failed, None)?;
    }
    // The round forgets every pending push message or none.
    if !round.forget.is_empty() {
        console_log!("{} push messages dropped: push is not configured", round.forget.len());
        sql.exec("DELETE FROM deliveries WHERE kind = 'push' AND state = 'pending'", None)?;
    }
    for p in pending.iter().filter(|p| round.expire.contains(&p.seq)) {
        console_log!("delivery {} expired before it was sent", p.seq);
        finish(sql, p.seq, p.to, p.receiver, DeliveryState::Failed, None)?;
    }
    let mut rows = rows;
    for (seq, Lease { attempts, next_attempt_at }) in round.send {
        let Some(d) = rows.iter().position(|d| d.seq == seq).map(|i| rows.swap_remove(i)) else { continue };
        let Some(kind) = Receiver::parse(&d.kind) else { continue };
        sql.exec(
            "UPDATE deliveries SET attempts = ?, last_attempt_at = ?, next_attempt_at = ? WHERE seq = ?",
            vec![(attempts as i64).into(), now.into(), next_attempt_at.into(), seq.into()],
        )?;
        let raw: &JsValue = storage.as_ref();
        let (sql, storage): (SqlStorage, worker_sys::DurableObjectStorage) = (sql.clone(), raw.clone().unchecked_into());
        let sender = sender.cloned();
        wasm_bindgen_futures::spawn_local(async move {
            let sent = match kind {
                Receiver::Webhook => super::webhooks::attempt(&d).await,
                Receiver::Push => match &sender {
                    Some(sender) => super::push::attempt(&d, sender).await,
                    None => Err(NotSent::Unreadable("push configuration")),
                },
            };
            if let Err(e) = &sent {
                console_log!("{} delivery {} to {} (attempt {attempts}): {e}", kind.as_str(), d.id, d.receiver);
            }
            if let Err(e) = record(&sql, &d, kind, attempts, sent.ok()).and_then(|_| arm(&storage)) {
                console_error!("a {} delivery's outcome: {e}", kind.as_str());
            }
        });
    }
    if let Some(at) = round.next_alarm {
        crate::alarm::set(storage, at, "the owner's next notification")?;
    }
    Ok(())
}

/// Stores what an attempt led to (`handoff_core::owner::receiver::Receiver::after_attempt`).
fn record(sql: &SqlStorage, d: &Due, kind: Receiver, attempts: u32, status: Option<u16>) -> Result<()> {
    match kind.after_attempt(d.created_at, attempts, status, now_ms()) {
        Next::Delivered => finish(sql, d.seq, &d.receiver, kind, DeliveryState::Delivered, status),
        Next::Failed => finish(sql, d.seq, &d.receiver, kind, DeliveryState::Failed, status),
        Next::Retry { at } => {
            let status: Option<i64> = status.map(i64::from);
            sql.exec("UPDATE deliveries SET last_status = ?, next_attempt_at = ? WHERE seq = ?", vec![status.into(), at.into(), d.seq.into()])?;
            Ok(())
        }
        Next::Gone => {
            for (statement, args) in super::push::forget(&d.receiver) {
                sql.exec(&statement, args)?;
            }
            Ok(())
        }
    }
}

/// A delivery finished: its state stored, then the receiver's finished deliveries trimmed to
/// the newest its kind keeps.
fn finish(sql: &SqlStorage, seq: i64, receiver: &str, kind: Receiver, state: DeliveryState, status: Option<u16>) -> Result<()> {
    let status: Option<i64> = status.map(i64::from);
    sql.exec(
        "UPDATE deliveries SET state = ?, last_status = ?, next_attempt_at = NULL WHERE seq = ?",
        vec![state.as_str().into(), status.into(), seq.into()],
    )?;
    sql.exec(
        "DELETE FROM deliveries WHERE state != 'pending' AND receiver = ?1
         AND seq NOT IN (SELECT seq FROM deliveries WHERE state != 'pending' AND receiver = ?1 ORDER BY seq DESC LIMIT ?2)",
        vec![receiver.into(), (kind.kept_finished() as i64).into()],
    )?;
    Ok(())
}
