//! A hand-off object's SQLite: the schema and its migration, the reads the decider asks for,
//! and one plan's writes in one `transactionSync` (all of them or none). The only code that
//! writes this object's tables' SQL; it decides nothing, it turns each `Write` into its
//! statement.

use super::*;
use crate::sqlite::{each, rows, Cells, BOUND_PARAMETERS_MAX};
use handoff_core::decider::{Part, StorageFacts, StorageRows, Stored, TimelineRead, WatcherCounts, Write};
use handoff_core::idempotency::{KeyEntry, Remembered};
use handoff_core::timeline::TurnFacts;
use std::borrow::Cow;

/// The schema this build writes, version [`SCHEMA_VERSION`]. Written by a create's own
/// transaction, never by a read.
const SCHEMA: [&str; 12] = [
    "CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL, entered INTEGER NOT NULL DEFAULT 1)",
    "CREATE TABLE IF NOT EXISTS parts (name TEXT PRIMARY KEY, json TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS turns (turn INTEGER PRIMARY KEY, entry TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS outbox (k INTEGER PRIMARY KEY CHECK (k = 0), owner TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL, attempts INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, slim INTEGER NOT NULL DEFAULT 0, digest TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS idempotency_at ON idempotency (at)",
    "CREATE TABLE IF NOT EXISTS meta (k INTEGER PRIMARY KEY CHECK (k = 0), schema INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS passed (version INTEGER PRIMARY KEY, row TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tokens (k INTEGER PRIMARY KEY CHECK (k = 0), machine_from INTEGER NOT NULL)",
    // The turns' timeline (not the version history, which is `events`) and each turn's count.
    "CREATE TABLE IF NOT EXISTS timeline (turn INTEGER NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (turn, seq))",
    "CREATE TABLE IF NOT EXISTS timeline_turns (turn INTEGER PRIMARY KEY, events INTEGER NOT NULL, bytes INTEGER NOT NULL, dropped INTEGER NOT NULL DEFAULT 0)",
];
const SCHEMA_VERSION: i64 = 5;
/// From schema 1 (no `meta` table; idempotency rows without sizes) to 2. Additive.
const MIGRATE_1_TO_2: [&str; 3] = [
    "ALTER TABLE idempotency ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN slim INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE idempotency ADD COLUMN digest TEXT NOT NULL DEFAULT ''",
];
/// From schema 2 to 3: the record's `entered` flag (an earlier build's rows read as entered)
/// and the `passed` table (created by [`SCHEMA`]). A restored row that entered something is
/// passed again by the next change after every eviction, taken or not: one row more to
/// store and send, which the index skips by its version. Additive:
/// an earlier build still reads and writes a schema-3 database.
const MIGRATE_2_TO_3: [&str; 1] = ["ALTER TABLE handoff ADD COLUMN entered INTEGER NOT NULL DEFAULT 1"];
/// From schema 3 to 4: the `tokens` table (created by [`SCHEMA`]), where the newest machine
/// token's `inc` ends the ones before it; none stored ends none. Additive: an earlier build
/// reads a schema-4 database and leaves the table alone.
///
/// From schema 4 to 5: the `timeline` and `timeline_turns` tables (created by [`SCHEMA`]).
/// Additive: an earlier build reads a schema-5 database and leaves both alone.
const SET_SCHEMA_VERSION: &str = "INSERT OR REPLACE INTO meta (k, schema) VALUES (0, ?)";

/// The statements of one plan, run in order in one transaction.
#[derive(Default)]
pub(super) struct Batch {
    statements: Vec<(Cow<'static, str>, Vec<SqlStorageValue>)>,
}

/// The events one `INSERT INTO timeline` takes: each binds its `seq` and `json`, and the
/// statement binds `turn` and `at` once, within the runtime's [`BOUND_PARAMETERS_MAX`].
const TIMELINE_ROWS_PER_INSERT: usize = (BOUND_PARAMETERS_MAX - 2) / 2;

impl Batch {
    fn push(&mut self, sql: &'static str, args: Vec<SqlStorageValue>) {
        self.statements.push((Cow::Borrowed(sql), args));
    }

    /// The statements of `writes`.
    pub(super) fn of(writes: &[Write]) -> Batch {
        let mut batch = Batch::default();
        for write in writes {
            batch.add(write);
        }
        batch
    }

