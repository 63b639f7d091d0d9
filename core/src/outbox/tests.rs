use super::*;
use proptest::prelude::*;

const T0: EpochMs = 1_000_000;

#[test]
fn changes_that_commit_during_a_send_go_together_in_the_next_one() {
    let mut o = Outbox::default();
    assert_eq!(o.on_commit(1, "r1", T0), Some(T0 + OUTBOX_SAFETY_ALARM_MS));
    assert_eq!(o.poll_send(), Some(Send { version: 1, row: "r1" }));
    assert_eq!(o.on_commit(2, "r2", T0 + 1), None, "the safety alarm is pending");
    assert_eq!(o.on_commit(3, "r3", T0 + 2), None);
    assert_eq!(o.poll_send(), None, "one send at a time");
    assert_eq!(o.on_sent(true, T0 + 3), None);
    assert!(o.is_delivered(1) && !o.is_delivered(2));
    assert_eq!(o.poll_send(), Some(Send { version: 3, row: "r3" }), "the newest row, not the one after the last sent");
    assert_eq!(o.on_sent(true, T0 + 4), None);
    assert!(o.is_delivered(3));
    assert_eq!(o.poll_send(), None, "nothing left to send");
}

#[test]
fn a_failed_send_waits_for_the_retry_alarm_or_the_next_change() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", T0);
    o.poll_send();
    assert_eq!(o.on_sent(false, T0 + 5), Some(T0 + 5 + OUTBOX_RETRY_MS_MIN));
    assert_eq!(o.poll_send(), None, "paused until the alarm");
    assert_eq!(o.on_alarm(), Some(Send { version: 1, row: "r1" }));
    assert_eq!(o.on_sent(false, T0 + 300), Some(T0 + 300 + 2 * OUTBOX_RETRY_MS_MIN), "the second retry waits twice as long");
    assert_eq!(o.owed().map(|w| w.attempts), Some(2));
    assert_eq!(o.on_commit(2, "r2", T0 + 400), None, "the retry alarm is pending");
    assert_eq!(o.owed().map(|w| w.attempts), Some(0), "a new row starts its own count");
    assert_eq!(o.poll_send(), Some(Send { version: 2, row: "r2" }), "a new change sends at once");
}

#[test]
fn a_change_after_the_alarm_came_due_sets_a_new_one() {
    let mut o = Outbox::default();
    assert!(o.on_commit(1, "r1", T0).is_some());
    assert_eq!(o.on_commit(2, "r2", T0 + OUTBOX_SAFETY_ALARM_MS - 1), None);
    assert_eq!(o.on_commit(3, "r3", T0 + OUTBOX_SAFETY_ALARM_MS), Some(T0 + 2 * OUTBOX_SAFETY_ALARM_MS));
}

#[test]
fn a_restored_row_never_replaces_a_newer_one() {
    let mut o = Outbox::default();
    o.on_commit(5, "r5", T0);
    o.restore(Owed { version: 4, row: "r4", attempts: 3 });
    assert_eq!(o.owed(), Some(&Owed { version: 5, row: "r5", attempts: 0 }));
    o.restore(Owed { version: 6, row: "r6", attempts: 2 });
    assert_eq!(o.owed(), Some(&Owed { version: 6, row: "r6", attempts: 2 }));
    o.forget();
    assert_eq!(o.owed(), None);
    assert!(!o.is_owing());
}

#[test]
fn a_row_already_held_for_a_version_keeps_its_attempt_count() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", T0);
    o.poll_send();
    o.on_sent(false, T0);
    o.on_commit(1, "again", T0 + 1);
    assert_eq!(o.owed(), Some(&Owed { version: 1, row: "r1", attempts: 1 }), "the same version is not owed twice");
    // Storage may lag memory by an attempt: the count held in memory stands.
    o.restore(Owed { version: 1, row: "r1", attempts: 0 });
    assert_eq!(o.owed().map(|w| w.attempts), Some(1));
}

#[test]
fn a_send_that_ends_twice_counts_once() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", T0);
    o.poll_send();
    assert_eq!(o.on_sent(false, T0), Some(T0 + OUTBOX_RETRY_MS_MIN));
    assert_eq!(o.on_sent(false, T0), None, "no send was on its way");
    assert_eq!(o.owed().map(|w| w.attempts), Some(1));
}

#[test]
fn the_backoff_doubles_from_the_minimum_up_to_the_maximum() {
    assert_eq!(backoff_ms(1), OUTBOX_RETRY_MS_MIN);
    assert_eq!(backoff_ms(2), 2 * OUTBOX_RETRY_MS_MIN);
    assert_eq!(backoff_ms(3), 4 * OUTBOX_RETRY_MS_MIN);
    assert_eq!(backoff_ms(u32::MAX), OUTBOX_RETRY_MS_MAX);
    let mut last = 0;
    for attempts in 1..64 {
        let wait = backoff_ms(attempts);
        assert!(wait >= last && (OUTBOX_RETRY_MS_MIN..=OUTBOX_RETRY_MS_MAX).contains(&wait));
        last = wait;
    }
    assert_eq!(last, OUTBOX_RETRY_MS_MAX);
}

