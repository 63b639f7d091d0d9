//! One hand-off's object as a value that performs no I/O: the decider. It owns everything the
//! object holds (the hand-off, the keys it remembers, what the owner's index is owed, who
//! waits, the version waiters may be told), and decides everything a request causes.
//!
//! The object drives it as quinn's endpoint drives a connection:
//! 1. it asks [`Decider::next_read`] what to read for the ask, reads it from SQLite and hands
//!    it over ([`Decider::restore`], [`Decider::restore_keys`], or the ask's [`Feed`]), until
//!    nothing more is needed;
//! 2. it calls [`Decider::handle`] with the time, which answers a [`Plan`]: the answer, the
//!    rows to write in one transaction (every size and cap already checked), the alarm, the
//!    version to publish and the row send owed to the owner's index;
//! 3. it writes the rows in one `transactionSync` and carries out the rest: after the commit is
//!    confirmed [`Decider::confirm`] says which waiters wake, and [`Decider::poll_row_send`] /
//!    [`Decider::on_row_sent`] say what to send to the index and when to try again.
//!
//! The object checks no role, caps nothing, trims nothing and keeps no count of its own. A plan
//! without [`Plan::publish`] or [`Plan::send_rows_through`] needs no I/O beyond SQLite, and the
//! object answers it without an `await`.
//!
//! Invariants (asserted here, property-tested in `decider/tests.rs`):
//! - the version moves by exactly one per stored change, and a plan that writes no record
//!   moves nothing;
//! - a refusal writes nothing and changes nothing the decider holds;
//! - every value a plan writes is at most [`STORED_VALUE_BYTES_MAX`] bytes;
//! - waiters are only ever woken with a version [`Decider::confirm`]ed.

use crate::briefing::{self, Reach};
use crate::error::{Code, Refusal};
use crate::handoff::{self, Change, Dirty, Effect, EventKind, Extras, Handoff};
use crate::hooks::{Fault, HandoffHook, PlanHook};
use crate::idempotency::{self, Decision, KeyEntry, Keys, Remembered};
use crate::limits::{
    events_trimmed_through, IDEMPOTENCY_ANSWER_BYTES_MAX, LINEAGE_TAIL_MAX, MACHINE_WAITERS_PER_HANDOFF_MAX,
    MACHINE_WATCHERS_PER_HANDOFF_MAX, OWNER_WAITERS_PER_HANDOFF_MAX, OWNER_WATCHERS_PER_HANDOFF_MAX,
    STORED_VALUE_BYTES_MAX, TURNS_KEPT_PER_HANDOFF_MAX, WAIT_JITTER_MS_MAX, WORK_RECORD_BYTES_MAX,
};
use crate::notice;
use crate::outbox::{self, Outbox, Owed};
use crate::package::{Document, Latest, Ledger, TurnEntry};
use crate::placement::Placement;
use crate::retention::Retention;
use crate::role::{PerRole, Role};
use crate::rows::{Admission, Row, TooManyOpen};
use crate::time::EpochMs;
use crate::timeline::{self, TurnFacts};
use crate::turn::{self, Record};
use crate::waiters::{TimelineAsk, WaiterId, Waiters};
use crate::watch;
use crate::work::Work;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::rc::Rc;

// ---------------------------------------------------------------------------------------
// What comes in
// ---------------------------------------------------------------------------------------

/// Who is asking: the token's subject and its role, already authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub owner: String,
    pub role: Role,
    /// A machine token's `inc`: the earliest life of the hand-off it may act on (0 when the
    /// token carries none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incarnation: u64,
    /// A machine token's `hid`: the one hand-off it acts on (an owner's token has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hid: Option<String>,
}

impl Caller {
    /// Whether this caller may reach the hand-off `id` at all: an owner's token reaches any id
    /// (the hand-off then checks its owner), a machine's only the one it was minted for.
    pub fn reaches(&self, id: &str) -> bool {
        self.role == Role::Owner || self.hid.as_deref() == Some(id)
    }
}

/// Whether a token of role `token` may take a route for `route` (`None`: an owner's or a
/// machine token's, the hand-off deciding). A machine credential takes only the routes that
/// name it: never an owner's, never a hand-off's.
pub fn admit_role(route: Option<Role>, token: Role) -> Result<(), Refusal> {
    match (route, token) {
        (Some(needed), _) if needed != token => {
            Err(Refusal::new(Code::AuthForbidden, "this route is not for this token's role"))
        }
        (None, Role::Credential) => Err(Refusal::new(
            Code::AuthForbidden,
            "a machine credential takes only the /v1/machine routes: get the hand-off's machine token there",
        )),
        _ => Ok(()),
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A change's `Idempotency-Key` and a fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idempotency {
    pub key: String,
    pub fingerprint: String,
}

/// What the destination of a briefing can reach: the API (at the request's origin) or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reaching {
    pub api: bool,
    pub base_url: String,
}

impl Reaching {
    fn reach(&self) -> Reach {
        if self.api {
            Reach::api(self.base_url.clone())
        } else {
            Reach::None
        }
    }
}

/// One operation on a hand-off, already read and checked by the HTTP contract. Externally
/// tagged (`{"create": {…}}`), as the owner index's asks are: an internal tag costs the `.wasm` a buffered
/// second reading of every variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `POST /v1/handoffs`: the hand-off of this session, created if new. `machine_token` is
    /// what the answer carries (minted by the Worker, which holds the key); it is never stored.
    Create {
        id: String,
        session: String,
        machine: String,
        size: String,
        machine_token: String,
        /// The moment the Worker minted `machine_token` (its `inc`): a new hand-off's
        /// [`Record::incarnation`].
        #[serde(default)]
        incarnation: u64,
        /// Turn 1's words, checked by the contract.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        /// Where and how turn 1 is to run, checked by the contract.
        #[serde(default, skip_serializing_if = "Placement::is_empty")]
        placement: Placement,
    },
    /// `POST …/machine-token` (the owner's): a fresh machine token, minted by the Worker at
    /// `incarnation`, which ends the ones minted before it. Asked with a machine credential
    /// (`POST /v1/machine/handoffs/{id}/machine-token`), `machine` names the credential's
    /// machine: the hand-off must be for it and created since it was enrolled (the caller's
    /// `incarnation`), and the token ends no other.
    MachineToken {
        machine_token: String,
        incarnation: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        machine: Option<String>,
    },
    Get,
    Change {
        change: Change,
    },
    Wait {
        after: u64,
        timeout_s: u64,
    },
    /// `GET …/watch`: accept a hibernatable WebSocket that has seen up to `after`, whose token
    /// is accepted until `valid_until_s`; `subprotocol` when the client offered `handoff.v1`.
    Watch {
        after: u64,
        valid_until_s: i64,
        subprotocol: bool,
        /// A `handoff.v2` watch: where its client stands in the timeline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeline: Option<watch::Seen>,
    },
    /// `GET …/turns`: a page of the lineage, newest turns first from `before` (exclusive).
    Turns {
        before: Option<u64>,
        limit: usize,
    },
    /// `GET …/package`, as JSON or as Markdown for a person.
    Package {
        markdown: bool,
    },
    /// `GET …/briefing`.
    Briefing {
        budget_bytes: usize,
        reach: Reaching,
    },
    /// `GET …/work`: the whole work record.
    Work,
    /// `POST …/turns?dry_run=true`: what opening the next turn with this hand-off would compile
    /// and brief, now; nothing is stored.
    Preview {
        change: Change,
        budget_bytes: usize,
        reach: Reaching,
    },
    /// The benchmark's floor: reach the object and answer, touching no storage.
    Floor,
    /// Test hooks (`crate::hooks`), the owner's only.
    Hook(HandoffHook),
    /// `DELETE /v1/handoffs/:id`: close it if open, then erase it and its row (the owner's).
    Erase,
    /// `POST …/events`: a batch of one turn's timeline events (the machine's).
    Events {
        batch: timeline::Batch,
    },
    /// `GET …/events`: a turn's events after `after` (the current turn's without `turn`), at
    /// most `limit`; held up to `timeout_s` until one arrives.
    Timeline {
        turn: Option<u64>,
        after: u64,
        limit: usize,
        #[serde(default)]
        timeout_s: u64,
    },
}

