//! Long-poll waiters held by one hand-off object, and what they may be told.
//!
//! A waiter is a one-shot channel that a published version fills with the answer, or that its
//! own timeout ends. Bounded per role ([`crate::limits::OWNER_WAITERS_PER_HANDOFF_MAX`],
//! [`crate::limits::MACHINE_WAITERS_PER_HANDOFF_MAX`]), so that one role's waits never take
//! the other's places; a waiter is
//! answered at most once, and its place is given back as soon as its answer is dropped for any
//! reason — answered, timed out, or its client gone (see [`Place`]).
//!
//! [`Published`] is the newest version whose commit the runtime has confirmed: waiters are
//! woken with it and a timeout answers it, so no waiter is ever shown a version that a failed
//! commit could take back. Its answer is rendered once per version and role, and shared by every
//! waiter of that role.

use crate::handoff::Handoff;
use crate::role::Role;
use crate::turn;
use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Default)]
pub struct Waiters {
    next_id: u64,
    held: HashMap<u64, Held>,
    /// How many of `held` each role holds: `[owner, machine]`.
    by_role: [usize; 2],
}

fn slot(role: Role) -> usize {
    match role {
        Role::Owner => 0,
        Role::Machine => 1,
    }
}

struct Held {
    role: Role,
    /// The version the waiter has seen: it wants one above it (or the close).
    after: u64,
    answer: oneshot::Sender<Rc<str>>,
}

/// A waiter's place in its hand-off's [`Waiters`]; dropping it gives the place back.
pub struct Place {
    waiters: Rc<RefCell<Waiters>>,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        // A drop never runs inside a borrow of the set (waking only sends), but a waiter
        // that cannot give its place back now is dropped at its wake-up anyway.
        if let Ok(mut waiters) = self.waiters.try_borrow_mut() {
            waiters.release(self.id);
        }
    }
}

