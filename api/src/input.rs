//! Reading requests: JSON bodies and query strings, each into a typed value or a
//! 400 `request.invalid` that names the field. Nothing here touches state.

use crate::error::ApiError;
use handoff_core::briefing::ReachKind;
use handoff_core::json::Checked;
use handoff_core::limits::{
    ACCEPTANCE_CRITERIA_MAX, BRIEFING_BUDGET_BYTES_DEFAULT, BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN,
    IDEMPOTENCY_KEY_CHARS_MAX, ID_CHARS_MAX, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, TIMELINE_PAGE_DEFAULT,
    TIMELINE_PAGE_MAX, TURNS_PAGE_DEFAULT, TURNS_PAGE_MAX, WAIT_TIMEOUT_S_DEFAULT, WAIT_TIMEOUT_S_MAX,
};
use handoff_core::package::PackageRequest;
use handoff_core::placement::Placement;
use handoff_core::question::QuestionInput;
use handoff_core::rows::{Cursor, ListQuery};
use handoff_core::suggestion::Usage;
use handoff_core::turn::{check_prompt, ReportStatus, State};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use handoff_core::ids::{handoff_id, is_handoff_id, is_id};
pub use handoff_core::json::{parse_json, parse_json_or_empty};

/// A body whose value has rules of its own (the work record's inputs, a package request, a
/// policy): read as JSON, then checked by the core, once.
pub fn parse_body<T: DeserializeOwned + Checked>(body: &[u8]) -> Result<T, ApiError> {
    parse_json::<T>(body)?.checked()
}

