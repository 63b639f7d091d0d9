use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const T0: EpochMs = 1_000_000;

#[test]
fn plain_changes_that_commit_during_a_send_go_together_in_the_next_one() {
    let mut o = Outbox::default();
    assert_eq!(o.on_commit(1, "r1", false, T0).alarm_at, Some(T0 + OUTBOX_SAFETY_ALARM_MS));
    assert_eq!(o.poll_send(), Some(Send { version: 1, row: "r1", passed: vec![] }));
    assert_eq!(o.on_commit(2, "r2", false, T0 + 1).alarm_at, None, "the safety alarm is pending");
    assert_eq!(o.on_commit(3, "r3", false, T0 + 2).alarm_at, None);
    assert_eq!(o.poll_send(), None, "one send at a time");
    assert_eq!(o.on_sent(true, T0 + 3).retry_at, None);
    assert!(o.is_taken(1) && !o.is_taken(2));
    assert_eq!(
        o.poll_send(),
        Some(Send { version: 3, row: "r3", passed: vec![] }),
        "the newest row, not the one after the last sent"
    );
    assert_eq!(o.on_sent(true, T0 + 4).retry_at, None);
    assert!(o.is_taken(3));
    assert_eq!(o.poll_send(), None, "nothing left to send");
}

#[test]
fn a_failed_send_waits_for_the_retry_alarm_or_the_next_change() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", false, T0);
    o.poll_send();
    assert_eq!(o.on_sent(false, T0 + 5).retry_at, Some(T0 + 5 + OUTBOX_RETRY_MS_MIN));
    assert_eq!(o.poll_send(), None, "paused until the alarm");
    assert_eq!(o.on_alarm(), Some(Send { version: 1, row: "r1", passed: vec![] }));
    assert_eq!(
        o.on_sent(false, T0 + 300).retry_at,
        Some(T0 + 300 + 2 * OUTBOX_RETRY_MS_MIN),
        "the second retry waits twice as long"
    );
    assert_eq!(o.owed().map(|w| w.attempts), Some(2));
    assert_eq!(o.on_commit(2, "r2", false, T0 + 400).alarm_at, None, "the retry alarm is pending");
    assert_eq!(o.owed().map(|w| w.attempts), Some(0), "a new row starts its own count");
    assert_eq!(o.poll_send(), Some(Send { version: 2, row: "r2", passed: vec![] }), "a new change sends at once");
}

#[test]
fn a_change_after_the_alarm_came_due_sets_a_new_one() {
    let mut o = Outbox::default();
    assert!(o.on_commit(1, "r1", true, T0).alarm_at.is_some());
    assert_eq!(o.on_commit(2, "r2", true, T0 + OUTBOX_SAFETY_ALARM_MS - 1).alarm_at, None);
    assert_eq!(o.on_commit(3, "r3", true, T0 + OUTBOX_SAFETY_ALARM_MS).alarm_at, Some(T0 + 2 * OUTBOX_SAFETY_ALARM_MS));
}

#[test]
fn a_restored_row_never_replaces_a_newer_one() {
    let mut o = Outbox::default();
    o.on_commit(5, "r5", true, T0);
    o.restore(Owed { version: 4, row: "r4", attempts: 3, entered: true });
    assert_eq!(o.owed(), Some(&Owed { version: 5, row: "r5", attempts: 0, entered: true }));
    o.restore(Owed { version: 6, row: "r6", attempts: 2, entered: true });
    assert_eq!(o.owed(), Some(&Owed { version: 6, row: "r6", attempts: 2, entered: true }));
    o.forget();
    assert_eq!(o.owed(), None);
    assert!(!o.is_owing());
}

#[test]
fn a_row_already_held_for_a_version_keeps_its_attempt_count() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", true, T0);
    o.poll_send();
    o.on_sent(false, T0);
    o.on_commit(1, "again", true, T0 + 1);
    assert_eq!(
        o.owed(),
        Some(&Owed { version: 1, row: "r1", attempts: 1, entered: true }),
        "the same version is not owed twice"
    );
    // Storage may lag memory by an attempt: the count held in memory stands.
    o.restore(Owed { version: 1, row: "r1", attempts: 0, entered: true });
    assert_eq!(o.owed().map(|w| w.attempts), Some(1));
}

#[test]
fn a_send_that_ends_twice_counts_once() {
    let mut o = Outbox::default();
    o.on_commit(1, "r1", true, T0);
    o.poll_send();
    assert_eq!(o.on_sent(false, T0).retry_at, Some(T0 + OUTBOX_RETRY_MS_MIN));
    assert_eq!(o.on_sent(false, T0).retry_at, None, "no send was on its way");
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
                    let set = o.on_commit(m.committed, m.committed, false, m.now).alarm_at;
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
                    let retry = o.on_sent(ok, m.now).retry_at;
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
                        o.restore(Owed { version, row: version, attempts, entered: false });
                        if back == 0 && o.owed().map(|w| w.attempts) == Some(attempts) {
                            m.failures_of_newest = attempts;
                        }
                    }
                }
            }
            for v in 0..=m.committed + 1 {
                prop_assert_eq!(o.is_taken(v), v <= m.acknowledged);
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
            prop_assert!(o.on_sent(true, m.now).retry_at.is_none());
            m.acknowledged = s.version;
            next = o.poll_send();
        }
        prop_assert!(o.is_taken(m.committed), "the newest change never arrived");
    }
}

