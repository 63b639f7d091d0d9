//! The owner's index as a value that performs no I/O, in the decider's shape: one owner's list
//! and the notifications it owes. The `OwnerIndex` Durable Object (`src/owner_index.rs`) drives
//! it as the hand-off object drives its [`Decider`](crate::decider::Decider):
//! 1. it asks [`Index::next_read`] what to read for the ask, reads it from SQLite into the
//!    ask's [`Feed`], until nothing more is needed;
//! 2. it calls [`Index::handle`] with the time, which answers a [`Plan`]: the answer, the typed
//!    writes to run in one transaction, the alarm, and the deliveries to start;
//! 3. it writes, sets the alarm, starts each delivery, and hands each attempt's outcome back as
//!    [`Ask::Sent`] ([`Index::on_sent`]); the alarm is [`Ask::Alarm`] ([`Index::poll_send`]).
//!
//! Every rule of the index is decided here or in the modules below: newest-wins and the
//! notices owed ([`list::put`]), the open cap and retention, paging, one cap over every
//! receiver's pending deliveries (which go, and on whom each drop is counted), the lease and
//! what an answer leads to ([`receiver`]), what one alarm sends ([`sending::round`]) and the
//! trim of finished deliveries. The object's store only turns reads and writes into SQL.
//!
//! Invariants (property-tested in `owner/tests.rs`):
//! - a refusal writes nothing;
//! - a row is stored only when newer than the one held, and each notice is owed once;
//! - the pending deliveries never exceed the owner's cap, and every one dropped is counted on
//!   its receiver;
//! - a receiver keeps at most [`Receiver::kept_finished`] finished deliveries.

pub mod devices;
pub mod list;
pub mod receiver;
pub mod sending;
pub mod stored;

use crate::error::{Code, Refusal};
use crate::hooks::IndexHook;
use crate::limits::{ERASED_KEPT_MS, ERASED_KEPT_PER_OWNER_MAX};
use crate::notice::{self, Notice};
use crate::retention::Retention;
use crate::rows::{admit_open, Admission, Cursor, ListQuery, Page, Row};
use crate::time::EpochMs;
use crate::turn::State;
use devices::{Device, Granted, StoredDevice};
use receiver::{DeliveryState, Lease, Next, Receiver, Subscriber};
use sending::Pending;
use std::cell::OnceCell;
use stored::Unknown;

/// How long a test that holds deliveries has the alarm wait before it looks again.
pub const HELD_ALARM_MS: i64 = 1_000;

// ---------------------------------------------------------------------------------------
// What comes in
// ---------------------------------------------------------------------------------------

/// What bounds one owner's index, read from the environment once per object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// At most this many open rows (`OPEN_HANDOFFS_PER_OWNER_MAX` unless a test lowers it).
    pub open_cap: usize,
    /// Closed rows are kept only within retention of their close.
    pub retention: Retention,
    /// At most this many pending deliveries over all receivers of both kinds.
    pub pending_max: usize,
    /// Whether Web Push is configured: without it no push message is owed or kept.
    pub push: bool,
}

/// Where a receiver is reached: a webhook's URL and signing secret, or a push subscription's
/// endpoint and keys (and the console its messages link to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Webhook {
        url: String,
        secret: String,
    },
    /// `device`: the signed-in device it was made from, which takes it along when it goes
    /// (none for a subscription made with a bearer token, or before devices).
    Push {
        endpoint: String,
        origin: String,
        p256dh: String,
        auth: String,
        console: String,
        device: Option<String>,
    },
}

impl Address {
    pub fn receiver(&self) -> Receiver {
        match self {
            Address::Webhook { .. } => Receiver::Webhook,
            Address::Push { .. } => Receiver::Push,
        }
    }

    /// The console a push message links to (empty for a webhook).
    fn console(&self) -> &str {
        match self {
            Address::Push { console, .. } => console,
            Address::Webhook { .. } => "",
        }
    }
}

/// One receiver as stored: the events it is sent, and how many of its pending deliveries the
/// owner's cap dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReceiver {
    pub id: String,
    pub events: Vec<Notice>,
    pub created_at: EpochMs,
    pub dropped: u64,
    pub address: Address,
}

impl StoredReceiver {
    pub fn receiver(&self) -> Receiver {
        self.address.receiver()
    }
}

/// The outcome of one attempt, as the driver hands it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub seq: i64,
    pub receiver: Receiver,
    pub to: String,
    pub created_at: EpochMs,
    /// The attempt's number, from its lease.
    pub attempts: u32,
    /// The receiver's status; `None` when none came in time, or the attempt could not be made.
    pub status: Option<u16>,
}

/// What the index is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// A hand-off's row, and the older rows it passed (notices are owed along the chain), sent
    /// by the life `incarnation` of the hand-off (its record's).
    Put {
        row: Row,
        passed: Vec<Row>,
        incarnation: u64,
    },
    /// A new hand-off's first row, admitted against the open cap.
    Open {
        row: Row,
    },
    /// The life `incarnation` of the hand-off was erased: its row and every delivery of it go,
    /// and a row of that life sent later is not taken.
    Drop {
        id: String,
        incarnation: u64,
    },
    List {
        query: ListQuery,
        if_none_match: Option<String>,
    },
    /// A new receiver, within its kind's cap.
    AddReceiver(StoredReceiver),
    /// The receivers of one kind.
    Receivers(Receiver),
    /// A receiver and every delivery to it.
    RemoveReceiver {
        receiver: Receiver,
        id: String,
    },
    /// A webhook's newest deliveries.
    Deliveries {
        id: String,
    },
    /// The alarm: what is due is sent ([`Index::poll_send`]).
    Alarm,
    /// An attempt ended ([`Index::on_sent`]).
    Sent(Outcome),
    /// A device signs in: stored (its credential's hash only) if it fits, and `granted`
    /// handed back.
    SignIn {
        device: StoredDevice,
        granted: Granted,
    },
    /// A device's credential, for a fresh access token (`granted`, handed back if it holds).
    Refresh {
        id: String,
        secret_hash: String,
        granted: Granted,
    },
    /// The devices, `current` the one the caller's token came from.
    Devices {
        current: Option<String>,
    },
    RenameDevice {
        id: String,
        name: String,
        current: Option<String>,
    },
    /// A device and every push subscription made from it.
    RevokeDevice {
        id: String,
    },
    /// Every device but `keep`, and their push subscriptions.
    RevokeAll {
        keep: Option<String>,
    },
    /// Test hooks (`crate::hooks`).
    Hook(IndexHook),
}

