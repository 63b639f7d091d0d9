use super::*;
use crate::limits::{
    PUSH_RETRY_WINDOW_MS, WEBHOOK_DELIVERIES_KEPT, WEBHOOK_PENDING_PER_OWNER_MAX, WEBHOOK_SENDS_PER_ALARM_MAX,
};
use crate::turn::Status;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const T0: EpochMs = 1_700_000_000_000;
const MINUTE_MS: i64 = 60_000;

fn bounds(pending_max: usize, push: bool) -> Bounds {
    Bounds { open_cap: 3, retention: Retention::default(), pending_max, push }
}

/// A list row of hand-off `id` at `version`, in `status` and `state`, changed at `at`.
fn row_at(id: &str, version: u64, status: Status, state: State, at: EpochMs) -> Row {
    serde_json::from_value(serde_json::json!({
        "id": id, "session": "s", "machine": "m", "size": "large", "turn": 1, "state": state,
        "status": status, "summary": null, "version": version,
        "updated_at": crate::time::Timestamp::from_ms(at),
    }))
    .expect("a list row")
}

fn row(id: &str, version: u64, status: Status) -> Row {
    row_at(id, version, status, State::Open, T0 + version as i64)
}

fn webhook(id: &str, events: &[Notice], at: EpochMs) -> StoredReceiver {
    StoredReceiver {
        id: id.into(),
        events: events.to_vec(),
        created_at: at,
        dropped: 0,
        address: Address::Webhook { url: format!("https://{id}.example/"), secret: "whsec".into() },
    }
}

fn subscription(id: &str, events: &[Notice], at: EpochMs) -> StoredReceiver {
    let address = Address::Push {
        endpoint: format!("https://push.example/{id}"),
        origin: "https://push.example".into(),
        p256dh: "k".into(),
        auth: "a".into(),
        console: "https://console.example".into(),
        device: None,
    };
    StoredReceiver { id: id.into(), events: events.to_vec(), created_at: at, dropped: 0, address }
}

/// One delivery as the in-memory store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    key: [u8; 16],
    receiver: Receiver,
    to: String,
    handoff: String,
    version: u64,
    notice: Notice,
    state: DeliveryState,
    attempts: u32,
    created_at: EpochMs,
    next_attempt_at: Option<EpochMs>,
    last_status: Option<u16>,
    console: String,
    /// What the store would send: the row's JSON, until the delivery finishes.
    body: String,
}

/// What the object's store does with SQL, in memory: it answers the reads and runs the writes
/// exactly as they are typed, deciding nothing.
#[derive(Debug, Default)]
struct Mem {
    tables: Tables,
    list: BTreeMap<String, (u64, EpochMs, State, String)>,
    receivers: Vec<StoredReceiver>,
    deliveries: BTreeMap<i64, Stored>,
    next_seq: i64,
    /// The erased lives: `id` → (life, when).
    erased: BTreeMap<String, (u64, EpochMs)>,
    devices: Vec<StoredDevice>,
    sign_ins: Vec<EpochMs>,
}

impl Mem {
    fn pending(&self) -> impl Iterator<Item = (&i64, &Stored)> {
        self.deliveries.iter().filter(|(_, d)| d.state == DeliveryState::Pending)
    }

    fn read(&self, read: &Read, feed: &mut Feed) {
        // SQLite fails on a table that is not there.
        let list = matches!(read, Read::Held { .. } | Read::OpenCount { .. } | Read::Rows { .. });
        assert!(!list || self.tables.list, "{read:?} with no list table");
        let receivers = matches!(
            read,
            Read::Receivers { .. }
                | Read::PendingCount
                | Read::OldestPending { .. }
                | Read::Deliveries { .. }
                | Read::Pending { .. }
                | Read::Finished { .. }
        );
        assert!(!receivers || self.tables.receivers, "{read:?} with no receivers' tables");
        assert!(!matches!(read, Read::Erased { .. }) || self.tables.erased, "{read:?} with no erased lives' table");
        let devices = matches!(read, Read::Devices | Read::SignIns { .. });
        assert!(!devices || self.tables.devices, "{read:?} with no devices' tables");
        match read {
            Read::Devices => feed.devices = Some(self.devices.clone()),
            Read::SignIns { since } => feed.sign_ins = Some(self.sign_ins.iter().filter(|at| **at >= *since).count()),
            Read::Tables => feed.tables = Some(self.tables),
            Read::Held { id } => {
                feed.held = Some(
                    self.list.get(id).map(|(version, _, _, text)| HeldRow { version: *version, text: text.clone() }),
                )
            }
            Read::Receivers { of } => {
                let mut entries: Vec<StoredReceiver> =
                    self.receivers.iter().filter(|e| of.contains(&e.receiver())).cloned().collect();
                entries.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                feed.receivers = Some(entries);
            }
            Read::PendingCount => feed.pending_count = Some(self.pending().count()),
            Read::OldestPending { limit } => {
                feed.oldest = Some(
                    self.pending()
                        .take(*limit)
                        .map(|(seq, d)| PendingRef { seq: *seq, receiver: Ok(d.receiver), to: d.to.clone() })
                        .collect(),
                )
            }
            Read::OpenCount { except } => {
                feed.open = Some(self.list.iter().filter(|(id, r)| r.2 == State::Open && *id != except).count() as u64)
            }
            Read::Rows { state, after, limit } => {
                let mut rows: Vec<(&String, &(u64, EpochMs, State, String))> = self.list.iter().collect();
                rows.sort_by(|a, b| (b.1 .1, b.0).cmp(&(a.1 .1, a.0)));
                let after_cursor = |id: &String, at: EpochMs| {
                    after.as_ref().is_none_or(|c| at < c.updated_at || (at == c.updated_at && *id < c.id))
                };
                feed.rows = Some(
                    rows.into_iter()
                        .filter(|(id, r)| state.is_none_or(|s| r.2 == s) && after_cursor(id, r.1))
                        .take(*limit)
                        .map(|(_, r)| r.3.clone())
                        .collect(),
                );
            }
            Read::Deliveries { id, limit } => {
                let of = self
                    .deliveries
                    .iter()
                    .rev()
                    .filter(|(_, d)| d.to == *id && d.receiver == Receiver::Webhook)
                    .take(*limit);
                feed.deliveries = Some(Ok(of
                    .map(|(_, d)| receiver::Delivery {
                        id: hex::encode(d.key),
                        kind: d.notice.message_type().into(),
                        handoff: d.handoff.clone(),
                        version: d.version,
                        state: d.state,
                        attempts: d.attempts,
                        last_status: d.last_status,
                        last_attempt_at: None,
                        next_attempt_at: d.next_attempt_at.map(crate::time::Timestamp::from_ms),
                    })
                    .collect()));
            }
            Read::Pending { limit } => {
                feed.pending = Some(
                    self.pending()
                        .take(*limit)
                        .map(|(seq, d)| Waiting {
                            seq: *seq,
                            receiver: Ok(d.receiver),
                            to: d.to.clone(),
                            handoff: d.handoff.clone(),
                            created_at: d.created_at,
                            attempts: d.attempts,
                            next_attempt_at: d.next_attempt_at,
                        })
                        .collect(),
                )
            }
            Read::Finished { to, limit } => {
                let finished = self
                    .deliveries
                    .iter()
                    .rev()
                    .filter(|(_, d)| d.to == *to && d.state != DeliveryState::Pending)
                    .take(*limit);
                feed.finished.push((to.clone(), finished.map(|(seq, _)| *seq).collect()));
            }
            Read::StorageBytes => feed.storage_bytes = Some(4096),
            Read::Erased { id } => feed.erased = Some(self.erased.get(id).map(|(life, _)| *life)),
            Read::StorageOf { id } => {
                let deliveries = self.deliveries.values().filter(|d| d.handoff == *id);
                let facts = deliveries
                    .map(|d| DeliveryFacts { state: d.state.as_str().into(), body_bytes: d.body.len() as u64 })
                    .collect();
                feed.storage_of = Some(HandoffFacts {
                    rows: u64::from(self.list.contains_key(id)),
                    deliveries: facts,
                    erased: self.erased.get(id).map(|e| e.0),
                });
            }
        }
    }

