use super::*;
use crate::limits::{WEBHOOK_BACKOFF_MAX_MS, WEBHOOK_RETRY_WINDOW_MS};
use crate::time::Timestamp;
use crate::turn::{Briefed, Listed};
use proptest::prelude::*;

fn row(version: u64, turn: u64, status: Status, state: State, summary: &str) -> Row {
    Row {
        id: "ho_1".into(),
        listed: Listed {
            session: "s1".into(),
            machine: "m1".into(),
            size: "large".into(),
            turn,
            state,
            status,
            summary: Some(summary.into()),
            version,
        },
        updated_at: Timestamp::from_ms(1_700_000_000_000 + version as i64),
        suggestion: None,
        briefed: Briefed::default(),
        question: None,
    }
}

fn open(version: u64, turn: u64, status: Status) -> Row {
    row(version, turn, status, State::Open, "s")
}

#[test]
fn entering_a_subscribed_status_on_a_turn_is_one_event() {
    let running = open(1, 1, Status::Running);
    assert_eq!(owed(None, &running), vec![], "a new hand-off runs: nothing to tell");
    assert_eq!(owed(Some(&running), &open(2, 1, Status::NeedsYou)), vec![Notice::NeedsYou]);
    assert_eq!(owed(Some(&running), &open(2, 1, Status::Done)), vec![Notice::Done]);
    assert_eq!(owed(Some(&running), &open(2, 1, Status::Failed)), vec![Notice::Failed]);
    assert_eq!(owed(Some(&running), &open(2, 1, Status::Cancelled)), vec![], "cancelled is nobody's news");
    assert_eq!(owed(None, &open(3, 1, Status::NeedsYou)), vec![Notice::NeedsYou], "a first row already needing you");
}

#[test]
fn a_new_turns_needs_you_is_a_new_event() {
    let first = open(2, 1, Status::NeedsYou);
    assert_eq!(owed(Some(&first), &open(5, 2, Status::NeedsYou)), vec![Notice::NeedsYou]);
    assert_eq!(owed(Some(&open(4, 1, Status::Done)), &open(5, 2, Status::Done)), vec![Notice::Done]);
}

#[test]
fn a_summary_only_update_within_the_same_status_is_not_an_event() {
    let asked = row(2, 1, Status::NeedsYou, State::Open, "which branch?");
    let again = row(3, 1, Status::NeedsYou, State::Open, "which branch? main or dev");
    assert_eq!(owed(Some(&asked), &again), vec![]);
    // Any other change of the row at the same status and turn is not one either.
    assert_eq!(owed(Some(&open(3, 1, Status::Done)), &open(4, 1, Status::Done)), vec![]);
}

#[test]
fn a_replay_or_a_late_row_is_owed_nothing() {
    let held = open(4, 1, Status::NeedsYou);
    assert_eq!(owed(Some(&held), &held.clone()), vec![], "the same row twice");
    assert_eq!(owed(Some(&held), &open(3, 1, Status::Done)), vec![], "an older row after a newer one");
}

#[test]
fn closing_is_one_event_after_what_the_row_entered() {
    let needs = open(2, 1, Status::NeedsYou);
    assert_eq!(owed(Some(&needs), &row(3, 1, Status::NeedsYou, State::Closed, "s")), vec![Notice::Closed]);
    let running = open(2, 1, Status::Running);
    assert_eq!(
        owed(Some(&running), &row(4, 1, Status::Done, State::Closed, "s")),
        vec![Notice::Done, Notice::Closed],
        "a done and a close delivered as one row are both owed, in that order"
    );
    let closed = row(3, 1, Status::Done, State::Closed, "s");
    assert_eq!(owed(Some(&closed), &row(4, 1, Status::Done, State::Closed, "t")), vec![], "closed once");
    assert_eq!(owed(None, &row(2, 1, Status::Cancelled, State::Closed, "s")), vec![Notice::Closed]);
}

#[test]
fn every_notice_round_trips_through_its_name_and_has_its_type() {
    for n in Notice::ALL {
        assert_eq!(Notice::parse(n.name()), Some(n));
        assert!(n.message_type().starts_with("handoff."));
    }
    assert_eq!(Notice::NeedsYou.message_type(), "handoff.needs_you");
    assert_eq!(Notice::parse("running"), None);
}

#[test]
fn the_webhook_cap_admits_up_to_its_limit_and_refuses_past_it() {
    assert!(admit_webhook(0).is_ok());
    assert!(admit_webhook(WEBHOOKS_PER_OWNER_MAX - 1).is_ok());
    assert_eq!(admit_webhook(WEBHOOKS_PER_OWNER_MAX).unwrap_err().code, Code::WebhookTooMany);
    assert!(admit_subscription(PUSH_SUBSCRIPTIONS_PER_OWNER_MAX - 1).is_ok());
    assert_eq!(admit_subscription(PUSH_SUBSCRIPTIONS_PER_OWNER_MAX).unwrap_err().code, Code::SubscriptionTooMany);
}

