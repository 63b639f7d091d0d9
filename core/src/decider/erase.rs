//! Erasing a hand-off, as a sequence of effects the object carries out one at a time, each
//! outcome fed back: the owner's index drops the row first, so that no row outlives the
//! hand-off; then its storage and its alarm go, and the decider forgets it; then every socket
//! watching it is closed. A failed step stops the erase with the hand-off whole, to be erased
//! again at [`Erasure::retry_at`].

use super::Decider;
use crate::limits::OUTBOX_RETRY_MS_MAX;
use crate::time::EpochMs;

/// One effect of an erase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EraseStep {
    /// Ask the owner's index to drop the hand-off's row and every delivery of it, and to take
    /// no later row of this life.
    DropRow { owner: String, id: String, incarnation: u64 },
    /// Delete the object's alarm and every row it stored.
    DeleteStorage,
    /// Close every socket that watches the hand-off.
    CloseSockets,
}

/// An erase under way: the steps left, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erasure {
    steps: std::collections::VecDeque<EraseStep>,
}

/// Where an erase stands after a step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erasing {
    /// Carry this out next.
    Next(EraseStep),
    /// Erased.
    Done,
    /// A step failed: nothing after it ran; erase again then.
    Failed { retry_at: EpochMs },
}

impl Erasure {
    /// The step to carry out first.
    pub fn first(&self) -> Option<&EraseStep> {
        self.steps.front()
    }

    /// When an erase that failed at `now` is tried again.
    pub fn retry_at(now: EpochMs) -> EpochMs {
        now.saturating_add(OUTBOX_RETRY_MS_MAX)
    }
}

impl Decider {
    /// The erase of the hand-off held, or `None` when there is none (erased already, or never
    /// there).
    pub fn erasure(&self) -> Option<Erasure> {
        let h = self.handoff()?;
        let owner = h.record.owner.clone();
        let id = h.record.id.clone();
        let incarnation = h.record.incarnation;
        Some(Erasure {
            steps: [EraseStep::DropRow { owner, id, incarnation }, EraseStep::DeleteStorage, EraseStep::CloseSockets]
                .into(),
        })
    }

    /// The first step left in `erasure` ended (`ok`) at `now`: after the storage went, the
    /// decider forgets the hand-off; after a failure, nothing more runs.
    pub fn on_erase_step(&mut self, erasure: &mut Erasure, ok: bool, now: EpochMs) -> Erasing {
        let Some(step) = erasure.steps.pop_front() else {
            return Erasing::Done;
        };
        if !ok {
            erasure.steps.clear();
            return Erasing::Failed { retry_at: Erasure::retry_at(now) };
        }
        if step == EraseStep::DeleteStorage {
            self.erased();
        }
        match erasure.steps.front() {
            Some(next) => Erasing::Next(next.clone()),
            None => Erasing::Done,
        }
    }
}
