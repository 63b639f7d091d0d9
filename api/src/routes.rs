//! Every route of the API, once: its method and path, who may call it (top-level routes) or
//! that the core decides (hand-off routes), how its query and body are read, whether it is a
//! change (remembered under an `Idempotency-Key`), and whether it exists only where a switch
//! is on. The router matches a request against [`ROUTES`] and does what the row says.
//!
//! Adding a route is a row here, a command in the core's session and a view of its answer.

use crate::device;
use crate::error::{ApiError, Code};
use crate::input::{self, query_pairs};
use crate::notifications::{self, WEBHOOK_ID_BYTES};
use crate::protocol::IndexAsk;
use handoff_core::briefing::ReachKind;
use handoff_core::decider::{Op, Reaching};
use handoff_core::handoff::Change;
use handoff_core::hooks::{HandoffHook, IndexHook};
use handoff_core::limits::{
    ACCESS_TOKEN_TTL_S, BODY_BYTES_MAX, REPORT_BODY_BYTES_MAX, TIMELINE_BODY_BYTES_MAX, WORDS_BODY_BYTES_MAX,
};
use handoff_core::owner::devices;
use handoff_core::package;
use handoff_core::question;
use handoff_core::role::Role;
use handoff_core::time::Timestamp;
use handoff_core::timeline;
use handoff_core::turn::Command;
use handoff_core::work;
use handoff_notify::limits::WEBHOOK_SECRET_BYTES;
use handoff_notify::webhook::WebhookSecret;
use handoff_notify::Environment;

/// What a route is for: one of the Worker's own answers, or an operation on one hand-off.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `GET /v1/health`: no token needed.
    Health,
    /// `POST /v1/handoffs`: the session's hand-off, created if new.
    Create,
    /// `POST /v1/handoffs/{id}/machine-token` (the owner's): a fresh machine token, minted
    /// here (which holds the key), that ends the ones before it.
    MachineToken,
    /// An operation on the hand-off named by `{id}`, read from the request by `read`; who may
    /// send it is the core's to decide.
    Handoff { read: Reader, change: bool, transport: Transport },
    /// An ask of the caller's own index, read from the request by `read`.
    Index { read: IndexReader },
    /// Test hook: how many hand-off objects this isolate has started.
    TestObjectStarts,
    /// The benchmark's floor: a Durable Object round trip, no token, no storage.
    BenchFloor,
    /// `GET /v1/push/key`: the VAPID public key (`applicationServerKey`).
    PushKey,
    /// `POST /v1/devices/refresh`: a device's credential (its cookie) for a fresh access
    /// token; the one route that takes no bearer token but a credential.
    Refresh,
    /// `POST /v1/enrolments`: a machine starts an enrolment; no token, bounded per address.
    Enrol,
    /// `POST /v1/enrolments/collect`: the machine collects its credential, proving its key;
    /// no token.
    Collect,
    /// An owner's look-up, approval or refusal of an enrolment's `{code}`.
    Enrolment(EnrolmentRoute),
    /// An owner's machines, or a machine credential's own routes.
    Machines(MachinesRoute),
}

/// What an owner does with an enrolment's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EnrolmentRoute {
    LookUp,
    Approve,
    Refuse,
}

/// The machines' routes: the owner's (list, revoke) and a credential's (presence, hand-offs,
/// a hand-off's machine token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachinesRoute {
    List,
    Revoke,
    Presence,
    Handoffs,
    Token,
}

/// How a hand-off route's ask reaches its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A request whose answer the object gives back.
    Ask,
    /// A WebSocket upgrade, forwarded as one (the ask travels in a header).
    Upgrade,
}

/// Reads a hand-off route's operation from its request.
pub type Reader = fn(&Input<'_, Watching>) -> Result<Op, ApiError>;

/// Reads a top-level route's ask of the caller's own index from its request.
pub type IndexReader = fn(&Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError>;

/// What a route's reader sees of its request, and `more`: what only its kind of route reads
/// ([`Watching`] for a hand-off's, [`Making`] for the index's).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a, More> {
    pub query: &'a str,
    pub body: &'a [u8],
    /// `{id}` of the path, where it has one.
    pub id: Option<&'a str>,
    /// `{bid}` of the path, where it has one.
    pub blocker: Option<&'a str>,
    /// `scheme://host[:port]` of the request: where the API is, for a briefing, and the
    /// console a push notification opens.
    pub origin: &'a str,
    /// The request's `If-None-Match`, which a page is answered against.
    pub if_none_match: Option<&'a str>,
    pub more: More,
}

/// What a hand-off route's reader sees beyond its request: what a watch is held to.
#[derive(Debug, Clone, Copy)]
pub struct Watching {
    /// A watch's token is accepted until then (its `exp` and the tolerated skew).
    pub valid_until_s: i64,
    /// A watch offered the `handoff.v1` subprotocol.
    pub subprotocol: bool,
    /// A watch offered `handoff.v2`: it is sent the timeline too.
    pub v2: bool,
}

/// What an index route's reader sees beyond its request: what a new webhook or push
/// subscription is made with.
#[derive(Clone, Copy)]
pub struct Making<'a> {
    /// Which URLs a webhook or a push endpoint may have here.
    pub environment: Environment,
    /// This environment has a usable VAPID key, so push can be sent.
    pub push: bool,
    pub now: Timestamp,
    /// Fills its buffer with fresh randomness (ids, secrets), or fails with the one 503.
    pub draw: &'a dyn Fn(&mut [u8]) -> Result<(), ApiError>,
    /// The caller: the owner.
    pub owner: &'a str,
    /// The device the caller's access token was minted from; `None` for a token of the
    /// identity provider.
    pub device: Option<&'a str>,
    /// Mints the caller's access token from the device of this id (`token::access_token`).
    pub mint: &'a dyn Fn(&str) -> String,
}

