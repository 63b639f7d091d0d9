//! What the Worker decides of a request before any object sees it, as pure functions of the
//! request's head and the environment's setting: the route and the Worker's own answers, who
//! is asking (a watch's token may come as a subprotocol; `Authorization` wins), the body
//! rules, the ask a route reads, the order of its refusals (426 after every other), and how
//! each ask travels. The router (`src/router.rs`) reads the request, awaits and carries out.

use crate::device::{self, Credential};
use crate::error::{ApiError, Code};
use crate::input::{self, CreateInput, RequestUrl};
use crate::machines::{self, EnrolmentAsk, MachinesAsk};
use crate::protocol::{Ask, Caller, Idempotency, IndexAsk, IndexSent, Op, Sent, ToIndex};
use crate::routes::{
    self, EnrolmentRoute, Found, Gate, Input, Kind, MachinesRoute, Making, Route, Transport, Watching, ROUTES,
};
use crate::token::{self, Claims, Expect, Role};
use handoff_core::limits::{
    ACCESS_TOKEN_TTL_S, CREATES_PER_OWNER_PERIOD_S, CREATES_PER_OWNER_PER_MINUTE_MAX, TOKEN_CLOCK_SKEW_S,
};
use handoff_core::owner::devices::Granted;
use handoff_core::time::Timestamp;
use handoff_core::watch;
use handoff_notify::Environment;
use serde::Serialize;

/// What the Worker knows of its environment, read once per isolate (`src/bindings.rs`).
#[derive(Debug, Clone)]
pub struct Setting {
    /// Both Durable Object namespaces are bound.
    pub store_bound: bool,
    /// The machines' two namespaces (`Enrolments`, `Machines`) are bound: production has them
    /// only once their migration is approved; until then the machine routes answer 404
    /// `store.unbound` and a create checks no machine.
    pub machines_bound: bool,
    /// The signing key, only where it is usable: `None` fails closed.
    pub key: Option<String>,
    pub expect: Expect,
    pub test_hooks: bool,
    pub bench_floor: bool,
    /// The VAPID private key as PKCS#8, where push is configured (its public key is derived
    /// by the runtime's WebCrypto when it is asked for).
    pub push_key: Option<Vec<u8>>,
    /// Which URLs a webhook or a push endpoint may have here.
    pub endpoints: Environment,
}

/// A request's method, URL and the headers the service reads, as the edge hands them over.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub method: String,
    pub url: String,
    pub authorization: Option<String>,
    pub content_length: Option<String>,
    pub idempotency_key: Option<String>,
    pub if_none_match: Option<String>,
    pub upgrade: Option<String>,
    pub websocket_protocol: Option<String>,
    /// Read only by the refresh: its credential's cookie, and its CSRF defence.
    pub cookie: Option<String>,
    pub origin: Option<String>,
    pub refresh: Option<String>,
    /// The client's address (`CF-Connecting-IP`), which bounds the enrolments it may start.
    pub client_address: Option<String>,
}

/// `GET /v1/health`: whether the store is bound, and whether tokens and push can be used.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Health {
    ok: bool,
    store: &'static str,
    auth: &'static str,
    push: &'static str,
}

pub fn health(setting: &Setting) -> Health {
    let configured = |set: bool| if set { "ok" } else { "misconfigured" };
    let store = if setting.store_bound { "bound" } else { "unbound" };
    Health { ok: true, store, auth: configured(setting.key.is_some()), push: configured(setting.push_key.is_some()) }
}

