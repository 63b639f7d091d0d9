//! Every SQL statement of the owner's index: its tables, the earlier layouts brought up to
//! them, and the core's typed reads (`owner::Read`) and writes (`owner::Write`) as statements.
//! It decides nothing: which rows, how many and in what order are the core's
//! (`handoff_core::owner`); this file only says how SQLite is asked.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::sqlite::{count, each, rows, Cells};
use handoff_api::notifications::message_body;
use handoff_core::owner::devices::{Device, StoredDevice};
use handoff_core::owner::receiver::{Delivery, Receiver};
use handoff_core::owner::{
    stored, Address, DeliveryFacts, Feed, HandoffFacts, HeldRow, PendingRef, Read, StoredReceiver, Tables, Waiting,
    Write,
};
use handoff_core::time::Timestamp;
use handoff_notify::webhook::MessageId;
use worker::*;

/// A statement and its arguments, to run in a transaction.
pub type Statement = (String, Vec<SqlStorageValue>);

/// The list: the columns it is ordered and filtered by, and the row itself.
const LIST: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS list (id TEXT PRIMARY KEY, updated_at INTEGER NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS list_newest ON list (updated_at DESC, id DESC)",
];

/// The receivers (`dropped` counts their deliveries dropped past the owner's cap) and the
/// deliveries to them (`seq` orders them, oldest lowest; `kind` says which table `receiver`
/// is in).
const RECEIVERS: [&str; 5] = [
    "CREATE TABLE IF NOT EXISTS webhooks (id TEXT PRIMARY KEY, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL, created_at INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS push_subscriptions (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, origin TEXT NOT NULL, p256dh TEXT NOT NULL, auth TEXT NOT NULL, events TEXT NOT NULL, console TEXT NOT NULL, created_at INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0, device TEXT)",
    "CREATE TABLE IF NOT EXISTS deliveries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, receiver TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, last_attempt_at INTEGER, next_attempt_at INTEGER, created_at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (state, next_attempt_at)",
    "CREATE INDEX IF NOT EXISTS deliveries_of ON deliveries (receiver, seq)",
];

/// The columns of an earlier build's `rows` table (one column per field), as a row's JSON, in
/// the order `Row` declares them; a column that build did not have yet reads as null.
const EARLIER_COLUMNS: [(&str, &str); 14] = [
    ("id", "id"),
    ("session", "session"),
    ("machine", "machine"),
    ("size", "size"),
    ("turn", "turn"),
    ("state", "state"),
    ("status", "status"),
    ("summary", "summary"),
    ("version", "version"),
    ("updated_at", "updated_at"),
    ("suggestion", "json(suggestion)"),
    ("runtime", "runtime"),
    ("package_version", "package_version"),
    ("package_hash", "package_hash"),
];

/// The signed-in devices (their credential's hash only) and the sign-ins of the last period.
const DEVICES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS devices (id TEXT PRIMARY KEY, name TEXT NOT NULL, secret_hash TEXT NOT NULL, created_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS device_sign_ins (at INTEGER NOT NULL)",
];

/// What a push subscription stored before devices lacks: the device it was made from (none).
const SUBSCRIPTION_DEVICE: &str = "ALTER TABLE push_subscriptions ADD COLUMN device TEXT";

/// The erased lives of hand-offs: a row of a life at or below `incarnation` is not taken.
const ERASED: &str =
    "CREATE TABLE IF NOT EXISTS erased (id TEXT PRIMARY KEY, incarnation INTEGER NOT NULL, at INTEGER NOT NULL)";

const STORE_ROW: &str = "INSERT OR REPLACE INTO list (id, updated_at, state, version, row) VALUES (?, ?, ?, ?, ?)";
const OWE: &str = "INSERT OR IGNORE INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)";

fn internal(e: impl std::fmt::Display) -> Error {
    Error::RustError(e.to_string())
}

/// The table a receiver of `kind` is stored in.
fn table(kind: Receiver) -> &'static str {
    match kind {
        Receiver::Webhook => "webhooks",
        Receiver::Push => "push_subscriptions",
    }
}

/// Runs `statements` in one `transactionSync`: all of them, or none.
pub fn commit(storage: &Storage, statements: Vec<Statement>) -> Result<()> {
    let sql = storage.sql();
    crate::sqlite::transaction_sync(storage, move || {
        for (statement, args) in statements {
            crate::sqlite::exec(&sql, &statement, args)?;
        }
        Ok(())
    })
}