    fn add(&mut self, write: &Write) {
        match write {
            Write::Schema => {
                for statement in SCHEMA {
                    self.push(statement, vec![]);
                }
                self.push(SET_SCHEMA_VERSION, vec![SCHEMA_VERSION.into()]);
            }
            Write::Record { json, entered } => {
                self.push("INSERT OR REPLACE INTO handoff (k, record, entered) VALUES (0, ?, ?)", vec![json.as_str().into(), i64::from(*entered).into()])
            }
            Write::Part { name, json } => self.push("INSERT OR REPLACE INTO parts (name, json) VALUES (?, ?)", vec![part(*name).into(), json.as_str().into()]),
            Write::Turn { turn, entry } => self.push("INSERT OR REPLACE INTO turns (turn, entry) VALUES (?, ?)", vec![(*turn as i64).into(), entry.as_str().into()]),
            Write::TrimTurns { through } => {
                self.push("DELETE FROM turns WHERE turn <= ?", vec![(*through as i64).into()]);
                // A turn's timeline count goes with its lineage entry.
                self.push("DELETE FROM timeline_turns WHERE turn <= ?", vec![(*through as i64).into()]);
            }
            Write::Event { version, at, kind, actor } => self.push(
                "INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)",
                vec![(*version as i64).into(), (*at).into(), kind.as_str().into(), actor.as_str().into()],
            ),
            Write::TrimEvents { through } => self.push("DELETE FROM events WHERE version <= ?", vec![(*through as i64).into()]),
            Write::Remember { key, remembered: r, at, bytes } => self.push(
                "INSERT OR REPLACE INTO idempotency (key, fingerprint, status, body, at, bytes, slim, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    key.as_str().into(),
                    r.fingerprint.as_str().into(),
                    i64::from(r.status).into(),
                    r.body.as_str().into(),
                    (*at).into(),
                    (*bytes as i64).into(),
                    i64::from(r.slim).into(),
                    r.digest.as_str().into(),
                ],
            ),
            Write::ForgetExpired { before } => self.push("DELETE FROM idempotency WHERE at < ?", vec![(*before).into()]),
            Write::Forget { key } => self.push("DELETE FROM idempotency WHERE key = ?", vec![key.as_str().into()]),
            Write::Attempts { owner, version, row, attempts } => self.push(
                "INSERT OR REPLACE INTO outbox (k, owner, version, row, attempts) VALUES (0, ?, ?, ?, ?)",
                vec![owner.as_str().into(), (*version as i64).into(), row.as_str().into(), i64::from(*attempts).into()],
            ),
            Write::Pass { version, row } => {
                self.push("INSERT OR REPLACE INTO passed (version, row) VALUES (?, ?)", vec![(*version as i64).into(), row.as_str().into()])
            }
            Write::Unpass { through } => self.push("DELETE FROM passed WHERE version <= ?", vec![(*through as i64).into()]),
            Write::MachineTokensFrom { from } => {
                self.push("INSERT OR REPLACE INTO tokens (k, machine_from) VALUES (0, ?)", vec![(*from as i64).into()])
            }
            Write::TimelineEvents { turn, at, events } => self.timeline_events(*turn, *at, events),
            Write::TimelineTurn { turn, facts } => self.push(
                "INSERT OR REPLACE INTO timeline_turns (turn, events, bytes, dropped) VALUES (?, ?, ?, ?)",
                vec![(*turn as i64).into(), (facts.events as i64).into(), (facts.bytes as i64).into(), i64::from(facts.dropped).into()],
            ),
            Write::TrimTimeline { through } => {
                self.push("DELETE FROM timeline WHERE turn <= ?", vec![(*through as i64).into()]);
                self.push("UPDATE timeline_turns SET dropped = 1 WHERE turn <= ? AND dropped = 0", vec![(*through as i64).into()]);
            }
        }
    }

    /// One statement for up to [`TIMELINE_ROWS_PER_INSERT`] events: each statement crosses into
    /// the runtime once with its values, where one a row crossed 32 times a batch.
    fn timeline_events(&mut self, turn: u64, at: i64, events: &[(u64, String)]) {
        for chunk in events.chunks(TIMELINE_ROWS_PER_INSERT) {
            let mut sql = String::from("INSERT INTO timeline (turn, seq, at, json) VALUES ");
            let mut args: Vec<SqlStorageValue> = Vec::with_capacity(2 + 2 * chunk.len());
            args.push((turn as i64).into());
            args.push(at.into());
            for (i, (seq, json)) in chunk.iter().enumerate() {
                let n = 3 + 2 * i;
                let comma = if i == 0 { "" } else { ", " };
                sql.push_str(&format!("{comma}(?1, ?{n}, ?2, ?{})", n + 1));
                args.push((*seq as i64).into());
                args.push(json.as_str().into());
            }
            self.statements.push((Cow::Owned(sql), args));
        }
    }
}

