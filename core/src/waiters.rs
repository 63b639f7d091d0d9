//! Long-poll waiters held by one hand-off, as a registry of places: who waits, for which
//! version, and how many of each role. The object keeps each waiter's answer channel under its
//! [`WaiterId`]; this registry says which of them a published version answers.
//!
//! Rules:
//! - each role's waits have their own cap, so one role never takes the other's places;
//! - a waiter is answered at most once, and only by a version its `after` asks for (or the
//!   close), after which its place is free;
//! - a place is held exactly until the waiter is answered or released (timed out, or its
//!   client gone).

use crate::error::{Code, Refusal};
use crate::role::{PerRole, Role};
use crate::turn::Record;
use std::collections::BTreeMap;

/// One waiter's place, as the object knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaiterId(pub u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    role: Role,
    on: On,
}

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    /// A version above the one it has seen (or the close).
    Version(u64),
    /// An event of a turn's timeline after the `seq` it has seen (`GET …/events`, held).
    Timeline(TimelineAsk),
}

/// A held read of a turn's timeline: events of `turn` after `after`, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineAsk {
    pub turn: u64,
    pub after: u64,
    pub limit: usize,
}

#[derive(Debug, Default)]
pub struct Waiters {
    next_id: u64,
    held: BTreeMap<WaiterId, Held>,
    by_role: PerRole<usize>,
}

impl Waiters {
    /// Holds a place for a waiter of `role` that has seen `after`, or refuses with 429
    /// `wait.too_many` when the role already holds `max` (its cap, named `cap_name`).
    pub fn hold(&mut self, role: Role, after: u64, max: usize, cap_name: &str) -> Result<WaiterId, Refusal> {
        self.hold_on(role, On::Version(after), max, cap_name)
    }

    /// Holds a place for a held read of a timeline, within the same cap as the waits of its
    /// role: a held read is bounded as a wait is.
    pub fn hold_timeline(
        &mut self,
        role: Role,
        ask: TimelineAsk,
        max: usize,
        cap_name: &str,
    ) -> Result<WaiterId, Refusal> {
        self.hold_on(role, On::Timeline(ask), max, cap_name)
    }

    fn hold_on(&mut self, role: Role, on: On, max: usize, cap_name: &str) -> Result<WaiterId, Refusal> {
        if self.by_role[role] >= max {
            return Err(Refusal::new(
                Code::WaitTooMany,
                format!("this hand-off holds {max} waits of this role ({cap_name})"),
            ));
        }
        self.next_id += 1;
        let id = WaiterId(self.next_id);
        self.held.insert(id, Held { role, on });
        self.by_role[role] += 1;
        Ok(id)
    }

    /// Gives a place back (the waiter timed out or its client went away); a place already
    /// answered is not held any more, and releasing it changes nothing.
    pub fn release(&mut self, id: WaiterId) {
        if let Some(held) = self.held.remove(&id) {
            self.by_role[held.role] -= 1;
        }
    }

    /// The waiters `record` answers (a version above the one each has seen, or the close),
    /// with their roles; their places are free from now on, and the others stay.
    pub fn wake(&mut self, record: &Record) -> Vec<(WaiterId, Role)> {
        let woken: Vec<(WaiterId, Role)> = self
            .held
            .iter()
            .filter(|(_, held)| matches!(held.on, On::Version(after) if crate::turn::wait_answers_now(record, after)))
            .map(|(id, held)| (*id, held.role))
            .collect();
        for (id, _) in &woken {
            self.release(*id);
        }
        woken
    }

    /// The held reads of `turn`'s timeline that its events up to `last` answer (one after
    /// what each has seen); their places are free from now on. Never a wait on the version.
    pub fn wake_timeline(&mut self, turn: u64, last: u64) -> Vec<(WaiterId, TimelineAsk)> {
        let woken: Vec<(WaiterId, TimelineAsk)> = self
            .held
            .iter()
            .filter_map(|(id, held)| match held.on {
                On::Timeline(ask) if ask.turn == turn && ask.after < last => Some((*id, ask)),
                _ => None,
            })
            .collect();
        for (id, _) in &woken {
            self.release(*id);
        }
        woken
    }

