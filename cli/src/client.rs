//! The typed client: one method per route, blocking, over `ureq`.
//!
//! Retries: a request is tried again, after a jittered exponential backoff, only when it could
//! not be delivered or answered (a connection error or a timeout) or when the API answered 429
//! or 503. Every other answer, and every other 4xx above all, is final: a refusal is the API's
//! decision, and asking again would not change it. State-changing requests carry an
//! `Idempotency-Key` that stays the same across the retries of one call, so a retry after a
//! lost answer gets the first answer back instead of applying the change twice.

use crate::code::ErrorCode;
use handoff_core::turn::State;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::ops::ControlFlow;
use std::time::Duration;

pub mod watch;

// The API's request bodies and answers are the service's own types (`handoff-api` and
// `handoff-core`): the client never re-declares them. Answers are read leniently (see
// `handoff_api::view`), so a client and a Worker need not be deployed in lockstep.
pub use handoff_api::input::{CancelInput, CloseInput, CreateInput, OpenTurnInput, ReportInput, SteerInput};
pub use handoff_api::view::{Page, Rejection, Row, Suggestion, Turn};
pub use handoff_api::view::{Timeline, TimelineTaken};
pub use handoff_core::timeline::{Batch, Event, Kind as EventKind, SyncMode, ToolState};
/// A record as the API answers it (its `actions` and the owner's `policy` beside it).
pub type Handoff = handoff_api::view::Handoff<'static>;
/// A compile's answer; its document stays JSON.
pub type Compiled = handoff_api::view::CompiledAnswer;
/// The current package and its state; its document stays JSON.
pub type Latest = handoff_api::view::LatestAnswer;
/// The whole work record (`GET …/work`).
pub type WorkRecord = handoff_api::view::WorkRecord<'static>;
pub use handoff_core::package::{AcceptInput, ContinuedFrom, OfferState, PackageRequest, RejectInput, RejectReason};
pub use handoff_core::question::{AnswerInput, Choice, Kind as QuestionKind, QuestionInput};
pub use handoff_core::runtimes::{Runtime, RuntimesInput};
pub use handoff_core::suggestion::{Limit, Policy, Usage};
pub use handoff_core::work::{
    ArtifactInput, BlockerInput, DecisionInput, FileInput, Severity, WorkInput, WorkspaceInput,
};

/// The create answer: the hand-off and its machine token. Whether this call created it is the
/// reply's status: 201, or 200 for the session's existing hand-off.
pub type Created = handoff_api::view::Created<'static>;
pub use handoff_api::machines::{CollectAnswer, EnrolmentAnswer, MachineHandoff, PresenceAnswer};
pub use handoff_core::machines::{Presence, RuntimeModels};

/// `GET /v1/machine/handoffs`: the hand-offs created for the credential's machine, newest
/// first, and the list's `version` where the service follows it (absent from an older one).
#[derive(Debug, PartialEq, Eq, serde::Deserialize)]
pub struct MachineHandoffList {
    pub handoffs: Vec<MachineHandoff>,
    #[serde(default)]
    pub version: Option<u64>,
}

/// An item of the work record (`decision`, `artifact`, `blocker`, `work`, `policy`, …) with
/// the hand-off it changed. The item stays JSON: it is shown, never interpreted.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub handoff: Handoff,
    pub kind: &'static str,
    pub item: Value,
}

impl Item {
    pub fn id(&self) -> Option<&str> {
        self.item["id"].as_str()
    }
}

/// `reach` of a briefing: what the destination can reach (the API, or nothing).
pub use handoff_core::briefing::ReachKind as Reach;

/// Where a client goes when neither `--url` nor `HANDOFF_URL` says: `scripts/dev`'s Worker.
pub const URL_DEFAULT: &str = "http://127.0.0.1:8787";
/// No ordinary request waits longer than this for its answer.
pub const REQUEST_TIMEOUT_S: u64 = 30;
/// A wait is held by the server for its own timeout plus up to a second of jitter; the
/// client allows this much more before it calls the connection lost.
pub const WAIT_MARGIN_S: u64 = 15;
/// The server holds a wait at most this long.
pub const WAIT_TIMEOUT_S_MAX: u64 = handoff_core::limits::WAIT_TIMEOUT_S_MAX;
/// Largest answer read (a package in Markdown is the largest thing the API sends).
pub const ANSWER_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// A `Retry-After` longer than this is not honoured as it is: the backoff cap applies.
pub const RETRY_AFTER_S_MAX: u64 = 60;

/// How often and how patiently a request is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Tries in all, the first included.
    pub attempts_max: u32,
    pub backoff_ms_base: u64,
    pub backoff_ms_max: u64,
}

impl Default for Retry {
    fn default() -> Self {
        Retry { attempts_max: 5, backoff_ms_base: 250, backoff_ms_max: 8_000 }
    }
}

impl Retry {
    /// Never tries again (tests of refusals, or a caller that retries by itself).
    pub fn none() -> Retry {
        Retry { attempts_max: 1, ..Retry::default() }
    }

    /// The pause before try number `attempt + 1` (`attempt` counts from 1), given 64 random
    /// bits: "equal jitter", half of the exponential step fixed and half random, so that many
    /// clients refused together do not come back together, yet none comes back at once.
    /// A server's `Retry-After` is a floor, up to [`RETRY_AFTER_S_MAX`].
    pub fn delay(&self, attempt: u32, retry_after_s: Option<u64>, random: u64) -> Duration {
        let exponent = attempt.saturating_sub(1).min(20);
        let step_ms = self.backoff_ms_base.saturating_mul(1 << exponent).min(self.backoff_ms_max);
        let half_ms = step_ms / 2;
        let jittered_ms = half_ms + random % (step_ms - half_ms + 1);
        let floor_ms = retry_after_s.map_or(0, |s| s.min(RETRY_AFTER_S_MAX) * 1000);
        Duration::from_millis(jittered_ms.max(floor_ms))
    }
}