/// What a request comes to once it is routed and authenticated.
#[derive(Debug)]
pub enum Admitted {
    /// Answered by the Worker alone, with no token.
    Health(Health),
    /// 405: the path is a route's, the method none of its; the methods it takes.
    MethodNotAllowed(Vec<&'static str>),
    Route(Box<Admission>),
}

/// A routed, authenticated request, owning what its dispatch reads.
#[derive(Debug)]
pub struct Admission {
    pub route: &'static Route,
    /// `{id}` of the path, where it has one.
    pub id: Option<String>,
    /// `{bid}` of the path, where it has one.
    pub blocker: Option<String>,
    /// `None` for the bench floor, which takes no token, and for a refresh.
    signed: Option<Signed>,
    /// A refresh's device credential (from its cookie).
    credential: Option<Credential>,
    /// A watch offered the `handoff.v1` subprotocol.
    subprotocol: bool,
    /// A watch offered `handoff.v2`: it is sent the timeline too.
    v2: bool,
}

/// A verified token's claims, with the key it verified under (a create mints with that key),
/// and the device an access token was minted from.
#[derive(Debug)]
struct Signed {
    claims: Claims,
    key: String,
    device: Option<String>,
}

/// Finds the route, answers health, checks the store and the key, authenticates at `now_s`
/// and checks the role the route needs, in that order.
pub fn admit(head: &Head, setting: &Setting, now_s: i64) -> Result<Admitted, ApiError> {
    let on = |gate: Gate| match gate {
        Gate::Always => true,
        Gate::TestHooks => setting.test_hooks,
        Gate::BenchFloor => setting.bench_floor,
    };
    let (route, params) = match routes::find(&head.method, RequestUrl::split(&head.url).path, on)? {
        Found::Route(route, params) => (route, params),
        Found::MethodNotAllowed(allowed) => return Ok(Admitted::MethodNotAllowed(allowed)),
    };
    if let Kind::Health = route.kind {
        return Ok(Admitted::Health(health(setting)));
    }
    // The store is bound only when both of its objects are.
    if !setting.store_bound {
        return Err(ApiError::new(Code::StoreUnbound, "this environment has no hand-off store"));
    }
    let (id, blocker) = (params.id.map(str::to_string), params.blocker.map(str::to_string));
    let admitted = |signed, credential, subprotocol, v2| {
        Ok(Admitted::Route(Box::new(Admission { route, id, blocker, signed, credential, subprotocol, v2 })))
    };
    if let Kind::BenchFloor = route.kind {
        return admitted(None, None, false, false);
    }
    let Some(key) = setting.key.as_deref() else {
        // Fail closed: no token is accepted until the operator sets a usable key.
        return Err(ApiError::new(
            Code::AuthMisconfigured,
            "this environment's signing key is missing, the public development key, or too short",
        ));
    };
    // A watch may carry its token as a subprotocol (a browser cannot set Authorization).
    let upgrade = matches!(route.kind, Kind::Handoff { transport: Transport::Upgrade, .. });
    let offered = if upgrade { Some(watch::offered(head.websocket_protocol.as_deref())?) } else { None };
    let machines = matches!(route.kind, Kind::Enrol | Kind::Collect | Kind::Enrolment(_) | Kind::Machines(_));
    if machines && !setting.machines_bound {
        return Err(ApiError::new(Code::StoreUnbound, "this environment has no machines' store yet"));
    }
    if let Kind::Enrol | Kind::Collect = route.kind {
        // A machine with no credential yet: bounded per address, and proving its key to collect.
        return admitted(None, None, false, false);
    }
    if let Kind::Refresh = route.kind {
        // The one route a cookie authenticates: its CSRF defence first.
        let url = RequestUrl::split(&head.url);
        device::check_refresh(head.refresh.as_deref(), head.origin.as_deref(), url.origin)?;
        let credential = head.cookie.as_deref().and_then(Credential::from_cookies).ok_or_else(device::no_credential)?;
        return admitted(None, Some(credential), false, false);
    }
    let bearer = offered.as_ref().and_then(|o| o.bearer.as_deref());
    let (claims, device) = authenticate(head.authorization.as_deref(), bearer, key, &setting.expect, now_s)?;
    handoff_core::decider::admit_role(route.role, claims.role)?;
    let signed = Signed { claims, key: key.to_string(), device };
    let v2 = offered.as_ref().is_some_and(|o| o.handoff_v2);
    admitted(Some(signed), None, offered.is_some_and(|o| o.handoff_v1 || o.handoff_v2), v2)
}

/// The caller's claims, from `Authorization: Bearer <token>` or, where the header is absent,
/// from `subprotocol_bearer` (a watch's `bearer.<token>`, which is how a browser sends it).
fn authenticate(
    header: Option<&str>,
    subprotocol_bearer: Option<&str>,
    key: &str,
    expect: &Expect,
    now_s: i64,
) -> Result<(Claims, Option<String>), ApiError> {
    let bearer = match (header, subprotocol_bearer) {
        (Some(header), _) => header
            .strip_prefix("Bearer ")
            .ok_or_else(|| ApiError::new(Code::AuthInvalid, "the Authorization header is not a Bearer token"))?,
        (None, Some(bearer)) => bearer,
        (None, None) => {
            return Err(ApiError::new(Code::AuthRequired, "this route needs Authorization: Bearer <token>"))
        }
    };
    token::verify_caller(bearer.trim(), key.as_bytes(), now_s, expect)
        .map_err(|e| ApiError::new(Code::AuthInvalid, e.message()))
}

/// What a request's body comes to before any of it is streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// The body the edge read and handed over, of the length declared.
    Given,
    /// None at all.
    Empty,
    /// Of a declared length within the cap, for the edge to read in one call.
    Declared,
    /// Of no declared length: streamed, and held to [`BodyRules::chunk`] as it comes.
    Undeclared,
}