/// What a hand-off's object is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    pub caller: Caller,
    pub op: Op,
    #[serde(default)]
    pub idempotency: Option<Idempotency>,
}

/// The moment a request is handled, and one random number for the jitter of a wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moment {
    pub now: EpochMs,
    /// In `[0, 1)`.
    pub random: f64,
}

/// The caps on what one hand-off holds at once for each role. The defaults are the named
/// limits; a test deployment may set lower ones so that a cap can be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub waiters: PerRole<usize>,
    pub watchers: PerRole<usize>,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            waiters: PerRole::new(OWNER_WAITERS_PER_HANDOFF_MAX, MACHINE_WAITERS_PER_HANDOFF_MAX),
            watchers: PerRole::new(OWNER_WATCHERS_PER_HANDOFF_MAX, MACHINE_WATCHERS_PER_HANDOFF_MAX),
        }
    }
}

fn waiter_cap_name(role: Role) -> &'static str {
    match role {
        Role::Owner => "OWNER_WAITERS_PER_HANDOFF_MAX",
        Role::Machine | Role::Credential => "MACHINE_WAITERS_PER_HANDOFF_MAX",
    }
}

// ---------------------------------------------------------------------------------------
// What the object reads for the decider
// ---------------------------------------------------------------------------------------

/// One read the decider needs before it can handle an ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The stored hand-off, with its newest `lineage` lineage entries ([`Decider::restore`]).
    Handoff { lineage: usize },
    /// Every remembered key's time and size ([`Decider::restore_keys`]).
    Keys,
    /// The remembered answer of `key`, if remembered at or after `since` ([`Feed::key`]).
    Key { key: String, since: EpochMs },
    /// Up to `limit` lineage entries with a turn below `before`, newest first ([`Feed::turns`]).
    Turns { before: i64, limit: usize },
    /// How many sockets of this role watch the hand-off ([`Feed::sockets`]).
    Sockets(Role),
    /// The storage facts of the test hook ([`Feed::storage`]).
    Storage,
    /// A new hand-off's first row, which the owner's index admits (and adds) or refuses
    /// against the open cap, before anything is stored ([`Feed::admission`]).
    Admission { owner: String, row: Row },
    /// `turn`'s timeline facts and up to `limit` of its events after `after`, oldest first
    /// ([`Feed::timeline`]).
    Timeline { turn: u64, after: u64, limit: usize },
    /// The models `runtime` reaches on `machine`, as the owner's `Machines` object holds its
    /// report, for a hand-off turn's model ([`Feed::reach`]).
    Reach { owner: String, machine: String, runtime: String },
}

/// The stored hand-off as its rows hold it, each value the text it was written as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub record: String,
    /// `(name, json)` of each part written (`work`, `ledger`, `extras`).
    pub parts: Vec<(String, String)>,
    /// The newest lineage entries, in any order.
    pub turns: Vec<String>,
    /// The failed row sends stored for a version: `(version, attempts)`.
    pub attempts: Option<(u64, u32)>,
    /// Whether the record's row entered something a notice names (`notice::entered`).
    pub entered: bool,
    /// The passed rows the owner's index is still owed: `(version, row)`.
    pub passed: Vec<(u64, String)>,
    /// The `inc` of the newest machine token a create minted: older ones are ended (0: none
    /// stored, as before machine tokens could be ended).
    pub machine_tokens_from: u64,
}

/// What storage holds of one hand-off, for the test hook that shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StorageFacts {
    pub bytes: u64,
    pub rows: StorageRows,
    pub watchers: WatcherCounts,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StorageRows {
    pub turns: u64,
    pub events: u64,
    pub idempotency: u64,
    /// The turns' timeline events (not the version history, which is `events`).
    pub timeline: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WatcherCounts {
    pub owner: usize,
    pub machine: usize,
}

/// The reads of one ask, as the object made them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Feed {
    /// `Some` once read: the key's remembered answer, if it has one.
    pub key: Option<Option<Remembered>>,
    /// Lineage entries' texts, newest first.
    pub turns: Option<Vec<String>>,
    pub sockets: Option<usize>,
    pub storage: Option<StorageFacts>,
    /// The owner index's answer to [`Read::Admission`].
    pub admission: Option<Admission>,
    /// [`Read::Timeline`]'s answer.
    pub timeline: Option<TimelineRead>,
    /// [`Read::Reach`]'s answer: the models, or `None` for a machine not enrolled or not reported.
    pub reach: Option<Option<Vec<String>>>,
}

/// What storage holds of one turn's timeline: its facts and the events read, `(seq, at,
/// json)`, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineRead {
    pub facts: TurnFacts,
    pub events: Vec<(u64, EpochMs, String)>,
}

/// A stored value this build cannot read: the object answers 503 and logs why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stored hand-off unreadable: {}", self.0)
    }
}