// ---------------------------------------------------------------------------------------
// What the object reads for the index
// ---------------------------------------------------------------------------------------

/// Which of the index's tables exist (an owner with no hand-off and no receiver has none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tables {
    pub list: bool,
    pub receivers: bool,
    /// The erased lives' table ([`Write::Erased`]).
    pub erased: bool,
    /// The devices' and their sign-ins' tables ([`Write::DeviceSchema`]).
    pub devices: bool,
}

/// One read the index needs before it can decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Which tables exist ([`Feed::tables`]).
    Tables,
    /// The row held under `id`: its version and its text ([`Feed::held`]).
    Held { id: String },
    /// Every receiver of these kinds, oldest first ([`Feed::receivers`]).
    Receivers { of: Vec<Receiver> },
    /// How many deliveries are pending ([`Feed::pending_count`]).
    PendingCount,
    /// The `limit` oldest pending deliveries ([`Feed::oldest`]).
    OldestPending { limit: usize },
    /// How many open rows there are besides `except` ([`Feed::open`]).
    OpenCount { except: String },
    /// Up to `limit` rows' texts in newest-first order (`updated_at`, then `id`, descending),
    /// of `state` where given, strictly after `after` where given ([`Feed::rows`]).
    Rows { state: Option<State>, after: Option<Cursor>, limit: usize },
    /// Up to `limit` deliveries to webhook `id`, newest first ([`Feed::deliveries`]).
    Deliveries { id: String, limit: usize },
    /// Every pending delivery, oldest first, at most `limit` ([`Feed::pending`]).
    Pending { limit: usize },
    /// The `limit` newest finished deliveries' `seq`s to receiver `to`, newest first
    /// ([`Feed::finished`]).
    Finished { to: String, limit: usize },
    /// The database's size ([`Feed::storage_bytes`]).
    StorageBytes,
    /// The newest erased life of hand-off `id`, if one is kept ([`Feed::erased`]).
    Erased { id: String },
    /// What is stored of hand-off `id` ([`Feed::storage_of`]).
    StorageOf { id: String },
    /// Every device, oldest first ([`Feed::devices`]).
    Devices,
    /// How many sign-ins were made at or after `since` ([`Feed::sign_ins`]).
    SignIns { since: EpochMs },
}

/// What the index stores of one hand-off, for the test hook that shows it: its row, its
/// deliveries (their state and the bytes of their body) and its erased life.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HandoffFacts {
    pub rows: u64,
    pub deliveries: Vec<DeliveryFacts>,
    pub erased: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeliveryFacts {
    pub state: String,
    pub body_bytes: u64,
}

/// The row held for a hand-off as stored: its version column and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRow {
    pub version: u64,
    pub text: String,
}

/// A pending delivery as the index reads it (`receiver`: an error for a kind this build does
/// not know, which ends failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub seq: i64,
    pub receiver: Result<Receiver, Unknown>,
    pub to: String,
    pub handoff: String,
    pub created_at: EpochMs,
    pub attempts: u32,
    /// `None`: a row not scheduled (it is never sent).
    pub next_attempt_at: Option<EpochMs>,
}

/// A pending delivery's place: enough to drop it and count the drop (`receiver`: an error for
/// a kind this build does not know, which the cap drops like any other, counted on no receiver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRef {
    pub seq: i64,
    pub receiver: Result<Receiver, Unknown>,
    pub to: String,
}

/// The reads of one ask, as the object made them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Feed {
    pub tables: Option<Tables>,
    /// `Some` once read: the row held, if any.
    pub held: Option<Option<HeldRow>>,
    pub receivers: Option<Vec<StoredReceiver>>,
    /// The event names of the receivers read that this build does not know, with the
    /// receiver's id: never sent, and logged once per object.
    pub unknown_events: Vec<(String, Unknown)>,
    pub pending_count: Option<usize>,
    pub oldest: Option<Vec<PendingRef>>,
    pub open: Option<u64>,
    pub rows: Option<Vec<String>>,
    /// An error where a delivery's state is one this build does not know.
    pub deliveries: Option<Result<Vec<receiver::Delivery>, Unknown>>,
    pub pending: Option<Vec<Waiting>>,
    /// Per receiver read: its newest finished deliveries' `seq`s.
    pub finished: Vec<(String, Vec<i64>)>,
    pub storage_bytes: Option<u64>,
    /// `Some` once read: the erased life kept for the row's hand-off, if any.
    pub erased: Option<Option<u64>>,
    pub storage_of: Option<HandoffFacts>,
    pub devices: Option<Vec<StoredDevice>>,
    pub sign_ins: Option<usize>,
    /// What the index derived from the reads, kept so that neither the next read nor the
    /// decision derives it again.
    derived: Derived,
}

/// Derived once per ask: the row held, parsed (where it can owe a notice); how many deliveries
/// a row owes; the alarm's round at the ask's time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Derived {
    held_row: OnceCell<Option<Row>>,
    owed: OnceCell<usize>,
    round: OnceCell<(EpochMs, sending::Round)>,
}

impl Feed {
    fn finished_of(&self, to: &str) -> Option<&[i64]> {
        self.finished.iter().find(|(id, _)| id == to).map(|(_, seqs)| seqs.as_slice())
    }
}

// ---------------------------------------------------------------------------------------
// What goes out
// ---------------------------------------------------------------------------------------