/// What happened to one try, as far as retrying cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not delivered or not answered: refused connection, reset, timeout.
    ConnectionError,
    /// The API answered with this status.
    Answered(u16),
}

/// Connection errors, 429 and 503 are tried again; nothing else ever is.
pub fn is_retryable(outcome: Outcome) -> bool {
    match outcome {
        Outcome::ConnectionError => true,
        Outcome::Answered(status) => status == 429 || status == 503,
    }
}

/// A 429 `owner.too_many_open` lasts until the owner closes a hand-off: no retry can succeed.
fn is_over_the_open_cap(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v["error"]["code"] == "owner.too_many_open")
}

/// A 503 `auth.misconfigured` is the operator's to fix (the environment's signing key cannot
/// be used): no retry can succeed, so none is made.
fn is_misconfigured(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v["error"]["code"] == "auth.misconfigured")
}

/// The API's refusal: `{"error": {"code", "message"}}`, with the hand-off where it carries one.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub code: ErrorCode,
    pub message: String,
    /// The hand-off as it stands, on refusals that carry it (stale, turn conflicts, closed…).
    pub handoff: Option<Handoff>,
    /// The whole answer, unchanged.
    pub body: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The API answered and said no.
    Refused(Box<Refusal>),
    /// The API could not be reached or did not answer, after every retry.
    Network { attempts: u32, message: String },
    /// Something answered, but not in the API's shape (a proxy's page, a truncated body).
    Unexpected { status: u16, message: String },
}

impl Error {
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Refused(r) => Some(r),
            _ => None,
        }
    }

    pub fn code(&self) -> Option<&ErrorCode> {
        self.refusal().map(|r| &r.code)
    }
}

// Its `Display`, the line the command line prints, is written in `output.rs` with the others.
impl std::error::Error for Error {}

/// An answer: its status, its body as the API sent it (JSON, or a JSON string for the text
/// routes), and the typed value read from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply<T> {
    pub status: u16,
    pub body: Value,
    pub value: T,
}

/// A raw answer, before it is read.
struct Raw {
    status: u16,
    text: String,
}

#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    retry: Retry,
    /// A caller-chosen key for the next state-changing requests; otherwise each call makes one.
    idempotency_key: Option<String>,
    /// The longest any one request may take, when shorter than the route's own timeout.
    request_timeout: Option<Duration>,
    /// Why no request may be sent to `base` (plain http to a host off this machine), if so.
    refused: Option<String>,
}

// The variables holding a token directly, or naming a 0600 file that holds it.
pub use crate::machine::env::{ENV_INSECURE_HTTP, ENV_TOKEN, ENV_TOKEN_FILE};

/// The token `HANDOFF_TOKEN` holds, else the one in the file `HANDOFF_TOKEN_FILE` names
/// (trimmed); `Ok(None)` when neither is set, an error naming the file when it cannot be read.
pub fn token_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    if let Some(token) = env(ENV_TOKEN).filter(|t| !t.trim().is_empty()) {
        return Ok(Some(token));
    }
    let Some(path) = env(ENV_TOKEN_FILE).filter(|p| !p.trim().is_empty()) else { return Ok(None) };
    read_token_file(std::path::Path::new(&path)).map_err(|e| format!("{ENV_TOKEN_FILE} {path}: {e}"))
}

/// The token a token file holds, trimmed; `None` when the file holds none.
pub fn read_token_file(path: &std::path::Path) -> std::io::Result<Option<String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(Some(text.trim().to_string()).filter(|t| !t.is_empty()))
}

/// Writes `token` to `path`, 0600 in a 0700 folder, for the hooks and the MCP server.
pub fn write_token_file(path: &std::path::Path, token: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::private::dir(dir)?;
    }
    crate::private::write(path, token.as_bytes())
}

/// Whether `HANDOFF_INSECURE_HTTP` is set to something other than empty, `0`, `false`, `no`
/// or `off`.
pub fn insecure_http_from_env(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(ENV_INSECURE_HTTP)
        .is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false" | "no" | "off"))
}

/// A bearer token goes in the clear only to this machine: `http://` is refused for any host
/// but loopback (`127.0.0.0/8`, `::1`, `localhost`) unless `insecure` says otherwise. On the
/// path, the token could be read, and a forged answer could allow a tool.
pub fn check_url(url: &str, insecure: bool) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.get(..7).filter(|p| p.eq_ignore_ascii_case("http://")).map(|_| &url[7..]))
    else {
        return Ok(());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback || insecure {
        return Ok(());
    }
    Err(format!(
        "refusing to send the token over plain http to {host}: use https://, or pass --insecure-http (or set {ENV_INSECURE_HTTP}=1) if this network is yours"
    ))
}