fn part(name: Part) -> &'static str {
    name.as_str()
}

/// Runs `batch` in one `transactionSync`: if any statement fails, the runtime rolls back every
/// one before it and nothing of the plan is stored. `fault` (test hooks only) makes one
/// statement fail in the runtime's SQLite, or loses the whole commit (every statement runs,
/// then the transaction rolls back and the plan fails as a lost commit does).
pub(super) fn commit(storage: &Storage, batch: Batch, fault: Option<Fault>) -> Result<()> {
    let sql = storage.sql();
    let lost = fault == Some(Fault::Sync);
    crate::sqlite::transaction_sync(storage, move || {
        for (i, (statement, args)) in batch.statements.into_iter().enumerate() {
            if fault == Some(Fault::Statement { statement: i + 1 }) {
                // A real failure of the runtime's SQLite, not a pretend one.
                sql.exec("SELECT * FROM fault_injected_by_a_test", None).map_err(JsValue::from)?;
            }
            crate::sqlite::exec(&sql, &statement, args)?;
        }
        if lost {
            return Err(JsValue::from_str("commit lost (test hook)"));
        }
        Ok(())
    })
}

/// Brings a schema of version `from`, written by an earlier build, up to [`SCHEMA_VERSION`],
/// in one transaction.
fn migrate(storage: &Storage, from: i64) -> Result<()> {
    let mut batch = Batch::default();
    for statement in SCHEMA {
        batch.push(statement, vec![]);
    }
    if from < 2 {
        for statement in MIGRATE_1_TO_2 {
            batch.push(statement, vec![]);
        }
    }
    if from < 3 {
        for statement in MIGRATE_2_TO_3 {
            batch.push(statement, vec![]);
        }
    }
    batch.push(SET_SCHEMA_VERSION, vec![SCHEMA_VERSION.into()]);
    commit(storage, batch, None)
}

/// The stored hand-off in two queries: the catalogue (does it exist, is its schema this
/// build's), then the record, its parts, the newest `lineage` entries, the failed row sends
/// and the passed rows together. An object starts again after every eviction, so this runs
/// on the first request of most sessions' bursts. `None` (and nothing written) for a hand-off
/// never created.
pub(super) fn load(storage: &Storage, lineage: usize) -> Result<Option<Stored>> {
    let sql = storage.sql();
    let tables = each(rows(
        &sql,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('handoff', 'meta', 'passed', 'tokens', 'timeline')",
        None,
    )?, |mut row| row.text(0))?;
    let exists = |table: &str| tables.iter().any(|t| t == table);
    if !exists("handoff") {
        return Ok(None);
    }
    // Schema 1 had no `meta`, schema 2 no `passed`, schema 3 no `tokens` (which the rows
    // below read), schema 4 no `timeline`; migrating writes them.
    if !exists("meta") {
        migrate(storage, 1)?;
    } else if !exists("passed") {
        migrate(storage, 2)?;
    } else if !exists("tokens") {
        migrate(storage, 3)?;
    } else if !exists("timeline") {
        migrate(storage, 4)?;
    }
    let mut stored = Stored::default();
    let mut found = false;
    // kind, name, json, n, m
    for mut row in load_rows(&sql, lineage)? {
        let (kind, name, json) = (row.text(0)?, row.opt_text(1)?, row.opt_text(2)?);
        let (n, m) = (row.opt_int(3)?, row.opt_int(4)?);
        match (kind.as_str(), name, json) {
            ("record", _, Some(json)) => {
                stored.record = json;
                stored.entered = n != Some(0);
                // The runtime's SQLite takes at most five terms in a compound SELECT: the floor
                // of machine tokens rides on the record's row.
                stored.machine_tokens_from = m.unwrap_or(0).max(0) as u64;
                found = true;
            }
            ("passed", _, Some(json)) => stored.passed.push((n.unwrap_or(0) as u64, json)),
            ("part", Some(name), Some(json)) => stored.parts.push((name, json)),
            ("turn", _, Some(json)) => stored.turns.push(json),
            ("attempts", _, _) => stored.attempts = Some((n.unwrap_or(0) as u64, m.unwrap_or(0) as u32)),
            _ => {}
        }
    }
    Ok(found.then_some(stored))
}

