//! `HandoffObject`: the Durable Object that holds one hand-off. It carries out what the core's
//! [`Decider`] decides: it reads what the decider asks for, hands it the ask, writes the plan's
//! rows in one transaction, and does the rest (publishes, wakes, sends rows, answers). It checks
//! no role, caps nothing and trims nothing.
//!
//! - this file: the runtime's entry points (`fetch`, one ask; `alarm`, the row send's retry;
//!   the watch's three socket events), exported by `#[wasm_bindgen]` itself, and carrying out
//!   a plan;
//! - `store.rs`: the schema, the reads and one plan's writes;
//! - `row_send.rs`: sending the owner's index what the decider says it is owed;
//! - `waits.rs`: a held wait's streamed answer and its place;
//! - `watch.rs`: the hibernatable WebSockets of `GET …/watch`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod row_send;
mod store;
mod waits;
mod watch;

use crate::bindings::{self, store_failed};
use crate::clock::now_ms;
use handoff_api::protocol::{self, Ask, Sent, ToIndex};
use handoff_api::wire::Json;
use handoff_core::decider::{AfterAlarm, EraseStep, Erasing, HandoffAnswer};
use handoff_core::decider::{Decider, Feed, Moment, Plan, Read, Rendered, Reply, Wire};
use handoff_core::handoff::Handoff;
use handoff_core::hooks::{Fault, PlanHook};
use handoff_core::retention::Retention;
use handoff_core::role::{PerRole, Role};
use handoff_core::rows::{Admission, Row};
use handoff_core::waiters::{TimelineAsk, WaiterId};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

/// How many times this isolate has started a hand-off object: an evicted object starts again
/// when it is next needed, which is how a test sees that an idle watch let it go.
pub static STARTS: AtomicU64 = AtomicU64::new(0);

/// Exported by `#[wasm_bindgen]` itself rather than `#[durable_object]`, whose `fetch`
/// converts every request into a `worker::Request` and builds every answer in pieces: this
/// object reads one header of the request and builds its answer in one call (`crate::http`).
#[wasm_bindgen]
pub struct HandoffObject {
    object: Rc<Object>,
}

/// The object itself; shared with what an answer still owes once `fetch` has returned.
pub(crate) struct Object {
    state: State,
    env: Env,
    inner: Rc<Inner>,
    /// How long a closed hand-off is kept (this environment's `HANDOFF_RETENTION_DAYS`).
    retention: Retention,
}

/// One version's rendered record: `(version, frame)`.
type Frame = (u64, Rc<str>);

/// What the object holds in memory: the decider, and what carrying out its plans needs.
pub(crate) struct Inner {
    decider: RefCell<Decider>,
    /// `{"handoff": record}` as each role is answered it, rendered once per version.
    frames: RefCell<PerRole<Option<Frame>>>,
    /// Each held wait's answer channel, under the place the decider gave it.
    waiting: RefCell<BTreeMap<WaiterId, futures::channel::oneshot::Sender<Rc<str>>>>,
    /// Changes waiting for the row send on its way.
    awaiting_row_send: RefCell<Vec<futures::channel::oneshot::Sender<()>>>,
    /// Test hook: the failure armed for the next change.
    fault: Cell<Option<Fault>>,
    /// Test hook: how far ahead of the runtime's clock the alarm judges retention.
    clock_ahead_ms: Cell<i64>,
}

impl Inner {
    /// The frame of `h` for `role`: rendered once per version, shared by every waiter and socket.
    fn frame(&self, h: &Handoff, role: Role) -> Rc<str> {
        let mut frames = self.frames.borrow_mut();
        let version = h.record.version;
        if let Some((v, frame)) = &frames[role] {
            if *v == version {
                return frame.clone();
            }
        }
        let frame: Rc<str> = Json.render(HandoffAnswer::Record { h, role }).body.into();
        frames[role] = Some((version, frame.clone()));
        frame
    }

