//! The held follows of one owner's machines (`GET /v1/machine/handoffs?after=V`), as a registry
//! of places, as [`crate::waiters`] is for a hand-off's waits: which machine each held follow
//! is of, and how many each machine holds. The `Machines` object keeps each follow's answer
//! channel under its [`FollowId`]; this registry says which of them a change answers.
//!
//! Rules:
//! - a machine holds at most [`MACHINE_FOLLOWS_PER_MACHINE_MAX`] follows; past it, 429
//!   `wait.too_many` (a client backs off, where an answer at once would have it call again
//!   at once, in a loop, until a place comes free);
//! - a follow is answered at most once: by its machine's list changing, by its machine's end
//!   (revoked or enrolled again), or at its timeout; then, or when its client goes away, its
//!   place is free.

use crate::error::{Code, Refusal};
use crate::limits::MACHINE_FOLLOWS_PER_MACHINE_MAX;
use crate::waiters::WaiterId;

/// One held follow's place, as the object knows it: a waiter's id, so that the object keeps
/// its channels as a hand-off's object keeps its waits'.
pub type FollowId = WaiterId;

#[derive(Debug, Default)]
pub struct Follows {
    next_id: u64,
    /// Each held follow's place and machine (a few per machine: a list, not a map).
    held: Vec<(FollowId, String)>,
}

impl Follows {
    /// Holds a place for a follow of `machine`, or refuses with 429 `wait.too_many` when the
    /// machine holds [`MACHINE_FOLLOWS_PER_MACHINE_MAX`] already.
    pub fn hold(&mut self, machine: &str) -> Result<FollowId, Refusal> {
        if self.len_of(machine) >= MACHINE_FOLLOWS_PER_MACHINE_MAX {
            return Err(Refusal::new(
                Code::WaitTooMany,
                format!(
                    "this machine holds {MACHINE_FOLLOWS_PER_MACHINE_MAX} follows of its list \
                     (MACHINE_FOLLOWS_PER_MACHINE_MAX): follow once at a time"
                ),
            ));
        }
        self.next_id += 1;
        let id = WaiterId(self.next_id);
        self.held.push((id, machine.to_string()));
        Ok(id)
    }

    /// Gives a place back (timed out, or its client gone); one answered already is not held,
    /// and releasing it changes nothing.
    pub fn release(&mut self, id: FollowId) {
        self.held.retain(|(held, _)| *held != id);
    }

    /// The follows of `machine`, answered now (its list changed, or it ended): their places are
    /// free from now on, and the others stay.
    pub fn wake(&mut self, machine: &str) -> Vec<FollowId> {
        let woken: Vec<FollowId> = self.held.iter().filter(|(_, m)| m == machine).map(|(id, _)| *id).collect();
        self.held.retain(|(_, m)| m != machine);
        woken
    }

    /// How many follows `machine` holds.
    pub fn len_of(&self, machine: &str) -> usize {
        self.held.iter().filter(|(_, m)| m == machine).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_machine_holds_its_follows_within_its_cap_and_a_change_answers_only_its_own_once() {
        let mut f = Follows::default();
        let mine: Vec<FollowId> = (0..MACHINE_FOLLOWS_PER_MACHINE_MAX).map(|_| f.hold("vm-7").unwrap()).collect();
        let refused = f.hold("vm-7").unwrap_err();
        assert_eq!(refused.code, Code::WaitTooMany);
        assert!(refused.message.contains("MACHINE_FOLLOWS_PER_MACHINE_MAX"));
        let other = f.hold("vm-8").expect("another machine's places are its own");
        f.release(mine[0]);
        assert_eq!(
            f.len_of("vm-7"),
            MACHINE_FOLLOWS_PER_MACHINE_MAX - 1,
            "a timed-out or gone follow gives its place back"
        );
        let again = f.hold("vm-7").unwrap();
        let woken = f.wake("vm-7");
        assert_eq!(woken.len(), MACHINE_FOLLOWS_PER_MACHINE_MAX);
        assert!(woken.contains(&again) && !woken.contains(&mine[0]) && !woken.contains(&other));
        assert!(f.wake("vm-7").is_empty(), "each answered once");
        f.release(again);
        assert_eq!((f.len_of("vm-7"), f.len_of("vm-8")), (0, 1));
    }
}
