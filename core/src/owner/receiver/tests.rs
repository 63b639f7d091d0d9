use super::*;
use crate::limits::{PUSH_RETRY_WINDOW_MS, WEBHOOK_BACKOFF_FIRST_MS, WEBHOOK_RETRY_WINDOW_MS, WEBHOOK_TIMEOUT_MS};
use proptest::prelude::*;
use std::collections::BTreeMap;

const T0: EpochMs = 1_700_000_000_000;

/// A list row of hand-off `id` at `version`, read from its JSON as the index stores it.
fn row(id: &str, version: u64) -> Row {
    serde_json::from_value(serde_json::json!({
        "id": id, "session": "s", "machine": "m", "size": "large", "turn": 1, "state": "open",
        "status": "needs-you", "summary": null, "version": version, "updated_at": "2023-11-14T22:13:20.000Z",
    }))
    .expect("a list row")
}

#[test]
fn a_2xx_is_taken_by_either_receiver_and_only_a_push_service_can_say_gone() {
    for r in Receiver::ALL {
        assert_eq!(r.answer(Some(200)), ReceiverAnswer::Taken);
        assert_eq!(r.answer(Some(201)), ReceiverAnswer::Taken);
        assert_eq!(r.answer(Some(500)), ReceiverAnswer::NotTaken);
        assert_eq!(r.answer(None), ReceiverAnswer::NotTaken, "no answer, or none in time");
    }
    assert_eq!(Receiver::Push.answer(Some(404)), ReceiverAnswer::Gone);
    assert_eq!(Receiver::Push.answer(Some(410)), ReceiverAnswer::Gone);
    assert_eq!(
        Receiver::Webhook.answer(Some(404)),
        ReceiverAnswer::NotTaken,
        "a webhook's 404 is retried like any failure"
    );
    assert_eq!(Receiver::Webhook.answer(Some(410)), ReceiverAnswer::NotTaken);
}

#[test]
fn an_attempt_is_counted_and_leased_past_its_timeout_before_it_starts() {
    for r in Receiver::ALL {
        let lease = r.lease(T0, 0, T0).expect("a fresh message");
        assert_eq!(lease.attempts, 1);
        assert_eq!(
            lease.next_attempt_at,
            T0 + WEBHOOK_TIMEOUT_MS + WEBHOOK_BACKOFF_FIRST_MS,
            "as if it failed at its timeout"
        );
        let late = r.lease(T0, 7, T0 + WEBHOOK_RETRY_WINDOW_MS).expect("not past its expiry");
        assert_eq!(late.attempts, 8);
        assert_eq!(
            late.next_attempt_at,
            T0 + WEBHOOK_RETRY_WINDOW_MS + WEBHOOK_TIMEOUT_MS,
            "past the window: tried once more, at the timeout"
        );
    }
}

#[test]
fn a_failure_is_retried_on_the_one_schedule_until_the_window_ends_then_failed() {
    for r in Receiver::ALL {
        assert_eq!(r.after_attempt(T0, 1, Some(500), T0), Next::Retry { at: T0 + WEBHOOK_BACKOFF_FIRST_MS });
        assert_eq!(r.after_attempt(T0, 2, None, T0), Next::Retry { at: T0 + 2 * WEBHOOK_BACKOFF_FIRST_MS });
        assert_eq!(r.after_attempt(T0, 9, Some(503), T0 + WEBHOOK_RETRY_WINDOW_MS), Next::Failed);
        assert_eq!(
            r.after_attempt(T0, 9, Some(204), T0 + WEBHOOK_RETRY_WINDOW_MS),
            Next::Delivered,
            "a late 2xx still counts"
        );
    }
    assert_eq!(Receiver::Push.after_attempt(T0, 1, Some(410), T0), Next::Gone);
}

#[test]
fn a_push_message_past_its_ttl_is_never_attempted_and_a_webhook_has_no_expiry() {
    assert_eq!(Receiver::Push.lease(T0, 3, T0 + PUSH_RETRY_WINDOW_MS + 1), None, "left by an attempt that never ended");
    assert!(Receiver::Webhook.lease(T0, 3, T0 + 10 * PUSH_RETRY_WINDOW_MS).is_some());
}