/// One write of a plan; the object's store turns each into its SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// The list's table, before its first row.
    ListSchema,
    /// The receivers' and the deliveries' tables, before the first receiver.
    ReceiverSchema,
    /// `row` under its id, in place of any row held.
    StoreRow(Row),
    /// Test hook: a row under `id` that no build can read, newest of all.
    StoreUnreadable {
        id: String,
    },
    DeleteRow {
        id: String,
    },
    /// Deletes the closed rows last changed before `before` (past retention).
    DropClosedBefore {
        before: EpochMs,
    },
    /// Deletes every delivery of hand-off `handoff`, pending or finished.
    DropDeliveriesOf {
        handoff: String,
    },
    /// The erased lives' table, before its first entry.
    ErasedSchema,
    /// Life `incarnation` of hand-off `id` was erased at `at` (a later life's entry is kept
    /// where one is held).
    Erased {
        id: String,
        incarnation: u64,
        at: EpochMs,
    },
    /// Deletes the erased lives kept since before `before`, and all but the `keep` newest.
    TrimErased {
        before: EpochMs,
        keep: usize,
    },
    AddReceiver(StoredReceiver),
    /// Deletes the receiver and every delivery to it.
    RemoveReceiver {
        receiver: Receiver,
        id: String,
    },
    /// A pending delivery of `notice` for `row` to receiver `to`, due at once; `key` makes its
    /// message id, the same for a row delivered twice (the second is ignored); `console` is
    /// where a push message links to.
    Owe {
        receiver: Receiver,
        to: String,
        row: Row,
        notice: Notice,
        key: [u8; 16],
        at: EpochMs,
        console: String,
    },
    /// Deletes these pending deliveries.
    DropPending {
        seqs: Vec<i64>,
    },
    /// Raises receiver `id`'s count of deliveries dropped by `n`.
    CountDropped {
        receiver: Receiver,
        id: String,
        n: u64,
    },
    /// An attempt starts at `at`: its number, and when it is tried again if it never ends.
    Lease {
        seq: i64,
        lease: Lease,
        at: EpochMs,
    },
    /// The attempt was not taken: its status, and when it is tried again.
    Retry {
        seq: i64,
        status: Option<u16>,
        at: EpochMs,
    },
    /// The delivery finished: delivered or failed. It keeps no body: what it said is gone
    /// once it is sent or given up.
    Finish {
        seq: i64,
        state: DeliveryState,
        status: Option<u16>,
    },
    /// Deletes receiver `to`'s finished deliveries up to `seq` `through`.
    TrimFinished {
        to: String,
        through: i64,
    },
    /// The devices' and their sign-ins' tables, before the first sign-in.
    DeviceSchema,
    AddDevice(StoredDevice),
    /// A sign-in was made at `at` (counted against the sign-ins per period).
    SignedIn {
        at: EpochMs,
    },
    /// Deletes the sign-ins made before `before`, which count no more.
    TrimSignIns {
        before: EpochMs,
    },
    /// Device `id` refreshed at `at`.
    SeenDevice {
        id: String,
        at: EpochMs,
    },
    RenameDevice {
        id: String,
        name: String,
    },
    /// Deletes device `id`, and (where the receivers' tables exist, `subscriptions`) every push
    /// subscription made from it and every delivery to those.
    RemoveDevice {
        id: String,
        subscriptions: bool,
    },
}

/// What the index answers; the api's wire renders it (`handoff_api::wire::index`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexAnswer {
    /// A row taken (stored, or older than the one held), a row dropped, an alarm or an
    /// outcome handled.
    Done,
    Page {
        page: Page,
        if_none_match: Option<String>,
    },
    Admission(Admission),
    Created(StoredReceiver),
    Receivers {
        of: Receiver,
        entries: Vec<StoredReceiver>,
    },
    Deliveries {
        deliveries: Vec<receiver::Delivery>,
        dropped: u64,
    },
    /// A receiver removed.
    Removed,
    Refused(Refusal),
    /// What is stored cannot be read: the one 503, its cause for the log.
    Unavailable(String),
    Refusing(bool),
    Holding(bool),
    /// A device signed in (201), or refreshed (200): the device, and what the Worker minted.
    SignedIn {
        device: Device,
        granted: Granted,
    },
    Refreshed {
        device: Device,
        granted: Granted,
    },
    Devices {
        devices: Vec<Device>,
        current: Option<String>,
    },
    /// A device renamed.
    Device {
        device: Device,
        current: bool,
    },
    /// How many devices a revoke-all removed.
    RevokedAll(u64),
    StorageBytes(u64),
    StorageOf(HandoffFacts),
}

/// Everything one ask causes, decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub answer: IndexAnswer,
    /// Run in order in one transaction: all of them or none.
    pub writes: Vec<Write>,
    /// After the commit: the alarm (at once, when deliveries were owed or an attempt ended).
    pub alarm_at: Option<EpochMs>,
    /// After the commit: start these deliveries (by `seq`), each on its own, under its lease.
    pub send: Vec<(i64, Lease)>,
    /// For the log: what the plan ended or dropped that nobody is answered about.
    pub log: Vec<String>,
}

impl Plan {
    fn answer(answer: IndexAnswer) -> Plan {
        Plan { answer, writes: Vec::new(), alarm_at: None, send: Vec::new(), log: Vec::new() }
    }

    fn refused(code: Code, message: &str) -> Plan {
        Plan::answer(IndexAnswer::Refused(Refusal::new(code, message)))
    }
}

// ---------------------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------------------

/// One owner's index: its bounds, which of its tables exist, and the test hooks' switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    bounds: Bounds,
    /// Known once read, and kept as the plans write them (forgotten on a failed commit).
    tables: Option<Tables>,
    refusing: bool,
    holding: bool,
    /// Whether a receiver's event this build does not know was logged: once per object.
    told_unknown_events: bool,
}

fn not_found(receiver: Receiver) -> Plan {
    match receiver {
        Receiver::Webhook => Plan::refused(Code::WebhookNotFound, "no such webhook"),
        Receiver::Push => Plan::refused(Code::SubscriptionNotFound, "no such push subscription"),
    }
}

