//! `HandoffObject`: the Durable Object that holds one hand-off. It loads the hand-off, applies
//! the pure core (`handoff_core::handoff::apply`), stores what moved, answers and wakes waiters; it
//! has no rules of its own. Every change is one [`Batch`] of SQL statements run in one
//! `transactionSync`: all of it is written, or none of it. SQL lives here and nowhere else for
//! this object's tables.
//!
//! Nothing is created for a hand-off that does not exist: the schema is written by the create's
//! own transaction, and a read of an object without it answers `handoff.not_found`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::{self, owner_index_name, store_failed, OWNER_INDEX};
use crate::sqlite;
use futures::future::{select, Either};
use handoff_api::error::{ApiError, Code};
use handoff_api::idempotency as api_idempotency;
use handoff_api::protocol::{self, Ask, Caller, Fault, Idempotency, IndexAsk, Op};
use handoff_api::view;
use handoff_core::briefing::{self, Reach};
use handoff_core::handoff::{self, Change, Dirty, Effect, Extras, Handoff};
use handoff_core::idempotency::{self, Decision, Remembered};
use handoff_core::index::IndexRow;
use handoff_core::outbox::{self, Outbox, Owed};
use handoff_core::limits::{
    EVENTS_PER_HANDOFF_MAX, IDEMPOTENCY_TTL_MS, LINEAGE_TAIL_MAX, MACHINE_WAITERS_PER_HANDOFF_MAX, OWNER_WAITERS_PER_HANDOFF_MAX, STORED_VALUE_BYTES_MAX,
    TURNS_KEPT_PER_HANDOFF_MAX, WAIT_JITTER_MS_MAX, WORK_RECORD_BYTES_MAX,
};
use handoff_core::package::{Ledger, TurnEntry};
use handoff_core::role::Role;
use handoff_core::turn::{self, Record};
use handoff_core::waiters::{Published, Waiters};
use handoff_core::work::Work;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::*;

#[durable_object]
pub struct HandoffObject {
    state: State,
    env: Env,
    /// The stored hand-off, read once per object lifetime: `Some(None)` once known absent.
    cached: RefCell<Option<Option<Rc<Handoff>>>>,
    /// The newest version whose commit is confirmed: what waiters are woken with and what a
    /// waiter's timeout answers, rendered once per version.
    published: Rc<RefCell<Published>>,
    /// What the owner's index is owed and when to send it: the core's outbox machine, which
    /// this object only carries out (the send, the alarm).
    outbox: RefCell<Outbox<Delivery>>,
    /// Changes waiting for the delivery on its way.
    delivery_waiters: RefCell<Vec<futures::channel::oneshot::Sender<()>>>,
    waiters: Rc<RefCell<Waiters>>,
    /// Test hook: the failure armed for the next change.
    fault: Cell<Option<Fault>>,
    /// Test hook: the last commit was lost, which the next `storage.sync()` reports.
    commit_lost: Cell<bool>,
}

/// The schema this build writes, version [`SCHEMA_VERSION`]. Written by a create's own
/// transaction, never by a read.
const SCHEMA: [&str; 8] = [
    "CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS parts (name TEXT PRIMARY KEY, json TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS turns (turn INTEGER PRIMARY KEY, entry TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS outbox (k INTEGER PRIMARY KEY CHECK (k = 0), owner TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL, attempts INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, slim INTEGER NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS idempotency_at ON idempotency (at)",
    "CREATE TABLE IF NOT EXISTS meta (k INTEGER PRIMARY KEY CHECK (k = 0), schema INTEGER NOT NULL)",
];
const SCHEMA_VERSION: i64 = 2;
/// From schema 1 (no `meta` table; idempotency rows without sizes) to 2. Additive.
const MIGRATE_1_TO_2: [&str; 3] = [
    "ALTER TABLE idempotency ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN slim INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN digest TEXT NOT NULL DEFAULT ''",
];
const SET_SCHEMA_VERSION: &str = "INSERT OR REPLACE INTO meta (k, schema) VALUES (0, ?)";
/// Idempotency rows looked at per pass when the caps are full (normally one is forgotten).
const EVICTION_PAGE: i64 = 64;

#[derive(serde::Deserialize)]
struct RecordRow {
    record: String,
}

#[derive(serde::Deserialize)]
struct PartRow {
    name: String,
    json: String,
}

#[derive(serde::Deserialize)]
struct TurnRow {
    entry: String,
}

#[derive(serde::Deserialize)]
struct SchemaRow {
    schema: i64,
}

#[derive(serde::Deserialize)]
struct OutboxRow {
    owner: String,
    version: i64,
    row: String,
    attempts: i64,
}

