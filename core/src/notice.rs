//! When the owner is owed a notification, and how a webhook delivery is retried: pure rules,
//! decided from the row the owner's index held and the row it receives. The index stores what
//! [`owed`] says in the transaction that stores the row, and sends it from its alarm.

use crate::error::{Code, Refusal};
use crate::limits::{
    PUSH_SUBSCRIPTIONS_PER_OWNER_MAX, WEBHOOKS_PER_OWNER_MAX, WEBHOOK_BACKOFF_FIRST_MS, WEBHOOK_BACKOFF_MAX_MS,
    WEBHOOK_RETRY_WINDOW_MS,
};
use crate::rows::Row;
use crate::time::EpochMs;
use crate::turn::{State, Status};
use sha2::{Digest, Sha256};

/// What a webhook (or a push subscription) may ask to be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Notice {
    NeedsYou,
    Done,
    Failed,
    Closed,
}

impl Notice {
    /// Every notice, in the order the contract lists them (the default subscription).
    pub const ALL: [Notice; 4] = [Notice::NeedsYou, Notice::Done, Notice::Failed, Notice::Closed];

    /// The name in a request's `events`.
    pub fn name(self) -> &'static str {
        match self {
            Notice::NeedsYou => "needs-you",
            Notice::Done => "done",
            Notice::Failed => "failed",
            Notice::Closed => "closed",
        }
    }

    pub fn parse(name: &str) -> Option<Notice> {
        Notice::ALL.into_iter().find(|n| n.name() == name)
    }

    /// The `type` of a webhook's body: `handoff.needs_you`, ….
    pub fn message_type(self) -> &'static str {
        match self {
            Notice::NeedsYou => "handoff.needs_you",
            Notice::Done => "handoff.done",
            Notice::Failed => "handoff.failed",
            Notice::Closed => "handoff.closed",
        }
    }

    fn of_status(status: Status) -> Option<Notice> {
        match status {
            Status::NeedsYou => Some(Notice::NeedsYou),
            Status::Done => Some(Notice::Done),
            Status::Failed => Some(Notice::Failed),
            Status::Running | Status::Cancelled => None,
        }
    }
}

/// The notices a row delivered to the owner's index is owed, given the row the index held for
/// that hand-off (`None` for its first row), in the order they happened:
/// - entering needs-you, done or failed on a turn: a new turn in the same status is a new
///   entry, a summary-only update within the same status and turn is not;
/// - closing, once.
///
/// A row no newer than the one held (a replay, a late delivery) is owed nothing, and so is a
/// row that changed nothing a notice names.
pub fn owed(held: Option<&Row>, row: &Row) -> Vec<Notice> {
    let mut notices = Vec::new();
    if held.is_some_and(|h| h.version >= row.version) {
        return notices;
    }
    if let Some(notice) = Notice::of_status(row.status) {
        let entered = held.is_none_or(|h| h.turn != row.turn || h.status != row.status);
        if entered {
            notices.push(notice);
        }
    }
    let was_open = held.is_none_or(|h| h.state == State::Open);
    if row.state == State::Closed && was_open {
        notices.push(Notice::Closed);
    }
    notices
}

/// Whether `row` entered anything [`owed`] reads, relative to the row before it (`None` for a
/// first row): its turn, its status or its state. A row that entered nothing is owed nothing
/// and, as the row before another, reads as the one before it, so a chain of rows may skip it
/// without changing what [`owed_chain`] finds; a row that entered something may not be skipped.
pub fn entered(before: Option<&Row>, row: &Row) -> bool {
    before.is_none_or(|b| b.turn != row.turn || b.status != row.status || b.state != row.state)
}

/// The notices owed along a chain of one hand-off's rows, in order, each with the row (and so
/// the version) it is owed for: [`owed`] between each row and the one before it, starting
/// from the row the index `held`. `passed` are the rows a send carries before its newest,
/// `row`, oldest first; any that is not newer than the row before it (already held, out of
/// order) or is another hand-off's is skipped, so a replay owes nothing twice.
pub fn owed_chain<'a>(held: Option<&'a Row>, passed: &'a [Row], row: &'a Row) -> Vec<(&'a Row, Notice)> {
    let mut before = held;
    let mut notices = Vec::new();
    for next in passed.iter().filter(|p| p.id == row.id).chain(std::iter::once(row)) {
        if before.is_some_and(|b| b.version >= next.version) {
            continue;
        }
        notices.extend(owed(before, next).into_iter().map(|n| (next, n)));
        before = Some(next);
    }
    notices
}

/// Whether one more webhook fits beside the `held` ones.
pub fn admit_webhook(held: usize) -> Result<(), Refusal> {
    if held >= WEBHOOKS_PER_OWNER_MAX {
        return Err(Refusal::new(
            Code::WebhookTooMany,
            format!("an owner has at most {WEBHOOKS_PER_OWNER_MAX} webhooks; delete one first"),
        ));
    }
    Ok(())
}

/// Whether one more push subscription fits beside the `held` ones.
pub fn admit_subscription(held: usize) -> Result<(), Refusal> {
    if held >= PUSH_SUBSCRIPTIONS_PER_OWNER_MAX {
        return Err(Refusal::new(
            Code::SubscriptionTooMany,
            format!("an owner has at most {PUSH_SUBSCRIPTIONS_PER_OWNER_MAX} push subscriptions; delete one first"),
        ));
    }
    Ok(())
}

/// When a delivery whose event was stored at `created_at` and whose attempt number `attempts`
/// (from 1) just failed at `now` is tried next: `WEBHOOK_BACKOFF_FIRST_MS` after the first,
/// doubling up to `WEBHOOK_BACKOFF_MAX_MS`; `None` (failed) once the attempt is
/// `WEBHOOK_RETRY_WINDOW_MS` or more after the event.
pub fn retry_at(created_at: EpochMs, attempts: u32, now: EpochMs) -> Option<EpochMs> {
    if now.saturating_sub(created_at) >= WEBHOOK_RETRY_WINDOW_MS {
        return None;
    }
    let doublings = attempts.saturating_sub(1).min(31);
    let wait = WEBHOOK_BACKOFF_FIRST_MS.saturating_mul(1i64 << doublings).min(WEBHOOK_BACKOFF_MAX_MS);
    Some(now.saturating_add(wait))
}

/// The 16 bytes a delivery's message id is made of: the same for the same webhook, hand-off,
/// version and notice, so a row delivered twice owes one message, not two.
pub fn message_key(webhook: &str, handoff: &str, version: u64, notice: Notice) -> [u8; 16] {
    let digest = Sha256::digest(format!("{webhook}\n{handoff}\n{version}\n{}", notice.name()).as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

#[cfg(test)]
mod tests;
