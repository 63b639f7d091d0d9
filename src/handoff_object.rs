//! `HandoffObject`: the Durable Object that holds one hand-off. It loads the hand-off, applies
//! the pure core (`crate::handoff::apply`), stores what moved, answers and wakes waiters; it
//! has no rules of its own. Every mutation's read, check and write run without an `await`
//! between them, so the runtime commits them as one transaction and no other request
//! interleaves. SQL lives here and nowhere else for this object's tables.

use crate::briefing::{self, Reach};
use crate::error::{ApiError, Code};
use crate::handoff::{self, Change, Dirty, Extras, Handoff};
use crate::index::IndexRow;
use crate::limits::{
    IDEMPOTENCY_TTL_MS, OUTBOX_RETRY_MS_MAX, OUTBOX_RETRY_MS_MIN, OUTBOX_SAFETY_ALARM_MS, WAITERS_PER_HANDOFF_MAX,
    WAIT_JITTER_MS_MAX, WORK_RECORD_BYTES_MAX,
};
use crate::package::{Ledger, TurnEntry};
use crate::protocol::{Ask, Caller, Idempotency, IndexAsk, Op};
use crate::turn::{self, Record};
use crate::waiters::{Published, Waiters};
use crate::work::Work;
use futures::future::{select, Either};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
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
    /// The highest version the owner's index acknowledged in this object's lifetime.
    delivered: Cell<u64>,
    /// The row the index is owed after the latest change (also in the outbox table).
    owed: RefCell<Option<OutboxRow>>,
    /// A delivery is on its way; changes that come meanwhile wait for it, then send together.
    sending: Cell<bool>,
    /// Whether the last delivery reached the index.
    last_send_ok: Cell<bool>,
    /// When the alarm this object set is due, until it runs (in ms): a change that finds one
    /// pending schedules none, which saves the runtime's alarm store a durable write per change.
    alarm_at: Cell<Option<i64>>,
    /// Changes waiting for the delivery on its way.
    delivery_waiters: RefCell<Vec<futures::channel::oneshot::Sender<()>>>,
    waiters: Rc<RefCell<Waiters>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parts (name TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (turn INTEGER PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (k INTEGER PRIMARY KEY CHECK (k = 0), owner TEXT NOT NULL, version INTEGER NOT NULL, row TEXT NOT NULL, attempts INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS idempotency_at ON idempotency (at);
";

/// The owners' index binding, as in wrangler.toml.
const OWNER_INDEX: &str = "OWNER_INDEX";
/// Test-only variables, set on `wrangler dev`'s command line by the tests, never in wrangler.toml.
pub const TEST_HOOKS: &str = "HANDOFF_TEST_HOOKS";
const TEST_WAITERS_MAX: &str = "HANDOFF_TEST_WAITERS_MAX";

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

#[derive(Clone, serde::Deserialize)]
struct OutboxRow {
    owner: String,
    version: i64,
    row: String,
    attempts: i64,
}

#[derive(serde::Deserialize)]
struct IdempotencyRow {
    fingerprint: String,
    status: i64,
    body: String,
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

    fn refused(error: &ApiError, handoff: Option<&Handoff>) -> Answer {
        let mut body = error.body();
        if let Some(h) = handoff {
            body["handoff"] = serde_json::to_value(h.record.view()).unwrap_or_default();
            // A stale accept carries the hash that is current, so the destination can re-read.
            if let (Code::PackageStale, Some(current)) = (error.code, &h.ledger.current) {
                body["package_hash"] = json!(current.hash);
                body["package_version"] = json!(current.version);
            }
        }
        Answer { status: error.code.status(), body }
    }

    fn into_response(self) -> Result<Response> {
        Ok(Response::from_json(&self.body)?.with_status(self.status))
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
        state.storage().sql().exec(SCHEMA, None).expect("schema applies");
        HandoffObject {
            state,
            env,
            cached: RefCell::new(None),
            published: Rc::new(RefCell::new(Published::default())),
            delivered: Cell::new(0),
            owed: RefCell::new(None),
            sending: Cell::new(false),
            last_send_ok: Cell::new(true),
            alarm_at: Cell::new(None),
            delivery_waiters: RefCell::new(Vec::new()),
            waiters: Rc::new(RefCell::new(Waiters::default())),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ask: Ask = match req.json().await {
            Ok(ask) => ask,
            Err(_) => return Answer::refused(&ApiError::invalid("internal: unreadable ask"), None).into_response(),
        };
        match ask.op {
            Op::Create { id, session, machine, size } => self.create(&ask.caller, id, session, machine, size).await,
            Op::Change { change } => self.change(&ask.caller, &change, ask.idempotency.as_ref()).await,
            Op::Wait { after, timeout_s } => self.wait(&ask.caller, after, timeout_s),
            Op::Floor => Response::from_json(&json!({"ok": true})),
            read => self.read(&ask.caller, &read),
        }
    }

    /// Retries what the owner's index is still owed: after a failed delivery, or after a
    /// Worker that died between a change and its delivery (the safety alarm).
    async fn alarm(&self) -> Result<Response> {
        self.alarm_at.set(None);
        let sql = self.state.storage().sql();
        let owed: Vec<OutboxRow> = sql.exec("SELECT owner, version, row, attempts FROM outbox WHERE k = 0", None)?.to_array()?;
        if let Some(owed) = owed.into_iter().next() {
            self.deliver(owed).await?;
        }
        Response::ok("delivered or rescheduled")
    }
}

impl HandoffObject {
    fn load(&self) -> Result<Option<Rc<Handoff>>> {
        if let Some(cached) = self.cached.borrow().as_ref() {
            return Ok(cached.clone());
        }
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
                let turns: Vec<TurnRow> = sql.exec("SELECT entry FROM turns ORDER BY turn", None)?.to_array()?;
                if !turns.is_empty() {
                    h.lineage = turns.iter().map(|t| from_json::<TurnEntry>(&t.entry)).collect::<Result<_>>()?;
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

    /// Writes what moved — the record, the parts marked dirty, the history event, the row the
    /// owner's index is now owed (the outbox) and a safety alarm that delivers it should this
    /// Worker die first — with no `await` in between: one transaction. Answers the stored
    /// hand-off, which the caller publishes once the commit is confirmed, and the outbox row,
    /// which it delivers.
    /// `work_json` is the work record already serialised (for its size check) when it is dirty.
    fn store(&self, h: Handoff, dirty: Dirty, work_json: Option<String>, kind: &str, caller: &Caller) -> Result<(Rc<Handoff>, OutboxRow)> {
        debug_assert_eq!(dirty.work, work_json.is_some(), "the work is serialised exactly when it moved");
        // Only the parts that moved are serialised (a report touches none of them), and all of
        // it before the first write, so that a failure writes nothing.
        let record_json = to_json(&h.record)?;
        let parts = [
            ("work", work_json),
            ("ledger", dirty.ledger.then(|| to_json(&h.ledger)).transpose()?),
            ("extras", dirty.extras.then(|| to_json(&h.extras)).transpose()?),
        ];
        let sql = self.state.storage().sql();
        let record = &h.record;
        sql.exec("INSERT OR REPLACE INTO handoff (k, record) VALUES (0, ?)", vec![record_json.into()])?;
        for (name, json) in parts {
            if let Some(json) = json {
                sql.exec("INSERT OR REPLACE INTO parts (name, json) VALUES (?, ?)", vec![name.into(), json.into()])?;
            }
        }
        for entry in &h.lineage[dirty.lineage_from.unwrap_or(h.lineage.len())..] {
            sql.exec("INSERT OR REPLACE INTO turns (turn, entry) VALUES (?, ?)", vec![(entry.turn as i64).into(), to_json(entry)?.into()])?;
        }
        let actor = if caller.actor() == crate::work::Actor::Owner { "owner" } else { "machine" };
        sql.exec(
            "INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)",
            vec![(record.version as i64).into(), record.updated_at.into(), kind.into(), actor.into()],
        )?;
        let owed = OutboxRow {
            owner: record.owner.clone(),
            version: record.version as i64,
            row: to_json(&IndexRow::of(record))?,
            attempts: 0,
        };
        sql.exec(
            "INSERT OR REPLACE INTO outbox (k, owner, version, row, attempts) VALUES (0, ?, ?, ?, 0)",
            vec![owed.owner.clone().into(), owed.version.into(), owed.row.clone().into()],
        )?;
        // The safety alarm, unless one is pending. Not awaited on purpose: an un-awaited storage
        // write joins this transaction.
        let now = now_ms();
        if self.alarm_at.get().is_none_or(|at| at <= now) {
            let at = now + OUTBOX_SAFETY_ALARM_MS;
            let _ = self.state.storage().as_raw().set_alarm(js_sys::Date::new(&(at as f64).into()), js_sys::Object::new());
            self.alarm_at.set(Some(at));
        }
        let h = Rc::new(h);
        *self.cached.borrow_mut() = Some(Some(h.clone()));
        *self.owed.borrow_mut() = Some(owed.clone());
        Ok((h, owed))
    }

    /// Once the runtime confirms the commit that stored `h`, makes it the version waiters are
    /// told, and wakes those it answers. Waking earlier would hand waiters a body chunk on a
    /// response already under way, which the output gate may not hold back, so a failed commit
    /// could show them a version that never was.
    async fn publish(&self, h: Rc<Handoff>) -> Result<()> {
        self.state.storage().sync().await?;
        let mut published = self.published.borrow_mut();
        published.confirm(h);
        if !self.waiters.borrow().is_empty() {
            if let (Some(h), Some(answer)) = (published.handoff().cloned(), published.answer()) {
                self.waiters.borrow_mut().wake(&h, &answer);
            }
        }
        Ok(())
    }

    /// Returns once the owner's index has `version` (or a later one), so that a list started
    /// after the answer shows the change. Changes that arrive while a delivery is on its way
    /// wait for it and then send only the newest row: under concurrent changes, one index
    /// write carries many of them. On failure the alarm retries and the change is answered.
    async fn deliver_through(&self, version: u64) -> Result<()> {
        loop {
            if self.delivered.get() >= version {
                return Ok(());
            }
            if self.sending.get() {
                let (done, wait) = futures::channel::oneshot::channel();
                self.delivery_waiters.borrow_mut().push(done);
                let _ = wait.await;
                if !self.last_send_ok.get() {
                    return Ok(());
                }
                continue;
            }
            let Some(owed) = self.owed.borrow().clone() else {
                return Ok(());
            };
            self.sending.set(true);
            let ok = self.send_row(&owed).await;
            self.sending.set(false);
            self.last_send_ok.set(ok);
            if ok {
                self.delivered.set(self.delivered.get().max(owed.version as u64));
            }
            for done in self.delivery_waiters.borrow_mut().drain(..) {
                let _ = done.send(());
            }
            if !ok {
                return self.retry_in(OUTBOX_RETRY_MS_MIN).await;
            }
        }
    }

    /// The alarm's delivery of the stored outbox row, retried with backoff. The outbox row
    /// stays after a delivery (the next change overwrites it): deleting it would cost one more
    /// durable commit per change, and a replay is harmless since the index keeps only higher
    /// versions.
    async fn deliver(&self, owed: OutboxRow) -> Result<()> {
        if owed.version as u64 <= self.delivered.get() {
            return Ok(());
        }
        if self.send_row(&owed).await {
            self.delivered.set(self.delivered.get().max(owed.version as u64));
            return Ok(());
        }
        let sql = self.state.storage().sql();
        let attempts = owed.attempts + 1;
        sql.exec("UPDATE outbox SET attempts = ? WHERE k = 0 AND version = ?", vec![attempts.into(), owed.version.into()])?;
        let backoff_ms = (OUTBOX_RETRY_MS_MIN << attempts.min(16)).min(OUTBOX_RETRY_MS_MAX);
        self.retry_in(backoff_ms).await
    }

    /// Schedules the alarm to retry a delivery `ms` from now (it replaces any pending one).
    async fn retry_in(&self, ms: i64) -> Result<()> {
        self.alarm_at.set(Some(now_ms() + ms));
        self.state.storage().set_alarm(Duration::from_millis(ms as u64)).await
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
            let answer = match existing.record.check_create_again(&machine, &size) {
                Ok(()) => Answer::ok(existing.answer(&Default::default())),
                Err(code) => Answer::refused(
                    &ApiError::new(code, "this session already has a hand-off with another machine or size"),
                    Some(&existing),
                ),
            };
            return answer.into_response();
        }
        let h = Handoff::create(Record::create(id, caller.owner.clone(), session, machine, size, now_ms()));
        let dirty = Dirty { lineage_from: Some(0), ..Dirty::default() };
        let body = h.answer(&Default::default());
        let (stored, owed) = self.store(h, dirty, None, "create", caller)?;
        self.publish(stored).await?;
        self.deliver_through(owed.version as u64).await?;
        Answer { status: 201, body }.into_response()
    }

    async fn change(&self, caller: &Caller, change: &Change, idempotency: Option<&Idempotency>) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(&e, None).into_response(),
        };
        if let Some(idem) = idempotency {
            if let Some(replay) = self.replay(idem)? {
                return Ok(replay);
            }
        }
        let (answer, owed) = match handoff::apply(&h, change, caller.actor(), now_ms()) {
            Err(e) => (Answer::refused(&e, Some(&h)), None),
            Ok(out) if out.moved => {
                let work_json = out.dirty.work.then(|| to_json(&out.next.work)).transpose()?;
                if work_json.as_ref().is_some_and(|json| json.len() > WORK_RECORD_BYTES_MAX) {
                    let e = ApiError::new(Code::RequestTooLarge, format!("the work record would pass {WORK_RECORD_BYTES_MAX} bytes"));
                    (Answer::refused(&e, Some(&h)), None)
                } else {
                    let answer = Answer::ok(out.next.answer(&out.extra));
                    (answer, Some(self.store(out.next, out.dirty, work_json, change.kind(), caller)?))
                }
            }
            Ok(out) => (Answer::ok(out.next.answer(&out.extra)), None),
        };
        if let Some(idem) = idempotency {
            self.remember(idem, &answer)?;
        }
        if let Some((stored, owed)) = owed {
            self.publish(stored).await?;
            self.deliver_through(owed.version as u64).await?;
        }
        answer.into_response()
    }

    /// The first answer to this key again, or 422 when the key came with another request.
    fn replay(&self, idem: &Idempotency) -> Result<Option<Response>> {
        let sql = self.state.storage().sql();
        let oldest = now_ms() - IDEMPOTENCY_TTL_MS;
        let rows: Vec<IdempotencyRow> = sql
            .exec("SELECT fingerprint, status, body FROM idempotency WHERE key = ? AND at >= ?", vec![idem.key.clone().into(), oldest.into()])?
            .to_array()?;
        let Some(first) = rows.into_iter().next() else {
            return Ok(None);
        };
        if first.fingerprint != idem.fingerprint {
            let e = ApiError::new(Code::IdempotencyMismatch, "this Idempotency-Key was used for another request");
            return Answer::refused(&e, None).into_response().map(Some);
        }
        let mut response = Response::from_json(&from_json::<Value>(&first.body)?)?.with_status(first.status as u16);
        response.headers_mut().set("Idempotent-Replayed", "true")?;
        Ok(Some(response))
    }

    fn remember(&self, idem: &Idempotency, answer: &Answer) -> Result<()> {
        let sql = self.state.storage().sql();
        let now = now_ms();
        sql.exec("DELETE FROM idempotency WHERE at < ?", vec![(now - IDEMPOTENCY_TTL_MS).into()])?;
        sql.exec(
            "INSERT OR REPLACE INTO idempotency (key, fingerprint, status, body, at) VALUES (?, ?, ?, ?, ?)",
            vec![idem.key.clone().into(), idem.fingerprint.clone().into(), (answer.status as i64).into(), to_json(&answer.body)?.into(), now.into()],
        )?;
        Ok(())
    }

    /// Reads: the record, the lineage, the package, the briefing.
    fn read(&self, caller: &Caller, op: &Op) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(&e, None).into_response(),
        };
        match op {
            Op::Turns => {
                let mut body = handoff::lineage_answer(&h);
                body["handoff"] = serde_json::to_value(h.record.view()).unwrap_or_default();
                Answer::ok(body).into_response()
            }
            Op::Package { markdown } => match h.ledger.latest() {
                Err(e) => Answer::refused(&e, Some(&h)).into_response(),
                Ok(latest) if *markdown => text(&crate::package::render_markdown(&latest), "text/markdown; charset=utf-8"),
                Ok(latest) => {
                    let mut body = serde_json::to_value(&latest).unwrap_or_default();
                    body["handoff"] = serde_json::to_value(h.record.view()).unwrap_or_default();
                    Answer::ok(body).into_response()
                }
            },
            Op::Briefing { budget_bytes, reach_api, base_url } => match h.ledger.latest() {
                Err(e) => Answer::refused(&e, Some(&h)).into_response(),
                Ok(latest) => {
                    let reach = if *reach_api { Reach::api(base_url.clone()) } else { Reach::None };
                    text(&briefing::render(&latest, *budget_bytes, &reach).text, "text/plain; charset=utf-8")
                }
            },
            _ => Answer::ok(h.answer(&Default::default())).into_response(),
        }
    }

    /// Answers at once when the version is above `after` or the hand-off is closed; otherwise
    /// holds a place and answers with a body that arrives at the next version move or at the
    /// timeout. The headers go out at once and the body is a stream, so a client that goes away
    /// cancels that stream, which drops the waiter's [`Place`](crate::waiters::Place) there and
    /// then: the runtime need not fire `request.signal` (local workerd does not).
    fn wait(&self, caller: &Caller, after: u64, timeout_s: u64) -> Result<Response> {
        let h = match self.owned(caller)? {
            Ok(h) => h,
            Err(e) => return Answer::refused(&e, None).into_response(),
        };
        if turn::wait_answers_now(&h.record, after) || timeout_s == 0 {
            // A whole response, which the output gate holds until the version is durable.
            let body = self.published.borrow_mut().answer_of(&h);
            return text(&body, "application/json");
        }
        let Some((place, woken)) = Waiters::hold(&self.waiters, self.waiters_max(), after) else {
            let e = ApiError::new(Code::WaitTooMany, "this hand-off holds as many waiters as it may");
            return Answer::refused(&e, None).into_response();
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
                _ => published.borrow_mut().answer().unwrap_or_else(|| "{}".into()),
            };
            Ok::<Vec<u8>, Error>(body.as_bytes().to_vec())
        };
        let mut response = Response::from_stream(futures::stream::once(body))?;
        response.headers_mut().set("Content-Type", "application/json")?;
        Ok(response)
    }

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

/// A whole answer with its content type.
fn text(body: &str, content_type: &str) -> Result<Response> {
    let mut response = Response::ok(body)?;
    response.headers_mut().set("Content-Type", content_type)?;
    Ok(response)
}

/// The name of an owner's index object.
pub fn owner_index_name(owner: &str) -> String {
    format!("owner:{owner}")
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}