/// Which switch a route needs: a test or bench route exists only where `bindings` says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Always,
    TestHooks,
    BenchFloor,
}

#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    /// `/v1/handoffs/{id}/blockers/{bid}/resolve`: literal segments and `{id}`, `{bid}`.
    pub path: &'static str,
    pub kind: Kind,
    /// Who may call a top-level route; `None` where no token is needed or the core decides.
    pub role: Option<Role>,
    pub gate: Gate,
    /// The largest body the route reads: [`BODY_BYTES_MAX`], or [`WORDS_BODY_BYTES_MAX`] for the
    /// routes that carry a person's words or a tool's whole input ([`words`]). Past it, 413
    /// `request.too_large`, before the body is read on.
    pub body_bytes_max: usize,
}

/// A route whose body carries a person's words (a prompt) or a tool's whole input (a
/// question's `input`): it takes bodies up to [`WORDS_BODY_BYTES_MAX`].
const fn words(route: Route) -> Route {
    Route { body_bytes_max: WORDS_BODY_BYTES_MAX, ..route }
}

/// The report route: its body may carry a done report's whole reply ([`REPORT_BODY_BYTES_MAX`]).
const fn report_cap(route: Route) -> Route {
    Route { body_bytes_max: REPORT_BODY_BYTES_MAX, ..route }
}

// ---- The turn's timeline: its own block, apart from the turn machine's routes. ----

/// `POST …/events`: a batch of one turn's events, within [`TIMELINE_BODY_BYTES_MAX`]. Not a
/// change of the record and not remembered under a key: a batch repeats by its `seq`s.
const fn timeline_post(read: Reader) -> Route {
    Route {
        method: "POST",
        path: "/v1/handoffs/{id}/events",
        kind: Kind::Handoff { read, change: false, transport: Transport::Ask },
        role: None,
        gate: Gate::Always,
        body_bytes_max: TIMELINE_BODY_BYTES_MAX,
    }
}

fn timeline_events(i: &Input<'_, Watching>) -> Result<Op, ApiError> {
    no_query(i.query)?;
    Ok(Op::Events { batch: input::parse_body::<timeline::Batch>(i.body)? })
}

fn timeline_read(i: &Input<'_, Watching>) -> Result<Op, ApiError> {
    let q = input::parse_timeline_query(i.query)?;
    Ok(Op::Timeline { turn: q.turn, after: q.after, limit: q.limit, timeout_s: q.timeout_s })
}

// ---- End of the timeline's block. ----

const fn top(method: &'static str, path: &'static str, kind: Kind, role: Option<Role>, gate: Gate) -> Route {
    Route { method, path, kind, role, gate, body_bytes_max: BODY_BYTES_MAX }
}

const fn read(method: &'static str, path: &'static str, read: Reader) -> Route {
    Route {
        method,
        path,
        kind: Kind::Handoff { read, change: false, transport: Transport::Ask },
        role: None,
        gate: Gate::Always,
        body_bytes_max: BODY_BYTES_MAX,
    }
}

const fn change(method: &'static str, path: &'static str, read: Reader) -> Route {
    Route {
        method,
        path,
        kind: Kind::Handoff { read, change: true, transport: Transport::Ask },
        role: None,
        gate: Gate::Always,
        body_bytes_max: BODY_BYTES_MAX,
    }
}

const fn test_hook(method: &'static str, path: &'static str, read: Reader) -> Route {
    Route {
        method,
        path,
        kind: Kind::Handoff { read, change: false, transport: Transport::Ask },
        role: None,
        gate: Gate::TestHooks,
        body_bytes_max: BODY_BYTES_MAX,
    }
}

const fn index(method: &'static str, path: &'static str, read: IndexReader, gate: Gate) -> Route {
    Route { method, path, kind: Kind::Index { read }, role: OWNER, gate, body_bytes_max: BODY_BYTES_MAX }
}

const OWNER: Option<Role> = Some(Role::Owner);
const CREDENTIAL: Option<Role> = Some(Role::Credential);

