//! Carrying out what the decider says the owner's index is owed: the send itself, the wait
//! for a send already on its way, the attempts stored and the retry alarm after a failure.
//! No decision is made here.

use super::*;
use crate::bindings::{owner_index_name, OWNER_INDEX};
use handoff_api::protocol::{self, ToIndex};
use handoff_core::decider::{RowSend, WriteFailed};
use handoff_core::outbox::Send;
use std::time::Duration;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

impl Object {
    /// Returns once the owner's index holds `version` (or a later one), so that a list started
    /// after the answer shows the change. Changes that arrive while a row send is on its way
    /// wait for it; the decider then sends only the newest row, so under concurrent changes
    /// one index write carries many of them. After a failure the alarm retries and the change
    /// is answered.
    pub(super) async fn send_rows_through(&self, version: u64) -> Result<()> {
        loop {
            let (taken, send, sending) = {
                let mut decider = self.inner.decider.borrow_mut();
                if decider.is_taken(version) {
                    (true, None, false)
                } else {
                    let send = decider.poll_row_send();
                    let sending = send.is_none() && decider.is_sending();
                    (false, send, sending)
                }
            };
            match (taken, send) {
                (true, _) => return Ok(()),
                (false, Some(send)) => self.send(send).await?,
                (false, None) if sending => {
                    let (done, wait) = futures::channel::oneshot::channel();
                    self.inner.awaiting_row_send.borrow_mut().push(done);
                    // A dropped sender is a row send that ended too: look again either way.
                    let _ended = wait.await;
                }
                (false, None) => return Ok(()),
            }
        }
    }

    /// Carries out one send, tells the decider how it went, wakes the changes that waited for
    /// it, and carries out what a failure leads to (the attempts stored, the retry alarm).
    pub(super) async fn send(&self, send: Send<RowSend>) -> Result<()> {
        let ok = self.send_row(&send).await;
        let sent = self.inner.decider.borrow_mut().on_row_sent(send.version, ok, now_ms());
        for done in self.inner.awaiting_row_send.borrow_mut().drain(..) {
            let _gone = done.send(());
        }
        if let Some(write) = &sent.write {
            if let Err(e) = store::commit(&self.state.storage(), store::Batch::of(std::slice::from_ref(write)), None) {
                match sent.if_write_fails() {
                    WriteFailed::Logged(what) => console_error!("{what}: {e}"),
                    WriteFailed::Fails => return Err(e),
                }
            }
        }
        if let Some(at) = sent.retry_at {
            let wait_ms = (at - now_ms()).max(0) as u64;
            self.state.storage().set_alarm(Duration::from_millis(wait_ms)).await?;
        }
        Ok(())
    }

    /// Whether the owner's index took the row (and the rows it passed, for their notices); a
    /// failure to reach it is logged once here, and the decider retries it.
    async fn send_row(&self, send: &Send<RowSend>) -> bool {
        match self.put_row(send).await {
            Ok(()) => true,
            Err(failure) => {
                console_log!("the owner's index did not take {} v{}: {failure}", send.row.row.id, send.version);
                false
            }
        }
    }

    async fn put_row(&self, send: &Send<RowSend>) -> std::result::Result<(), NotTaken> {
        let row_send = &send.row;
        let passed = send.passed.iter().map(|e| e.row.row.clone()).collect();
        let payload = protocol::encode(&ToIndex::Put(row_send.row.clone(), passed, row_send.incarnation))
            .map_err(|e| NotTaken::Encode(e.to_string()))?;
        let stub = self
            .env
            .durable_object(OWNER_INDEX)
            .and_then(|ns| ns.get_by_name(&owner_index_name(&row_send.owner)))
            .map_err(|e| NotTaken::Stub(e.to_string()))?;
        let index = JsValue::from(crate::http::raw_stub(stub)).unchecked_into::<Index>();
        let answer = index.put_row(&payload).map_err(|e| NotTaken::Ask(format!("{e:?}")))?;
        let status = JsFuture::from(answer).await.map_err(|e| NotTaken::Ask(format!("{e:?}")))?;
        match status.as_f64() {
            Some(200.0) => Ok(()),
            Some(s) => Err(NotTaken::Answered(s as u16)),
            None => Err(NotTaken::Ask("the index answered no status".into())),
        }
    }
}

// The owner index's `putRow` over RPC (`src/entry.mjs`): a row's status with no `Request` and no
// `Response` on either side. The runtime holds the call until this object's commit is confirmed.
#[wasm_bindgen]
extern "C" {
    type Index;
    #[wasm_bindgen(method, catch, js_name = putRow)]
    fn put_row(this: &Index, wire: &str) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// Why the owner's index did not take a row.
#[derive(Debug)]
enum NotTaken {
    Encode(String),
    Stub(String),
    Ask(String),
    Answered(u16),
}

impl std::fmt::Display for NotTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotTaken::Encode(why) => write!(f, "the ask could not be written: {why}"),
            NotTaken::Stub(why) => write!(f, "no stub for the index: {why}"),
            NotTaken::Ask(why) => write!(f, "the ask failed: {why}"),
            NotTaken::Answered(status) => write!(f, "the index answered {status}"),
        }
    }
}
