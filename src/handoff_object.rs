//! `HandoffObject`: the Durable Object that holds one hand-off. It loads the record, applies
//! the pure turn machine, stores what moved, answers and wakes waiters; it has no rules of
//! its own. Every mutation's read, check and write run without an `await` between them, so
//! the runtime commits them as one transaction and no other request interleaves.

use crate::error::{ApiError, Code};
use crate::index::IndexRow;
use crate::limits::{OUTBOX_RETRY_MS_MAX, OUTBOX_RETRY_MS_MIN, WAITERS_PER_HANDOFF_MAX, WAIT_JITTER_MS_MAX};
use crate::protocol::{Ask, Caller, IndexAsk, Op};
use crate::token::Role;
use crate::turn::{self, Command, Record};
use crate::waiters::Waiters;
use futures::future::{select, Either};
use serde_json::json;
use std::cell::RefCell;
use std::time::Duration;
use worker::*;

#[durable_object]
pub struct HandoffObject {
    state: State,
    env: Env,
    /// The stored record, read once per object lifetime; `None` until created.
    record: RefCell<Option<Option<Record>>>,
    waiters: RefCell<Waiters>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (k INTEGER PRIMARY KEY CHECK (k = 0), owner TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL, attempts INTEGER NOT NULL);
";

/// The owners' index binding, as in wrangler.toml.
const OWNER_INDEX: &str = "OWNER_INDEX";

#[derive(serde::Deserialize)]
struct OutboxRow {
    owner: String,
    version: i64,
    row: String,
    attempts: i64,
}

#[derive(serde::Deserialize)]
struct StoredRow {
    record: String,
}

impl DurableObject for HandoffObject {
    fn new(state: State, env: Env) -> Self {
        state.storage().sql().exec(SCHEMA, None).expect("schema applies");
        HandoffObject { state, env, record: RefCell::new(None), waiters: RefCell::new(Waiters::default()) }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ask: Ask = match req.json().await {
            Ok(ask) => ask,
            Err(_) => return answer_error(&ApiError::invalid("internal: unreadable ask"), None),
        };
        match ask.op {
            Op::Create { id, session, machine, size } => self.create(&ask.caller, id, session, machine, size).await,
            Op::Get => {
                let record = self.owned(&ask.caller)?;
                match record {
                    Ok(r) => answer_record(200, &r),
                    Err(e) => answer_error(&e, None),
                }
            }
            Op::Apply { command } => self.apply(&ask.caller, &command).await,
            Op::Wait { after, timeout_s } => self.wait(&ask.caller, after, timeout_s).await,
            Op::Floor => Response::from_json(&json!({"ok": true})),
        }
    }

    /// Retries what the owner's index is still owed.
    async fn alarm(&self) -> Result<Response> {
        self.deliver().await?;
        Response::ok("delivered or rescheduled")
    }
}

impl HandoffObject {
    fn load(&self) -> Result<Option<Record>> {
        if let Some(cached) = self.record.borrow().as_ref() {
            return Ok(cached.clone());
        }
        let rows: Vec<StoredRow> = self.state.storage().sql().exec("SELECT record FROM handoff WHERE k = 0", None)?.to_array()?;
        let record = match rows.first() {
            Some(row) => Some(serde_json::from_str(&row.record).map_err(|e| Error::RustError(e.to_string()))?),
            None => None,
        };
        *self.record.borrow_mut() = Some(record.clone());
        Ok(record)
    }

    /// The record, if it exists and the caller may see it; anything else is `handoff.not_found`.
    fn owned(&self, caller: &Caller) -> Result<std::result::Result<Record, ApiError>> {
        let not_found = ApiError::new(Code::HandoffNotFound, "no such hand-off");
        Ok(match self.load()? {
            Some(r) if r.owner == caller.owner => Ok(r),
            _ => Err(not_found),
        })
    }

    /// Writes the record, its history event and what the owner's index is now owed (the
    /// outbox) in the same transaction, then wakes waiters. The caller delivers the outbox.
    fn store(&self, record: &Record, kind: &str, actor: Role) -> Result<()> {
        let sql = self.state.storage().sql();
        let json = serde_json::to_string(record).map_err(|e| Error::RustError(e.to_string()))?;
        let row = serde_json::to_string(&IndexRow::of(record)).map_err(|e| Error::RustError(e.to_string()))?;
        sql.exec("INSERT OR REPLACE INTO handoff (k, record) VALUES (0, ?)", vec![json.into()])?;
        sql.exec(
            "INSERT OR REPLACE INTO outbox (k, owner, version, row, attempts) VALUES (0, ?, ?, ?, 0)",
            vec![record.owner.clone().into(), (record.version as i64).into(), row.into()],
        )?;
        let actor = match actor {
            Role::Owner => "owner",
            Role::Machine => "machine",
        };
        sql.exec(
            "INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)",
            vec![(record.version as i64).into(), record.updated_at.into(), kind.into(), actor.into()],
        )?;
        *self.record.borrow_mut() = Some(Some(record.clone()));
        self.waiters.borrow_mut().wake_all();
        Ok(())
    }