/// Every route. Paths under `/v1/test/` and `/v1/bench/` exist only where their switch is on,
/// and are the only ones `docs/openapi.yaml` leaves out.
pub const ROUTES: &[Route] = &[
    top("GET", "/v1/health", Kind::Health, None, Gate::Always),
    Route {
        method: "GET",
        path: "/v1/handoffs",
        kind: Kind::Index { read: list },
        role: OWNER,
        gate: Gate::Always,
        body_bytes_max: BODY_BYTES_MAX,
    },
    words(top("POST", "/v1/handoffs", Kind::Create, None, Gate::Always)),
    read("GET", "/v1/handoffs/{id}", |_| Ok(Op::Get)),
    top("POST", "/v1/handoffs/{id}/machine-token", Kind::MachineToken, OWNER, Gate::Always),
    words(change("POST", "/v1/handoffs/{id}/turns", open_turn)),
    read("GET", "/v1/handoffs/{id}/turns", |i| {
        let q = input::parse_turns_query(i.query)?;
        Ok(Op::Turns { before: q.before, limit: q.limit })
    }),
    report_cap(change("POST", "/v1/handoffs/{id}/report", |i| {
        let r = input::parse_report(i.body)?;
        let command = Command::Report {
            turn: r.turn,
            status: r.status,
            summary: r.summary,
            question: r.question,
            runtime: r.runtime,
            permission_mode: r.permission_mode,
            reply: r.reply,
            sync_mode: r.sync_mode,
        };
        Ok(turn_change(Change::Turn { command, unmet: r.unmet, usage: r.usage, package: None }))
    })),
    // The owner's words for the running turn.
    words(change("POST", "/v1/handoffs/{id}/steer", |i| {
        let s = input::parse_steer(i.body)?;
        Ok(turn(Command::Steer { turn: s.turn, prompt: s.prompt }))
    })),
    change("POST", "/v1/handoffs/{id}/cancel", |i| {
        Ok(turn(Command::Cancel { turn: input::parse_cancel(i.body)?.turn }))
    }),
    change("POST", "/v1/handoffs/{id}/close", |i| input::parse_close(i.body).map(|_| turn(Command::Close))),
    read("GET", "/v1/handoffs/{id}/wait", |i| {
        let q = input::parse_wait_query(i.query)?;
        Ok(Op::Wait { after: q.after, timeout_s: q.timeout_s })
    }),
    Route {
        method: "GET",
        path: "/v1/handoffs/{id}/watch",
        kind: Kind::Handoff { read: watch, change: false, transport: Transport::Upgrade },
        role: None,
        gate: Gate::Always,
        body_bytes_max: BODY_BYTES_MAX,
    },
    read("GET", "/v1/handoffs/{id}/work", |i| no_query(i.query).map(|_| Op::Work)),
    change("PUT", "/v1/handoffs/{id}/work", |i| work_change(work::Command::SetWork(input::parse_body(i.body)?))),
    change("POST", "/v1/handoffs/{id}/decisions", |i| {
        work_change(work::Command::RecordDecision(input::parse_body(i.body)?))
    }),
    change("POST", "/v1/handoffs/{id}/artifacts", |i| {
        work_change(work::Command::AddArtifact(input::parse_body(i.body)?))
    }),
    change("POST", "/v1/handoffs/{id}/blockers", |i| {
        work_change(work::Command::AddBlocker(input::parse_body(i.body)?))
    }),
    change("POST", "/v1/handoffs/{id}/blockers/{bid}/resolve", |i| {
        input::parse_close(i.body)?;
        work_change(work::Command::ResolveBlocker { id: i.blocker.unwrap_or_default().to_string() })
    }),
    change("POST", "/v1/handoffs/{id}/workspace", |i| {
        work_change(work::Command::ReportWorkspace(input::parse_body(i.body)?))
    }),
    change("POST", "/v1/handoffs/{id}/package", |i| {
        let dry_run = input::parse_flag(i.query, "dry_run", ("true", "false"))?;
        let request: handoff_core::package::PackageRequest = input::parse_body(i.body)?;
        if request.model.is_some() {
            return Err(ApiError::invalid("model: only a hand-off turn (POST …/turns) takes a model"));
        }
        Ok(turn_change(Change::Compile { request, dry_run }))
    }),
    read("GET", "/v1/handoffs/{id}/package", |i| {
        Ok(Op::Package { markdown: input::parse_flag(i.query, "format", ("markdown", "json"))? })
    }),
    change("POST", "/v1/handoffs/{id}/package/accept", |i| {
        let package_hash = input::parse_body::<package::AcceptInput>(i.body)?.package_hash;
        Ok(turn_change(Change::Accept { package_hash }))
    }),
    change("POST", "/v1/handoffs/{id}/package/reject", |i| {
        Ok(turn_change(Change::Reject { input: input::parse_body(i.body)? }))
    }),
    read("GET", "/v1/handoffs/{id}/briefing", |i| {
        let (budget_bytes, reach) = input::parse_briefing_query(i.query)?;
        Ok(Op::Briefing { budget_bytes, reach: reaching(reach, i.origin) })
    }),
    change("PUT", "/v1/handoffs/{id}/policy", |i| {
        Ok(turn_change(Change::SetPolicy { policy: input::parse_body(i.body)? }))
    }),
    change("PUT", "/v1/handoffs/{id}/runtimes", |i| {
        Ok(turn_change(Change::SetRuntimes { input: input::parse_body(i.body)? }))
    }),
    change("POST", "/v1/handoffs/{id}/answer", |i| {
        let a = input::parse_body::<question::AnswerInput>(i.body)?;
        Ok(turn(Command::Answer { question: a.question, option: a.option, note: a.note }))
    }),
    index("POST", "/v1/webhooks", webhook_create, Gate::Always),
    index("GET", "/v1/webhooks", |i| no_query(i.query).map(|_| IndexAsk::WebhookList), Gate::Always),
    index("DELETE", "/v1/webhooks/{id}", |i| webhook(i).map(|id| IndexAsk::WebhookDelete { id }), Gate::Always),
    index(
        "GET",
        "/v1/webhooks/{id}/deliveries",
        |i| webhook(i).map(|id| IndexAsk::WebhookDeliveries { id }),
        Gate::Always,
    ),
    top("GET", "/v1/push/key", Kind::PushKey, OWNER, Gate::Always),
    index("POST", "/v1/push/subscriptions", push_subscribe, Gate::Always),
    index(
        "GET",
        "/v1/push/subscriptions",
        |i| push(i).and_then(|_| no_query(i.query)).map(|_| IndexAsk::PushSubscriptions),
        Gate::Always,
    ),
    index("DELETE", "/v1/push/subscriptions/{id}", push_unsubscribe, Gate::Always),
    index("POST", "/v1/devices", device_sign_in, Gate::Always),
    top("POST", "/v1/devices/refresh", Kind::Refresh, None, Gate::Always),
    index("POST", "/v1/devices/revoke-all", device_revoke_all, Gate::Always),
    index(
        "GET",
        "/v1/devices",
        |i| no_query(i.query).map(|_| IndexAsk::Devices(i.more.device.map(str::to_string))),
        Gate::Always,
    ),
    index("PATCH", "/v1/devices/{id}", device_rename, Gate::Always),
    index("DELETE", "/v1/devices/{id}", |i| device(i).map(IndexAsk::DeviceRevoke), Gate::Always),
    index(
        "POST",
        "/v1/test/refuse-index",
        |i| Ok(IndexAsk::Hook(IndexHook::RefuseRows { on: input::parse_json::<Switch>(i.body)?.on })),
        Gate::TestHooks,
    ),
    index(
        "POST",
        "/v1/test/index-rows",
        |i| Ok(IndexAsk::Put { row: input::parse_json(i.body)?, passed: vec![], incarnation: 0 }),
        Gate::TestHooks,
    ),
    index(
        "POST",
        "/v1/test/index-rows/unreadable",
        |i| Ok(IndexAsk::Hook(IndexHook::PutUnreadable { id: input::parse_json::<Unreadable>(i.body)?.id })),
        Gate::TestHooks,
    ),
    top("GET", "/v1/test/object-starts", Kind::TestObjectStarts, OWNER, Gate::TestHooks),
    test_hook("POST", "/v1/test/handoffs/{id}/fault", |i| {
        Ok(Op::Hook(HandoffHook::Fault { fault: input::parse_json(i.body)? }))
    }),
    test_hook("GET", "/v1/test/handoffs/{id}/storage", |i| no_query(i.query).map(|_| Op::Hook(HandoffHook::Storage))),
    top("GET", "/v1/bench/floor", Kind::BenchFloor, None, Gate::BenchFloor),
    index(
        "POST",
        "/v1/test/hold-webhooks",
        |i| Ok(IndexAsk::Hook(IndexHook::HoldDeliveries { on: input::parse_json::<Switch>(i.body)?.on })),
        Gate::TestHooks,
    ),
    change("DELETE", "/v1/handoffs/{id}", |i| {
        no_query(i.query)?;
        input::parse_close(i.body).map(|_| Op::Erase)
    }),
    test_hook("POST", "/v1/test/handoffs/{id}/clock", |i| {
        Ok(Op::Hook(HandoffHook::Clock { advance_ms: input::parse_json::<Clock>(i.body)?.advance_ms }))
    }),
    index(
        "GET",
        "/v1/test/index-storage",
        |i| no_query(i.query).map(|_| IndexAsk::Hook(IndexHook::Storage)),
        Gate::TestHooks,
    ),
    index(
        "GET",
        "/v1/test/index-storage/{id}",
        |i| Ok(IndexAsk::Hook(IndexHook::StorageOf { id: test_handoff_id(i)? })),
        Gate::TestHooks,
    ),
    // The turn's timeline.
    timeline_post(timeline_events),
    read("GET", "/v1/handoffs/{id}/events", timeline_read),
    // Enrolled machines.
    top("POST", "/v1/enrolments", Kind::Enrol, None, Gate::Always),
    top("POST", "/v1/enrolments/collect", Kind::Collect, None, Gate::Always),
    top("GET", "/v1/enrolments/{code}", Kind::Enrolment(EnrolmentRoute::LookUp), OWNER, Gate::Always),
    top("POST", "/v1/enrolments/{code}/approve", Kind::Enrolment(EnrolmentRoute::Approve), OWNER, Gate::Always),
    top("POST", "/v1/enrolments/{code}/refuse", Kind::Enrolment(EnrolmentRoute::Refuse), OWNER, Gate::Always),
    top("GET", "/v1/machines", Kind::Machines(MachinesRoute::List), OWNER, Gate::Always),
    top("DELETE", "/v1/machines/{name}", Kind::Machines(MachinesRoute::Revoke), OWNER, Gate::Always),
    top("POST", "/v1/machine/presence", Kind::Machines(MachinesRoute::Presence), CREDENTIAL, Gate::Always),
    top("GET", "/v1/machine/handoffs", Kind::Machines(MachinesRoute::Handoffs), CREDENTIAL, Gate::Always),
    top(
        "POST",
        "/v1/machine/handoffs/{id}/machine-token",
        Kind::Machines(MachinesRoute::Token),
        CREDENTIAL,
        Gate::Always,
    ),
];