    fn write(&mut self, write: &Write) {
        match write {
            Write::ListSchema => self.tables.list = true,
            Write::ReceiverSchema => self.tables.receivers = true,
            Write::StoreRow(row) => {
                assert!(self.tables.list, "a row before the list's table");
                let text = serde_json::to_string(row).expect("a row's JSON");
                self.list.insert(row.id.clone(), (row.version, row.updated_at.ms(), row.state, text));
            }
            Write::StoreUnreadable { id } => {
                self.list.insert(id.clone(), (u64::MAX, i64::MAX, State::Open, "{\"not\": \"a row\"".into()));
            }
            Write::DeleteRow { id } => {
                self.list.remove(id);
            }
            Write::DropClosedBefore { before } => self.list.retain(|_, r| !(r.2 == State::Closed && r.1 < *before)),
            Write::AddReceiver(entry) => {
                assert!(self.tables.receivers, "a receiver before its table");
                self.receivers.push(entry.clone());
            }
            Write::RemoveReceiver { receiver, id } => {
                self.receivers.retain(|e| !(e.receiver() == *receiver && e.id == *id));
                self.deliveries.retain(|_, d| !(d.receiver == *receiver && d.to == *id));
            }
            Write::Owe { receiver, to, row, notice, key, at, console } => {
                assert!(self.tables.receivers, "a delivery before its table");
                if self.deliveries.values().any(|d| d.key == *key) {
                    return; // INSERT OR IGNORE
                }
                self.next_seq += 1;
                let stored = Stored {
                    key: *key,
                    receiver: *receiver,
                    to: to.clone(),
                    handoff: row.id.clone(),
                    version: row.version,
                    notice: *notice,
                    state: DeliveryState::Pending,
                    attempts: 0,
                    created_at: *at,
                    next_attempt_at: Some(*at),
                    last_status: None,
                    console: console.clone(),
                    body: serde_json::to_string(row).expect("a row's JSON"),
                };
                self.deliveries.insert(self.next_seq, stored);
            }
            Write::DropPending { seqs } => self.deliveries.retain(|seq, _| !seqs.contains(seq)),
            Write::CountDropped { receiver, id, n } => {
                if let Some(e) = self.receivers.iter_mut().find(|e| e.receiver() == *receiver && e.id == *id) {
                    e.dropped += n;
                }
            }
            Write::Lease { seq, lease, .. } => {
                if let Some(d) = self.deliveries.get_mut(seq) {
                    d.attempts = lease.attempts;
                    d.next_attempt_at = Some(lease.next_attempt_at);
                }
            }
            Write::Retry { seq, status, at } => {
                if let Some(d) = self.deliveries.get_mut(seq) {
                    d.last_status = *status;
                    d.next_attempt_at = Some(*at);
                }
            }
            Write::Finish { seq, state, status } => {
                if let Some(d) = self.deliveries.get_mut(seq) {
                    d.state = *state;
                    d.last_status = *status;
                    d.next_attempt_at = None;
                    d.body.clear();
                }
            }
            Write::DropDeliveriesOf { handoff } => self.deliveries.retain(|_, d| d.handoff != *handoff),
            Write::ErasedSchema => self.tables.erased = true,
            Write::Erased { id, incarnation, at } => {
                assert!(self.tables.erased, "an erased life before its table");
                let kept = self.erased.get(id).map_or(0, |e| e.0);
                self.erased.insert(id.clone(), ((*incarnation).max(kept), *at));
            }
            Write::TrimErased { before, keep } => {
                self.erased.retain(|_, (_, at)| *at >= *before);
                let mut newest: Vec<(EpochMs, String)> =
                    self.erased.iter().map(|(id, (_, at))| (*at, id.clone())).collect();
                newest.sort_by(|a, b| b.cmp(a));
                for (_, id) in newest.into_iter().skip(*keep) {
                    self.erased.remove(&id);
                }
            }
            Write::TrimFinished { to, through } => {
                self.deliveries.retain(|seq, d| !(d.to == *to && d.state != DeliveryState::Pending && *seq <= *through))
            }
            Write::DeviceSchema => self.tables.devices = true,
            Write::AddDevice(device) => {
                assert!(self.tables.devices, "a device before its table");
                self.devices.push(device.clone());
            }
            Write::SignedIn { at } => self.sign_ins.push(*at),
            Write::TrimSignIns { before } => self.sign_ins.retain(|at| *at >= *before),
            Write::SeenDevice { id, at } => {
                self.devices.iter_mut().filter(|d| d.device.id == *id).for_each(|d| d.device.last_seen_at = *at)
            }
            Write::RenameDevice { id, name } => {
                self.devices.iter_mut().filter(|d| d.device.id == *id).for_each(|d| d.device.name = name.clone())
            }
            Write::RemoveDevice { id, subscriptions } => {
                assert_eq!(*subscriptions, self.tables.receivers, "its subscriptions' table exists exactly then");
                let of_device =
                    |e: &StoredReceiver| matches!(&e.address, Address::Push { device: Some(d), .. } if d == id);
                let gone: Vec<String> = self.receivers.iter().filter(|e| of_device(e)).map(|e| e.id.clone()).collect();
                self.receivers.retain(|e| !of_device(e));
                self.deliveries.retain(|_, d| !(d.receiver == Receiver::Push && gone.contains(&d.to)));
                self.devices.retain(|d| d.device.id != *id);
            }
        }
    }
}

/// The driver's loop: read what the index asks for, hand it over, carry out the plan's writes.
fn run(index: &mut Index, mem: &mut Mem, ask: Ask, now: EpochMs) -> Plan {
    run_reading(index, mem, ask, now).0
}

/// [`run`], and the reads it made.
fn run_reading(index: &mut Index, mem: &mut Mem, ask: Ask, now: EpochMs) -> (Plan, Vec<Read>) {
    let mut feed = Feed::default();
    let mut reads = Vec::new();
    while let Some(read) = index.next_read(&ask, &feed, now) {
        assert!(reads.len() < 8, "an ask that keeps reading: {read:?}");
        mem.read(&read, &mut feed);
        reads.push(read);
    }
    let plan = index.handle(ask, feed, now);
    for w in &plan.writes {
        mem.write(w);
    }
    (plan, reads)
}

fn owner(pending_max: usize, push: bool) -> (Index, Mem) {
    (Index::new(bounds(pending_max, push)), Mem::default())
}

#[test]
fn a_row_newer_than_the_one_held_is_stored_and_a_late_or_repeated_one_changes_nothing() {
    let (mut index, mut mem) = owner(10, false);
    assert_eq!(
        run(
            &mut index,
            &mut mem,
            Ask::Put { row: row("ho_a", 2, Status::Running), passed: vec![], incarnation: 0 },
            T0
        )
        .answer,
        IndexAnswer::Done
    );
    for late in [1, 2] {
        let plan = run(
            &mut index,
            &mut mem,
            Ask::Put { row: row("ho_a", late, Status::Done), passed: vec![], incarnation: 0 },
            T0,
        );
        assert_eq!((plan.answer, plan.writes), (IndexAnswer::Done, vec![]), "version {late}");
    }
    assert_eq!(mem.list["ho_a"].0, 2);
}

#[test]
fn a_row_that_enters_a_notice_owes_one_delivery_to_each_receiver_naming_it_and_arms_the_alarm_at_once() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_2", &[Notice::Done], T0 + 1)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0 + 2)), T0);
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0 + 5,
    );
    assert_eq!(plan.alarm_at, Some(T0 + 5));
    let owed: Vec<(&str, Notice)> = mem.deliveries.values().map(|d| (d.to.as_str(), d.notice)).collect();
    assert_eq!(owed, vec![("wh_1", Notice::NeedsYou), ("ps_1", Notice::NeedsYou)]);
    let again = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0 + 6,
    );
    assert_eq!((again.writes, again.alarm_at), (vec![], None), "the same row twice owes nothing more");
}

#[test]
fn without_push_configured_no_push_message_is_owed() {
    let (mut index, mut mem) = owner(10, false);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0,
    );
    assert!(mem.deliveries.is_empty(), "{plan:?}");
    assert_eq!(plan.alarm_at, None);
}

#[test]
fn past_the_cap_the_oldest_pending_go_first_each_counted_on_its_receiver_and_new_ones_past_it_are_never_written() {
    let (mut index, mut mem) = owner(2, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou, Notice::Done], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0 + 1)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    assert_eq!(mem.pending().count(), 2);
    // Three more owed (done to wh_1; needs-you of ho_b to both) against a cap of two.
    let passed = vec![row("ho_a", 2, Status::Done)];
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 3, Status::Running), passed, incarnation: 0 }, T0 + 1);
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_b", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0 + 2,
    );
    let pending: Vec<(&str, &str)> = mem.pending().map(|(_, d)| (d.to.as_str(), d.handoff.as_str())).collect();
    assert_eq!(pending, vec![("wh_1", "ho_b"), ("ps_1", "ho_b")], "the newest two stay: {plan:?}");
    let dropped: Vec<(&str, u64)> = mem.receivers.iter().map(|e| (e.id.as_str(), e.dropped)).collect();
    assert_eq!(dropped, vec![("wh_1", 2), ("ps_1", 1)]);
    // One row owing more than the whole cap: only the newest are written.
    let (mut index, mut mem) = owner(1, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0 + 1)), T0);
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0,
    );
    assert_eq!(plan.writes.iter().filter(|w| matches!(w, Write::Owe { .. })).count(), 1, "{plan:?}");
    assert_eq!(mem.pending().map(|(_, d)| d.to.as_str()).collect::<Vec<_>>(), vec!["ps_1"]);
    assert_eq!(mem.receivers[0].dropped, 1);
}