fn unbound(statements: impl IntoIterator<Item = String>) -> Vec<Statement> {
    statements.into_iter().map(|s| (s, Vec::new())).collect()
}

// ---- Tables, and an earlier build's brought up to this one's ----

/// Which tables exist, after an earlier build's `rows`, or its two deliveries tables, are
/// moved into this build's in one transaction each (the only statements not additive).
pub fn tables(storage: &Storage) -> Result<Tables> {
    let sql = storage.sql();
    let found = names(&sql, "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('list', 'rows', 'webhooks', 'push_subscriptions', 'deliveries', 'erased', 'devices')")?;
    let has = |t: &str| found.iter().any(|n| n == t);
    let mut tables =
        Tables { list: has("list"), receivers: has("deliveries"), erased: has("erased"), devices: has("devices") };
    if !tables.list && has("rows") {
        let mut statements = unbound(LIST.iter().map(|s| s.to_string()));
        statements.push((move_earlier_rows(&sql)?, Vec::new()));
        commit(storage, statements)?;
        tables.list = true;
    }
    if !tables.receivers && has("webhooks") {
        commit(storage, earlier_deliveries(has("push_subscriptions")))?;
        tables.receivers = true;
    }
    if tables.receivers {
        let columns = names(&sql, "SELECT name FROM pragma_table_info('push_subscriptions')")?;
        if !columns.iter().any(|c| c == "device") {
            commit(storage, unbound([SUBSCRIPTION_DEVICE.to_string()]))?;
        }
    }
    Ok(tables)
}

/// The first column of each row of `query`, text (a table's or a column's name).
fn names(sql: &SqlStorage, query: &str) -> Result<Vec<String>> {
    crate::sqlite::texts(rows(sql, query, None)?)
}

/// The statement that copies an earlier build's `rows` into `list`.
fn move_earlier_rows(sql: &SqlStorage) -> Result<String> {
    let columns = names(sql, "SELECT name FROM pragma_table_info('rows')")?;
    let has = |c: &str| columns.iter().any(|n| n == c);
    let fields: Vec<String> = EARLIER_COLUMNS
        .iter()
        .map(|(field, expr)| if has(field) { format!("'{field}', {expr}") } else { format!("'{field}', NULL") })
        .collect();
    Ok(format!("INSERT OR IGNORE INTO list (id, updated_at, state, version, row) SELECT id, updated_at, state, version, json_object({}) FROM rows", fields.join(", ")))
}

/// An earlier build's deliveries (a table per kind, push's maybe not yet, and subscriptions
/// that counted no drops) moved into the one table in their order; a push message had no id:
/// it gets one of its own.
fn earlier_deliveries(push: bool) -> Vec<Statement> {
    let mut statements: Vec<String> = RECEIVERS.iter().map(|s| s.to_string()).collect();
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
    unbound(statements)
}

// ---- Reads ----

/// A receiver as stored: `webhooks` (id, url, secret, events, created_at, dropped) or
/// `push_subscriptions` (id, endpoint, origin, p256dh, auth, events, console, created_at,
/// dropped, device), with the names of its events this build does not know (`stored::events`).
fn receiver(mut r: Cells, kind: Receiver) -> Result<(StoredReceiver, Vec<stored::Unknown>)> {
    let (address, events, at) = match kind {
        Receiver::Webhook => (Address::Webhook { url: r.text(1)?, secret: r.text(2)? }, r.text(3)?, 4),
        Receiver::Push => {
            let address = Address::Push {
                endpoint: r.text(1)?,
                origin: r.text(2)?,
                p256dh: r.text(3)?,
                auth: r.text(4)?,
                console: r.text(6)?,
                device: r.opt_text(9)?,
            };
            (address, r.text(5)?, 7)
        }
    };
    let (events, unknown) = stored::events(&events);
    let entry = StoredReceiver {
        id: r.text(0)?,
        events,
        created_at: r.int(at)?,
        dropped: r.int(at + 1)?.max(0) as u64,
        address,
    };
    Ok((entry, unknown))
}

