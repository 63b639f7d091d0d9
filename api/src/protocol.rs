//! How the Worker's asks travel to its objects: a hand-off's [`Ask`] (the core's, already
//! authenticated and read) and an owner's [`IndexAsk`], serialised over the objects' internal
//! `fetch` in a versioned [`Envelope`].

use handoff_core::owner;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The version of the asks below. Raise it with any change an older build would misread.
/// During a deploy a Worker and an object of different builds can meet for a moment: an ask
/// of another version is refused (the object answers 503 `store.unavailable`, which every
/// client retries) rather than misread.
pub const PROTOCOL_VERSION: u32 = 7;

/// An ask on the wire: `{"v": PROTOCOL_VERSION, "ask": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub v: u32,
    pub ask: T,
}

/// Why an ask could not be read.
#[derive(Debug)]
pub enum Unreadable {
    /// Not an envelope of this ask type (an older build sends none).
    Json(serde_json::Error),
    /// Another build's version of the protocol.
    Version(u32),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Json(e) => write!(f, "not an ask of protocol version {PROTOCOL_VERSION}: {e}"),
            Unreadable::Version(v) => write!(f, "protocol version {v}, this build reads {PROTOCOL_VERSION}"),
        }
    }
}

/// The wire text of `ask`.
pub fn encode<T: Serialize>(ask: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string(&Envelope { v: PROTOCOL_VERSION, ask })
}

/// The header that carries an ask: always where the request can have no body (the upgrade of
/// a watch, which the runtime forwards to the object as a `GET` with `Upgrade: websocket`),
/// and in place of the body for every ask up to [`ASK_HEADER_BYTES_MAX`].
pub const ASK_HEADER: &str = "Handoff-Ask";

/// The longest wire text of an ask that travels in [`ASK_HEADER`] rather than as the body.
/// An object reads a header with no await, but a body with one (a promise, a microtask, a
/// copy), which `scripts/profile` measured at about a tenth of the floor's CPU (issue 12).
/// A longer ask (a work record near its cap) is the body, so that no request's headers come
/// near the runtime's limit on them.
pub const ASK_HEADER_BYTES_MAX: usize = 8 * 1024;

/// The [`ASK_HEADER`] value of `ask`: its wire text in unpadded base64url, so that any text
/// the ask holds is a valid header value.
pub fn encode_header<T: Serialize>(ask: &T) -> Result<String, serde_json::Error> {
    Ok(header_value(&encode(ask)?))
}

/// How a wire text from [`encode`] travels: its [`ASK_HEADER`] value when it is at most
/// [`ASK_HEADER_BYTES_MAX`] long, or `None` for the request's body.
pub fn header_of(wire: &str) -> Option<String> {
    (wire.len() <= ASK_HEADER_BYTES_MAX).then(|| header_value(wire))
}

fn header_value(wire: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(wire)
}

/// Reads an [`ASK_HEADER`] value written by [`encode_header`].
pub fn decode_header<T: DeserializeOwned>(value: &str) -> Result<T, Unreadable> {
    decode(&header_text(value)?)
}

/// The wire text of an [`ASK_HEADER`] value written by [`encode_header`].
pub fn header_text(value: &str) -> Result<String, Unreadable> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .map_err(|e| Unreadable::Json(serde::de::Error::custom(e)))?;
    String::from_utf8(bytes).map_err(|e| Unreadable::Json(serde::de::Error::custom(e)))
}

/// Reads an ask sent by [`encode`] of this build's version.
pub fn decode<T: DeserializeOwned>(text: &str) -> Result<T, Unreadable> {
    let envelope: Envelope<T> = handoff_core::json::from_slice(text.as_bytes()).map_err(Unreadable::Json)?;
    if envelope.v != PROTOCOL_VERSION {
        return Err(Unreadable::Version(envelope.v));
    }
    Ok(envelope.ask)
}

pub use handoff_core::decider::{Ask, Caller, Idempotency, Op, Reaching};