    /// Sends the owner's index the row it is owed. Before answering a change, so that a list
    /// that starts after the answer sees it; on failure the alarm retries with backoff.
    async fn deliver(&self) -> Result<()> {
        let sql = self.state.storage().sql();
        let owed: Vec<OutboxRow> = sql.exec("SELECT owner, version, row, attempts FROM outbox WHERE k = 0", None)?.to_array()?;
        let Some(owed) = owed.into_iter().next() else {
            return Ok(());
        };
        if self.send_row(&owed).await {
            sql.exec("DELETE FROM outbox WHERE k = 0 AND version = ?", vec![owed.version.into()])?;
            return Ok(());
        }
        let attempts = owed.attempts + 1;
        sql.exec("UPDATE outbox SET attempts = ? WHERE k = 0 AND version = ?", vec![attempts.into(), owed.version.into()])?;
        let backoff_ms = (OUTBOX_RETRY_MS_MIN << attempts.min(16)).min(OUTBOX_RETRY_MS_MAX);
        self.state.storage().set_alarm(Duration::from_millis(backoff_ms as u64)).await
    }

    async fn send_row(&self, owed: &OutboxRow) -> bool {
        let Ok(row) = serde_json::from_str::<IndexRow>(&owed.row) else {
            return false;
        };
        let Ok(payload) = serde_json::to_string(&IndexAsk::Put { row }) else {
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
            return match existing.check_create_again(&machine, &size) {
                Ok(()) => answer_record(200, &existing),
                Err(code) => answer_error(&ApiError::new(code, "this session already has a hand-off with another machine or size"), Some(&existing)),
            };
        }
        let record = Record::create(id, caller.owner.clone(), session, machine, size, now_ms());
        self.store(&record, "create", caller.role)?;
        self.deliver().await?;
        answer_record(201, &record)
    }

    async fn apply(&self, caller: &Caller, command: &Command) -> Result<Response> {
        let record = match self.owned(caller)? {
            Ok(r) => r,
            Err(e) => return answer_error(&e, None),
        };
        match turn::apply(&record, command, now_ms()) {
            Err(code) => answer_error(&ApiError::new(code, refusal_message(code, &record)), Some(&record)),
            Ok(applied) => {
                if applied.moved {
                    self.store(&applied.record, command_kind(command), caller.role)?;
                    self.deliver().await?;
                }
                answer_record(200, &applied.record)
            }
        }
    }

    async fn wait(&self, caller: &Caller, after: u64, timeout_s: u64) -> Result<Response> {
        let record = match self.owned(caller)? {
            Ok(r) => r,
            Err(e) => return answer_error(&e, None),
        };
        if turn::wait_answers_now(&record, after) || timeout_s == 0 {
            return answer_record(200, &record);
        }
        let Some((id, woken)) = self.waiters.borrow_mut().hold(self.waiters_max()) else {
            return answer_error(&ApiError::new(Code::WaitTooMany, "this hand-off holds as many waiters as it may"), None);
        };
        let jitter_ms = (js_sys::Math::random() * WAIT_JITTER_MS_MAX as f64) as u64;
        let timeout = Delay::from(Duration::from_millis(timeout_s * 1000 + jitter_ms));
        if let Either::Right(_) = select(woken, timeout).await {
            self.waiters.borrow_mut().release(id);
        }
        match self.load()? {
            Some(r) => answer_record(200, &r),
            None => answer_error(&ApiError::new(Code::HandoffNotFound, "no such hand-off"), None),
        }
    }
}

/// The name of an owner's index object.
pub fn owner_index_name(owner: &str) -> String {
    format!("owner:{owner}")
}

impl HandoffObject {
    /// [`WAITERS_PER_HANDOFF_MAX`], or the lower cap a test asks for where test hooks are on
    /// (so that the cap can be shown without holding ten thousand connections).
    fn waiters_max(&self) -> usize {
        let hooks_on = self.env.var(TEST_HOOKS).is_ok_and(|v| v.to_string() == "1");
        let test_cap = self.env.var(TEST_WAITERS_MAX).ok().and_then(|v| v.to_string().parse().ok());
        match test_cap {
            Some(cap) if hooks_on => cap,
            _ => WAITERS_PER_HANDOFF_MAX,
        }
    }
}

/// Test-only variables, set on `wrangler dev`'s command line by the tests, never in wrangler.toml.
pub const TEST_HOOKS: &str = "HANDOFF_TEST_HOOKS";
const TEST_WAITERS_MAX: &str = "HANDOFF_TEST_WAITERS_MAX";

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

fn command_kind(command: &Command) -> &'static str {
    match command {
        Command::OpenTurn { .. } => "turn_opened",
        Command::Report { .. } => "report",
        Command::Cancel { .. } => "cancel",
        Command::Close => "close",
    }
}

fn refusal_message(code: Code, r: &Record) -> String {
    let now = format!("turn {} is current ({}, version {})", r.turn, r.status.as_str(), r.version);
    match code {
        Code::HandoffStale => format!("the report is for an older turn: {now}"),
        Code::TurnOutOfOrder => format!("that turn has not been opened: {now}"),
        Code::TurnFinished => format!("that turn has ended: {now}"),
        Code::TurnRunning => format!("a turn is still going; steer it or cancel it first: {now}"),
        Code::TurnConflict => format!("the request names another turn than the current one: {now}"),
        Code::HandoffClosed => format!("the hand-off is closed (version {})", r.version),
        _ => now,
    }
}

fn answer_record(status: u16, record: &Record) -> Result<Response> {
    Ok(Response::from_json(&json!({"handoff": record.view()}))?.with_status(status))
}

fn answer_error(error: &ApiError, record: Option<&Record>) -> Result<Response> {
    let mut body = error.body();
    if let Some(r) = record {
        body["handoff"] = serde_json::to_value(r.view()).unwrap_or_default();
    }
    Ok(Response::from_json(&body)?.with_status(error.code.status()))
}