/// How a route's body is read: a declared length over `cap` (the route's `body_bytes_max`) is
/// refused unread, a body streamed is given up as soon as it passes `cap`, and a GET takes
/// no body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyRules {
    pub cap: usize,
    pub bodiless: bool,
}

impl BodyRules {
    pub fn of(route: &Route) -> BodyRules {
        BodyRules { cap: route.body_bytes_max, bodiless: route.method == "GET" }
    }

    /// The checks before any of the body is read: `content_length` as declared, `given` the
    /// length of a body the edge read (which must be the one declared), and `has_body`
    /// whether the request has a body at all (asked only where none was given).
    pub fn before(
        &self,
        content_length: Option<&str>,
        given: Option<usize>,
        has_body: impl FnOnce() -> bool,
    ) -> Result<Body, ApiError> {
        let declared = content_length.and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.cap as u64) {
            return Err(self.too_large());
        }
        if self.bodiless && declared.is_some_and(|n| n > 0) {
            return Err(no_body());
        }
        if let Some(given) = given {
            if declared != Some(given as u64) {
                return Err(ApiError::invalid("body: its length is not the Content-Length declared"));
            }
            return Ok(Body::Given);
        }
        Ok(match declared {
            _ if !has_body() => Body::Empty,
            Some(n) if n > 0 => Body::Declared,
            _ => Body::Undeclared,
        })
    }

    /// A streamed body's next `chunk` bytes after `read`: refused once the whole passes the cap.
    pub fn chunk(&self, read: usize, chunk: usize) -> Result<(), ApiError> {
        if read + chunk > self.cap {
            return Err(self.too_large());
        }
        Ok(())
    }

    /// A whole body of `read` bytes that no check before it saw: within the cap, and none on a GET.
    pub fn whole(&self, read: usize) -> Result<(), ApiError> {
        self.chunk(0, read)?;
        self.streamed(read)
    }

    /// A streamed body of `read` bytes, whole.
    pub fn streamed(&self, read: usize) -> Result<(), ApiError> {
        if self.bodiless && read > 0 {
            return Err(no_body());
        }
        Ok(())
    }

    fn too_large(&self) -> ApiError {
        ApiError::new(Code::RequestTooLarge, format!("the body is over {} bytes", self.cap))
    }
}

fn no_body() -> ApiError {
    ApiError::invalid("body: this route takes no body")
}

/// How an ask travels to its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// Over RPC, its answer a value the router makes the response.
    Rpc,
    /// By `fetch`, its answer (a held wait's stream) passed on as it is.
    Fetch,
    /// As the watch's WebSocket upgrade, forwarded with the ask in a header.
    Upgrade,
}