fn check_id(field: &str, value: &str) -> Result<(), ApiError> {
    if is_id(value) {
        Ok(())
    } else {
        Err(ApiError::invalid(format!("{field}: must be 1-{ID_CHARS_MAX} characters of [A-Za-z0-9._:-]")))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateInput {
    pub session: String,
    pub machine: String,
    pub size: String,
    /// Turn 1's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Where turn 1 runs: a workspace the machine names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The runtime turn 1 runs on (`claude-code`, `codex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The model turn 1 runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The permission mode the owner asks turn 1 to run in; the record's `permission_mode`
    /// stays what the machine reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_permission_mode: Option<String>,
}

impl CreateInput {
    /// Turn 1 runs as its machine placed it (`machines::place`).
    pub fn place(&mut self, placement: Placement) {
        self.workspace = placement.workspace;
        self.runtime = placement.runtime;
        self.model = placement.model;
        self.requested_permission_mode = placement.requested_permission_mode;
    }

    /// Where and how turn 1 is to run, as the core keeps it.
    pub fn placement(&self) -> Placement {
        Placement {
            workspace: self.workspace.clone(),
            runtime: self.runtime.clone(),
            model: self.model.clone(),
            requested_permission_mode: self.requested_permission_mode.clone(),
        }
    }
}

pub fn parse_create(body: &[u8]) -> Result<CreateInput, ApiError> {
    let input: CreateInput = parse_json(body)?;
    input.placement().check()?;
    check_id("session", &input.session)?;
    check_id("machine", &input.machine)?;
    check_id("size", &input.size)?;
    if let Some(prompt) = &input.prompt {
        check_prompt(prompt)?;
    }
    Ok(input)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenTurnInput {
    pub after: u64,
    /// The owner's words for the new turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Hands the new turn to a runtime, compiling its package in the same change (the body's
    /// `handoff`).
    #[serde(default, rename = "handoff", skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRequest>,
}

pub fn parse_open_turn(body: &[u8]) -> Result<OpenTurnInput, ApiError> {
    let input: OpenTurnInput = parse_json(body)?;
    if let Some(prompt) = &input.prompt {
        check_prompt(prompt)?;
    }
    if let Some(request) = &input.package {
        request.validate().map_err(|e| ApiError::invalid(format!("handoff.{}", e.message)))?;
    }
    Ok(input)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportInput {
    pub turn: u64,
    pub status: ReportStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Final reports only: indices of acceptance criteria not met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmet: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A needs-you's question for the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<QuestionInput>,
    /// A running report's runtime: the one running the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// A running report's permission mode: the one the turn runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// A done report's reply: the model's final answer, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// A running report's sync mode: what the machine lets leave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_mode: Option<handoff_core::timeline::SyncMode>,
}

impl ReportInput {
    /// A report of `status` for `turn` that names nothing else; a caller sets the fields it has
    /// with `..ReportInput::of(turn, status)`, so a new field is one edit here.
    pub fn of(turn: u64, status: ReportStatus) -> ReportInput {
        ReportInput {
            turn,
            status,
            summary: None,
            unmet: None,
            usage: None,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        }
    }
}

/// A report's field that only a running report may name (`names`: what it names), checked by
/// `check` where it is named.
fn running_only(
    field: &str,
    names: &str,
    value: Option<&str>,
    status: ReportStatus,
    check: fn(&str) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    let Some(value) = value else { return Ok(()) };
    if status != ReportStatus::Running {
        return Err(ApiError::invalid(format!("{field}: only a running report names {names}")));
    }
    check(value)
}

pub fn parse_report(body: &[u8]) -> Result<ReportInput, ApiError> {
    let input: ReportInput = parse_json(body)?;
    if let Some(summary) = &input.summary {
        handoff_core::turn::check_summary(summary)?;
    }
    let is_final = matches!(input.status, ReportStatus::Done | ReportStatus::Failed);
    if input.unmet.is_some() && !is_final {
        return Err(ApiError::invalid("unmet: only a final report (done or failed) lists unmet criteria"));
    }
    if input.unmet.as_ref().is_some_and(|u| u.len() > ACCEPTANCE_CRITERIA_MAX) {
        return Err(ApiError::invalid(format!("unmet: at most {ACCEPTANCE_CRITERIA_MAX} indices")));
    }
    running_only(
        "runtime",
        "the runtime running the turn",
        input.runtime.as_deref(),
        input.status,
        handoff_core::turn::check_runtime,
    )?;
    running_only(
        "permission_mode",
        "the permission mode the turn runs in",
        input.permission_mode.as_deref(),
        input.status,
        handoff_core::turn::check_permission_mode,
    )?;
    if input.sync_mode.is_some() && input.status != ReportStatus::Running {
        return Err(ApiError::invalid("sync_mode: only a running report names the sync mode"));
    }
    if let Some(reply) = &input.reply {
        if input.status != ReportStatus::Done {
            return Err(ApiError::invalid("reply: only a done report carries the reply"));
        }
        handoff_core::turn::check_reply(reply)?;
    }
    let mut input = input;
    if let Some(question) = input.question.take() {
        if input.status != ReportStatus::NeedsYou {
            return Err(ApiError::invalid("question: only a needs-you report asks a question"));
        }
        input.question = Some(question.checked()?);
    }
    Ok(input)
}

/// `POST …/steer`: the owner's words for the running turn `turn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerInput {
    pub turn: u64,
    pub prompt: String,
}

/// A steer's `prompt` follows a turn's prompt's rule (a refusal names `prompt`).
pub fn parse_steer(body: &[u8]) -> Result<SteerInput, ApiError> {
    let input: SteerInput = parse_json(body)?;
    check_prompt(&input.prompt)?;
    Ok(input)
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
}

pub fn parse_cancel(body: &[u8]) -> Result<CancelInput, ApiError> {
    parse_json_or_empty(body)
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseInput {}

pub fn parse_close(body: &[u8]) -> Result<CloseInput, ApiError> {
    parse_json_or_empty(body)
}

/// A request's URL as the runtime serialised it (WHATWG: `scheme://host[:port]/path[?query]`),
/// split without a URL parser: the runtime has already parsed and normalised it, its path is
/// never empty and holds no raw `?` or `#`, and a request carries no fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestUrl<'a> {
    /// `scheme://host[:port]`, the base of the API links a briefing carries.
    pub origin: &'a str,
    pub path: &'a str,
    /// Undecoded, without the `?`; empty when there is none.
    pub query: &'a str,
}

impl<'a> RequestUrl<'a> {
    pub fn split(url: &'a str) -> RequestUrl<'a> {
        let url = url.split_once('#').map_or(url, |(before, _)| before);
        let host_start = url.find("://").map_or(0, |i| i + 3);
        let path_start = url[host_start..].find(['/', '?']).map_or(url.len(), |i| host_start + i);
        let (origin, rest) = url.split_at(path_start);
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        RequestUrl { origin, path: if path.is_empty() { "/" } else { path }, query }
    }
}

/// The pairs of a query string, undecoded. Only the service's own keys are read, and their
/// values are plain digits or words, so no percent-decoding is needed: an encoded value is
/// simply not one of them.
pub fn query_pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// A query that may carry only `key`, set to `on` (true) or `off` (false, also its default);
/// the last occurrence wins.
pub fn parse_flag(query: &str, key: &str, (on, off): (&str, &str)) -> Result<bool, ApiError> {
    let mut flag = false;
    for (k, v) in query_pairs(query) {
        match k {
            k if k != key => return Err(ApiError::invalid(format!("{k}: unknown query parameter"))),
            _ if v == on => flag = true,
            _ if v == off => flag = false,
            _ => return Err(ApiError::invalid(format!("{key}: {off} or {on}"))),
        }
    }
    Ok(flag)
}

/// `POST …/turns`'s query: nothing, or `dry_run=true` with the briefing's `budget` and
/// `reach` (as `GET …/briefing` takes them): a preview of the turn's hand-off that stores
/// nothing. `None` when it is not a dry run; a budget or reach without one is refused.
pub fn parse_open_turn_query(query: &str) -> Result<Option<(usize, ReachKind)>, ApiError> {
    let mut dry_run = false;
    let mut rest = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        match part.split_once('=').unwrap_or((part, "")) {
            ("dry_run", "true") => dry_run = true,
            ("dry_run", "false") => dry_run = false,
            ("dry_run", _) => return Err(ApiError::invalid("dry_run: false or true")),
            _ => rest.push(part),
        }
    }
    let briefing = parse_briefing_query(&rest.join("&"))?;
    match dry_run {
        true => Ok(Some(briefing)),
        false if rest.is_empty() => Ok(None),
        false => Err(ApiError::invalid("budget and reach preview a hand-off: only with dry_run=true")),
    }
}

pub(crate) fn parse_u64(field: &str, value: &str) -> Result<u64, ApiError> {
    let digits = !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| value.parse().ok())
        .flatten()
        .ok_or_else(|| ApiError::invalid(format!("{field}: expected a non-negative integer")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitQuery {
    pub after: u64,
    pub timeout_s: u64,
}

/// `?after=V&timeout=S`: `after` defaults to 0 (answer at once), `timeout` to 30 s, at most 300.
pub fn parse_wait_query(query: &str) -> Result<WaitQuery, ApiError> {
    let mut wait = WaitQuery { after: 0, timeout_s: WAIT_TIMEOUT_S_DEFAULT };
    for (key, value) in query_pairs(query) {
        match key {
            "after" => wait.after = parse_u64("after", value)?,
            "timeout" => wait.timeout_s = parse_u64("timeout", value)?,
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    if wait.timeout_s > WAIT_TIMEOUT_S_MAX {
        return Err(ApiError::invalid(format!("timeout: at most {WAIT_TIMEOUT_S_MAX} seconds")));
    }
    Ok(wait)
}

/// `?after=V` of a watch: the version the client has (0 without it); and, for a `handoff.v2`
/// watch, `&turn=N&seq=S`: where it stands in the timeline (both or neither).
pub fn parse_watch_query(query: &str) -> Result<(u64, Option<handoff_core::watch::Seen>), ApiError> {
    let (mut after, mut turn, mut seq) = (0, None, None);
    for (key, value) in query_pairs(query) {
        match key {
            "after" => after = parse_u64("after", value)?,
            "turn" => turn = Some(parse_u64("turn", value)?),
            "seq" => seq = Some(parse_u64("seq", value)?),
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    match (turn, seq) {
        (None, None) => Ok((after, None)),
        (Some(turn), Some(seq)) => Ok((after, Some(handoff_core::watch::Seen { turn, seq }))),
        _ => Err(ApiError::invalid("turn and seq: both or neither")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnsQuery {
    /// Turns before this one (exclusive); the newest turns when absent.
    pub before: Option<u64>,
    pub limit: usize,
}

/// `?before=T&limit=N`: the page of turns before turn `T`, at most `N` of them
/// ([`TURNS_PAGE_DEFAULT`] without it, 1 to [`TURNS_PAGE_MAX`]).
pub fn parse_turns_query(query: &str) -> Result<TurnsQuery, ApiError> {
    let mut turns = TurnsQuery { before: None, limit: TURNS_PAGE_DEFAULT };
    for (key, value) in query_pairs(query) {
        match key {
            "before" => turns.before = Some(parse_u64("before", value)?),
            "limit" => {
                let n = parse_u64("limit", value)?;
                if n == 0 || n > TURNS_PAGE_MAX as u64 {
                    return Err(ApiError::invalid(format!("limit: 1 to {TURNS_PAGE_MAX}")));
                }
                turns.limit = n as usize;
            }
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    Ok(turns)
}

/// `GET …/events`' query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineQuery {
    /// The turn whose events are read; the current turn when absent.
    pub turn: Option<u64>,
    /// Events after this `seq` (0: from the first).
    pub after: u64,
    pub limit: usize,
    /// Hold the answer this long until an event after `after` arrives (0: answer at once).
    pub timeout_s: u64,
}

/// `?turn=N&after=S&limit=L&timeout=T`: `after` 0, `limit` [`TIMELINE_PAGE_DEFAULT`] (1 to
/// [`TIMELINE_PAGE_MAX`]), `timeout` 0 (at most [`WAIT_TIMEOUT_S_MAX`], as a wait's).
pub fn parse_timeline_query(query: &str) -> Result<TimelineQuery, ApiError> {
    let mut q = TimelineQuery { turn: None, after: 0, limit: TIMELINE_PAGE_DEFAULT, timeout_s: 0 };
    for (key, value) in query_pairs(query) {
        match key {
            "turn" => {
                let turn = parse_u64("turn", value)?;
                if turn == 0 {
                    return Err(ApiError::invalid("turn: from 1"));
                }
                q.turn = Some(turn);
            }
            "after" => q.after = parse_u64("after", value)?,
            "limit" => {
                let n = parse_u64("limit", value)?;
                if n == 0 || n > TIMELINE_PAGE_MAX as u64 {
                    return Err(ApiError::invalid(format!("limit: 1 to {TIMELINE_PAGE_MAX}")));
                }
                q.limit = n as usize;
            }
            "timeout" => q.timeout_s = parse_u64("timeout", value)?,
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    if q.timeout_s > WAIT_TIMEOUT_S_MAX {
        return Err(ApiError::invalid(format!("timeout: at most {WAIT_TIMEOUT_S_MAX} seconds")));
    }
    Ok(q)
}

/// `Idempotency-Key`: 1..=128 printable ASCII characters, no spaces.
pub fn is_idempotency_key(key: &str) -> bool {
    let printable = key.bytes().all(|b| (0x21..=0x7e).contains(&b));
    !key.is_empty() && key.len() <= IDEMPOTENCY_KEY_CHARS_MAX && printable
}

/// The query as the fingerprint reads it: its pairs in code-point order, so that the same
/// parameters in another order are the same request.
pub fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = query_pairs(query).collect();
    handoff_core::order::sort(&mut pairs);
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join("&")
}

/// What an idempotent repeat must match: the method, the path, the canonical query, the
/// caller's role and the body, hashed. The query matters: a key first used on a dry run must
/// not answer the real compile with the preview.
pub fn request_fingerprint(method: &str, path: &str, query: &str, role: &str, body: &[u8]) -> String {
    let digest = Sha256::new()
        .chain_update(method)
        .chain_update(" ")
        .chain_update(path)
        .chain_update("?")
        .chain_update(canonical_query(query))
        .chain_update("\n")
        .chain_update(role)
        .chain_update("\n")
        .chain_update(body)
        .finalize();
    hex::encode(digest)
}

/// `GET /v1/handoffs?state=open|closed&limit=N&cursor=C`.
pub fn parse_list_query(query: &str) -> Result<ListQuery, ApiError> {
    let mut list = ListQuery { state: None, limit: LIST_LIMIT_DEFAULT, cursor: None };
    for (key, value) in query_pairs(query) {
        match key {
            "state" => {
                list.state =
                    Some(State::parse(value).ok_or_else(|| ApiError::invalid("state: expected open or closed"))?)
            }
            "limit" => {
                let n: u32 = value.parse().map_err(|_| ApiError::invalid("limit: expected an integer"))?;
                if !(1..=LIST_LIMIT_MAX).contains(&n) || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ApiError::invalid(format!("limit: expected 1 to {LIST_LIMIT_MAX}")));
                }
                list.limit = n;
            }
            "cursor" => {
                list.cursor = Some(
                    Cursor::decode(value).ok_or_else(|| ApiError::invalid("cursor: not a cursor this service gave"))?,
                )
            }
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    Ok(list)
}

/// `GET …/briefing?budget=B&reach=R`: `budget` defaults to 8192 bytes (256 to 65536), `reach`
/// to `api` (or `none`); the last occurrence wins. Anything else → 400 `request.invalid`
/// naming the parameter.
pub fn parse_briefing_query(query: &str) -> Result<(usize, ReachKind), ApiError> {
    let (mut budget, mut reach) = (None, None);
    for (key, value) in query_pairs(query) {
        match key {
            "budget" => budget = Some(value),
            "reach" => reach = Some(value),
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    let budget_bytes = match budget {
        None => BRIEFING_BUDGET_BYTES_DEFAULT,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|b| (BRIEFING_BUDGET_BYTES_MIN..=BRIEFING_BUDGET_BYTES_MAX).contains(b))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "budget: a whole number of bytes from {BRIEFING_BUDGET_BYTES_MIN} to {BRIEFING_BUDGET_BYTES_MAX}"
                ))
            })?,
    };
    let reach = match reach {
        None | Some("api") => ReachKind::Api,
        Some("none") => ReachKind::None,
        Some(_) => return Err(ApiError::invalid("reach: api or none")),
    };
    Ok((budget_bytes, reach))
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::limits::SUMMARY_BYTES_MAX;

    #[test]
    fn a_reports_summary_with_a_control_character_other_than_newline_and_tab_is_400_naming_summary() {
        let report = |summary: &str| {
            parse_report(
                format!(r#"{{"turn":1,"status":"done","summary":{}}}"#, serde_json::to_string(summary).unwrap())
                    .as_bytes(),
            )
        };
        for bad in ["\u{1b}]0;owned\u{7}", "ok\u{1b}[2K", "line\r", "\u{9b}31m", "\u{7f}", "nul\u{0}"] {
            let e = report(bad).unwrap_err();
            assert_eq!(e.code, Code::RequestInvalid, "{bad:?}");
            assert!(e.message.starts_with("summary:"), "{bad:?}: {}", e.message);
        }
        assert!(report("two lines\n\tand a tab").is_ok());
        assert!(report("").is_ok(), "an empty last message is still a report");
    }

    #[test]
    fn only_a_needs_you_report_carries_a_question_and_it_is_checked_as_it_is_read() {
        let q = r#"{"kind":"permission","text":"Bash: ls","options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}]}"#;
        assert!(parse_report(format!(r#"{{"turn":1,"status":"needs-you","question":{q}}}"#).as_bytes())
            .unwrap()
            .question
            .is_some());
        for status in ["running", "done", "failed"] {
            let refused =
                parse_report(format!(r#"{{"turn":1,"status":"{status}","question":{q}}}"#).as_bytes()).unwrap_err();
            assert!(refused.message.starts_with("question: "), "{status}: {}", refused.message);
        }
        let empty = r#"{"turn":1,"status":"needs-you","question":{"kind":"choice","text":"t","options":[]}}"#;
        assert!(parse_report(empty.as_bytes()).unwrap_err().message.starts_with("question.options"));
        assert_eq!(parse_report(br#"{"turn":1,"status":"running","question":null}"#).unwrap().question, None);
    }

    #[test]
    fn only_a_running_report_names_the_runtime_and_it_is_checked_as_it_is_read() {
        let named = parse_report(br#"{"turn":1,"status":"running","runtime":"claude-code"}"#).unwrap();
        assert_eq!(named.runtime.as_deref(), Some("claude-code"));
        for status in ["needs-you", "done", "failed"] {
            let refused =
                parse_report(format!(r#"{{"turn":1,"status":"{status}","runtime":"codex"}}"#).as_bytes()).unwrap_err();
            assert!(refused.message.starts_with("runtime: only a running report"), "{status}: {}", refused.message);
        }
        for bad in ["", "two words", "x/y"] {
            let refused =
                parse_report(format!(r#"{{"turn":1,"status":"running","runtime":"{bad}"}}"#).as_bytes()).unwrap_err();
            assert!(refused.message.starts_with("runtime: 1-"), "{bad:?}: {}", refused.message);
        }
        assert_eq!(parse_report(br#"{"turn":1,"status":"done","runtime":null}"#).unwrap().runtime, None);
    }

    #[test]
    fn only_a_running_report_names_the_permission_mode_and_it_is_checked_as_it_is_read() {
        let named =
            parse_report(br#"{"turn":1,"status":"running","runtime":"codex","permission_mode":"untrusted"}"#).unwrap();
        assert_eq!((named.runtime.as_deref(), named.permission_mode.as_deref()), (Some("codex"), Some("untrusted")));
        for status in ["needs-you", "done", "failed"] {
            let refused =
                parse_report(format!(r#"{{"turn":1,"status":"{status}","permission_mode":"default"}}"#).as_bytes())
                    .unwrap_err();
            assert!(
                refused.message.starts_with("permission_mode: only a running report"),
                "{status}: {}",
                refused.message
            );
        }
        let long = "x".repeat(handoff_core::limits::PERMISSION_MODE_BYTES_MAX + 1);
        for bad in ["", "two words", "x/y", long.as_str()] {
            let refused =
                parse_report(format!(r#"{{"turn":1,"status":"running","permission_mode":"{bad}"}}"#).as_bytes())
                    .unwrap_err();
            assert!(refused.message.starts_with("permission_mode: 1-"), "{bad:?}: {}", refused.message);
        }
        assert_eq!(
            parse_report(br#"{"turn":1,"status":"done","permission_mode":null}"#).unwrap().permission_mode,
            None
        );
        let sent = ReportInput::of(1, ReportStatus::Done);
        assert!(
            !serde_json::to_string(&sent).unwrap().contains("permission_mode"),
            "a report that names none sends none"
        );
    }

    #[test]
    fn a_turn_opens_without_a_query_and_previews_only_with_dry_run() {
        assert_eq!(parse_open_turn_query("").unwrap(), None);
        assert_eq!(parse_open_turn_query("dry_run=false").unwrap(), None);
        assert_eq!(
            parse_open_turn_query("dry_run=true").unwrap(),
            Some((BRIEFING_BUDGET_BYTES_DEFAULT, ReachKind::Api))
        );
        assert_eq!(
            parse_open_turn_query("dry_run=true&budget=4096&reach=none").unwrap(),
            Some((4096, ReachKind::None))
        );
        assert_eq!(parse_open_turn_query("dry_run=yes").unwrap_err().message, "dry_run: false or true");
        for bad in ["budget=4096", "dry_run=yes", "dry_run=true&budget=1", "dry_run=true&other=1", "reach=api"] {
            assert_eq!(parse_open_turn_query(bad).unwrap_err().code, Code::RequestInvalid, "{bad}");
        }
    }
    use crate::error::Code;

    #[test]
    fn a_turns_query_pages_by_before_and_limit_within_its_bounds() {
        assert_eq!(parse_turns_query(""), Ok(TurnsQuery { before: None, limit: TURNS_PAGE_DEFAULT }));
        assert_eq!(parse_turns_query("before=7&limit=3"), Ok(TurnsQuery { before: Some(7), limit: 3 }));
        assert_eq!(parse_turns_query(&format!("limit={TURNS_PAGE_MAX}")).map(|q| q.limit), Ok(TURNS_PAGE_MAX));
        for bad in ["limit=0", &format!("limit={}", TURNS_PAGE_MAX + 1), "before=-1", "before=x", "limit=", "after=1"] {
            assert_eq!(parse_turns_query(bad).map_err(|e| e.code), Err(Code::RequestInvalid), "{bad}");
        }
    }

    #[test]
    fn the_fingerprint_covers_the_query_in_any_order_of_its_pairs() {
        let print = |q| request_fingerprint("POST", "/v1/handoffs/ho_1/package", q, "owner", b"{}");
        assert_ne!(print("dry_run=true"), print(""), "a dry run is not the compile");
        assert_ne!(print("dry_run=true"), print("dry_run=false"));
        assert_eq!(print("a=1&b=2"), print("b=2&a=1"));
        assert_eq!(canonical_query("b=2&&a=1"), "a=1&b=2");
        let other_body = request_fingerprint("POST", "/v1/handoffs/ho_1/package", "", "owner", b"{ }");
        assert_ne!(other_body, print(""));
    }

    #[test]
    fn a_request_url_splits_into_origin_path_and_undecoded_query() {
        let split = |u| {
            let r = RequestUrl::split(u);
            (r.origin, r.path, r.query)
        };
        assert_eq!(
            split("http://127.0.0.1:8787/v1/handoffs/ho_1/wait?after=2&timeout=5"),
            ("http://127.0.0.1:8787", "/v1/handoffs/ho_1/wait", "after=2&timeout=5")
        );
        assert_eq!(split("https://api.example.com/v1/health"), ("https://api.example.com", "/v1/health", ""));
        assert_eq!(split("https://h/"), ("https://h", "/", ""));
        assert_eq!(split("https://h"), ("https://h", "/", ""));
        assert_eq!(split("https://h?x=1"), ("https://h", "/", "x=1"));
        // Only the first `?` starts the query; a fragment is never part of it.
        assert_eq!(split("https://h/a?b=c?d#frag"), ("https://h", "/a", "b=c?d"));
        assert_eq!(split("https://h/a%2Fb/%2e%2e?q=%20"), ("https://h", "/a%2Fb/%2e%2e", "q=%20"));
    }

    #[test]
    fn a_flag_query_takes_only_its_key_with_either_value_and_defaults_to_off() {
        let flag = |q| parse_flag(q, "dry_run", ("true", "false"));
        assert_eq!(flag(""), Ok(false));
        assert_eq!(flag("dry_run=true"), Ok(true));
        assert_eq!(flag("dry_run=true&dry_run=false"), Ok(false));
        for bad in ["dry_run=yes", "dry_run", "other=1", "dry_run=true&x=1"] {
            assert_eq!(flag(bad).unwrap_err().code, Code::RequestInvalid, "{bad}");
        }
        assert!(flag("dry_run=1").unwrap_err().message.contains("dry_run: false or true"));
    }

    #[test]
    fn bad_bodies_are_request_invalid_naming_the_field() {
        let e = parse_report(br#"{"turn":"1","status":"done"}"#).unwrap_err();
        assert_eq!(e.code, Code::RequestInvalid);
        assert!(e.message.starts_with("turn:"), "{}", e.message);
        let e = parse_report(br#"{"turn":1,"status":"finished"}"#).unwrap_err();
        assert!(e.message.starts_with("status:"), "{}", e.message);
        let e = parse_report(br#"{"turn":1,"status":"done","extra":1}"#).unwrap_err();
        assert!(e.message.contains("extra"), "{}", e.message);
        let e = parse_report(br#"{"turn":1,"status":"cancelled"}"#).unwrap_err();
        assert!(e.message.starts_with("status:"), "{}", e.message);
        for bad in [&b"{"[..], b"", b"[]", b"null", b"{\"turn\":1,\"status\":\"done\"} x", b"\xff\xfe"] {
            let e = parse_report(bad).unwrap_err();
            assert_eq!(e.code, Code::RequestInvalid);
            assert!(e.message.starts_with("body:"), "a whole-body error says so: {}", e.message);
        }
        let long = format!(r#"{{"turn":1,"status":"done","summary":"{}"}}"#, "x".repeat(SUMMARY_BYTES_MAX + 1));
        assert!(parse_report(long.as_bytes()).unwrap_err().message.starts_with("summary:"));
        let e = parse_create(br#"{"session":"a/b","machine":"m","size":"s"}"#).unwrap_err();
        assert!(e.message.starts_with("session:"), "{}", e.message);
    }

    #[test]
    fn unmet_is_for_final_reports_and_usage_is_typed() {
        assert!(parse_report(br#"{"turn":1,"status":"done","unmet":[0,2]}"#).is_ok());
        let e = parse_report(br#"{"turn":1,"status":"running","unmet":[0]}"#).unwrap_err();
        assert!(e.message.starts_with("unmet:"), "{}", e.message);
        let e = parse_report(br#"{"turn":1,"status":"running","usage":{"context_used":"x"}}"#).unwrap_err();
        assert!(e.message.starts_with("usage.context_used:"), "{}", e.message);
        let r = parse_report(br#"{"turn":1,"status":"failed","usage":{"limit":"provider-limit"}}"#).unwrap();
        assert!(r.usage.is_some());
    }

    /// A prompt on a create or an open turn: text of at most `PROMPT_BYTES_MAX` bytes, not
    /// empty, `\n` and `\t` but no other control character; a refusal names `prompt`.
    #[test]
    fn a_steer_takes_its_turn_and_a_prompt_under_the_prompts_rule() {
        use handoff_core::limits::PROMPT_BYTES_MAX;
        let s = parse_steer(br#"{"turn":2,"prompt":"use SQLite instead"}"#).unwrap();
        assert_eq!((s.turn, s.prompt.as_str()), (2, "use SQLite instead"));
        for bad in ["".to_string(), "  ".into(), "x".repeat(PROMPT_BYTES_MAX + 1), "a\u{1b}b".into()] {
            let body = serde_json::json!({"turn": 1, "prompt": bad}).to_string();
            assert!(parse_steer(body.as_bytes()).unwrap_err().message.starts_with("prompt"), "{bad:?}");
        }
        assert!(parse_steer(br#"{"turn":1}"#).is_err());
        assert!(parse_steer(br#"{"prompt":"x"}"#).is_err());
        assert!(parse_steer(br#"{"turn":1,"prompt":"x","extra":1}"#).is_err());
    }

    #[test]
    fn a_prompt_on_a_create_or_a_turn_is_read_and_a_bad_one_is_refused_naming_prompt() {
        use handoff_core::limits::PROMPT_BYTES_MAX;
        let t = parse_open_turn(br#"{"after":1,"prompt":"now the tests\n\tplease"}"#).unwrap();
        assert_eq!(t.prompt.as_deref(), Some("now the tests\n\tplease"));
        assert_eq!(parse_open_turn(br#"{"after":1,"prompt":null}"#).unwrap().prompt, None);
        let c = parse_create(br#"{"session":"s","machine":"m","size":"l","prompt":"fix it"}"#).unwrap();
        assert_eq!(c.prompt.as_deref(), Some("fix it"));
        let longest = "é".repeat(PROMPT_BYTES_MAX / 2);
        assert!(parse_open_turn(serde_json::json!({"after": 1, "prompt": longest}).to_string().as_bytes()).is_ok());
        for bad in ["".to_string(), "   ".into(), "x".repeat(PROMPT_BYTES_MAX + 1), "a\u{1b}]0;title\u{7}".into()] {
            let turn = serde_json::json!({"after": 1, "prompt": bad}).to_string();
            let create = serde_json::json!({"session": "s", "machine": "m", "size": "l", "prompt": bad}).to_string();
            for e in [parse_open_turn(turn.as_bytes()).unwrap_err(), parse_create(create.as_bytes()).unwrap_err()] {
                assert_eq!(e.code, Code::RequestInvalid);
                assert!(e.message.starts_with("prompt:"), "{}", e.message);
            }
        }
    }

    #[test]
    fn an_open_turn_may_hand_the_turn_to_a_runtime() {
        let t = parse_open_turn(br#"{"after":1,"handoff":{"runtime":"codex","objective":"o","purpose":"p"}}"#).unwrap();
        assert_eq!(t.package.unwrap().runtime, "codex");
        let e = parse_open_turn(br#"{"after":1,"handoff":{"runtime":"codex","objective":"o"}}"#).unwrap_err();
        assert!(e.message.contains("purpose"), "{}", e.message);
    }

    #[test]
    fn idempotency_keys_are_bounded_and_fingerprints_tell_requests_apart() {
        assert!(is_idempotency_key("k-1"));
        assert!(!is_idempotency_key(""));
        assert!(!is_idempotency_key("a b"));
        assert!(!is_idempotency_key(&"k".repeat(129)));
        let a = request_fingerprint("POST", "/v1/handoffs/x/report", "", "machine", b"{}");
        assert_eq!(a, request_fingerprint("POST", "/v1/handoffs/x/report", "", "machine", b"{}"));
        assert_ne!(a, request_fingerprint("POST", "/v1/handoffs/x/report", "", "machine", b"{ }"));
        assert_ne!(a, request_fingerprint("POST", "/v1/handoffs/x/cancel", "", "machine", b"{}"));
    }

    #[test]
    fn an_array_is_not_read_as_an_object() {
        for body in [&br#"[1,"done","via an array"]"#[..], b"[1]", br#"["s","m","l"]"#, b"[]", b"\"x\"", b"1"] {
            assert_eq!(parse_report(body).unwrap_err().message, "body: expected a JSON object");
            assert!(parse_open_turn(body).is_err());
            assert!(parse_create(body).is_err());
            assert!(parse_close(body).is_err());
        }
    }

    #[test]
    fn cancel_and_close_take_an_empty_body_and_refuse_one_of_whitespace_alone() {
        assert_eq!(parse_cancel(b"").unwrap(), CancelInput { turn: None });
        assert_eq!(parse_cancel(br#"{"turn":2}"#).unwrap(), CancelInput { turn: Some(2) });
        assert!(parse_close(b"").is_ok());
        for blank in [&b"  "[..], b"\r", b"\n\t"] {
            assert_eq!(
                parse_cancel(blank).unwrap_err().code,
                Code::RequestInvalid,
                "whitespace alone is no JSON: {blank:?}"
            );
            assert_eq!(parse_close(blank).unwrap_err().code, Code::RequestInvalid);
        }
        assert!(parse_close(br#"{"now":true}"#).is_err());
    }

    #[test]
    fn the_watch_query_takes_after_and_nothing_else() {
        assert_eq!(parse_watch_query("").unwrap(), (0, None));
        assert_eq!(parse_watch_query("after=12").unwrap(), (12, None));
        assert!(parse_watch_query("after=-1").is_err());
        assert!(parse_watch_query("after=1&timeout=5").is_err());
        let seen = handoff_core::watch::Seen { turn: 3, seq: 7 };
        assert_eq!(parse_watch_query("after=2&turn=3&seq=7").unwrap(), (2, Some(seen)));
        assert!(parse_watch_query("turn=3").is_err(), "the timeline's place is both or neither");
    }

    #[test]
    fn the_wait_query_has_defaults_and_a_ceiling() {
        assert_eq!(parse_wait_query("").unwrap(), WaitQuery { after: 0, timeout_s: 30 });
        assert_eq!(parse_wait_query("after=7&timeout=300").unwrap(), WaitQuery { after: 7, timeout_s: 300 });
        for bad in ["timeout=301", "after=-1", "after=x", "after=", "since=1", "after=99999999999999999999999"] {
            assert_eq!(parse_wait_query(bad).unwrap_err().code, Code::RequestInvalid, "{bad}");
        }
    }

    #[test]
    fn the_list_query_has_defaults_and_bounds() {
        let q = parse_list_query("").unwrap();
        assert_eq!((q.state, q.limit, q.cursor), (None, 50, None));
        assert_eq!(parse_list_query("state=closed&limit=200").unwrap().limit, 200);
        assert_eq!(parse_list_query("state=open").unwrap().state, Some(State::Open));
        assert_eq!(parse_list_query("state=closed").unwrap().state, Some(State::Closed));
        for bad in ["limit=0", "limit=201", "limit=+5", "state=gone", "cursor=zz", "page=2"] {
            assert_eq!(parse_list_query(bad).unwrap_err().code, Code::RequestInvalid, "{bad}");
        }
    }

    #[test]
    fn the_briefing_query_defaults_to_8192_bytes_and_api_and_refuses_out_of_range_budgets() {
        assert_eq!(parse_briefing_query("").unwrap(), (8192, ReachKind::Api));
        assert_eq!(parse_briefing_query("budget=256&reach=none").unwrap(), (256, ReachKind::None));
        assert_eq!(parse_briefing_query("reach=api&budget=65536").unwrap(), (65536, ReachKind::Api));
        for bad in ["255", "65537", "-1", "8k", ""] {
            assert!(parse_briefing_query(&format!("budget={bad}")).unwrap_err().message.starts_with("budget"), "{bad}");
        }
        assert!(parse_briefing_query("reach=lan").unwrap_err().message.starts_with("reach"));
        assert!(parse_briefing_query("format=md").unwrap_err().message.starts_with("format: unknown"));
    }
}