#[test]
fn a_message_key_is_the_same_for_the_same_event_and_differs_for_another() {
    let k = message_key("wh_1", "ho_1", 3, Notice::Done);
    assert_eq!(k, message_key("wh_1", "ho_1", 3, Notice::Done));
    assert_ne!(k, message_key("wh_2", "ho_1", 3, Notice::Done));
    assert_ne!(k, message_key("wh_1", "ho_1", 4, Notice::Done));
    assert_ne!(k, message_key("wh_1", "ho_1", 3, Notice::Closed));
}

#[test]
fn retries_double_from_at_most_ten_seconds() {
    let t0 = 1_000_000;
    assert!(retry_at(t0, 1, t0).unwrap() - t0 <= 10_000);
    let waits: Vec<i64> = (1..=4).map(|n| retry_at(t0, n, t0).unwrap() - t0).collect();
    assert_eq!(waits, [2_000, 4_000, 8_000, 16_000]);
    assert_eq!(retry_at(t0, 40, t0).unwrap() - t0, WEBHOOK_BACKOFF_MAX_MS);
}

proptest! {
    /// Failing every attempt, as soon as each is due: retried for at least the window, then failed.
    #[test]
    fn a_delivery_that_always_fails_is_retried_for_at_least_a_day_then_failed(created in 0i64..1 << 40, late_ms in 0i64..30_000) {
        let mut now = created;
        let mut attempts = 1u32;
        while let Some(next) = retry_at(created, attempts, now) {
            prop_assert!(next > now);
            now = next + late_ms;
            attempts += 1;
            prop_assert!(attempts < 1_000, "ends");
        }
        prop_assert!(now - created >= WEBHOOK_RETRY_WINDOW_MS, "failed after only {} ms", now - created);
        prop_assert!(now - created < WEBHOOK_RETRY_WINDOW_MS + WEBHOOK_BACKOFF_MAX_MS + 30_000 + 1);
    }
}

fn any_status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Running),
        Just(Status::NeedsYou),
        Just(Status::Done),
        Just(Status::Failed),
        Just(Status::Cancelled)
    ]
}

proptest! {
    /// Over any run of rows a hand-off's index may receive (versions rising, with any gaps, the
    /// turn never falling, closed for good once closed), with replays mixed in: a notice is owed
    /// exactly when the row enters a subscribed (turn, status) or first closes, `Closed` at most
    /// once, and a replayed row is owed nothing.
    #[test]
    fn notices_are_owed_exactly_on_entering_a_status_or_closing_and_never_for_a_replay(
        steps in proptest::collection::vec((1u64..4, 0u64..2, any_status(), proptest::bool::weighted(0.1), "[a-c]{0,2}", proptest::bool::weighted(0.2)), 1..40)
    ) {
        let mut held: Option<Row> = None;
        let mut closes = 0;
        let (mut version, mut turn, mut closed) = (0u64, 1u64, false);
        for (gap, next_turn, status, close, summary, replay) in steps {
            if replay {
                if let Some(h) = &held {
                    prop_assert!(owed(Some(h), h).is_empty(), "a replay is owed nothing");
                }
            }
            version += gap;
            turn += next_turn;
            closed |= close;
            let row = row(version, turn, status, if closed { State::Closed } else { State::Open }, &summary);
            let notices = owed(held.as_ref(), &row);
            let entered = Notice::of_status(status).is_some()
                && held.as_ref().is_none_or(|h| (h.turn, h.status) != (row.turn, row.status));
            let first_close = closed && held.as_ref().is_none_or(|h| h.state == State::Open);
            let mut expected = Vec::new();
            if entered {
                expected.extend(Notice::of_status(status));
            }
            if first_close {
                expected.push(Notice::Closed);
            }
            prop_assert_eq!(&notices, &expected);
            closes += notices.iter().filter(|n| **n == Notice::Closed).count();
            held = Some(row);
        }
        prop_assert!(closes <= 1, "closed at most once");
    }
}

#[test]
fn retries_start_within_ten_seconds_and_go_on_for_at_least_a_day_as_the_contract_says() {
    assert!(crate::limits::WEBHOOK_BACKOFF_FIRST_MS <= 10_000);
    assert!(WEBHOOK_RETRY_WINDOW_MS >= 24 * 60 * 60 * 1000);
    assert!(WEBHOOK_BACKOFF_MAX_MS <= WEBHOOK_RETRY_WINDOW_MS, "a delivery is tried more than once within the window");
}

#[test]
fn a_row_entered_something_when_its_turn_status_or_state_moved() {
    let asked = open(2, 1, Status::NeedsYou);
    assert!(entered(None, &asked), "a first row");
    assert!(
        !entered(Some(&asked), &row(3, 1, Status::NeedsYou, State::Open, "other summary")),
        "a summary-only update"
    );
    assert!(entered(Some(&asked), &open(3, 2, Status::NeedsYou)), "a new turn");
    assert!(entered(Some(&asked), &open(3, 1, Status::Running)), "a new status");
    assert!(entered(Some(&asked), &row(3, 1, Status::NeedsYou, State::Closed, "s")), "a close");
}