/// What one delivery carries: the owner whose index it goes to, and the row's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Delivery {
    owner: String,
    row: String,
}

#[derive(serde::Deserialize)]
struct IdempotencyRow {
    fingerprint: String,
    status: i64,
    body: String,
    slim: i64,
    digest: String,
}

#[derive(serde::Deserialize)]
struct Totals {
    n: i64,
    bytes: i64,
}

#[derive(serde::Deserialize)]
struct KeySize {
    key: String,
    bytes: i64,
}

/// The three reads of a hand-off, each named, so that a new `Op` cannot fall into one.
enum Read {
    Record,
    Package { markdown: bool },
    Briefing { budget_bytes: usize, reach_api: bool, base_url: String },
}

/// An answer before it becomes a `Response`.
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn ok(body: Value) -> Answer {
        Answer { status: 200, body }
    }

    fn refused(error: impl Into<ApiError>, handoff: Option<&Handoff>) -> Answer {
        let error: ApiError = error.into();
        let mut body = error.body();
        if let Some(h) = handoff {
            body["handoff"] = serde_json::to_value(view::Handoff::from(&h.record)).unwrap_or_default();
            // A stale accept carries the hash that is current, so the destination can re-read.
            if let (Code::PackageStale, Some(current)) = (error.code, &h.ledger.current) {
                body["package_hash"] = json!(current.hash);
                body["package_version"] = json!(current.version);
            }
        }
        Answer { status: error.status(), body }
    }

    fn into_response(self) -> Result<Response> {
        Ok(Response::from_json(&self.body)?.with_status(self.status))
    }
}

/// One change to store: the next hand-off, what of it moved, and what the request adds.
struct Stored<'a> {
    h: Handoff,
    dirty: Dirty,
    /// The work record already serialised (for its size check), when it moved.
    work_json: Option<String>,
    /// The history event's kind.
    kind: &'a str,
    caller: &'a Caller,
    /// The request's key and the answer it remembers.
    remember: Option<(&'a str, &'a Remembered)>,
    /// The first write of this hand-off: the schema comes in the same transaction.
    create: bool,
}

/// The statements of one change, run in order in one transaction: all of them or none.
#[derive(Default)]
struct Batch {
    statements: Vec<(&'static str, Vec<SqlStorageValue>)>,
}

impl Batch {
    fn push(&mut self, sql: &'static str, args: Vec<SqlStorageValue>) {
        self.statements.push((sql, args));
    }
}

fn storage_error(e: impl std::fmt::Display) -> Error {
    Error::RustError(format!("stored hand-off unreadable: {e}"))
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(storage_error)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(storage_error)
}

impl DurableObject for HandoffObject {
    fn new(state: State, env: Env) -> Self {
        HandoffObject {
            state,
            env,
            cached: RefCell::new(None),
            published: Rc::new(RefCell::new(Published::default())),
            outbox: RefCell::new(Outbox::default()),
            delivery_waiters: RefCell::new(Vec::new()),
            waiters: Rc::new(RefCell::new(Waiters::default())),
            fault: Cell::new(None),
            commit_lost: Cell::new(false),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        // Parsed by serde_json from the text, not by the runtime's JSON.parse, which would turn
        // integers past 2^53 into floats.
        // An ask this build cannot read is a deploy that mixes versions, which a retry
        // outlives: 503, not the client's 400.
        let ask: Ask = match req.text().await.map(|t| protocol::decode(&t)) {
            Ok(Ok(ask)) => ask,
            Ok(Err(e)) => return store_failed("unreadable internal ask", &e),
            Err(e) => return store_failed("unreadable internal ask", &e),
        };
        match self.handle(ask).await {
            Ok(response) => Ok(response),
            Err(e) => {
                // What failed was storage (or the runtime under it): forget what this object
                // holds in memory, so the next request reads what was really committed.
                self.forget();
                store_failed("hand-off object", &e)
            }
        }
    }

    /// Retries what the owner's index is still owed: after a failed delivery, or after a
    /// Worker that died between a change and its delivery (the safety alarm).
    async fn alarm(&self) -> Result<Response> {
        if !self.has_schema()? {
            self.outbox.borrow_mut().on_alarm();
            return Response::ok("nothing stored");
        }
        let sql = self.state.storage().sql();
        let stored: Vec<OutboxRow> = sql.exec("SELECT owner, version, row, attempts FROM outbox WHERE k = 0", None)?.to_array()?;
        if let Some(o) = stored.into_iter().next() {
            let owed = Owed { version: o.version as u64, row: Delivery { owner: o.owner, row: o.row }, attempts: o.attempts as u32 };
            self.outbox.borrow_mut().restore(owed);
        }
        let mut next = self.outbox.borrow_mut().on_alarm();
        while let Some(send) = next {
            self.send(send).await?;
            next = self.outbox.borrow_mut().poll_send();
        }
        Response::ok("delivered or rescheduled")
    }
}

impl HandoffObject {
    async fn handle(&self, ask: Ask) -> Result<Response> {
        match ask.op {
            Op::Create { id, session, machine, size } => self.create(&ask.caller, id, session, machine, size).await,
            Op::Change { change } => self.change(&ask.caller, &change, ask.idempotency.as_ref()).await,
            Op::Wait { after, timeout_s } => self.wait(&ask.caller, after, timeout_s),
            Op::Floor => Response::from_json(&json!({"ok": true})),
            Op::Turns { before, limit } => self.turns(&ask.caller, before, limit),
            Op::TestFault { fault } => self.arm(&ask.caller, fault),
            Op::TestStorage => self.storage_report(&ask.caller),
            Op::Get => self.read(&ask.caller, Read::Record),
            Op::Package { markdown } => self.read(&ask.caller, Read::Package { markdown }),
            Op::Briefing { budget_bytes, reach_api, base_url } => {
                self.read(&ask.caller, Read::Briefing { budget_bytes, reach_api, base_url })
            }
        }
    }

