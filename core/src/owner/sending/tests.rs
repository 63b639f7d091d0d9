use super::*;
use crate::limits::PUSH_RETRY_WINDOW_MS;
use proptest::prelude::*;

const T0: EpochMs = 1_700_000_000_000;
const RECEIVERS: [&str; 8] = ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"];
const HANDOFFS: [&str; 5] = ["ho_a", "ho_b", "ho_c", "ho_d", "ho_e"];

fn pending(
    seq: i64,
    receiver: Receiver,
    to: &'static str,
    handoff: &'static str,
    next_attempt_at: EpochMs,
) -> Pending<'static> {
    Pending { seq, receiver, to, handoff, created_at: T0, attempts: 0, next_attempt_at }
}

/// Whether `p` is the oldest pending delivery of its receiver and hand-off, read pair by pair.
fn is_head(p: &Pending, all: &[Pending]) -> bool {
    !all.iter().any(|q| (q.receiver, q.to, q.handoff) == (p.receiver, p.to, p.handoff) && q.seq < p.seq)
}

#[test]
fn only_the_oldest_of_a_hand_offs_deliveries_to_a_receiver_is_sent_even_when_a_later_one_is_due_first() {
    let all = [
        pending(1, Receiver::Webhook, "r1", "ho_a", T0 + 5_000),
        pending(2, Receiver::Webhook, "r1", "ho_a", T0),
        pending(3, Receiver::Webhook, "r1", "ho_b", T0),
        pending(4, Receiver::Webhook, "r2", "ho_a", T0),
    ];
    let r = round(&all, T0, true);
    assert_eq!(r.send.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4], "seq 2 waits behind seq 1, not yet due");
    assert_eq!(r.next_alarm, Some(T0 + 5_000), "the head that is not due, before the leases");
}

#[test]
fn one_alarm_starts_at_most_its_limit_oldest_due_first_and_fires_again_at_once_for_the_rest() {
    let all: Vec<Pending> = (0..WEBHOOK_SENDS_PER_ALARM_MAX as i64 + 5)
        .map(|i| Pending {
            handoff: HANDOFFS[0],
            to: Box::leak(format!("r{i}").into_boxed_str()),
            ..pending(i, Receiver::Webhook, "", "", T0 - i)
        })
        .collect();
    let r = round(&all, T0, true);
    assert_eq!(r.send.len(), WEBHOOK_SENDS_PER_ALARM_MAX);
    assert_eq!(r.send[0].0, WEBHOOK_SENDS_PER_ALARM_MAX as i64 + 4, "the one due longest goes first");
    assert_eq!(r.next_alarm, Some(T0), "what is left is due now");
}

#[test]
fn without_push_configured_every_pending_push_message_is_dropped_and_none_sent() {
    let all = [pending(1, Receiver::Push, "s1", "ho_a", T0), pending(2, Receiver::Webhook, "r1", "ho_a", T0 + 10)];
    let off = round(&all, T0, false);
    assert_eq!((off.forget, off.send, off.next_alarm), (vec![1], vec![], Some(T0 + 10)));
    let on = round(&all, T0, true);
    assert!(on.forget.is_empty() && on.send.len() == 1);
}

#[test]
fn a_push_message_past_its_ttl_ends_unsent_and_the_next_in_line_is_due() {
    let old = Pending { created_at: T0 - PUSH_RETRY_WINDOW_MS - 1, ..pending(1, Receiver::Push, "s1", "ho_a", T0) };
    let next = pending(2, Receiver::Push, "s1", "ho_a", T0);
    let r = round(&[old, next], T0, true);
    assert_eq!((r.expire, r.send), (vec![1], vec![]));
    assert_eq!(r.next_alarm, Some(T0), "seq 2 is the head now, and due");
}

#[test]
fn nothing_pending_sets_no_alarm() {
    assert_eq!(round(&[], T0, true), Round::default());
}