    /// A commit (or its confirmation) failed: what memory holds may never have been stored.
    fn forget(&self) {
        self.decider.borrow_mut().failed();
        self.frames.replace(PerRole::default());
    }
}

/// What the runtime calls. An error from one of these is the runtime's (the object is reset);
/// every refusal a client can cause is an answer.
#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl HandoffObject {
    #[wasm_bindgen(constructor)]
    /// `create_hash`: `node:crypto`'s, for the package hash (`crate::digest`).
    pub fn new(
        state: worker_sys::DurableObjectState,
        env: Env,
        create_hash: Option<js_sys::Function>,
    ) -> HandoffObject {
        crate::digest::install(create_hash);
        let state = State::from(state);
        STARTS.fetch_add(1, Ordering::Relaxed);
        watch::answer_pings(&state);
        let caps = bindings::caps(&env);
        let inner = Inner {
            decider: RefCell::new(Decider::new(caps)),
            frames: RefCell::new(PerRole::default()),
            waiting: RefCell::new(BTreeMap::new()),
            awaiting_row_send: RefCell::new(Vec::new()),
            fault: Cell::new(None),
            clock_ahead_ms: Cell::new(0),
        };
        let retention = bindings::retention(&env);
        HandoffObject { object: Rc::new(Object { state, env, inner: Rc::new(inner), retention }) }
    }

    /// One ask. The answer itself when nothing waits (a read, a refusal, a change with nothing
    /// to publish), so the runtime gets it with no promise of ours; a promise of it otherwise.
    pub fn fetch(&self, req: web_sys::Request) -> JsValue {
        match crate::http::ask_in_header(&req) {
            Ok(Some(decoded)) => self.object.serve(decoded, &[], Form::Response),
            Ok(None) => {
                let object = self.object.clone();
                // A long ask is the body, which only a promise reads.
                let read = async move {
                    let decoded = crate::http::ask_in_body(&req).await;
                    Ok(match decoded {
                        Ok(decoded) => object.serve(decoded, &[], Form::Response),
                        Err(e) => settled(store_failed("unreadable internal ask", &e)),
                    })
                };
                worker::wasm_bindgen_futures::future_to_promise(read).into()
            }
            Err(e) => settled(store_failed("unreadable internal ask", &e)),
        }
    }

    /// One request over RPC (`src/entry.mjs`), with its body: the answer as a value
    /// (`http::Plain`), at once when nothing waits, else a promise of it. A held wait and a
    /// watch come by `fetch` (a streamed body, a 101), a GET's with no body.
    pub fn handle(&self, ask: &str, body: Option<Vec<u8>>) -> JsValue {
        self.object.serve(protocol::decode(ask), body.as_deref().unwrap_or_default(), Form::Value)
    }

    pub async fn alarm(&self) -> std::result::Result<JsValue, JsValue> {
        self.object.retry_row_send().await.map(JsValue::from).map_err(JsValue::from)
    }

    #[wasm_bindgen(js_name = webSocketMessage)]
    pub fn websocket_message(&self, ws: web_sys::WebSocket, message: JsValue) {
        let text = message.as_string();
        if let Err(e) = self.object.on_watch_message(&WebSocket::from(ws), text.as_deref()) {
            // Storage failed under a message: the client keeps its socket and its place, and
            // the next change or message tries again.
            self.object.inner.forget();
            console_error!("a watch's message: {e}");
        }
    }

    /// The client closed: close this side too (the runtime then forgets the socket).
    #[wasm_bindgen(js_name = webSocketClose)]
    pub fn websocket_close(&self, ws: web_sys::WebSocket, code: usize, _reason: String, _was_clean: bool) {
        watch::close_as_asked(&WebSocket::from(ws), code);
    }

    #[wasm_bindgen(js_name = webSocketError)]
    pub fn websocket_error(&self, _ws: web_sys::WebSocket, error: JsValue) {
        console_log!("a watch's socket failed: {}", Error::from(error));
    }
}