#[test]
fn the_open_cap_counts_open_rows_besides_the_new_one_and_a_refused_create_stores_no_row() {
    let (mut index, mut mem) = owner(10, false);
    for (i, id) in ["ho_a", "ho_b", "ho_c"].iter().enumerate() {
        let plan = run(&mut index, &mut mem, Ask::Open { row: row(id, 1, Status::Running) }, T0 + i as i64);
        assert_eq!(plan.answer, IndexAnswer::Admission(Admission::Yes));
    }
    let again = run(&mut index, &mut mem, Ask::Open { row: row("ho_c", 1, Status::Running) }, T0 + 9);
    assert_eq!(again.answer, IndexAnswer::Admission(Admission::Yes), "a create's row again, in place of its own");
    let crowded = run(&mut index, &mut mem, Ask::Open { row: row("ho_d", 1, Status::Running) }, T0 + 10);
    assert_eq!(crowded.answer, IndexAnswer::Admission(Admission::No(crate::rows::TooManyOpen { open: 3, cap: 3 })));
    assert_eq!(crowded.writes, vec![], "a refused create writes nothing");
    assert!(!mem.list.contains_key("ho_d"));
}

#[test]
fn a_create_drops_closed_rows_past_retention_and_keeps_those_within_it() {
    let (mut index, mut mem) = owner(10, false);
    let day_ms = 24 * 60 * MINUTE_MS;
    let now = T0 + 400 * day_ms;
    let expired_before = Retention::default().expired_before(now);
    run(
        &mut index,
        &mut mem,
        Ask::Put {
            row: row_at("ho_old", 2, Status::Done, State::Closed, expired_before - 1),
            passed: vec![],
            incarnation: 0,
        },
        T0,
    );
    run(
        &mut index,
        &mut mem,
        Ask::Put {
            row: row_at("ho_kept", 2, Status::Done, State::Closed, expired_before),
            passed: vec![],
            incarnation: 0,
        },
        T0,
    );
    run(&mut index, &mut mem, Ask::Open { row: row_at("ho_new", 1, Status::Running, State::Open, now) }, now);
    assert_eq!(mem.list.keys().collect::<Vec<_>>(), vec!["ho_kept", "ho_new"]);
}

#[test]
fn pages_walk_every_row_once_newest_first_within_a_state_and_an_unreadable_row_makes_the_list_unavailable() {
    let (mut index, mut mem) = owner(10, false);
    let ids: Vec<String> = (0..5).map(|i| crate::ids::handoff_id("alice", &format!("s{i}"))).collect();
    for (i, id) in ids.iter().enumerate() {
        let state = if i == 2 { State::Closed } else { State::Open };
        // Two rows share a time: the id breaks the tie.
        run(
            &mut index,
            &mut mem,
            Ask::Put {
                row: row_at(id, 1, Status::Running, state, T0 + (i as i64 / 2)),
                passed: vec![],
                incarnation: 0,
            },
            T0,
        );
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let query =
            ListQuery { state: Some(State::Open), limit: 2, cursor: cursor.as_deref().and_then(Cursor::decode) };
        let IndexAnswer::Page { page, .. } =
            run(&mut index, &mut mem, Ask::List { query, if_none_match: None }, T0).answer
        else {
            panic!("a page")
        };
        seen.extend(page.handoffs.iter().map(|r| r.id.clone()));
        assert!(seen.len() <= 5, "{seen:?} {:?}", page.cursor.as_deref().and_then(Cursor::decode));
        cursor = page.cursor;
        if cursor.is_none() {
            break;
        }
    }
    // Newest first, the later id first between rows of one time; the closed row is not listed.
    let mut open = vec![(4, &ids[4]), (3, &ids[3]), (1, &ids[1]), (0, &ids[0])];
    open.sort_by(|a, b| (b.0 / 2, b.1).cmp(&(a.0 / 2, a.1)));
    assert_eq!(seen, open.into_iter().map(|(_, id)| id.clone()).collect::<Vec<_>>());
    run(&mut index, &mut mem, Ask::Hook(IndexHook::PutUnreadable { id: "ho_z".into() }), T0);
    let query = ListQuery { state: None, limit: 10, cursor: None };
    assert!(matches!(
        run(&mut index, &mut mem, Ask::List { query, if_none_match: None }, T0).answer,
        IndexAnswer::Unavailable(_)
    ));
}

#[test]
fn an_owner_with_no_tables_lists_nothing_and_finds_no_receiver_and_writes_nothing() {
    let (mut index, mut mem) = owner(10, true);
    let query = ListQuery { state: None, limit: 10, cursor: None };
    let page = run(&mut index, &mut mem, Ask::List { query, if_none_match: None }, T0);
    assert_eq!(page.answer, IndexAnswer::Page { page: Page { handoffs: vec![], cursor: None }, if_none_match: None });
    for ask in
        [Ask::RemoveReceiver { receiver: Receiver::Webhook, id: "wh_1".into() }, Ask::Deliveries { id: "wh_1".into() }]
    {
        let plan = run(&mut index, &mut mem, ask, T0);
        assert!(matches!(&plan.answer, IndexAnswer::Refused(r) if r.code == Code::WebhookNotFound), "{plan:?}");
    }
    let plan = run(&mut index, &mut mem, Ask::RemoveReceiver { receiver: Receiver::Push, id: "ps_1".into() }, T0);
    assert!(matches!(&plan.answer, IndexAnswer::Refused(r) if r.code == Code::SubscriptionNotFound));
    assert_eq!(
        run(&mut index, &mut mem, Ask::Receivers(Receiver::Push), T0).answer,
        IndexAnswer::Receivers { of: Receiver::Push, entries: vec![] }
    );
    assert_eq!(mem.tables, Tables::default());
    let dropped = run(&mut index, &mut mem, Ask::Drop { id: "ho_a".into(), incarnation: 1 }, T0).writes;
    assert!(
        dropped.iter().all(|w| matches!(w, Write::ErasedSchema | Write::Erased { .. } | Write::TrimErased { .. })),
        "only the erased life: {dropped:?}"
    );
}

#[test]
fn an_erase_drops_the_row_and_every_pending_and_finished_delivery_of_the_hand_off_and_no_other() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou, Notice::Done], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 5 }, T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_b", 1, Status::NeedsYou), passed: vec![], incarnation: 5 }, T0);
    // One of ho_a's deliveries is finished (its body goes), the other still pending.
    let first = *mem.deliveries.iter().find(|(_, d)| d.handoff == "ho_a" && d.receiver == Receiver::Webhook).unwrap().0;
    let (receiver, to, created_at) = {
        let d = &mem.deliveries[&first];
        (d.receiver, d.to.clone(), d.created_at)
    };
    run(
        &mut index,
        &mut mem,
        Ask::Sent(Outcome { seq: first, receiver, to, created_at, attempts: 1, status: Some(200) }),
        T0 + 1,
    );
    assert_eq!(
        (mem.deliveries[&first].state, mem.deliveries[&first].body.as_str()),
        (DeliveryState::Delivered, ""),
        "a finished delivery keeps no body"
    );
    assert!(mem
        .deliveries
        .values()
        .any(|d| d.handoff == "ho_a" && d.state == DeliveryState::Pending && !d.body.is_empty()));

    let plan = run(&mut index, &mut mem, Ask::Drop { id: "ho_a".into(), incarnation: 5 }, T0 + 2);
    assert_eq!(plan.answer, IndexAnswer::Done);
    assert!(!mem.list.contains_key("ho_a"));
    assert!(mem.deliveries.values().all(|d| d.handoff != "ho_a"), "nothing of ho_a is left to send or to read");
    assert_eq!(
        mem.deliveries.values().filter(|d| d.handoff == "ho_b").count(),
        2,
        "another hand-off's deliveries stay"
    );
    assert!(mem.list.contains_key("ho_b"));
    let alarm = run(&mut index, &mut mem, Ask::Alarm, T0 + 3);
    let sent: Vec<&str> = alarm.send.iter().map(|(seq, _)| mem.deliveries[seq].handoff.as_str()).collect();
    assert!(
        !sent.is_empty() && sent.iter().all(|h| *h == "ho_b"),
        "an erased hand-off's pending deliveries are never sent: {sent:?}"
    );
}

