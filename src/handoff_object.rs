//! `HandoffObject`: the Durable Object that holds one hand-off. It loads the hand-off, applies
//! the pure core (`handoff_core::handoff::apply`), stores what moved, answers and wakes waiters; it
//! has no rules of its own. Every change is one [`Batch`] of SQL statements run in one
//! `transactionSync`: all of it is written, or none of it.
//!
//! - this file: what the object holds in memory, and the runtime's entry points (`fetch`, one
//!   `Ask`; `alarm`, the outbox's retry; the watch's three socket events), exported to the
//!   runtime directly (below, "Why not `#[durable_object]`");
//! - `driver.rs`: each operation of an `Ask`, carried out;
//! - `store.rs`: the schema, loading, and the one transaction of a change;
//! - `delivery.rs`: the outbox's sends to the owner's index;
//! - `watch.rs`: the hibernatable WebSockets of `GET …/watch`, and what each is sent.
//!
//! Nothing is created for a hand-off that does not exist: the schema is written by the create's
//! own transaction, and a read of an object without it answers `handoff.not_found`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod delivery;
mod driver;
mod store;
mod watch;

use delivery::*;
use store::*;

use crate::bindings::{self, owner_index_name, store_failed, OWNER_INDEX};
use crate::clock::{now_ms, now_s};
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
    events_trimmed_through, IDEMPOTENCY_TTL_MS, LINEAGE_TAIL_MAX, MACHINE_WAITERS_PER_HANDOFF_MAX, OWNER_WAITERS_PER_HANDOFF_MAX, STORED_VALUE_BYTES_MAX,
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::*;

/// Why not `#[durable_object]`: its `fetch` converts the runtime's request into a
/// `worker::Request` (its `cf` object, URL, method and headers, whatever is read) and the
/// answer from a `worker::Response` built in pieces. This object reads one header of the
/// request and builds its hot answers in one call (`crate::http`); `scripts/profile` showed
/// those conversions on every ask (issue 12). Everything else is the `worker` crate's.
#[wasm_bindgen]
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
    /// Whether this instance has compared every watching socket with the record yet (once
    /// per instance: a woken object catches up what an eviction or a deploy left behind).
    caught_up: Cell<bool>,
}

/// How many times this isolate has started a hand-off object: an evicted object starts again
/// when it is next needed, which is how a test sees that an idle watch let it go.
pub static STARTS: AtomicU64 = AtomicU64::new(0);

/// What the runtime calls. An error from one of these is the runtime's (the object is reset);
/// every refusal a client can cause is an answer.
#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl HandoffObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, env: Env) -> HandoffObject {
        let state = State::from(state);
        STARTS.fetch_add(1, Ordering::Relaxed);
        Self::answer_pings(&state);
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
            caught_up: Cell::new(false),
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        self.answer(req).await.map(JsValue::from).map_err(JsValue::from)
    }

    pub async fn alarm(&self) -> std::result::Result<JsValue, JsValue> {
        self.retry_delivery().await.map(JsValue::from).map_err(JsValue::from)
    }

    #[wasm_bindgen(js_name = webSocketMessage)]
    pub async fn websocket_message(&self, ws: web_sys::WebSocket, message: JsValue) -> std::result::Result<JsValue, JsValue> {
        let text = message.as_string();
        let handled = self.catch_up_once().and_then(|()| self.on_watch_message(&WebSocket::from(ws), text.as_deref()));
        if let Err(e) = handled {
            // Storage failed under a message: the client keeps its socket and its place, and
            // the next change or message tries again.
            self.forget();
            console_error!("a watch's message: {e}");
        }
        Ok(JsValue::NULL)
    }

    /// The client closed: close this side too (the runtime then forgets the socket).
    #[wasm_bindgen(js_name = webSocketClose)]
    pub async fn websocket_close(&self, ws: web_sys::WebSocket, code: usize, _reason: String, _was_clean: bool) -> std::result::Result<JsValue, JsValue> {
        // 1005 (none given) and 1006 (dropped) may not be sent in a close frame.
        let code = u16::try_from(code).ok().filter(|c| (1000..5000).contains(c) && !matches!(c, 1005 | 1006)).unwrap_or(1000);
        if let Err(e) = WebSocket::from(ws).close(Some(code), Some("closed by the client")) {
            console_log!("a watch's close: {e}");
        }
        Ok(JsValue::NULL)
    }

    #[wasm_bindgen(js_name = webSocketError)]
    pub async fn websocket_error(&self, _ws: web_sys::WebSocket, error: JsValue) -> std::result::Result<JsValue, JsValue> {
        console_log!("a watch's socket failed: {}", Error::from(error));
        Ok(JsValue::NULL)
    }
}

impl HandoffObject {
    async fn answer(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        // Parsed by serde_json from the text, not by the runtime's JSON.parse, which would turn
        // integers past 2^53 into floats.
        // An ask this build cannot read is a deploy that mixes versions, which a retry
        // outlives: 503, not the client's 400.
        // A small ask, and a watch's upgrade (which has no body), come in a header.
        let decoded = match crate::http::read_ask(&req).await {
            Ok(decoded) => decoded,
            Err(e) => return store_failed("unreadable internal ask", &e),
        };
        let ask: Ask = match decoded {
            Ok(ask) => ask,
            Err(e) => return store_failed("unreadable internal ask", &e),
        };
        let handled = match self.catch_up_once() {
            Ok(()) => self.handle(ask).await,
            Err(e) => Err(e),
        };
        match handled {
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
    async fn retry_delivery(&self) -> Result<web_sys::Response> {
        let Some(h) = self.load()? else {
            self.outbox.borrow_mut().on_alarm();
            return crate::http::plain("nothing stored");
        };
        let owed = self.owed(&h)?;
        self.outbox.borrow_mut().restore(owed);
        let mut next = self.outbox.borrow_mut().on_alarm();
        while let Some(send) = next {
            self.send(send).await?;
            next = self.outbox.borrow_mut().poll_send();
        }
        crate::http::plain("delivered or rescheduled")
    }
}