#[test]
fn a_push_message_is_never_scheduled_past_its_ttl_and_a_webhook_is_tried_once_past_its_window() {
    let near = T0 + PUSH_RETRY_WINDOW_MS - 1_000;
    assert_eq!(
        Receiver::Push.after_attempt(T0, 20, None, near),
        Next::Failed,
        "the retry would land after the push service dropped it"
    );
    assert!(
        matches!(Receiver::Webhook.after_attempt(T0, 20, None, near), Next::Retry { at } if at > T0 + WEBHOOK_RETRY_WINDOW_MS)
    );
}

#[test]
fn the_kinds_are_stored_by_name_and_only_a_webhook_keeps_its_finished_deliveries() {
    for r in Receiver::ALL {
        assert_eq!(Receiver::parse(r.as_str()), Some(r));
    }
    assert_eq!(Receiver::parse("email"), None);
    assert_eq!(Receiver::Webhook.kept_finished(), crate::limits::WEBHOOK_DELIVERIES_KEPT);
    assert_eq!(Receiver::Push.kept_finished(), 0);
}

#[test]
fn each_notice_is_owed_to_each_subscriber_of_it_in_the_order_the_notices_happened() {
    let (a, b) = (row("ho_a", 2), row("ho_a", 3));
    let all = Notice::ALL;
    let done = [Notice::Done];
    let subscribers = [
        Subscriber { receiver: Receiver::Webhook, id: "wh_1", events: &all },
        Subscriber { receiver: Receiver::Push, id: "ps_1", events: &done },
    ];
    let owed = owed(&[(&a, Notice::NeedsYou), (&b, Notice::Done)], &subscribers);
    let seen: Vec<_> = owed.iter().map(|o| (o.to, o.row.version, o.notice)).collect();
    assert_eq!(seen, [("wh_1", 2, Notice::NeedsYou), ("wh_1", 3, Notice::Done), ("ps_1", 3, Notice::Done)]);
    assert_eq!(owed[1].key, notice::message_key("wh_1", "ho_a", 3, Notice::Done));
    assert_ne!(owed[1].key, owed[2].key, "each receiver's message has its own id");
    assert!(super::owed(&[], &subscribers).is_empty());
}

#[test]
fn past_the_cap_the_excess_goes_and_nothing_at_or_under_it() {
    assert_eq!(over_cap(0, 0), 0);
    assert_eq!(over_cap(3, 3), 0);
    assert_eq!(over_cap(5, 3), 2);
    assert_eq!(over_cap(1, usize::MAX), 0);
}

// ---- One owner's deliveries, driven through these rules as the index's store drives them. ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Pending,
    Delivered,
    Failed,
    Dropped,
    /// Its receiver went.
    Gone,
}

#[derive(Debug, Clone)]
struct Held {
    receiver: Receiver,
    to: usize,
    handoff: u8,
    created_at: EpochMs,
    attempts: u32,
    next_attempt_at: EpochMs,
    ending: Ending,
}

#[derive(Debug, Clone)]
enum Step {
    /// Rows of hand-off `handoff` arrive and owe a notice to every receiver.
    Owe { handoff: u8 },
    /// Time passes and the alarm starts what is due; each attempt gets `answers[i]`.
    Alarm { after_ms: i64, answers: Vec<Option<u16>> },
}

fn step() -> impl Strategy<Value = Step> {
    let answer = prop_oneof![Just(Some(200)), Just(Some(500)), Just(Some(404)), Just(Some(410)), Just(None)];
    prop_oneof![
        (0u8..3).prop_map(|handoff| Step::Owe { handoff }),
        (
            prop_oneof![0i64..30_000, Just(3_600_000i64), Just(PUSH_RETRY_WINDOW_MS / 2)],
            prop::collection::vec(answer, 0..6)
        )
            .prop_map(|(after_ms, answers)| Step::Alarm { after_ms, answers }),
    ]
}