impl Client {
    pub fn new(base: &str, token: Option<&str>) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
            .build()
            .into();
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
            agent,
            retry: Retry::default(),
            idempotency_key: None,
            request_timeout: None,
            refused: check_url(base, insecure_http_from_env(&|k| std::env::var(k).ok())).err(),
        }
    }

    /// With `insecure`, plain `http://` to any host is allowed (`--insecure-http`).
    pub fn with_insecure_http(mut self, insecure: bool) -> Client {
        if insecure {
            self.refused = None;
        }
        self
    }

    /// Why this client sends nothing, if it does not ([`check_url`]).
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Caps every request's time, connecting included (a hook has a budget to keep).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Client {
        self.request_timeout = Some(timeout);
        self
    }

    pub fn with_retry(mut self, retry: Retry) -> Client {
        self.retry = retry;
        self
    }

    /// Sends `key` as the `Idempotency-Key` of every state-changing request of this client.
    pub fn with_idempotency_key(mut self, key: Option<&str>) -> Client {
        self.idempotency_key = key.map(str::to_string);
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    // ---------------------------------------------------------------- issue 2: turns

    /// `POST /v1/handoffs`: one hand-off per session; a second create answers the same one.
    pub fn create(&self, session: &str, machine: &str, size: &str) -> Result<Reply<Created>, Error> {
        self.create_saying(session, machine, size, None)
    }

    /// `POST /v1/handoffs` with turn 1's words (`prompt`).
    pub fn create_saying(
        &self,
        session: &str,
        machine: &str,
        size: &str,
        prompt: Option<&str>,
    ) -> Result<Reply<Created>, Error> {
        let body = CreateInput {
            session: session.into(),
            machine: machine.into(),
            size: size.into(),
            prompt: prompt.map(str::to_string),
            workspace: None,
            runtime: None,
            model: None,
            requested_permission_mode: None,
        };
        self.create_with(&body)
    }

    /// `POST /v1/handoffs` with every field of the create: turn 1's words, and where and how it
    /// runs. A repeated create answers without a machine token.
    pub fn create_with(&self, body: &CreateInput) -> Result<Reply<Created>, Error> {
        let raw = self.change("POST", "/v1/handoffs", &to_value(body))?;
        read_json(raw)
    }

    /// `POST …/machine-token` (owner): a fresh machine token, which ends the ones before it.
    pub fn machine_token(&self, id: &str) -> Result<Reply<Created>, Error> {
        read_json(self.change("POST", &handoff_path(id, "/machine-token"), &to_value(&CloseInput {}))?)
    }

    /// `GET /v1/handoffs/:id` (owner or machine).
    pub fn get(&self, id: &str) -> Result<Reply<Handoff>, Error> {
        let raw = self.read("GET", &handoff_path(id, ""), &[], REQUEST_TIMEOUT_S)?;
        read_handoff(raw)
    }

    /// `POST …/turns {"after"}`; with `handoff`, the turn is handed to a runtime and its
    /// package compiled in the same write.
    pub fn open_turn(&self, id: &str, after: u64, handoff: Option<&PackageRequest>) -> Result<Reply<Handoff>, Error> {
        self.open_turn_saying(id, after, None, handoff)
    }

    /// `POST …/turns` with the owner's words for the new turn (`prompt`).
    pub fn open_turn_saying(
        &self,
        id: &str,
        after: u64,
        prompt: Option<&str>,
        handoff: Option<&PackageRequest>,
    ) -> Result<Reply<Handoff>, Error> {
        let body = OpenTurnInput { after, prompt: prompt.map(str::to_string), package: handoff.cloned() };
        read_handoff(self.change("POST", &handoff_path(id, "/turns"), &to_value(&body))?)
    }

    /// `POST …/report` (machine).
    pub fn report(&self, id: &str, report: &ReportInput) -> Result<Reply<Handoff>, Error> {
        read_handoff(self.change("POST", &handoff_path(id, "/report"), &to_value(report))?)
    }

    /// `POST …/cancel` (owner), optionally naming the turn the caller saw.
    pub fn cancel(&self, id: &str, turn: Option<u64>) -> Result<Reply<Handoff>, Error> {
        read_handoff(self.change("POST", &handoff_path(id, "/cancel"), &to_value(&CancelInput { turn }))?)
    }

    /// `POST …/steer` (owner): the owner's words for the running turn `turn`, which the machine
    /// hands its harness. One key per call, so a retry is one steer.
    pub fn steer(&self, id: &str, turn: u64, prompt: &str) -> Result<Reply<Handoff>, Error> {
        let body = SteerInput { turn, prompt: prompt.to_string() };
        read_handoff(self.change("POST", &handoff_path(id, "/steer"), &to_value(&body))?)
    }

    /// `POST …/close` (owner): the only terminal change.
    pub fn close(&self, id: &str) -> Result<Reply<Handoff>, Error> {
        read_handoff(self.change("POST", &handoff_path(id, "/close"), &to_value(&CloseInput {}))?)
    }

    /// `POST …/answer` (owner): answers the open question with one of its options.
    pub fn answer(&self, id: &str, input: &AnswerInput) -> Result<Reply<Handoff>, Error> {
        read_handoff(self.change("POST", &handoff_path(id, "/answer"), &to_value(input))?)
    }

    /// `DELETE /v1/handoffs/:id` (owner): closes it if open, then erases it and its row; 204,
    /// and 204 again for one already erased.
    pub fn erase(&self, id: &str) -> Result<Reply<()>, Error> {
        let raw = self.change("DELETE", &format!("/v1/handoffs/{id}"), &to_value(&CloseInput {}))?;
        if raw.status >= 300 {
            return Err(refusal_of(raw));
        }
        Ok(Reply { status: raw.status, body: Value::Null, value: () })
    }

    /// `GET …/wait?after=V&timeout=S`: answers when the version is above `after` or the
    /// hand-off is closed, or after `timeout_s` with the record as it is.
    pub fn wait(&self, id: &str, after: u64, timeout_s: u64) -> Result<Reply<Handoff>, Error> {
        let timeout_s = timeout_s.clamp(1, WAIT_TIMEOUT_S_MAX);
        let query = [("after", after.to_string()), ("timeout", timeout_s.to_string())];
        let raw = self.read("GET", &handoff_path(id, "/wait"), &query, timeout_s + WAIT_MARGIN_S)?;
        read_handoff(raw)
    }

    // ---------------------------------------------------------------- issue 3: the list

    /// `GET /v1/health` (no token needed).
    pub fn health(&self) -> Result<Reply<Value>, Error> {
        read_json(self.read("GET", "/v1/health", &[], REQUEST_TIMEOUT_S)?)
    }

    /// One page of the owner's list, newest first.
    pub fn list(&self, state: Option<State>, limit: Option<u32>, cursor: Option<&str>) -> Result<Reply<Page>, Error> {
        let mut query = Vec::new();
        if let Some(s) = state {
            query.push(("state", s.as_str().to_string()));
        }
        if let Some(n) = limit {
            query.push(("limit", n.to_string()));
        }
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        read_json(self.read("GET", "/v1/handoffs", &query, REQUEST_TIMEOUT_S)?)
    }

    /// Every page of the owner's list. The body is one `{"handoffs": [every row], "cursor": null}`,
    /// each row as the API sent it.
    pub fn list_all(&self, state: Option<State>) -> Result<Reply<Vec<Row>>, Error> {
        let mut rows = Vec::new();
        let mut raw_rows = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list(state, Some(handoff_core::limits::LIST_LIMIT_MAX), cursor.as_deref())?;
            rows.extend(page.value.handoffs);
            if let Some(list) = page.body["handoffs"].as_array() {
                raw_rows.extend(list.iter().cloned());
            }
            match page.value.cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(Reply { status: 200, body: json!({"handoffs": raw_rows, "cursor": null}), value: rows })
    }

    // ---------------------------------------------------------------- issue 4: the work record

    /// `PUT …/work` (owner).
    pub fn put_work(&self, id: &str, work: &WorkInput) -> Result<Reply<Item>, Error> {
        read_item(self.change("PUT", &handoff_path(id, "/work"), &to_value(work))?, "work")
    }

    /// `GET …/work` (owner or machine): the whole work record.
    pub fn work(&self, id: &str) -> Result<Reply<WorkRecord>, Error> {
        let reply = read_json::<Value>(self.read("GET", &handoff_path(id, "/work"), &[], REQUEST_TIMEOUT_S)?)?;
        let value = field(&reply, "work")?;
        Ok(Reply { status: reply.status, body: reply.body, value })
    }

    /// `POST …/decisions` (owner or machine).
    pub fn decide(&self, id: &str, decision: &DecisionInput) -> Result<Reply<Item>, Error> {
        read_item(self.change("POST", &handoff_path(id, "/decisions"), &to_value(decision))?, "decision")
    }

    /// `POST …/artifacts` (owner or machine): the same title again is its next version.
    pub fn artifact(&self, id: &str, artifact: &ArtifactInput) -> Result<Reply<Item>, Error> {
        read_item(self.change("POST", &handoff_path(id, "/artifacts"), &to_value(artifact))?, "artifact")
    }

    /// `POST …/blockers`.
    pub fn block(&self, id: &str, blocker: &BlockerInput) -> Result<Reply<Item>, Error> {
        read_item(self.change("POST", &handoff_path(id, "/blockers"), &to_value(blocker))?, "blocker")
    }

    /// `POST …/blockers/:bid/resolve`.
    pub fn resolve_blocker(&self, id: &str, blocker_id: &str) -> Result<Reply<Item>, Error> {
        let path = handoff_path(id, &format!("/blockers/{}/resolve", encode(blocker_id)));
        read_item(self.change("POST", &path, &to_value(&CloseInput {}))?, "blocker")
    }

    /// `POST …/workspace` (machine): paths and counts, nothing else.
    pub fn workspace(&self, id: &str, files: &[FileInput]) -> Result<Reply<Item>, Error> {
        let body = WorkspaceInput { files: files.to_vec() };
        read_item(self.change("POST", &handoff_path(id, "/workspace"), &to_value(&body))?, "workspace")
    }

    /// `POST …/package` (owner); `dry_run` answers the same and writes nothing.
    pub fn package(&self, id: &str, request: &PackageRequest, dry_run: bool) -> Result<Reply<Compiled>, Error> {
        let path = handoff_path(id, if dry_run { "/package?dry_run=true" } else { "/package" });
        let raw = if dry_run {
            // A preview changes nothing, so it needs no key and may always be asked again.
            self.send("POST", &path, &[], Some(&to_value(request)), None, REQUEST_TIMEOUT_S)?
        } else {
            self.change("POST", &path, &to_value(request))?
        };
        read_json(raw)
    }

    /// `GET …/package`: the latest package and its state.
    pub fn package_latest(&self, id: &str) -> Result<Reply<Latest>, Error> {
        read_json(self.read("GET", &handoff_path(id, "/package"), &[], REQUEST_TIMEOUT_S)?)
    }

    /// `GET …/package?format=markdown`: the package for a person to read.
    pub fn package_markdown(&self, id: &str) -> Result<Reply<String>, Error> {
        let query = [("format", "markdown".to_string())];
        read_text(self.read("GET", &handoff_path(id, "/package"), &query, REQUEST_TIMEOUT_S)?)
    }

    /// `POST …/package/accept {"package_hash"}`: accepts that exact document.
    pub fn accept(&self, id: &str, package_hash: &str) -> Result<Reply<Value>, Error> {
        let body = AcceptInput { package_hash: package_hash.into() };
        read_json(self.change("POST", &handoff_path(id, "/package/accept"), &to_value(&body))?)
    }

    /// `POST …/package/reject {"reason", "note"}`.
    pub fn reject(&self, id: &str, reason: RejectReason, note: &str) -> Result<Reply<Value>, Error> {
        let body = RejectInput { reason, note: note.into() };
        read_json(self.change("POST", &handoff_path(id, "/package/reject"), &to_value(&body))?)
    }

    /// `GET …/briefing?budget=N&reach=api|none`: plain text within `budget` bytes.
    pub fn briefing(&self, id: &str, budget_bytes: Option<u32>, reach: Option<Reach>) -> Result<Reply<String>, Error> {
        let mut query = Vec::new();
        if let Some(b) = budget_bytes {
            query.push(("budget", b.to_string()));
        }
        if let Some(r) = reach {
            query.push(("reach", r.as_str().to_string()));
        }
        read_text(self.read("GET", &handoff_path(id, "/briefing"), &query, REQUEST_TIMEOUT_S)?)
    }

    /// `GET …/turns`: the lineage, turn by turn.
    pub fn turns(&self, id: &str) -> Result<Reply<Vec<Turn>>, Error> {
        let reply = read_json::<Value>(self.read("GET", &handoff_path(id, "/turns"), &[], REQUEST_TIMEOUT_S)?)?;
        let value = field(&reply, "turns")?;
        Ok(Reply { status: reply.status, body: reply.body, value })
    }

    // ---------------------------------------------------------------- issue 6: suggestions

    /// `PUT …/policy` (owner): without a policy nothing is ever suggested.
    pub fn put_policy(&self, id: &str, policy: &Policy) -> Result<Reply<Item>, Error> {
        read_item(self.change("PUT", &handoff_path(id, "/policy"), &to_value(policy))?, "policy")
    }

    /// `PUT …/runtimes` (machine): what this session's machine can run, replacing the last
    /// report whole.
    pub fn put_runtimes(&self, id: &str, input: &RuntimesInput) -> Result<Reply<Handoff>, Error> {
        read_handoff(self.change("PUT", &handoff_path(id, "/runtimes"), &to_value(input))?)
    }

    // ---------------------------------------------------------------- the timeline

    /// `POST …/events` (machine): a batch of one turn's events, taken whole or refused (409
    /// `timeline.conflict`, `timeline.gap`, `timeline.full`, `timeline.dropped`, each naming
    /// the turn's `next` seq). Sent without an `Idempotency-Key`: a batch repeats by its seqs,
    /// so a retry of the same batch is safe.
    pub fn post_events(&self, id: &str, batch: &Batch) -> Result<Reply<TimelineTaken>, Error> {
        let raw =
            self.send("POST", &handoff_path(id, "/events"), &[], Some(&to_value(batch)), None, REQUEST_TIMEOUT_S)?;
        read_json(raw)
    }

    /// `GET …/events?turn=N&after=S&limit=L&timeout=T`: a turn's events after seq `after` (the
    /// current turn's without `turn`); with `timeout_s` above 0, held until one arrives.
    pub fn events(
        &self,
        id: &str,
        turn: Option<u64>,
        after: u64,
        limit: Option<usize>,
        timeout_s: u64,
    ) -> Result<Reply<Timeline<'static>>, Error> {
        let mut query = vec![("after", after.to_string())];
        if let Some(turn) = turn {
            query.push(("turn", turn.to_string()));
        }
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        let timeout_s = timeout_s.min(WAIT_TIMEOUT_S_MAX);
        if timeout_s > 0 {
            query.push(("timeout", timeout_s.to_string()));
        }
        let held_s = if timeout_s > 0 { timeout_s + WAIT_MARGIN_S } else { REQUEST_TIMEOUT_S };
        let raw = self.read("GET", &handoff_path(id, "/events"), &query, held_s)?;
        read_json(raw)
    }

    // ---------------------------------------------------------------- enrolled machines

    /// `POST /v1/enrolments` (no token): a new enrolment and its code.
    pub fn start_enrolment(&self, name: &str, host: &str, public_key: &str) -> Result<Reply<EnrolmentAnswer>, Error> {
        let body = json!({"name": name, "host": host, "public_key": public_key});
        read_json(self.send("POST", "/v1/enrolments", &[], Some(&body), None, REQUEST_TIMEOUT_S)?)
    }

    /// `POST /v1/enrolments/collect` (no token): how the enrolment stands, proving `key_hex`.
    pub fn collect_enrolment(
        &self,
        code: &str,
        key_hex: &str,
        owner: Option<&str>,
    ) -> Result<Reply<CollectAnswer>, Error> {
        let mut body = json!({"code": code, "key": key_hex});
        if let Some(owner) = owner {
            body["owner"] = Value::from(owner);
        }
        read_json(self.send("POST", "/v1/enrolments/collect", &[], Some(&body), None, REQUEST_TIMEOUT_S)?)
    }

    /// `GET /v1/enrolments/:code` (owner).
    pub fn look_up_enrolment(&self, code: &str) -> Result<Reply<EnrolmentAnswer>, Error> {
        read_json(self.read("GET", &format!("/v1/enrolments/{}", encode(code)), &[], REQUEST_TIMEOUT_S)?)
    }

    /// `POST /v1/enrolments/:code/approve` (owner).
    pub fn approve_enrolment(&self, code: &str) -> Result<Reply<EnrolmentAnswer>, Error> {
        let path = format!("/v1/enrolments/{}/approve", encode(code));
        read_json(self.send("POST", &path, &[], Some(&json!({})), None, REQUEST_TIMEOUT_S)?)
    }

    /// `POST /v1/machine/presence` (credential): the machine's workspaces, runtimes and sessions.
    pub fn presence(&self, presence: &Presence) -> Result<Reply<PresenceAnswer>, Error> {
        let body = serde_json::to_value(presence).unwrap_or(Value::Null);
        read_json(self.send("POST", "/v1/machine/presence", &[], Some(&body), None, REQUEST_TIMEOUT_S)?)
    }

    /// `GET /v1/machine/handoffs` (credential); with `after`, held until the list's version
    /// passes it (at most `timeout_s`).
    pub fn machine_handoffs(&self, after: Option<u64>, timeout_s: u64) -> Result<Reply<MachineHandoffList>, Error> {
        let query: Vec<(&str, String)> =
            after.map(|v| vec![("after", v.to_string()), ("timeout", timeout_s.to_string())]).unwrap_or_default();
        let held_s = if after.is_some() { timeout_s + WAIT_MARGIN_S } else { REQUEST_TIMEOUT_S };
        read_json(self.read("GET", "/v1/machine/handoffs", &query, held_s)?)
    }

    /// `POST /v1/machine/handoffs/:id/machine-token` (credential): the hand-off and a machine
    /// token for it; it ends no other token.
    pub fn credential_machine_token(&self, id: &str) -> Result<Reply<Created>, Error> {
        let path = format!("/v1/machine/handoffs/{}/machine-token", encode(id));
        read_json(self.send("POST", &path, &[], Some(&json!({})), None, REQUEST_TIMEOUT_S)?)
    }

    // ---------------------------------------------------------------- transport

    fn read(&self, method: &str, path: &str, query: &[(&str, String)], timeout_s: u64) -> Result<Raw, Error> {
        self.send(method, path, query, None, None, timeout_s)
    }

    /// A state-changing request: it carries an `Idempotency-Key`, the same on every retry.
    fn change(&self, method: &str, path: &str, body: &Value) -> Result<Raw, Error> {
        let key = self.idempotency_key.clone().unwrap_or_else(new_idempotency_key);
        self.send(method, path, &[], Some(body), Some(&key), REQUEST_TIMEOUT_S)
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        idempotency_key: Option<&str>,
        timeout_s: u64,
    ) -> Result<Raw, Error> {
        if let Some(message) = &self.refused {
            return Err(Error::Unexpected { status: 0, message: message.clone() });
        }
        let url = url_of(&self.base, path, query);
        let payload = body.map(|b| b.to_string().into_bytes());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= self.retry.attempts_max;
            match self.try_once(method, &url, payload.as_deref(), idempotency_key, timeout_s) {
                Ok((raw, retry_after_s)) => {
                    if last
                        || !is_retryable(Outcome::Answered(raw.status))
                        || is_misconfigured(&raw.text)
                        || is_over_the_open_cap(&raw.text)
                    {
                        return Ok(raw);
                    }
                    std::thread::sleep(self.retry.delay(attempt, retry_after_s, random_u64()));
                }
                Err(Tried::Final(message)) => return Err(Error::Network { attempts: attempt, message }),
                Err(Tried::Connection(message)) => {
                    if last {
                        return Err(Error::Network { attempts: attempt, message });
                    }
                    std::thread::sleep(self.retry.delay(attempt, None, random_u64()));
                }
            }
        }
    }

    fn try_once(
        &self,
        method: &str,
        url: &str,
        payload: Option<&[u8]>,
        idempotency_key: Option<&str>,
        timeout_s: u64,
    ) -> Result<(Raw, Option<u64>), Tried> {
        let mut request = ureq::http::Request::builder().method(method).uri(url).header("Accept", "application/json");
        if let Some(t) = &self.token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(k) = idempotency_key {
            request = request.header("Idempotency-Key", k);
        }
        let route_timeout = Duration::from_secs(timeout_s);
        let timeout = Some(self.request_timeout.map_or(route_timeout, |cap| cap.min(route_timeout)));
        let result = match payload {
            Some(bytes) => {
                let request = request.header("Content-Type", "application/json").body(bytes.to_vec());
                let request = request.map_err(|e| Tried::Final(format!("{method} {url}: {e}")))?;
                self.agent.run(self.agent.configure_request(request).timeout_global(timeout).build())
            }
            None => {
                let request = request.body(()).map_err(|e| Tried::Final(format!("{method} {url}: {e}")))?;
                self.agent.run(self.agent.configure_request(request).timeout_global(timeout).build())
            }
        };
        let mut response = result.map_err(|e| classify(method, url, e))?;
        let status = response.status().as_u16();
        let retry_after_s = response
            .headers()
            .get("Retry-After")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let text = response
            .body_mut()
            .with_config()
            .limit(ANSWER_BYTES_MAX)
            .read_to_string()
            .map_err(|e| classify(method, url, e))?;
        Ok((Raw { status, text }, retry_after_s))
    }
}