    /// Drops what memory holds of the stored hand-off; the next request loads it again.
    fn forget(&self) {
        *self.cached.borrow_mut() = None;
        self.outbox.borrow_mut().forget();
    }

    /// Whether this object's storage holds a hand-off's tables. Reads only the catalogue, so
    /// a request for an unknown id writes nothing.
    fn has_schema(&self) -> Result<bool> {
        let sql = self.state.storage().sql();
        sqlite::table_exists(&sql, "handoff")
    }

    /// Brings a schema written by an earlier build up to [`SCHEMA_VERSION`], in one transaction.
    fn migrate(&self) -> Result<()> {
        let sql = self.state.storage().sql();
        let version = if !sqlite::table_exists(&sql, "meta")? {
            1
        } else {
            sql.exec("SELECT schema FROM meta WHERE k = 0", None)?.to_array::<SchemaRow>()?.first().map_or(1, |r| r.schema)
        };
        if version >= SCHEMA_VERSION {
            return Ok(());
        }
        let mut batch = Batch::default();
        for statement in SCHEMA {
            batch.push(statement, vec![]);
        }
        for statement in MIGRATE_1_TO_2 {
            batch.push(statement, vec![]);
        }
        batch.push(SET_SCHEMA_VERSION, vec![SCHEMA_VERSION.into()]);
        self.commit(batch, None)
    }

    fn load(&self) -> Result<Option<Rc<Handoff>>> {
        if let Some(cached) = self.cached.borrow().as_ref() {
            return Ok(cached.clone());
        }
        if !self.has_schema()? {
            // Not cached: a create may come next, and it is the create that writes.
            return Ok(None);
        }
        self.migrate()?;
        let sql = self.state.storage().sql();
        let rows: Vec<RecordRow> = sql.exec("SELECT record FROM handoff WHERE k = 0", None)?.to_array()?;
        let handoff = match rows.first() {
            None => None,
            Some(row) => {
                let record: Record = from_json(&row.record)?;
                let mut h = Handoff::create(record);
                let parts: Vec<PartRow> = sql.exec("SELECT name, json FROM parts", None)?.to_array()?;
                for part in parts {
                    match part.name.as_str() {
                        "work" => h.work = from_json::<Work>(&part.json)?,
                        "ledger" => h.ledger = from_json::<Ledger>(&part.json)?,
                        "extras" => h.extras = from_json::<Extras>(&part.json)?,
                        _ => {}
                    }
                }
                // Only the newest entries: older turns are paged from storage by `GET …/turns`.
                let newest_first: Vec<TurnRow> =
                    sql.exec("SELECT entry FROM turns ORDER BY turn DESC LIMIT ?", vec![(LINEAGE_TAIL_MAX as i64).into()])?.to_array()?;
                if !newest_first.is_empty() {
                    h.lineage = newest_first.iter().rev().map(|t| from_json::<TurnEntry>(&t.entry)).collect::<Result<_>>()?;
                }
                let h = Rc::new(h);
                // What storage holds is durable: waiters may be told it.
                self.published.borrow_mut().confirm(h.clone());
                Some(h)
            }
        };
        *self.cached.borrow_mut() = Some(handoff.clone());
        Ok(handoff)
    }

    /// The hand-off, if it exists and the caller may see it; anything else is `handoff.not_found`.
    fn owned(&self, caller: &Caller) -> Result<std::result::Result<Rc<Handoff>, ApiError>> {
        Ok(match self.load()? {
            Some(h) if h.record.owner == caller.owner => Ok(h),
            _ => Err(ApiError::new(Code::HandoffNotFound, "no such hand-off")),
        })
    }