#[test]
fn a_row_of_an_erased_life_arriving_after_the_drop_stores_nothing_and_owes_nothing_and_a_later_life_is_listed() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou, Notice::Done], T0)), T0);
    run(&mut index, &mut mem, Ask::Open { row: row("ho_a", 1, Status::Running) }, T0);
    run(&mut index, &mut mem, Ask::Drop { id: "ho_a".into(), incarnation: 100 }, T0 + 1);
    for late in [1, 7] {
        let plan = run(
            &mut index,
            &mut mem,
            Ask::Put { row: row("ho_a", late, Status::NeedsYou), passed: vec![], incarnation: 100 },
            T0 + 2,
        );
        assert_eq!(
            (plan.answer, plan.writes, plan.alarm_at),
            (IndexAnswer::Done, vec![], None),
            "version {late} of the erased life"
        );
    }
    assert!(
        !mem.list.contains_key("ho_a") && mem.deliveries.is_empty(),
        "the row is not brought back, and nobody is told"
    );
    // An earlier life's row too; a Drop repeated (an erase retried) keeps the life.
    assert!(run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 9, Status::Done), passed: vec![], incarnation: 40 },
        T0 + 3
    )
    .writes
    .is_empty());
    run(&mut index, &mut mem, Ask::Drop { id: "ho_a".into(), incarnation: 40 }, T0 + 3);
    assert_eq!(mem.erased["ho_a"].0, 100);
    // The session created again: a later life, listed and notified as any other.
    run(&mut index, &mut mem, Ask::Open { row: row("ho_a", 1, Status::Running) }, T0 + 4);
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 2, Status::NeedsYou), passed: vec![], incarnation: 200 },
        T0 + 5,
    );
    assert!(plan.writes.iter().any(|w| matches!(w, Write::StoreRow(r) if r.version == 2)));
    assert_eq!(mem.deliveries.len(), 1, "the later life owes its notice");
    // Kept a day: a drop 23 hours later forgets nothing.
    run(&mut index, &mut mem, Ask::Drop { id: "ho_y".into(), incarnation: 1 }, T0 + 23 * 60 * MINUTE_MS);
    assert!(mem.erased.contains_key("ho_a"), "an erased life is remembered for a day");
    // The erased lives are bounded: by age and by count.
    let later = T0 + 24 * 60 * MINUTE_MS + 60 * MINUTE_MS;
    run(&mut index, &mut mem, Ask::Drop { id: "ho_z".into(), incarnation: 1 }, later);
    assert_eq!(mem.erased.keys().collect::<Vec<_>>(), vec!["ho_y", "ho_z"], "kept ERASED_KEPT_MS, then forgotten");
    for i in 0..crate::limits::ERASED_KEPT_PER_OWNER_MAX + 3 {
        run(&mut index, &mut mem, Ask::Drop { id: format!("ho_{i}"), incarnation: 1 }, later + 1 + i as i64);
    }
    assert_eq!(mem.erased.len(), crate::limits::ERASED_KEPT_PER_OWNER_MAX);
    assert!(
        !mem.erased.contains_key("ho_y")
            && !mem.erased.contains_key("ho_z")
            && mem.erased.contains_key(&format!("ho_{}", crate::limits::ERASED_KEPT_PER_OWNER_MAX + 2)),
        "the oldest go first"
    );
}

#[test]
fn receivers_are_capped_per_kind_and_removing_one_removes_its_deliveries() {
    let (mut index, mut mem) = owner(10, true);
    for i in 0..crate::limits::WEBHOOKS_PER_OWNER_MAX {
        let plan = run(
            &mut index,
            &mut mem,
            Ask::AddReceiver(webhook(&format!("wh_{i}"), &[Notice::NeedsYou], T0 + i as i64)),
            T0,
        );
        assert!(matches!(plan.answer, IndexAnswer::Created(_)));
    }
    let over = run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_x", &[Notice::NeedsYou], T0 + 99)), T0);
    assert!(matches!(&over.answer, IndexAnswer::Refused(r) if r.code == Code::WebhookTooMany));
    assert!(over.writes.is_empty(), "a refusal writes nothing");
    assert!(matches!(
        run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0).answer,
        IndexAnswer::Created(_)
    ));
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    assert_eq!(
        run(&mut index, &mut mem, Ask::RemoveReceiver { receiver: Receiver::Webhook, id: "wh_0".into() }, T0).answer,
        IndexAnswer::Removed
    );
    assert!(mem.deliveries.values().all(|d| d.to != "wh_0"));
    assert!(mem.deliveries.values().any(|d| d.to == "wh_1"));
}

/// Runs the alarm and answers each send it starts with `status`; answers the plans of the outcomes.
fn alarm_and_answer(index: &mut Index, mem: &mut Mem, now: EpochMs, status: Option<u16>) -> Vec<Plan> {
    let alarm = run(index, mem, Ask::Alarm, now);
    let mut plans = vec![];
    for (seq, _) in alarm.send.clone() {
        let d = mem.deliveries[&seq].clone();
        let outcome = Outcome {
            seq,
            receiver: d.receiver,
            to: d.to.clone(),
            created_at: d.created_at,
            attempts: d.attempts,
            status,
        };
        plans.push(run(index, mem, Ask::Sent(outcome), now));
    }
    plans.insert(0, alarm);
    plans
}

#[test]
fn a_webhook_keeps_its_newest_finished_deliveries_and_a_push_subscription_none() {
    let (mut index, mut mem) = owner(WEBHOOK_PENDING_PER_OWNER_MAX, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    let mut now = T0;
    for i in 0..(WEBHOOK_DELIVERIES_KEPT + 7) {
        now += MINUTE_MS;
        run(
            &mut index,
            &mut mem,
            Ask::Put { row: row(&format!("ho_{i:03}"), 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
            now,
        );
        let plans = alarm_and_answer(&mut index, &mut mem, now, Some(200));
        assert!(plans.iter().skip(1).all(|p| p.alarm_at == Some(now)), "an outcome has the alarm run the next round");
    }
    let finished: Vec<&Stored> = mem.deliveries.values().filter(|d| d.to == "wh_1").collect();
    assert_eq!(finished.len(), WEBHOOK_DELIVERIES_KEPT);
    assert!(finished.iter().all(|d| d.state == DeliveryState::Delivered));
    assert_eq!(finished[0].handoff, "ho_007", "the oldest went");
    assert!(mem.deliveries.values().all(|d| d.to != "ps_1"), "push keeps none");
    let IndexAnswer::Deliveries { deliveries, dropped } =
        run(&mut index, &mut mem, Ask::Deliveries { id: "wh_1".into() }, now).answer
    else {
        panic!()
    };
    assert_eq!((deliveries.len(), deliveries[0].handoff.as_str(), dropped), (WEBHOOK_DELIVERIES_KEPT, "ho_056", 0));
}

#[test]
fn a_failure_is_retried_a_gone_subscription_ends_with_its_messages_and_an_expired_push_ends_unsent() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    let plans = alarm_and_answer(&mut index, &mut mem, T0, Some(503));
    assert_eq!(plans[0].send.len(), 2);
    assert!(mem.pending().all(|(_, d)| d.attempts == 1 && d.last_status == Some(503) && d.next_attempt_at > Some(T0)));
    // The push service says the subscription is gone.
    let due = mem.pending().filter_map(|(_, d)| d.next_attempt_at).max().unwrap_or(T0);
    let plans = alarm_and_answer(&mut index, &mut mem, due, Some(410));
    assert_eq!(plans[0].send.len(), 2);
    assert!(mem.receivers.iter().all(|e| e.id != "ps_1"), "gone");
    assert!(mem.deliveries.values().all(|d| d.to != "ps_1"));
    // A push message whose attempt never ended, found past its TTL: failed unsent, and not kept.
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_2", &[Notice::Done], T0)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_b", 1, Status::Done), passed: vec![], incarnation: 0 }, T0);
    let late = T0 + PUSH_RETRY_WINDOW_MS + 1;
    let alarm = run(&mut index, &mut mem, Ask::Alarm, late);
    assert!(alarm.send.iter().all(|(seq, _)| mem.deliveries[seq].receiver == Receiver::Webhook), "{alarm:?}");
    assert!(mem.deliveries.values().all(|d| d.to != "ps_2"), "expired, finished, and trimmed to none");
}

#[test]
fn where_push_is_not_configured_pending_push_messages_are_dropped_by_the_alarm() {
    let (mut with, mut mem) = owner(10, true);
    run(&mut with, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut with, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    assert_eq!(mem.pending().count(), 1);
    let mut without = Index::new(bounds(10, false));
    let plan = run(&mut without, &mut mem, Ask::Alarm, T0);
    assert_eq!((plan.send.len(), mem.pending().count()), (0, 0), "{plan:?}");
}

#[test]
fn refused_rows_and_held_deliveries_are_the_test_hooks_and_a_refusal_writes_nothing() {
    let (mut index, mut mem) = owner(10, false);
    assert_eq!(
        run(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on: true }), T0).answer,
        IndexAnswer::Refusing(true)
    );
    let plan = run(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::Running), passed: vec![], incarnation: 0 },
        T0,
    );
    assert!(matches!(&plan.answer, IndexAnswer::Refused(r) if r.code == Code::StoreUnavailable));
    assert!(plan.writes.is_empty() && mem.list.is_empty());
    run(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on: false }), T0);
    run(&mut index, &mut mem, Ask::Hook(IndexHook::HoldDeliveries { on: true }), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 2, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    let held = run(&mut index, &mut mem, Ask::Alarm, T0);
    assert_eq!((held.send.len(), held.alarm_at), (0, Some(T0 + HELD_ALARM_MS)));
    run(&mut index, &mut mem, Ask::Hook(IndexHook::HoldDeliveries { on: false }), T0);
    assert_eq!(run(&mut index, &mut mem, Ask::Alarm, T0).send.len(), 1);
    assert_eq!(run(&mut index, &mut mem, Ask::Hook(IndexHook::Storage), T0).answer, IndexAnswer::StorageBytes(4096));
}