fn load_rows(sql: &SqlStorage, lineage: usize) -> Result<Vec<Cells>> {
    rows(
        sql,
        "SELECT 'record' AS kind, NULL AS name, record AS json, entered AS n, (SELECT machine_from FROM tokens WHERE k = 0) AS m FROM handoff WHERE k = 0
         UNION ALL SELECT 'passed', NULL, row, version, NULL FROM passed
         UNION ALL SELECT 'part', name, json, NULL, NULL FROM parts
         UNION ALL SELECT 'attempts', NULL, NULL, version, attempts FROM outbox WHERE k = 0
         UNION ALL SELECT * FROM (SELECT 'turn', NULL, entry, turn, NULL FROM turns ORDER BY turn DESC LIMIT ?)",
        vec![(lineage as i64).into()],
    )
}

/// Every remembered key's time and size.
pub(super) fn keys(storage: &Storage) -> Result<Vec<KeyEntry>> {
    each(rows(&storage.sql(), "SELECT key, at, bytes FROM idempotency", None)?, |mut r| {
        Ok(KeyEntry { key: r.text(0)?, at: r.int(1)?, bytes: r.int(2)?.max(0) as usize })
    })
}

/// The remembered answer of `key`, if it was remembered at or after `since`.
pub(super) fn key(storage: &Storage, key: &str, since: i64) -> Result<Option<Remembered>> {
    let found = rows(
        &storage.sql(),
        "SELECT fingerprint, status, body, slim, digest FROM idempotency WHERE key = ? AND at >= ?",
        vec![key.into(), since.into()],
    )?;
    let Some(mut r) = found.into_iter().next() else {
        return Ok(None);
    };
    let status = r.int(1)?;
    let status =
        u16::try_from(status).map_err(|_| Error::RustError(format!("a remembered status out of range: {status}")))?;
    Ok(Some(Remembered { fingerprint: r.text(0)?, status, body: r.text(2)?, slim: r.int(3)? != 0, digest: r.text(4)? }))
}

/// Up to `limit` lineage entries below turn `before`, newest first.
pub(super) fn turns(storage: &Storage, before: i64, limit: usize) -> Result<Vec<String>> {
    each(
        rows(
            &storage.sql(),
            "SELECT entry FROM turns WHERE turn < ? ORDER BY turn DESC LIMIT ?",
            vec![before.into(), (limit as i64).into()],
        )?,
        |mut r| r.text(0),
    )
}

/// `turn`'s timeline facts and up to `limit` of its events after `after`, oldest first.
pub(super) fn timeline(storage: &Storage, turn: u64, after: u64, limit: usize) -> Result<TimelineRead> {
    let sql = storage.sql();
    let facts =
        rows(&sql, "SELECT events, bytes, dropped FROM timeline_turns WHERE turn = ?", vec![(turn as i64).into()])?;
    let facts = match facts.first() {
        None => TurnFacts::default(),
        Some(f) => {
            TurnFacts { events: f.int(0)?.max(0) as u64, bytes: f.int(1)?.max(0) as u64, dropped: f.int(2)? != 0 }
        }
    };
    let events = each(
        rows(
            &sql,
            "SELECT seq, at, json FROM timeline WHERE turn = ? AND seq > ? ORDER BY seq LIMIT ?",
            vec![(turn as i64).into(), (after as i64).into(), (limit as i64).into()],
        )?,
        |mut r| Ok((r.int(0)?.max(0) as u64, r.int(1)?, r.text(2)?)),
    )?;
    Ok(TimelineRead { facts, events })
}

/// The test hook's facts: the database's bytes, the bounded tables' rows, the sockets by role.
pub(super) fn facts(state: &State) -> Result<StorageFacts> {
    let sql = state.storage().sql();
    let rows = StorageRows {
        turns: crate::sqlite::count(&sql, "SELECT COUNT(*) AS n FROM turns", vec![])? as u64,
        events: crate::sqlite::count(&sql, "SELECT COUNT(*) AS n FROM events", vec![])? as u64,
        idempotency: crate::sqlite::count(&sql, "SELECT COUNT(*) AS n FROM idempotency", vec![])? as u64,
        timeline: crate::sqlite::count(&sql, "SELECT COUNT(*) AS n FROM timeline", vec![])? as u64,
    };
    let watchers = WatcherCounts {
        owner: state.get_websockets_with_tag(Role::Owner.as_str()).len(),
        machine: state.get_websockets_with_tag(Role::Machine.as_str()).len(),
    };
    Ok(StorageFacts { bytes: sql.database_size() as u64, rows, watchers })
}