impl Index {
    pub fn new(bounds: Bounds) -> Index {
        Index { bounds, tables: None, refusing: false, holding: false, told_unknown_events: false }
    }

    /// A commit failed: what the index believed of its tables may be wrong.
    pub fn failed(&mut self) {
        self.tables = None;
    }

    /// The kinds of receiver notices go to: push only where it is configured.
    fn notified(&self) -> Vec<Receiver> {
        Receiver::ALL.into_iter().filter(|r| *r == Receiver::Webhook || self.bounds.push).collect()
    }

    /// The next read `ask` needs at `now`, given what `feed` holds; `None` once
    /// [`Index::handle`] can decide.
    #[allow(clippy::too_many_lines, reason = "one arm per ask of the owner's index: the table of what each reads")]
    pub fn next_read(&self, ask: &Ask, feed: &Feed, now: EpochMs) -> Option<Read> {
        match ask {
            Ask::Hook(IndexHook::RefuseRows { .. } | IndexHook::HoldDeliveries { .. }) => return None,
            Ask::Hook(IndexHook::Storage) => return feed.storage_bytes.is_none().then_some(Read::StorageBytes),
            Ask::Hook(IndexHook::StorageOf { id }) => {
                return feed.storage_of.is_none().then(|| Read::StorageOf { id: id.clone() })
            }
            _ => {}
        }
        let Some(tables) = self.tables.or(feed.tables) else {
            return Some(Read::Tables);
        };
        match ask {
            Ask::Put { row, passed, incarnation } if !self.refusing => {
                if tables.erased && feed.erased.is_none() {
                    return Some(Read::Erased { id: row.id.clone() });
                }
                if is_erased(feed, *incarnation) {
                    return None;
                }
                if tables.list && feed.held.is_none() {
                    return Some(Read::Held { id: row.id.clone() });
                }
                let put = list::put(held(feed, readable_held(tables, feed)), passed, row, tables.receivers);
                if put.notices.is_empty() {
                    return None;
                }
                let Some(receivers) = &feed.receivers else {
                    return Some(Read::Receivers { of: self.notified() });
                };
                let owed =
                    *feed.derived.owed.get_or_init(|| receiver::owed(&put.notices, &subscribers(receivers)).len());
                self.cap_read(owed, feed)
            }
            Ask::Open { row } if tables.list && feed.open.is_none() => Some(Read::OpenCount { except: row.id.clone() }),
            Ask::List { query, .. } if tables.list && feed.rows.is_none() => {
                Some(Read::Rows { state: query.state, after: query.cursor.clone(), limit: query.limit as usize + 1 })
            }
            Ask::AddReceiver(_) | Ask::Receivers(_) | Ask::RemoveReceiver { .. } | Ask::Deliveries { .. }
                if tables.receivers && feed.receivers.is_none() =>
            {
                let of = match ask {
                    Ask::AddReceiver(entry) => entry.receiver(),
                    Ask::Receivers(of) => *of,
                    Ask::RemoveReceiver { receiver, .. } => *receiver,
                    _ => Receiver::Webhook,
                };
                Some(Read::Receivers { of: vec![of] })
            }
            Ask::SignIn { .. } if tables.devices && feed.devices.is_none() => Some(Read::Devices),
            Ask::SignIn { .. } if tables.devices && feed.sign_ins.is_none() => {
                Some(Read::SignIns { since: devices::sign_ins_since(now) })
            }
            Ask::Refresh { .. }
            | Ask::Devices { .. }
            | Ask::RenameDevice { .. }
            | Ask::RevokeDevice { .. }
            | Ask::RevokeAll { .. }
                if tables.devices && feed.devices.is_none() =>
            {
                Some(Read::Devices)
            }
            // A subscription made from a device is taken only while the device lasts.
            Ask::AddReceiver(StoredReceiver { address: Address::Push { device: Some(_), .. }, .. })
                if tables.devices && feed.devices.is_none() =>
            {
                Some(Read::Devices)
            }
            Ask::Deliveries { id } if tables.receivers && feed.deliveries.is_none() => {
                let held = feed.receivers.iter().flatten().any(|e| e.id == *id);
                held.then(|| Read::Deliveries { id: id.clone(), limit: Receiver::Webhook.kept_finished() })
            }
            Ask::Alarm if tables.receivers && !self.holding => {
                let Some(pending) = &feed.pending else {
                    return Some(Read::Pending { limit: self.bounds.pending_max });
                };
                let round = self.round(feed, pending, now);
                let mut expired = pending.iter().filter(|w| round.expire.contains(&w.seq));
                expired
                    .find_map(|w| {
                        Some((w.receiver.as_ref().ok().copied()?, &w.to))
                            .filter(|(_, to)| feed.finished_of(to).is_none())
                    })
                    .map(finished_read)
            }
            // An attempt was of a delivery, so its tables exist.
            Ask::Sent(o) => {
                let finishes = matches!(
                    o.receiver.after_attempt(o.created_at, o.attempts, o.status, now),
                    Next::Delivered | Next::Failed
                );
                (finishes && feed.finished_of(&o.to).is_none()).then(|| finished_read((o.receiver, &o.to)))
            }
            _ => None,
        }
    }

    /// The reads the owner's cap needs once `owed` deliveries are to be written.
    fn cap_read(&self, owed: usize, feed: &Feed) -> Option<Read> {
        if owed == 0 {
            return None;
        }
        let Some(pending) = feed.pending_count else {
            return Some(Read::PendingCount);
        };
        let from_stored = receiver::over_cap(pending + owed, self.bounds.pending_max).min(pending);
        (from_stored > 0 && feed.oldest.is_none()).then_some(Read::OldestPending { limit: from_stored })
    }