    /// How many waiters of `role` are held.
    pub fn len_of(&self, role: Role) -> usize {
        self.by_role[role]
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::State;

    fn record_at(version: u64) -> Record {
        let mut record = Record::create("ho_1".into(), "alice".into(), "s".into(), "m1".into(), "large".into(), 0);
        record.version = version;
        record
    }

    #[test]
    fn the_cap_refuses_past_max_and_a_released_place_is_given_back() {
        let mut w = Waiters::default();
        let a = w.hold(Role::Owner, 1, 2, "CAP").unwrap();
        w.hold(Role::Owner, 1, 2, "CAP").unwrap();
        let refused = w.hold(Role::Owner, 1, 2, "CAP").unwrap_err();
        assert_eq!(refused.code, Code::WaitTooMany);
        assert!(refused.message.contains("CAP"), "the refusal names its cap: {}", refused.message);
        w.release(a);
        assert_eq!(w.len_of(Role::Owner), 1);
        assert!(w.hold(Role::Owner, 1, 2, "CAP").is_ok());
    }

    #[test]
    fn each_role_has_its_own_cap_so_machine_waits_never_take_the_owners_places() {
        let mut w = Waiters::default();
        let machine: Vec<_> = (0..3).map(|_| w.hold(Role::Machine, 0, 3, "M").unwrap()).collect();
        assert!(w.hold(Role::Machine, 0, 3, "M").is_err(), "the machine's cap is full");
        w.hold(Role::Owner, 0, 1, "O").expect("the owner still gets a place");
        assert!(w.hold(Role::Owner, 0, 1, "O").is_err());
        assert_eq!((w.len_of(Role::Machine), w.len_of(Role::Owner)), (3, 1));
        for id in machine {
            w.release(id);
        }
        assert_eq!(w.len_of(Role::Machine), 0);
        w.wake(&record_at(1));
        assert_eq!(w.len_of(Role::Owner), 0, "a woken waiter gives its role's place back");
        assert!(w.is_empty());
    }

    #[test]
    fn a_wake_answers_once_every_waiter_below_the_version_and_keeps_the_others() {
        let mut w = Waiters::default();
        let a = w.hold(Role::Owner, 1, 10, "O").unwrap();
        let b = w.hold(Role::Machine, 1, 10, "M").unwrap();
        let ahead = w.hold(Role::Owner, 2, 10, "O").unwrap();
        assert_eq!(w.wake(&record_at(2)), vec![(a, Role::Owner), (b, Role::Machine)]);
        assert_eq!(w.wake(&record_at(2)), vec![], "a waiter is answered once");
        w.release(a);
        assert_eq!(w.len_of(Role::Owner), 1, "releasing an answered place changes nothing");
        assert_eq!(w.wake(&record_at(3)), vec![(ahead, Role::Owner)]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_held_timeline_read_is_woken_only_by_its_turns_new_events_and_never_by_a_version() {
        let mut w = Waiters::default();
        let ask = TimelineAsk { turn: 2, after: 5, limit: 10 };
        let read = w.hold_timeline(Role::Owner, ask, 2, "O").unwrap();
        let wait = w.hold(Role::Owner, 1, 2, "O").unwrap();
        assert!(w.hold_timeline(Role::Owner, ask, 2, "O").is_err(), "a held read counts against the waits' cap");
        assert_eq!(w.wake(&record_at(9)), vec![(wait, Role::Owner)], "a version wakes no held read");
        assert_eq!(w.wake_timeline(1, 99), vec![], "another turn's events wake nothing");
        assert_eq!(w.wake_timeline(2, 5), vec![], "nothing after what it has seen");
        assert_eq!(w.wake_timeline(2, 6), vec![(read, ask)]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_close_answers_every_waiter_whatever_it_has_seen() {
        let mut w = Waiters::default();
        let id = w.hold(Role::Owner, 99, 10, "O").unwrap();
        let mut closed = record_at(3);
        closed.state = State::Closed;
        assert_eq!(w.wake(&closed), vec![(id, Role::Owner)]);
    }
}