/// A hand-off's request as the router sends it to the object: who asks, the route, and what of
/// the request its reader reads, the body travelling beside it as bytes. The object reads the
/// [`Ask`] from it (`admission::read`): a body is parsed once on the whole path, and no `Op` is
/// encoded by the router or decoded by the object (their readers were about a third of the
/// `.wasm`'s code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SentWire", into = "SentWire")]
pub struct Sent {
    pub caller: Caller,
    /// The route's place in `routes::ROUTES` (one build's table: the version says which).
    pub route: usize,
    /// `{id}` and `{bid}` of the path.
    pub id: String,
    pub blocker: Option<String>,
    /// The request's URL, as the client sent it.
    pub url: String,
    /// Its `Idempotency-Key`, checked where a change reads it.
    pub key: Option<String>,
    /// What a watch is held to (`routes::Watching`).
    pub valid_until_s: i64,
    pub subprotocol: bool,
    pub v2: bool,
    /// A create's or the machine-token route's token, minted by the router (which holds the
    /// key), and the moment it was minted at (its `inc`).
    pub minted: Option<(String, u64)>,
    /// A machine credential's machine, asking for its hand-off's machine token.
    pub machine: Option<String>,
    /// A create's placement as its enrolled machine's `Machines` object fitted it (the
    /// body's own where none did).
    pub placement: Option<handoff_core::placement::Placement>,
}

/// [`Sent`] on the wire, by position, its caller's four parts first.
type SentWire = (
    (String, handoff_core::role::Role, u64, Option<String>),
    usize,
    String,
    Option<String>,
    String,
    Option<String>,
    (i64, bool, bool),
    Option<(String, u64)>,
    Option<String>,
    Option<handoff_core::placement::Placement>,
);

impl From<SentWire> for Sent {
    fn from(wire: SentWire) -> Sent {
        let ((owner, role, incarnation, hid), route, id, blocker, url, key, watch, minted, machine, placement) = wire;
        let (valid_until_s, subprotocol, v2) = watch;
        let caller = Caller { owner, role, incarnation, hid };
        Sent { caller, route, id, blocker, url, key, valid_until_s, subprotocol, v2, minted, machine, placement }
    }
}

impl From<Sent> for SentWire {
    fn from(s: Sent) -> SentWire {
        let c = s.caller;
        let caller = (c.owner, c.role, c.incarnation, c.hid);
        let watch = (s.valid_until_s, s.subprotocol, s.v2);
        (caller, s.route, s.id, s.blocker, s.url, s.key, watch, s.minted, s.machine, s.placement)
    }
}
pub use handoff_core::hooks::{Fault, HandoffHook, IndexHook};

/// What travels to an owner's index object: a hand-off object's asks of it, a refresh (which
/// the router reads: its credential is a cookie's), or an owner's request, which the index
/// reads itself (`admission::read_index`), so that its body is parsed once and no reader of an
/// [`IndexAsk`] is compiled. Externally tagged (`{"put": {…}}`): an internal tag makes serde
/// buffer the whole ask and read each variant's fields a second way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// Tuple variants, and the requests as tuples on the wire: read by position, each costs the
// `.wasm` less than named fields would (a struct's reader also reads it from an array).
pub enum ToIndex {
    /// [`IndexAsk::Put`]: the row, the rows it passed, the life that sent it.
    Put(handoff_core::rows::Row, Vec<handoff_core::rows::Row>, u64),
    /// [`IndexAsk::Open`].
    Open(handoff_core::rows::Row),
    /// [`IndexAsk::Drop`]: the hand-off and its life erased.
    Drop(String, u64),
    /// `POST /v1/devices/refresh`: the credential's device and hash, and a fresh access token.
    Refresh(String, String, owner::devices::Granted),
    Sent(IndexSent),
}

/// An owner's request of its index as the router sends it: who asks (the token's owner and the
/// device it was minted from), the route, and what of the request its reader reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "IndexSentWire", into = "IndexSentWire")]
pub struct IndexSent {
    pub owner: String,
    pub device: Option<String>,
    /// The route's place in `routes::ROUTES`.
    pub route: usize,
    pub id: Option<String>,
    pub url: String,
    pub if_none_match: Option<String>,
    /// The request's body, as text (one that is not is read by the router: `admission`).
    pub body: String,
}

type IndexSentWire = (String, Option<String>, usize, Option<String>, String, Option<String>, String);

impl From<IndexSentWire> for IndexSent {
    fn from((owner, device, route, id, url, if_none_match, body): IndexSentWire) -> IndexSent {
        IndexSent { owner, device, route, id, url, if_none_match, body }
    }
}

impl From<IndexSent> for IndexSentWire {
    fn from(s: IndexSent) -> IndexSentWire {
        (s.owner, s.device, s.route, s.id, s.url, s.if_none_match, s.body)
    }
}

