//! The outbox: what the owner's index is owed after a change, and when to send it. A pure
//! machine in the style of a protocol state machine: the Durable Object tells it what happened
//! ([`Outbox::on_commit`], [`Outbox::on_sent`], [`Outbox::on_alarm`]), asks it what to do
//! ([`Outbox::poll_send`]), and carries that out (the send itself, the alarm). It holds no
//! clock and does no I/O.
//!
//! Rules:
//! - one send at a time, and it carries the newest row owed: changes that commit while a send
//!   is on its way are delivered together by the next one (coalescing);
//! - a row is owed until a send of it (or of a newer one) succeeds; `delivered` only rises;
//! - whenever something is owed and undelivered, an alarm is pending or a send is on its way,
//!   so a Worker that dies between a change and its delivery is covered
//!   ([`OUTBOX_SAFETY_ALARM_MS`] after the change);
//! - after a failed send nothing is sent until the retry alarm fires or a new change commits;
//!   the retry waits `OUTBOX_RETRY_MS_MIN · 2^(attempts-1)`, capped at [`OUTBOX_RETRY_MS_MAX`];
//! - a change that finds an alarm pending schedules none (an alarm write saved per change).

use crate::limits::{OUTBOX_RETRY_MS_MAX, OUTBOX_RETRY_MS_MIN, OUTBOX_SAFETY_ALARM_MS};
use crate::time::EpochMs;

/// The row owed to the index, as of one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed<R> {
    pub version: u64,
    pub row: R,
    /// Failed sends of this row so far.
    pub attempts: u32,
}

/// One send to carry out: the row of `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send<R> {
    pub version: u64,
    pub row: R,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbox<R> {
    /// The highest version the index acknowledged (in this object's lifetime).
    delivered: u64,
    owed: Option<Owed<R>>,
    /// The version of the send on its way.
    in_flight: Option<u64>,
    /// A send failed: hold further sends until the retry alarm or a new change.
    paused: bool,
    /// When the alarm this machine asked for is due, until it runs.
    alarm_at: Option<EpochMs>,
}

impl<R> Default for Outbox<R> {
    fn default() -> Self {
        Outbox { delivered: 0, owed: None, in_flight: None, paused: false, alarm_at: None }
    }
}

/// How long to wait before the retry that follows `attempts` failed sends (`attempts ≥ 1`).
pub fn backoff_ms(attempts: u32) -> EpochMs {
    let doublings = attempts.saturating_sub(1).min(16);
    (OUTBOX_RETRY_MS_MIN << doublings).min(OUTBOX_RETRY_MS_MAX)
}

impl<R: Clone> Outbox<R> {
    /// A change of `version` committed, owing `row`. Answers when to set the safety alarm,
    /// or `None` when one is already pending.
    pub fn on_commit(&mut self, version: u64, row: R, now: EpochMs) -> Option<EpochMs> {
        if self.owed.as_ref().is_none_or(|o| version > o.version) {
            self.owed = Some(Owed { version, row, attempts: 0 });
        }
        self.paused = false;
        if self.alarm_at.is_some_and(|at| at > now) {
            return None;
        }
        let at = now + OUTBOX_SAFETY_ALARM_MS;
        self.alarm_at = Some(at);
        Some(at)
    }

    /// The row storage holds, read back by an object that may have forgotten it (after an
    /// eviction, or before an alarm). A row older than the one held is ignored.
    pub fn restore(&mut self, owed: Owed<R>) {
        if self.owed.as_ref().is_none_or(|o| owed.version > o.version) {
            self.owed = Some(owed);
        }
    }

    /// Forgets the row held in memory (a failed commit: storage is the truth).
    pub fn forget(&mut self) {
        self.owed = None;
    }

    /// The send to make now, if any: the newest row, when it is undelivered, no send is on
    /// its way and no retry is being waited for. The send is then on its way until
    /// [`Outbox::on_sent`].
    pub fn poll_send(&mut self) -> Option<Send<R>> {
        if self.in_flight.is_some() || self.paused {
            return None;
        }
        let owed = self.owed.as_ref().filter(|o| o.version > self.delivered)?;
        self.in_flight = Some(owed.version);
        Some(Send { version: owed.version, row: owed.row.clone() })
    }

    /// The send on its way ended. Answers when to set the retry alarm after a failure
    /// (replacing any pending alarm), or `None`.
    pub fn on_sent(&mut self, ok: bool, now: EpochMs) -> Option<EpochMs> {
        let version = self.in_flight.take()?;
        if ok {
            self.delivered = self.delivered.max(version);
            return None;
        }
        let owed = self.owed.as_mut()?;
        if owed.version == version {
            owed.attempts = owed.attempts.saturating_add(1);
        }
        self.paused = true;
        let at = now + backoff_ms(owed.attempts.max(1));
        self.alarm_at = Some(at);
        Some(at)
    }

    /// The alarm ran: sends may resume. Answers the send to make, if any.
    pub fn on_alarm(&mut self) -> Option<Send<R>> {
        self.alarm_at = None;
        self.paused = false;
        self.poll_send()
    }

    pub fn is_delivered(&self, version: u64) -> bool {
        self.delivered >= version
    }

    pub fn is_sending(&self) -> bool {
        self.in_flight.is_some()
    }

    /// The row owed, if any (delivered or not).
    pub fn owed(&self) -> Option<&Owed<R>> {
        self.owed.as_ref()
    }

    /// Whether something is owed and not yet delivered.
    pub fn is_owing(&self) -> bool {
        self.owed.as_ref().is_some_and(|o| o.version > self.delivered)
    }

    pub fn alarm_at(&self) -> Option<EpochMs> {
        self.alarm_at
    }
}

#[cfg(test)]
mod tests;