    /// Decides what `ask` does, with every read [`Index::next_read`] asked for in `feed`; a
    /// read it asked for and the driver skipped is a programmer's mistake, never an empty one.
    #[allow(clippy::too_many_lines, reason = "one arm per ask of the owner's index: the table of what each decides")]
    pub fn handle(&mut self, ask: Ask, mut feed: Feed, now: EpochMs) -> Plan {
        let known = self.tables.or(feed.tables);
        let tables = known.unwrap_or_default();
        let told = self.tell_unknown_events(&feed.unknown_events);
        // The receivers' reads are made where their tables exist; an owner with none has none.
        let receivers =
            |feed: &mut Feed| if tables.receivers { made(feed.receivers.take(), "the receivers") } else { Vec::new() };
        let mut plan = match ask {
            Ask::Put { row, passed, incarnation } => self.put(tables, row, passed, incarnation, &feed, now),
            Ask::Open { row } => self.open(tables, row, &feed, now),
            Ask::Drop { id, incarnation } => drop_erased(tables, id, incarnation, now),
            Ask::List { query, if_none_match } => {
                let texts = if tables.list { made(feed.rows, "the list's rows") } else { Vec::new() };
                list_page(&query, if_none_match, texts)
            }
            Ask::AddReceiver(entry) => match device_gone(tables, &entry, &feed, now) {
                Some(refused) => refused,
                None => add_receiver(tables, entry, receivers(&mut feed)),
            },
            Ask::SignIn { device, granted } => sign_in(tables, device, granted, &feed, now),
            Ask::Refresh { id, secret_hash, granted } => {
                let held = stored_devices(tables, &feed);
                match devices::refresh(held.iter().find(|d| d.device.id == id), &secret_hash, now) {
                    Err(refused) => Plan::answer(IndexAnswer::Refused(refused)),
                    Ok(device) => {
                        let mut writes = remove_ended(tables, held, now);
                        writes.push(Write::SeenDevice { id, at: now });
                        Plan { writes, ..Plan::answer(IndexAnswer::Refreshed { device, granted }) }
                    }
                }
            }
            Ask::Devices { current } => {
                let devices = lasting(stored_devices(tables, &feed), now).cloned().collect();
                Plan::answer(IndexAnswer::Devices { devices, current })
            }
            Ask::RenameDevice { id, name, current } => {
                match lasting(stored_devices(tables, &feed), now).find(|d| d.id == id) {
                    None => device_not_found(),
                    Some(device) => {
                        let device = Device { name: name.clone(), ..device.clone() };
                        let current = current.as_deref() == Some(id.as_str());
                        Plan {
                            writes: vec![Write::RenameDevice { id, name }],
                            ..Plan::answer(IndexAnswer::Device { device, current })
                        }
                    }
                }
            }
            Ask::RevokeDevice { id } => match stored_devices(tables, &feed).iter().any(|d| d.device.id == id) {
                false => device_not_found(),
                true => Plan {
                    writes: vec![Write::RemoveDevice { id, subscriptions: tables.receivers }],
                    ..Plan::answer(IndexAnswer::Removed)
                },
            },
            Ask::RevokeAll { keep } => {
                let gone = devices::revoked_by_all(stored_devices(tables, &feed), keep.as_deref());
                let writes: Vec<Write> = gone
                    .iter()
                    .map(|id| Write::RemoveDevice { id: id.to_string(), subscriptions: tables.receivers })
                    .collect();
                Plan { writes, ..Plan::answer(IndexAnswer::RevokedAll(gone.len() as u64)) }
            }
            Ask::Receivers(of) => {
                // The read holds this kind's receivers only.
                Plan::answer(IndexAnswer::Receivers { of, entries: receivers(&mut feed) })
            }
            Ask::RemoveReceiver { receiver, id } => {
                // The read holds this kind's receivers only.
                match receivers(&mut feed).iter().any(|e| e.id == id) {
                    false => not_found(receiver),
                    true => Plan {
                        writes: vec![Write::RemoveReceiver { receiver, id }],
                        ..Plan::answer(IndexAnswer::Removed)
                    },
                }
            }
            Ask::Deliveries { id } => match receivers(&mut feed).iter().find(|e| e.id == id) {
                None => not_found(Receiver::Webhook),
                Some(entry) => match made(feed.deliveries.take(), "the webhook's deliveries") {
                    Ok(deliveries) => Plan::answer(IndexAnswer::Deliveries { deliveries, dropped: entry.dropped }),
                    // Shown as another state, the list would say what no build did.
                    Err(unknown) => {
                        Plan::answer(IndexAnswer::Unavailable(format!("a stored delivery to webhook {id}: {unknown}")))
                    }
                },
            },
            Ask::Alarm => self.poll_send(tables, &feed, now),
            Ask::Sent(outcome) => self.on_sent(tables, outcome, &feed, now),
            Ask::Hook(IndexHook::RefuseRows { on }) => {
                self.refusing = on;
                Plan::answer(IndexAnswer::Refusing(on))
            }
            Ask::Hook(IndexHook::HoldDeliveries { on }) => {
                self.holding = on;
                Plan::answer(IndexAnswer::Holding(on))
            }
            Ask::Hook(IndexHook::Storage) => {
                Plan::answer(IndexAnswer::StorageBytes(made(feed.storage_bytes, "the database's size")))
            }
            Ask::Hook(IndexHook::StorageOf { .. }) => {
                Plan::answer(IndexAnswer::StorageOf(made(feed.storage_of, "the hand-off's storage")))
            }
            Ask::Hook(IndexHook::PutUnreadable { id }) => {
                let mut plan = Plan::answer(IndexAnswer::Done);
                if !tables.list {
                    plan.writes.push(Write::ListSchema);
                }
                plan.writes.push(Write::StoreUnreadable { id });
                plan
            }
        };
        if known.is_some() {
            self.tables = Some(tables_after(tables, &plan.writes));
        }
        plan.log.extend(told);
        plan
    }

    /// The first receiver's event this build does not know that any read met, to log once in
    /// the object's life: such an event is never owed here, and its name stays stored.
    fn tell_unknown_events(&mut self, unknown_events: &[(String, Unknown)]) -> Option<String> {
        if self.told_unknown_events {
            return None;
        }
        let (id, unknown) = unknown_events.first()?;
        self.told_unknown_events = true;
        let more = unknown_events.len() - 1;
        Some(format!("receiver {id}: {unknown}, never sent here (and {more} more; logged once)"))
    }

