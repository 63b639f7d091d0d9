//! `OwnerIndex`: the Durable Object that holds one owner's list, one row per hand-off.
//! Rows arrive from each hand-off's outbox and are kept only when their version is higher
//! than the one held, so replays and reordering are harmless. An owner who has no hand-off has
//! no tables: the first delivered row writes them.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::store_failed;
use handoff_api::error::{ApiError, Code};
use handoff_api::protocol::IndexAsk;
use handoff_api::view;
use handoff_core::index::{Cursor, IndexRow, ListQuery};
use handoff_core::turn::State as HandoffState;
use serde_json::json;
use crate::http::answer;
use std::cell::Cell;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

/// Exported to the runtime directly, not through `#[durable_object]`, for the reason
/// `HandoffObject` gives: its ask is one header, its answers are built in one call.
#[wasm_bindgen]
pub struct OwnerIndex {
    state: State,
    /// Test hook: while on, deliveries are refused as if the index were unreachable.
    refusing: Cell<bool>,
    /// The schema is known to be written (by this build) in this object's lifetime.
    schema_ready: Cell<bool>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rows (
  id TEXT PRIMARY KEY, session TEXT NOT NULL, machine TEXT NOT NULL, size TEXT NOT NULL,
  turn INTEGER NOT NULL, state TEXT NOT NULL, status TEXT NOT NULL, summary TEXT,
  version INTEGER NOT NULL, updated_at INTEGER NOT NULL, suggestion TEXT,
  runtime TEXT, package_version INTEGER, package_hash TEXT);
CREATE INDEX IF NOT EXISTS rows_newest ON rows (updated_at DESC, id DESC);
";

/// Additive migrations for tables created by an earlier build; each fails harmlessly once applied.
const MIGRATIONS: [&str; 4] = [
    "ALTER TABLE rows ADD COLUMN suggestion TEXT",
    "ALTER TABLE rows ADD COLUMN runtime TEXT",
    "ALTER TABLE rows ADD COLUMN package_version INTEGER",
    "ALTER TABLE rows ADD COLUMN package_hash TEXT",
];

const UPSERT: &str = "
INSERT INTO rows (id, session, machine, size, turn, state, status, summary, version, updated_at, suggestion,
  runtime, package_version, package_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET
  session = excluded.session, machine = excluded.machine, size = excluded.size, turn = excluded.turn,
  state = excluded.state, status = excluded.status, summary = excluded.summary,
  version = excluded.version, updated_at = excluded.updated_at, suggestion = excluded.suggestion,
  runtime = excluded.runtime, package_version = excluded.package_version, package_hash = excluded.package_hash
WHERE excluded.version > rows.version";

#[derive(serde::Deserialize)]
struct StoredRow {
    id: String,
    session: String,
    machine: String,
    size: String,
    turn: i64,
    state: String,
    status: String,
    summary: Option<String>,
    version: i64,
    updated_at: i64,
    suggestion: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    package_version: Option<i64>,
    #[serde(default)]
    package_hash: Option<String>,
}

impl StoredRow {
    fn into_row(self) -> Option<IndexRow> {
        Some(IndexRow {
            id: self.id,
            session: self.session,
            machine: self.machine,
            size: self.size,
            turn: self.turn as u64,
            state: HandoffState::parse(&self.state)?,
            status: handoff_core::turn::Status::parse(&self.status)?,
            summary: self.summary,
            version: self.version as u64,
            updated_at: self.updated_at,
            suggestion: self.suggestion.and_then(|s| serde_json::from_str(&s).ok()),
            runtime: self.runtime,
            package_version: self.package_version.map(|v| v as u64),
            package_hash: self.package_hash,
        })
    }
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl OwnerIndex {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, _env: Env) -> OwnerIndex {
        OwnerIndex { state: State::from(state), refusing: Cell::new(false), schema_ready: Cell::new(false) }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        self.answer(req).await.map(JsValue::from).map_err(JsValue::from)
    }
}

impl OwnerIndex {
    async fn answer(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        // An unreadable ask is a deploy mixing versions, which a retry outlives: 503.
        let ask: IndexAsk = match crate::http::read_ask(&req).await {
            Ok(Ok(ask)) => ask,
            Ok(Err(e)) => return store_failed("unreadable index ask", &e),
            Err(e) => return store_failed("unreadable index ask", &e),
        };
        let answer = match ask {
            IndexAsk::Put { row } => self.put(&row),
            IndexAsk::List { query } => self.list(&query),
            IndexAsk::RefuseDeliveries { on } => {
                self.refusing.set(on);
                answer(200, &json!({"refusing": on}))
            }
            IndexAsk::TestStorage => answer(200, &json!({"bytes": self.state.storage().sql().database_size()})),
        };
        answer.or_else(|e| store_failed("owner index", &e))
    }
}

impl OwnerIndex {
    /// Whether the `rows` table exists; reads only the catalogue.
    fn has_schema(&self) -> Result<bool> {
        if self.schema_ready.get() {
            return Ok(true);
        }
        let sql = self.state.storage().sql();
        crate::sqlite::table_exists(&sql, "rows")
    }

    /// Writes the schema (and brings an earlier build's up to date) before the first row.
    fn ensure_schema(&self) -> Result<()> {
        if self.schema_ready.get() {
            return Ok(());
        }
        let sql = self.state.storage().sql();
        sql.exec(SCHEMA, None)?;
        for migration in MIGRATIONS {
            // "duplicate column name" once applied: the column is there, which is the point.
            let _ = sql.exec(migration, None);
        }
        self.schema_ready.set(true);
        Ok(())
    }

    fn put(&self, row: &IndexRow) -> Result<web_sys::Response> {
        if self.refusing.get() {
            return crate::http::refusal(&ApiError::new(Code::StoreUnavailable, "deliveries are refused (test hook)"));
        }
        let state = row.state.as_str();
        let bindings = vec![
            row.id.clone().into(),
            row.session.clone().into(),
            row.machine.clone().into(),
            row.size.clone().into(),
            (row.turn as i64).into(),
            state.into(),
            row.status.as_str().into(),
            row.summary.clone().into(),
            (row.version as i64).into(),
            row.updated_at.into(),
            row.suggestion.as_ref().and_then(|s| serde_json::to_string(s).ok()).into(),
            row.runtime.clone().into(),
            row.package_version.map(|v| v as i64).into(),
            row.package_hash.clone().into(),
        ];
        self.ensure_schema()?;
        self.state.storage().sql().exec(UPSERT, bindings)?;
        answer(200, &json!({"ok": true}))
    }

    fn list(&self, query: &ListQuery) -> Result<web_sys::Response> {
        if !self.has_schema()? {
            return answer(200, &view::Page { handoffs: vec![], cursor: None });
        }
        let sql = self.state.storage().sql();
        let state = query.state.map(HandoffState::as_str);
        let (at, id) = match &query.cursor {
            Some(c) => (c.updated_at, c.id.clone()),
            None => (i64::MAX, String::new()),
        };
        // One more row than the page, to know whether a next page exists.
        let rows: Vec<StoredRow> = sql
            .exec(
                "SELECT * FROM rows
                 WHERE (?1 IS NULL OR state = ?1) AND (updated_at < ?2 OR (updated_at = ?2 AND (?3 = '' OR id < ?3)))
                 ORDER BY updated_at DESC, id DESC LIMIT ?4",
                vec![state.into(), at.into(), id.into(), (query.limit as i64 + 1).into()],
            )?
            .to_array()?;
        let mut rows: Vec<IndexRow> = rows.into_iter().filter_map(StoredRow::into_row).collect();
        let more = rows.len() > query.limit as usize;
        rows.truncate(query.limit as usize);
        let cursor = more.then(|| rows.last().map(|r| Cursor::after(r).encode())).flatten();
        answer(200, &view::Page { handoffs: rows.iter().map(view::Row::from).collect(), cursor })
    }
}