/// What an owner's index object is asked, as its routes read it. Never on the wire itself
/// ([`ToIndex`] is): without a reader of its own it costs the `.wasm` nothing to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexAsk {
    /// A hand-off's row, sent from its outbox; kept only if its version is higher. `passed`
    /// are older rows of it that entered something a notice names and that the index may not
    /// hold yet, oldest first: notices are owed along the chain (`notice::owed_chain`), and
    /// only `row` is stored.
    Put {
        row: handoff_core::rows::Row,
        passed: Vec<handoff_core::rows::Row>,
        /// The life of the hand-off that sent it (its record's `incarnation`): a row of a
        /// life erased since is not taken.
        incarnation: u64,
    },
    /// A page of the list; `if_none_match` is the client's header, so that a page it holds
    /// is answered 304 (`wire::index`).
    List {
        query: handoff_core::rows::ListQuery,
        if_none_match: Option<String>,
    },
    /// `POST /v1/webhooks`: the webhook (its id and secret drawn by the Worker), if it fits.
    WebhookAdd {
        webhook: crate::notifications::Webhook,
        secret: String,
    },
    WebhookList,
    WebhookDelete {
        id: String,
    },
    WebhookDeliveries {
        id: String,
    },
    /// `POST /v1/push/subscriptions`: the subscription (its id drawn by the Worker), if it fits.
    PushSubscribe {
        subscription: crate::notifications::StoredSubscription,
    },
    PushSubscriptions,
    PushUnsubscribe {
        id: String,
    },
    /// A new hand-off's first row: admitted and added when the owner holds fewer open
    /// hand-offs than the cap (answers `Admission`), in one step.
    Open {
        row: handoff_core::rows::Row,
    },
    /// Life `incarnation` of the hand-off `id` was erased: its row and every delivery of it go.
    Drop {
        id: String,
        incarnation: u64,
    },
    // The device's asks are tuple variants: read by position, they cost the `.wasm` less than
    // named fields would (each name is one more match in the object's reader).
    /// `POST /v1/devices`: the device (its id and credential drawn by the Worker, its
    /// credential's hash only) and what the Worker minted for it, if it fits.
    DeviceSignIn(owner::devices::StoredDevice, owner::devices::Granted),
    /// `POST /v1/devices/refresh`: the credential's device and hash, and a fresh access token.
    DeviceRefresh(String, String, owner::devices::Granted),
    /// `GET /v1/devices`, with the caller's device.
    Devices(Option<String>),
    /// `PATCH /v1/devices/{id}`: the device, its new name, and the caller's device.
    DeviceRename(String, String, Option<String>),
    DeviceRevoke(String),
    /// `POST /v1/devices/revoke-all`: the device kept, if any.
    DeviceRevokeAll(Option<String>),
    /// Test hooks (only where test hooks are on).
    Hook(IndexHook),
}

impl ToIndex {
    /// The index's ask, when a hand-off object or the router read it; an owner's request, which
    /// the index reads itself, otherwise.
    pub fn asked(self) -> Result<IndexAsk, IndexSent> {
        Ok(match self {
            ToIndex::Put(row, passed, incarnation) => IndexAsk::Put { row, passed, incarnation },
            ToIndex::Open(row) => IndexAsk::Open { row },
            ToIndex::Drop(id, incarnation) => IndexAsk::Drop { id, incarnation },
            ToIndex::Refresh(id, secret_hash, granted) => IndexAsk::DeviceRefresh(id, secret_hash, granted),
            ToIndex::Sent(sent) => return Err(sent),
        })
    }
}