    /// Runs `batch` in one `transactionSync`: if any statement fails, the runtime rolls back
    /// every one before it and nothing of the change is stored. `fault` (test hooks only)
    /// makes one statement fail in the runtime's SQLite, or loses the whole commit: every
    /// statement runs, the transaction rolls back, and the loss shows at `storage.sync()`
    /// (see [`HandoffObject::publish`]), as when the runtime fails to commit.
    fn commit(&self, batch: Batch, fault: Option<Fault>) -> Result<()> {
        let storage = self.state.storage();
        let sql = storage.sql();
        let lost = fault == Some(Fault::Sync);
        let run = Closure::once(move || -> std::result::Result<JsValue, JsValue> {
            for (i, (statement, args)) in batch.statements.into_iter().enumerate() {
                if fault == Some(Fault::Statement { statement: i + 1 }) {
                    // A real failure of the runtime's SQLite, not a pretend one.
                    sql.exec("SELECT * FROM fault_injected_by_a_test", None).map_err(JsValue::from)?;
                }
                sql.exec(statement, args).map_err(JsValue::from)?;
            }
            if lost {
                return Err(JsValue::from_str("commit lost (test hook)"));
            }
            Ok(JsValue::UNDEFINED)
        });
        let raw: &JsValue = storage.as_raw().as_ref();
        let transaction_sync: js_sys::Function = js_sys::Reflect::get(raw, &JsValue::from_str("transactionSync"))
            .map_err(Error::from)?
            .dyn_into()
            .map_err(|_| Error::RustError("storage.transactionSync is missing".into()))?;
        let committed = transaction_sync.call1(raw, run.as_ref().unchecked_ref()).map(|_| ()).map_err(Error::from);
        if lost {
            // Rolled back; the caller learns it from the sync, as it would from the runtime.
            self.commit_lost.set(true);
            return Ok(());
        }
        committed
    }

    /// Every value over [`STORED_VALUE_BYTES_MAX`] is refused before the first write.
    fn check_sizes(values: &[&str]) -> std::result::Result<(), ApiError> {
        match values.iter().map(|v| v.len()).max() {
            Some(largest) if largest > STORED_VALUE_BYTES_MAX => Err(ApiError::new(
                Code::RequestTooLarge,
                format!("the change would store a value of {largest} bytes, over {STORED_VALUE_BYTES_MAX}"),
            )),
            _ => Ok(()),
        }
    }

    /// Writes what moved — the record, the parts marked dirty, the lineage entries, the history
    /// event, the row the owner's index is now owed (the outbox), the key's remembered answer —
    /// and trims what is bounded (events, lineage, remembered answers), all in one transaction.
    /// Every value is serialised and size-checked first, so a refusal writes nothing. Answers
    /// the stored hand-off, which the caller publishes once the commit is confirmed, and the
    /// outbox row, which it delivers.
    fn store(&self, change: Stored<'_>) -> Result<std::result::Result<Rc<Handoff>, ApiError>> {
        let Stored { h, dirty, work_json, kind, caller, remember, create } = change;
        let record = &h.record;
        let record_json = to_json(record)?;
        let parts = [
            ("work", work_json),
            ("ledger", dirty.ledger.then(|| to_json(&h.ledger)).transpose()?),
            ("extras", dirty.extras.then(|| to_json(&h.extras)).transpose()?),
        ];
        let lineage_from = dirty.lineage_from.unwrap_or(h.lineage.len()).min(h.lineage.len());
        let entries: Vec<(u64, String)> = h.lineage[lineage_from..].iter().map(|e| Ok((e.turn, to_json(e)?))).collect::<Result<_>>()?;
        let owed = Delivery { owner: record.owner.clone(), row: to_json(&IndexRow::of(record))? };
        let mut values: Vec<&str> = vec![&record_json, &owed.row];
        values.extend(parts.iter().filter_map(|(_, json)| json.as_deref()));
        values.extend(entries.iter().map(|(_, json)| json.as_str()));
        values.extend(remember.map(|(_, r)| r.body.as_str()));
        if let Err(refusal) = Self::check_sizes(&values) {
            return Ok(Err(refusal));
        }

        let mut batch = Batch::default();
        if create {
            for statement in SCHEMA {
                batch.push(statement, vec![]);
            }
            batch.push(SET_SCHEMA_VERSION, vec![SCHEMA_VERSION.into()]);
        }
        batch.push("INSERT OR REPLACE INTO handoff (k, record) VALUES (0, ?)", vec![record_json.into()]);
        for (name, json) in parts {
            if let Some(json) = json {
                batch.push("INSERT OR REPLACE INTO parts (name, json) VALUES (?, ?)", vec![name.into(), json.into()]);
            }
        }
        for (turn, entry) in entries {
            batch.push("INSERT OR REPLACE INTO turns (turn, entry) VALUES (?, ?)", vec![(turn as i64).into(), entry.into()]);
        }
        let kept_from_turn = record.turn as i64 - TURNS_KEPT_PER_HANDOFF_MAX as i64;
        if kept_from_turn > 0 {
            batch.push("DELETE FROM turns WHERE turn <= ?", vec![kept_from_turn.into()]);
        }
        let actor = caller.role.as_str();
        batch.push(
            "INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)",
            vec![(record.version as i64).into(), record.updated_at.into(), kind.into(), actor.into()],
        );
        let kept_from_version = record.version as i64 - EVENTS_PER_HANDOFF_MAX as i64;
        if kept_from_version > 0 {
            batch.push("DELETE FROM events WHERE version <= ?", vec![kept_from_version.into()]);
        }
        batch.push(
            "INSERT OR REPLACE INTO outbox (k, owner, version, row, attempts) VALUES (0, ?, ?, ?, 0)",
            vec![owed.owner.clone().into(), (record.version as i64).into(), owed.row.clone().into()],
        );
        if let Some((key, remembered)) = remember {
            self.remember_into(&mut batch, key, remembered)?;
        }
        self.commit(batch, self.fault.take())?;
        // The safety alarm, unless one is pending. Not awaited on purpose: an un-awaited storage
        // write joins this event's implicit transaction, after the change's own.
        if let Some(at) = self.outbox.borrow_mut().on_commit(record.version, owed, now_ms()) {
            let _ = self.state.storage().as_raw().set_alarm(js_sys::Date::new(&(at as f64).into()), js_sys::Object::new());
        }
        let h = Rc::new(h);
        *self.cached.borrow_mut() = Some(Some(h.clone()));
        Ok(Ok(h))
    }