#[test]
fn trimming_keeps_the_newest_whatever_order_they_finish_in() {
    assert_eq!(trim_through(2, &[9, 7], &[8]), Some(7));
    assert_eq!(trim_through(2, &[9], &[3]), None);
    assert_eq!(trim_through(0, &[], &[5]), Some(5));
    assert_eq!(trim_through(1, &[4], &[6, 2]), Some(4));
}

/// One step of an owner's history.
#[derive(Debug, Clone)]
enum Step {
    /// Hand-off `h`'s row `v` delivered, with the rows from `from` it passed.
    Deliver {
        h: usize,
        v: usize,
        from: usize,
    },
    AddWebhook {
        events: u8,
    },
    AddPush {
        events: u8,
    },
    Remove {
        i: usize,
    },
    /// Time moves on this many minutes, then the alarm rings and each send it starts is
    /// answered `status` (`None`: no answer in time; `Some(0)`: the attempt never ends).
    Alarm {
        minutes: i64,
        status: Option<u16>,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let status = prop_oneof![Just(Some(200)), Just(Some(500)), Just(None), Just(Some(410)), Just(Some(0))];
    prop_oneof![
        4 => (0usize..3, 0usize..6, 0usize..6).prop_map(|(h, v, from)| Step::Deliver { h, v, from }),
        1 => (1u8..16).prop_map(|events| Step::AddWebhook { events }),
        1 => (1u8..16).prop_map(|events| Step::AddPush { events }),
        1 => (0usize..6).prop_map(|i| Step::Remove { i }),
        3 => (prop_oneof![0i64..5, 60i64..180, Just(25 * 60)], status).prop_map(|(minutes, status)| Step::Alarm { minutes, status }),
    ]
}

fn events_of(bits: u8) -> Vec<Notice> {
    [Notice::NeedsYou, Notice::Done, Notice::Failed, Notice::Closed]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| n)
        .collect()
}

proptest! {
    /// Over any history of rows arriving late, twice and out of order, receivers coming and
    /// going, and attempts succeeding, failing, timing out, never ending, finding their
    /// subscription gone or outliving their TTL: the list holds each hand-off's newest row;
    /// no notice is owed twice; the pending deliveries stay within the one cap, the oldest
    /// dropped first and each drop counted on its receiver; only the oldest pending delivery
    /// of a receiver and hand-off is ever sent, never an expired push message; and a refusal
    /// writes nothing.
    #[test]
    fn any_owner_history_keeps_the_newest_row_and_every_delivery_owed_within_one_cap(
        statuses in prop::collection::vec(prop_oneof![Just(Status::Running), Just(Status::NeedsYou), Just(Status::Done), Just(Status::Failed)], 18),
        steps in prop::collection::vec(step(), 1..60),
        pending_max in 1usize..6,
        push in any::<bool>(),
    ) {
        let handoffs = ["ho_a", "ho_b", "ho_c"];
        let rows: Vec<Vec<Row>> = (0..3).map(|h| (0..6).map(|v| row(handoffs[h], v as u64 + 1, statuses[h * 6 + v])).collect()).collect();
        let (mut index, mut mem) = owner(pending_max, push);
        let mut now = T0;
        let mut newest: BTreeMap<usize, u64> = BTreeMap::new();
        let mut owed_keys = BTreeSet::new();
        let mut added = 0;
        for step in steps {
            match step {
                Step::Deliver { h, v, from } => {
                    let passed = rows[h][from.min(v)..v].to_vec();
                    let pending_before: Vec<(i64, Stored)> = mem.pending().map(|(s, d)| (*s, d.clone())).collect();
                    let dropped_before: BTreeMap<String, u64> = mem.receivers.iter().map(|e| (e.id.clone(), e.dropped)).collect();
                    let plan = run(&mut index, &mut mem, Ask::Put { row: rows[h][v].clone(), passed, incarnation: 0 }, now);
                    let newer = newest.get(&h).is_none_or(|held| rows[h][v].version > *held);
                    prop_assert_eq!(plan.writes.iter().any(|w| matches!(w, Write::StoreRow(_))), newer);
                    if newer {
                        newest.insert(h, rows[h][v].version);
                    }
                    let owe: Vec<&Write> = plan.writes.iter().filter(|w| matches!(w, Write::Owe { .. })).collect();
                    for w in &owe {
                        if let Write::Owe { key, receiver, .. } = w {
                            prop_assert!(owed_keys.insert(*key), "owed twice");
                            prop_assert!(push || *receiver == Receiver::Webhook);
                        }
                    }
                    // The cap: the stored ones dropped are the oldest, and every drop is counted.
                    let dropped_stored: Vec<i64> = plan.writes.iter().filter_map(|w| if let Write::DropPending { seqs } = w { Some(seqs.clone()) } else { None }).flatten().collect();
                    let oldest: Vec<i64> = pending_before.iter().take(dropped_stored.len()).map(|(s, _)| *s).collect();
                    prop_assert_eq!(&dropped_stored, &oldest);
                    let counted: u64 = mem.receivers.iter().map(|e| e.dropped - dropped_before.get(&e.id).copied().unwrap_or(0)).sum();
                    let unwritten = counted as usize - dropped_stored.len();
                    prop_assert!(unwritten == 0 || dropped_stored.len() == pending_before.len(), "new ones dropped while older ones stay");
                    prop_assert_eq!(mem.pending().count(), (pending_before.len() + owe.len() + unwritten).min(pending_max));
                    for seq in &dropped_stored {
                        let to = &pending_before.iter().find(|(s, _)| s == seq).map(|(_, d)| d.to.clone());
                        prop_assert!(mem.receivers.iter().any(|e| Some(&e.id) == to.as_ref() && e.dropped > dropped_before[&e.id]));
                    }
                }
                Step::AddWebhook { events } | Step::AddPush { events } => {
                    added += 1;
                    let id = format!("r_{added}");
                    let entry = if matches!(step, Step::AddWebhook { .. }) { webhook(&id, &events_of(events), now) } else { subscription(&id, &events_of(events), now) };
                    let kind = entry.receiver();
                    let held = mem.receivers.iter().filter(|e| e.receiver() == kind).count();
                    let cap = if kind == Receiver::Webhook { crate::limits::WEBHOOKS_PER_OWNER_MAX } else { crate::limits::PUSH_SUBSCRIPTIONS_PER_OWNER_MAX };
                    let plan = run(&mut index, &mut mem, Ask::AddReceiver(entry), now);
                    if held < cap {
                        prop_assert!(matches!(plan.answer, IndexAnswer::Created(_)));
                    } else {
                        prop_assert!(matches!(plan.answer, IndexAnswer::Refused(_)) && plan.writes.is_empty(), "past the cap: {:?}", plan);
                    }
                }
                Step::Remove { i } => {
                    let Some(e) = mem.receivers.get(i).cloned() else { continue };
                    let plan = run(&mut index, &mut mem, Ask::RemoveReceiver { receiver: e.receiver(), id: e.id.clone() }, now);
                    prop_assert_eq!(plan.answer, IndexAnswer::Removed);
                    prop_assert!(mem.deliveries.values().all(|d| d.to != e.id));
                }
                Step::Alarm { minutes, status } => {
                    now += minutes * MINUTE_MS;
                    let before = mem.deliveries.clone();
                    let alarm = run(&mut index, &mut mem, Ask::Alarm, now);
                    prop_assert!(alarm.send.len() <= WEBHOOK_SENDS_PER_ALARM_MAX);
                    for (seq, _) in &alarm.send {
                        let d = &before[seq];
                        prop_assert!(d.next_attempt_at.is_some_and(|at| at <= now), "not due");
                        let older = before.iter().any(|(s, o)| s < seq && o.state == DeliveryState::Pending && (o.receiver, &o.to, &o.handoff) == (d.receiver, &d.to, &d.handoff));
                        prop_assert!(!older, "an older delivery of the same receiver and hand-off is pending");
                        prop_assert!(d.receiver != Receiver::Push || (push && now - d.created_at <= PUSH_RETRY_WINDOW_MS), "an expired or unsendable push");
                    }
                    prop_assert!(push || mem.pending().all(|(_, d)| d.receiver == Receiver::Webhook));
                    for (seq, _) in alarm.send {
                        if status == Some(0) {
                            continue;
                        }
                        let Some(d) = mem.deliveries.get(&seq).cloned() else { continue };
                        let outcome = Outcome { seq, receiver: d.receiver, to: d.to, created_at: d.created_at, attempts: d.attempts, status };
                        run(&mut index, &mut mem, Ask::Sent(outcome), now);
                    }
                }
            }
            prop_assert!(mem.pending().count() <= pending_max);
            for e in &mem.receivers {
                let finished = mem.deliveries.values().filter(|d| d.to == e.id && d.state != DeliveryState::Pending).count();
                prop_assert!(finished <= e.receiver().kept_finished());
            }
            prop_assert!(mem.deliveries.values().all(|d| mem.receivers.iter().any(|e| e.id == d.to)), "a delivery outlived its receiver");
        }
        for (h, version) in newest {
            prop_assert_eq!(mem.list[handoffs[h]].0, version);
        }
    }
}

