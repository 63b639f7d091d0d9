//! What one alarm of the owner's index sends, and when the next one fires. Of one hand-off's
//! pending deliveries to one receiver only the oldest is ever sent (so they arrive in version
//! order); of those, the due ones start, oldest due first, at most
//! [`WEBHOOK_SENDS_PER_ALARM_MAX`] per alarm, each leased first ([`Receiver::lease`]); a push
//! message past its TTL ends failed, unsent; and where push is not configured every pending push
//! message is dropped, as it cannot be sent and would keep the alarm firing.

use super::receiver::{Lease, Receiver};
use crate::limits::WEBHOOK_SENDS_PER_ALARM_MAX;
use crate::time::EpochMs;

/// A pending delivery as the alarm reads it: no body, no address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending<'a> {
    /// The order deliveries were owed in, oldest lowest.
    pub seq: i64,
    pub receiver: Receiver,
    /// The receiver's id.
    pub to: &'a str,
    pub handoff: &'a str,
    pub created_at: EpochMs,
    pub attempts: u32,
    pub next_attempt_at: EpochMs,
}

/// One alarm's work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Round {
    /// Delivery `seq`s dropped: push messages where push is not configured.
    pub forget: Vec<i64>,
    /// Push messages past their TTL: they end failed, unsent.
    pub expire: Vec<i64>,
    /// The deliveries to start now, in order, each with its lease.
    pub send: Vec<(i64, Lease)>,
    /// When the alarm fires next, with this round's writes made (none: nothing is pending).
    pub next_alarm: Option<EpochMs>,
}

/// Which receiver and hand-off a delivery is of: of each, only the oldest is sent.
fn pair<'a>(p: &Pending<'a>) -> (Receiver, &'a str, &'a str) {
    (p.receiver, p.to, p.handoff)
}

/// The heads: the oldest pending delivery of each (receiver, hand-off), in the order given.
fn heads<'a, 'p>(pending: impl Iterator<Item = &'p Pending<'a>>) -> Vec<&'p Pending<'a>>
where
    'a: 'p,
{
    let mut heads: Vec<&Pending> = Vec::new();
    for p in pending {
        match heads.iter_mut().find(|h| pair(h) == pair(p)) {
            Some(h) if p.seq < h.seq => *h = p,
            Some(_) => {}
            None => heads.push(p),
        }
    }
    heads
}

/// The alarm at `now` over every `pending` delivery (`push`: whether push is configured).
pub fn round(pending: &[Pending], now: EpochMs, push: bool) -> Round {
    let mut round = Round::default();
    let kept: Vec<Pending> = pending
        .iter()
        .filter(|p| {
            let dropped = p.receiver == Receiver::Push && !push;
            if dropped {
                round.forget.push(p.seq);
            }
            !dropped
        })
        .copied()
        .collect();
    let mut heads = heads(kept.iter());
    // Oldest due first: the earliest due head left, each time.
    while round.send.len() < WEBHOOK_SENDS_PER_ALARM_MAX {
        let due = (0..heads.len())
            .filter(|&i| heads[i].next_attempt_at <= now)
            .min_by_key(|&i| (heads[i].next_attempt_at, heads[i].seq));
        let Some(i) = due else { break };
        let p = heads.swap_remove(i);
        match p.receiver.lease(p.created_at, p.attempts, now) {
            None => round.expire.push(p.seq),
            Some(lease) => round.send.push((p.seq, lease)),
        }
    }
    // Next: the heads left as they are, each one sent at its lease, and behind each expired one
    // the next in line.
    let in_line = round.expire.iter().filter_map(|&seq| {
        let e = kept.iter().find(|p| p.seq == seq)?;
        kept.iter().filter(|p| pair(p) == pair(e) && p.seq > seq).min_by_key(|p| p.seq).map(|p| p.next_attempt_at)
    });
    let sent = round.send.iter().map(|(_, lease)| lease.next_attempt_at);
    round.next_alarm = heads.iter().map(|p| p.next_attempt_at).chain(sent).chain(in_line).min().map(|at| at.max(now));
    round
}

#[cfg(test)]
mod tests;