/// A try that failed before an answer was read.
enum Tried {
    /// Worth another try: the request may not have arrived, or its answer was lost.
    Connection(String),
    /// Trying again would fail the same way (a bad URL, TLS not built in, …).
    Final(String),
}

fn classify(method: &str, url: &str, error: ureq::Error) -> Tried {
    let message = format!("{method} {url}: {error}");
    match error {
        ureq::Error::Io(_)
        | ureq::Error::Timeout(_)
        | ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Protocol(_)
        | ureq::Error::BodyStalled => Tried::Connection(message),
        ureq::Error::TlsRequired | ureq::Error::BadUri(_) => {
            Tried::Final(format!("{message} (https needs a client built with the `tls` feature, the default)"))
        }
        _ => Tried::Final(message),
    }
}

// ---------------------------------------------------------------- reading answers

fn refusal_of(raw: Raw) -> Error {
    let body: Value = match serde_json::from_str(&raw.text) {
        Ok(v) => v,
        Err(_) => return unexpected(raw.status, &raw.text),
    };
    let Some(code) = body["error"]["code"].as_str() else {
        return unexpected(raw.status, &raw.text);
    };
    let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
    let handoff = serde_json::from_value(body["handoff"].clone()).ok();
    Error::Refused(Box::new(Refusal { status: raw.status, code: ErrorCode::parse(code), message, handoff, body }))
}