#[test]
fn a_push_message_links_to_its_own_subscriptions_console_and_a_webhook_body_to_none() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    let mut other = subscription("ps_2", &[Notice::NeedsYou], T0 + 2);
    if let Address::Push { console, .. } = &mut other.address {
        *console = "https://other.example".into();
    }
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0 + 1)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(other), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    let consoles: Vec<(&str, &str)> = mem.deliveries.values().map(|d| (d.to.as_str(), d.console.as_str())).collect();
    assert_eq!(consoles, vec![("wh_1", ""), ("ps_1", "https://console.example"), ("ps_2", "https://other.example")]);
}

#[test]
fn each_ask_reads_only_what_it_decides_from_and_a_switch_reads_nothing() {
    let (mut index, mut mem) = owner(10, true);
    for on in [true, false] {
        assert_eq!(
            run_reading(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on }), T0).1,
            vec![],
            "a switch needs no storage"
        );
        assert_eq!(run_reading(&mut index, &mut mem, Ask::Hook(IndexHook::HoldDeliveries { on }), T0).1, vec![]);
    }
    // Refused rows read nothing past the tables; a list with no table reads nothing more.
    run(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on: true }), T0);
    let (refused, reads) = run_reading(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0,
    );
    assert!(matches!(refused.answer, IndexAnswer::Refused(_)));
    assert_eq!(reads, vec![Read::Tables]);
    run(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on: false }), T0);
    let query = ListQuery { state: None, limit: 5, cursor: None };
    assert_eq!(
        run_reading(&mut index, &mut mem, Ask::List { query: query.clone(), if_none_match: None }, T0).1,
        vec![],
        "the tables are known"
    );
    // Without receivers' tables, the alarm reads nothing; held, it reads nothing either.
    assert_eq!(run_reading(&mut index, &mut mem, Ask::Alarm, T0).1, vec![]);
    run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::Hook(IndexHook::HoldDeliveries { on: true }), T0);
    assert_eq!(run_reading(&mut index, &mut mem, Ask::Alarm, T0).1, vec![]);
    run(&mut index, &mut mem, Ask::Hook(IndexHook::HoldDeliveries { on: false }), T0);
    assert_eq!(run_reading(&mut index, &mut mem, Ask::Alarm, T0).1, vec![Read::Pending { limit: 10 }]);
    // A row owing a delivery reads the receivers and the count (no row is held before the
    // list's first), and the oldest pending only when some must go.
    let (_, reads) = run_reading(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_b", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        T0,
    );
    assert_eq!(reads, vec![Read::Receivers { of: vec![Receiver::Webhook, Receiver::Push] }, Read::PendingCount]);
    let (_, reads) = run_reading(
        &mut index,
        &mut mem,
        Ask::Put { row: row("ho_b", 2, Status::Done), passed: vec![], incarnation: 0 },
        T0,
    );
    let no_count =
        vec![Read::Held { id: "ho_b".into() }, Read::Receivers { of: vec![Receiver::Webhook, Receiver::Push] }];
    assert_eq!(reads, no_count, "a notice no receiver is sent owes nothing to count");
    // A listing reads its own kind.
    let (listed, reads) = run_reading(&mut index, &mut mem, Ask::Receivers(Receiver::Push), T0);
    assert_eq!(reads, vec![Read::Receivers { of: vec![Receiver::Push] }]);
    assert!(matches!(listed.answer, IndexAnswer::Receivers { entries, .. } if entries.len() == 1));
    // Refused rows read nothing, whatever the index holds.
    run(&mut index, &mut mem, Ask::Hook(IndexHook::RefuseRows { on: true }), T0);
    assert_eq!(
        run_reading(
            &mut index,
            &mut mem,
            Ask::Put { row: row("ho_b", 3, Status::NeedsYou), passed: vec![], incarnation: 0 },
            T0
        )
        .1,
        vec![]
    );
    // A row with the list in place writes no schema; a failed commit has the tables read again.
    let (mut index, mut mem) = owner(10, true);
    let unreadable = run(&mut index, &mut mem, Ask::Hook(IndexHook::PutUnreadable { id: "ho_z".into() }), T0);
    assert_eq!(unreadable.writes, vec![Write::ListSchema, Write::StoreUnreadable { id: "ho_z".into() }]);
    let again = run(&mut index, &mut mem, Ask::Hook(IndexHook::PutUnreadable { id: "ho_y".into() }), T0);
    assert_eq!(again.writes, vec![Write::StoreUnreadable { id: "ho_y".into() }]);
    index.failed();
    assert_eq!(
        index.next_read(&Ask::Drop { id: "ho_y".into(), incarnation: 0 }, &Feed::default(), T0),
        Some(Read::Tables)
    );
}

#[test]
fn push_subscriptions_have_their_own_cap_beside_the_webhooks() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_0", &[Notice::NeedsYou], T0)), T0);
    for i in 0..crate::limits::PUSH_SUBSCRIPTIONS_PER_OWNER_MAX {
        let plan = run(
            &mut index,
            &mut mem,
            Ask::AddReceiver(subscription(&format!("ps_{i}"), &[Notice::NeedsYou], T0 + i as i64)),
            T0,
        );
        assert!(matches!(plan.answer, IndexAnswer::Created(_)), "{i}");
    }
    let over = run(&mut index, &mut mem, Ask::AddReceiver(subscription("ps_x", &[Notice::NeedsYou], T0)), T0);
    assert!(matches!(&over.answer, IndexAnswer::Refused(r) if r.code == Code::SubscriptionTooMany), "{over:?}");
    assert!(matches!(
        run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::Done], T0)), T0).answer,
        IndexAnswer::Created(_)
    ));
}

#[test]
fn each_drop_is_counted_on_its_own_receiver_among_several_of_one_kind() {
    let (mut index, mut mem) = owner(1, false);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_1", &[Notice::NeedsYou], T0)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_2", &[Notice::NeedsYou], T0 + 1)), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(webhook("wh_3", &[Notice::Done], T0 + 2)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 2, Status::Done), passed: vec![], incarnation: 0 }, T0);
    let dropped: Vec<(&str, u64)> = mem.receivers.iter().map(|e| (e.id.as_str(), e.dropped)).collect();
    assert_eq!(dropped, vec![("wh_1", 1), ("wh_2", 1), ("wh_3", 0)]);
    assert_eq!(mem.pending().map(|(_, d)| d.to.as_str()).collect::<Vec<_>>(), vec!["wh_3"]);
}

/// The reads of `ask`, answered by `answer` (a read it does not answer fails the test), then
/// the plan: for what a store holds that the in-memory one cannot, a name no build of this
/// one writes.
fn run_fed(index: &mut Index, ask: Ask, mut answer: impl FnMut(&Read, &mut Feed)) -> Plan {
    let mut feed = Feed::default();
    while let Some(read) = index.next_read(&ask, &feed, T0) {
        answer(&read, &mut feed);
    }
    index.handle(ask, feed, T0)
}

const BOTH_TABLES: Tables = Tables { list: true, receivers: true, erased: false, devices: false };

#[test]
fn a_pending_delivery_of_an_unknown_kind_counts_against_the_cap_and_is_dropped_oldest_first_counted_on_no_receiver() {
    // Three pending under a cap of two (the cap lowered since): the oldest, of a kind a later
    // build wrote, and a webhook's go before the new one is written.
    let mut index = Index::new(bounds(2, false));
    let plan = run_fed(
        &mut index,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        |read, feed| match read {
            Read::Tables => feed.tables = Some(BOTH_TABLES),
            Read::Held { .. } => feed.held = Some(None),
            Read::Receivers { .. } => feed.receivers = Some(vec![webhook("wh_a", &[Notice::NeedsYou], T0)]),
            Read::PendingCount => feed.pending_count = Some(3),
            Read::OldestPending { limit } => {
                assert_eq!(*limit, 2, "the unknown one is read among the oldest");
                let unknown = PendingRef { seq: 1, receiver: stored::kind("email"), to: "em_1".into() };
                feed.oldest =
                    Some(vec![unknown, PendingRef { seq: 2, receiver: Ok(Receiver::Webhook), to: "wh_b".into() }]);
            }
            other => panic!("not read here: {other:?}"),
        },
    );
    assert!(plan.writes.contains(&Write::DropPending { seqs: vec![1, 2] }), "{:?}", plan.writes);
    let counted: Vec<&Write> = plan.writes.iter().filter(|w| matches!(w, Write::CountDropped { .. })).collect();
    assert_eq!(
        counted,
        [&Write::CountDropped { receiver: Receiver::Webhook, id: "wh_b".into(), n: 1 }],
        "the unknown one is counted on no receiver"
    );
    assert_eq!(
        plan.writes.iter().filter(|w| matches!(w, Write::Owe { .. })).count(),
        1,
        "the new one is written: three, less two, plus one is the cap"
    );
    assert_eq!(plan.log, ["delivery 1 to em_1: a receiver kind this build does not know (\"email\"); dropped by the owner's cap, counted on no receiver"]);
}