/// A pending delivery as the alarm reads it: what the core decides from, its body, and its
/// receiver's address (the columns of its kind's table), which the sender needs.
pub struct Due {
    pub seq: i64,
    pub id: String,
    pub kind: String,
    attempts: i64,
    next_attempt_at: Option<i64>,
    pub receiver: String,
    pub message_type: String,
    pub handoff: String,
    pub body: String,
    pub created_at: i64,
    pub url: Option<String>,
    pub secret: Option<String>,
    pub endpoint: Option<String>,
    pub p256dh: Option<String>,
    pub auth: Option<String>,
}

impl Due {
    /// A row of [`Read::Pending`]'s statement.
    fn of(mut r: Cells) -> Result<Due> {
        Ok(Due {
            seq: r.int(0)?,
            id: r.text(1)?,
            kind: r.text(2)?,
            receiver: r.text(3)?,
            message_type: r.text(4)?,
            handoff: r.text(5)?,
            body: r.text(6)?,
            attempts: r.int(7)?,
            created_at: r.int(8)?,
            next_attempt_at: r.opt_int(9)?,
            url: r.opt_text(10)?,
            secret: r.opt_text(11)?,
            endpoint: r.opt_text(12)?,
            p256dh: r.opt_text(13)?,
            auth: r.opt_text(14)?,
        })
    }

    fn waiting(&self) -> Waiting {
        Waiting {
            seq: self.seq,
            receiver: stored::kind(&self.kind),
            to: self.receiver.clone(),
            handoff: self.handoff.clone(),
            created_at: self.created_at,
            attempts: self.attempts.clamp(0, u32::MAX as i64) as u32,
            next_attempt_at: self.next_attempt_at,
        }
    }
}

