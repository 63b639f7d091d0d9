//! What a hand-off's object keeps, and how: the schema and its migration, loading the hand-off,
//! and writing one change as one `Batch` in one `transactionSync` (all of it or none of it),
//! the idempotency table and its caps included. Every write of this object's tables is here
//! (the delivery's attempt count aside); reads that page sit with the operation that reads.

use super::*;

/// The schema this build writes, version [`SCHEMA_VERSION`]. Written by a create's own
/// transaction, never by a read.
pub(super) const SCHEMA: [&str; 8] = [
    "CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS parts (name TEXT PRIMARY KEY, json TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS turns (turn INTEGER PRIMARY KEY, entry TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS outbox (k INTEGER PRIMARY KEY CHECK (k = 0), owner TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL, attempts INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, slim INTEGER NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS idempotency_at ON idempotency (at)",
    "CREATE TABLE IF NOT EXISTS meta (k INTEGER PRIMARY KEY CHECK (k = 0), schema INTEGER NOT NULL)",
];
pub(super) const SCHEMA_VERSION: i64 = 2;
/// From schema 1 (no `meta` table; idempotency rows without sizes) to 2. Additive.
pub(super) const MIGRATE_1_TO_2: [&str; 3] = [
    "ALTER TABLE idempotency ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN slim INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN digest TEXT NOT NULL DEFAULT ''",
];
pub(super) const SET_SCHEMA_VERSION: &str = "INSERT OR REPLACE INTO meta (k, schema) VALUES (0, ?)";
/// Idempotency rows looked at per pass when the caps are full (normally one is forgotten).
pub(super) const EVICTION_PAGE: i64 = 64;

#[derive(serde::Deserialize)]
pub(super) struct TurnRow {
    pub(super) entry: String,
}

#[derive(serde::Deserialize)]
pub(super) struct NameRow {
    pub(super) name: String,
}

/// One row of [`HandoffObject::load`]'s second query: `kind` says which table it came from.
#[derive(serde::Deserialize)]
pub(super) struct LoadRow {
    pub(super) kind: String,
    pub(super) name: Option<String>,
    pub(super) json: Option<String>,
    pub(super) n: Option<i64>,
}

#[derive(serde::Deserialize)]
pub(super) struct SchemaRow {
    pub(super) schema: i64,
}

#[derive(serde::Deserialize)]
pub(super) struct IdempotencyRow {
    pub(super) fingerprint: String,
    pub(super) status: i64,
    pub(super) body: String,
    pub(super) slim: i64,
    pub(super) digest: String,
}

#[derive(serde::Deserialize)]
pub(super) struct Totals {
    pub(super) n: i64,
    pub(super) bytes: i64,
}

#[derive(serde::Deserialize)]
pub(super) struct KeySize {
    pub(super) key: String,
    pub(super) bytes: i64,
}

/// One change to store: the next hand-off, what of it moved, and what the request adds.
pub(super) struct Stored<'a> {
    pub(super) h: Handoff,
    pub(super) dirty: Dirty,
    /// The work record already serialised (for its size check), when it moved.
    pub(super) work_json: Option<String>,
    /// The history event's kind.
    pub(super) kind: &'a str,
    pub(super) caller: &'a Caller,
    /// The request's key and the answer it remembers.
    pub(super) remember: Option<(&'a str, &'a Remembered)>,
    /// The first write of this hand-off: the schema comes in the same transaction.
    pub(super) create: bool,
}

/// The statements of one change, run in order in one transaction: all of them or none.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) statements: Vec<(&'static str, Vec<SqlStorageValue>)>,
}

impl Batch {
    pub(super) fn push(&mut self, sql: &'static str, args: Vec<SqlStorageValue>) {
        self.statements.push((sql, args));
    }
}

pub(super) fn storage_error(e: impl std::fmt::Display) -> Error {
    Error::RustError(format!("stored hand-off unreadable: {e}"))
}

pub(super) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(storage_error)
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(storage_error)
}

impl HandoffObject {
    /// Drops what memory holds of the stored hand-off; the next request loads it again.
    pub(super) fn forget(&self) {
        *self.cached.borrow_mut() = None;
        self.outbox.borrow_mut().forget();
    }

