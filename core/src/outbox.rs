//! The outbox: what the owner's index is owed after a change, and when to send it. A pure
//! machine in the style of a protocol state machine: the Durable Object tells it what happened
//! ([`Outbox::on_commit`], [`Outbox::on_sent`], [`Outbox::on_alarm`]), asks it what to do
//! ([`Outbox::poll_send`]), and carries that out (the send itself, the alarm). It holds no
//! clock and does no I/O.
//!
//! Rules:
//! - one send at a time, and it carries the newest row owed: changes that commit while a send
//!   is on its way are sent together by the next one (coalescing);
//! - coalescing never loses a notice: a row that *entered* something a notice names (a turn, a
//!   status, a close: `notice::entered`, decided by the caller) and is passed unsent by a
//!   newer one is kept in [`Outbox::passed`] and travels with every send until one is
//!   acknowledged, so the index can walk the chain (`notice::owed_chain`); rows that entered
//!   nothing are coalesced away, as a chain that skips them owes the same notices. At most
//!   [`OUTBOX_PASSED_MAX`] are kept, the oldest dropped first (counted in [`Outbox::dropped`]);
//! - a row is owed until a send of it (or of a newer one) succeeds; `taken` only rises;
//! - whenever something is owed and not taken, an alarm is pending or a send is on its way,
//!   so a Worker that dies between a change and its row send is covered
//!   ([`OUTBOX_SAFETY_ALARM_MS`] after the change);
//! - after a failed send nothing is sent until the retry alarm fires or a new change commits;
//!   the retry waits `OUTBOX_RETRY_MS_MIN · 2^(attempts-1)`, capped at [`OUTBOX_RETRY_MS_MAX`];
//! - a change that finds an alarm pending schedules none (an alarm write saved per change).

use crate::limits::{OUTBOX_PASSED_MAX, OUTBOX_RETRY_MS_MAX, OUTBOX_RETRY_MS_MIN, OUTBOX_SAFETY_ALARM_MS};
use crate::time::EpochMs;

/// The row owed to the index, as of one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed<R> {
    pub version: u64,
    pub row: R,
    /// Failed sends of this row so far.
    pub attempts: u32,
    /// The row entered something a notice names, relative to the row before it: passed
    /// not taken, it must still reach the index.
    pub entered: bool,
}

/// A row of one version that a newer one passed (or is passing) before its row send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedRow<R> {
    pub version: u64,
    pub row: R,
}

/// One send to carry out: the row of `version`, after the rows it passed (oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send<R> {
    pub version: u64,
    pub row: R,
    pub passed: Vec<PassedRow<R>>,
}

/// What a commit asks of storage, in the change's own transaction, so that the passed rows
/// outlive an eviction as the owed row does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed<R> {
    /// Set the safety alarm then, unless `None` (one is pending).
    pub alarm_at: Option<EpochMs>,
    /// Store this passed row.
    pub pass: Option<PassedRow<R>>,
    /// Delete the stored passed rows up to this version (dropped past the cap).
    pub unpass_through: Option<u64>,
}

/// What the end of a send asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ended {
    /// After a failure: set the retry alarm then (replacing any pending alarm).
    pub retry_at: Option<EpochMs>,
    /// After a success: delete the stored passed rows up to this version (now taken).
    pub unpass_through: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbox<R> {
    /// The highest version the index acknowledged (in this object's lifetime).
    taken: u64,
    owed: Option<Owed<R>>,
    /// Rows older than `owed` that entered something and are not known taken, oldest first.
    passed: Vec<PassedRow<R>>,
    /// Passed rows dropped past [`OUTBOX_PASSED_MAX`] in this object's lifetime.
    dropped: u64,
    /// The version of the send on its way.
    in_flight: Option<u64>,
    /// A send failed: hold further sends until the retry alarm or a new change.
    paused: bool,
    /// When the alarm this machine asked for is due, until it runs.
    alarm_at: Option<EpochMs>,
}

impl<R> Default for Outbox<R> {
    fn default() -> Self {
        Outbox { taken: 0, owed: None, passed: Vec::new(), dropped: 0, in_flight: None, paused: false, alarm_at: None }
    }
}

/// How long to wait before the retry that follows `attempts` failed sends (`attempts ≥ 1`).
pub fn backoff_ms(attempts: u32) -> EpochMs {
    let doublings = attempts.saturating_sub(1).min(16);
    (OUTBOX_RETRY_MS_MIN << doublings).min(OUTBOX_RETRY_MS_MAX)
}