/// A test hook's switch: `{"on": true}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Switch {
    on: bool,
}

/// The unreadable-row test hook's body: the id it is stored under.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Unreadable {
    id: String,
}

/// `GET /v1/handoffs`: a page of the caller's list.
fn list(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    Ok(IndexAsk::List { query: input::parse_list_query(i.query)?, if_none_match: i.if_none_match.map(str::to_string) })
}

/// `POST /v1/webhooks`: the webhook with a fresh id and secret, for the index to add if it fits.
fn webhook_create(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    let new = notifications::parse_webhook_create(i.body, i.more.environment)?;
    let mut id = [0u8; WEBHOOK_ID_BYTES];
    (i.more.draw)(&mut id)?;
    let mut secret = [0u8; WEBHOOK_SECRET_BYTES];
    (i.more.draw)(&mut secret)?;
    let secret = WebhookSecret::from_random(&secret).map_err(|_| ApiError::unavailable())?.reveal();
    let webhook = notifications::Webhook {
        id: notifications::webhook_id(id),
        url: new.url,
        events: notifications::event_names(&new.events),
        created_at: i.more.now,
    };
    Ok(IndexAsk::WebhookAdd { webhook, secret })
}

/// The `{id}` of a webhook route: a webhook's id, or no such webhook.
/// The index-storage hook's `{id}`: a hand-off's id.
fn test_handoff_id(i: &Input<'_, Making<'_>>) -> Result<String, ApiError> {
    no_query(i.query)?;
    let id = i.id.unwrap_or_default();
    if !input::is_handoff_id(id) {
        return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
    }
    Ok(id.to_string())
}