/// A read [`Session::next_read`] asked for, as the driver made it. Skipped, it is a
/// programmer's mistake in the driver: read as empty, it would answer an empty page or a 404.
fn made<T>(read: Option<T>, what: &str) -> T {
    match read {
        Some(read) => read,
        None => panic!("the driver skipped the read of {what} that the session asked for"),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, Unreadable> {
    crate::json::from_slice(text.as_bytes()).map_err(|e| unreadable(what, &e))
}

/// Outside the generic reader, so that its formatting is compiled once.
#[inline(never)]
fn unreadable(what: &str, e: &serde_json::Error) -> Unreadable {
    Unreadable(format!("{what}: {e}"))
}

// ---------------------------------------------------------------------------------------
// What goes out
// ---------------------------------------------------------------------------------------

/// An answer the HTTP contract renders (`handoff_api::wire`): the decider decides which
/// answer, the contract its bytes and status.
#[derive(Debug, Clone, Copy)]
pub enum HandoffAnswer<'a> {
    /// `{"handoff": record}` as `role` is answered it.
    Record {
        h: &'a Handoff,
        role: Role,
    },
    /// A create's answer; `new` when this call created the hand-off. A repeated create
    /// answers the hand-off as it is, without a machine token; a minted one carries it.
    Created {
        h: &'a Handoff,
        role: Role,
        machine_token: Option<&'a str>,
        new: bool,
    },
    /// A change's answer: the record and what the change answers beside it.
    Changed {
        h: &'a Handoff,
        role: Role,
        effect: &'a Effect,
    },
    /// A dry-run open: the turn it would start, its package and briefing.
    Preview {
        h: &'a Handoff,
        role: Role,
        turn: u64,
        latest: &'a Latest,
        briefing: &'a str,
    },
    Turns {
        h: &'a Handoff,
        role: Role,
        turns: &'a [TurnEntry],
        next_before: Option<u64>,
    },
    /// `POST …/events` taken: the turn and the `seq` its next event takes.
    TimelineTaken {
        turn: u64,
        next: u64,
    },
    /// A batch refused, with the turn and its next `seq` where the refusal names one.
    TimelineRefused {
        refusal: &'a Refusal,
        turn: u64,
        next: Option<u64>,
    },
    /// `GET …/events`: a turn's events, its next `seq`, and whether its events were dropped.
    Timeline {
        turn: u64,
        events: &'a [timeline::Event],
        next: u64,
        dropped: bool,
    },
    Work {
        h: &'a Handoff,
        role: Role,
    },
    Markdown(&'a str),
    Text(&'a str),
    /// A refusal; the record beside it when the caller may see the hand-off, and the current
    /// package's version and hash on `package.stale`.
    Refused {
        refusal: &'a Refusal,
        handoff: Option<(&'a Handoff, Role)>,
        current_package: Option<(u64, &'a str)>,
    },
    Floor,
    Armed(Fault),
    Storage(&'a StorageFacts),
    /// 204: erased.
    Erased,
    /// 429 `owner.too_many_open`, with the count and the cap.
    TooManyOpen(TooManyOpen),
}

/// An answer's bytes, as the contract rendered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// A replay of a remembered answer (`Idempotent-Replayed: true`).
    pub replayed: bool,
}

/// The HTTP contract, as the decider needs it: how an answer is written, and how a large
/// answer is kept without its package and rebuilt with it.
pub trait Wire {
    fn render(&self, answer: HandoffAnswer<'_>) -> Rendered;
    /// The body of `answer` without its package, for an answer that has one.
    fn without_package(&self, answer: HandoffAnswer<'_>) -> Option<String>;
    /// The whole answer from what [`Wire::without_package`] kept and the package put back.
    fn with_package(&self, slim: &str, document: &Document) -> Option<String>;
}

/// One write of a plan; the object's store turns each into its SQL. Values are the texts to
/// store, already size-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// The object's schema: the first write of a create.
    Schema,
    /// The record, and whether its row entered something a notice names (read back by
    /// [`Decider::restore`] for the outbox).
    Record {
        json: String,
        entered: bool,
    },
    Part {
        name: Part,
        json: String,
    },
    Turn {
        turn: u64,
        entry: String,
    },
    /// Deletes lineage entries of turns up to `through`.
    TrimTurns {
        through: u64,
    },
    Event {
        version: u64,
        at: EpochMs,
        kind: EventKind,
        actor: Role,
    },
    /// Deletes history events up to version `through`.
    TrimEvents {
        through: u64,
    },
    Remember {
        key: String,
        remembered: Remembered,
        at: EpochMs,
        bytes: usize,
    },
    /// Deletes every remembered key older than `before`.
    ForgetExpired {
        before: EpochMs,
    },
    Forget {
        key: String,
    },
    /// The failed sends of the row of `version`, so that the backoff outlives an eviction.
    Attempts {
        owner: String,
        version: u64,
        row: String,
        attempts: u32,
    },
    /// A row the owner's index is owed that a newer one passed before its row send.
    Pass {
        version: u64,
        row: String,
    },
    /// Deletes the passed rows up to version `through` (taken, or dropped past the cap).
    Unpass {
        through: u64,
    },
    /// Machine tokens minted before `from` (their `inc`) are ended: a create minted a newer
    /// one. Not a change of the record: its version does not move.
    MachineTokensFrom {
        from: u64,
    },
    /// One turn's new timeline events, taken at `at`: `(seq, json)`. Not a change of the
    /// record: its version does not move.
    TimelineEvents {
        turn: u64,
        at: EpochMs,
        events: Vec<(u64, String)>,
    },
    /// One turn's timeline facts after a batch.
    TimelineTurn {
        turn: u64,
        facts: TurnFacts,
    },
    /// Drops the events of the turns up to `through`, keeping each turn's count.
    TrimTimeline {
        through: u64,
    },
}

/// The parts of a hand-off stored apart from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Work,
    Ledger,
    Extras,
}

impl Part {
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Work => "work",
            Part::Ledger => "ledger",
            Part::Extras => "extras",
        }
    }
}

/// How the object answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// These bytes, once the plan's writes, publication and row send are done.
    Rendered(Rendered),
    /// `{"handoff": record}` of the hand-off as it is now, as `role` is answered it (the object
    /// renders it once per version and role).
    Record { role: Role },
    /// A long-poll: the headers now, the body when [`Decider::confirm`] wakes `waiter` or at
    /// `timeout_ms`, then the version [`Decider::published`] holds.
    Hold { waiter: WaiterId, role: Role, timeout_ms: u64 },
    /// A held read of a timeline: the headers now, the body when a batch's plan wakes
    /// `waiter` ([`Plan::wake_timeline`]) or at `timeout_ms`, then `timeout_body`.
    HoldTimeline { waiter: WaiterId, timeout_ms: u64, timeout_body: String },
    /// Accept a watching socket for `role` ([`watch::Watcher::open`] says what it is sent).
    Watch { role: Role, after: u64, valid_until_s: i64, subprotocol: bool, timeline: Option<watch::Seen> },
}

/// Everything one request causes, decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub reply: Reply,
    /// Run in order in one transaction: all of them or none.
    pub writes: Vec<Write>,
    /// After the commit: set the object's alarm then, unless one is pending (never awaited).
    pub alarm_at: Option<EpochMs>,
    /// After the commit: once the runtime confirms it, [`Decider::confirm`] this version.
    pub publish: Option<u64>,
    /// Then: send rows to the owner's index until it holds this version (read your writes).
    pub send_rows_through: Option<u64>,
    /// For the log, when the plan answers a failure of storage.
    pub log: Option<String>,
    /// After the rest: erase the hand-off (its row in the owner's index, then all its storage).
    pub erase: bool,
    /// What a test hook asks of the object.
    pub hook: Option<PlanHook>,
    /// After the commit is confirmed: the held timeline reads a batch answers, each read again
    /// and answered by [`Decider::timeline_answer`].
    pub wake_timeline: Vec<(WaiterId, TimelineAsk)>,
    /// After the commit is confirmed: a batch took `turn`'s events `first..=last`, which every
    /// `handoff.v2` socket is owed as [`watch::Watcher::owed_events`] says.
    pub events_taken: Option<(u64, u64, u64)>,
}

impl Plan {
    fn reply(reply: Reply) -> Plan {
        Plan {
            reply,
            writes: Vec::new(),
            alarm_at: None,
            publish: None,
            send_rows_through: None,
            log: None,
            erase: false,
            hook: None,
            wake_timeline: Vec::new(),
            events_taken: None,
        }
    }

    fn rendered(rendered: Rendered) -> Plan {
        Plan::reply(Reply::Rendered(rendered))
    }

    /// Whether carrying it out needs an `await`: a publication or a row send does, and so
    /// does waking a held timeline read (after the commit is confirmed).
    pub fn waits(&self) -> bool {
        let timeline = !self.wake_timeline.is_empty() || self.events_taken.is_some();
        self.publish.is_some() || self.send_rows_through.is_some() || self.erase || timeline
    }
}

/// What the owner's index is owed for a record: the row, and whose index it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSend {
    pub owner: String,
    pub row: Row,
    /// The life of the hand-off the row is of: the index takes no row of a life erased since.
    pub incarnation: u64,
}

impl RowSend {
    pub fn of(record: &Record) -> RowSend {
        RowSend { owner: record.owner.clone(), row: Row::of(record), incarnation: record.incarnation }
    }
}

/// Who [`Decider::confirm`] wakes: the waiters the confirmed version answers, and the
/// hand-off they (and every watching socket) are told.
#[derive(Debug, Clone)]
pub struct Wake {
    pub handoff: Rc<Handoff>,
    pub waiters: Vec<(WaiterId, Role)>,
}

/// What a finished row send leads to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sent {
    /// Set the alarm then, to try again.
    pub retry_at: Option<EpochMs>,
    /// Write this first (the attempts so far, or the passed rows taken), outside any
    /// change's transaction.
    pub write: Option<Write>,
}

/// What a failure of [`Sent::write`] leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFailed {
    /// Nothing fails: the failure is logged with this line, and what the write was to clean up
    /// stays stored.
    Logged(&'static str),
    /// The send fails with the storage failure: stored attempts are what keeps the backoff
    /// across an eviction.
    Fails,
}