#[test]
fn a_chain_owes_each_row_what_it_entered_after_the_one_before_it() {
    let running = open(1, 1, Status::Running);
    let (asked, done) = (open(2, 1, Status::NeedsYou), open(3, 1, Status::Done));
    let chain = owed_chain(Some(&running), std::slice::from_ref(&asked), &done);
    assert_eq!(
        chain,
        vec![(&asked, Notice::NeedsYou), (&done, Notice::Done)],
        "needs-you then done: both, in version order"
    );
    assert_eq!(owed(Some(&running), &done), vec![Notice::Done], "(what the newest row alone would owe)");

    // Needs-you on turn 1, then turn 2 opened and running before any delivery.
    let (next, later) = (open(3, 2, Status::Running), row(4, 2, Status::Running, State::Open, "more"));
    assert_eq!(owed_chain(Some(&running), &[asked.clone(), next.clone()], &later), vec![(&asked, Notice::NeedsYou)]);
    assert_eq!(
        owed_chain(None, &[asked.clone(), next.clone()], &later),
        vec![(&asked, Notice::NeedsYou)],
        "no row held"
    );

    // A replay: whatever the index already holds is owed nothing again.
    assert_eq!(owed_chain(Some(&next), &[asked.clone(), next.clone()], &later), vec![]);
    assert_eq!(owed_chain(Some(&later), &[asked.clone(), next.clone()], &later), vec![]);
    let closed = row(5, 2, Status::Running, State::Closed, "s");
    assert_eq!(owed_chain(Some(&asked), &[asked.clone(), next.clone()], &closed), vec![(&closed, Notice::Closed)]);
}

#[test]
fn a_passed_row_out_of_order_or_of_another_hand_off_is_skipped() {
    let running = open(1, 1, Status::Running);
    let done = open(4, 1, Status::Done);
    let mut other = open(2, 1, Status::NeedsYou);
    other.id = "ho_2".into();
    assert_eq!(owed_chain(Some(&running), &[other], &done), vec![(&done, Notice::Done)], "another hand-off's row");
    let (late, early) = (open(3, 1, Status::Failed), open(2, 1, Status::NeedsYou));
    assert_eq!(
        owed_chain(Some(&running), &[late.clone(), early], &done),
        vec![(&late, Notice::Failed), (&done, Notice::Done)],
        "a row older than the one before it"
    );
    assert_eq!(
        owed_chain(Some(&running), &[late.clone()], &open(3, 1, Status::Failed)),
        vec![(&late, Notice::Failed)],
        "the newest no newer than a passed row"
    );
    // A second row of a version already walked is skipped, not walked from.
    let (asked, twin, again) =
        (open(3, 1, Status::NeedsYou), open(3, 1, Status::Running), open(4, 1, Status::NeedsYou));
    assert_eq!(owed_chain(Some(&running), &[asked.clone(), twin], &again), vec![(&asked, Notice::NeedsYou)]);
}

proptest! {
    /// Over any run of one hand-off's rows and any row the index holds from it: the chain of
    /// only the rows that entered something (and the newest) owes exactly what every row owes
    /// after the one before it. So a sender may coalesce the rest away.
    #[test]
    fn skipping_rows_that_entered_nothing_changes_no_notice(
        steps in proptest::collection::vec((0u64..2, any_status(), proptest::bool::weighted(0.1), "[a-b]{0,1}"), 2..30),
        held_at in 0usize..30,
    ) {
        let (mut turn, mut closed) = (1u64, false);
        let mut rows: Vec<Row> = Vec::new();
        for (i, (next_turn, status, close, summary)) in steps.into_iter().enumerate() {
            turn += next_turn;
            closed |= close;
            rows.push(row(i as u64 + 1, turn, status, if closed { State::Closed } else { State::Open }, &summary));
        }
        let held_at = held_at.min(rows.len() - 1);
        let held = (held_at > 0).then(|| rows[held_at - 1].clone());
        let newest = rows.last().unwrap().clone();
        let mut every = Vec::new();
        for i in held_at..rows.len() {
            let before = i.checked_sub(1).map(|b| &rows[b]);
            every.extend(owed(before, &rows[i]).into_iter().map(|n| (rows[i].version, n)));
        }
        let passed: Vec<Row> = (0..rows.len() - 1)
            .filter(|i| entered(i.checked_sub(1).map(|b| &rows[b]), &rows[*i]))
            .map(|i| rows[i].clone())
            .collect();
        let chain: Vec<(u64, Notice)> = owed_chain(held.as_ref(), &passed, &newest).into_iter().map(|(r, n)| (r.version, n)).collect();
        prop_assert_eq!(chain, every);
    }
}