    /// A delivered row: stored when newer than the one held, with the deliveries its notices
    /// owe the owner's receivers, within the owner's one cap, in one transaction.
    fn put(&self, tables: Tables, row: Row, passed: Vec<Row>, incarnation: u64, feed: &Feed, now: EpochMs) -> Plan {
        if self.refusing {
            return Plan::refused(Code::StoreUnavailable, "deliveries are refused (test hook)");
        }
        if is_erased(feed, incarnation) {
            // A row of an erased life, sent before the erase and arriving after it: taken, and
            // nothing of it stored, so that it cannot bring the row back.
            return Plan::answer(IndexAnswer::Done);
        }
        let put = list::put(held(feed, readable_held(tables, feed)), &passed, &row, tables.receivers);
        if !put.store {
            return Plan::answer(IndexAnswer::Done);
        }
        let mut plan = Plan::answer(IndexAnswer::Done);
        if !tables.list {
            plan.writes.push(Write::ListSchema);
        }
        // The receivers are read only where a notice is owed.
        let receivers = if put.notices.is_empty() { &[] } else { made(feed.receivers.as_deref(), "the receivers") };
        let owed = receiver::owed(&put.notices, &subscribers(receivers));
        let owes = !owed.is_empty();
        let console = |to: &str| receivers.iter().find(|e| e.id == to).map_or("", |e| e.address.console()).to_string();
        let owe: Vec<Write> = owed
            .iter()
            .map(|o| Write::Owe {
                receiver: o.receiver,
                to: o.to.to_string(),
                row: o.row.clone(),
                notice: o.notice,
                key: o.key,
                at: now,
                console: console(o.to),
            })
            .collect();
        let (drop, count, owe) = self.cap(feed, owe, &mut plan.log);
        plan.writes.push(Write::StoreRow(row));
        plan.writes.extend(owe);
        plan.writes.extend(count);
        if !drop.is_empty() {
            plan.writes.push(Write::DropPending { seqs: drop });
        }
        if owes {
            plan.alarm_at = Some(now);
        }
        plan
    }

    /// The owner's one cap over `owe` and what is pending: the oldest go first, stored ones
    /// before new ones, each drop counted on its receiver. A stored delivery of a kind this
    /// build does not know counts against the cap and is dropped in its turn like any other,
    /// its drop logged, as no receiver's table is known to count it on. Answers the stored
    /// deliveries to drop, the counts, and the new deliveries left to write.
    fn cap(&self, feed: &Feed, owe: Vec<Write>, log: &mut Vec<String>) -> (Vec<i64>, Vec<Write>, Vec<Write>) {
        if owe.is_empty() {
            return (Vec::new(), Vec::new(), owe);
        }
        let pending = made(feed.pending_count, "the pending count");
        // A replay's delivery is ignored as it is written, so this may drop one more than
        // needed: never one too few.
        let over = receiver::over_cap(pending + owe.len(), self.bounds.pending_max);
        let from_stored = over.min(pending);
        let stored: &[PendingRef] =
            if from_stored > 0 { made(feed.oldest.as_deref(), "the oldest pending") } else { &[] };
        let oldest: Vec<&PendingRef> = stored.iter().take(from_stored).collect();
        let unwritten = over.saturating_sub(oldest.len()).min(owe.len());
        let mut counts: Vec<(Receiver, String, u64)> = Vec::new();
        let mut count =
            |receiver: Receiver, id: &str| match counts.iter_mut().find(|(r, i, _)| *r == receiver && i == id) {
                Some((_, _, n)) => *n += 1,
                None => counts.push((receiver, id.to_string(), 1)),
            };
        for p in &oldest {
            match &p.receiver {
                Ok(receiver) => count(*receiver, &p.to),
                Err(unknown) => log.push(format!(
                    "delivery {} to {}: {unknown}; dropped by the owner's cap, counted on no receiver",
                    p.seq, p.to
                )),
            }
        }
        for w in &owe[..unwritten] {
            if let Write::Owe { receiver, to, .. } = w {
                count(*receiver, to);
            }
        }
        let count = counts.into_iter().map(|(receiver, id, n)| Write::CountDropped { receiver, id, n }).collect();
        (oldest.iter().map(|p| p.seq).collect(), count, owe.into_iter().skip(unwritten).collect())
    }

    /// A new hand-off's first row, admitted against the open cap and stored in one step; closed
    /// rows past retention go with it (a refused create writes nothing).
    fn open(&self, tables: Tables, row: Row, feed: &Feed, now: EpochMs) -> Plan {
        // An owner with no list has no open row.
        let open = if tables.list { made(feed.open, "the open count") } else { 0 };
        if let Err(crowded) = admit_open(open, self.bounds.open_cap) {
            // Closed rows count against no cap: they wait for the next create admitted.
            return Plan::answer(IndexAnswer::Admission(Admission::No(crowded)));
        }
        let mut writes = Vec::new();
        if tables.list {
            writes.push(Write::DropClosedBefore { before: self.bounds.retention.expired_before(now) });
        } else {
            writes.push(Write::ListSchema);
        }
        writes.push(Write::StoreRow(row));
        Plan { writes, ..Plan::answer(IndexAnswer::Admission(Admission::Yes)) }
    }