#[derive(Debug, Clone)]
enum Event {
    Commit { after_ms: i64 },
    Poll,
    Sent { ok: bool, after_ms: i64 },
    Alarm,
    Restore { back: u64, attempts: u32 },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (0i64..20_000).prop_map(|after_ms| Event::Commit { after_ms }),
        3 => Just(Event::Poll),
        3 => (any::<bool>(), 0i64..5_000).prop_map(|(ok, after_ms)| Event::Sent { ok, after_ms }),
        1 => Just(Event::Alarm),
        1 => (0u64..3, 0u32..5).prop_map(|(back, attempts)| Event::Restore { back, attempts }),
    ]
}

/// What the machine must agree with, kept the obvious way.
#[derive(Default)]
struct Model {
    now: EpochMs,
    committed: u64,
    acknowledged: u64,
    in_flight: Option<u64>,
    failures_of_newest: u32,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Over any sequence of changes, sends, failures, alarms and reloads: one send at a time,
    /// each carrying the newest row; `delivered` is the newest acknowledged version; a paused
    /// outbox always has an alarm pending; and once sends succeed, the newest change arrives.
    #[test]
    fn the_outbox_keeps_its_rules(events in proptest::collection::vec(event(), 1..80)) {
        let mut o: Outbox<u64> = Outbox::default();
        let mut m = Model { now: T0, ..Model::default() };
        for e in events {
            match e {
                Event::Commit { after_ms } => {
                    m.now += after_ms;
                    m.committed += 1;
                    m.failures_of_newest = 0;
                    let pending = o.alarm_at().filter(|at| *at > m.now);
                    let set = o.on_commit(m.committed, m.committed, m.now);
                    prop_assert_eq!(set, pending.is_none().then_some(m.now + OUTBOX_SAFETY_ALARM_MS));
                    prop_assert_eq!(o.alarm_at(), pending.or(set));
                }
                Event::Poll => {
                    let send = o.poll_send();
                    if let Some(s) = &send {
                        prop_assert!(m.in_flight.is_none(), "two sends on their way");
                        prop_assert_eq!(s.version, m.committed, "a send carries the newest row");
                        prop_assert_eq!(s.row, s.version);
                        prop_assert!(s.version > m.acknowledged);
                        m.in_flight = Some(s.version);
                    } else if m.in_flight.is_none() && m.committed > m.acknowledged {
                        prop_assert!(o.alarm_at().is_some(), "held back without an alarm to resume");
                    }
                }
                Event::Sent { ok, after_ms } => {
                    m.now += after_ms;
                    let retry = o.on_sent(ok, m.now);
                    match m.in_flight.take() {
                        None => prop_assert_eq!(retry, None),
                        Some(v) if ok => {
                            prop_assert_eq!(retry, None);
                            m.acknowledged = m.acknowledged.max(v);
                        }
                        Some(v) => {
                            if v == m.committed {
                                m.failures_of_newest += 1;
                            }
                            let attempts = m.failures_of_newest.max(1);
                            prop_assert_eq!(retry, Some(m.now + backoff_ms(attempts)));
                            prop_assert_eq!(o.alarm_at(), retry);
                        }
                    }
                }
                Event::Alarm => {
                    let send = o.on_alarm();
                    if let Some(s) = &send {
                        prop_assert!(m.in_flight.is_none(), "two sends on their way");
                        prop_assert_eq!(s.version, m.committed);
                        m.in_flight = Some(s.version);
                    }
                }
                Event::Restore { back, attempts } => {
                    // Storage holds the newest committed row; an older read is ignored.
                    let version = m.committed.saturating_sub(back);
                    if version > 0 {
                        o.restore(Owed { version, row: version, attempts });
                        if back == 0 && o.owed().map(|w| w.attempts) == Some(attempts) {
                            m.failures_of_newest = attempts;
                        }
                    }
                }
            }
            for v in 0..=m.committed + 1 {
                prop_assert_eq!(o.is_delivered(v), v <= m.acknowledged);
            }
            prop_assert_eq!(o.is_sending(), m.in_flight.is_some());
            prop_assert_eq!(o.is_owing(), m.committed > m.acknowledged && o.owed().is_some());
        }
        // Liveness: from here on every send succeeds; the alarm fires once; the newest arrives.
        if o.is_sending() {
            o.on_sent(true, m.now);
            m.acknowledged = m.acknowledged.max(m.in_flight.take().unwrap_or(0));
        }
        let mut next = o.on_alarm();
        while let Some(s) = next {
            prop_assert!(o.on_sent(true, m.now).is_none());
            m.acknowledged = s.version;
            next = o.poll_send();
        }
        prop_assert!(o.is_delivered(m.committed), "the newest change never arrived");
    }
}