fn webhook(i: &Input<'_, Making<'_>>) -> Result<String, ApiError> {
    no_query(i.query)?;
    let id = i.id.unwrap_or_default();
    if !notifications::is_webhook_id(id) {
        return Err(ApiError::new(Code::WebhookNotFound, "no such webhook"));
    }
    Ok(id.to_string())
}

/// What every push route, the key's too, answers where push is not configured here.
pub fn push_misconfigured() -> ApiError {
    ApiError::new(
        Code::PushMisconfigured,
        "this environment's VAPID key is missing, unreadable, or the public development pair",
    )
}

fn push(i: &Input<'_, Making<'_>>) -> Result<(), ApiError> {
    if !i.more.push {
        return Err(push_misconfigured());
    }
    Ok(())
}

/// `POST /v1/push/subscriptions`: the subscription with a fresh id, for the index to add if it fits.
fn push_subscribe(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    push(i)?;
    let new = notifications::parse_subscription_create(i.body, i.more.environment)?;
    let mut id = [0u8; WEBHOOK_ID_BYTES];
    (i.more.draw)(&mut id)?;
    let subscription = notifications::StoredSubscription {
        id: notifications::subscription_id(id),
        endpoint: new.endpoint,
        origin: new.origin,
        p256dh: new.p256dh,
        auth: new.auth,
        events: notifications::event_names(&new.events),
        created_at: i.more.now,
        console: i.origin.to_string(),
        device: i.more.device.map(str::to_string),
    };
    Ok(IndexAsk::PushSubscribe { subscription })
}

/// `POST /v1/devices`: the device with a fresh id and credential (only the credential's hash is
/// stored), and its first access token, for the index to add if it fits. Only a token of the
/// identity provider signs a device in: an access token minted from a device never does.
fn device_sign_in(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    no_query(i.query)?;
    if i.more.device.is_some() {
        return Err(ApiError::new(
            Code::AuthForbidden,
            "an access token from a device never signs a device in: use the owner token you were given",
        ));
    }
    let given = device::DeviceInput::only(i.body, "name")?;
    let name = given.name.unwrap_or_else(|| device::UNNAMED.to_string());
    devices::check_name(&name)?;
    let mut id = [0u8; device::DEVICE_ID_BYTES];
    (i.more.draw)(&mut id)?;
    let mut secret = [0u8; device::SECRET_BYTES];
    (i.more.draw)(&mut secret)?;
    let credential = device::Credential::new(i.more.owner, id, secret);
    let at = i.more.now.ms();
    let listed = devices::Device { id: credential.device.clone(), name, created_at: at, last_seen_at: at };
    let stored = devices::StoredDevice { device: listed, secret_hash: credential.secret_hash() };
    let granted = devices::Granted {
        access_token: (i.more.mint)(&credential.device),
        expires_in: ACCESS_TOKEN_TTL_S,
        cookie: Some(credential.set_cookie(i.origin)),
    };
    Ok(IndexAsk::DeviceSignIn(stored, granted))
}

/// The `{id}` of a device route: a device's id, or no such device.
fn device(i: &Input<'_, Making<'_>>) -> Result<String, ApiError> {
    no_query(i.query)?;
    let id = i.id.unwrap_or_default();
    if !devices::is_device_id(id) {
        return Err(ApiError::new(Code::DeviceNotFound, "no such device"));
    }
    Ok(id.to_string())
}

/// `PATCH /v1/devices/{id}`: `{"name"}`.
fn device_rename(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    let id = device(i)?;
    let name = device::DeviceInput::required(device::DeviceInput::only(i.body, "name")?.name, "name")?;
    devices::check_name(&name)?;
    Ok(IndexAsk::DeviceRename(id, name, i.more.device.map(str::to_string)))
}

/// `POST /v1/devices/revoke-all`: `{"keep_current": true}` keeps the caller's device (a token
/// of the identity provider has none to keep), `false` revokes every one.
fn device_revoke_all(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    no_query(i.query)?;
    let given = device::DeviceInput::only(i.body, "keep_current")?;
    let keep_current = device::DeviceInput::required(given.keep_current, "keep_current")?;
    let keep = if keep_current { i.more.device.map(str::to_string) } else { None };
    Ok(IndexAsk::DeviceRevokeAll(keep))
}

fn push_unsubscribe(i: &Input<'_, Making<'_>>) -> Result<IndexAsk, ApiError> {
    push(i)?;
    no_query(i.query)?;
    let id = i.id.unwrap_or_default();
    if !notifications::is_subscription_id(id) {
        return Err(ApiError::new(Code::SubscriptionNotFound, "no such push subscription"));
    }
    Ok(IndexAsk::PushUnsubscribe { id: id.to_string() })
}

/// The clock test hook's body: how far to move the object's clock ahead.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Clock {
    advance_ms: i64,
}

fn turn_change(change: Change) -> Op {
    Op::Change { change }
}

fn turn(command: Command) -> Op {
    turn_change(Change::Turn { command, unmet: None, usage: None, package: None })
}

fn work_change(command: work::Command) -> Result<Op, ApiError> {
    Ok(turn_change(Change::Work { command }))
}