    /// Brings a schema written by an earlier build up to [`SCHEMA_VERSION`], in one transaction.
    pub(super) fn migrate(&self) -> Result<()> {
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

    /// The stored hand-off, read once per object lifetime in two queries: the catalogue (does
    /// it exist, and is its schema this build's), then the schema's version, the record, its
    /// parts and the newest lineage entries together. An object is started again after every
    /// eviction (ten idle seconds), so this runs on the first request of most sessions' bursts;
    /// it was six queries, each a crossing and a conversion of its rows (issue 12).
    pub(super) fn load(&self) -> Result<Option<Rc<Handoff>>> {
        if let Some(cached) = self.cached.borrow().as_ref() {
            return Ok(cached.clone());
        }
        let sql = self.state.storage().sql();
        let tables: Vec<NameRow> =
            sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('handoff', 'meta')", None)?.to_array()?;
        let exists = |table: &str| tables.iter().any(|t| t.name == table);
        if !exists("handoff") {
            // Not cached: a create may come next, and it is the create that writes.
            return Ok(None);
        }
        if !exists("meta") {
            // Schema 1 had no `meta`; migrating writes it.
            self.migrate()?;
        }
        let mut rows = Self::load_rows(&sql)?;
        if rows.iter().find(|r| r.kind == "schema").and_then(|r| r.n).unwrap_or(1) < SCHEMA_VERSION {
            self.migrate()?;
            rows = Self::load_rows(&sql)?;
        }
        let handoff = match rows.iter().find(|r| r.kind == "record") {
            None => None,
            Some(row) => {
                let record: Record = from_json(row.json.as_deref().unwrap_or_default())?;
                let mut h = Handoff::create(record);
                let mut turns: Vec<(i64, &str)> = Vec::new();
                for row in &rows {
                    let json = row.json.as_deref().unwrap_or_default();
                    match (row.kind.as_str(), row.name.as_deref()) {
                        ("part", Some("work")) => h.work = from_json::<Work>(json)?,
                        ("part", Some("ledger")) => h.ledger = from_json::<Ledger>(json)?,
                        ("part", Some("extras")) => h.extras = from_json::<Extras>(json)?,
                        ("turn", _) => turns.push((row.n.unwrap_or_default(), json)),
                        _ => {}
                    }
                }
                // Only the newest entries: older turns are paged from storage by `GET …/turns`.
                turns.sort_by_key(|(turn, _)| *turn);
                if !turns.is_empty() {
                    h.lineage = turns.iter().map(|(_, entry)| from_json::<TurnEntry>(entry)).collect::<Result<_>>()?;
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

    /// The second query of [`HandoffObject::load`]; `kind` says which table each row is from.
    fn load_rows(sql: &SqlStorage) -> Result<Vec<LoadRow>> {
        sql.exec(
            "SELECT 'schema' AS kind, NULL AS name, NULL AS json, schema AS n FROM meta WHERE k = 0
             UNION ALL SELECT 'record', NULL, record, NULL FROM handoff WHERE k = 0
             UNION ALL SELECT 'part', name, json, NULL FROM parts
             UNION ALL SELECT * FROM (SELECT 'turn', NULL, entry, turn FROM turns ORDER BY turn DESC LIMIT ?)",
            vec![(LINEAGE_TAIL_MAX as i64).into()],
        )?
        .to_array()
    }

    /// The hand-off, if it exists and the caller may see it; anything else is `handoff.not_found`.
    pub(super) fn owned(&self, caller: &Caller) -> Result<std::result::Result<Rc<Handoff>, ApiError>> {
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
    pub(super) fn commit(&self, batch: Batch, fault: Option<Fault>) -> Result<()> {
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
    pub(super) fn check_sizes(values: &[&str]) -> std::result::Result<(), ApiError> {
        match values.iter().map(|v| v.len()).max() {
            Some(largest) if largest > STORED_VALUE_BYTES_MAX => Err(ApiError::new(
                Code::RequestTooLarge,
                format!("the change would store a value of {largest} bytes, over {STORED_VALUE_BYTES_MAX}"),
            )),
            _ => Ok(()),
        }
    }

    /// Writes what moved — the record, the parts marked dirty, the lineage entries, the history
    /// event, the key's remembered answer — and trims what is bounded (events, lineage,
    /// remembered answers), all in one transaction. Every value (the row the owner's index is
    /// now owed included) is serialised and size-checked first, so a refusal writes nothing.
    /// Answers the stored hand-off, which the caller publishes once the commit is confirmed and
    /// whose row it delivers.
    pub(super) fn store(&self, change: Stored<'_>) -> Result<std::result::Result<Rc<Handoff>, ApiError>> {
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
        let owed = Delivery::of(record)?;
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
        // Bounded by EVENTS_PER_HANDOFF_MAX, trimmed once a step rather than on every change.
        if let Some(through) = events_trimmed_through(record.version) {
            batch.push("DELETE FROM events WHERE version <= ?", vec![(through as i64).into()]);
        }
        // No outbox row: what the index is owed is the stored record's row (`HandoffObject::owed`),
        // committed by this same transaction.
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
    pub(super) fn remember_into(&self, batch: &mut Batch, key: &str, r: &Remembered) -> Result<()> {
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

    /// Waits for the runtime to confirm that every write so far is durable (`storage.sync()`),
    /// which rejects when a commit failed; with test hooks, a lost commit rejects here too.
    pub(super) async fn confirm_commit(&self) -> Result<()> {
        self.state.storage().sync().await?;
        if self.commit_lost.replace(false) {
            return Err(Error::RustError("storage.sync() rejected: the commit was lost (test hook)".into()));
        }
        Ok(())
    }
}