impl Waiters {
    /// Registers a waiter of `role` for a version above `after`, or `None` when the set already
    /// holds `max` waiters of that role (the role's cap in [`crate::limits`]).
    pub fn hold(set: &Rc<RefCell<Waiters>>, role: Role, max: usize, after: u64) -> Option<(Place, oneshot::Receiver<Rc<str>>)> {
        let mut waiters = set.borrow_mut();
        if waiters.by_role[slot(role)] >= max {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        waiters.next_id += 1;
        let id = waiters.next_id;
        waiters.held.insert(id, Held { role, after, answer: tx });
        waiters.by_role[slot(role)] += 1;
        Some((Place { waiters: set.clone(), id }, rx))
    }

    fn release(&mut self, id: u64) {
        if let Some(held) = self.held.remove(&id) {
            self.by_role[slot(held.role)] -= 1;
        }
    }

    /// How many waiters are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// How many waiters of `role` are held.
    pub fn len_of(&self, role: Role) -> usize {
        self.by_role[slot(role)]
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Answers every waiter that `h` answers (a version above the one it has seen, or the
    /// close) with `answer` of its role, and lets them go; the others stay.
    pub fn wake(&mut self, h: &Handoff, mut answer: impl FnMut(Role) -> Rc<str>) {
        for (_, held) in self.held.extract_if(|_, held| turn::wait_answers_now(&h.record, held.after)) {
            self.by_role[slot(held.role)] -= 1;
            // A receiver that is gone (its request ended) needs no answer.
            let _ = held.answer.send(answer(held.role));
        }
    }
}

/// The newest version whose commit is confirmed, and its answer to each role (the record
/// lists the actions that role may send), each rendered at most once.
#[derive(Default)]
pub struct Published {
    handoff: Option<Rc<Handoff>>,
    /// `[owner, machine]`: the version each answer renders, and the answer.
    answers: [Option<(u64, Rc<str>)>; 2],
}

impl Published {
    /// Records that `h` is durable; an older version than the one held changes nothing.
    pub fn confirm(&mut self, h: Rc<Handoff>) {
        if self.handoff.as_ref().is_none_or(|held| held.record.version < h.record.version) {
            self.handoff = Some(h);
        }
    }

    /// The confirmed hand-off, if any.
    pub fn handoff(&self) -> Option<&Rc<Handoff>> {
        self.handoff.as_ref()
    }

    /// The answer of the confirmed version to `role`, rendered by `render` once per version.
    pub fn answer(&mut self, role: Role, render: impl FnOnce(&Handoff, Role) -> String) -> Option<Rc<str>> {
        let h = self.handoff.clone()?;
        Some(self.answer_of(&h, role, render))
    }

    /// The answer of `h` to `role`: the shared rendering when `h` is the confirmed version,
    /// otherwise rendered by `render` for this one answer and not kept.
    pub fn answer_of(&mut self, h: &Handoff, role: Role, render: impl FnOnce(&Handoff, Role) -> String) -> Rc<str> {
        let version = h.record.version;
        if let Some((v, body)) = &self.answers[slot(role)] {
            if *v == version {
                return body.clone();
            }
        }
        let body: Rc<str> = render(h, role).into();
        if self.handoff.as_ref().is_some_and(|held| held.record.version == version) {
            self.answers[slot(role)] = Some((version, body.clone()));
        }
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::Record;

    fn set() -> Rc<RefCell<Waiters>> {
        Rc::new(RefCell::new(Waiters::default()))
    }

    fn handoff_at(version: u64) -> Rc<Handoff> {
        let mut record = Record::create("ho_1".into(), "alice".into(), "s".into(), "m1".into(), "large".into(), 0);
        record.version = version;
        Rc::new(Handoff::create(record))
    }

    #[test]
    fn the_cap_refuses_past_max_and_a_dropped_place_is_given_back() {
        let s = set();
        let a = Waiters::hold(&s, Role::Owner, 2, 1).unwrap();
        let _b = Waiters::hold(&s, Role::Owner, 2, 1).unwrap();
        assert!(Waiters::hold(&s, Role::Owner, 2, 1).is_none());
        drop(a);
        assert_eq!(s.borrow().len(), 1);
        assert!(Waiters::hold(&s, Role::Owner, 2, 1).is_some());
    }

    #[test]
    fn each_role_has_its_own_cap_so_machine_waits_never_take_the_owners_places() {
        let s = set();
        let machine: Vec<_> = (0..3).map(|_| Waiters::hold(&s, Role::Machine, 3, 0).unwrap()).collect();
        assert!(Waiters::hold(&s, Role::Machine, 3, 0).is_none(), "the machine's cap is full");
        let owner = Waiters::hold(&s, Role::Owner, 1, 0).expect("the owner still gets a place");
        assert!(Waiters::hold(&s, Role::Owner, 1, 0).is_none());
        assert_eq!((s.borrow().len_of(Role::Machine), s.borrow().len_of(Role::Owner)), (3, 1));
        drop(machine);
        assert_eq!(s.borrow().len_of(Role::Machine), 0);
        s.borrow_mut().wake(&handoff_at(1), |_| "{}".into());
        assert_eq!(s.borrow().len_of(Role::Owner), 0, "a woken waiter gives its role's place back");
        drop(owner);
        assert!(s.borrow().is_empty());
    }

    #[test]
    fn a_wake_answers_once_with_the_same_answer_every_waiter_below_the_version_and_keeps_the_others() {
        let s = set();
        let (p1, mut r1) = Waiters::hold(&s, Role::Owner, 10, 1).unwrap();
        let (p2, mut r2) = Waiters::hold(&s, Role::Owner, 10, 1).unwrap();
        let (_p3, mut ahead) = Waiters::hold(&s, Role::Owner, 10, 2).unwrap();
        s.borrow_mut().wake(&handoff_at(2), |_| "{\"v\":2}".into());
        assert_eq!(r1.try_recv().unwrap().as_deref(), Some("{\"v\":2}"));
        assert_eq!(r2.try_recv().unwrap().as_deref(), Some("{\"v\":2}"));
        assert_eq!(ahead.try_recv().unwrap(), None, "a waiter that has seen version 2 waits on");
        assert_eq!(s.borrow().len(), 1);
        // The places of answered waiters are already free; dropping them changes nothing.
        drop((p1, p2));
        assert_eq!(s.borrow().len(), 1);
        s.borrow_mut().wake(&handoff_at(3), |_| "{\"v\":3}".into());
        assert_eq!(ahead.try_recv().unwrap().as_deref(), Some("{\"v\":3}"));
        assert!(s.borrow().is_empty());
    }

    #[test]
    fn the_set_counts_every_waiter_it_holds_of_both_roles() {
        let s = set();
        assert!(s.borrow().is_empty());
        let owner = Waiters::hold(&s, Role::Owner, 5, 0).unwrap();
        let machine = Waiters::hold(&s, Role::Machine, 5, 0).unwrap();
        assert_eq!(s.borrow().len(), 2);
        assert!(!s.borrow().is_empty());
        drop((owner, machine));
        assert_eq!(s.borrow().len(), 0);
    }

    #[test]
    fn a_close_answers_every_waiter_whatever_it_has_seen() {
        let s = set();
        let (_p, mut r) = Waiters::hold(&s, Role::Owner, 10, 99).unwrap();
        let mut closed = (*handoff_at(3)).clone();
        closed.record.state = turn::State::Closed;
        s.borrow_mut().wake(&closed, |_| "closed".into());
        assert_eq!(r.try_recv().unwrap().as_deref(), Some("closed"));
    }

    #[test]
    fn a_wake_answers_each_waiter_with_its_own_roles_answer() {
        let s = set();
        let (_o, mut owner) = Waiters::hold(&s, Role::Owner, 10, 1).unwrap();
        let (_m, mut machine) = Waiters::hold(&s, Role::Machine, 10, 1).unwrap();
        s.borrow_mut().wake(&handoff_at(2), |role| role.as_str().into());
        assert_eq!(owner.try_recv().unwrap().as_deref(), Some("owner"));
        assert_eq!(machine.try_recv().unwrap().as_deref(), Some("machine"));
    }

    #[test]
    fn the_published_version_only_rises_and_its_answer_is_rendered_once_per_version_and_role() {
        let mut p = Published::default();
        let render = |h: &Handoff, role: Role| format!("{{\"version\":{},\"to\":\"{}\"}}", h.record.version, role.as_str());
        assert!(p.answer(Role::Owner, render).is_none(), "nothing is published before the first confirmation");
        p.confirm(handoff_at(3));
        let first = p.answer(Role::Owner, render).unwrap();
        assert!(Rc::ptr_eq(&first, &p.answer(Role::Owner, |_, _| unreachable!("rendered twice")).unwrap()), "rendered once, then shared");
        assert!(first.contains("\"version\":3") && first.contains("owner"), "{first}");
        let machine = p.answer(Role::Machine, render).unwrap();
        assert!(machine.contains("machine"), "each role has its own answer: {machine}");
        assert!(Rc::ptr_eq(&machine, &p.answer(Role::Machine, |_, _| unreachable!("rendered twice")).unwrap()));
        p.confirm(handoff_at(2));
        assert_eq!(p.handoff().unwrap().record.version, 3, "an older confirmation changes nothing");
        // An unconfirmed version is rendered for its own answer and never kept.
        let unconfirmed = p.answer_of(&handoff_at(4), Role::Owner, render);
        assert!(unconfirmed.contains("\"version\":4"));
        assert!(p.answer(Role::Owner, render).unwrap().contains("\"version\":3"));
        p.confirm(handoff_at(4));
        assert!(p.answer(Role::Owner, render).unwrap().contains("\"version\":4"));
        assert!(p.answer(Role::Machine, render).unwrap().contains("\"version\":4"));
    }
}
