//! The `Machines` object's held follows (`GET /v1/machine/handoffs?after=V`), as
//! `handoff_object/waits.rs` holds a hand-off's waits: the headers go out at once and the body
//! is a stream that ends with the list a change wakes it with, or, at its timeout or its
//! machine's end, the unchanged list it was held with. The stream owns the follow's place:
//! answered, timed out, or cancelled by the runtime when its client goes away, it gives the
//! place back. Which follows a change answers, and each machine's cap, are
//! `handoff_core::follows`'s.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use futures::channel::oneshot;
use futures::future::{select, Either};
use handoff_core::error::Refusal;
use handoff_core::follows::Follows;
use handoff_core::waiters::WaiterId;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use worker::{web_sys, Delay, Result};

/// The follows one object holds, and each one's answer channel.
#[derive(Default)]
pub struct Followers {
    places: RefCell<Follows>,
    channels: RefCell<BTreeMap<WaiterId, oneshot::Sender<Rc<str>>>>,
}

/// A follow's place; dropping it (answered, timed out, or cancelled) gives it back.
struct Place {
    followers: Rc<Followers>,
    id: WaiterId,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.followers.channels.borrow_mut().remove(&self.id);
        self.followers.places.borrow_mut().release(self.id);
    }
}

impl Followers {
    /// Holds a follow of `machine` for up to `timeout_ms`, its answer `unchanged` unless its
    /// list changes first; or the machine's cap's refusal.
    pub fn hold(
        self: &Rc<Self>,
        machine: &str,
        timeout_ms: u64,
        unchanged: Vec<u8>,
    ) -> std::result::Result<Result<web_sys::Response>, Refusal> {
        let id = self.places.borrow_mut().hold(machine)?;
        let (tx, woken) = oneshot::channel();
        self.channels.borrow_mut().insert(id, tx);
        let place = Place { followers: self.clone(), id };
        let timeout = Delay::from(Duration::from_millis(timeout_ms));
        let body = async move {
            let body = match select(woken, timeout).await {
                Either::Left((Ok(list), _)) => list.as_bytes().to_vec(),
                // Its timeout, or its machine ended (the channel dropped): the list it held.
                _ => unchanged,
            };
            drop(place);
            Ok::<Vec<u8>, worker::Error>(body)
        };
        Ok(crate::http::streamed_json(Box::pin(body)))
    }

    /// `machine`'s list changed (its change confirmed stored): each of its follows is answered
    /// `list`.
    pub fn wake(&self, machine: &str, list: &str) {
        let list: Rc<str> = list.into();
        for id in self.places.borrow_mut().wake(machine) {
            if let Some(channel) = self.channels.borrow_mut().remove(&id) {
                // A receiver that is gone (its request ended) needs no answer.
                let _gone = channel.send(list.clone());
            }
        }
    }

    /// `machine` was revoked or enrolled again: each of its follows ends now with the list it
    /// held (its channel dropped).
    pub fn end(&self, machine: &str) {
        for id in self.places.borrow_mut().wake(machine) {
            self.channels.borrow_mut().remove(&id);
        }
    }
}