    /// Adds a key's remembered answer to `batch`: expired keys swept, then the oldest forgotten
    /// until the caps of [`handoff_core::idempotency`] fit with the new one.
    fn remember_into(&self, batch: &mut Batch, key: &str, r: &Remembered) -> Result<()> {
        let now = now_ms();
        let oldest = now - IDEMPOTENCY_TTL_MS;
        batch.push("DELETE FROM idempotency WHERE at < ?", vec![oldest.into()]);
        batch.push(
            "INSERT OR REPLACE INTO idempotency (key, fingerprint, status, body, at, bytes, slim, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                key.into(),
                r.fingerprint.clone().into(),
                (r.status as i64).into(),
                r.body.clone().into(),
                now.into(),
                (r.bytes() as i64).into(),
                (r.slim as i64).into(),
                r.digest.clone().into(),
            ],
        );
        let sql = self.state.storage().sql();
        let totals: Vec<Totals> = sql
            .exec("SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS bytes FROM idempotency WHERE at >= ? AND key != ?", vec![oldest.into(), key.into()])?
            .to_array()?;
        let (mut count, mut bytes) = totals.first().map_or((0, 0), |t| (t.n as usize, t.bytes as usize));
        count += 1;
        bytes += r.bytes();
        let mut offset = 0;
        while idempotency::over_caps(count, bytes) {
            let oldest_rows: Vec<KeySize> = sql
                .exec(
                    "SELECT key, bytes FROM idempotency WHERE at >= ? AND key != ? ORDER BY at, key LIMIT ? OFFSET ?",
                    vec![oldest.into(), key.into(), EVICTION_PAGE.into(), offset.into()],
                )?
                .to_array()?;
            if oldest_rows.is_empty() {
                break;
            }
            let forget = idempotency::evictions(count, bytes, oldest_rows.iter().map(|r| r.bytes as usize));
            for row in oldest_rows.iter().take(forget.max(1)) {
                batch.push("DELETE FROM idempotency WHERE key = ?", vec![row.key.clone().into()]);
                count -= 1;
                bytes = bytes.saturating_sub(row.bytes as usize);
            }
            offset += EVICTION_PAGE;
        }
        Ok(())
    }

    /// Once the runtime confirms the commit that stored `h`, makes it the version waiters are
    /// told, and wakes those it answers. Waking earlier would hand waiters a body chunk on a
    /// response already under way, which the output gate may not hold back, so a failed commit
    /// could show them a version that never was.
    async fn publish(&self, h: Rc<Handoff>) -> Result<()> {
        self.confirm_commit().await?;
        let mut published = self.published.borrow_mut();
        published.confirm(h);
        if !self.waiters.borrow().is_empty() {
            if let (Some(h), Some(answer)) = (published.handoff().cloned(), published.answer(render_record)) {
                self.waiters.borrow_mut().wake(&h, &answer);
            }
        }
        Ok(())
    }