/// A held wait (and a timeline read that may be held) goes by `fetch`, a watch as its
/// upgrade, every other ask over RPC.
pub fn carrier(op: &Op, transport: Transport) -> Carrier {
    match (transport, op) {
        (Transport::Upgrade, _) => Carrier::Upgrade,
        (Transport::Ask, Op::Wait { .. }) => Carrier::Fetch,
        (Transport::Ask, Op::Timeline { timeout_s, .. }) if *timeout_s > 0 => Carrier::Fetch,
        (Transport::Ask, _) => Carrier::Rpc,
    }
}

/// The name of the object the bench floor's ask goes to.
pub const BENCH_FLOOR_OBJECT: &str = "bench-floor";

/// What the router does next with an admitted request.
// One a request, matched as soon as it is made: boxing its ask would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Next<'a> {
    /// Ask the hand-off object `name`, the ask travelling as `carrier` says.
    Send { name: String, sent: Sent, carrier: Carrier },
    /// Ask `owner`'s index.
    Index { owner: &'a str, ask: ToIndex },
    /// The test hook's count of hand-off objects started.
    ObjectStarts,
    /// The VAPID public key, derived from this private key (PKCS#8).
    PushKey { pkcs8: Vec<u8> },
    /// Ask the one `Enrolments` object.
    Enrolments { ask: EnrolmentAsk },
    /// A machine collects: ask the `Enrolments` object, and once accepted, enrol the machine
    /// with its owner's `Machines` object and mint its credential.
    Collect { ask: EnrolmentAsk },
    /// Ask `owner`'s `Machines` object.
    Machines { owner: &'a str, ask: MachinesAsk },
    /// A credential's hand-off machine token: `owner`'s `Machines` object checks `check`,
    /// then the hand-off `id` is sent `sent`.
    CredentialToken { owner: &'a str, check: MachinesAsk, id: String, sent: Sent },
}

impl Admission {
    pub fn body(&self) -> BodyRules {
        BodyRules::of(self.route)
    }

    /// A hand-off's route with a body: the object alone reads the body (checking it again
    /// against the route's cap), so its ask is made without it and the edge passes it on unread.
    pub fn object_reads_body(&self) -> bool {
        matches!(self.route.kind, Kind::Handoff { .. }) && !self.body().bodiless
    }

    /// The owner a request counts against for creations per minute: an owner's create.
    pub fn counted(&self) -> Option<&str> {
        let claims = &self.signed.as_ref()?.claims;
        (matches!(self.route.kind, Kind::Create) && claims.role == Role::Owner).then_some(claims.sub.as_str())
    }

    /// Where a create goes on its machine: `owner`'s `Machines` object is asked to place it
    /// (an enrolled machine's checks and default workspace) before the hand-off is created.
    pub fn place(&self, create: &CreateInput) -> Option<(&str, MachinesAsk)> {
        let owner = self.counted()?;
        Some((owner, MachinesAsk::Place(create.machine.clone(), create.placement())))
    }

    /// Once a create for an enrolled machine is answered 200 or 201, the hand-off is listed for
    /// the machine (`owner`'s `Machines` object wakes its follows): after the create, so that
    /// a machine never sees one that is not there, and again on a repeat, which lists nothing
    /// new but heals a listing lost between the two.
    pub fn listed(&self, create: &CreateInput) -> Option<(&str, MachinesAsk)> {
        let owner = self.counted()?;
        let id = input::handoff_id(owner, &create.session);
        Some((owner, MachinesAsk::Listed(create.machine.clone(), id)))
    }

    /// A create's body, read before its owner is counted (bad input is refused as such, and
    /// not counted); `None` on any other route.
    pub fn create_input(&self, body: &[u8]) -> Result<Option<CreateInput>, ApiError> {
        matches!(self.route.kind, Kind::Create).then(|| input::parse_create(body)).transpose()
    }

    /// What comes next: the ask the route reads from `head` and `body` (a create's body read
    /// already as `create`), who it goes to and how. `now_ms` is asked only by a create and
    /// the index's routes, `draw` (fresh randomness, or the one 503) only by the index's.
    #[allow(clippy::too_many_lines, reason = "one arm per kind of route: the table of what each route asks")]
    pub fn next(
        &self,
        head: &Head,
        body: &[u8],
        create: Option<CreateInput>,
        setting: &Setting,
        now_ms: impl FnOnce() -> i64,
        draw: &dyn Fn(&mut [u8]) -> Result<(), ApiError>,
    ) -> Result<Next<'_>, ApiError> {
        let url = RequestUrl::split(&head.url);
        if let (Kind::Refresh, Some(credential)) = (self.route.kind, &self.credential) {
            return refresh(credential, &url, body, setting, now_ms);
        }
        if let Kind::Enrol = self.route.kind {
            routes::no_query(url.query)?;
            let input = machines::parse_start(body)?;
            let mut random = [0u8; handoff_core::enrolment::CODE_RANDOM_BYTES];
            draw(&mut random)?;
            let address = head.client_address.as_deref().unwrap_or("unknown");
            return Ok(Next::Enrolments {
                ask: EnrolmentAsk::Start(machines::pending(input, random, address, now_ms())),
            });
        }
        if let Kind::Collect = self.route.kind {
            routes::no_query(url.query)?;
            return Ok(Next::Collect { ask: machines::parse_collect(body)? });
        }
        let Some(signed) = &self.signed else {
            let bench = Caller { owner: "bench".into(), role: Role::Owner, incarnation: 0, hid: None };
            let sent = self.sent(bench, BENCH_FLOOR_OBJECT, head, None);
            return Ok(Next::Send { name: BENCH_FLOOR_OBJECT.into(), sent, carrier: Carrier::Rpc });
        };
        match self.route.kind {
            Kind::Health | Kind::BenchFloor | Kind::Refresh | Kind::Enrol | Kind::Collect => {
                Err(ApiError::new(Code::RouteNotFound, "no such route"))
            }
            Kind::Enrolment(what) => {
                routes::no_query(url.query)?;
                let code = machines::path_code(self.id.as_deref().unwrap_or_default())?;
                let approver = signed.claims.sub.clone();
                if what != EnrolmentRoute::LookUp {
                    input::parse_close(body)?;
                }
                Ok(Next::Enrolments { ask: EnrolmentAsk::Decide(what, approver, code) })
            }
            Kind::Machines(what) => {
                if what != MachinesRoute::Handoffs {
                    routes::no_query(url.query)?;
                }
                let owner = signed.claims.sub.as_str();
                let ask = match what {
                    MachinesRoute::List => MachinesAsk::List,
                    MachinesRoute::Revoke => {
                        input::parse_close(body)?;
                        let name = self.id.as_deref().unwrap_or_default();
                        if !input::is_id(name) {
                            return Err(ApiError::new(Code::MachineNotFound, "no machine of this owner has that name"));
                        }
                        MachinesAsk::Revoke(name.to_string())
                    }
                    MachinesRoute::Presence => {
                        let (name, enrolled_at) = machines::credential_of(&signed.claims)?;
                        MachinesAsk::Presence(name, enrolled_at, machines::parse_presence(body)?)
                    }
                    MachinesRoute::Handoffs => {
                        let follow = machines::parse_follow_query(url.query)?;
                        let (name, enrolled_at) = machines::credential_of(&signed.claims)?;
                        match follow {
                            Some((after, timeout_s)) => MachinesAsk::Follow(name, enrolled_at, after, timeout_s * 1000),
                            None => MachinesAsk::Handoffs(name, enrolled_at),
                        }
                    }
                    MachinesRoute::Token => {
                        input::parse_close(body)?;
                        let (name, enrolled_at) = machines::credential_of(&signed.claims)?;
                        let id = self.id.as_deref().unwrap_or_default();
                        if !input::is_handoff_id(id) {
                            return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
                        }
                        let caller = Caller {
                            owner: owner.to_string(),
                            role: Role::Credential,
                            incarnation: enrolled_at.max(0) as u64,
                            hid: Some(id.to_string()),
                        };
                        let minted = signed.mint(id, now_ms(), &setting.expect);
                        let sent = Sent { machine: Some(name.clone()), ..self.sent(caller, id, head, Some(minted)) };
                        let check = MachinesAsk::MayToken(name, enrolled_at, id.to_string());
                        return Ok(Next::CredentialToken { owner, check, id: id.to_string(), sent });
                    }
                };
                Ok(Next::Machines { owner, ask })
            }
            Kind::Index { .. } => {
                let sent = IndexSent {
                    owner: signed.claims.sub.clone(),
                    device: signed.device.clone(),
                    route: route_index(self.route),
                    id: self.id.clone(),
                    url: head.url.clone(),
                    if_none_match: head.if_none_match.clone(),
                    body: String::new(),
                };
                let sent = match std::str::from_utf8(body) {
                    Ok(text) => IndexSent { body: text.to_string(), ..sent },
                    // A body that is not text is no JSON: its reader refuses it here, or never reads it.
                    Err(_) => index_ask(&sent, body, setting, now_ms, draw).map(|_| sent)?,
                };
                Ok(Next::Index { owner: &signed.claims.sub, ask: ToIndex::Sent(sent) })
            }
            Kind::Create => {
                let create = create.ok_or_else(|| ApiError::invalid("body: expected a JSON object"))?;
                let id = input::handoff_id(&signed.claims.sub, &create.session);
                let minted = signed.mint(&id, now_ms(), &setting.expect);
                let placement = Some(create.placement());
                let sent = Sent { placement, ..self.sent(signed.caller(), &id, head, Some(minted)) };
                Ok(Next::Send { name: id, sent, carrier: Carrier::Rpc })
            }
            Kind::MachineToken => {
                let id = self.id.as_deref().unwrap_or_default();
                if !input::is_handoff_id(id) {
                    return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
                }
                routes::no_query(url.query)?;
                input::parse_close(body)?;
                let minted = signed.mint(id, now_ms(), &setting.expect);
                let sent = self.sent(signed.caller(), id, head, Some(minted));
                Ok(Next::Send { name: id.to_string(), sent, carrier: Carrier::Rpc })
            }
            Kind::TestObjectStarts => routes::no_query(url.query).map(|_| Next::ObjectStarts),
            Kind::PushKey => {
                let pkcs8 = setting.push_key.clone().ok_or_else(routes::push_misconfigured)?;
                routes::no_query(url.query)?;
                Ok(Next::PushKey { pkcs8 })
            }
            Kind::Handoff { read, transport, .. } => {
                let id = self.id.as_deref().unwrap_or_default();
                let caller = signed.caller();
                // Checked again by the hand-off; here it spares waking an object a token cannot reach.
                if !input::is_handoff_id(id) || !caller.reaches(id) {
                    return Err(ApiError::new(Code::HandoffNotFound, "no such hand-off"));
                }
                let sent = self.sent(caller, id, head, None);
                // A route with a body is read by the object alone, so the body is parsed once; a
                // GET's query is read here too, for how it travels and to refuse it unwoken.
                let carrier = if !self.object_reads_body() {
                    let watching = watching(&sent);
                    let url = RequestUrl::split(&head.url);
                    let given = Input {
                        query: url.query,
                        body,
                        id: Some(id),
                        blocker: self.blocker.as_deref(),
                        origin: url.origin,
                        if_none_match: None,
                        more: watching,
                    };
                    carrier(&read(&given)?, transport)
                } else {
                    Carrier::Rpc
                };
                // Every other refusal first: a watch asked for without the upgrade is 426.
                if carrier == Carrier::Upgrade {
                    require_upgrade(head.upgrade.as_deref())?;
                }
                Ok(Next::Send { name: id.to_string(), sent, carrier })
            }
        }
    }

    /// What the object is sent of this request: `caller`, the route, the hand-off `id`, the
    /// URL, the key and what a watch is held to, and a token the router `minted`.
    fn sent(&self, caller: Caller, id: &str, head: &Head, minted: Option<(String, u64)>) -> Sent {
        let claims = self.signed.as_ref().map(|s| &s.claims);
        Sent {
            caller,
            route: route_index(self.route),
            id: id.to_string(),
            blocker: self.blocker.clone(),
            url: head.url.clone(),
            key: head.idempotency_key.clone(),
            valid_until_s: claims.map_or(0, valid_until_s),
            subprotocol: self.subprotocol,
            v2: self.v2,
            minted,
            machine: None,
            placement: None,
        }
    }
}

/// `route`'s place in [`ROUTES`], whose rows are each one method and path (`routes::find`).
fn route_index(route: &Route) -> usize {
    ROUTES.iter().position(|r| (r.method, r.path) == (route.method, route.path)).unwrap_or(usize::MAX)
}

/// The ask of an owner's request the router `sent` its index, read by the index (or by the
/// router, for a body that is not text) with its `setting`: the time now, fresh randomness
/// from `draw` and the access tokens it mints.
pub fn index_ask(
    sent: &IndexSent,
    body: &[u8],
    setting: &Setting,
    now_ms: impl FnOnce() -> i64,
    draw: &dyn Fn(&mut [u8]) -> Result<(), ApiError>,
) -> Result<IndexAsk, ApiError> {
    let Some(Route { kind: Kind::Index { read }, .. }) = ROUTES.get(sent.route) else {
        return Err(ApiError::unavailable());
    };
    let key = setting.key.as_deref().ok_or_else(ApiError::unavailable)?;
    let now = Timestamp::from_ms(now_ms());
    let owner = sent.owner.as_str();
    let mint =
        |device: &str| token::access_token(owner, device, key.as_bytes(), now.ms().div_euclid(1000), &setting.expect);
    let making = Making {
        environment: setting.endpoints,
        push: setting.push_key.is_some(),
        now,
        draw,
        owner,
        device: sent.device.as_deref(),
        mint: &mint,
    };
    let url = RequestUrl::split(&sent.url);
    let given = Input {
        query: url.query,
        body,
        id: sent.id.as_deref(),
        blocker: None,
        origin: url.origin,
        if_none_match: sent.if_none_match.as_deref(),
        more: making,
    };
    read(&given)
}

/// What an owner's index is asked, read from what came to it (`ToIndex`).
pub fn read_index(
    to: ToIndex,
    setting: &Setting,
    now_ms: impl FnOnce() -> i64,
    draw: &dyn Fn(&mut [u8]) -> Result<(), ApiError>,
) -> Result<IndexAsk, ApiError> {
    match to.asked() {
        Ok(ask) => Ok(ask),
        Err(sent) => index_ask(&sent, sent.body.as_bytes(), setting, now_ms, draw),
    }
}

fn watching(sent: &Sent) -> Watching {
    Watching { valid_until_s: sent.valid_until_s, subprotocol: sent.subprotocol, v2: sent.v2 }
}

/// The ask of a request the router `sent` with its `body`, read by the hand-off object: the
/// route's reader and then its `Idempotency-Key`, in that order, as a request is refused.
pub fn read(sent: &Sent, body: &[u8]) -> Result<Ask, ApiError> {
    let route = ROUTES.get(sent.route).ok_or_else(ApiError::unavailable)?;
    // The edge passes a hand-off's body on unread (`Admission::object_reads_body`).
    BodyRules::of(route).whole(body.len())?;
    let url = RequestUrl::split(&sent.url);
    let ask = |op, idempotency| Ok(Ask { caller: sent.caller.clone(), op, idempotency });
    match (route.kind, &sent.minted) {
        (Kind::BenchFloor, _) => ask(Op::Floor, None),
        (Kind::MachineToken | Kind::Machines(MachinesRoute::Token), Some((machine_token, incarnation))) => {
            let (machine_token, incarnation, machine) = (machine_token.clone(), *incarnation, sent.machine.clone());
            ask(Op::MachineToken { machine_token, incarnation, machine }, None)
        }
        (Kind::Create, Some((machine_token, incarnation))) => {
            let create = input::parse_create(body)?;
            let placement = sent.placement.clone().unwrap_or_else(|| create.placement());
            let CreateInput { session, machine, size, prompt, .. } = create;
            let op = Op::Create {
                id: sent.id.clone(),
                session,
                machine,
                size,
                machine_token: machine_token.clone(),
                incarnation: *incarnation,
                prompt,
                placement,
            };
            ask(op, None)
        }
        (Kind::Handoff { read, change, .. }, _) => {
            let given = Input {
                query: url.query,
                body,
                id: Some(&sent.id),
                blocker: sent.blocker.as_deref(),
                origin: url.origin,
                if_none_match: None,
                more: watching(sent),
            };
            let op = read(&given)?;
            let idempotency = if change {
                idempotency(sent.key.as_deref(), route, &url, sent.caller.role.as_str(), body)?
            } else {
                None
            };
            ask(op, idempotency)
        }
        _ => Err(ApiError::unavailable()),
    }
}

impl Signed {
    /// Every machine token carries `inc` (a token without it is refused as it is verified);
    /// an owner's acts on every life of its hand-offs.
    fn caller(&self) -> Caller {
        let c = &self.claims;
        Caller { owner: c.sub.clone(), role: c.role, incarnation: c.inc.unwrap_or(0), hid: c.hid.clone() }
    }

    /// A machine token for hand-off `id` minted at `now_ms` under the key this request's token
    /// verified with (and `expect`'s issuer and audience), with its `inc`: for a create, the
    /// moment a new hand-off takes as its life; for both, the one below which the tokens minted
    /// before are ended.
    fn mint(&self, id: &str, now_ms: i64, expect: &Expect) -> (String, u64) {
        let machine_token = token::machine_token_at(&self.claims.sub, id, self.key.as_bytes(), now_ms, expect);
        (machine_token, now_ms.max(0) as u64)
    }
}

/// A refresh: a fresh access token minted for the credential's device, which the device's index
/// hands back only if the credential's hash is the device's own and its sign-in lasts.
fn refresh<'a>(
    credential: &'a Credential,
    url: &RequestUrl<'_>,
    body: &[u8],
    setting: &Setting,
    now_ms: impl FnOnce() -> i64,
) -> Result<Next<'a>, ApiError> {
    routes::no_query(url.query)?;
    input::parse_close(body)?;
    let key = setting.key.as_deref().ok_or_else(ApiError::unavailable)?;
    let now_s = now_ms().div_euclid(1000);
    let access_token =
        token::access_token(&credential.owner, &credential.device, key.as_bytes(), now_s, &setting.expect);
    let granted = Granted { access_token, expires_in: ACCESS_TOKEN_TTL_S, cookie: None };
    let ask = ToIndex::Refresh(credential.device.clone(), credential.secret_hash(), granted);
    Ok(Next::Index { owner: &credential.owner, ask })
}