/// Answers `read` into `feed` (and, for the alarm's read, keeps each pending delivery's body
/// and address in `due`).
#[allow(clippy::too_many_lines, reason = "one arm per read the index asks for, each one statement")]
pub fn read(storage: &Storage, read: &Read, feed: &mut Feed, due: &mut Vec<Due>) -> Result<()> {
    let sql = storage.sql();
    match read {
        Read::Tables => feed.tables = Some(tables(storage)?),
        Read::Held { id } => {
            let held = rows(&sql, "SELECT version, row FROM list WHERE id = ?", vec![id.as_str().into()])?;
            feed.held = Some(match held.into_iter().next() {
                Some(mut h) => Some(HeldRow { version: h.int(0)?.max(0) as u64, text: h.text(1)? }),
                None => None,
            });
        }
        Read::Receivers { of } => {
            let mut entries = Vec::new();
            for &kind in of {
                let query = match kind {
                    Receiver::Webhook => "SELECT id, url, secret, events, created_at, dropped FROM webhooks ORDER BY created_at, id",
                    Receiver::Push => "SELECT id, endpoint, origin, p256dh, auth, events, console, created_at, dropped, device FROM push_subscriptions ORDER BY created_at, id",
                };
                for row in rows(&sql, query, None)? {
                    let (entry, unknown) = receiver(row, kind)?;
                    feed.unknown_events.extend(unknown.into_iter().map(|u| (entry.id.clone(), u)));
                    entries.push(entry);
                }
            }
            feed.receivers = Some(entries);
        }
        Read::PendingCount => {
            feed.pending_count =
                Some(count(&sql, "SELECT COUNT(*) AS n FROM deliveries WHERE state = 'pending'", vec![])?.max(0)
                    as usize)
        }
        Read::OldestPending { limit } => {
            let oldest = rows(
                &sql,
                "SELECT seq, kind, receiver FROM deliveries WHERE state = 'pending' ORDER BY seq LIMIT ?",
                vec![(*limit as i64).into()],
            )?;
            feed.oldest = Some(each(oldest, |mut p| {
                Ok(PendingRef { seq: p.int(0)?, receiver: stored::kind(&p.text(1)?), to: p.text(2)? })
            })?);
        }
        Read::OpenCount { except } => {
            let open = count(
                &sql,
                "SELECT count(*) AS n FROM list WHERE state = 'open' AND id != ?",
                vec![except.as_str().into()],
            )?;
            feed.open = Some(open.max(0) as u64);
        }
        Read::Rows { state, after, limit } => {
            let (at, id) = after.as_ref().map_or((i64::MAX, ""), |c| (c.updated_at, c.id.as_str()));
            let stored = rows(
                &sql,
                "SELECT row FROM list
                 WHERE (?1 IS NULL OR state = ?1) AND (updated_at < ?2 OR (updated_at = ?2 AND (?3 = '' OR id < ?3)))
                 ORDER BY updated_at DESC, id DESC LIMIT ?4",
                vec![state.map(|s| s.as_str()).into(), at.into(), id.into(), (*limit as i64).into()],
            )?;
            feed.rows = Some(crate::sqlite::texts(stored)?);
        }
        Read::Deliveries { id, limit } => {
            let stored = rows(
                &sql,
                "SELECT id, type, handoff, version, state, attempts, last_status, last_attempt_at, next_attempt_at FROM deliveries WHERE kind = 'webhook' AND receiver = ? ORDER BY seq DESC LIMIT ?",
                vec![id.as_str().into(), (*limit as i64).into()],
            )?;
            let mut deliveries = Vec::with_capacity(stored.len());
            for mut r in stored {
                let (id, kind, handoff, state) = (r.text(0)?, r.text(1)?, r.text(2)?, r.text(4)?);
                let (version, attempts) = (r.int(3)?, r.int(5)?);
                let (last_status, last_attempt_at, next_attempt_at) = (r.opt_int(6)?, r.opt_int(7)?, r.opt_int(8)?);
                deliveries.push(stored::state(&state).map(|state| Delivery {
                    id,
                    kind,
                    handoff,
                    version: version.max(0) as u64,
                    state,
                    attempts: attempts.clamp(0, u32::MAX as i64) as u32,
                    last_status: last_status.and_then(|s| u16::try_from(s).ok()),
                    last_attempt_at: last_attempt_at.map(Timestamp::from_ms),
                    next_attempt_at: next_attempt_at.map(Timestamp::from_ms),
                }));
            }
            feed.deliveries = Some(deliveries.into_iter().collect());
        }
        Read::Pending { limit } => {
            let pending = rows(
                &sql,
                "SELECT d.seq, d.id, d.kind, d.receiver, d.type, d.handoff, d.body, d.attempts, d.created_at, d.next_attempt_at,
                            w.url, w.secret, s.endpoint, s.p256dh, s.auth
                     FROM deliveries d
                     LEFT JOIN webhooks w ON d.kind = 'webhook' AND w.id = d.receiver
                     LEFT JOIN push_subscriptions s ON d.kind = 'push' AND s.id = d.receiver
                     WHERE d.state = 'pending' ORDER BY d.seq LIMIT ?",
                vec![(*limit as i64).into()],
            )?;
            let pending = each(pending, Due::of)?;
            feed.pending = Some(pending.iter().map(Due::waiting).collect());
            *due = pending;
        }
        Read::Finished { to, limit } => {
            let stored = rows(
                &sql,
                "SELECT seq FROM deliveries WHERE receiver = ? AND state != 'pending' ORDER BY seq DESC LIMIT ?",
                vec![to.as_str().into(), (*limit as i64).into()],
            )?;
            feed.finished.push((to.clone(), each(stored, |s| s.int(0))?));
        }
        Read::StorageBytes => feed.storage_bytes = Some(sql.database_size() as u64),
        Read::Erased { id } => {
            feed.erased = Some(erased(&sql, id)?);
        }
        Read::StorageOf { id } => feed.storage_of = Some(storage_of(&sql, id)?),
        Read::Devices => {
            let stored = rows(
                &sql,
                "SELECT id, name, secret_hash, created_at, last_seen_at FROM devices ORDER BY created_at, id",
                None,
            )?;
            feed.devices = Some(each(stored, |mut r| {
                let device =
                    Device { id: r.text(0)?, name: r.text(1)?, created_at: r.int(3)?, last_seen_at: r.int(4)? };
                Ok(StoredDevice { device, secret_hash: r.text(2)? })
            })?);
        }
        Read::SignIns { since } => {
            let n = count(&sql, "SELECT COUNT(*) AS n FROM device_sign_ins WHERE at >= ?", vec![(*since).into()])?;
            feed.sign_ins = Some(n.max(0) as usize);
        }
    }
    Ok(())
}

/// The life of hand-off `id` erased last, if any.
fn erased(sql: &SqlStorage, id: &str) -> Result<Option<u64>> {
    match rows(sql, "SELECT incarnation FROM erased WHERE id = ?", vec![id.into()])?.first() {
        Some(life) => Ok(Some(life.int(0)?.max(0) as u64)),
        None => Ok(None),
    }
}