    /// Waits for the runtime to confirm that every write so far is durable (`storage.sync()`),
    /// which rejects when a commit failed; with test hooks, a lost commit rejects here too.
    async fn confirm_commit(&self) -> Result<()> {
        self.state.storage().sync().await?;
        if self.commit_lost.replace(false) {
            return Err(Error::RustError("storage.sync() rejected: the commit was lost (test hook)".into()));
        }
        Ok(())
    }

    /// Returns once the owner's index has `version` (or a later one), so that a list started
    /// after the answer shows the change. Changes that arrive while a delivery is on its way
    /// wait for it, then the outbox sends only the newest row: under concurrent changes, one
    /// index write carries many of them. After a failure the alarm retries and the change is
    /// answered.
    async fn deliver_through(&self, version: u64) -> Result<()> {
        loop {
            if self.outbox.borrow().is_delivered(version) {
                return Ok(());
            }
            let send = self.outbox.borrow_mut().poll_send();
            match send {
                Some(send) => self.send(send).await?,
                None if self.outbox.borrow().is_sending() => {
                    let (done, wait) = futures::channel::oneshot::channel();
                    self.delivery_waiters.borrow_mut().push(done);
                    let _ = wait.await;
                }
                None => return Ok(()),
            }
        }
    }

    /// Carries out one send the outbox asked for, tells it how it went, wakes the changes that
    /// waited for it, and after a failure stores the attempt count and sets the retry alarm.
    async fn send(&self, send: outbox::Send<Delivery>) -> Result<()> {
        let ok = self.send_row(&send.row).await;
        let retry = self.outbox.borrow_mut().on_sent(ok, now_ms());
        for done in self.delivery_waiters.borrow_mut().drain(..) {
            let _ = done.send(());
        }
        let Some(at) = retry else {
            return Ok(());
        };
        let attempts = self.outbox.borrow().owed().map_or(1, |o| o.attempts);
        let sql = self.state.storage().sql();
        sql.exec("UPDATE outbox SET attempts = ? WHERE k = 0 AND version = ?", vec![(attempts as i64).into(), (send.version as i64).into()])?;
        let wait_ms = (at - now_ms()).max(0) as u64;
        self.state.storage().set_alarm(Duration::from_millis(wait_ms)).await
    }

    async fn send_row(&self, owed: &Delivery) -> bool {
        let Ok(row) = serde_json::from_str::<IndexRow>(&owed.row) else {
            return false;
        };
        let Ok(payload) = protocol::encode(&IndexAsk::Put { row }) else {
            return false;
        };
        let Ok(stub) = self.env.durable_object(OWNER_INDEX).and_then(|ns| ns.get_by_name(&owner_index_name(&owed.owner))) else {
            return false;
        };
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(payload.into()));
        let Ok(request) = Request::new_with_init("https://owner-index/put", &init) else {
            return false;
        };
        matches!(stub.fetch_with_request(request).await, Ok(r) if r.status_code() == 200)
    }

    async fn create(&self, caller: &Caller, id: String, session: String, machine: String, size: String) -> Result<Response> {
        if let Some(existing) = self.load()? {
            let answer = match existing.record.check_create_again(&machine, &size) {
                Ok(()) => Answer::ok(view::record_answer(&existing.record)),
                Err(code) => Answer::refused(
                    ApiError::new(code, "this session already has a hand-off with another machine or size"),
                    Some(&existing),
                ),
            };
            return answer.into_response();
        }
        let h = Handoff::create(Record::create(id, caller.owner.clone(), session, machine, size, now_ms()));
        let dirty = Dirty { lineage_from: Some(0), ..Dirty::default() };
        let body = view::record_answer(&h.record);
        let stored = match self.store(Stored { h, dirty, work_json: None, kind: "create", caller, remember: None, create: true })? {
            Ok(stored) => stored,
            Err(refusal) => return Answer::refused(refusal, None).into_response(),
        };
        let version = stored.record.version;
        self.publish(stored).await?;
        self.deliver_through(version).await?;
        Answer { status: 201, body }.into_response()
    }