impl<R: Clone> Outbox<R> {
    /// A change of `version` committed, owing `row`, which `entered` something a notice names
    /// relative to the row owed before it. The row it replaces is kept as passed when it is
    /// not taken and entered something itself. Answers the safety alarm and what to store.
    pub fn on_commit(&mut self, version: u64, row: R, entered: bool, now: EpochMs) -> Committed<R> {
        let mut committed = Committed { alarm_at: None, pass: None, unpass_through: None };
        if self.owed.as_ref().is_none_or(|o| version > o.version) {
            let replaced = self.owed.replace(Owed { version, row, attempts: 0, entered });
            if let Some(o) = replaced.filter(|o| o.entered && o.version > self.taken) {
                let entry = PassedRow { version: o.version, row: o.row };
                committed.pass = Some(entry.clone());
                self.passed.push(entry);
                if self.passed.len() > OUTBOX_PASSED_MAX {
                    let oldest = self.passed.remove(0);
                    self.dropped += 1;
                    committed.unpass_through = Some(oldest.version);
                }
            }
        }
        self.paused = false;
        if self.alarm_at.is_some_and(|at| at > now) {
            return committed;
        }
        let at = now + OUTBOX_SAFETY_ALARM_MS;
        self.alarm_at = Some(at);
        committed.alarm_at = Some(at);
        committed
    }

    /// The row storage holds, read back by an object that may have forgotten it (after an
    /// eviction, or before an alarm). A row older than the one held is ignored.
    pub fn restore(&mut self, owed: Owed<R>) {
        if self.owed.as_ref().is_none_or(|o| owed.version > o.version) {
            self.owed = Some(owed);
        }
    }

    /// A passed row storage holds, read back with the owed row (after [`Outbox::restore`]).
    /// One no older than the owed row, taken, or already held is ignored; the rest stay in order.
    pub fn restore_passed(&mut self, entry: PassedRow<R>) {
        let older = self.owed.as_ref().is_none_or(|o| entry.version < o.version) && entry.version > self.taken;
        let position = self.passed.binary_search_by_key(&entry.version, |e| e.version);
        if let (true, Err(at)) = (older, position) {
            self.passed.insert(at, entry);
        }
    }

    /// Forgets the rows held in memory (a failed commit: storage is the truth).
    pub fn forget(&mut self) {
        self.owed = None;
        self.passed.clear();
    }

    /// The send to make now, if any: the newest row, when it is not taken, no send is on
    /// its way and no retry is being waited for. The send is then on its way until
    /// [`Outbox::on_sent`].
    pub fn poll_send(&mut self) -> Option<Send<R>> {
        if self.in_flight.is_some() || self.paused {
            return None;
        }
        let owed = self.owed.as_ref().filter(|o| o.version > self.taken)?;
        self.in_flight = Some(owed.version);
        Some(Send { version: owed.version, row: owed.row.clone(), passed: self.passed.clone() })
    }

    /// The send on its way ended: after a success the rows it carried are taken (and their
    /// stored copies may go); after a failure, the retry alarm.
    pub fn on_sent(&mut self, ok: bool, now: EpochMs) -> Ended {
        let Some(version) = self.in_flight.take() else {
            return Ended::default();
        };
        if ok {
            self.taken = self.taken.max(version);
            let taken = self.taken;
            let unpass_through = self.passed.iter().rev().map(|e| e.version).find(|v| *v <= taken);
            self.passed.retain(|e| e.version > taken);
            return Ended { retry_at: None, unpass_through };
        }
        let Some(owed) = self.owed.as_mut() else {
            return Ended::default();
        };
        if owed.version == version {
            owed.attempts = owed.attempts.saturating_add(1);
        }
        self.paused = true;
        let at = now + backoff_ms(owed.attempts.max(1));
        self.alarm_at = Some(at);
        Ended { retry_at: Some(at), unpass_through: None }
    }

    /// The alarm ran: sends may resume. Answers the send to make, if any.
    pub fn on_alarm(&mut self) -> Option<Send<R>> {
        self.alarm_at = None;
        self.paused = false;
        self.poll_send()
    }

    pub fn is_taken(&self, version: u64) -> bool {
        self.taken >= version
    }

    pub fn is_sending(&self) -> bool {
        self.in_flight.is_some()
    }

    /// The row owed, if any (taken or not).
    pub fn owed(&self) -> Option<&Owed<R>> {
        self.owed.as_ref()
    }

    /// The passed rows held, oldest first.
    pub fn passed(&self) -> &[PassedRow<R>] {
        &self.passed
    }

    /// Passed rows dropped past [`OUTBOX_PASSED_MAX`] (their notices are lost).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Whether something is owed and not yet taken.
    pub fn is_owing(&self) -> bool {
        self.owed.as_ref().is_some_and(|o| o.version > self.taken)
    }

    pub fn alarm_at(&self) -> Option<EpochMs> {
        self.alarm_at
    }
}

#[cfg(test)]
mod tests;