/// An answer as what `fetch` gives the runtime: the response, or a rejection it reports.
fn settled(answer: Result<web_sys::Response>) -> JsValue {
    match answer {
        Ok(response) => response.into(),
        Err(e) => js_sys::Promise::reject(&JsValue::from(e)).into(),
    }
}

/// How the caller reads an answer: a `Response` (`fetch`) or a value (RPC's `handle`).
#[derive(Clone, Copy)]
enum Form {
    Response,
    Value,
}

/// An answer before it takes its caller's form.
enum Out {
    Plain {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
        replayed: bool,
    },
    /// A held wait's streamed body or a watch's 101, which only `fetch` carries.
    Response(web_sys::Response),
}

impl Out {
    fn js(self, form: Form) -> Result<JsValue> {
        let plain = match self {
            Out::Response(response) => return Ok(response.into()),
            Out::Plain { status, content_type, body, replayed } => {
                crate::http::Plain::new(status, content_type, body, replayed, Vec::new())
            }
        };
        Ok(match form {
            Form::Response => plain.response()?.into(),
            Form::Value => plain.value(),
        })
    }

    /// 503 `store.unavailable`, what failed going to the log only (`bindings::store_failed`).
    fn store_failed(what: &str, cause: &dyn std::fmt::Display) -> Out {
        respond(handoff_api::wire::refusal(&crate::bindings::unavailable(what, cause)))
    }
}

/// An answer in its caller's form, or a rejection the runtime reports.
fn settled_as(form: Form, answer: Result<Out>) -> JsValue {
    match answer.and_then(|out| out.js(form)) {
        Ok(value) => value,
        Err(e) => js_sys::Promise::reject(&JsValue::from(e)).into(),
    }
}

/// What planning an ask has come to: the plan, or the admission it needs first.
enum Planning {
    Planned(Plan),
    /// A read that takes an await: the owner index's admission of a new hand-off, or what a
    /// hand-off turn's runtime reaches on the machine.
    Await {
        ask: Box<Ask>,
        feed: Box<Feed>,
        read: Box<Read>,
    },
}

/// What carrying out a plan has come to once nothing more can be done without an await.
enum Carried {
    Answered(Out),
    /// Its writes are committed; its publication and row send are owed.
    Owing(Plan),
}

impl Object {
    /// Serves a request the router sent, reading its ask from it and `body` (a refusal of the
    /// request's is answered as the router would have). An ask this build cannot read is a
    /// deploy that mixes versions, which a retry outlives: 503, not the client's 400.
    fn serve(
        self: &Rc<Self>,
        decoded: std::result::Result<Sent, protocol::Unreadable>,
        body: &[u8],
        form: Form,
    ) -> JsValue {
        let sent = match decoded {
            Ok(sent) => sent,
            Err(e) => return settled_as(form, Ok(Out::store_failed("unreadable internal ask", &e))),
        };
        let ask = match handoff_api::admission::read(&sent, body) {
            Ok(ask) => ask,
            Err(refusal) => return settled_as(form, Ok(respond(handoff_api::wire::refusal(&refusal)))),
        };
        let now = now_ms();
        let step = match self.plan(ask, Feed::default(), now) {
            Ok(Planning::Planned(plan)) => Ok(plan),
            Ok(Planning::Await { ask, feed, read }) => {
                // A new hand-off: its owner's index admits its row before anything is stored;
                // a hand-off turn: its machine's `Machines` object says what its runtime reaches.
                let object = self.clone();
                let admitted = async move {
                    let answer = match object.awaited(*ask, *feed, *read, now).await {
                        Ok(out) => out,
                        Err(e) => object.failed("hand-off object", &e),
                    };
                    answer.js(form).map_err(JsValue::from)
                };
                return worker::wasm_bindgen_futures::future_to_promise(admitted).into();
            }
            Err(e) => Err(e),
        };
        let carried = step.and_then(|plan| self.carry_out_now(plan));
        match carried {
            Ok(Carried::Answered(out)) => settled_as(form, Ok(out)),
            Ok(Carried::Owing(plan)) => {
                let object = self.clone();
                let finish = async move {
                    let answer = match object.finish(plan).await {
                        Ok(out) => out,
                        Err(e) => object.failed("hand-off object", &e),
                    };
                    answer.js(form).map_err(JsValue::from)
                };
                worker::wasm_bindgen_futures::future_to_promise(finish).into()
            }
            Err(e) => settled_as(form, Ok(self.failed("hand-off object", &e))),
        }
    }