fn reaching(reach: ReachKind, origin: &str) -> Reaching {
    Reaching { api: reach == ReachKind::Api, base_url: origin.to_string() }
}

/// `POST …/turns`: open the next turn, or with `dry_run=true` preview its hand-off.
fn open_turn(i: &Input<'_, Watching>) -> Result<Op, ApiError> {
    let preview = input::parse_open_turn_query(i.query)?;
    let t = input::parse_open_turn(i.body)?;
    let handing_off = t.package.is_some();
    let open = Change::Turn {
        command: Command::OpenTurn { after: t.after, prompt: t.prompt },
        unmet: None,
        usage: None,
        package: t.package,
    };
    match preview {
        None => Ok(turn_change(open)),
        Some(_) if !handing_off => {
            Err(ApiError::invalid("handoff: a dry run previews a hand-off, and this open has none"))
        }
        Some((budget_bytes, reach)) => Ok(Op::Preview { change: open, budget_bytes, reach: reaching(reach, i.origin) }),
    }
}

fn watch(i: &Input<'_, Watching>) -> Result<Op, ApiError> {
    let (after, seen) = input::parse_watch_query(i.query)?;
    if seen.is_some() && !i.more.v2 {
        return Err(ApiError::invalid("turn and seq: only a handoff.v2 watch follows the timeline"));
    }
    Ok(Op::Watch {
        after,
        valid_until_s: i.more.valid_until_s,
        subprotocol: i.more.subprotocol,
        timeline: i.more.v2.then(|| seen.unwrap_or_default()),
    })
}

/// A route that takes no query: any parameter is an unknown one.
pub fn no_query(query: &str) -> Result<(), ApiError> {
    match query_pairs(query).next() {
        Some((k, _)) => Err(ApiError::invalid(format!("{k}: unknown query parameter"))),
        None => Ok(()),
    }
}

/// The path's `{id}` and `{bid}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Params<'a> {
    pub id: Option<&'a str>,
    pub blocker: Option<&'a str>,
}

/// `path` against a route's pattern: its parameters when every segment matches.
pub fn match_path<'a>(pattern: &str, path: &'a str) -> Option<Params<'a>> {
    let mut params = Params::default();
    let mut given = path.strip_prefix('/')?.split('/');
    for want in pattern.trim_start_matches('/').split('/') {
        let segment = given.next()?;
        match want {
            // An enrolment's `{code}` and a machine's `{name}` are the path's one parameter too.
            "{id}" | "{code}" | "{name}" => params.id = Some(segment),
            "{bid}" => params.blocker = Some(segment),
            literal if literal == segment => {}
            _ => return None,
        }
    }
    given.next().is_none().then_some(params)
}

/// What a request's method and path find among the routes that `on` says exist.
#[derive(Debug)]
pub enum Found<'a> {
    Route(&'static Route, Params<'a>),
    /// The path is a route's, the method none of its: the methods it takes.
    MethodNotAllowed(Vec<&'static str>),
}