/// Until when a watch's token is accepted: its `exp` and the skew tolerated.
pub fn valid_until_s(claims: &Claims) -> i64 {
    claims.exp.saturating_add(TOKEN_CLOCK_SKEW_S)
}

/// A change's `Idempotency-Key`, where it sent one, with the fingerprint of the request.
fn idempotency(
    key: Option<&str>,
    route: &Route,
    url: &RequestUrl<'_>,
    role: &str,
    body: &[u8],
) -> Result<Option<Idempotency>, ApiError> {
    let Some(key) = key else {
        return Ok(None);
    };
    if !input::is_idempotency_key(key) {
        return Err(ApiError::invalid("Idempotency-Key: 1-128 printable ASCII characters without spaces"));
    }
    let fingerprint = input::request_fingerprint(route.method, url.path, url.query, role, body);
    Ok(Some(Idempotency { key: key.to_string(), fingerprint }))
}

/// A watch is a WebSocket: `Upgrade: websocket`, or 426 `request.upgrade_required`.
fn require_upgrade(upgrade: Option<&str>) -> Result<(), ApiError> {
    if !upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::new(
            Code::UpgradeRequired,
            "a watch is a WebSocket: send Upgrade: websocket (or use /wait)",
        ));
    }
    Ok(())
}

/// Past an owner's creations per minute: 429 `owner.rate_limited` (with `Retry-After`).
pub fn rate_limited() -> ApiError {
    ApiError::new(
        Code::OwnerRateLimited,
        format!("this owner may create {CREATES_PER_OWNER_PER_MINUTE_MAX} hand-offs per minute; try again in {CREATES_PER_OWNER_PERIOD_S} s"),
    )
}

#[cfg(test)]
mod tests;