    /// What failed was storage (or the runtime under it): forget what this object holds in
    /// memory, so that the next request reads what was really committed, and answer 503.
    fn failed(&self, what: &str, e: &Error) -> Out {
        self.inner.forget();
        Out::store_failed(what, e)
    }

    /// Reads what the decider asks for, then lets it decide; stops at the one read that needs
    /// an await (the owner index's admission of a new hand-off).
    fn plan(&self, ask: Ask, mut feed: Feed, now: i64) -> Result<Planning> {
        loop {
            let read = self.inner.decider.borrow().next_read(&ask, &feed, now);
            match read {
                None => break,
                Some(Read::Handoff { lineage }) => self.restore(lineage)?,
                Some(Read::Keys) => {
                    let keys = store::keys(&self.state.storage())?;
                    self.inner.decider.borrow_mut().restore_keys(keys);
                }
                Some(Read::Key { key, since }) => feed.key = Some(store::key(&self.state.storage(), &key, since)?),
                Some(Read::Turns { before, limit }) => {
                    feed.turns = Some(store::turns(&self.state.storage(), before, limit)?)
                }
                Some(Read::Sockets(role)) => {
                    feed.sockets = Some(self.state.get_websockets_with_tag(role.as_str()).len())
                }
                Some(Read::Storage) => feed.storage = Some(store::facts(&self.state)?),
                Some(Read::Timeline { turn, after, limit }) => {
                    feed.timeline = Some(store::timeline(&self.state.storage(), turn, after, limit)?)
                }
                Some(read @ (Read::Admission { .. } | Read::Reach { .. })) => {
                    return Ok(Planning::Await { ask: Box::new(ask), feed: Box::new(feed), read: Box::new(read) })
                }
            }
        }
        let at = Moment { now, random: js_sys::Math::random() };
        Ok(Planning::Planned(self.inner.decider.borrow_mut().handle(ask, feed, at, &Json)))
    }

    /// Makes the read that takes an await (the owner's index admits a new hand-off's row, or
    /// the `Machines` object says what a hand-off turn's runtime reaches), then plans and
    /// carries out the ask with its answer, at the same moment.
    async fn awaited(&self, ask: Ask, mut feed: Feed, read: Read, now: i64) -> Result<Out> {
        match read {
            Read::Admission { owner, row } => feed.admission = Some(self.admission(&owner, &row).await?),
            Read::Reach { owner, machine, runtime } => feed.reach = Some(self.reach(&owner, machine, runtime).await?),
            _ => return Err(Error::RustError("an await for a read that needs none".into())),
        }
        let plan = match self.plan(ask, feed, now)? {
            Planning::Planned(plan) => plan,
            Planning::Await { .. } => return Err(Error::RustError("the decider asked for a second await".into())),
        };
        match self.carry_out_now(plan)? {
            Carried::Answered(out) => Ok(out),
            Carried::Owing(plan) => self.finish(plan).await,
        }
    }

    /// Reads the stored hand-off into the decider, then compares every watching socket with it.
    fn restore(&self, lineage: usize) -> Result<()> {
        let stored = store::load(&self.state.storage(), lineage)?;
        let restored = self.inner.decider.borrow_mut().restore(stored);
        restored.map_err(|e| Error::RustError(e.to_string()))?;
        let catch_up = self.inner.decider.borrow_mut().take_catch_up();
        if let Some(h) = catch_up {
            self.fan_out(&h);
        }
        Ok(())
    }

