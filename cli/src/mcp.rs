//! `handoff mcp`: the session's own MCP server on standard input and output, so that any
//! harness that speaks the Model Context Protocol records its turn, asks its owner and reads
//! its briefing through typed tools instead of shell commands. Built on the official Rust SDK
//! (`rmcp`): its `#[tool]` router, its stdio transport, its lifecycle, cancellation and errors.
//!
//! It serves the one hand-off its environment names (`HANDOFF_URL`, `HANDOFF_ID`, and
//! `HANDOFF_TOKEN` or `HANDOFF_TOKEN_FILE`, the file the launcher writes) and refuses to start
//! without them. Every tool
//! answers a short text and the same facts as structured content; an API refusal is a tool
//! error naming the API's code (`{"code", "message"}`), never a protocol error, so the server
//! keeps serving. Each change carries a fresh `Idempotency-Key`, kept across the client's own
//! retries, so a call whose answer was lost applies once.

pub mod install;

use crate::ask::ANSWER_WAIT_S_MAX;
use crate::ask::{wait_for_answer, Waited};
use crate::client::{new_idempotency_key, Client, Error, Handoff, QuestionInput, Reach, ReportInput};
use handoff_core::limits::{
    BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN, QUESTION_INPUT_BYTES_MAX, QUESTION_TEXT_BYTES_MAX,
};
use handoff_core::question::{Choice, Kind};
use handoff_core::turn::ReportStatus;
use handoff_core::work::{ArtifactInput, BlockerInput, DecisionInput, Severity};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The variables the server reads, as the launcher names them.
pub const MCP_ENV: [&str; 3] = crate::machine::env::MCP_NAMES;
/// How long `ask_owner` waits for the answer unless its `wait_s` says.
pub const ASK_WAIT_S_DEFAULT: u64 = 300;

/// How long `ask_owner` waits: `asked` (its `wait_s`) or [`ASK_WAIT_S_DEFAULT`], at most
/// [`ANSWER_WAIT_S_MAX`]. In a turn `handoff serve` runs, the served wait it set
/// (`HANDOFF_ANSWER_WAIT_S`), and never longer: that is what serve has Codex wait for a call.
pub fn ask_wait_s(asked: Option<u64>, env: &dyn Fn(&str) -> Option<String>) -> u64 {
    if crate::hook::served(env) {
        let served = crate::ask::answer_wait_s(env);
        return asked.unwrap_or(served).min(served);
    }
    asked.unwrap_or(ASK_WAIT_S_DEFAULT).min(ANSWER_WAIT_S_MAX)
}
/// The most tool calls and reads the server has at the service at once; more wait their turn.
pub const MCP_CALLS_IN_FLIGHT_MAX: usize = 4;
/// How long the server waits, once its client has gone, for calls still at the service.
pub const MCP_SHUTDOWN_MS: u64 = 2_000;
/// The longest message (one line of standard input) the server reads; a longer one is answered
/// with a JSON-RPC error and skipped, so that no client makes it hold more.
pub const MCP_MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The URIs of the current turn's briefing and package.
pub const BRIEFING_URI: &str = "handoff://briefing";
pub const PACKAGE_MARKDOWN_URI: &str = "handoff://package.md";
pub const PACKAGE_JSON_URI: &str = "handoff://package.json";

/// The hand-off the server serves, its client, and its calls in flight.
struct ServedHandoff {
    client: Client,
    id: String,
    /// The turn this server reports on: the one current when it began serving (or at its first
    /// report, when the service could not be read then). A report or question for a turn that
    /// has moved on since is refused by the service (`handoff.stale`), never moved to the next
    /// turn, which may belong to another runtime.
    turn: std::sync::OnceLock<u64>,
    /// At most [`MCP_CALLS_IN_FLIGHT_MAX`] calls reach the service at once; the others wait.
    calls: tokio::sync::Semaphore,
}