#[test]
fn a_pending_delivery_of_an_unknown_kind_at_the_cap_makes_room_for_the_new_one_in_its_turn() {
    let mut index = Index::new(bounds(1, false));
    let plan = run_fed(
        &mut index,
        Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 },
        |read, feed| match read {
            Read::Tables => feed.tables = Some(BOTH_TABLES),
            Read::Held { .. } => feed.held = Some(None),
            Read::Receivers { .. } => feed.receivers = Some(vec![webhook("wh_a", &[Notice::NeedsYou], T0)]),
            Read::PendingCount => feed.pending_count = Some(1),
            Read::OldestPending { .. } => {
                feed.oldest = Some(vec![PendingRef { seq: 7, receiver: stored::kind("email"), to: "em_1".into() }])
            }
            other => panic!("not read here: {other:?}"),
        },
    );
    assert!(
        plan.writes.contains(&Write::DropPending { seqs: vec![7] }),
        "the oldest goes, not the new one: {:?}",
        plan.writes
    );
    assert!(plan.writes.iter().any(|w| matches!(w, Write::Owe { to, .. } if to == "wh_a")));
    assert!(!plan.writes.iter().any(|w| matches!(w, Write::CountDropped { .. })), "{:?}", plan.writes);
    assert_eq!(plan.log.len(), 1, "its drop is logged once");
}

#[test]
fn a_pending_delivery_of_a_kind_this_build_does_not_know_ends_failed_unsent_and_is_logged_naming_the_kind() {
    let mut index = Index::new(bounds(10, false));
    let waiting = |seq, receiver| Waiting {
        seq,
        receiver,
        to: "to_1".into(),
        handoff: "ho_a".into(),
        created_at: T0,
        attempts: 0,
        next_attempt_at: Some(T0),
    };
    let plan = run_fed(&mut index, Ask::Alarm, |read, feed| match read {
        Read::Tables => feed.tables = Some(BOTH_TABLES),
        Read::Pending { .. } => {
            feed.pending = Some(vec![waiting(1, stored::kind("email")), waiting(2, Ok(Receiver::Webhook))])
        }
        other => panic!("not read here: {other:?}"),
    });
    assert!(
        plan.writes.contains(&Write::Finish { seq: 1, state: DeliveryState::Failed, status: None }),
        "{:?}",
        plan.writes
    );
    assert_eq!(plan.send.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [2], "only the known one is sent");
    assert_eq!(plan.log, ["delivery 1 to to_1: a receiver kind this build does not know (\"email\"); it ends failed"]);
}

#[test]
fn a_webhooks_delivery_in_a_state_this_build_does_not_know_makes_its_deliveries_unavailable_rather_than_failed() {
    let mut index = Index::new(bounds(10, false));
    let plan = run_fed(&mut index, Ask::Deliveries { id: "wh_a".into() }, |read, feed| match read {
        Read::Tables => feed.tables = Some(BOTH_TABLES),
        Read::Receivers { .. } => feed.receivers = Some(vec![webhook("wh_a", &[Notice::NeedsYou], T0)]),
        Read::Deliveries { .. } => feed.deliveries = Some(Err(stored::state("expired").expect_err("unknown"))),
        other => panic!("not read here: {other:?}"),
    });
    assert_eq!(
        plan.answer,
        IndexAnswer::Unavailable(
            "a stored delivery to webhook wh_a: a delivery state this build does not know (\"expired\")".into()
        )
    );
    assert!(plan.writes.is_empty());
}

#[test]
fn a_receivers_event_this_build_does_not_know_is_logged_once_in_the_objects_life() {
    let mut index = Index::new(bounds(10, false));
    let ask = || Ask::Receivers(Receiver::Webhook);
    let fed = |read: &Read, feed: &mut Feed| match read {
        Read::Tables => feed.tables = Some(BOTH_TABLES),
        Read::Receivers { .. } => {
            feed.receivers = Some(vec![webhook("wh_a", &[Notice::Done], T0)]);
            let (_, unknown) = stored::events("done,later-event,other-event");
            feed.unknown_events = unknown.into_iter().map(|u| ("wh_a".to_string(), u)).collect();
        }
        other => panic!("not read here: {other:?}"),
    };
    let first = run_fed(&mut index, ask(), fed);
    assert_eq!(first.log, ["receiver wh_a: an event this build does not know (\"later-event\"), never sent here (and 1 more; logged once)"]);
    assert!(
        matches!(&first.answer, IndexAnswer::Receivers { entries, .. } if entries[0].events == [Notice::Done]),
        "listed with the events it knows"
    );
    assert!(run_fed(&mut index, ask(), fed).log.is_empty(), "logged once");
    let mut fresh = Index::new(bounds(10, false));
    assert!(
        run_fed(&mut fresh, ask(), |read, feed| match read {
            Read::Tables => feed.tables = Some(BOTH_TABLES),
            Read::Receivers { .. } => feed.receivers = Some(vec![]),
            other => panic!("not read here: {other:?}"),
        })
        .log
        .is_empty(),
        "nothing unknown, nothing logged"
    );
}

#[test]
#[should_panic(expected = "the driver skipped the read of the list's rows")]
fn a_list_whose_rows_the_driver_skipped_fails_an_assertion_rather_than_answering_an_empty_page() {
    let mut index = Index::new(bounds(10, false));
    let feed = Feed { tables: Some(BOTH_TABLES), ..Feed::default() };
    index.handle(
        Ask::List { query: ListQuery { state: None, limit: 10, cursor: None }, if_none_match: None },
        feed,
        T0,
    );
}

#[test]
#[should_panic(expected = "the driver skipped the read of the receivers")]
fn a_receiver_removed_whose_read_the_driver_skipped_fails_an_assertion_rather_than_answering_not_found() {
    let mut index = Index::new(bounds(10, false));
    let feed = Feed { tables: Some(BOTH_TABLES), ..Feed::default() };
    index.handle(Ask::RemoveReceiver { receiver: Receiver::Webhook, id: "wh_a".into() }, feed, T0);
}

#[test]
fn an_owner_with_no_tables_reads_nothing_and_answers_an_empty_list_and_no_receivers() {
    let mut index = Index::new(bounds(10, false));
    let none = |read: &Read, feed: &mut Feed| match read {
        Read::Tables => feed.tables = Some(Tables::default()),
        other => panic!("no table, nothing read: {other:?}"),
    };
    let page = run_fed(
        &mut index,
        Ask::List { query: ListQuery { state: None, limit: 10, cursor: None }, if_none_match: None },
        none,
    );
    assert!(matches!(&page.answer, IndexAnswer::Page { page, .. } if page.handoffs.is_empty()), "{page:?}");
    let listed = run_fed(&mut index, Ask::Receivers(Receiver::Webhook), none);
    assert!(matches!(&listed.answer, IndexAnswer::Receivers { entries, .. } if entries.is_empty()));
    let gone = run_fed(&mut index, Ask::Deliveries { id: "wh_a".into() }, none);
    assert!(matches!(&gone.answer, IndexAnswer::Refused(r) if r.code == Code::WebhookNotFound));
}

// ---------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------

use crate::limits::{
    DEVICES_PER_OWNER_MAX, DEVICE_IDLE_MS_MAX, DEVICE_LIFE_MS_MAX, DEVICE_SIGN_INS_PERIOD_MS,
    DEVICE_SIGN_INS_PER_PERIOD_MAX,
};
use devices::{Device, Granted, StoredDevice};

fn device_id(n: usize) -> String {
    format!("dv_{n:0>22}")
}

fn granted() -> Granted {
    Granted { access_token: "minted".into(), expires_in: 300, cookie: Some("cookie".into()) }
}

fn signing_in(n: usize, at: EpochMs) -> Ask {
    let device = Device { id: device_id(n), name: format!("phone {n}"), created_at: at, last_seen_at: at };
    Ask::SignIn { device: StoredDevice { device, secret_hash: format!("hash-{n}") }, granted: granted() }
}

fn refreshing(n: usize, hash: &str) -> Ask {
    Ask::Refresh { id: device_id(n), secret_hash: hash.into(), granted: granted() }
}

fn code(plan: &Plan) -> Option<Code> {
    match &plan.answer {
        IndexAnswer::Refused(r) => Some(r.code),
        _ => None,
    }
}

fn listed(index: &mut Index, mem: &mut Mem, now: EpochMs) -> Vec<String> {
    match run(index, mem, Ask::Devices { current: None }, now).answer {
        IndexAnswer::Devices { devices, .. } => devices.into_iter().map(|d| d.id).collect(),
        other => panic!("{other:?}"),
    }
}

fn device_subscription(id: &str, device: Option<String>) -> StoredReceiver {
    let mut s = subscription(id, &[Notice::NeedsYou], T0);
    if let Address::Push { device: d, .. } = &mut s.address {
        *d = device;
    }
    s
}