/// The test hook's facts of hand-off `id`, read-only: its row, its deliveries, its erased life.
fn storage_of(sql: &SqlStorage, id: &str) -> Result<HandoffFacts> {
    let found =
        names(sql, "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('list', 'deliveries', 'erased')")?;
    let has = |t: &str| found.iter().any(|n| n == t);
    let mut facts = HandoffFacts::default();
    if has("list") {
        facts.rows = count(sql, "SELECT COUNT(*) AS n FROM list WHERE id = ?", vec![id.into()])?.max(0) as u64;
    }
    if has("deliveries") {
        let stored = rows(
            sql,
            "SELECT state, length(body) AS body_bytes FROM deliveries WHERE handoff = ? ORDER BY seq",
            vec![id.into()],
        )?;
        facts.deliveries =
            each(stored, |mut d| Ok(DeliveryFacts { state: d.text(0)?, body_bytes: d.int(1)?.max(0) as u64 }))?;
    }
    if has("erased") {
        facts.erased = erased(sql, id)?;
    }
    Ok(facts)
}

// ---- Writes ----

fn row_bindings(id: &str, updated_at: i64, state: &str, version: i64, json: String) -> Vec<SqlStorageValue> {
    vec![id.into(), updated_at.into(), state.into(), version.into(), json.into()]
}

