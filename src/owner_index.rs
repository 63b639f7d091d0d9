//! `OwnerIndex`: the Durable Object that holds one owner's list, one row per hand-off (stored as
//! the JSON it is sent and served as it is stored), the owner's receivers and the notification
//! deliveries owed to them. It drives `handoff_core::owner::Index`, which decides everything:
//! for each ask it reads what the index asks for (`store::read`), hands the reads over, runs the
//! plan's writes in one transaction (`store::statements`), sets the alarm, and starts each
//! delivery the plan names (`send::attempt`), handing its outcome back as one more ask.
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod send;
mod store;

use crate::bindings::store_failed;
use crate::clock::now_ms;
use handoff_api::protocol::{IndexAsk, ToIndex};
use handoff_core::owner::receiver::Receiver;
use handoff_core::owner::{self, Ask, Bounds, Feed, Index, Outcome, Plan};
use std::cell::RefCell;
use std::rc::Rc;
use store::Due;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

/// Exported to the runtime directly, not through `#[durable_object]`, for the reason
/// `HandoffObject` gives: its ask is one header, its answers are built in one call.
#[wasm_bindgen]
pub struct OwnerIndex {
    driver: Rc<Driver>,
    /// What an owner's request is read with (`bindings::setting`).
    setting: Rc<handoff_api::admission::Setting>,
}

/// What an attempt's task needs after the request that started it has been answered.
struct Driver {
    state: State,
    index: RefCell<Index>,
    /// Who push messages are from, where push is configured.
    sender: Option<handoff_notify::Sender>,
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl OwnerIndex {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, env: Env) -> OwnerIndex {
        send::loopback_only(crate::bindings::test_hooks_on(&env));
        let sender = crate::bindings::push_sender(&env);
        let bounds = Bounds {
            open_cap: crate::bindings::open_handoffs_cap(&env),
            retention: crate::bindings::retention(&env),
            pending_max: crate::bindings::webhook_pending_max(&env),
            push: sender.is_some(),
        };
        OwnerIndex {
            driver: Rc::new(Driver { state: State::from(state), index: RefCell::new(Index::new(bounds)), sender }),
            setting: crate::bindings::setting(&env),
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        self.serve(req).await.map(JsValue::from).map_err(JsValue::from)
    }

    /// A hand-off's row (`ToIndex::Put`, as `protocol::encode` wrote it) over RPC: only its
    /// status comes back, with no `Request` read and no `Response` built. 503 when the ask is
    /// not a row or cannot be read (a deploy mixing versions), or storage failed.
    #[wasm_bindgen(js_name = putRow)]
    pub fn put_row(&self, wire: &str) -> u16 {
        use crate::bindings::unavailable;
        let answer = match handoff_api::protocol::decode(wire) {
            Ok(ToIndex::Put(row, passed, incarnation)) => {
                let ask = IndexAsk::Put { row, passed, incarnation }.into_owner();
                Driver::answer(&self.driver, ask).map_err(|e| unavailable("owner index", &e))
            }
            Ok(_) => Err(unavailable("unreadable index ask", &"an ask other than a row, sent as one")),
            Err(e) => Err(unavailable("unreadable index ask", &e)),
        };
        match answer {
            Ok(answer) => handoff_api::wire::index(&answer).0.status,
            Err(refused) => handoff_api::error::status(refused.code),
        }
    }

    /// Sends the deliveries that are due (`Index::poll_send`).
    pub async fn alarm(&self) -> std::result::Result<JsValue, JsValue> {
        Driver::drive(&self.driver, Ask::Alarm).map_err(JsValue::from)?;
        crate::http::plain("ok").map(JsValue::from).map_err(JsValue::from)
    }
}

impl OwnerIndex {
    async fn serve(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        // An unreadable ask is a deploy mixing versions, which a retry outlives: 503.
        let to: ToIndex = match crate::http::read_ask(&req).await {
            Ok(Ok(to)) => to,
            Ok(Err(e)) => return store_failed("unreadable index ask", &e),
            Err(e) => return store_failed("unreadable index ask", &e),
        };
        // An owner's request is read here, once, as the router would have read it.
        let draw = |buf: &mut [u8]| {
            crate::webcrypto::fill(buf)
                .map_err(|e| crate::bindings::unavailable("drawing fresh randomness", &Error::from(e)))
        };
        let ask = match handoff_api::admission::read_index(to, &self.setting, now_ms, &draw) {
            Ok(ask) => ask,
            Err(refused) => return crate::http::refusal(&refused),
        };
        // The one check the core leaves to the runtime: a subscription key's curve (WebCrypto).
        if let IndexAsk::PushSubscribe { subscription } = &ask {
            if let Err(refused) = send::check_curve(subscription).await {
                return crate::http::refusal(&refused);
            }
        }
        match Driver::answer(&self.driver, ask.into_owner()) {
            Ok(answer) => {
                let (rendered, headers) = handoff_api::wire::index(&answer);
                crate::http::rendered(rendered, &headers)
            }
            Err(e) => store_failed("owner index", &e),
        }
    }
}

impl Driver {
    /// One ask's answer, carried out by [`Driver::drive`]; an unavailable one is logged here.
    fn answer(this: &Rc<Driver>, ask: Ask) -> Result<owner::IndexAnswer> {
        let plan = Driver::drive(this, ask)?;
        if let owner::IndexAnswer::Unavailable(cause) = &plan.answer {
            console_error!("owner index: {cause}");
        }
        Ok(plan.answer)
    }