fn unexpected(status: u16, text: &str) -> Error {
    let snippet: String = text.chars().take(200).collect();
    Error::Unexpected { status, message: format!("an answer that is not the API's ({status}): {snippet}") }
}

fn read_json<T: DeserializeOwned>(raw: Raw) -> Result<Reply<T>, Error> {
    if raw.status >= 300 {
        return Err(refusal_of(raw));
    }
    let body: Value = serde_json::from_str(&raw.text).map_err(|_| unexpected(raw.status, &raw.text))?;
    let value = serde_json::from_value(body.clone()).map_err(|e| Error::Unexpected {
        status: raw.status,
        message: format!("an answer this client cannot read: {e}"),
    })?;
    Ok(Reply { status: raw.status, body, value })
}

fn read_text(raw: Raw) -> Result<Reply<String>, Error> {
    if raw.status >= 300 {
        return Err(refusal_of(raw));
    }
    Ok(Reply { status: raw.status, body: Value::String(raw.text.clone()), value: raw.text })
}

fn field<T: DeserializeOwned>(reply: &Reply<Value>, name: &str) -> Result<T, Error> {
    serde_json::from_value(reply.body[name].clone())
        .map_err(|e| Error::Unexpected { status: reply.status, message: format!("`{name}` in the answer: {e}") })
}