#[test]
fn a_sign_in_stores_the_device_with_its_hash_only_and_hands_back_what_the_worker_minted() {
    let (mut index, mut mem) = owner(10, true);
    let plan = run(&mut index, &mut mem, signing_in(1, T0), T0);
    let IndexAnswer::SignedIn { device, granted: g } = plan.answer else { panic!("{:?}", plan.answer) };
    assert_eq!((device.id.as_str(), g), (device_id(1).as_str(), granted()));
    assert_eq!(mem.devices.len(), 1);
    assert_eq!(mem.devices[0].secret_hash, "hash-1");
    assert!(!format!("{:?}", plan.writes).contains("minted"), "the access token is never stored: {:?}", plan.writes);
}

#[test]
fn a_refresh_holds_only_with_the_devices_own_hash_while_it_lasts_and_otherwise_is_auth_revoked() {
    let (mut index, mut mem) = owner(10, true);
    assert_eq!(code(&run(&mut index, &mut mem, refreshing(1, "hash-1"), T0)), Some(Code::AuthRevoked), "no devices");
    run(&mut index, &mut mem, signing_in(1, T0), T0);
    let fresh = run(&mut index, &mut mem, refreshing(1, "hash-1"), T0 + 5);
    assert!(
        matches!(&fresh.answer, IndexAnswer::Refreshed { device, .. } if device.last_seen_at == T0 + 5),
        "{fresh:?}"
    );
    assert_eq!(mem.devices[0].device.last_seen_at, T0 + 5, "a refresh marks it seen");
    for (what, ask) in [("another hash", refreshing(1, "hash-2")), ("another device", refreshing(2, "hash-1"))] {
        let refused = run(&mut index, &mut mem, ask, T0 + 6);
        assert_eq!((code(&refused), refused.writes.len()), (Some(Code::AuthRevoked), 0), "{what}");
    }
}

#[test]
fn a_sign_in_ends_after_its_idle_time_or_its_whole_life_whichever_comes_first() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, signing_in(1, T0), T0);
    let idle_end = T0 + DEVICE_IDLE_MS_MAX;
    assert!(matches!(
        run(&mut index, &mut mem, refreshing(1, "hash-1"), idle_end - 1).answer,
        IndexAnswer::Refreshed { .. }
    ));
    // Refreshed just in time, again and again: it still ends at its whole life.
    let mut at = idle_end - 1;
    while at + DEVICE_IDLE_MS_MAX - 1 < T0 + DEVICE_LIFE_MS_MAX {
        at += DEVICE_IDLE_MS_MAX - 1;
        assert!(matches!(run(&mut index, &mut mem, refreshing(1, "hash-1"), at).answer, IndexAnswer::Refreshed { .. }));
    }
    assert_eq!(
        code(&run(&mut index, &mut mem, refreshing(1, "hash-1"), T0 + DEVICE_LIFE_MS_MAX)),
        Some(Code::AuthRevoked)
    );
    assert_eq!(
        listed(&mut index, &mut mem, T0 + DEVICE_LIFE_MS_MAX),
        Vec::<String>::new(),
        "an ended device is not listed"
    );

    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, signing_in(1, T0), T0);
    assert_eq!(
        code(&run(&mut index, &mut mem, refreshing(1, "hash-1"), T0 + DEVICE_IDLE_MS_MAX)),
        Some(Code::AuthRevoked),
        "unused for its idle time"
    );
}

#[test]
fn devices_per_owner_and_sign_ins_per_minute_are_bounded_and_an_ended_device_makes_room() {
    let (mut index, mut mem) = owner(10, true);
    let mut n = 0;
    let mut at = T0;
    while mem.devices.len() < DEVICES_PER_OWNER_MAX {
        for _ in 0..DEVICE_SIGN_INS_PER_PERIOD_MAX {
            if mem.devices.len() < DEVICES_PER_OWNER_MAX {
                n += 1;
                assert!(matches!(
                    run(&mut index, &mut mem, signing_in(n, at), at).answer,
                    IndexAnswer::SignedIn { .. }
                ));
            }
        }
        if mem.devices.len() < DEVICES_PER_OWNER_MAX {
            let over = run(&mut index, &mut mem, signing_in(999, at), at);
            assert_eq!((code(&over), over.writes.len()), (Some(Code::DeviceRateLimited), 0));
        }
        at += DEVICE_SIGN_INS_PERIOD_MS;
    }
    assert!(mem.sign_ins.len() <= DEVICE_SIGN_INS_PER_PERIOD_MAX, "the sign-ins kept are the period's only");
    let full = run(&mut index, &mut mem, signing_in(1000, at), at);
    assert_eq!((code(&full), full.writes.len()), (Some(Code::DeviceTooMany), 0));
    // The first devices go unused past their idle time: they end, and make room.
    for k in n - 2..=n {
        run(&mut index, &mut mem, refreshing(k, &format!("hash-{k}")), at);
    }
    let later = T0 + DEVICE_SIGN_INS_PERIOD_MS + DEVICE_IDLE_MS_MAX;
    let plan = run(&mut index, &mut mem, signing_in(1001, later), later);
    assert!(matches!(plan.answer, IndexAnswer::SignedIn { .. }), "{:?}", plan.answer);
    assert_eq!(mem.devices.len(), 4, "the ended devices were removed with the sign-in");
}

#[test]
fn a_revoke_removes_the_device_and_the_push_subscriptions_made_from_it_and_no_other() {
    let (mut index, mut mem) = owner(10, true);
    for k in 1..=3 {
        run(&mut index, &mut mem, signing_in(k, T0), T0);
    }
    run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_1", Some(device_id(1)))), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_2", Some(device_id(2)))), T0);
    run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_0", None)), T0);
    run(&mut index, &mut mem, Ask::Put { row: row("ho_a", 1, Status::NeedsYou), passed: vec![], incarnation: 0 }, T0);
    assert_eq!(mem.deliveries.len(), 3);
    assert!(matches!(
        run(&mut index, &mut mem, Ask::RevokeDevice { id: device_id(1) }, T0).answer,
        IndexAnswer::Removed
    ));
    let subs: Vec<&str> = mem.receivers.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(subs, ["ps_2", "ps_0"]);
    assert!(mem.deliveries.values().all(|d| d.to != "ps_1"), "its messages go with it");
    assert_eq!(code(&run(&mut index, &mut mem, refreshing(1, "hash-1"), T0)), Some(Code::AuthRevoked));
    assert_eq!(
        code(&run(&mut index, &mut mem, Ask::RevokeDevice { id: device_id(1) }, T0)),
        Some(Code::DeviceNotFound)
    );

    // Revoke-all keeping the current one; then all: subscriptions made before devices stay.
    let kept = run(&mut index, &mut mem, Ask::RevokeAll { keep: Some(device_id(3)) }, T0);
    assert_eq!(kept.answer, IndexAnswer::RevokedAll(1));
    assert_eq!(listed(&mut index, &mut mem, T0), [device_id(3)]);
    assert_eq!(run(&mut index, &mut mem, Ask::RevokeAll { keep: None }, T0).answer, IndexAnswer::RevokedAll(1));
    assert_eq!(mem.receivers.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["ps_0"]);
}

#[test]
fn a_subscription_from_a_device_signed_out_is_refused_and_one_from_no_device_is_taken() {
    let (mut index, mut mem) = owner(10, true);
    let gone = run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_1", Some(device_id(1)))), T0);
    assert_eq!((code(&gone), gone.writes.len()), (Some(Code::AuthRevoked), 0), "no devices yet");
    run(&mut index, &mut mem, signing_in(1, T0), T0);
    assert!(matches!(
        run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_1", Some(device_id(1)))), T0).answer,
        IndexAnswer::Created(_)
    ));
    run(&mut index, &mut mem, Ask::RevokeDevice { id: device_id(1) }, T0);
    assert_eq!(
        code(&run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_2", Some(device_id(1)))), T0)),
        Some(Code::AuthRevoked)
    );
    assert!(matches!(
        run(&mut index, &mut mem, Ask::AddReceiver(device_subscription("ps_3", None)), T0).answer,
        IndexAnswer::Created(_)
    ));
}

#[test]
fn a_rename_names_a_lasting_device_and_marks_the_current_one() {
    let (mut index, mut mem) = owner(10, true);
    run(&mut index, &mut mem, signing_in(1, T0), T0);
    let rename = |id: String| Ask::RenameDevice { id, name: "desk".into(), current: Some(device_id(1)) };
    let plan = run(&mut index, &mut mem, rename(device_id(1)), T0);
    assert!(matches!(&plan.answer, IndexAnswer::Device { device, current: true } if device.name == "desk"), "{plan:?}");
    assert_eq!(mem.devices[0].device.name, "desk");
    assert_eq!(code(&run(&mut index, &mut mem, rename(device_id(2)), T0)), Some(Code::DeviceNotFound));
}

#[test]
fn an_owner_who_never_signed_a_device_in_reads_no_devices_table() {
    let (mut index, mut mem) = owner(10, true);
    for ask in [Ask::Devices { current: None }, Ask::RevokeAll { keep: None }, refreshing(1, "h")] {
        let (plan, reads) = run_reading(&mut index, &mut mem, ask, T0);
        assert!(plan.writes.is_empty(), "{plan:?}");
        assert!(!reads.contains(&Read::Devices), "{reads:?}");
    }
}