/// The statements of `writes`, in order.
#[allow(clippy::too_many_lines, reason = "one arm per write of the index, each one statement")]
pub fn statements(writes: &[Write]) -> Result<Vec<Statement>> {
    let mut out: Vec<Statement> = Vec::with_capacity(writes.len());
    for w in writes {
        match w {
            Write::ListSchema => out.extend(unbound(LIST.iter().map(|s| s.to_string()))),
            Write::ReceiverSchema => out.extend(unbound(RECEIVERS.iter().map(|s| s.to_string()))),
            Write::StoreRow(row) => {
                let json = serde_json::to_string(row).map_err(internal)?;
                out.push((STORE_ROW.into(), row_bindings(&row.id, row.updated_at.ms(), row.state.as_str(), row.version as i64, json)));
            }
            Write::StoreUnreadable { id } => out.push((STORE_ROW.into(), row_bindings(id, i64::MAX, "open", i64::MAX, "{\"not\": \"a row\"".into()))),
            Write::DeleteRow { id } => out.push(("DELETE FROM list WHERE id = ?".into(), vec![id.as_str().into()])),
            Write::DropClosedBefore { before } => out.push(("DELETE FROM list WHERE state = 'closed' AND updated_at < ?".into(), vec![(*before).into()])),
            Write::DropDeliveriesOf { handoff } => out.push(("DELETE FROM deliveries WHERE handoff = ?".into(), vec![handoff.as_str().into()])),
            Write::ErasedSchema => out.push((ERASED.into(), Vec::new())),
            Write::Erased { id, incarnation, at } => out.push((
                "INSERT INTO erased (id, incarnation, at) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET incarnation = max(incarnation, ?2), at = ?3".into(),
                vec![id.as_str().into(), (*incarnation as i64).into(), (*at).into()],
            )),
            Write::TrimErased { before, keep } => out.push((
                "DELETE FROM erased WHERE at < ?1 OR id NOT IN (SELECT id FROM erased ORDER BY at DESC, id DESC LIMIT ?2)".into(),
                vec![(*before).into(), (*keep as i64).into()],
            )),
            Write::AddReceiver(entry) => out.push(add_receiver(entry)),
            Write::RemoveReceiver { receiver, id } => {
                out.push(("DELETE FROM deliveries WHERE kind = ? AND receiver = ?".into(), vec![receiver.as_str().into(), id.as_str().into()]));
                out.push((format!("DELETE FROM {} WHERE id = ?", table(*receiver)), vec![id.as_str().into()]));
            }
            Write::Owe { receiver, to, row, notice, key, at, console } => {
                let args = vec![
                    MessageId::from_random(*key).as_str().into(),
                    receiver.as_str().into(),
                    to.as_str().into(),
                    notice.message_type().into(),
                    row.id.as_str().into(),
                    (row.version as i64).into(),
                    message_body(*receiver, *notice, row, *at, console).into(),
                    (*at).into(),
                    (*at).into(),
                ];
                out.push((OWE.into(), args));
            }
            Write::DropPending { seqs } => {
                let seqs = serde_json::to_string(seqs).map_err(internal)?;
                out.push(("DELETE FROM deliveries WHERE seq IN (SELECT value FROM json_each(?))".into(), vec![seqs.into()]));
            }
            Write::CountDropped { receiver, id, n } => {
                out.push((format!("UPDATE {} SET dropped = dropped + ? WHERE id = ?", table(*receiver)), vec![(*n as i64).into(), id.as_str().into()]));
            }
            Write::Lease { seq, lease, at } => out.push((
                "UPDATE deliveries SET attempts = ?, last_attempt_at = ?, next_attempt_at = ? WHERE seq = ?".into(),
                vec![(lease.attempts as i64).into(), (*at).into(), lease.next_attempt_at.into(), (*seq).into()],
            )),
            Write::Retry { seq, status, at } => out.push((
                "UPDATE deliveries SET last_status = ?, next_attempt_at = ? WHERE seq = ?".into(),
                vec![status.map(i64::from).into(), (*at).into(), (*seq).into()],
            )),
            Write::Finish { seq, state, status } => out.push((
                "UPDATE deliveries SET state = ?, last_status = ?, next_attempt_at = NULL, body = '' WHERE seq = ?".into(),
                vec![state.as_str().into(), status.map(i64::from).into(), (*seq).into()],
            )),
            Write::TrimFinished { to, through } => out.push((
                "DELETE FROM deliveries WHERE receiver = ? AND state != 'pending' AND seq <= ?".into(),
                vec![to.as_str().into(), (*through).into()],
            )),
            Write::DeviceSchema => out.extend(unbound(DEVICES.iter().map(|s| s.to_string()))),
            Write::AddDevice(d) => out.push((
                "INSERT INTO devices (id, name, secret_hash, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?)".into(),
                vec![d.device.id.as_str().into(), d.device.name.as_str().into(), d.secret_hash.as_str().into(), d.device.created_at.into(), d.device.last_seen_at.into()],
            )),
            Write::SignedIn { at } => out.push(("INSERT INTO device_sign_ins (at) VALUES (?)".into(), vec![(*at).into()])),
            Write::TrimSignIns { before } => out.push(("DELETE FROM device_sign_ins WHERE at < ?".into(), vec![(*before).into()])),
            Write::SeenDevice { id, at } => out.push(("UPDATE devices SET last_seen_at = ? WHERE id = ?".into(), vec![(*at).into(), id.as_str().into()])),
            Write::RenameDevice { id, name } => out.push(("UPDATE devices SET name = ? WHERE id = ?".into(), vec![name.as_str().into(), id.as_str().into()])),
            Write::RemoveDevice { id, subscriptions } => {
                if *subscriptions {
                    out.push((
                        "DELETE FROM deliveries WHERE kind = 'push' AND receiver IN (SELECT id FROM push_subscriptions WHERE device = ?)".into(),
                        vec![id.as_str().into()],
                    ));
                    out.push(("DELETE FROM push_subscriptions WHERE device = ?".into(), vec![id.as_str().into()]));
                }
                out.push(("DELETE FROM devices WHERE id = ?".into(), vec![id.as_str().into()]));
            }
        }
    }
    Ok(out)
}

fn add_receiver(entry: &StoredReceiver) -> Statement {
    let events = stored::events_text(&entry.events);
    match &entry.address {
        Address::Webhook { url, secret } => (
            "INSERT INTO webhooks (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)".into(),
            vec![entry.id.as_str().into(), url.as_str().into(), events.into(), secret.as_str().into(), entry.created_at.into()],
        ),
        Address::Push { endpoint, origin, p256dh, auth, console, device } => (
            "INSERT INTO push_subscriptions (id, endpoint, origin, p256dh, auth, events, console, created_at, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)".into(),
            vec![
                entry.id.as_str().into(),
                endpoint.as_str().into(),
                origin.as_str().into(),
                p256dh.as_str().into(),
                auth.as_str().into(),
                events.into(),
                console.as_str().into(),
                entry.created_at.into(),
                device.as_deref().into(),
            ],
        ),
    }
}