impl Sent {
    /// What a failure of its write leads to. Delivered rows left in `passed` only ride along
    /// with the next send once more, and the index skips them by version: a failed clean-up is
    /// no failure of the change.
    pub fn if_write_fails(&self) -> WriteFailed {
        match self.write {
            Some(Write::Unpass { .. }) => WriteFailed::Logged("could not forget delivered passed rows"),
            _ => WriteFailed::Fails,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The decider
// ---------------------------------------------------------------------------------------

/// What the decider knows of its stored hand-off.
#[derive(Debug, Clone)]
enum Known {
    /// Not read yet in this object's lifetime.
    Unread,
    /// Read: none was ever created.
    Absent,
    Present(Rc<Handoff>),
}

#[derive(Debug)]
pub struct Decider {
    caps: Caps,
    handoff: Known,
    /// The remembered keys, once read.
    keys: Option<Keys>,
    outbox: Outbox<RowSend>,
    waiters: Waiters,
    /// The newest version whose commit is confirmed: what waiters may be told.
    published: Option<Rc<Handoff>>,
    /// Versions committed and not yet confirmed, oldest first: each is published in its turn,
    /// so that every watching socket is pushed every version.
    unconfirmed: VecDeque<Rc<Handoff>>,
    /// The hand-off was just read from storage: the next plan catches every socket up.
    restored: bool,
    /// Machine tokens with an `inc` below this are ended ([`Stored::machine_tokens_from`]).
    machine_tokens_from: u64,
}

impl Decider {
    pub fn new(caps: Caps) -> Decider {
        Decider {
            caps,
            handoff: Known::Unread,
            keys: None,
            outbox: Outbox::default(),
            waiters: Waiters::default(),
            published: None,
            unconfirmed: VecDeque::new(),
            restored: false,
            machine_tokens_from: 0,
        }
    }

    /// The hand-off as the decider holds it now (committed, not always confirmed yet).
    pub fn handoff(&self) -> Option<&Rc<Handoff>> {
        match &self.handoff {
            Known::Present(h) => Some(h),
            _ => None,
        }
    }

    /// The newest confirmed hand-off: what a waiter's timeout answers.
    pub fn published(&self) -> Option<&Rc<Handoff>> {
        self.published.as_ref()
    }

    /// The next thing to read before `ask` can be handled, given what `feed` already holds.
    pub fn next_read(&self, ask: &Ask, feed: &Feed, now: EpochMs) -> Option<Read> {
        if matches!(ask.op, Op::Floor) {
            return None;
        }
        if matches!(self.handoff, Known::Unread) {
            return Some(Read::Handoff { lineage: LINEAGE_TAIL_MAX });
        }
        if let Op::Create { .. } = &ask.op {
            // Only a new hand-off asks its owner's index, and only once.
            let new =
                ask.caller.role == Role::Owner && matches!(self.handoff, Known::Absent) && feed.admission.is_none();
            if !new {
                return None;
            }
            let record = new_record(&ask.caller, &ask.op, now)?;
            return Some(Read::Admission { owner: ask.caller.owner.clone(), row: Row::of(&record) });
        }
        // Nothing more is read for a caller who will be refused.
        self.owned(&ask.caller).ok()?;
        match &ask.op {
            Op::Preview { change, .. } => self.reach_read(&ask.caller, change, feed),
            Op::Change { change } => {
                if let Some(reach) = self.reach_read(&ask.caller, change, feed) {
                    return Some(reach);
                }
                let idem = ask.idempotency.as_ref()?;
                let Some(keys) = &self.keys else {
                    return Some(Read::Keys);
                };
                let live = keys.is_live(&idem.key, now);
                (live && feed.key.is_none()).then(|| Read::Key { key: idem.key.clone(), since: Keys::oldest_live(now) })
            }
            Op::Turns { before, limit } if feed.turns.is_none() => {
                let before = before.unwrap_or(SQL_BOUND).min(SQL_BOUND) as i64;
                Some(Read::Turns { before, limit: limit + 1 })
            }
            Op::Watch { .. } if feed.sockets.is_none() => Some(Read::Sockets(ask.caller.role)),
            Op::Events { batch } if feed.timeline.is_none() => {
                let first = batch.events.first().map_or(1, |e| e.seq);
                Some(Read::Timeline {
                    turn: batch.turn.min(SQL_BOUND),
                    after: first.saturating_sub(1).min(SQL_BOUND),
                    limit: batch.events.len(),
                })
            }
            Op::Timeline { turn, after, limit, .. } if feed.timeline.is_none() => {
                let turn = turn.unwrap_or(self.handoff()?.record.turn);
                Some(Read::Timeline { turn: turn.min(SQL_BOUND), after: (*after).min(SQL_BOUND), limit: *limit })
            }
            Op::Hook(HandoffHook::Storage) if feed.storage.is_none() => Some(Read::Storage),
            _ => None,
        }
    }

    /// The stored hand-off, `None` when none was ever created. What storage holds is durable:
    /// waiters may be told it.
    pub fn restore(&mut self, stored: Option<Stored>) -> Result<(), Unreadable> {
        let Some(stored) = stored else {
            self.handoff = Known::Absent;
            return Ok(());
        };
        let record: Record = read_json("record", &stored.record)?;
        let mut h = Handoff::create(record);
        for (name, json) in &stored.parts {
            match name.as_str() {
                "work" => h.work = read_json::<Work>("work", json)?,
                "ledger" => h.ledger = read_json::<Ledger>("ledger", json)?,
                "extras" => h.extras = read_json::<Extras>("extras", json)?,
                other => return Err(Unreadable(format!("a part this build does not know: {other}"))),
            }
        }
        if !stored.turns.is_empty() {
            let mut lineage: Vec<TurnEntry> =
                stored.turns.iter().map(|t| read_json("lineage entry", t)).collect::<Result<_, _>>()?;
            crate::order::sort_by_key(&mut lineage, |t| t.turn);
            h.lineage = lineage;
        }
        let h = Rc::new(h);
        let attempts = stored.attempts.filter(|(version, _)| *version == h.record.version).map_or(0, |(_, n)| n);
        self.outbox.restore(Owed {
            version: h.record.version,
            row: RowSend::of(&h.record),
            attempts,
            entered: stored.entered,
        });
        // A passed row only carries a notice: one this build cannot read is skipped (that notice
        // is lost), rather than refusing the whole hand-off as an unreadable record would.
        for (version, row) in &stored.passed {
            let Ok(row) = read_json::<Row>("passed row", row) else { continue };
            self.outbox.restore_passed(outbox::PassedRow {
                version: *version,
                row: RowSend { owner: h.record.owner.clone(), row, incarnation: h.record.incarnation },
            });
        }
        self.published = Some(h.clone());
        self.handoff = Known::Present(h);
        self.restored = true;
        self.machine_tokens_from = stored.machine_tokens_from;
        Ok(())
    }

    /// Every remembered key, as storage lists them.
    pub fn restore_keys(&mut self, entries: Vec<KeyEntry>) {
        self.keys = Some(Keys::restore(entries));
    }

    /// A commit, or the runtime's confirmation of it, failed: forget everything read, so that
    /// the next request reads what was really committed. Waiters and the confirmed version stay.
    pub fn failed(&mut self) {
        self.handoff = Known::Unread;
        self.keys = None;
        self.unconfirmed.clear();
        self.outbox.forget();
    }

    /// The hand-off, if it exists and `caller` may see it. Absent and another owner's are one
    /// answer, `handoff.not_found`, on every route, so that no owner learns whether another
    /// has a session. A machine token minted for another hand-off, or for an earlier life of
    /// this one (erased since), is refused as if the hand-off were not there; one that a newer
    /// create ended is 401 `auth.revoked`.
    fn owned(&self, caller: &Caller) -> Result<Rc<Handoff>, Refusal> {
        let h = match &self.handoff {
            Known::Present(h)
                if h.record.owner == caller.owner
                    && caller.reaches(&h.record.id)
                    && match caller.role {
                        Role::Owner => true,
                        Role::Machine => caller.incarnation >= h.record.incarnation,
                        // A credential reaches only a life begun since its machine was enrolled.
                        Role::Credential => h.record.incarnation >= caller.incarnation,
                    } =>
            {
                h
            }
            _ => return Err(Refusal::new(Code::HandoffNotFound, "no such hand-off")),
        };
        if caller.role == Role::Machine && caller.incarnation < self.machine_tokens_from {
            return Err(Refusal::new(
                Code::AuthRevoked,
                "this machine token was ended: the owner minted a newer one for this hand-off",
            ));
        }
        Ok(h.clone())
    }

    /// What to read before anything that is not an ask (the alarm, a watching socket's
    /// message): the hand-off, once per object lifetime.
    pub fn needs_handoff(&self) -> Option<Read> {
        matches!(self.handoff, Known::Unread).then_some(Read::Handoff { lineage: LINEAGE_TAIL_MAX })
    }

    /// Once after the hand-off was read from storage: the hand-off every watching socket is to
    /// be compared with before anything else, since a deploy, an eviction or a failure between
    /// a commit and its sends may have left a socket behind.
    pub fn take_catch_up(&mut self) -> Option<Rc<Handoff>> {
        if !std::mem::take(&mut self.restored) {
            return None;
        }
        self.handoff().cloned()
    }

    /// Decides everything `ask` causes. `feed` holds the reads [`Decider::next_read`] asked for.
    #[allow(clippy::too_many_lines, reason = "one arm per op: the table of what each ask of a hand-off decides")]
    pub fn handle(&mut self, ask: Ask, feed: Feed, at: Moment, wire: &impl Wire) -> Plan {
        let Ask { caller, op, idempotency } = ask;
        let role = caller.role;
        let refused = |refusal: Refusal| {
            Plan::rendered(wire.render(HandoffAnswer::Refused {
                refusal: &refusal,
                handoff: None,
                current_package: None,
            }))
        };
        // A machine credential asks a hand-off one thing only: its machine token.
        if role == Role::Credential && !matches!(op, Op::MachineToken { machine: Some(_), .. }) {
            return refused(Refusal::new(
                Code::AuthForbidden,
                "a machine credential asks a hand-off only for its machine token",
            ));
        }
        match op {
            Op::Floor => return Plan::rendered(wire.render(HandoffAnswer::Floor)),
            Op::Create { .. } => return self.create(&caller, op, feed.admission, at.now, wire),
            Op::Erase => return self.erase(&caller, at.now, wire),
            _ => {}
        }
        let h = match self.owned(&caller) {
            Ok(h) => h,
            Err(refusal) => return refused(refusal),
        };
        let refused_with = |refusal: Refusal| Plan::rendered(refusal_of(wire, &refusal, &h, role));
        match op {
            Op::Floor | Op::Create { .. } | Op::Erase => unreachable!("answered above"),
            Op::MachineToken { machine_token, incarnation, machine: None } => {
                self.machine_token(&caller, &h, &machine_token, incarnation, wire)
            }
            Op::MachineToken { machine_token, machine: Some(machine), .. } => {
                self.credential_token(&caller, &h, &machine_token, &machine, wire)
            }
            Op::Events { batch } => self.events(role, &h, &batch, feed, at.now, wire),
            Op::Timeline { turn, after, limit, timeout_s } => {
                let turn = turn.unwrap_or(h.record.turn);
                if turn > h.record.turn {
                    let message = format!("turn {turn} has not been opened: turn {} is current", h.record.turn);
                    return refused(Refusal::new(Code::TurnOutOfOrder, message));
                }
                let read = made(feed.timeline, "the timeline");
                // Held only while an event may still come: the turn is kept and has none after `after`.
                let hold = timeout_s > 0
                    && read.events.is_empty()
                    && !read.facts.dropped
                    && timeline::kept(turn, h.record.turn);
                let rendered = match timeline_rendered(turn, read, wire) {
                    Ok(rendered) => rendered,
                    Err(e) => return self.unreadable(e, wire),
                };
                if !hold {
                    return Plan::rendered(rendered);
                }
                let ask = TimelineAsk { turn, after, limit };
                match self.waiters.hold_timeline(role, ask, self.caps.waiters[role], waiter_cap_name(role)) {
                    Err(refusal) => refused(refusal),
                    Ok(waiter) => {
                        let jitter_ms = (at.random.clamp(0.0, 1.0) * WAIT_JITTER_MS_MAX as f64) as u64;
                        let timeout_ms = timeout_s * 1000 + jitter_ms;
                        Plan::reply(Reply::HoldTimeline { waiter, timeout_ms, timeout_body: rendered.body })
                    }
                }
            }
            Op::Change { change } => self.change(&caller, h, &change, idempotency, feed, at.now, wire),
            Op::Get => Plan::reply(Reply::Record { role }),
            Op::Wait { after, timeout_s } => {
                if turn::wait_answers_now(&h.record, after) || timeout_s == 0 {
                    return Plan::reply(Reply::Record { role });
                }
                match self.waiters.hold(role, after, self.caps.waiters[role], waiter_cap_name(role)) {
                    Err(refusal) => refused(refusal),
                    Ok(waiter) => {
                        let jitter_ms = (at.random.clamp(0.0, 1.0) * WAIT_JITTER_MS_MAX as f64) as u64;
                        Plan::reply(Reply::Hold { waiter, role, timeout_ms: timeout_s * 1000 + jitter_ms })
                    }
                }
            }
            Op::Watch { after, valid_until_s, subprotocol, timeline } => {
                let (cap_name, _) = watch::cap(role);
                let cap = self.caps.watchers[role];
                match watch::admit(made(feed.sockets, "the watching sockets"), cap, cap_name) {
                    Err(refusal) => refused(refusal),
                    Ok(()) => Plan::reply(Reply::Watch { role, after, valid_until_s, subprotocol, timeline }),
                }
            }
            Op::Turns { limit, .. } => {
                let texts = made(feed.turns, "the lineage entries");
                let entries: Result<Vec<TurnEntry>, Unreadable> =
                    texts.iter().map(|t| read_json("lineage entry", t)).collect();
                let mut entries = match entries {
                    Ok(entries) => entries,
                    Err(e) => return self.unreadable(e, wire),
                };
                let more = entries.len() > limit;
                entries.truncate(limit);
                entries.reverse();
                let next_before = if more { entries.first().map(|e| e.turn) } else { None };
                Plan::rendered(wire.render(HandoffAnswer::Turns { h: &h, role, turns: &entries, next_before }))
            }
            Op::Package { markdown } => match h.ledger.latest() {
                Err(refusal) => refused_with(refusal),
                Ok(latest) if markdown => {
                    Plan::rendered(wire.render(HandoffAnswer::Markdown(&crate::package::render_markdown(&latest))))
                }
                Ok(latest) => Plan::rendered(wire.render(HandoffAnswer::Changed {
                    h: &h,
                    role,
                    effect: &Effect::Package(latest),
                })),
            },
            Op::Briefing { budget_bytes, reach } => match h.ledger.latest() {
                Err(refusal) => refused_with(refusal),
                Ok(latest) => {
                    let words = briefing::owners_words(&h.record, &latest);
                    Plan::rendered(wire.render(HandoffAnswer::Text(
                        &briefing::render_with(&latest, words, budget_bytes, &reach.reach()).text,
                    )))
                }
            },
            Op::Work => Plan::rendered(wire.render(HandoffAnswer::Work { h: &h, role })),
            Op::Preview { change, budget_bytes, reach } => {
                let opened = model_reached(&h, &change, &feed.reach)
                    .and_then(|()| handoff::apply(&h, &change, role, at.now))
                    .and_then(|out| Ok((out.next.record, out.next.ledger.latest()?)));
                match opened {
                    Err(refusal) => refused_with(refusal),
                    Ok((next, latest)) => {
                        let turn = next.turn;
                        let words = briefing::owners_words(&next, &latest);
                        let text = briefing::render_with(&latest, words, budget_bytes, &reach.reach()).text;
                        Plan::rendered(wire.render(HandoffAnswer::Preview {
                            h: &h,
                            role,
                            turn,
                            latest: &latest,
                            briefing: &text,
                        }))
                    }
                }
            }
            Op::Hook(_) if role != Role::Owner => {
                refused(Refusal::new(Code::AuthForbidden, "test hooks are the owner's"))
            }
            Op::Hook(HandoffHook::Fault { fault }) => {
                let mut plan = Plan::rendered(wire.render(HandoffAnswer::Armed(fault)));
                plan.hook = Some(PlanHook::Arm(fault));
                plan
            }
            Op::Hook(HandoffHook::Storage) => {
                let facts = made(feed.storage, "the storage facts");
                Plan::rendered(wire.render(HandoffAnswer::Storage(&facts)))
            }
            Op::Hook(HandoffHook::Clock { advance_ms }) => {
                let mut plan = Plan::rendered(wire.render(HandoffAnswer::Erased));
                plan.hook = Some(PlanHook::AdvanceClockMs(advance_ms));
                plan
            }
        }
    }

    /// The answer of a held timeline read a batch woke, from what the object read again for it
    /// ([`Read::Timeline`] of its [`TimelineAsk`]).
    pub fn timeline_answer(
        &self,
        ask: TimelineAsk,
        read: TimelineRead,
        wire: &impl Wire,
    ) -> Result<Rendered, Unreadable> {
        timeline_rendered(ask.turn, read, wire)
    }

    /// `POST …/events`: the machine's batch, taken whole or refused, as [`timeline::take`]
    /// decides. Its writes move no version and publish nothing: no wait on the version wakes.
    fn events(
        &mut self,
        role: Role,
        h: &Handoff,
        batch: &timeline::Batch,
        feed: Feed,
        now: EpochMs,
        wire: &impl Wire,
    ) -> Plan {
        let turn = batch.turn;
        if role != Role::Machine {
            let refusal = Refusal::new(Code::AuthForbidden, "only the machine writes a turn's timeline");
            return Plan::rendered(wire.render(HandoffAnswer::Refused {
                refusal: &refusal,
                handoff: None,
                current_package: None,
            }));
        }
        let read = made(feed.timeline, "the timeline");
        let repeated: Vec<(u64, String)> = read.events.into_iter().map(|(seq, _, json)| (seq, json)).collect();
        // The turn's steers: the record's for the current turn, its lineage entry's before.
        let steers: &[crate::turn::Steer] = if turn == h.record.turn {
            &h.record.steers
        } else {
            h.lineage.iter().find(|e| e.turn == turn).map_or(&[], |e| &e.steers)
        };
        let taken = timeline::take(batch, h.record.turn, &read.facts, &repeated).and_then(|taken| {
            timeline::unknown_steer(batch, |id| steers.iter().any(|s| s.id == id)).map_err(timeline::Refused::from)?;
            Ok(taken)
        });
        match taken {
            Err(refused) => Plan::rendered(wire.render(HandoffAnswer::TimelineRefused {
                refusal: &refused.refusal,
                turn,
                next: refused.next,
            })),
            Ok(taken) => {
                let mut plan = Plan::rendered(wire.render(HandoffAnswer::TimelineTaken { turn, next: taken.next() }));
                if let (Some((first, _)), Some((last, _))) = (taken.new.first(), taken.new.last()) {
                    plan.events_taken = Some((turn, *first, *last));
                    plan.writes.push(Write::TimelineEvents { turn, at: now, events: taken.new });
                    plan.writes.push(Write::TimelineTurn { turn, facts: taken.facts });
                    if !self.waiters.is_empty() {
                        plan.wake_timeline = self.waiters.wake_timeline(turn, taken.facts.events);
                    }
                }
                plan
            }
        }
    }

    fn unreadable(&mut self, e: Unreadable, wire: &impl Wire) -> Plan {
        let refusal = Refusal::unavailable();
        let mut plan = Plan::rendered(wire.render(HandoffAnswer::Refused {
            refusal: &refusal,
            handoff: None,
            current_package: None,
        }));
        plan.log = Some(e.to_string());
        plan
    }

    fn create(
        &mut self,
        caller: &Caller,
        op: Op,
        admission: Option<Admission>,
        now: EpochMs,
        wire: &impl Wire,
    ) -> Plan {
        let refused = |refusal: &Refusal| {
            Plan::rendered(wire.render(HandoffAnswer::Refused { refusal, handoff: None, current_package: None }))
        };
        if caller.role != Role::Owner {
            return refused(&Refusal::new(Code::AuthForbidden, "only an owner creates a hand-off"));
        }
        let Op::Create { machine, size, machine_token, incarnation, prompt, placement, .. } = &op else {
            unreachable!("create handles only Op::Create");
        };
        let minted = *incarnation;
        if let Some(existing) = self.handoff().cloned() {
            if let Err(code) = existing.check_create_again(machine, size, prompt.as_deref(), placement) {
                let refusal = Refusal::new(
                    code,
                    "this session already has a hand-off with another machine, size, turn-1 prompt, workspace, runtime, model or permission mode",
                );
                return Plan::rendered(refusal_of(wire, &refusal, &existing, caller.role));
            }
            // Answered as it is: no token is minted, none is ended (a new one is the owner's
            // `POST …/machine-token`).
            return Plan::rendered(wire.render(HandoffAnswer::Created {
                h: &existing,
                role: caller.role,
                machine_token: None,
                new: false,
            }));
        }
        // The owner's index decided first, and holds the row when it admitted it.
        match admission {
            Some(Admission::Yes) => {}
            Some(Admission::No(crowded)) => return Plan::rendered(wire.render(HandoffAnswer::TooManyOpen(crowded))),
            None => return refused(&Refusal::unavailable()),
        }
        let Some(record) = new_record(caller, &op, now) else {
            unreachable!("an owner's create always makes a record");
        };
        let h = Handoff::create(record);
        let rendered = wire.render(HandoffAnswer::Created {
            h: &h,
            role: caller.role,
            machine_token: Some(machine_token),
            new: true,
        });
        let dirty = Dirty { lineage_from: Some(0), extras: h.extras != Extras::default(), ..Dirty::default() };
        match self.store(h, dirty, EventKind::Create, caller.role, now) {
            Err(refusal) => refused(&refusal),
            Ok(stored) => {
                let mut plan = stored.plan(rendered);
                plan.writes.insert(0, Write::Schema);
                self.machine_tokens_from = minted;
                plan.writes.push(Write::MachineTokensFrom { from: minted });
                plan
            }
        }
    }

    /// `POST …/machine-token`: the owner's, on an open hand-off. The fresh token ends every one
    /// minted before it; the record does not move.
    fn machine_token(
        &mut self,
        caller: &Caller,
        h: &Handoff,
        machine_token: &str,
        minted: u64,
        wire: &impl Wire,
    ) -> Plan {
        if caller.role != Role::Owner {
            let refusal = Refusal::new(Code::AuthForbidden, "only the owner mints a machine token");
            return Plan::rendered(refusal_of(wire, &refusal, h, caller.role));
        }
        if let Err(refusal) = h.record.check_open() {
            return Plan::rendered(refusal_of(wire, &refusal, h, caller.role));
        }
        let mut plan = Plan::rendered(wire.render(HandoffAnswer::Created {
            h,
            role: caller.role,
            machine_token: Some(machine_token),
            new: false,
        }));
        if minted > self.machine_tokens_from {
            self.machine_tokens_from = minted;
            plan.writes.push(Write::MachineTokensFrom { from: minted });
        }
        plan
    }

    /// A machine credential's `POST /v1/machine/handoffs/{id}/machine-token`: the hand-off is
    /// for its machine (and, as `owned` checked, created since it was enrolled); the token
    /// ends no other, so a daemon taking a session cuts off nobody already serving it.
    fn credential_token(
        &mut self,
        caller: &Caller,
        h: &Handoff,
        machine_token: &str,
        machine: &str,
        wire: &impl Wire,
    ) -> Plan {
        if caller.role != Role::Credential || h.record.machine != machine {
            let refusal = Refusal::new(Code::HandoffNotFound, "no such hand-off for this machine");
            return Plan::rendered(wire.render(HandoffAnswer::Refused {
                refusal: &refusal,
                handoff: None,
                current_package: None,
            }));
        }
        if let Err(refusal) = h.record.check_open() {
            return Plan::rendered(refusal_of(wire, &refusal, h, Role::Machine));
        }
        Plan::rendered(wire.render(HandoffAnswer::Created {
            h,
            role: Role::Machine,
            machine_token: Some(machine_token),
            new: false,
        }))
    }

    /// `DELETE`: the owner's. Absent and another owner's are both 404 `handoff.not_found`, as
    /// on every other route (so a retried DELETE of an erased hand-off is 404 too: gone either
    /// way); an open hand-off is closed first, so that every waiter and watcher is told the
    /// close; then the plan erases it (204).
    fn erase(&mut self, caller: &Caller, now: EpochMs, wire: &impl Wire) -> Plan {
        let refused = |refusal: &Refusal| {
            Plan::rendered(wire.render(HandoffAnswer::Refused { refusal, handoff: None, current_package: None }))
        };
        if caller.role != Role::Owner {
            return refused(&Refusal::new(Code::AuthForbidden, "only the owner erases a hand-off"));
        }
        let h = match self.owned(caller) {
            Ok(h) => h,
            Err(refusal) => return refused(&refusal),
        };
        let mut plan = if h.record.is_closed() {
            Plan::rendered(wire.render(HandoffAnswer::Erased))
        } else {
            let close = Change::Turn { command: turn::Command::Close, unmet: None, usage: None, package: None };
            let out = match handoff::apply(&h, &close, Role::Owner, now) {
                Ok(out) => out,
                Err(refusal) => return Plan::rendered(refusal_of(wire, &refusal, &h, Role::Owner)),
            };
            match self.store(out.next, out.dirty, close.kind(), Role::Owner, now) {
                Err(refusal) => return Plan::rendered(refusal_of(wire, &refusal, &h, Role::Owner)),
                Ok(stored) => stored.plan(wire.render(HandoffAnswer::Erased)),
            }
        };
        plan.erase = true;
        plan
    }

    /// The object erased everything it stored: the hand-off is gone, and a create starts a new
    /// life of it.
    pub fn erased(&mut self) {
        self.handoff = Known::Absent;
        self.keys = None;
        self.outbox = Outbox::default();
        self.published = None;
        self.unconfirmed.clear();
        self.restored = false;
        self.machine_tokens_from = 0;
    }

    /// After the alarm's row send: what the alarm leads to next (the hand-off must have been
    /// read). A closed hand-off past its retention is erased; one within it has its alarm set
    /// for then; while a row is still owed, the outbox's own retry comes first.
    pub fn after_alarm(&self, now: EpochMs, retention: Retention) -> AfterAlarm {
        let Some(h) = self.handoff() else {
            return AfterAlarm::Nothing;
        };
        if !h.record.is_closed() || self.outbox.is_owing() {
            return AfterAlarm::Nothing;
        }
        let closed_at = h.record.updated_at.ms();
        if retention.erase_due(closed_at, now) {
            return AfterAlarm::Erase;
        }
        AfterAlarm::At(retention.erase_at(closed_at))
    }

    /// A hand-off turn with a model (chosen or carried over), opened or previewed, asks what its
    /// target runtime reaches on the hand-off's machine, once.
    fn reach_read(&self, caller: &Caller, change: &Change, feed: &Feed) -> Option<Read> {
        let Change::Turn { command: turn::Command::OpenTurn { .. }, package: Some(request), .. } = change else {
            return None;
        };
        let h = self.handoff()?;
        let needed = feed.reach.is_none() && crate::placement::handed_model(&h.record.placement, request).is_some();
        needed.then(|| Read::Reach {
            owner: caller.owner.clone(),
            machine: h.record.machine.clone(),
            runtime: request.runtime.clone(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn change(
        &mut self,
        caller: &Caller,
        h: Rc<Handoff>,
        change: &Change,
        idempotency: Option<Idempotency>,
        feed: Feed,
        now: EpochMs,
        wire: &impl Wire,
    ) -> Plan {
        let role = caller.role;
        if let Some(idem) = &idempotency {
            let remembered = feed.key.flatten();
            match idempotency::decide(remembered.as_ref(), &idem.fingerprint) {
                Decision::Fresh => {}
                Decision::Mismatch => {
                    let refusal =
                        Refusal::new(Code::IdempotencyMismatch, "this Idempotency-Key was used for another request");
                    return Plan::rendered(wire.render(HandoffAnswer::Refused {
                        refusal: &refusal,
                        handoff: None,
                        current_package: None,
                    }));
                }
                Decision::Replay(r) => {
                    // The digest proves a rebuilt answer the first, so the current package is
                    // simply tried: a later package fails the digest and the slim answer stands.
                    let current = h.ledger.current.as_ref();
                    let body = idempotency::replay(r, |slim| {
                        current.and_then(|c| wire.with_package(slim, &c.document.of(&c.package)))
                    });
                    return Plan::rendered(Rendered { status: r.status, content_type: JSON, body, replayed: true });
                }
            }
        }
        if let Err(refusal) = model_reached(&h, change, &feed.reach) {
            return Plan::rendered(refusal_of(wire, &refusal, &h, role));
        }
        let out = match handoff::apply(&h, change, role, now) {
            Err(refusal) => return Plan::rendered(refusal_of(wire, &refusal, &h, role)),
            Ok(out) => out,
        };
        let answer = HandoffAnswer::Changed { h: &out.next, role, effect: &out.effect };
        let rendered = wire.render(answer);
        let dry_run = matches!(change, Change::Compile { dry_run: true, .. });
        let remember = idempotency.filter(|_| idempotency::keeps(rendered.status, dry_run)).map(|idem| {
            let without =
                || (rendered.body.len() > IDEMPOTENCY_ANSWER_BYTES_MAX).then(|| wire.without_package(answer)).flatten();
            (idem.key, idempotency::remember(&idem.fingerprint, rendered.status, &rendered.body, without))
        });
        if let Some((_, r)) = &remember {
            if let Err(refusal) = fits("a remembered answer", r.body.len(), STORED_VALUE_BYTES_MAX) {
                return Plan::rendered(refusal_of(wire, &refusal, &h, role));
            }
        }
        let mut plan = if out.moved {
            match self.store(out.next, out.dirty, change.kind(), role, now) {
                Err(refusal) => return Plan::rendered(refusal_of(wire, &refusal, &h, role)),
                Ok(stored) => stored.plan(rendered),
            }
        } else {
            Plan::rendered(rendered)
        };
        if let Some((key, r)) = remember {
            plan.writes.extend(self.remember(key, r, now));
        }
        plan
    }

    /// The writes that remember `r` under `key`: the expired keys and the oldest forgotten
    /// first, as [`Keys::remember`] decides.
    fn remember(&mut self, key: String, r: Remembered, now: EpochMs) -> Vec<Write> {
        let bytes = r.bytes();
        let forget = self.keys.get_or_insert_with(Keys::default).remember(&key, bytes, now);
        let mut writes = Vec::new();
        if let Some(before) = forget.expired_before {
            writes.push(Write::ForgetExpired { before });
        }
        writes.extend(forget.keys.into_iter().map(|key| Write::Forget { key }));
        writes.push(Write::Remember { key, remembered: r, at: now, bytes });
        writes
    }

    /// The writes of the next hand-off `h` (what moved of it, the history event, the trims of
    /// the bounded tables), every value size-checked first; on success the decider holds `h`,
    /// and the plan publishes its version and sends its row.
    fn store(
        &mut self,
        h: Handoff,
        dirty: Dirty,
        kind: EventKind,
        actor: Role,
        now: EpochMs,
    ) -> Result<Staged, Refusal> {
        let record = &h.record;
        let record_json = to_json(record);
        let work_json = dirty.work.then(|| to_json(&h.work));
        if let Some(json) = &work_json {
            if json.len() > WORK_RECORD_BYTES_MAX {
                return Err(Refusal::new(
                    Code::RequestTooLarge,
                    format!("the work record would pass {WORK_RECORD_BYTES_MAX} bytes"),
                ));
            }
        }
        let parts = [
            (Part::Work, work_json),
            (Part::Ledger, dirty.ledger.then(|| to_json(&h.ledger))),
            (Part::Extras, dirty.extras.then(|| to_json(&h.extras))),
        ];
        let from = dirty.lineage_from.unwrap_or(h.lineage.len()).min(h.lineage.len());
        // The entry whose prompt was dropped is always older than the ones written from `from`.
        let dropped = dirty.lineage_dropped.and_then(|at| h.lineage.get(at));
        let entries: Vec<(u64, String)> =
            dropped.into_iter().chain(&h.lineage[from..]).map(|e| (e.turn, to_json(e))).collect();
        let row_send = RowSend::of(record);
        let row_bytes = to_json(&row_send.row).len();
        let largest = [record_json.len(), row_bytes]
            .into_iter()
            .chain(parts.iter().filter_map(|(_, j)| j.as_ref().map(String::len)))
            .chain(entries.iter().map(|(_, e)| e.len()))
            .max()
            .unwrap_or(0);
        fits("the change would store a value", largest, STORED_VALUE_BYTES_MAX)?;

        let version = record.version;
        let entered = notice::entered(self.outbox.owed().map(|o| &o.row.row), &row_send.row);
        let mut writes = vec![Write::Record { json: record_json, entered }];
        for (name, json) in parts {
            if let Some(json) = json {
                writes.push(Write::Part { name, json });
            }
        }
        for (turn, entry) in entries {
            writes.push(Write::Turn { turn, entry });
        }
        if let Some(through) = record.turn.checked_sub(TURNS_KEPT_PER_HANDOFF_MAX as u64).filter(|t| *t > 0) {
            writes.push(Write::TrimTurns { through });
        }
        let opened = self.handoff().is_some_and(|before| record.turn > before.record.turn);
        if let Some(through) = timeline::dropped_through(record.turn).filter(|_| opened) {
            writes.push(Write::TrimTimeline { through });
        }
        writes.push(Write::Event { version, at: record.updated_at.ms(), kind, actor });
        if let Some(through) = events_trimmed_through(version) {
            writes.push(Write::TrimEvents { through });
        }
        let committed = self.outbox.on_commit(version, row_send, entered, now);
        if let Some(pass) = committed.pass {
            writes.push(Write::Pass { version: pass.version, row: to_json(&pass.row.row) });
        }
        if let Some(through) = committed.unpass_through {
            writes.push(Write::Unpass { through });
        }
        let alarm_at = committed.alarm_at;
        if let Some(before) = self.handoff() {
            assert_eq!(version, before.record.version + 1, "a stored change moves the version by exactly one");
        }
        let h = Rc::new(h);
        self.unconfirmed.push_back(h.clone());
        self.handoff = Known::Present(h);
        Ok(Staged { writes, alarm_at, version })
    }

    /// The runtime confirmed the commit of `version`: it is what waiters may be told now.
    /// Answers the waiters it answers and the hand-off every watching socket is compared with.
    pub fn confirm(&mut self, version: u64) -> Option<Wake> {
        let mut confirmed = None;
        while self.unconfirmed.front().is_some_and(|h| h.record.version <= version) {
            confirmed = self.unconfirmed.pop_front();
        }
        let h = confirmed.filter(|h| h.record.version == version)?;
        if self.published.as_ref().is_none_or(|p| p.record.version < version) {
            self.published = Some(h);
        }
        let published = self.published.clone()?;
        let waiters = if self.waiters.is_empty() { Vec::new() } else { self.waiters.wake(&published.record) };
        Some(Wake { handoff: published, waiters })
    }

    /// A waiter timed out or its client went away: its place is free.
    pub fn release(&mut self, waiter: WaiterId) {
        self.waiters.release(waiter);
    }

    pub fn waiters_of(&self, role: Role) -> usize {
        self.waiters.len_of(role)
    }

    /// The send to the owner's index to make now, if any.
    pub fn poll_row_send(&mut self) -> Option<outbox::Send<RowSend>> {
        self.outbox.poll_send()
    }

    pub fn is_taken(&self, version: u64) -> bool {
        self.outbox.is_taken(version)
    }

    pub fn is_sending(&self) -> bool {
        self.outbox.is_sending()
    }

    /// The send on its way ended (`ok`: the index holds its row). After a failure the attempts
    /// are stored and the alarm tries again; after a success the passed rows it carried go.
    pub fn on_row_sent(&mut self, version: u64, ok: bool, now: EpochMs) -> Sent {
        let ended = self.outbox.on_sent(ok, now);
        let Some(retry_at) = ended.retry_at else {
            return Sent { retry_at: None, write: ended.unpass_through.map(|through| Write::Unpass { through }) };
        };
        let write = self.outbox.owed().filter(|o| o.version == version).map(|o| Write::Attempts {
            owner: o.row.owner.clone(),
            version: o.version,
            row: to_json(&o.row.row),
            attempts: o.attempts,
        });
        Sent { retry_at: Some(retry_at), write }
    }

    /// The alarm rang: the send it owes now, if any (the hand-off must have been read).
    pub fn on_alarm(&mut self) -> Option<outbox::Send<RowSend>> {
        self.outbox.on_alarm()
    }
}

/// What an alarm leads to once its row send is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAlarm {
    Nothing,
    /// Set the alarm then (the hand-off's erasure).
    At(EpochMs),
    /// Erase the hand-off now.
    Erase,
}

/// The record an owner's create makes when the hand-off is new, its life the create's
/// `incarnation` (or `now` when the ask carries none).
fn new_record(caller: &Caller, op: &Op, now: EpochMs) -> Option<Record> {
    let Op::Create { id, session, machine, size, incarnation, prompt, placement, .. } = op else {
        return None;
    };
    let mut record =
        Record::create(id.clone(), caller.owner.clone(), session.clone(), machine.clone(), size.clone(), now);
    record.prompt = prompt.clone();
    record.placement = placement.clone();
    if *incarnation > 0 {
        record.incarnation = *incarnation;
    }
    Some(record)
}

/// A turn's events as `GET …/events` answers them.
fn timeline_rendered(turn: u64, read: TimelineRead, wire: &impl Wire) -> Result<Rendered, Unreadable> {
    let events: Vec<timeline::Event> = read
        .events
        .iter()
        .map(|(_, at, json)| timeline::read_back(json, *at))
        .collect::<Result<_, _>>()
        .map_err(|e| Unreadable(format!("timeline event: {e}")))?;
    Ok(wire.render(HandoffAnswer::Timeline {
        turn,
        events: &events,
        next: read.facts.next(),
        dropped: read.facts.dropped,
    }))
}

/// Turn numbers and `seq`s stay far below 2^53, past which the runtime's SQL numbers lose
/// precision: a read asks for no larger one.
const SQL_BOUND: u64 = 1 << 53;

/// The media type of every JSON answer.
pub const JSON: &str = "application/json";

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a stored value is plain data: it always serialises")
}

/// 413 `request.too_large` when a value of `bytes` is over `max`.
fn fits(what: &str, bytes: usize, max: usize) -> Result<(), Refusal> {
    if bytes > max {
        return Err(Refusal::new(Code::RequestTooLarge, format!("{what} of {bytes} bytes, over {max}")));
    }
    Ok(())
}

/// A hand-off turn's model (chosen or carried over) against what its target runtime reaches on
/// the hand-off's machine ([`Feed::reach`]); any other change has none to check.
fn model_reached(h: &Handoff, change: &Change, reach: &Option<Option<Vec<String>>>) -> Result<(), Refusal> {
    let Change::Turn { command: turn::Command::OpenTurn { .. }, package: Some(request), .. } = change else {
        return Ok(());
    };
    let Some(model) = crate::placement::handed_model(&h.record.placement, request) else {
        return Ok(());
    };
    let reached = reach.as_ref().and_then(|r| r.as_deref());
    crate::placement::check_reach(&h.record.machine, &request.runtime, model, reached)
}

/// A refusal of a hand-off the caller may see: with its record, and with the current package
/// on `package.stale`, so that a destination can read it again.
fn refusal_of(wire: &impl Wire, refusal: &Refusal, h: &Handoff, role: Role) -> Rendered {
    let current_package = match (refusal.code, &h.ledger.current) {
        (Code::PackageStale, Some(offer)) => Some((offer.version, offer.hash.as_str())),
        _ => None,
    };
    wire.render(HandoffAnswer::Refused { refusal, handoff: Some((h, role)), current_package })
}

/// A stored change, before its answer: its writes, its alarm and its version.
struct Staged {
    writes: Vec<Write>,
    alarm_at: Option<EpochMs>,
    version: u64,
}

impl Staged {
    /// The plan that answers `rendered` once the change is published and its row taken.
    fn plan(self, rendered: Rendered) -> Plan {
        Plan {
            reply: Reply::Rendered(rendered),
            writes: self.writes,
            alarm_at: self.alarm_at,
            publish: Some(self.version),
            send_rows_through: Some(self.version),
            log: None,
            erase: false,
            hook: None,
            wake_timeline: Vec::new(),
            events_taken: None,
        }
    }
}

mod erase;
pub use erase::{EraseStep, Erasing, Erasure};

#[cfg(test)]
mod tests;