impl ServedHandoff {
    /// The turn of [`ServedHandoff::turn`], read from the service the first time.
    fn turn(&self, client: &Client) -> Result<u64, Error> {
        if let Some(turn) = self.turn.get() {
            return Ok(*turn);
        }
        let current = client.get(&self.id)?.value.turn;
        Ok(*self.turn.get_or_init(|| current))
    }
}

#[derive(Clone)]
pub struct HandoffServer {
    handoff: Arc<ServedHandoff>,
    tool_router: ToolRouter<HandoffServer>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BriefingArgs {
    /// The most bytes the briefing may take (1024 to 65536); the service's default without it.
    pub budget_bytes: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DecisionArgs {
    /// What was decided, in one line.
    pub statement: String,
    /// Why.
    pub rationale: Option<String>,
    /// URIs that back it (a file, a commit, a page).
    pub evidence: Option<Vec<String>>,
    /// The id of an earlier decision (`dec_N`) this one replaces.
    pub supersedes: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ArtifactArgs {
    /// What kind of thing: file, report, pr, commit, …
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    /// Where it is: a path in the workspace or a URL.
    pub uri: String,
    /// Its SHA-256, 64 hex digits, when it is a file.
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SeverityArg {
    Low,
    Medium,
    High,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BlockerArgs {
    pub severity: SeverityArg,
    /// What blocks the work, in one line.
    pub title: String,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
pub enum StatusArg {
    #[serde(rename = "running")]
    Running,
    #[serde(rename = "needs-you")]
    NeedsYou,
    #[serde(rename = "done")]
    Done,
    #[serde(rename = "failed")]
    Failed,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReportArgs {
    /// running, needs-you (the session waits for its owner), done or failed (both end the turn).
    pub status: StatusArg,
    /// What was done, or what is needed, in a few lines.
    pub summary: Option<String>,
    /// On done or failed: the indices of the acceptance criteria not met.
    pub unmet: Option<Vec<u32>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskArgs {
    /// The question for the owner.
    pub question: String,
    /// The answers the owner may pick from (1 to 6 labels).
    pub options: Vec<String>,
    /// How long to wait for the answer, in seconds (at most 3600; 300 without it).
    pub wait_s: Option<u64>,
}

/// The question `ask_owner` asks, never cut: [`crate::hook::sendable`], whole in its text when
/// it fits [`QUESTION_TEXT_BYTES_MAX`], else its first line as the text and the whole as the
/// question's `input`; one over [`QUESTION_INPUT_BYTES_MAX`] is refused to the model, saying so.
pub fn owner_question(question: &str, labels: &[String]) -> Result<QuestionInput, String> {
    let options: Vec<Choice> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| Choice { id: (i + 1).to_string(), label: crate::hook::sendable(label) })
        .collect();
    let text = crate::hook::sendable(question);
    if text.len() <= QUESTION_TEXT_BYTES_MAX {
        return Ok(QuestionInput { kind: Kind::Choice, text, input: None, options });
    }
    if text.len() > QUESTION_INPUT_BYTES_MAX {
        return Err(format!(
            "the question is {} bytes; the owner can be asked at most {QUESTION_INPUT_BYTES_MAX}: ask it shorter",
            text.len()
        ));
    }
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let title =
        format!("{}… (the whole question is below)", handoff_core::text::clip(first, OWNER_QUESTION_TITLE_BYTES_MAX));
    Ok(QuestionInput { kind: Kind::Choice, text: title, input: Some(text), options })
}

/// The most of a long question's first line its title shows.
pub const OWNER_QUESTION_TITLE_BYTES_MAX: usize = 200;

/// A tool's answer: its text, and the same facts as structured content.
fn answered(text: String, facts: Value) -> CallToolResult {
    let mut result = CallToolResult::structured(facts);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// A failure as a tool error: the API's code and message, or what went wrong on the way.
fn refused(error: &Error) -> CallToolResult {
    let (code, message) = match error {
        Error::Refused(r) => (r.code.as_str().to_string(), r.message.clone()),
        Error::Network { message, .. } => ("network".to_string(), message.clone()),
        Error::Unexpected { status, message } => (format!("unexpected.{status}"), message.clone()),
    };
    let mut result = CallToolResult::structured_error(json!({"code": code, "message": message}));
    result.content = vec![ContentBlock::text(format!("refused: {code}: {message}"))];
    result
}

/// Runs a blocking client call off the async runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ErrorData> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ErrorData::internal_error(format!("the call did not finish: {e}"), None))
}

/// The current turn's briefing within `budget`: the package's, or, for a turn with no package,
/// the work record's alone, as `handoff launch` briefs it.
fn briefing(client: &Client, id: &str, budget: Option<u32>) -> Result<String, Error> {
    match client.briefing(id, budget, Some(Reach::Api)) {
        Err(Error::Refused(r)) if r.code.is(handoff_core::error::Code::PackageNotFound) => {
            let h = client.get(id)?.value;
            let work = client.work(id)?.value;
            let budget = budget.unwrap_or(crate::machine::CLAUDE_CODE_BUDGET_BYTES);
            crate::machine::turn::work_briefing(&h, &work, budget).map_err(|refused| {
                Error::Refused(Box::new(crate::client::Refusal {
                    status: 409,
                    code: r.code.clone(),
                    message: refused.to_string(),
                    handoff: Some(h),
                    body: Value::Null,
                }))
            })
        }
        other => other.map(|r| r.value),
    }
}

fn item_facts(item: &crate::client::Item) -> Value {
    json!({item.kind: item.item, "version": item.handoff.version})
}

fn record_facts(h: &Handoff) -> Value {
    json!({"handoff": h})
}

#[tool_router]
impl HandoffServer {
    fn new(handoff: ServedHandoff) -> HandoffServer {
        HandoffServer { handoff: Arc::new(handoff), tool_router: Self::tool_router() }
    }

    /// Runs a blocking client call off the async runtime, within [`MCP_CALLS_IN_FLIGHT_MAX`].
    async fn blocking<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, ErrorData> {
        let _permit = self
            .handoff
            .calls
            .acquire()
            .await
            .map_err(|e| ErrorData::internal_error(format!("the server is stopping: {e}"), None))?;
        blocking(work).await
    }

    /// One change to the work record, under a fresh `Idempotency-Key`: answers `done` and the
    /// item's id, with the item as structured content, or the refusal.
    async fn record(
        &self,
        done: &str,
        send: impl FnOnce(&Client, &str) -> Result<crate::client::Reply<crate::client::Item>, Error> + Send + 'static,
    ) -> Result<CallToolResult, ErrorData> {
        let (client, id) = (self.client(true), self.handoff.id.clone());
        Ok(match self.blocking(move || send(&client, &id)).await? {
            Ok(reply) => answered(format!("{done} {}", reply.value.id().unwrap_or("?")), item_facts(&reply.value)),
            Err(e) => refused(&e),
        })
    }

    fn client(&self, keyed: bool) -> Client {
        let key = keyed.then(new_idempotency_key);
        self.handoff.client.clone().with_idempotency_key(key.as_deref())
    }

    /// The hand-off as it stands: its turn, status, summary, open question and the actions
    /// this session may take.
    #[tool(annotations(read_only_hint = true))]
    async fn get_handoff(&self) -> Result<CallToolResult, ErrorData> {
        let (client, id) = (self.client(false), self.handoff.id.clone());
        Ok(match self.blocking(move || client.get(&id)).await? {
            Ok(reply) => {
                let h = reply.value;
                let text = format!(
                    "{} turn {} {} (v{}); actions: {}",
                    h.id,
                    h.turn,
                    h.status.as_str(),
                    h.version,
                    h.actions.join(", ")
                );
                answered(text, record_facts(&h))
            }
            Err(e) => refused(&e),
        })
    }

    /// The briefing of the current turn: goal, decisions, artifacts, blockers, files and the
    /// next objective, within a budget, saying what it left out.
    #[tool(annotations(read_only_hint = true))]
    async fn get_briefing(&self, Parameters(args): Parameters<BriefingArgs>) -> Result<CallToolResult, ErrorData> {
        if let Some(b) = args
            .budget_bytes
            .filter(|b| !(BRIEFING_BUDGET_BYTES_MIN as u32..=BRIEFING_BUDGET_BYTES_MAX as u32).contains(b))
        {
            return Err(ErrorData::invalid_params(
                format!("budget_bytes {b}: {BRIEFING_BUDGET_BYTES_MIN} to {BRIEFING_BUDGET_BYTES_MAX}"),
                None,
            ));
        }
        let (client, id) = (self.client(false), self.handoff.id.clone());
        Ok(match self.blocking(move || briefing(&client, &id, args.budget_bytes)).await? {
            Ok(text) => answered(text.clone(), json!({"briefing": text})),
            Err(e) => refused(&e),
        })
    }

    /// Records a decision on the hand-off's work record, as it is made.
    #[tool]
    async fn record_decision(&self, Parameters(args): Parameters<DecisionArgs>) -> Result<CallToolResult, ErrorData> {
        let input = DecisionInput {
            statement: args.statement,
            rationale: args.rationale,
            evidence: args.evidence.unwrap_or_default(),
            supersedes: args.supersedes,
        };
        self.record("recorded decision", move |client, id| client.decide(id, &input)).await
    }

    /// Records an artifact the session produced (a file, a report, a pull request).
    #[tool]
    async fn add_artifact(&self, Parameters(args): Parameters<ArtifactArgs>) -> Result<CallToolResult, ErrorData> {
        let input = ArtifactInput { kind: args.kind, title: args.title, uri: args.uri, sha256: args.sha256 };
        self.record("recorded artifact", move |client, id| client.artifact(id, &input)).await
    }

    /// Raises a blocker: something the session cannot get past by itself.
    #[tool]
    async fn raise_blocker(&self, Parameters(args): Parameters<BlockerArgs>) -> Result<CallToolResult, ErrorData> {
        let severity = match args.severity {
            SeverityArg::Low => Severity::Low,
            SeverityArg::Medium => Severity::Medium,
            SeverityArg::High => Severity::High,
        };
        let input = BlockerInput { severity, title: args.title };
        self.record("raised blocker", move |client, id| client.block(id, &input)).await
    }

    /// Reports on the current turn: running, needs-you, or done or failed to end it (with the
    /// acceptance criteria not met).
    #[tool]
    async fn report(&self, Parameters(args): Parameters<ReportArgs>) -> Result<CallToolResult, ErrorData> {
        let status = match args.status {
            StatusArg::Running => ReportStatus::Running,
            StatusArg::NeedsYou => ReportStatus::NeedsYou,
            StatusArg::Done => ReportStatus::Done,
            StatusArg::Failed => ReportStatus::Failed,
        };
        let (reader, client, id, handoff) =
            (self.client(false), self.client(true), self.handoff.id.clone(), Arc::clone(&self.handoff));
        let sent = self
            .blocking(move || {
                let turn = handoff.turn(&reader)?;
                let summary = args.summary.as_deref().map(crate::hook::sendable);
                client.report(
                    &id,
                    &ReportInput {
                        turn,
                        status,
                        summary,
                        unmet: args.unmet,
                        usage: None,
                        question: None,
                        runtime: None,
                        permission_mode: None,
                        reply: None,
                        sync_mode: None,
                    },
                )
            })
            .await?;
        Ok(match sent {
            Ok(reply) => {
                let h = reply.value;
                answered(format!("reported: v{} turn {} {}", h.version, h.turn, h.status.as_str()), record_facts(&h))
            }
            Err(e) => refused(&e),
        })
    }

    /// Asks the owner a question and waits for the answer (the owner answers from anywhere).
    /// Answers the chosen option, or says that no answer came, and the session goes on or
    /// stops as it sees fit.
    #[tool]
    async fn ask_owner(
        &self,
        Parameters(args): Parameters<AskArgs>,
        cancelled: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let env = |k: &str| std::env::var(k).ok();
        let wait_s = ask_wait_s(args.wait_s, &env);
        let question = match owner_question(&args.question, &args.options) {
            Ok(q) => q,
            Err(message) => {
                return Ok(CallToolResult::structured_error(json!({"code": "request.invalid", "message": message})))
            }
        };
        let (reader, client, id, handoff) =
            (self.client(false), self.client(true), self.handoff.id.clone(), Arc::clone(&self.handoff));
        let asked = self
            .blocking(move || {
                let turn = handoff.turn(&reader)?;
                client.report(
                    &id,
                    &ReportInput { question: Some(question), ..ReportInput::of(turn, ReportStatus::NeedsYou) },
                )
            })
            .await?;
        let asked = match asked {
            Ok(reply) => reply.value,
            Err(e) => return Ok(refused(&e)),
        };
        let Some(q) = asked.question.clone() else {
            return Ok(CallToolResult::structured_error(
                json!({"code": "question.none", "message": "the service did not keep the question"}),
            ));
        };
        let (client, id, qid) = (self.handoff.client.clone(), self.handoff.id.clone(), q.id.clone());
        let deadline = Instant::now() + Duration::from_secs(wait_s);
        // The wait holds no permit: a newer question withdraws this one, which ends its wait.
        let waiting = blocking(move || wait_for_answer(&client, &id, &qid, asked.version, deadline));
        let waited = tokio::select! {
            w = waiting => w?,
            _ = cancelled.cancelled() => {
                // Nobody waits for the answer any more: the turn runs on without the question.
                let (client, id) = (self.client(true), self.handoff.id.clone());
                let turn = q.turn;
                let withdrawn = blocking(move || client.report(&id, &ReportInput::of(turn, ReportStatus::Running))).await;
                if !matches!(withdrawn, Ok(Ok(_))) {
                    eprintln!("handoff mcp: a cancelled question could not be taken back: {withdrawn:?}");
                }
                return Err(ErrorData::internal_error("cancelled", None));
            }
        };
        Ok(match waited {
            Waited::Answered(answer, _) => {
                let label =
                    q.options.iter().find(|o| o.id == answer.option).map(|o| o.label.clone()).unwrap_or_default();
                let note = answer.note.as_deref().map(|n| format!(" (note: {n})")).unwrap_or_default();
                answered(
                    format!("The owner answered: {label}{note}"),
                    json!({"answered": true, "option": answer.option, "label": label, "note": answer.note}),
                )
            }
            Waited::Withdrawn => answered(
                format!("No answer: {} was withdrawn. Go on or stop as you see fit.", q.id),
                json!({"answered": false, "why": "withdrawn"}),
            ),
            Waited::TimedOut => {
                if crate::hook::served(&env) {
                    // Nobody waits for the answer any more in a served turn: the question is withdrawn.
                    let (client, id, turn) = (self.client(true), self.handoff.id.clone(), q.turn);
                    let _ = blocking(move || client.report(&id, &ReportInput::of(turn, ReportStatus::Running))).await;
                }
                answered(
                    format!("No answer within {wait_s} s. Go on or stop as you see fit."),
                    json!({"answered": false, "why": "timeout"}),
                )
            }
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for HandoffServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build());
        config.server_info = rmcp::model::Implementation::new("handoff", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(format!(
            "This session's hand-off record ({}). Record decisions, artifacts and blockers as you work, ask the owner with \
             ask_owner when you need them, and end the turn with report (done or failed).",
            self.handoff.id
        ));
        config
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = [
            (BRIEFING_URI, "briefing", "The current turn's briefing", "text/markdown"),
            (PACKAGE_MARKDOWN_URI, "package.md", "The current turn's package, as Markdown", "text/markdown"),
            (PACKAGE_JSON_URI, "package.json", "The current turn's package, as JSON", "application/json"),
        ];
        Ok(ListResourcesResult::with_all_items(
            resources
                .into_iter()
                .map(|(uri, name, title, mime)| Resource::new(uri, name).with_title(title).with_mime_type(mime))
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (client, id, uri) = (self.client(false), self.handoff.id.clone(), request.uri.clone());
        let read = self
            .blocking(move || match uri.as_str() {
                BRIEFING_URI => Some(briefing(&client, &id, None).map(|text| (text, "text/markdown"))),
                PACKAGE_MARKDOWN_URI => Some(client.package_markdown(&id).map(|r| (r.value, "text/markdown"))),
                PACKAGE_JSON_URI => Some(
                    client
                        .package_latest(&id)
                        .map(|r| (serde_json::to_string(&r.value).unwrap_or_default(), "application/json")),
                ),
                _ => None,
            })
            .await?;
        match read {
            None => Err(ErrorData::resource_not_found(format!("no resource {}", request.uri), None)),
            Some(Err(e)) => Err(ErrorData::invalid_request(format!("refused: {e}"), None)),
            Some(Ok((text, mime))) => {
                Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri).with_mime_type(mime)]).into())
            }
        }
    }
}

/// The server's session from `env`, or the message naming what is missing.
pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<(String, String, String), String> {
    let value = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let token = crate::client::token_from_env(env).map_err(|e| format!("handoff mcp: {e}"))?;
    let mut missing: Vec<&str> = MCP_ENV[..2].iter().copied().filter(|k| value(k).is_none()).collect();
    if token.is_none() {
        missing.push(MCP_ENV[2]);
    }
    if !missing.is_empty() {
        return Err(format!(
            "handoff mcp: {} not set: the server serves the hand-off that HANDOFF_URL, HANDOFF_ID and HANDOFF_TOKEN (its machine token, or HANDOFF_TOKEN_FILE naming a file that holds it) name",
            missing.join(", ")
        ));
    }
    Ok((value(MCP_ENV[0]).unwrap_or_default(), value(MCP_ENV[1]).unwrap_or_default(), token.unwrap_or_default()))
}

/// What the server makes of one line of standard input: a message for the SDK, or the
/// JSON-RPC error to answer at once (JSON-RPC 2.0: an unparsable message is answered
/// `-32700` with a null id; one too long is refused unread).
pub fn check_line(line: &[u8]) -> Result<(), String> {
    let error = |code: i64, message: &str| {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}).to_string()
    };
    if line.len() > MCP_MESSAGE_BYTES_MAX {
        return Err(error(-32600, &format!("a message is at most {MCP_MESSAGE_BYTES_MAX} bytes")));
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(_)) | Ok(Value::Array(_)) => Ok(()),
        Ok(_) => Err(error(-32600, "a message is a JSON object")),
        Err(e) => Err(error(-32700, &format!("parse error: {e}"))),
    }
}

/// Standard input and output for the SDK, with every line checked first ([`check_line`]): a
/// malformed one is answered with its error and the server reads on.
fn checked_stdio() -> (tokio::io::DuplexStream, tokio::io::DuplexStream) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (sdk_in, mut feed) = tokio::io::duplex(64 * 1024);
    let (sdk_out, mut drain) = tokio::io::duplex(64 * 1024);
    let (lines, mut to_write) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let errors = lines.clone();
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        loop {
            let mut line = Vec::new();
            // One byte past the cap is enough to know a line is too long; the rest is skipped.
            let read = (&mut stdin).take(MCP_MESSAGE_BYTES_MAX as u64 + 1).read_until(b'\n', &mut line).await;
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") && line.len() > MCP_MESSAGE_BYTES_MAX {
                // Skip the rest of the line a piece at a time, holding no more of it.
                loop {
                    let mut piece = Vec::new();
                    match (&mut stdin).take(64 * 1024).read_until(b'\n', &mut piece).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) if piece.ends_with(b"\n") => break,
                        Ok(_) => {}
                    }
                }
            }
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match check_line(body) {
                Ok(()) => {
                    if feed.write_all(body).await.is_err() || feed.write_all(b"\n").await.is_err() {
                        break;
                    }
                }
                Err(answer) => {
                    let _ = errors.send(answer.into_bytes()).await;
                }
            }
        }
        // Dropping `feed` is the end of input for the SDK, which then stops.
    });
    tokio::spawn(async move {
        let mut out = tokio::io::BufReader::new(&mut drain);
        loop {
            let mut line = Vec::new();
            match out.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let body = line.strip_suffix(b"\n").unwrap_or(&line).to_vec();
                    if lines.send(body).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = to_write.recv().await {
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    (sdk_in, sdk_out)
}

/// `handoff mcp`: serves until the client closes standard input. Answers the exit code.
pub fn serve(url: &str, id: &str, token: &str) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("handoff mcp: no runtime: {e}");
            return 1;
        }
    };
    let client = Client::new(url, Some(token));
    let handoff = ServedHandoff {
        client: client.clone(),
        id: id.to_string(),
        turn: std::sync::OnceLock::new(),
        calls: tokio::sync::Semaphore::new(MCP_CALLS_IN_FLIGHT_MAX),
    };
    // The turn the session was started for, when the service can say so now.
    let _ = handoff.turn(&client.clone().with_retry(crate::client::Retry::none()));
    let server = HandoffServer::new(handoff);
    let dir = crate::machine::paths::state_dir(&|k| std::env::var(k).ok());
    let log = crate::hook::Log::new(&dir, "mcp", Some(id));
    let code = runtime.block_on(async move {
        match server.serve(checked_stdio()).await {
            Ok(running) => {
                let client = running.peer_info().map(|i| i.client_info.name.clone()).unwrap_or_default();
                log.line(&format!("serving {client}"));
                mark_served(&dir, id, &log);
                let code = match running.waiting().await {
                    Ok(_) => 0,
                    Err(e) => {
                        eprintln!("handoff mcp: {e}");
                        1
                    }
                };
                log.line("the client closed the session");
                code
            }
            Err(e) => {
                log.line(&format!("could not start: {e}"));
                eprintln!("handoff mcp: could not start: {e}");
                1
            }
        }
    });
    // A call still at the service (an ask's wait) is not waited for once the client has gone.
    runtime.shutdown_timeout(Duration::from_millis(MCP_SHUTDOWN_MS));
    code
}