    /// One ask, from its reads to its plan carried out: the reads, the writes in one
    /// transaction (none of them if one fails, and the index then forgets what it believed of
    /// its tables), the log, the alarm, and each delivery started on its own.
    fn drive(this: &Rc<Driver>, ask: Ask) -> Result<Plan> {
        let storage = this.state.storage();
        let now = now_ms();
        let mut feed = Feed::default();
        let mut due: Vec<Due> = Vec::new();
        loop {
            let next = this.index.borrow().next_read(&ask, &feed, now);
            let Some(read) = next else { break };
            store::read(&storage, &read, &mut feed, &mut due)?;
        }
        let plan = this.index.borrow_mut().handle(ask, feed, now);
        if !plan.writes.is_empty() {
            let committed = store::statements(&plan.writes).and_then(|statements| store::commit(&storage, statements));
            if let Err(e) = committed {
                this.index.borrow_mut().failed();
                return Err(e);
            }
        }
        for line in &plan.log {
            console_log!("owner index: {line}");
        }
        if let Some(at) = plan.alarm_at {
            crate::alarm::set(storage.as_raw(), at, "the owner's notifications")?;
        }
        for &(seq, lease) in &plan.send {
            // The core starts only deliveries of a known kind that the alarm's read returned.
            let Some(d) = due.iter().position(|d| d.seq == seq).map(|i| due.swap_remove(i)) else {
                console_error!("owner index: delivery {seq} was to start but was not read");
                continue;
            };
            let Some(kind) = Receiver::parse(&d.kind) else {
                console_error!(
                    "owner index: delivery {} was to start but is of a kind this build does not know ({})",
                    d.id,
                    d.kind
                );
                continue;
            };
            let driver = Rc::clone(this);
            wasm_bindgen_futures::spawn_local(async move {
                let sent = send::attempt(&d, kind, driver.sender.as_ref()).await;
                if let Err(e) = &sent {
                    console_log!(
                        "{} delivery {} to {} (attempt {}): {e}",
                        kind.as_str(),
                        d.id,
                        d.receiver,
                        lease.attempts
                    );
                }
                let outcome = Outcome {
                    seq,
                    receiver: kind,
                    to: d.receiver.clone(),
                    created_at: d.created_at,
                    attempts: lease.attempts,
                    status: sent.ok(),
                };
                if let Err(e) = Driver::drive(&driver, Ask::Sent(outcome)) {
                    console_error!("a {} delivery's outcome (delivery {}): {e}", kind.as_str(), d.id);
                }
            });
        }
        Ok(plan)
    }
}
