//! `OwnerIndex`: the Durable Object that holds one owner's list, one row per hand-off, each row
//! stored as the JSON it is sent and served as it is stored. Rows arrive from each hand-off's
//! deliveries and are kept only when their version is higher than the one held, so replays and
//! reordering are harmless. An owner who has no hand-off has no tables: the first delivered row
//! writes them.
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod deliveries;
mod push;
mod send;
mod webhooks;

use crate::bindings::store_failed;
use crate::clock::now_ms;
use handoff_api::error::{ApiError, Code};
use handoff_api::protocol::IndexAsk;
use handoff_api::wire::IndexAnswer;
use handoff_core::index::{ListQuery, Page, Row};
use handoff_core::owner::list::Held;
use handoff_core::turn::State as HandoffState;
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
    /// Whether the notification tables are this build's, once read or written (they are
    /// never dropped).
    webhooks_ready: Cell<Option<bool>>,
    /// Test hook: while on, webhook deliveries are stored but not sent.
    holding: Cell<bool>,
    /// The owner's cap on pending webhook deliveries (lower where a test sets it).
    pending_max: usize,
    /// Who push messages are from, where push is configured.
    sender: Option<std::rc::Rc<handoff_notify::Sender>>,
    /// The bounds on what one owner's list holds (see `bounds` below).
    bounds: Bounds,
}