fn read_handoff(raw: Raw) -> Result<Reply<Handoff>, Error> {
    let reply = read_json::<Value>(raw)?;
    let value = field(&reply, "handoff")?;
    Ok(Reply { status: reply.status, body: reply.body, value })
}

fn read_item(raw: Raw, kind: &'static str) -> Result<Reply<Item>, Error> {
    let reply = read_json::<Value>(raw)?;
    let handoff = field(&reply, "handoff")?;
    let item = reply.body[kind].clone();
    Ok(Reply { status: reply.status, body: reply.body, value: Item { handoff, kind, item } })
}

// ---------------------------------------------------------------- small pieces

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("request bodies serialise")
}

fn handoff_path(id: &str, rest: &str) -> String {
    format!("/v1/handoffs/{}{rest}", encode(id))
}

/// `base + path + ?query`, every query value percent-encoded.
pub fn url_of(base: &str, path: &str, query: &[(&str, String)]) -> String {
    let mut url = format!("{base}{path}");
    for (i, (key, value)) in query.iter().enumerate() {
        let joiner = if i == 0 && !path.contains('?') { '?' } else { '&' };
        url.push(joiner);
        url.push_str(key);
        url.push('=');
        url.push_str(&encode(value));
    }
    url
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No OS randomness: the time still spreads jitter; keys stay unique per process and call.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let seed = nanos ^ (u128::from(std::process::id()) << 64);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8 ^ i as u8;
        }
    }
    bytes
}