    /// The alarm: what [`sending::round`] says is due, leased and started; a delivery of a
    /// kind this build does not know ends failed; each receiver's finished deliveries trimmed.
    pub fn poll_send(&self, tables: Tables, feed: &Feed, now: EpochMs) -> Plan {
        let mut plan = Plan::answer(IndexAnswer::Done);
        if self.holding {
            plan.alarm_at = Some(now.saturating_add(HELD_ALARM_MS));
            return plan;
        }
        if !tables.receivers {
            return plan;
        }
        let pending = made(feed.pending.as_deref(), "the pending deliveries");
        let round = self.round(feed, pending, now);
        for w in pending {
            if let Err(unknown) = &w.receiver {
                plan.log.push(format!("delivery {} to {}: {unknown}; it ends failed", w.seq, w.to));
                plan.writes.push(Write::Finish { seq: w.seq, state: DeliveryState::Failed, status: None });
            }
        }
        if !round.forget.is_empty() {
            plan.log.push(format!("{} push messages dropped: push is not configured", round.forget.len()));
            plan.writes.push(Write::DropPending { seqs: round.forget.clone() });
        }
        for &seq in &round.expire {
            plan.log.push(format!("delivery {seq} expired before it was sent"));
            plan.writes.push(Write::Finish { seq, state: DeliveryState::Failed, status: None });
        }
        let expired: Vec<(Receiver, &str, i64)> = pending
            .iter()
            .filter(|w| round.expire.contains(&w.seq))
            .filter_map(|w| Some((w.receiver.as_ref().ok().copied()?, w.to.as_str(), w.seq)))
            .collect();
        let mut trimmed: Vec<&str> = Vec::new();
        for &(receiver, to, _) in &expired {
            if trimmed.contains(&to) {
                continue;
            }
            trimmed.push(to);
            let finished: Vec<i64> = expired.iter().filter(|e| e.1 == to).map(|e| e.2).collect();
            if let Some(through) = trim_through(
                receiver.kept_finished(),
                made(feed.finished_of(to), "a receiver's finished deliveries"),
                &finished,
            ) {
                plan.writes.push(Write::TrimFinished { to: to.to_string(), through });
            }
        }
        for &(seq, lease) in &round.send {
            plan.writes.push(Write::Lease { seq, lease, at: now });
            plan.send.push((seq, lease));
        }
        plan.alarm_at = round.next_alarm;
        plan
    }

    /// The round over `pending` (the alarm's read of `feed`), of the kinds this build knows:
    /// made once per ask, whose reads and decision take one `now`.
    fn round<'f>(&self, feed: &'f Feed, pending: &[Waiting], now: EpochMs) -> &'f sending::Round {
        let (at, round) = feed.derived.round.get_or_init(|| (now, self.round_of(pending, now)));
        assert_eq!(*at, now, "one ask's reads and decision take one time");
        round
    }

    fn round_of(&self, pending: &[Waiting], now: EpochMs) -> sending::Round {
        let known: Vec<Pending> = pending
            .iter()
            .filter_map(|w| {
                Some(Pending {
                    seq: w.seq,
                    receiver: w.receiver.as_ref().ok().copied()?,
                    to: &w.to,
                    handoff: &w.handoff,
                    created_at: w.created_at,
                    attempts: w.attempts,
                    next_attempt_at: w.next_attempt_at?,
                })
            })
            .collect();
        sending::round(&known, now, self.bounds.push)
    }

    /// An attempt's outcome ([`Receiver::after_attempt`]): finished (and the receiver's
    /// finished deliveries trimmed to what its kind keeps), retried, or the receiver gone; the
    /// alarm then runs the next round.
    pub fn on_sent(&self, tables: Tables, outcome: Outcome, feed: &Feed, now: EpochMs) -> Plan {
        let mut plan = Plan { alarm_at: Some(now), ..Plan::answer(IndexAnswer::Done) };
        if !tables.receivers {
            return plan;
        }
        let Outcome { seq, receiver, to, created_at, attempts, status } = outcome;
        let state = match receiver.after_attempt(created_at, attempts, status, now) {
            Next::Retry { at } => {
                plan.writes.push(Write::Retry { seq, status, at });
                return plan;
            }
            Next::Gone => {
                plan.writes.push(Write::RemoveReceiver { receiver, id: to });
                return plan;
            }
            Next::Delivered => DeliveryState::Delivered,
            Next::Failed => DeliveryState::Failed,
        };
        plan.writes.push(Write::Finish { seq, state, status });
        if let Some(through) = trim_through(
            receiver.kept_finished(),
            made(feed.finished_of(&to), "the receiver's finished deliveries"),
            &[seq],
        ) {
            plan.writes.push(Write::TrimFinished { to, through });
        }
        plan
    }
}

/// A read [`Index::next_read`] asked for, as the driver made it. Skipped, it is a programmer's
/// mistake in the driver: read as empty, it would answer a shorter page or a 404.
fn made<T>(read: Option<T>, what: &str) -> T {
    match read {
        Some(read) => read,
        None => panic!("the driver skipped the read of {what} that the index asked for"),
    }
}

/// Whether a row of life `incarnation` comes from a life erased since (the read of its
/// hand-off's erased life is in `feed`).
fn is_erased(feed: &Feed, incarnation: u64) -> bool {
    feed.erased.flatten().is_some_and(|erased| incarnation <= erased)
}

/// The erase of life `incarnation` of hand-off `id`: its row and every delivery of it, pending
/// (never sent now) or finished, go in one transaction, and the life is kept as erased for
/// [`ERASED_KEPT_MS`] (at most [`ERASED_KEPT_PER_OWNER_MAX`] of them), long past the last row
/// send its object could still have on its way.
fn drop_erased(tables: Tables, id: String, incarnation: u64, now: EpochMs) -> Plan {
    let mut plan = Plan::answer(IndexAnswer::Done);
    if tables.list {
        plan.writes.push(Write::DeleteRow { id: id.clone() });
    }
    if tables.receivers {
        plan.writes.push(Write::DropDeliveriesOf { handoff: id.clone() });
    }
    if !tables.erased {
        plan.writes.push(Write::ErasedSchema);
    }
    plan.writes.push(Write::Erased { id, incarnation, at: now });
    plan.writes.push(Write::TrimErased { before: now.saturating_sub(ERASED_KEPT_MS), keep: ERASED_KEPT_PER_OWNER_MAX });
    plan
}

/// Which finished deliveries of one receiver go once `finished` (just now) join `stored` (its
/// newest finished ones, newest first): all up to the `seq` returned, so that `keep` remain.
pub fn trim_through(keep: usize, stored: &[i64], finished: &[i64]) -> Option<i64> {
    let mut all: Vec<i64> = stored.iter().chain(finished).copied().collect();
    crate::order::sort_by(&mut all, |a, b| b.cmp(a));
    all.dedup();
    all.get(keep).copied()
}