impl IndexAsk {
    /// The owner index's ask in the core's words (`handoff_core::owner::Index::handle`).
    pub fn into_owner(self) -> owner::Ask {
        use owner::receiver::Receiver;
        match self {
            IndexAsk::Put { row, passed, incarnation } => owner::Ask::Put { row, passed, incarnation },
            IndexAsk::List { query, if_none_match } => owner::Ask::List { query, if_none_match },
            IndexAsk::WebhookAdd { webhook, secret } => owner::Ask::AddReceiver(webhook.entry(secret)),
            IndexAsk::WebhookList => owner::Ask::Receivers(Receiver::Webhook),
            IndexAsk::WebhookDelete { id } => owner::Ask::RemoveReceiver { receiver: Receiver::Webhook, id },
            IndexAsk::WebhookDeliveries { id } => owner::Ask::Deliveries { id },
            IndexAsk::PushSubscribe { subscription } => owner::Ask::AddReceiver(subscription.entry()),
            IndexAsk::PushSubscriptions => owner::Ask::Receivers(Receiver::Push),
            IndexAsk::PushUnsubscribe { id } => owner::Ask::RemoveReceiver { receiver: Receiver::Push, id },
            IndexAsk::Open { row } => owner::Ask::Open { row },
            IndexAsk::Drop { id, incarnation } => owner::Ask::Drop { id, incarnation },
            IndexAsk::DeviceSignIn(device, granted) => owner::Ask::SignIn { device, granted },
            IndexAsk::DeviceRefresh(id, secret_hash, granted) => owner::Ask::Refresh { id, secret_hash, granted },
            IndexAsk::Devices(current) => owner::Ask::Devices { current },
            IndexAsk::DeviceRename(id, name, current) => owner::Ask::RenameDevice { id, name, current },
            IndexAsk::DeviceRevoke(id) => owner::Ask::RevokeDevice { id },
            IndexAsk::DeviceRevokeAll(keep) => owner::Ask::RevokeAll { keep },
            IndexAsk::Hook(hook) => owner::Ask::Hook(hook),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::handoff::Change;
    use handoff_core::role::Role;

    fn ask() -> Ask {
        Ask {
            caller: Caller { owner: "alice".into(), role: Role::Owner, incarnation: 0, hid: None },
            op: Op::Wait { after: 3, timeout_s: 30 },
            idempotency: None,
        }
    }

    #[test]
    fn a_receiver_reaches_the_index_with_the_events_it_was_registered_for() {
        use crate::notifications::{StoredSubscription, Webhook};
        use handoff_core::notice::Notice;
        use handoff_core::time::Timestamp;
        let events = vec!["needs-you".to_string(), "done".to_string()];
        let webhook = Webhook {
            id: "wh_1".into(),
            url: "https://h.example/".into(),
            events: events.clone(),
            created_at: Timestamp::from_ms(7),
        };
        let owner::Ask::AddReceiver(entry) = (IndexAsk::WebhookAdd { webhook, secret: "whsec_x".into() }).into_owner()
        else {
            panic!("an add")
        };
        assert_eq!((entry.events, entry.created_at), (vec![Notice::NeedsYou, Notice::Done], 7));
        let subscription = StoredSubscription {
            id: "ps_1".into(),
            endpoint: "https://push.example/x".into(),
            origin: "https://push.example".into(),
            p256dh: "k".into(),
            auth: "a".into(),
            events,
            created_at: Timestamp::from_ms(9),
            console: "https://console.example".into(),
            device: None,
        };
        let owner::Ask::AddReceiver(entry) = (IndexAsk::PushSubscribe { subscription }).into_owner() else {
            panic!("an add")
        };
        assert_eq!(entry.events, vec![Notice::NeedsYou, Notice::Done]);
    }

    #[test]
    fn an_ask_reads_back_as_itself_in_its_versioned_envelope() {
        let text = encode(&ask()).unwrap();
        assert!(text.starts_with(&format!("{{\"v\":{PROTOCOL_VERSION},\"ask\":")), "{text}");
        assert_eq!(decode::<Ask>(&text).unwrap(), ask());
        let drop = ToIndex::Drop("ho_1".into(), 3);
        assert_eq!(decode::<ToIndex>(&encode(&drop).unwrap()).unwrap(), drop);
    }

    #[test]
    fn a_put_carries_its_passed_rows_oldest_first_and_names_none_when_there_are_none() {
        use handoff_core::time::Timestamp;
        use handoff_core::turn::{Briefed, Listed, State, Status};
        let row = |version: u64, status: Status| handoff_core::rows::Row {
            id: "ho_1".into(),
            listed: Listed {
                session: "s1".into(),
                machine: "m".into(),
                size: "l".into(),
                turn: 1,
                state: State::Open,
                status,
                summary: None,
                version,
            },
            updated_at: Timestamp::from_ms(0),
            suggestion: None,
            briefed: Briefed::default(),
            question: None,
        };
        let put = ToIndex::Put(row(3, Status::Done), vec![row(1, Status::Running), row(2, Status::NeedsYou)], 7);
        assert_eq!(decode::<ToIndex>(&encode(&put).unwrap()).unwrap(), put);
        let alone = ToIndex::Put(row(3, Status::Done), vec![], 0);
        assert_eq!(decode::<ToIndex>(&encode(&alone).unwrap()).unwrap(), alone);
    }

    #[test]
    fn an_ask_of_another_version_or_without_an_envelope_is_refused_not_misread() {
        let other = serde_json::to_string(&Envelope { v: PROTOCOL_VERSION + 1, ask: ask() }).unwrap();
        assert!(matches!(decode::<Ask>(&other), Err(Unreadable::Version(v)) if v == PROTOCOL_VERSION + 1));
        let bare = serde_json::to_string(&ask()).unwrap();
        assert!(matches!(decode::<Ask>(&bare), Err(Unreadable::Json(_))), "an older build's bare ask");
        assert!(
            matches!(decode::<ToIndex>(&encode(&ask()).unwrap()), Err(Unreadable::Json(_))),
            "an ask for the other object"
        );
    }

    #[test]
    fn an_ask_in_a_header_reads_back_as_itself_and_is_a_valid_header_value() {
        let watch = Ask {
            caller: Caller { owner: "ünïcode\n\"owner\"".into(), role: Role::Machine, incarnation: 0, hid: None },
            op: Op::Watch { after: 7, valid_until_s: 1_700_000_000, subprotocol: true, timeline: None },
            idempotency: None,
        };
        let value = encode_header(&watch).unwrap();
        assert!(value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{value}");
        assert_eq!(decode_header::<Ask>(&value).unwrap(), watch);
        assert!(decode_header::<Ask>("not base64!").is_err());
        assert!(decode_header::<Ask>(&encode_header(&ToIndex::Drop("ho_1".into(), 0)).unwrap()).is_err());
    }

    #[test]
    fn an_ask_travels_in_the_header_up_to_its_cap_and_as_the_body_past_it() {
        let wire = encode(&ask()).unwrap();
        assert_eq!(decode_header::<Ask>(&header_of(&wire).unwrap()).unwrap(), ask());
        let at_cap = format!("{wire:<width$}", width = ASK_HEADER_BYTES_MAX);
        assert!(header_of(&at_cap).is_some(), "an ask of exactly the cap is a header");
        let past = format!("{wire:<width$}", width = ASK_HEADER_BYTES_MAX + 1);
        assert_eq!(header_of(&past), None, "one byte past the cap is the body");
        // The bodies a client may send (16 KiB, and 64 KiB on the words' routes) do not fit:
        // the body path stays in use, and an ask carrying a prompt travels by it.
        assert!(handoff_core::limits::BODY_BYTES_MAX > ASK_HEADER_BYTES_MAX);
        assert!(handoff_core::limits::WORDS_BODY_BYTES_MAX > ASK_HEADER_BYTES_MAX);
        let prompt = "x".repeat(handoff_core::limits::PROMPT_BYTES_MAX);
        let open = Change::Turn {
            command: handoff_core::turn::Command::OpenTurn { after: 1, prompt: Some(prompt) },
            unmet: None,
            usage: None,
            package: None,
        };
        let ask = Ask {
            caller: Caller { owner: "o".into(), role: Role::Owner, incarnation: 0, hid: None },
            op: Op::Change { change: open.clone() },
            idempotency: None,
        };
        let wire = encode(&ask).unwrap();
        assert_eq!(header_of(&wire), None, "the longest prompt travels as the body");
        assert_eq!(decode::<Ask>(&wire).unwrap(), ask);
    }

    #[test]
    fn a_report_with_the_longest_summary_a_runtime_a_permission_mode_and_a_key_still_travels_in_the_header() {
        use handoff_core::turn::Command;
        let summary = "é".repeat(handoff_core::limits::SUMMARY_BYTES_MAX / 2);
        let runtime = "r".repeat(handoff_core::limits::RUNTIME_BYTES_MAX);
        let mode = "m".repeat(handoff_core::limits::PERMISSION_MODE_BYTES_MAX);
        let body = serde_json::json!({"turn": 1, "status": "running", "summary": summary, "runtime": runtime, "permission_mode": mode}).to_string();
        let r = crate::input::parse_report(body.as_bytes()).unwrap();
        let command = Command::Report {
            turn: r.turn,
            status: r.status,
            summary: r.summary,
            question: None,
            runtime: r.runtime,
            permission_mode: r.permission_mode,
            reply: r.reply,
            sync_mode: r.sync_mode,
        };
        let change = Change::Turn { command, unmet: r.unmet, usage: r.usage, package: None };
        let idempotency = Some(Idempotency { key: "k".repeat(128), fingerprint: "f".repeat(64) });
        let ask = Ask {
            caller: Caller { owner: "o".repeat(128), role: Role::Machine, incarnation: 0, hid: None },
            op: Op::Change { change },
            idempotency,
        };
        assert!(header_of(&encode(&ask).unwrap()).is_some(), "every report a reporter sends costs the object no await");
    }
}