fn random_u64() -> u64 {
    u64::from_le_bytes(random_bytes::<8>())
}

/// A fresh `Idempotency-Key`: 128 random bits, so two machines never pick the same one.
pub fn new_idempotency_key() -> String {
    let bytes = random_bytes::<16>();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("cli-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_goes_only_to_loopback_unless_insecure_http_is_given() {
        for ok in [
            "http://127.0.0.1:8787",
            "http://127.9.9.9/x",
            "http://localhost:8787/",
            "http://LOCALHOST",
            "http://[::1]:8787",
            "http://user@127.0.0.1:1",
            "https://handoff.example.com",
            "https://10.0.0.1",
        ] {
            assert!(check_url(ok, false).is_ok(), "{ok}");
        }
        for refused in [
            "http://handoff.example.com",
            "http://10.0.0.1:8787",
            "http://[::2]/",
            "HTTP://example.com",
            "http://127.0.0.1.evil.example/",
            "http://localhost.evil.example",
            "http://127.0.0.1@evil.example/",
        ] {
            let message = check_url(refused, false).unwrap_err();
            assert!(message.contains("--insecure-http") && message.contains(ENV_INSECURE_HTTP), "{refused}: {message}");
            assert!(check_url(refused, true).is_ok(), "{refused} with --insecure-http");
        }
        let env = |v: &'static str| move |k: &str| (k == ENV_INSECURE_HTTP).then(|| v.to_string());
        assert!(insecure_http_from_env(&env("1")) && insecure_http_from_env(&env("true")));
        assert!(
            !insecure_http_from_env(&env("0"))
                && !insecure_http_from_env(&env(""))
                && !insecure_http_from_env(&|_| None)
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_token_file_is_0600_in_a_0700_folder_and_reads_back_trimmed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("handoff-token-file-{}", std::process::id())).join("tokens");
        let file = dir.join("ho_1.token");
        write_token_file(&file, "abc.def.ghi").unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
        let path = file.to_string_lossy().into_owned();
        let env = move |k: &str| (k == ENV_TOKEN_FILE).then(|| path.clone());
        assert_eq!(token_from_env(&env), Ok(Some("abc.def.ghi".to_string())));
        let both = |k: &str| match k {
            "HANDOFF_TOKEN" => Some("direct".to_string()),
            _ => Some("/nonexistent".to_string()),
        };
        assert_eq!(token_from_env(&both), Ok(Some("direct".to_string())), "the variable wins over the file");
        assert_eq!(token_from_env(&|_| None), Ok(None));
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_client_to_plain_http_off_this_machine_sends_nothing() {
        let client = Client::new("http://192.0.2.1:9", Some("secret")).with_retry(Retry::none());
        match client.get("ho_0123456789abcdef0123456789abcdef") {
            Err(Error::Unexpected { status: 0, message }) => assert!(message.contains("--insecure-http"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert!(Client::new("http://192.0.2.1:9", None).with_insecure_http(true).refused().is_none());
    }

    #[test]
    fn only_connection_errors_429_and_503_are_tried_again() {
        assert!(is_retryable(Outcome::ConnectionError));
        assert!(is_retryable(Outcome::Answered(429)));
        assert!(is_retryable(Outcome::Answered(503)));
        for status in [200, 201, 400, 401, 403, 404, 405, 409, 413, 422, 500, 502] {
            assert!(!is_retryable(Outcome::Answered(status)), "{status}");
        }
    }

    #[test]
    fn a_misconfigured_signing_key_is_not_tried_again_though_it_is_a_503() {
        assert!(is_misconfigured(r#"{"error":{"code":"auth.misconfigured","message":"m"}}"#));
        assert!(!is_misconfigured(r#"{"error":{"code":"store.unavailable","message":"m"}}"#));
        assert!(!is_misconfigured("not json"));
    }

    #[test]
    fn backoff_grows_stays_jittered_within_its_step_and_is_capped() {
        let r = Retry::default();
        for random in [0, 1, 77, u64::MAX] {
            for attempt in 1..=12 {
                let step = (r.backoff_ms_base << (attempt - 1).min(20)).min(r.backoff_ms_max);
                let d = r.delay(attempt, None, random).as_millis() as u64;
                assert!(d >= step / 2 && d <= step, "attempt {attempt}: {d} ms outside {}..={step}", step / 2);
            }
        }
        assert_ne!(r.delay(3, None, 0), r.delay(3, None, 123_456), "two clients do not pause alike");
        assert_eq!(r.delay(1, Some(3), 0), Duration::from_secs(3), "Retry-After is a floor");
        assert_eq!(r.delay(1, Some(3600), 0), Duration::from_secs(RETRY_AFTER_S_MAX));
    }

    /// A one-thread HTTP server that answers each connection with the next canned status and
    /// records the requests it read. Enough to watch the client retry without a Worker.
    fn canned(statuses: Vec<u16>) -> (String, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for status in statuses {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                std::io::Read::read_exact(&mut reader, &mut body).unwrap();
                tx.send(head).unwrap();
                let text = match status {
                    200 => json!({"ok": true, "store": "bound"}).to_string(),
                    _ => json!({"error": {"code": if status == 409 { "handoff.stale" } else { "store.unavailable" }, "message": "m"}}).to_string(),
                };
                let mut stream = stream;
                write!(stream, "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}", text.len()).unwrap();
            }
        });
        (base, rx)
    }

    fn quick() -> Retry {
        Retry { attempts_max: 4, backoff_ms_base: 1, backoff_ms_max: 4 }
    }

    #[test]
    fn a_503_and_a_429_are_tried_again_with_the_same_idempotency_key() {
        let (base, requests) = canned(vec![503, 429, 200]);
        let client = Client::new(&base, Some("t")).with_retry(quick());
        let reply = client.accept("ho_1", &"ab".repeat(32)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reply.status, 200);
        let heads: Vec<String> = requests.try_iter().collect();
        assert_eq!(heads.len(), 3);
        let key =
            |h: &str| h.lines().find(|l| l.to_ascii_lowercase().starts_with("idempotency-key:")).map(str::to_string);
        assert!(key(&heads[0]).is_some());
        assert!(heads.iter().all(|h| key(h) == key(&heads[0])), "one key across the retries: {heads:#?}");
    }

    #[test]
    fn a_4xx_is_never_tried_again() {
        let (base, requests) = canned(vec![409, 200]);
        let client = Client::new(&base, Some("t")).with_retry(quick());
        let error = client.close("ho_1").unwrap_err();
        assert_eq!(error.code().map(ErrorCode::as_str), Some("handoff.stale"));
        assert_eq!(requests.try_iter().count(), 1);
    }

    #[test]
    fn retries_end_and_the_last_answer_or_the_connection_error_is_reported() {
        let (base, requests) = canned(vec![503, 503, 503, 503]);
        let error = Client::new(&base, None).with_retry(quick()).health().unwrap_err();
        assert_eq!(error.code().map(ErrorCode::as_str), Some("store.unavailable"));
        assert_eq!(requests.try_iter().count(), 4);
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let error = Client::new(&base, None).with_retry(quick()).health().unwrap_err();
        assert!(matches!(error, Error::Network { attempts: 4, .. }), "{error:?}");
    }

    #[test]
    fn idempotency_keys_are_fresh_each_time() {
        let a = new_idempotency_key();
        assert_eq!(a.len(), 4 + 32);
        assert_ne!(a, new_idempotency_key());
    }

    #[test]
    fn query_values_are_encoded() {
        let q = [("after", "7".to_string()), ("cursor", "a b/c=".to_string())];
        assert_eq!(url_of("http://h", "/v1/x", &q), "http://h/v1/x?after=7&cursor=a%20b%2Fc%3D");
        assert_eq!(url_of("http://h", "/p?dry_run=true", &[("a", "1".into())]), "http://h/p?dry_run=true&a=1");
    }

    #[test]
    fn a_refusal_keeps_its_code_its_hand_off_and_an_unknown_code() {
        let handoff = json!({"id": "ho_1", "owner": "o", "session": "s", "machine": "m", "size": "l", "turn": 2,
            "state": "open", "status": "running", "summary": null, "version": 7,
            "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"});
        let body = json!({"error": {"code": "handoff.stale", "message": "old"}, "handoff": handoff});
        let Error::Refused(r) = refusal_of(Raw { status: 409, text: body.to_string() }) else { panic!() };
        assert!(r.code.is(handoff_api::error::Code::HandoffStale));
        assert_eq!(r.handoff.unwrap().version, 7);
        let future = json!({"error": {"code": "quota.exhausted", "message": "m"}});
        let Error::Refused(r) = refusal_of(Raw { status: 409, text: future.to_string() }) else { panic!() };
        assert_eq!(r.code.as_str(), "quota.exhausted");
        assert!(matches!(
            refusal_of(Raw { status: 502, text: "<html>".into() }),
            Error::Unexpected { status: 502, .. }
        ));
    }
}