#[test]
fn a_row_that_entered_something_and_was_passed_during_a_send_travels_with_the_next_one() {
    let mut o = Outbox::default();
    o.on_commit(1, "running", true, T0);
    assert_eq!(o.poll_send(), Some(Send { version: 1, row: "running", passed: vec![] }));
    let c = o.on_commit(2, "needs-you", true, T0 + 1);
    assert_eq!(c.pass, Some(PassedRow { version: 1, row: "running" }), "the send on its way may yet fail");
    let c = o.on_commit(3, "needs-you, summary", false, T0 + 2);
    assert_eq!(c.pass, Some(PassedRow { version: 2, row: "needs-you" }), "stored with the change that passed it");
    let c = o.on_commit(4, "done", true, T0 + 3);
    assert_eq!(c.pass, None, "a row that entered nothing is coalesced away");
    assert_eq!(
        o.on_sent(true, T0 + 4),
        Ended { retry_at: None, unpass_through: Some(1) },
        "delivered: its stored copy goes"
    );
    let send = o.poll_send().unwrap();
    assert_eq!((send.version, send.passed), (4, vec![PassedRow { version: 2, row: "needs-you" }]));
    assert_eq!(o.on_sent(false, T0 + 5).unpass_through, None, "a failed send delivers nothing");
    assert_eq!(o.on_alarm().map(|s| s.passed.len()), Some(1), "the retry carries it again");
    assert_eq!(o.on_sent(true, T0 + 6), Ended { retry_at: None, unpass_through: Some(2) });
    assert!(o.passed().is_empty());
    assert_eq!(o.poll_send(), None);
}

#[test]
fn a_delivered_row_is_never_passed() {
    let mut o = Outbox::default();
    o.on_commit(1, "needs-you", true, T0);
    o.poll_send();
    o.on_sent(true, T0);
    assert_eq!(o.on_commit(2, "done", true, T0 + 1).pass, None, "the index holds version 1");
    assert_eq!(o.on_commit(3, "closed", true, T0 + 2).pass, Some(PassedRow { version: 2, row: "done" }));
}

#[test]
fn past_the_cap_the_oldest_passed_row_is_dropped_and_counted() {
    let mut o: Outbox<u64> = Outbox::default();
    let mut unpassed = vec![];
    for v in 1..=OUTBOX_PASSED_MAX as u64 + 3 {
        let c = o.on_commit(v, v, true, T0);
        unpassed.extend(c.unpass_through);
    }
    assert_eq!(o.passed().len(), OUTBOX_PASSED_MAX);
    assert_eq!(o.passed().first().map(|e| e.version), Some(3), "the oldest went first");
    assert_eq!(unpassed, [1, 2], "and its stored copy with it");
    assert_eq!(o.dropped(), 2);
    let send = o.poll_send().unwrap();
    assert_eq!(send.passed.len(), OUTBOX_PASSED_MAX);
    assert_eq!(
        o.on_sent(true, T0).unpass_through,
        Some(OUTBOX_PASSED_MAX as u64 + 2),
        "the newest passed row delivered"
    );
}

#[test]
fn restored_passed_rows_are_kept_in_order_below_the_owed_row() {
    let mut o = Outbox::default();
    o.restore(Owed { version: 5, row: "r5", attempts: 0, entered: true });
    o.restore_passed(PassedRow { version: 3, row: "r3" });
    o.restore_passed(PassedRow { version: 2, row: "r2" });
    o.restore_passed(PassedRow { version: 3, row: "again" });
    o.restore_passed(PassedRow { version: 5, row: "r5" });
    o.restore_passed(PassedRow { version: 6, row: "r6" });
    assert_eq!(o.passed(), [PassedRow { version: 2, row: "r2" }, PassedRow { version: 3, row: "r3" }]);
    assert_eq!(o.poll_send().map(|s| s.passed.len()), Some(2));
    o.on_sent(true, T0);
    o.restore_passed(PassedRow { version: 4, row: "r4" });
    assert!(o.passed().is_empty(), "a row no newer than one delivered is not owed");
    o.on_commit(6, "r6", true, T0);
    o.restore_passed(PassedRow { version: 5, row: "r5" });
    assert!(o.passed().is_empty(), "the version delivered is not owed either");
    o.on_commit(7, "r7", true, T0);
    assert_eq!(o.passed(), [PassedRow { version: 6, row: "r6" }]);
    o.forget();
    assert!(o.passed().is_empty() && o.owed().is_none(), "storage is the truth after a failed commit");
}

#[derive(Debug, Clone)]
enum Step {
    /// A change whose row has this key (a turn, status and state in one).
    Commit {
        key: u8,
    },
    Poll,
    Sent {
        ok: bool,
    },
    Alarm,
    /// The object evicted (a send on its way reached the index or not) and read back.
    Restart {
        reached: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..3).prop_map(|key| Step::Commit { key }),
        3 => Just(Step::Poll),
        3 => any::<bool>().prop_map(|ok| Step::Sent { ok }),
        1 => Just(Step::Alarm),
        1 => any::<bool>().prop_map(|reached| Step::Restart { reached }),
    ]
}