    /// Reads the stored hand-off for what is not an ask (the alarm, a socket's message).
    fn ensure_restored(&self) -> Result<()> {
        let needs = self.inner.decider.borrow().needs_handoff();
        match needs {
            Some(Read::Handoff { lineage }) => self.restore(lineage),
            _ => Ok(()),
        }
    }

    /// Carries out what of `plan` needs no await: its writes in one transaction and its alarm,
    /// then its answer when it neither publishes nor sends rows.
    fn carry_out_now(&self, plan: Plan) -> Result<Carried> {
        if let Some(log) = &plan.log {
            console_error!("{log}");
        }
        match plan.hook {
            None => {}
            Some(PlanHook::Arm(fault)) => self.inner.fault.set(Some(fault)),
            Some(PlanHook::AdvanceClockMs(ahead_ms)) => {
                self.inner.clock_ahead_ms.set(self.inner.clock_ahead_ms.get().saturating_add(ahead_ms));
                crate::alarm::set(self.state.storage().as_raw(), now_ms(), "a test's clock moved ahead")?;
            }
        }
        if !plan.writes.is_empty() {
            let fault = self.inner.fault.take();
            if fault == Some(Fault::Panic) {
                panic!("test hook: a panic between a change and its commit");
            }
            store::commit(&self.state.storage(), store::Batch::of(&plan.writes), fault)?;
        }
        if let Some(at) = plan.alarm_at {
            // Issued without an await: it joins this event's implicit transaction, after the
            // change's own.
            crate::alarm::set(self.state.storage().as_raw(), at, "a hand-off's plan")?;
        }
        if plan.waits() {
            return Ok(Carried::Owing(plan));
        }
        self.reply(plan.reply).map(Carried::Answered)
    }

    /// The rest of a plan: its publication, then its row send, then its answer.
    async fn finish(&self, plan: Plan) -> Result<Out> {
        if let Some(version) = plan.publish {
            self.publish(version).await?;
        }
        if !plan.wake_timeline.is_empty() || plan.events_taken.is_some() {
            self.wake_timeline(&plan.wake_timeline, plan.events_taken).await?;
        }
        if let Some(version) = plan.send_rows_through {
            self.send_rows_through(version).await?;
        }
        if plan.erase {
            // A failed DELETE answers 503 and the owner asks again; the hand-off stays whole.
            self.erase().await.map_err(|(e, _)| e)?;
        }
        self.reply(plan.reply)
    }

    /// Once the runtime confirms the commit of `version`, it is what waiters are told: the
    /// decider says which it wakes, and every watching socket is compared with it. Waking
    /// earlier would hand a waiter a body chunk on a response already under way, which the
    /// output gate may not hold back, so a failed commit could show it a version that never was.
    /// With no held waiter and no socket, every answer that shows `version` is a new message,
    /// which the output gate holds until the commit is confirmed: nothing needs the await.
    async fn publish(&self, version: u64) -> Result<()> {
        let under_way = !self.inner.waiting.borrow().is_empty() || !self.state.get_websockets().is_empty();
        if under_way {
            self.state.storage().sync().await?;
        }
        let wake = self.inner.decider.borrow_mut().confirm(version);
        let Some(wake) = wake else {
            return Ok(());
        };
        for (waiter, role) in wake.waiters {
            let channel = self.inner.waiting.borrow_mut().remove(&waiter);
            if let Some(channel) = channel {
                // A receiver that is gone (its request ended) needs no answer.
                let _gone = channel.send(self.inner.frame(&wake.handoff, role));
            }
        }
        // Not under way, no socket was watching and no await has let one be accepted since.
        if under_way {
            self.fan_out(&wake.handoff);
        }
        Ok(())
    }

