//! Long-poll waiters held by one hand-off object: each is a one-shot signal, woken all at
//! once by a version move or dropped at its own timeout. Bounded by
//! [`crate::limits::WAITERS_PER_HANDOFF_MAX`]; nothing outlives its timeout, and a waiter is answered once.

use futures::channel::oneshot;
use std::collections::HashMap;

#[derive(Default)]
pub struct Waiters {
    next_id: u64,
    held: HashMap<u64, oneshot::Sender<()>>,
}

impl Waiters {
    /// Registers a waiter, or `None` when the hand-off already holds `max` (normally
    /// [`crate::limits::WAITERS_PER_HANDOFF_MAX`]).
    pub fn hold(&mut self, max: usize) -> Option<(u64, oneshot::Receiver<()>)> {
        if self.held.len() >= max {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.next_id += 1;
        self.held.insert(self.next_id, tx);
        Some((self.next_id, rx))
    }

    /// Forgets a waiter whose timeout came first.
    pub fn release(&mut self, id: u64) {
        self.held.remove(&id);
    }

    /// Wakes every waiter; each answers with the record as it is when it runs.
    pub fn wake_all(&mut self) {
        for (_, tx) in self.held.drain() {
            // A receiver that is gone (its request ended) needs no signal.
            let _ = tx.send(());
        }
    }
}