pub fn find<'a>(method: &str, path: &'a str, on: impl Fn(Gate) -> bool) -> Result<Found<'a>, ApiError> {
    let mut allowed = Vec::new();
    for route in ROUTES.iter().filter(|r| on(r.gate)) {
        let Some(params) = match_path(route.path, path) else { continue };
        if route.method == method {
            return Ok(Found::Route(route, params));
        }
        allowed.push(route.method);
    }
    if allowed.is_empty() {
        return Err(ApiError::new(Code::RouteNotFound, "no such route"));
    }
    Ok(Found::MethodNotAllowed(allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_matches_its_pattern_segment_for_segment_and_names_its_parameters() {
        let p =
            match_path("/v1/handoffs/{id}/blockers/{bid}/resolve", "/v1/handoffs/ho_1/blockers/blk_2/resolve").unwrap();
        assert_eq!((p.id, p.blocker), (Some("ho_1"), Some("blk_2")));
        for other in [
            "/v1/handoffs/ho_1/blockers/blk_2",
            "/v1/handoffs/ho_1/blockers/blk_2/resolve/x",
            "v1/handoffs/ho_1",
            "/v1/handoffs/ho_1/",
        ] {
            assert_eq!(match_path("/v1/handoffs/{id}/blockers/{bid}/resolve", other), None, "{other}");
        }
        assert_eq!(match_path("/v1/handoffs/{id}", "/v1/handoffs/"), Some(Params { id: Some(""), blocker: None }));
    }

    #[test]
    fn each_method_and_path_is_one_route_and_another_method_is_405_naming_the_ones_allowed() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(!(a.method == b.method && a.path == b.path), "{} {} twice", a.method, a.path);
            }
        }
        let all = |_| true;
        assert!(
            matches!(find("GET", "/v1/handoffs/ho_1/report", all), Ok(Found::MethodNotAllowed(m)) if m == ["POST"])
        );
        assert!(matches!(find("DELETE", "/v1/handoffs", all), Ok(Found::MethodNotAllowed(m)) if m == ["GET", "POST"]));
        assert_eq!(find("GET", "/v2/handoffs", all).unwrap_err().code, Code::RouteNotFound);
        assert!(
            matches!(find("POST", "/v1/test/refuse-index", |g| g == Gate::Always), Err(e) if e.code == Code::RouteNotFound)
        );
    }

    /// The body cap is the route table's: the two routes that carry a person's words take 64
    /// KiB, the report (a question's whole input, a done report's whole reply) 192 KiB, a batch
    /// of the timeline's events 256 KiB, every other route 16 KiB.
    #[test]
    fn only_create_open_turn_and_steer_take_the_words_body_cap_the_report_and_the_events_their_own() {
        let capped = |cap: usize| -> Vec<(&str, &str)> {
            ROUTES.iter().filter(|r| r.body_bytes_max == cap).map(|r| (r.method, r.path)).collect()
        };
        assert_eq!(
            capped(WORDS_BODY_BYTES_MAX),
            [("POST", "/v1/handoffs"), ("POST", "/v1/handoffs/{id}/turns"), ("POST", "/v1/handoffs/{id}/steer")]
        );
        assert_eq!(capped(REPORT_BODY_BYTES_MAX), [("POST", "/v1/handoffs/{id}/report")]);
        assert_eq!(capped(TIMELINE_BODY_BYTES_MAX), [("POST", "/v1/handoffs/{id}/events")]);
        let caps = [BODY_BYTES_MAX, WORDS_BODY_BYTES_MAX, REPORT_BODY_BYTES_MAX, TIMELINE_BODY_BYTES_MAX];
        assert!(ROUTES.iter().all(|r| caps.contains(&r.body_bytes_max)));
    }

    /// Every change is remembered under its key; the timeline's batch is no change of the
    /// record, and repeats by its `seq`s instead.
    #[test]
    fn every_change_is_a_hand_off_route_and_no_read_is() {
        for r in ROUTES {
            if let Kind::Handoff { change, .. } = r.kind {
                let timeline = r.path == "/v1/handoffs/{id}/events";
                let expected = r.method != "GET" && r.gate == Gate::Always && !timeline;
                assert_eq!(change, expected, "{} {}", r.method, r.path);
            }
        }
    }

    fn asked(
        method: &str,
        path: &str,
        body: &[u8],
        push: bool,
        draw: &dyn Fn(&mut [u8]) -> Result<(), ApiError>,
    ) -> Result<IndexAsk, ApiError> {
        asked_by(method, path, body, push, draw, None)
    }

    fn asked_by(
        method: &str,
        path: &str,
        body: &[u8],
        push: bool,
        draw: &dyn Fn(&mut [u8]) -> Result<(), ApiError>,
        device: Option<&str>,
    ) -> Result<IndexAsk, ApiError> {
        let Ok(Found::Route(route, params)) = find(method, path, |_| true) else {
            panic!("{method} {path} is a route")
        };
        let Kind::Index { read, .. } = route.kind else { panic!("{method} {path} asks the index") };
        let mint = |id: &str| format!("token-of-{id}");
        let making = Making {
            environment: Environment::Local,
            push,
            now: Timestamp::from_ms(1_700_000_000_000),
            draw,
            owner: "alice",
            device,
            mint: &mint,
        };
        let given = Input {
            query: "",
            body,
            id: params.id,
            blocker: None,
            origin: "https://handoff.example",
            if_none_match: Some("\"held\""),
            more: making,
        };
        read(&given)
    }

    fn ones(buf: &mut [u8]) -> Result<(), ApiError> {
        buf.fill(1);
        Ok(())
    }

    #[test]
    fn every_top_level_route_of_the_owner_but_the_key_and_a_create_is_one_ask_of_the_owners_index() {
        for r in ROUTES.iter().filter(|r| r.role == OWNER) {
            let own = matches!(
                r.kind,
                Kind::PushKey | Kind::TestObjectStarts | Kind::MachineToken | Kind::Enrolment(_) | Kind::Machines(_)
            );
            assert_eq!(matches!(r.kind, Kind::Index { .. }), !own, "{} {}", r.method, r.path);
        }
    }

    #[test]
    fn the_list_is_asked_with_the_clients_if_none_match_so_that_the_index_can_answer_304() {
        let ask = asked("GET", "/v1/handoffs", b"", true, &ones).unwrap();
        assert!(matches!(&ask, IndexAsk::List { if_none_match: Some(tag), .. } if tag == "\"held\""), "{ask:?}");
    }

    #[test]
    fn a_new_webhook_gets_its_id_and_secret_from_fresh_randomness_and_its_time_from_now() {
        let ask = asked("POST", "/v1/webhooks", br#"{"url": "http://127.0.0.1:9/hook"}"#, false, &ones).unwrap();
        let IndexAsk::WebhookAdd { webhook, secret } = ask else { panic!("{ask:?}") };
        assert_eq!(webhook.id, notifications::webhook_id([1; WEBHOOK_ID_BYTES]));
        assert_eq!(secret, WebhookSecret::from_random(&[1; WEBHOOK_SECRET_BYTES]).unwrap().reveal());
        assert_eq!(webhook.created_at, Timestamp::from_ms(1_700_000_000_000));
        let failing = |_: &mut [u8]| Err(ApiError::unavailable());
        let refused =
            asked("POST", "/v1/webhooks", br#"{"url": "http://127.0.0.1:9/hook"}"#, false, &failing).unwrap_err();
        assert_eq!(refused.code, Code::StoreUnavailable, "no randomness: the one 503");
    }

    #[test]
    fn an_id_of_the_wrong_kind_is_not_found_before_the_index_is_asked() {
        for (method, path, code) in [
            ("DELETE", "/v1/webhooks/ps_AAAAAAAAAAAAAAAAAAAA-_", Code::WebhookNotFound),
            ("GET", "/v1/webhooks/nope/deliveries", Code::WebhookNotFound),
            ("DELETE", "/v1/push/subscriptions/wh_AAAAAAAAAAAAAAAAAAAA-_", Code::SubscriptionNotFound),
        ] {
            assert_eq!(asked(method, path, b"", true, &ones).unwrap_err().code, code, "{method} {path}");
        }
        let id = "wh_AAAAAAAAAAAAAAAAAAAA-_";
        assert!(
            matches!(asked("DELETE", &format!("/v1/webhooks/{id}"), b"", true, &ones), Ok(IndexAsk::WebhookDelete { id: i }) if i == id)
        );
    }

    #[test]
    fn the_index_storage_hook_asks_about_a_hand_offs_id_and_nothing_else() {
        let id = format!("ho_{}", "ab".repeat(16));
        assert!(
            matches!(asked("GET", &format!("/v1/test/index-storage/{id}"), b"", true, &ones), Ok(IndexAsk::Hook(IndexHook::StorageOf { id: i })) if i == id)
        );
        for bad in ["wh_AAAAAAAAAAAAAAAAAAAA-_", "ho_nope"] {
            assert_eq!(
                asked("GET", &format!("/v1/test/index-storage/{bad}"), b"", true, &ones).unwrap_err().code,
                Code::HandoffNotFound,
                "{bad}"
            );
        }
    }

    #[test]
    fn every_push_route_of_the_index_is_push_misconfigured_where_push_cannot_be_sent() {
        for (method, path) in [
            ("POST", "/v1/push/subscriptions"),
            ("GET", "/v1/push/subscriptions"),
            ("DELETE", "/v1/push/subscriptions/ps_AAAAAAAAAAAAAAAAAAAA-_"),
        ] {
            assert_eq!(
                asked(method, path, b"{}", false, &ones).unwrap_err().code,
                Code::PushMisconfigured,
                "{method} {path}"
            );
        }
        assert!(matches!(asked("GET", "/v1/push/subscriptions", b"", true, &ones), Ok(IndexAsk::PushSubscriptions)));
    }

    #[test]
    fn an_access_token_from_a_device_never_signs_a_device_in_and_an_owners_token_does_with_a_fresh_credential() {
        let from_device = asked_by("POST", "/v1/devices", b"{}", true, &ones, Some("dv_AAAAAAAAAAAAAAAAAAAA-_"));
        assert_eq!(from_device.unwrap_err().code, Code::AuthForbidden);
        let ask = asked("POST", "/v1/devices", br#"{"name": "Chromium on Linux"}"#, true, &ones).unwrap();
        let IndexAsk::DeviceSignIn(stored, granted) = ask else { panic!("{ask:?}") };
        let credential = device::Credential::new("alice", [1; device::DEVICE_ID_BYTES], [1; device::SECRET_BYTES]);
        assert_eq!(
            (stored.device.id.as_str(), stored.device.name.as_str()),
            (credential.device.as_str(), "Chromium on Linux")
        );
        assert_eq!(stored.secret_hash, credential.secret_hash(), "only the hash is stored");
        assert_eq!(granted.access_token, format!("token-of-{}", credential.device));
        assert_eq!(granted.expires_in, ACCESS_TOKEN_TTL_S);
        assert_eq!(granted.cookie, Some(credential.set_cookie("https://handoff.example")));
        let unnamed = asked("POST", "/v1/devices", b"", true, &ones).unwrap();
        assert!(matches!(unnamed, IndexAsk::DeviceSignIn(device, _) if device.device.name == device::UNNAMED));
        for bad in [&br#"{"name": ""}"#[..], br#"{"name": "a\nb"}"#, br#"{"nom": "x"}"#, br#"{"keep_current": true}"#] {
            assert_eq!(asked("POST", "/v1/devices", bad, true, &ones).unwrap_err().code, Code::RequestInvalid);
        }
    }

    #[test]
    fn the_device_routes_mark_and_keep_the_callers_own_device_and_a_subscription_belongs_to_it() {
        let me = "dv_AAAAAAAAAAAAAAAAAAAA-_";
        let list = asked_by("GET", "/v1/devices", b"", true, &ones, Some(me)).unwrap();
        assert_eq!(list, IndexAsk::Devices(Some(me.into())));
        let keep = asked_by("POST", "/v1/devices/revoke-all", br#"{"keep_current": true}"#, true, &ones, Some(me));
        assert_eq!(keep.unwrap(), IndexAsk::DeviceRevokeAll(Some(me.into())));
        let all = asked_by("POST", "/v1/devices/revoke-all", br#"{"keep_current": false}"#, true, &ones, Some(me));
        assert_eq!(all.unwrap(), IndexAsk::DeviceRevokeAll(None));
        let no_device = asked("POST", "/v1/devices/revoke-all", br#"{"keep_current": true}"#, true, &ones);
        assert_eq!(no_device.unwrap(), IndexAsk::DeviceRevokeAll(None), "a token of no device keeps none");
        assert_eq!(asked("POST", "/v1/devices/revoke-all", b"{}", true, &ones).unwrap_err().code, Code::RequestInvalid);
        assert_eq!(
            asked("DELETE", "/v1/devices/ps_AAAAAAAAAAAAAAAAAAAA-_", b"", true, &ones).unwrap_err().code,
            Code::DeviceNotFound
        );
        let renamed = asked_by("PATCH", &format!("/v1/devices/{me}"), br#"{"name": "desk"}"#, true, &ones, Some(me));
        assert_eq!(renamed.unwrap(), IndexAsk::DeviceRename(me.into(), "desk".into(), Some(me.into())));
        let body = br#"{"endpoint": "https://fcm.googleapis.com/x", "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}"#;
        let sub = asked_by("POST", "/v1/push/subscriptions", body, true, &ones, Some(me));
        let Ok(IndexAsk::PushSubscribe { subscription }) = sub else { panic!("{sub:?}") };
        assert_eq!(subscription.device.as_deref(), Some(me), "a subscription made from a device belongs to it");
    }
}