proptest! {
    /// Over any mix of rows owing notices and attempts succeeding, failing, hanging past their
    /// timeout, expiring or finding their receiver gone: the owner never holds more pending than
    /// its cap over both kinds together; every delivery owed ends exactly one way and the drops
    /// are counted on their receivers; each receiver gets one hand-off's deliveries in the order
    /// they were owed; and no attempt starts after a push message expired.
    #[test]
    fn every_delivery_owed_is_pending_delivered_failed_dropped_or_gone_within_one_cap(
        cap in 1usize..6,
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let kinds = [Receiver::Webhook, Receiver::Push, Receiver::Webhook];
        let mut gone = [false; 3];
        let mut dropped = [0u64; 3];
        let mut held: Vec<Held> = Vec::new();
        let mut delivered_order: BTreeMap<(usize, u8), Vec<usize>> = BTreeMap::new();
        let mut now = T0;
        for s in steps {
            match s {
                Step::Owe { handoff } => {
                    for (to, &receiver) in kinds.iter().enumerate().filter(|(to, _)| !gone[*to]) {
                        held.push(Held { receiver, to, handoff, created_at: now, attempts: 0, next_attempt_at: now, ending: Ending::Pending });
                    }
                    let pending: Vec<usize> = (0..held.len()).filter(|&i| held[i].ending == Ending::Pending).collect();
                    for &i in pending.iter().take(over_cap(pending.len(), cap)) {
                        held[i].ending = Ending::Dropped;
                        dropped[held[i].to] += 1;
                    }
                }
                Step::Alarm { after_ms, answers } => {
                    now += after_ms;
                    // Due: the oldest pending of each receiver and hand-off, when its time has come.
                    let due: Vec<usize> = (0..held.len())
                        .filter(|&i| held[i].ending == Ending::Pending && held[i].next_attempt_at <= now)
                        .filter(|&i| !(0..i).any(|j| held[j].ending == Ending::Pending && held[j].to == held[i].to && held[j].handoff == held[i].handoff))
                        .collect();
                    for (n, i) in due.into_iter().enumerate() {
                        if held[i].ending != Ending::Pending {
                            continue;
                        }
                        let d = held[i].clone();
                        let Some(lease) = d.receiver.lease(d.created_at, d.attempts, now) else {
                            prop_assert!(d.receiver.expires_after_ms().is_some_and(|ms| now - d.created_at > ms));
                            held[i].ending = Ending::Failed;
                            continue;
                        };
                        if let Some(ms) = d.receiver.expires_after_ms() {
                            prop_assert!(now - d.created_at <= ms, "a push attempted after it expired");
                        }
                        prop_assert_eq!(lease.attempts, d.attempts + 1);
                        prop_assert!(lease.next_attempt_at >= now + WEBHOOK_TIMEOUT_MS);
                        held[i].attempts = lease.attempts;
                        held[i].next_attempt_at = lease.next_attempt_at;
                        let Some(&answer) = answers.get(n) else { continue };
                        // No answer: it hangs until its timeout, and is judged then.
                        let at = if answer.is_none() { now + WEBHOOK_TIMEOUT_MS } else { now };
                        match d.receiver.after_attempt(d.created_at, lease.attempts, answer, at) {
                            Next::Delivered => {
                                held[i].ending = Ending::Delivered;
                                delivered_order.entry((d.to, d.handoff)).or_default().push(i);
                            }
                            Next::Retry { at: retry } => {
                                prop_assert!(retry > at);
                                held[i].next_attempt_at = retry;
                            }
                            Next::Failed => {
                                prop_assert!(at - d.created_at >= WEBHOOK_RETRY_WINDOW_MS || d.receiver.expires_after_ms().is_some());
                                held[i].ending = Ending::Failed;
                            }
                            Next::Gone => {
                                prop_assert_eq!(d.receiver, Receiver::Push, "only a push subscription is ever gone");
                                gone[d.to] = true;
                                for h in held.iter_mut().filter(|h| h.to == d.to && h.ending == Ending::Pending) {
                                    h.ending = Ending::Gone;
                                }
                            }
                        }
                    }
                }
            }
            let pending = held.iter().filter(|h| h.ending == Ending::Pending).count();
            prop_assert!(pending <= cap, "{} pending over a cap of {}", pending, cap);
        }
        for (to, &count) in dropped.iter().enumerate() {
            prop_assert_eq!(count, held.iter().filter(|h| h.to == to && h.ending == Ending::Dropped).count() as u64);
        }
        for order in delivered_order.values() {
            prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "one receiver's deliveries of one hand-off arrive in the order owed");
        }
    }
}

#[test]
fn a_delivery_state_is_stored_and_listed_by_its_contract_name_and_read_back() {
    let states = [
        (DeliveryState::Pending, "pending"),
        (DeliveryState::Delivered, "delivered"),
        (DeliveryState::Failed, "failed"),
    ];
    for (state, name) in states {
        assert_eq!(state.as_str(), name);
        assert_eq!(DeliveryState::parse(name), Some(state));
        assert_eq!(serde_json::to_string(&state).unwrap(), format!("\"{name}\""));
    }
    assert_eq!(DeliveryState::parse("sent"), None);
}