/// The read of receiver `to`'s newest finished deliveries: as many as its kind keeps (with the
/// ones finishing now, the oldest of those read marks where the trim goes through).
fn finished_read((receiver, to): (Receiver, &String)) -> Read {
    Read::Finished { to: to.clone(), limit: receiver.kept_finished() }
}

/// The row held, parsed only where it can owe a notice (the owner has receivers); one that
/// cannot be read counts as none: told at least once, never less.
/// Parsed once per ask.
fn readable_held(tables: Tables, feed: &Feed) -> Option<&Row> {
    let parse = || {
        let text = &feed.held.as_ref()?.as_ref()?.text;
        tables.receivers.then(|| crate::json::from_slice(text.as_bytes()).ok()).flatten()
    };
    feed.derived.held_row.get_or_init(parse).as_ref()
}

/// The row held as newest-wins reads it.
fn held<'a>(feed: &Feed, readable: Option<&'a Row>) -> Option<list::Held<'a>> {
    feed.held.as_ref()?.as_ref().map(|h| list::Held { version: h.version, row: readable })
}

/// The subscribers the core's `owed` reads, from the receivers as stored.
fn subscribers(receivers: &[StoredReceiver]) -> Vec<Subscriber<'_>> {
    receivers.iter().map(|e| Subscriber { receiver: e.receiver(), id: &e.id, events: &e.events }).collect()
}

/// A page of the list from the rows read (one more than the page when a next page exists); a
/// row that cannot be read makes the list unavailable rather than shorter.
fn list_page(query: &ListQuery, if_none_match: Option<String>, texts: Vec<String>) -> Plan {
    let mut rows = Vec::with_capacity(texts.len());
    for text in &texts {
        match crate::json::from_slice::<Row>(text.as_bytes()) {
            Ok(row) => rows.push(row),
            Err(e) => return Plan::answer(IndexAnswer::Unavailable(format!("a stored list row is unreadable: {e}"))),
        }
    }
    Plan::answer(IndexAnswer::Page { page: Page::of(rows, query), if_none_match })
}

/// A new receiver, within its kind's cap (the tables written first where the owner has none).
fn add_receiver(tables: Tables, entry: StoredReceiver, receivers: Vec<StoredReceiver>) -> Plan {
    let held = receivers.iter().filter(|e| e.receiver() == entry.receiver()).count();
    let admitted = match entry.receiver() {
        Receiver::Webhook => notice::admit_webhook(held),
        Receiver::Push => notice::admit_subscription(held),
    };
    if let Err(refusal) = admitted {
        return Plan::answer(IndexAnswer::Refused(refusal));
    }
    let mut writes = Vec::new();
    if !tables.receivers {
        writes.push(Write::ReceiverSchema);
    }
    writes.push(Write::AddReceiver(entry.clone()));
    Plan { writes, ..Plan::answer(IndexAnswer::Created(entry)) }
}

/// The devices read, where their tables exist (an owner who never signed a device in has none).
fn stored_devices(tables: Tables, feed: &Feed) -> &[StoredDevice] {
    if tables.devices {
        made(feed.devices.as_deref(), "the devices")
    } else {
        &[]
    }
}

/// The devices whose sign-in still lasts at `now`.
fn lasting(stored: &[StoredDevice], now: EpochMs) -> impl Iterator<Item = &Device> {
    stored.iter().map(|d| &d.device).filter(move |d| devices::lasts(d, now))
}

/// The removal of every device whose sign-in has ended, with what belongs to it.
fn remove_ended(tables: Tables, stored: &[StoredDevice], now: EpochMs) -> Vec<Write> {
    let ended = devices::ended(stored, now);
    ended.into_iter().map(|id| Write::RemoveDevice { id, subscriptions: tables.receivers }).collect()
}

fn device_not_found() -> Plan {
    Plan::refused(Code::DeviceNotFound, "no such device")
}

/// A device signs in within the owner's devices and sign-ins per period; the devices that have
/// ended go with it, and the sign-ins that count no more.
fn sign_in(tables: Tables, device: StoredDevice, granted: Granted, feed: &Feed, now: EpochMs) -> Plan {
    let held = stored_devices(tables, feed);
    let recent = if tables.devices { made(feed.sign_ins, "the recent sign-ins") } else { 0 };
    if let Err(refused) = devices::admit_sign_in(lasting(held, now).count(), recent) {
        return Plan::answer(IndexAnswer::Refused(refused));
    }
    let mut writes = if tables.devices { remove_ended(tables, held, now) } else { vec![Write::DeviceSchema] };
    let listed = device.device.clone();
    writes.push(Write::AddDevice(device));
    writes.push(Write::SignedIn { at: now });
    writes.push(Write::TrimSignIns { before: devices::sign_ins_since(now) });
    Plan { writes, ..Plan::answer(IndexAnswer::SignedIn { device: listed, granted }) }
}

/// A push subscription made from a device that no longer lasts (revoked while its access token
/// still lives): refused as the token's device is, 401 `auth.revoked`.
fn device_gone(tables: Tables, entry: &StoredReceiver, feed: &Feed, now: EpochMs) -> Option<Plan> {
    let Address::Push { device: Some(id), .. } = &entry.address else { return None };
    if lasting(stored_devices(tables, feed), now).any(|d| d.id == *id) {
        return None;
    }
    Some(Plan::refused(Code::AuthRevoked, "the device this token came from is signed out; sign in again"))
}

/// The tables once `writes` commit.
fn tables_after(mut tables: Tables, writes: &[Write]) -> Tables {
    for w in writes {
        match w {
            Write::ListSchema => tables.list = true,
            Write::ReceiverSchema => tables.receivers = true,
            Write::ErasedSchema => tables.erased = true,
            Write::DeviceSchema => tables.devices = true,
            _ => {}
        }
    }
    tables
}

#[cfg(test)]
mod tests;