/// The object's storage of the outbox: the record's row and its flag, and the passed rows.
#[derive(Default)]
struct Stored {
    record: Option<(u64, u8, bool)>,
    passed: BTreeMap<u64, (u64, u8)>,
}

impl Stored {
    fn unpass(&mut self, through: Option<u64>) {
        if let Some(through) = through {
            self.passed.retain(|v, _| *v > through);
        }
    }
}

/// The index: the row it holds and the versions it found an entry at, walking each send's chain.
#[derive(Default)]
struct Index {
    held: Option<(u64, u8)>,
    told: Vec<u64>,
}

impl Index {
    fn take(&mut self, send: &Send<(u64, u8)>) {
        for row in send.passed.iter().map(|e| e.row).chain(std::iter::once(send.row)) {
            if self.held.is_some_and(|h| h.0 >= row.0) {
                continue;
            }
            if self.held.is_none_or(|h| h.1 != row.1) {
                assert!(
                    self.told.last().is_none_or(|t| *t < row.0),
                    "told out of version order: {:?} then {}",
                    self.told,
                    row.0
                );
                self.told.push(row.0);
            }
            self.held = Some(row);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// Over any sequence of changes, sends, failures, alarms and evictions, the index walking
    /// each send's chain finds every row that entered something relative to the row before it,
    /// once, in version order, while plain rows are still coalesced (a send carries the newest
    /// row and only rows that entered something before it).
    #[test]
    fn every_row_that_entered_something_reaches_the_index(steps in proptest::collection::vec(step(), 1..120)) {
        let mut o: Outbox<(u64, u8)> = Outbox::default();
        let (mut db, mut index) = (Stored::default(), Index::default());
        let mut keys: Vec<u8> = vec![];
        let mut in_flight: Option<Send<(u64, u8)>> = None;
        let mut dropped = 0;
        let check = |s: &Send<(u64, u8)>, keys: &[u8]| {
            assert_eq!(s.version, keys.len() as u64, "a send carries the newest row");
            assert!(s.passed.len() <= OUTBOX_PASSED_MAX);
            assert!(s.passed.windows(2).all(|w| w[0].version < w[1].version) && s.passed.iter().all(|e| e.version < s.version));
            for e in &s.passed {
                let v = e.version as usize;
                assert!(v == 1 || keys[v - 1] != keys[v - 2], "a plain row {v} was carried: {keys:?}");
            }
        };
        for step in steps {
            match step {
                Step::Commit { key } => {
                    keys.push(key);
                    let version = keys.len() as u64;
                    let entered = o.owed().is_none_or(|w| w.row.1 != key);
                    let c = o.on_commit(version, (version, key), entered, T0);
                    if let Some(e) = c.pass {
                        db.passed.insert(e.version, e.row);
                    }
                    db.unpass(c.unpass_through);
                    db.record = Some((version, key, entered));
                }
                Step::Poll => {
                    if let Some(s) = o.poll_send() {
                        prop_assert!(in_flight.is_none());
                        check(&s, &keys);
                        in_flight = Some(s);
                    }
                }
                Step::Sent { ok } => {
                    if let Some(s) = in_flight.take().filter(|_| ok) {
                        index.take(&s);
                    }
                    let ended = o.on_sent(ok, T0);
                    db.unpass(ended.unpass_through);
                }
                Step::Alarm => {
                    if let Some(s) = o.on_alarm() {
                        prop_assert!(in_flight.is_none());
                        check(&s, &keys);
                        in_flight = Some(s);
                    }
                }
                Step::Restart { reached } => {
                    if let Some(s) = in_flight.take().filter(|_| reached) {
                        index.take(&s);
                    }
                    dropped += o.dropped();
                    o = Outbox::default();
                    if let Some((version, key, entered)) = db.record {
                        o.restore(Owed { version, row: (version, key), attempts: 0, entered });
                        for (v, row) in &db.passed {
                            o.restore_passed(PassedRow { version: *v, row: *row });
                        }
                    }
                }
            }
        }
        // From here every send succeeds.
        if let Some(s) = in_flight.take() {
            index.take(&s);
            db.unpass(o.on_sent(true, T0).unpass_through);
        }
        let mut next = o.on_alarm();
        while let Some(s) = next {
            check(&s, &keys);
            index.take(&s);
            db.unpass(o.on_sent(true, T0).unpass_through);
            next = o.poll_send();
        }
        dropped += o.dropped();
        let entered: Vec<u64> = (1..=keys.len()).filter(|v| *v == 1 || keys[v - 1] != keys[v - 2]).map(|v| v as u64).collect();
        if dropped == 0 {
            prop_assert_eq!(&index.told, &entered, "keys {:?}", keys);
        }
        prop_assert!(o.passed().is_empty() && db.passed.is_empty(), "delivered passed rows are deleted: {:?}", db.passed);
    }
}
