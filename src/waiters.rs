//! Long-poll waiters held by one hand-off object. Each is a one-shot channel that a version
//! move fills with the answer (rendered once, shared by all), or that its own timeout ends.
//! Bounded by [`crate::limits::WAITERS_PER_HANDOFF_MAX`]; a waiter is answered once, and its
//! place is given back as soon as its answer is dropped for any reason — answered, timed out,
//! or its client gone (see [`Place`]).

use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Default)]
pub struct Waiters {
    next_id: u64,
    held: HashMap<u64, oneshot::Sender<Rc<str>>>,
}

/// A waiter's place in its hand-off's [`Waiters`]; dropping it gives the place back.
pub struct Place {
    waiters: Rc<RefCell<Waiters>>,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        // A drop never runs inside a borrow of the set (waking only sends), but a waiter
        // that cannot give its place back now is drained at the next wake anyway.
        if let Ok(mut waiters) = self.waiters.try_borrow_mut() {
            waiters.held.remove(&self.id);
        }
    }
}

impl Waiters {
    /// Registers a waiter, or `None` when the set already holds `max` (normally
    /// [`crate::limits::WAITERS_PER_HANDOFF_MAX`]).
    pub fn hold(set: &Rc<RefCell<Waiters>>, max: usize) -> Option<(Place, oneshot::Receiver<Rc<str>>)> {
        let mut waiters = set.borrow_mut();
        if waiters.held.len() >= max {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        waiters.next_id += 1;
        let id = waiters.next_id;
        waiters.held.insert(id, tx);
        Some((Place { waiters: set.clone(), id }, rx))
    }

    /// How many waiters are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Answers every waiter with `answer`, and empties the set.
    pub fn wake_all(&mut self, answer: &Rc<str>) {
        for (_, tx) in self.held.drain() {
            // A receiver that is gone (its request ended) needs no answer.
            let _ = tx.send(answer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Rc<RefCell<Waiters>> {
        Rc::new(RefCell::new(Waiters::default()))
    }

    #[test]
    fn the_cap_refuses_past_max_and_a_dropped_place_is_given_back() {
        let s = set();
        let a = Waiters::hold(&s, 2).unwrap();
        let _b = Waiters::hold(&s, 2).unwrap();
        assert!(Waiters::hold(&s, 2).is_none());
        drop(a);
        assert_eq!(s.borrow().len(), 1);
        assert!(Waiters::hold(&s, 2).is_some());
    }

    #[test]
    fn a_wake_answers_every_waiter_once_with_the_same_answer_and_empties_the_set() {
        let s = set();
        let (p1, mut r1) = Waiters::hold(&s, 10).unwrap();
        let (p2, mut r2) = Waiters::hold(&s, 10).unwrap();
        let answer: Rc<str> = "{\"v\":2}".into();
        s.borrow_mut().wake_all(&answer);
        assert!(s.borrow().is_empty());
        assert_eq!(r1.try_recv().unwrap().as_deref(), Some("{\"v\":2}"));
        assert_eq!(r2.try_recv().unwrap().as_deref(), Some("{\"v\":2}"));
        // The places of answered waiters are already free; dropping them changes nothing.
        drop((p1, p2));
        assert!(s.borrow().is_empty());
        s.borrow_mut().wake_all(&answer);
    }
}