/// The list: the columns it is ordered and filtered by, and the row itself.
const SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS list (id TEXT PRIMARY KEY, updated_at INTEGER NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS list_newest ON list (updated_at DESC, id DESC)",
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

/// A statement and its arguments, to run in a transaction.
type Statement = (String, Vec<SqlStorageValue>);

#[derive(serde::Deserialize)]
struct NameRow {
    name: String,
}

#[derive(serde::Deserialize)]
struct ListRow {
    row: String,
}

#[derive(serde::Deserialize)]
struct HeldRow {
    version: i64,
    row: String,
}

/// The index's answer, rendered by the api's wire (`handoff_api::wire::index`: its status).
fn answered(answer: IndexAnswer<'_>) -> Result<web_sys::Response> {
    let (rendered, headers) = handoff_api::wire::index(answer);
    crate::http::rendered(rendered, &headers)
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl OwnerIndex {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, env: Env) -> OwnerIndex {
        send::loopback_only(crate::bindings::test_hooks_on(&env));
        OwnerIndex {
            state: State::from(state),
            refusing: Cell::new(false),
            schema_ready: Cell::new(false),
            webhooks_ready: Cell::new(None),
            holding: Cell::new(false),
            pending_max: crate::bindings::webhook_pending_max(&env),
            sender: crate::bindings::push_sender(&env).map(std::rc::Rc::new),
            bounds: Bounds { open_cap: crate::bindings::open_handoffs_cap(&env), retention: crate::bindings::retention(&env) },
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        self.serve(req).await.map(JsValue::from).map_err(JsValue::from)
    }

    /// Sends the webhook deliveries that are due.
    pub async fn alarm(&self) -> std::result::Result<JsValue, JsValue> {
        self.send_due().map_err(JsValue::from)?;
        crate::http::plain("ok").map(JsValue::from).map_err(JsValue::from)
    }
}

impl OwnerIndex {
    async fn serve(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        // An unreadable ask is a deploy mixing versions, which a retry outlives: 503.
        let ask: IndexAsk = match crate::http::read_ask(&req).await {
            Ok(Ok(ask)) => ask,
            Ok(Err(e)) => return store_failed("unreadable index ask", &e),
            Err(e) => return store_failed("unreadable index ask", &e),
        };
        let answered = match ask {
            IndexAsk::Put { row, passed } => self.put(&row, &passed),
            IndexAsk::List { query, if_none_match } => self.list(&query, if_none_match.as_deref()),
            IndexAsk::RefuseDeliveries { on } => {
                self.refusing.set(on);
                answered(IndexAnswer::Refusing(on))
            }
            IndexAsk::TestStorage => answered(IndexAnswer::StorageBytes(self.state.storage().sql().database_size())),
            IndexAsk::TestPutUnreadable { id } => self.put_unreadable(&id),
            IndexAsk::WebhookAdd { webhook, secret } => self.add_webhook(webhook, secret),
            IndexAsk::WebhookList => self.list_webhooks(),
            IndexAsk::WebhookDelete { id } => self.delete_webhook(&id),
            IndexAsk::WebhookDeliveries { id } => self.webhook_deliveries(&id),
            IndexAsk::PushSubscribe { subscription } => match push::check_curve(&subscription).await {
                Ok(()) => self.subscribe(subscription),
                Err(refused) => crate::http::refusal(&refused),
            },
            IndexAsk::PushSubscriptions => self.subscriptions(),
            IndexAsk::PushUnsubscribe { id } => self.unsubscribe(&id),
            IndexAsk::TestHoldWebhooks { on } => {
                self.holding.set(on);
                answered(IndexAnswer::Holding(on))
            }
            IndexAsk::Open { row } => self.open(&row),
            IndexAsk::Drop { id } => self.drop_row(&id),
        };
        answered.or_else(|e| store_failed("owner index", &e))
    }

    /// Which of the list's tables exist, from the catalogue alone (reading writes nothing).
    fn tables(&self) -> Result<Vec<String>> {
        let sql = self.state.storage().sql();
        let rows: Vec<NameRow> = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('list', 'rows')", None)?.to_array()?;
        Ok(rows.into_iter().map(|r| r.name).collect())
    }

    fn has_schema(&self) -> Result<bool> {
        if self.schema_ready.get() {
            return Ok(true);
        }
        let ready = self.tables()?.iter().any(|t| t == "list");
        self.schema_ready.set(ready);
        Ok(ready)
    }

    /// Writes the schema before the first row, and moves an earlier build's rows into it, in
    /// one transaction.
    fn ensure_schema(&self) -> Result<()> {
        if self.has_schema()? {
            return Ok(());
        }
        let earlier = self.tables()?.iter().any(|t| t == "rows");
        let mut statements: Vec<String> = SCHEMA.iter().map(|s| s.to_string()).collect();
        if earlier {
            statements.push(self.move_earlier_rows()?);
        }
        self.transaction(statements.into_iter().map(|s| (s, vec![])).collect())?;
        self.schema_ready.set(true);
        Ok(())
    }

    /// Runs `statements` in one `transactionSync`: all of them, or none.
    fn transaction(&self, statements: Vec<Statement>) -> Result<()> {
        let storage = self.state.storage();
        let sql = storage.sql();
        crate::sqlite::transaction_sync(&storage, move || {
            for (statement, args) in statements {
                sql.exec(&statement, args).map_err(JsValue::from)?;
            }
            Ok(())
        })
    }

    /// The statement that copies an earlier build's `rows` into `list`.
    fn move_earlier_rows(&self) -> Result<String> {
        let sql = self.state.storage().sql();
        let columns: Vec<NameRow> = sql.exec("SELECT name FROM pragma_table_info('rows')", None)?.to_array()?;
        let has = |c: &str| columns.iter().any(|n| n.name == c);
        let fields: Vec<String> = EARLIER_COLUMNS
            .iter()
            .map(|(field, expr)| if has(field) { format!("'{field}', {expr}") } else { format!("'{field}', NULL") })
            .collect();
        Ok(format!("INSERT OR IGNORE INTO list (id, updated_at, state, version, row) SELECT id, updated_at, state, version, json_object({}) FROM rows", fields.join(", ")))
    }

    /// Stores `row` when the core says (`owner::list::put`: newer than the row held), with the
    /// deliveries of the notices it owes along the chain from the row held through the rows it
    /// `passed` (only `row` is listed), in one transaction, then the alarm that sends them.
    fn put(&self, row: &Row, passed: &[Row]) -> Result<web_sys::Response> {
        if self.refusing.get() {
            return crate::http::refusal(&ApiError::new(Code::StoreUnavailable, "deliveries are refused (test hook)"));
        }
        self.ensure_schema()?;
        let sql = self.state.storage().sql();
        let notify = self.has_webhooks()?;
        // The row held is parsed only where it can owe a notice.
        let stored: Vec<HeldRow> = sql.exec("SELECT version, row FROM list WHERE id = ?", vec![row.id.as_str().into()])?.to_array()?;
        let readable = stored.first().filter(|_| notify).and_then(|h| serde_json::from_str::<Row>(&h.row).ok());
        let held = stored.first().map(|h| Held { version: h.version.max(0) as u64, row: readable.as_ref() });
        let put = handoff_core::owner::list::put(held, passed, row, notify);
        if !put.store {
            return answered(IndexAnswer::Done);
        }
        let json = serde_json::to_string(row).map_err(|e| Error::RustError(e.to_string()))?;
        let bindings = vec![row.id.as_str().into(), row.updated_at.ms().into(), row.state.as_str().into(), (row.version as i64).into(), json.into()];
        let owed = deliveries::owe(&sql, &put.notices, self.sender.is_some(), self.pending_max, now_ms())?;
        if owed.is_empty() {
            sql.exec(STORE_ROW, bindings)?;
        } else {
            let mut statements = vec![(STORE_ROW.to_string(), bindings)];
            statements.extend(owed);
            self.transaction(statements)?;
            deliveries::arm(self.state.storage().as_raw())?;
        }
        answered(IndexAnswer::Done)
    }

    /// Whether the owner has notification tables, brought to this build's the first time an
    /// earlier build's are found (in one transaction).
    fn has_webhooks(&self) -> Result<bool> {
        if let Some(ready) = self.webhooks_ready.get() {
            return Ok(ready);
        }
        let ready = match deliveries::tables(&self.state.storage().sql())? {
            deliveries::Tables::None => false,
            deliveries::Tables::Current => true,
            earlier => {
                self.transaction(deliveries::schema(earlier))?;
                true
            }
        };
        self.webhooks_ready.set(Some(ready));
        Ok(ready)
    }

    fn ensure_webhooks(&self) -> Result<()> {
        if self.has_webhooks()? {
            return Ok(());
        }
        self.transaction(deliveries::schema(deliveries::Tables::None))?;
        self.webhooks_ready.set(Some(true));
        Ok(())
    }

    fn add_webhook(&self, webhook: handoff_api::notifications::Webhook, secret: String) -> Result<web_sys::Response> {
        self.ensure_webhooks()?;
        match webhooks::add(&self.state.storage().sql(), webhook, secret) {
            Ok(created) => answered(IndexAnswer::WebhookCreated(&created)),
            Err(refused) => crate::http::refusal(&refused),
        }
    }

    fn list_webhooks(&self) -> Result<web_sys::Response> {
        if !self.has_webhooks()? {
            return answered(IndexAnswer::Webhooks(&handoff_api::notifications::Webhooks { webhooks: vec![] }));
        }
        answered(IndexAnswer::Webhooks(&webhooks::list(&self.state.storage().sql())?))
    }

    fn delete_webhook(&self, id: &str) -> Result<web_sys::Response> {
        let gone = || crate::http::refusal(&ApiError::new(Code::WebhookNotFound, "no such webhook"));
        if !self.has_webhooks()? {
            return gone();
        }
        match webhooks::delete(&self.state.storage().sql(), id) {
            Ok(statements) => {
                self.transaction(statements)?;
                answered(IndexAnswer::Removed)
            }
            Err(refused) => crate::http::refusal(&refused),
        }
    }

    fn webhook_deliveries(&self, id: &str) -> Result<web_sys::Response> {
        if !self.has_webhooks()? {
            return crate::http::refusal(&ApiError::new(Code::WebhookNotFound, "no such webhook"));
        }
        match webhooks::deliveries(&self.state.storage().sql(), id) {
            Ok(deliveries) => answered(IndexAnswer::WebhookDeliveries(&deliveries)),
            Err(refused) => crate::http::refusal(&refused),
        }
    }

    /// The alarm's work: the due deliveries started, or (held by a test) the alarm set again.
    fn send_due(&self) -> Result<()> {
        if !self.has_webhooks()? {
            return Ok(());
        }
        let storage = self.state.storage();
        if self.holding.get() {
            crate::alarm::set(storage.as_raw(), now_ms() + 1_000, "held webhook deliveries (test hook)")?;
            return Ok(());
        }
        deliveries::send_due(&storage.sql(), storage.as_raw(), self.sender.as_ref())
    }

    fn subscribe(&self, subscription: handoff_api::notifications::StoredSubscription) -> Result<web_sys::Response> {
        self.ensure_webhooks()?;
        match push::subscribe(&self.state.storage().sql(), subscription) {
            Ok(created) => answered(IndexAnswer::SubscriptionCreated(&created)),
            Err(refused) => crate::http::refusal(&refused),
        }
    }

    fn subscriptions(&self) -> Result<web_sys::Response> {
        if !self.has_webhooks()? {
            return answered(IndexAnswer::Subscriptions(&handoff_api::notifications::PushSubscriptions { subscriptions: vec![] }));
        }
        answered(IndexAnswer::Subscriptions(&push::list(&self.state.storage().sql())?))
    }

    fn unsubscribe(&self, id: &str) -> Result<web_sys::Response> {
        if !self.has_webhooks()? {
            return crate::http::refusal(&ApiError::new(Code::SubscriptionNotFound, "no such push subscription"));
        }
        match push::unsubscribe(&self.state.storage().sql(), id) {
            Ok(statements) => {
                self.transaction(statements)?;
                answered(IndexAnswer::Removed)
            }
            Err(refused) => crate::http::refusal(&refused),
        }
    }

    /// Test hook: a row under `id` whose value is not a row, newest of all.
    fn put_unreadable(&self, id: &str) -> Result<web_sys::Response> {
        self.ensure_schema()?;
        let bindings = vec![id.into(), i64::MAX.into(), "open".into(), i64::MAX.into(), "{\"not\": \"a row\"".into()];
        self.state.storage().sql().exec(STORE_ROW, bindings)?;
        answered(IndexAnswer::Done)
    }

    fn list(&self, query: &ListQuery, if_none_match: Option<&str>) -> Result<web_sys::Response> {
        if !self.has_schema()? {
            return answered(IndexAnswer::Page { page: &Page { handoffs: vec![], cursor: None }, if_none_match });
        }
        let sql = self.state.storage().sql();
        let state = query.state.map(HandoffState::as_str);
        let (at, id) = match &query.cursor {
            Some(c) => (c.updated_at, c.id.clone()),
            None => (i64::MAX, String::new()),
        };
        // One more row than the page, to know whether a next page exists.
        let stored: Vec<ListRow> = sql
            .exec(
                "SELECT row FROM list
                 WHERE (?1 IS NULL OR state = ?1) AND (updated_at < ?2 OR (updated_at = ?2 AND (?3 = '' OR id < ?3)))
                 ORDER BY updated_at DESC, id DESC LIMIT ?4",
                vec![state.into(), at.into(), id.into(), (query.limit as i64 + 1).into()],
            )?
            .to_array()?;
        let rows = stored
            .iter()
            .map(|r| serde_json::from_str::<Row>(&r.row).map_err(|e| Error::RustError(format!("a stored list row is unreadable: {e}"))))
            .collect::<Result<Vec<Row>>>()?;
        answered(IndexAnswer::Page { page: &Page::of(rows, query), if_none_match })
    }
}

// ---- Bounds: the open cap a create's row is admitted against, and retention. ----

/// What bounds one owner's list: at most `open_cap` open rows, and closed rows only within
/// `retention` of their close (their hand-offs erase themselves then; the list drops any left).
struct Bounds {
    open_cap: usize,
    retention: handoff_core::retention::Retention,
}

#[derive(serde::Deserialize)]
struct Count {
    n: i64,
}

/// Closed rows past retention: their hand-offs are erased, or their erasure is overdue.
const DROP_EXPIRED: &str = "DELETE FROM list WHERE state = ? AND updated_at < ?";
/// Open rows other than the one being added.
const COUNT_OPEN: &str = "SELECT count(*) AS n FROM list WHERE state = ? AND id != ?";
/// A row stored under its id, in place of any held: a delivered row the core found newer, or
/// a new hand-off's first row (which replaces a row left by a create whose commit failed after
/// its admission, since the hand-off is starting now at version 1).
const STORE_ROW: &str = "INSERT OR REPLACE INTO list (id, updated_at, state, version, row) VALUES (?, ?, ?, ?, ?)";

impl OwnerIndex {
    /// Admits a new hand-off's first row against the open cap and adds it, in one step with
    /// no await, so that two creates never both take the last place (the core decides).
    fn open(&self, row: &Row) -> Result<web_sys::Response> {
        use handoff_core::index::{admit_open, Admission};
        self.ensure_schema()?;
        let sql = self.state.storage().sql();
        let expired_before = self.bounds.retention.expired_before(crate::clock::now_ms());
        sql.exec(DROP_EXPIRED, vec![HandoffState::Closed.as_str().into(), expired_before.into()])?;
        let counted: Vec<Count> = sql.exec(COUNT_OPEN, vec![HandoffState::Open.as_str().into(), row.id.as_str().into()])?.to_array()?;
        let open = counted.first().map_or(0, |c| c.n.max(0) as u64);
        if let Err(crowded) = admit_open(open, self.bounds.open_cap) {
            return answered(IndexAnswer::Admission(&Admission::No(crowded)));
        }
        let json = serde_json::to_string(row).map_err(|e| Error::RustError(e.to_string()))?;
        let bindings = vec![row.id.as_str().into(), row.updated_at.ms().into(), row.state.as_str().into(), (row.version as i64).into(), json.into()];
        sql.exec(STORE_ROW, bindings)?;
        answered(IndexAnswer::Admission(&Admission::Yes))
    }

    /// The hand-off `id` was erased: its row goes (an index without a list has none).
    fn drop_row(&self, id: &str) -> Result<web_sys::Response> {
        if self.has_schema()? {
            self.state.storage().sql().exec("DELETE FROM list WHERE id = ?", vec![id.into()])?;
        }
        answered(IndexAnswer::Done)
    }
}