// Where the server notes when it last began serving hand-off `id`: the launcher reads it to
// tell a session that recorded through the server from one that could not start it.
use crate::machine::paths::served_marker;

fn mark_served(dir: &std::path::Path, id: &str, log: &crate::hook::Log) {
    let path = served_marker(dir, id);
    let private_dirs =
        |p: &std::path::Path| crate::private::dir(p.parent().unwrap_or(p)).and_then(|()| crate::private::dir(p));
    let written = path
        .parent()
        .map_or(Ok(()), private_dirs)
        .and_then(|()| crate::private::write(&path, crate::hook::now_ms().to_string().as_bytes()));
    if let Err(e) = written {
        log.line(&format!("could not note that it serves, in {}: {e}", path.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_owner_waits_its_wait_s_or_300_s_and_in_a_served_turn_never_past_the_served_wait() {
        let plain = |_: &str| None;
        assert_eq!(
            (ask_wait_s(None, &plain), ask_wait_s(Some(20), &plain), ask_wait_s(Some(99_999), &plain)),
            (ASK_WAIT_S_DEFAULT, 20, ANSWER_WAIT_S_MAX)
        );
        let served = |k: &str| match k {
            "HANDOFF_SERVED" => Some("1".to_string()),
            "HANDOFF_ANSWER_WAIT_S" => Some("900".to_string()),
            _ => None,
        };
        assert_eq!(
            (ask_wait_s(None, &served), ask_wait_s(Some(20), &served), ask_wait_s(Some(3_600), &served)),
            (900, 20, 900)
        );
    }

    #[test]
    fn ask_owner_never_cuts_the_models_question_silently() {
        let labels = vec!["Yes".to_string(), "No".to_string()];
        let short = owner_question("Deploy?\r\nIt is Friday.", &labels).unwrap();
        assert_eq!((short.text.as_str(), short.input), ("Deploy?\nIt is Friday.", None));
        let long = format!("Which migration?\n{}\nThe last line matters.", "detail ".repeat(400));
        let asked = owner_question(&long, &labels).unwrap();
        assert!(
            asked.text.starts_with("Which migration?…") && asked.text.len() <= QUESTION_TEXT_BYTES_MAX,
            "{}",
            asked.text
        );
        assert_eq!(asked.input.as_deref(), Some(long.as_str()), "the whole question travels as its input");
        let huge = "x".repeat(QUESTION_INPUT_BYTES_MAX + 1);
        let refused = owner_question(&huge, &labels).unwrap_err();
        assert!(refused.contains(&format!("{} bytes", huge.len())), "{refused}");
    }

    #[test]
    fn the_server_names_each_variable_it_misses() {
        let none = |_: &str| None;
        let message = from_env(&none).unwrap_err();
        assert!(message.contains("HANDOFF_URL, HANDOFF_ID, HANDOFF_TOKEN not set"), "{message}");
        let some = |k: &str| (!k.starts_with("HANDOFF_TOKEN")).then(|| "x".to_string());
        assert!(from_env(&some).unwrap_err().contains("HANDOFF_TOKEN not set"));
        let all = |k: &str| Some(format!("{k}-value"));
        assert_eq!(
            from_env(&all).unwrap(),
            ("HANDOFF_URL-value".into(), "HANDOFF_ID-value".into(), "HANDOFF_TOKEN-value".into())
        );
        let file = std::env::temp_dir().join(format!("handoff-mcp-token-{}", std::process::id()));
        crate::client::write_token_file(&file, "from-the-file\n").unwrap();
        let path = file.to_string_lossy().into_owned();
        let by_file = move |k: &str| match k {
            "HANDOFF_TOKEN" => None,
            "HANDOFF_TOKEN_FILE" => Some(path.clone()),
            other => Some(format!("{other}-value")),
        };
        assert_eq!(from_env(&by_file).unwrap().2, "from-the-file", "the token file stands in for the variable");
        std::fs::remove_file(&file).unwrap();
        let gone = |k: &str| {
            (k == "HANDOFF_TOKEN_FILE")
                .then(|| "/nonexistent/handoff.token".to_string())
                .or_else(|| (k != "HANDOFF_TOKEN").then(|| "x".into()))
        };
        assert!(from_env(&gone).unwrap_err().contains("HANDOFF_TOKEN_FILE /nonexistent/handoff.token"));
    }

    #[test]
    fn a_malformed_or_overlong_line_is_answered_with_its_json_rpc_error() {
        assert_eq!(check_line(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Ok(()));
        let parse: Value = serde_json::from_str(&check_line(b"garbage{").unwrap_err()).unwrap();
        assert_eq!((parse["error"]["code"].as_i64(), parse["id"].is_null()), (Some(-32700), true));
        let scalar: Value = serde_json::from_str(&check_line(b"42").unwrap_err()).unwrap();
        assert_eq!(scalar["error"]["code"], -32600);
        let long = vec![b' '; MCP_MESSAGE_BYTES_MAX + 1];
        let long: Value = serde_json::from_str(&check_line(&long).unwrap_err()).unwrap();
        assert_eq!(long["error"]["code"], -32600);
    }

    #[test]
    fn read_only_tools_say_so_and_the_rest_do_not() {
        let tools = HandoffServer::tool_router().list_all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names.len(), 7, "{names:?}");
        for t in &tools {
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            assert_eq!(read_only, matches!(t.name.as_ref(), "get_handoff" | "get_briefing"), "{}", t.name);
        }
    }
}