    /// Once the runtime confirms a batch's commit, each held timeline read it woke is read again
    /// and answered (one whose client went away needs nothing), and every handoff.v2 socket is
    /// sent the events it is owed.
    async fn wake_timeline(&self, woken: &[(WaiterId, TimelineAsk)], taken: Option<(u64, u64, u64)>) -> Result<()> {
        let sockets = taken.filter(|_| !self.state.get_websockets().is_empty());
        if woken.is_empty() && sockets.is_none() {
            return Ok(());
        }
        self.state.storage().sync().await?;
        if let Some((turn, first, last)) = sockets {
            self.fan_out_events(turn, first, last)?;
        }
        for (waiter, ask) in woken {
            let channel = self.inner.waiting.borrow_mut().remove(waiter);
            let Some(channel) = channel else { continue };
            let read = store::timeline(&self.state.storage(), ask.turn, ask.after, ask.limit)?;
            let rendered = self.inner.decider.borrow().timeline_answer(*ask, read, &Json);
            let rendered = rendered.map_err(|e| Error::RustError(e.to_string()))?;
            let _gone = channel.send(rendered.body.into());
        }
        Ok(())
    }

    fn reply(&self, reply: Reply) -> Result<Out> {
        match reply {
            Reply::Rendered(rendered) => Ok(respond(rendered)),
            Reply::Record { role } => {
                let h = self.inner.decider.borrow().handoff().cloned();
                let Some(h) = h else {
                    return Err(Error::RustError("a record answer without a hand-off".into()));
                };
                let frame = self.inner.frame(&h, role);
                Ok(Out::Plain {
                    status: 200,
                    content_type: "application/json",
                    body: frame.as_bytes().to_vec(),
                    replayed: false,
                })
            }
            Reply::Hold { waiter, role, timeout_ms } => {
                waits::hold(&self.inner, waiter, role, timeout_ms, None).map(Out::Response)
            }
            Reply::HoldTimeline { waiter, timeout_ms, timeout_body } => {
                // The role only picks a record frame, which a timeline's timeout never answers.
                waits::hold(&self.inner, waiter, Role::Owner, timeout_ms, Some(timeout_body.into())).map(Out::Response)
            }
            Reply::Watch { role, after, valid_until_s, subprotocol, timeline } => {
                self.accept_watch(role, after, valid_until_s, subprotocol, timeline).map(Out::Response)
            }
        }
    }

    /// Retries what the owner's index is still owed: after a failed row send, or after a
    /// Worker that died between a change and its row send (the safety alarm).
    async fn retry_row_send(&self) -> Result<web_sys::Response> {
        if let Err(e) = self.ensure_restored() {
            self.inner.forget();
            return Err(e);
        }
        let mut next = self.inner.decider.borrow_mut().on_alarm();
        while let Some(send) = next {
            self.send(send).await?;
            next = self.inner.decider.borrow_mut().poll_row_send();
        }
        let ahead_ms = self.inner.clock_ahead_ms.get();
        let after = self.inner.decider.borrow().after_alarm(now_ms().saturating_add(ahead_ms), self.retention);
        match after {
            AfterAlarm::Nothing => {}
            AfterAlarm::At(at) => self.set_alarm_at(at.saturating_sub(ahead_ms))?,
            AfterAlarm::Erase => {
                if let Err((e, retry_at)) = self.erase().await {
                    // The index or storage failed: forget, and try again then.
                    self.inner.forget();
                    console_error!("erasing a hand-off past its retention: {e}");
                    self.set_alarm_at(retry_at)?;
                }
            }
        }
        crate::http::plain("delivered or rescheduled")
    }
}

/// A rendered answer.
fn respond(r: Rendered) -> Out {
    let body = if r.status == 204 { Vec::new() } else { r.body.into_bytes() };
    Out::Plain { status: r.status, content_type: r.content_type, body, replayed: r.replayed }
}

impl Object {
    fn set_alarm_at(&self, at: i64) -> Result<()> {
        crate::alarm::set(self.state.storage().as_raw(), at, "a hand-off's next alarm")
    }