fn arb_pending() -> impl Strategy<Value = Vec<Pending<'static>>> {
    prop::collection::vec(
        (
            any::<bool>(),
            0..RECEIVERS.len(),
            0..HANDOFFS.len(),
            -2_000i64..2_000,
            0u32..4,
            0i64..(2 * PUSH_RETRY_WINDOW_MS),
        ),
        0..150,
    )
    .prop_map(|rows| {
        rows.into_iter()
            .enumerate()
            .map(|(i, (push, r, h, due_in, attempts, age))| Pending {
                seq: i as i64 + 1,
                receiver: if push { Receiver::Push } else { Receiver::Webhook },
                to: RECEIVERS[r],
                handoff: HANDOFFS[h],
                created_at: T0 - age,
                attempts,
                next_attempt_at: T0 + due_in,
            })
            .collect::<Vec<_>>()
    })
    // Read in any order: the rule must not lean on the store's.
    .prop_shuffle()
}

proptest! {
    #[test]
    fn each_round_sends_due_heads_only_within_its_limit_and_arms_for_the_earliest_head_left(all in arb_pending(), push in any::<bool>()) {
        let r = round(&all, T0, push);
        let by_seq = |seq: i64| all.iter().find(|p| p.seq == seq).copied().unwrap();
        prop_assert!(r.send.len() <= WEBHOOK_SENDS_PER_ALARM_MAX);
        let mut pairs = std::collections::BTreeSet::new();
        for &(seq, lease) in &r.send {
            let p = by_seq(seq);
            prop_assert!(is_head(&p, &all) && p.next_attempt_at <= T0, "{p:?} is not a due head");
            prop_assert!(pairs.insert((p.receiver, p.to, p.handoff)), "two sends to one receiver for one hand-off");
            prop_assert!(push || p.receiver == Receiver::Webhook);
            prop_assert_eq!(Some(lease), p.receiver.lease(p.created_at, p.attempts, T0));
        }
        for &seq in &r.expire {
            let p = by_seq(seq);
            prop_assert!(is_head(&p, &all) && p.receiver == Receiver::Push && T0 - p.created_at > PUSH_RETRY_WINDOW_MS);
        }
        let forgotten: Vec<i64> = all.iter().filter(|p| !push && p.receiver == Receiver::Push).map(|p| p.seq).collect();
        prop_assert_eq!(&r.forget, &forgotten);
        // Oldest due first: a due head left unsent is due no earlier than the last one sent.
        if let Some(&(last, _)) = r.send.last() {
            let last = by_seq(last);
            for p in all.iter().filter(|p| is_head(p, &all) && p.next_attempt_at <= T0 && (push || p.receiver == Receiver::Webhook)) {
                let handled = r.send.iter().any(|(s, _)| *s == p.seq) || r.expire.contains(&p.seq);
                prop_assert!(handled || (p.next_attempt_at, p.seq) > (last.next_attempt_at, last.seq), "{p:?} waits behind a later one");
            }
        }
        // Room left: no due head that could be sent waits.
        if r.send.len() < WEBHOOK_SENDS_PER_ALARM_MAX {
            for p in all.iter().filter(|p| is_head(p, &all) && p.next_attempt_at <= T0 && (push || p.receiver == Receiver::Webhook)) {
                prop_assert!(r.send.iter().any(|(s, _)| *s == p.seq) || r.expire.contains(&p.seq), "{p:?} was due and left");
            }
        }
        // The alarm: the earliest head once this round's writes are made.
        let left: Vec<Pending> = all
            .iter()
            .filter(|p| !r.forget.contains(&p.seq) && !r.expire.contains(&p.seq))
            .map(|p| match r.send.iter().find(|(s, _)| *s == p.seq) {
                Some((_, lease)) => Pending { next_attempt_at: lease.next_attempt_at, ..*p },
                None => *p,
            })
            .collect();
        let earliest = left.iter().filter(|p| is_head(p, &left)).map(|p| p.next_attempt_at.max(T0)).min();
        prop_assert_eq!(r.next_alarm, earliest);
    }
}
