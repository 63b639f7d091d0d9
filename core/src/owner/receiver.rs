//! Who an owner's notifications go to, and what becomes of each one: one rule for a webhook and
//! a Web Push subscription alike. Every notification owed is one pending delivery to one
//! receiver; the owner holds at most its cap of them over all its receivers (the oldest go
//! first, counted on their receiver); each attempt is leased before it starts, and its answer
//! ends the delivery, schedules its retry or, for a push subscription that is gone, ends the
//! receiver. A receiver keeps its newest [`Receiver::kept_finished`] finished deliveries.

use crate::limits::{PUSH_RETRY_WINDOW_MS, WEBHOOK_DELIVERIES_KEPT, WEBHOOK_TIMEOUT_MS};
use crate::notice::{self, Notice};
use crate::rows::Row;
use crate::time::{EpochMs, Timestamp};
use serde::{Deserialize, Serialize};

/// The kind of receiver a delivery goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Receiver {
    /// A URL the owner registered, sent a signed POST.
    Webhook,
    /// A browser's or phone's push subscription, sent an encrypted message through its push service.
    Push,
}

impl Receiver {
    pub const ALL: [Receiver; 2] = [Receiver::Webhook, Receiver::Push];

    /// The name a stored delivery carries.
    pub fn as_str(self) -> &'static str {
        match self {
            Receiver::Webhook => "webhook",
            Receiver::Push => "push",
        }
    }

    pub fn parse(name: &str) -> Option<Receiver> {
        Receiver::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Finished deliveries (delivered or failed) kept per receiver, newest first: a webhook
    /// lists them; a push subscription has no such list, so it keeps none.
    pub fn kept_finished(self) -> usize {
        match self {
            Receiver::Webhook => WEBHOOK_DELIVERIES_KEPT,
            Receiver::Push => 0,
        }
    }

    /// How long after its event a message is worth sending, where it expires: a push service
    /// drops a message once the TTL it was given ends, so no attempt is scheduled after that.
    pub fn expires_after_ms(self) -> Option<i64> {
        match self {
            Receiver::Webhook => None,
            Receiver::Push => Some(PUSH_RETRY_WINDOW_MS),
        }
    }

    /// What the receiver's answer to an attempt means (`None`: no answer, or none in time).
    pub fn answer(self, status: Option<u16>) -> ReceiverAnswer {
        match (self, status) {
            (_, Some(200..=299)) => ReceiverAnswer::Taken,
            (Receiver::Push, Some(404 | 410)) => ReceiverAnswer::Gone,
            _ => ReceiverAnswer::NotTaken,
        }
    }

    /// The attempt about to start, counted, with its next attempt set as if it fails when its
    /// timeout ends: a send the runtime never finishes is retried too. `None` when the message
    /// has expired: it ends failed, unsent.
    pub fn lease(self, created_at: EpochMs, attempts_before: u32, now: EpochMs) -> Option<Lease> {
        if self.expires_after_ms().is_some_and(|ms| now.saturating_sub(created_at) > ms) {
            return None;
        }
        let attempts = attempts_before.saturating_add(1);
        let after_timeout = now.saturating_add(WEBHOOK_TIMEOUT_MS);
        let next_attempt_at = self.retry_at(created_at, attempts, after_timeout).unwrap_or(after_timeout);
        Some(Lease { attempts, next_attempt_at })
    }

    /// What the attempt numbered `attempts` (from 1), which got `status` at `now`, leads to.
    pub fn after_attempt(self, created_at: EpochMs, attempts: u32, status: Option<u16>, now: EpochMs) -> Next {
        match self.answer(status) {
            ReceiverAnswer::Taken => Next::Delivered,
            ReceiverAnswer::Gone => Next::Gone,
            ReceiverAnswer::NotTaken => match self.retry_at(created_at, attempts, now) {
                Some(at) => Next::Retry { at },
                None => Next::Failed,
            },
        }
    }

    /// The one retry schedule ([`notice::retry_at`]: until `WEBHOOK_RETRY_WINDOW_MS` after the
    /// event), never past the message's expiry.
    fn retry_at(self, created_at: EpochMs, attempts: u32, now: EpochMs) -> Option<EpochMs> {
        let expires = self.expires_after_ms().map(|ms| created_at.saturating_add(ms));
        notice::retry_at(created_at, attempts, now).filter(|at| expires.is_none_or(|end| *at <= end))
    }
}

/// What a receiver's answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiverAnswer {
    /// 2xx: the receiver has it.
    Taken,
    /// 404 or 410 from a push service: the subscription expired or was withdrawn.
    Gone,
    /// Any other status, or none.
    NotTaken,
}

/// An attempt about to start: its number, and when it is tried again if it never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub attempts: u32,
    pub next_attempt_at: EpochMs,
}

/// What an attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Finished: the receiver has it.
    Delivered,
    /// Still pending, tried again then.
    Retry { at: EpochMs },
    /// Finished: not taken within the receiver's window.
    Failed,
    /// The receiver is gone: it and every delivery to it end.
    Gone,
}

/// One receiver, as what a delivery owes it is decided from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscriber<'a> {
    pub receiver: Receiver,
    pub id: &'a str,
    pub events: &'a [Notice],
}

/// One notification owed: a delivery to write, pending, to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owed<'a> {
    pub receiver: Receiver,
    pub to: &'a str,
    pub row: &'a Row,
    pub notice: Notice,
    /// The same for the same receiver, hand-off, version and notice: a row delivered twice
    /// owes one message.
    pub key: [u8; 16],
}

/// The deliveries the `notices` ([`notice::owed_chain`]) owe, in the order the notices
/// happened and, within one notice, in the order of `subscribers`: one per subscriber whose
/// events name the notice.
pub fn owed<'a>(notices: &[(&'a Row, Notice)], subscribers: &[Subscriber<'a>]) -> Vec<Owed<'a>> {
    let mut owed = Vec::new();
    for &(row, notice) in notices {
        for s in subscribers.iter().filter(|s| s.events.contains(&notice)) {
            let key = notice::message_key(s.id, &row.id, row.version, notice);
            owed.push(Owed { receiver: s.receiver, to: s.id, row, notice, key });
        }
    }
    owed
}

/// How many of the oldest pending deliveries go when `pending` are held beside a cap of
/// `pending_max`, over all the owner's receivers of both kinds.
pub fn over_cap(pending: usize, pending_max: usize) -> usize {
    pending.saturating_sub(pending_max)
}

// ---- What a webhook's deliveries list shows (`GET /v1/webhooks/{id}/deliveries`). ----

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<DeliveryState> {
        [DeliveryState::Pending, DeliveryState::Delivered, DeliveryState::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// One delivery of one event to one webhook, and its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The message id (`webhook-id`), the same on every attempt.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub handoff: String,
    pub version: u64,
    pub state: DeliveryState,
    pub attempts: u32,
    /// The receiver's status on the last attempt; `null` before the first, or when none came
    /// within the timeout.
    pub last_status: Option<u16>,
    pub last_attempt_at: Option<Timestamp>,
    /// When a pending delivery is tried next; `null` once it is delivered or failed.
    pub next_attempt_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests;