    /// Carries out the decider's erase of the hand-off held, one step at a time, each outcome
    /// fed back (`Decider::on_erase_step`). A failure leaves the hand-off whole; the error says
    /// which step failed, and the time to erase again is the alarm's to set.
    async fn erase(&self) -> std::result::Result<(), (Error, i64)> {
        let Some(mut erasure) = self.inner.decider.borrow().erasure() else {
            return Ok(());
        };
        let mut next = erasure.first().cloned();
        while let Some(step) = next {
            let done = self.erase_step(&step).await;
            let progress = self.inner.decider.borrow_mut().on_erase_step(&mut erasure, done.is_ok(), now_ms());
            next = match progress {
                Erasing::Next(step) => Some(step),
                Erasing::Done => None,
                // Only a failed step fails the erase.
                Erasing::Failed { retry_at } => {
                    return Err((
                        done.err().unwrap_or_else(|| Error::RustError("an erase step failed".into())),
                        retry_at,
                    ))
                }
            };
        }
        Ok(())
    }

    async fn erase_step(&self, step: &EraseStep) -> Result<()> {
        match step {
            EraseStep::DropRow { owner, id, incarnation } => {
                let dropped = self.ask_index(owner, &ToIndex::Drop(id.clone(), *incarnation)).await?;
                if dropped.status() != 200 {
                    return Err(Error::RustError(format!("the owner's index answered {} to a drop", dropped.status())));
                }
            }
            EraseStep::DeleteStorage => {
                let storage = self.state.storage();
                storage.delete_alarm().await?;
                storage.delete_all().await?;
            }
            EraseStep::CloseSockets => {
                self.inner.frames.replace(PerRole::default());
                for socket in self.state.get_websockets() {
                    // A socket already closing needs nothing more.
                    let _closing = socket.close(Some(1000), Some("erased"));
                }
            }
        }
        Ok(())
    }

    /// The owner index's answer to a new hand-off's first row.
    async fn admission(&self, owner: &str, row: &Row) -> Result<Admission> {
        let answer = self.ask_index(owner, &ToIndex::Open(row.clone())).await?;
        if answer.status() != 200 {
            return Err(Error::RustError(format!("the owner's index answered {} to an admission", answer.status())));
        }
        let body = crate::http::bytes(&answer).await.map_err(|e| Error::RustError(e.to_string()))?;
        handoff_core::json::from_slice(&body).map_err(|e| Error::RustError(format!("an unreadable admission: {e}")))
    }

    /// What `runtime` reaches on `machine` as its owner's `Machines` object holds its report;
    /// `None` where that store is not bound (nothing to check against).
    async fn reach(&self, owner: &str, machine: String, runtime: String) -> Result<Option<Vec<String>>> {
        let Ok(namespace) = self.env.durable_object(bindings::MACHINES) else {
            return Ok(None);
        };
        let ask = handoff_api::machines::MachinesAsk::Reach(machine, runtime);
        let payload = protocol::encode(&ask).map_err(|e| Error::RustError(e.to_string()))?;
        let stub = namespace.get_by_name(&bindings::machines_name(owner))?;
        let pending = crate::http::ask(&crate::http::raw_stub(stub), "https://machines/ask", &payload)
            .map_err(|e| Error::RustError(e.to_string()))?;
        let answer = crate::http::await_answer(pending).await.map_err(|e| Error::RustError(e.to_string()))?;
        let body = crate::http::bytes(&answer).await.map_err(|e| Error::RustError(e.to_string()))?;
        let reached: handoff_api::machines::Reached =
            handoff_core::json::from_slice(&body).map_err(|e| Error::RustError(format!("an unreadable reach: {e}")))?;
        Ok(reached.models)
    }

    async fn ask_index(&self, owner: &str, ask: &ToIndex) -> Result<web_sys::Response> {
        let payload = protocol::encode(ask).map_err(|e| Error::RustError(e.to_string()))?;
        let stub = self.env.durable_object(bindings::OWNER_INDEX)?.get_by_name(&bindings::owner_index_name(owner))?;
        let pending = crate::http::ask(&crate::http::raw_stub(stub), "https://owner-index/ask", &payload)
            .map_err(|e| Error::RustError(e.to_string()))?;
        crate::http::await_answer(pending).await.map_err(|e| Error::RustError(e.to_string()))
    }
}