    async fn change(&self, caller: &Caller, change: &Change, idempotency: Option<&Idempotency>) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        if let Some(idem) = idempotency {
            if let Some(replay) = self.replay(idem, &h)? {
                return Ok(replay);
            }
        }
        let dry_run = matches!(change, Change::Compile { dry_run: true, .. });
        let out = match handoff::apply(&h, change, caller.role, now_ms()) {
            Err(e) => return Answer::refused(e, Some(&h)).into_response(),
            Ok(out) => out,
        };
        let answer = Answer::ok(view::answer(&out.next, &out.answer));
        let remembered = idempotency.and_then(|idem| api_idempotency::remember(&idem.fingerprint, answer.status, &answer.body, dry_run).map(|r| (idem.key.as_str(), r)));
        let remember = remembered.as_ref().map(|(key, r)| (*key, r));
        if !out.moved {
            if let Some((key, r)) = remember {
                if let Err(refusal) = Self::check_sizes(&[&r.body]) {
                    return Answer::refused(refusal, Some(&h)).into_response();
                }
                let mut batch = Batch::default();
                self.remember_into(&mut batch, key, r)?;
                self.commit(batch, self.fault.take())?;
                // The answer goes out once the key's row is durable, as every answer does.
                self.confirm_commit().await?;
            }
            return answer.into_response();
        }
        let work_json = out.dirty.work.then(|| to_json(&out.next.work)).transpose()?;
        if work_json.as_ref().is_some_and(|json| json.len() > WORK_RECORD_BYTES_MAX) {
            let e = ApiError::new(Code::RequestTooLarge, format!("the work record would pass {WORK_RECORD_BYTES_MAX} bytes"));
            return Answer::refused(e, Some(&h)).into_response();
        }
        let stored = match self.store(Stored { h: out.next, dirty: out.dirty, work_json, kind: change.kind(), caller, remember, create: false })? {
            Ok(stored) => stored,
            Err(refusal) => return Answer::refused(refusal, Some(&h)).into_response(),
        };
        let version = stored.record.version;
        self.publish(stored).await?;
        self.deliver_through(version).await?;
        answer.into_response()
    }

    /// The remembered answer to this key again, or 422 when the key came with another request.
    fn replay(&self, idem: &Idempotency, h: &Handoff) -> Result<Option<Response>> {
        let sql = self.state.storage().sql();
        let oldest = now_ms() - IDEMPOTENCY_TTL_MS;
        let rows: Vec<IdempotencyRow> = sql
            .exec(
                "SELECT fingerprint, status, body, slim, digest FROM idempotency WHERE key = ? AND at >= ?",
                vec![idem.key.clone().into(), oldest.into()],
            )?
            .to_array()?;
        let remembered = rows.into_iter().next().map(|row| Remembered {
            fingerprint: row.fingerprint,
            status: row.status as u16,
            body: row.body,
            slim: row.slim != 0,
            digest: row.digest,
        });
        match idempotency::decide(remembered.as_ref(), &idem.fingerprint) {
            Decision::Fresh => Ok(None),
            Decision::Mismatch => {
                let e = ApiError::new(Code::IdempotencyMismatch, "this Idempotency-Key was used for another request");
                Answer::refused(e, None).into_response().map(Some)
            }
            Decision::Replay(r) => {
                let current = h.ledger.current.as_ref().and_then(|offer| {
                    let package = serde_json::to_value(&offer.package).ok()?;
                    Some((offer.hash.as_str(), package))
                });
                let body = api_idempotency::replay(r, current);
                let mut response = text(&body, "application/json")?.with_status(r.status);
                response.headers_mut().set("Idempotent-Replayed", "true")?;
                Ok(Some(response))
            }
        }
    }

    /// Reads: the record, the package, the briefing.
    fn read(&self, caller: &Caller, read: Read) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        match read {
            Read::Record => Answer::ok(view::record_answer(&h.record)).into_response(),
            Read::Package { markdown } => match h.ledger.latest() {
                Err(e) => Answer::refused(e, Some(&h)).into_response(),
                Ok(latest) if markdown => text(&handoff_core::package::render_markdown(&latest), "text/markdown; charset=utf-8"),
                Ok(latest) => {
                    Answer::ok(view::answer(&h, &Effect::Package(latest))).into_response()
                }
            },
            Read::Briefing { budget_bytes, reach_api, base_url } => match h.ledger.latest() {
                Err(e) => Answer::refused(e, Some(&h)).into_response(),
                Ok(latest) => {
                    let reach = if reach_api { Reach::api(base_url) } else { Reach::None };
                    text(&briefing::render(&latest, budget_bytes, &reach).text, "text/plain; charset=utf-8")
                }
            },
        }
    }

    /// `GET …/turns`: up to `limit` turns before `before` (the newest when absent), oldest
    /// first, and the cursor of the page before it. Read from storage page by page, never whole.
    fn turns(&self, caller: &Caller, before: Option<u64>, limit: usize) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        // Turn numbers are far below 2^53, past which the runtime's SQL numbers lose precision.
        const TURN_BOUND: u64 = 1 << 53;
        let before = before.unwrap_or(TURN_BOUND).min(TURN_BOUND) as i64;
        let sql = self.state.storage().sql();
        let mut rows: Vec<TurnRow> = sql
            .exec("SELECT entry FROM turns WHERE turn < ? ORDER BY turn DESC LIMIT ?", vec![before.into(), (limit as i64 + 1).into()])?
            .to_array()?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let entries: Vec<TurnEntry> = rows.iter().rev().map(|t| from_json::<TurnEntry>(&t.entry)).collect::<Result<_>>()?;
        let next_before = if more { entries.first().map(|e| e.turn) } else { None };
        let page = view::Turns { turns: entries.iter().map(view::Turn::from).collect(), next_before, handoff: view::Handoff::from(&h.record) };
        Response::from_json(&page)
    }

    /// Test hook: arms `fault` for this hand-off's next change.
    fn arm(&self, caller: &Caller, fault: Fault) -> Result<Response> {
        if let Err(e) = self.owned(caller)? {
            return Answer::refused(e, None).into_response();
        }
        self.fault.set(Some(fault));
        Response::from_json(&json!({"armed": fault}))
    }

    /// Test hook: the bytes of this object's database and the rows of its bounded tables.
    fn storage_report(&self, caller: &Caller) -> Result<Response> {
        if let Err(e) = self.owned(caller)? {
            return Answer::refused(e, None).into_response();
        }
        let sql = self.state.storage().sql();
        let body = json!({
            "bytes": sql.database_size(),
            "rows": {
                "turns": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM turns", vec![])?,
                "events": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM events", vec![])?,
                "idempotency": sqlite::count(&sql, "SELECT COUNT(*) AS n FROM idempotency", vec![])?,
            },
        });
        Response::from_json(&body)
    }

    /// Answers at once when the version is above `after` or the hand-off is closed; otherwise
    /// holds a place and answers with a body that arrives at the next version move or at the
    /// timeout. The headers go out at once and the body is a stream, so a client that goes away
    /// cancels that stream, which drops the waiter's [`Place`](handoff_core::waiters::Place) there and
    /// then: the runtime need not fire `request.signal` (local workerd does not).
    fn wait(&self, caller: &Caller, after: u64, timeout_s: u64) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(e, None).into_response(),
        };
        if turn::wait_answers_now(&h.record, after) || timeout_s == 0 {
            // A whole response, which the output gate holds until the version is durable.
            let body = self.published.borrow_mut().answer_of(&h, render_record);
            return text(&body, "application/json");
        }
        let (cap_name, cap) = self.waiters_max(caller.role);
        let Some((place, woken)) = Waiters::hold(&self.waiters, caller.role, cap, after) else {
            let e = ApiError::new(Code::WaitTooMany, format!("this hand-off holds {cap} waits of this role ({cap_name})"));
            return Answer::refused(e, None).into_response();
        };
        let jitter_ms = (js_sys::Math::random() * WAIT_JITTER_MS_MAX as f64) as u64;
        let timeout = Delay::from(Duration::from_millis(timeout_s * 1000 + jitter_ms));
        let published = self.published.clone();
        let body = async move {
            let _place = place;
            let body = match select(woken, timeout).await {
                Either::Left((Ok(body), _)) => body,
                // The timeout: the newest version whose commit is confirmed (the object loaded
                // or published one before any waiter could be held).
                _ => published.borrow_mut().answer(render_record).unwrap_or_else(|| "{}".into()),
            };
            Ok::<Vec<u8>, Error>(body.as_bytes().to_vec())
        };
        let mut response = Response::from_stream(futures::stream::once(body))?;
        response.headers_mut().set("Content-Type", "application/json")?;
        Ok(response)
    }

    /// The cap on `role`'s waits and its name, or the lower cap a test asks for where test
    /// hooks are on (so that the cap can be shown without holding ten thousand connections).
    fn waiters_max(&self, role: Role) -> (&'static str, usize) {
        let (name, cap) = match role {
            Role::Owner => ("OWNER_WAITERS_PER_HANDOFF_MAX", OWNER_WAITERS_PER_HANDOFF_MAX),
            Role::Machine => ("MACHINE_WAITERS_PER_HANDOFF_MAX", MACHINE_WAITERS_PER_HANDOFF_MAX),
        };
        match bindings::test_waiters_max(&self.env) {
            Some(test_cap) => (name, test_cap),
            None => (name, cap),
        }
    }
}

/// A whole answer with its content type.
fn text(body: &str, content_type: &str) -> Result<Response> {
    let mut response = Response::ok(body)?;
    response.headers_mut().set("Content-Type", content_type)?;
    Ok(response)
}

/// `{"handoff": record}` as text: what a wait answers.
fn render_record(h: &Handoff) -> String {
    view::record_answer(&h.record).to_string()
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}
