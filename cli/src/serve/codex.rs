//! Codex through `codex app-server`: JSON-RPC over the child's stdio, one thread per hand-off,
//! one `turn/start` per turn, its approval requests and questions handed to a [`Handler`].
//!
//! The protocol is Codex 0.169.0's, as its schema gives it (`codex app-server
//! generate-json-schema`, kept in `cli/tests/fixtures/codex-app-server/`): messages are JSON
//! objects one per line, without a `jsonrpc` member; a request has `id` and `method`, a
//! response `id` and `result` or `error`, a notification `method` only.
//!
//! Synchronous: a reader thread turns the child's stdout into messages on a bounded channel,
//! another drains its stderr into a bounded tail, and the caller's thread does the rest.
//! The child runs in a process group of its own, with a parent-death signal on Linux, and the
//! group is ended when the [`AppServer`] is dropped.

use crate::ask::Unaskable;
use crate::machine::{env, group, server};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The sandbox every served Codex thread runs in: the workspace writable, no network.
pub const SANDBOX: &str = "workspace-write";
/// Who reviews a served thread's approvals: the person (the owner, through serve), never Codex's
/// `auto_review` subagent, whatever a config file says.
pub const APPROVALS_REVIEWER: &str = "user";
/// Codex's feature that offers the model its `request_user_input` tool outside Plan mode
/// (0.169.0 lists it "under development", off; without it the tool answers the model
/// "request_user_input is unavailable in Default mode"). Set with `-c`, which a Codex that
/// no longer knows the feature ignores, where `--enable` would refuse to start.
pub const ENABLE_QUESTIONS: [&str; 2] = ["-c", "features.default_mode_request_user_input=true"];
/// Codex's hooks off for a served run: app-server 0.169.0 runs a `PermissionRequest` hook
/// (the one `handoff hook install codex` puts in the person's settings) before it sends its
/// own approval request, and both would ask the owner about one command. Per run, so the
/// person's interactive sessions keep theirs. `notify` is not a hook and still runs.
pub const NO_HOOKS: [&str; 2] = ["-c", "features.hooks=false"];
/// The longest line of the child's stdout read as a message; a longer one is skipped whole.
pub const MESSAGE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Messages read ahead of the caller before the reader waits (and the child with it).
pub const MESSAGES_QUEUED_MAX: usize = 1024;
/// The end of the child's stderr that is kept, for the reason of a failure.
pub const STDERR_TAIL_BYTES_MAX: usize = 16 * 1024;
/// The most pages of `model/list` read.
pub const MODEL_PAGES_MAX: usize = 8;

/// The ids of one `model/list` page's models that are not hidden.
pub fn listed_models(page: &Value) -> Vec<String> {
    let data = page["data"].as_array().map(Vec::as_slice).unwrap_or_default();
    data.iter()
        .filter(|m| m["hidden"] != true)
        .filter_map(|m| m["id"].as_str().or_else(|| m["model"].as_str()).map(str::to_string))
        .collect()
}

/// How long a request before the turn (`initialize`, `thread/start`, `thread/resume`) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a turn may take to end after `turn/interrupt` before it is called interrupted anyway.
pub const INTERRUPT_GRACE_MS: u64 = 3_000;
/// How often the cancel flag is looked at while the turn runs.
pub const CANCEL_POLL: Duration = Duration::from_millis(100);

/// How to start `codex app-server`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `codex` program.
    pub program: PathBuf,
    /// Arguments after `app-server`: the launcher's `-c` settings (the `handoff` MCP server,
    /// the shell's environment policy), and any other.
    pub args: Vec<String>,
    /// Variables set for the child on top of this process's environment.
    pub env: Vec<(String, String)>,
    /// Variables removed from the child's environment (the machine token's).
    pub env_remove: Vec<String>,
    /// The workspace: the child's folder and the thread's `cwd`.
    pub cwd: PathBuf,
    /// The thread's `approvalPolicy`: `untrusted`, `on-request` or `never`.
    pub approval_policy: String,
}

/// The `-c` settings `handoff launch` gives Codex, for [`Config::args`]: the `handoff` MCP
/// server (`server` is this program) and the shell's environment policy that keeps the
/// token's variables out of the model's commands.
pub fn launcher_settings(program: &str) -> Vec<String> {
    let mut args = Vec::new();
    for setting in server::codex_mcp_settings(program) {
        args.extend(["-c".to_string(), setting]);
    }
    args.extend(["-c".to_string(), env::CODEX_SHELL_EXCLUDE.to_string()]);
    args
}

/// How much longer than `ask_owner`'s served wait Codex lets a call of the `handoff` server run:
/// the wait ends at its deadline, then withdraws the question (a request or two).
pub const MCP_TOOL_TIMEOUT_MARGIN_S: u64 = 60;

/// The `-c` settings of a served turn: the launcher's, the `handoff` server also given
/// [`env::SERVED_MCP_NAMES`] (Codex gives a stdio server only the variables named in `env_vars`), and its calls allowed `tool_timeout_sec` (Codex's own default is
/// 60 s) above `wait_s`, the longest `ask_owner` waits for the owner in a served turn.
pub fn served_settings(program: &str, wait_s: u64) -> Vec<String> {
    let mut args = Vec::new();
    for (key, entry) in server::codex_entry(program) {
        let entry = match key {
            "env_vars" => {
                toml_edit::Value::Array(env::CODEX_MCP_NAMES.iter().chain(&env::SERVED_MCP_NAMES).copied().collect())
            }
            _ => entry,
        };
        args.extend(["-c".to_string(), format!("mcp_servers.{}.{key}={entry}", server::MCP_SERVER)]);
    }
    args.extend([
        "-c".to_string(),
        format!("mcp_servers.{}.tool_timeout_sec={}", server::MCP_SERVER, wait_s + MCP_TOOL_TIMEOUT_MARGIN_S),
    ]);
    args.extend(["-c".to_string(), env::CODEX_SHELL_EXCLUDE.to_string()]);
    args
}

/// What an approval request asks, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub kind: ApprovalKind,
    /// The whole input: every field that changes what an Allow approves (the command with its
    /// folder and kind, the network host, the reason, the proposed rules; a file change's paths
    /// and diffs; the permissions asked for).
    pub text: String,
    /// Codex's reason, when it gives one (in `text` too).
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalKind {
    Command,
    /// Input written to a terminal a command left running (`writeStdin`).
    TerminalInput,
    /// A managed checkpoint that wants a person's decision (`humanCommand`).
    HumanCommand,
    /// A command's network access to a host (`networkApprovalContext`).
    Network,
    FileChange,
    Permissions,
}

impl Approval {
    /// The question's title: what is asked, and the first line of it.
    pub fn title(&self) -> String {
        let what = match self.kind {
            ApprovalKind::Command => "Command",
            ApprovalKind::TerminalInput => "Input to a running terminal",
            ApprovalKind::HumanCommand => "Checkpoint",
            ApprovalKind::Network => "Network access",
            ApprovalKind::FileChange => "File change",
            ApprovalKind::Permissions => "Permissions",
        };
        format!("{what}: {}", self.text.lines().next().unwrap_or_default())
    }
}

/// Why an approval request is declined without asking anyone: it carries a kind or a field this
/// build cannot show, so an Allow would approve what the owner never saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unshowable(pub String);

impl Unshowable {
    /// The note the model reads with the decline.
    pub fn note(&self) -> String {
        format!(
            "handoff serve declined this without asking the owner: {}, and the owner is never asked to approve what they \
             cannot see. Do it another way, or end the turn saying what you need.",
            self.0
        )
    }
}

/// The fields of an approval request that change nothing it approves: its ids and time, and the
/// answers Codex takes (`availableDecisions`; serve answers accept, once, or decline).
const ROUTING_FIELDS: [&str; 6] = ["itemId", "threadId", "turnId", "startedAtMs", "approvalId", "availableDecisions"];

/// Every field of `params` outside `shown` and the routing fields, when it holds a value: what
/// an Allow would approve unseen.
fn unshown(params: &Value, shown: &[&str]) -> Result<(), Unshowable> {
    let Some(fields) = params.as_object() else {
        return Err(Unshowable("the request is not an object".into()));
    };
    let extra: Vec<&str> = fields
        .iter()
        .filter(|(k, v)| !v.is_null() && !shown.contains(&k.as_str()) && !ROUTING_FIELDS.contains(&k.as_str()))
        .map(|(k, _)| k.as_str())
        .collect();
    if extra.is_empty() {
        Ok(())
    } else {
        Err(Unshowable(format!("it carries {} that this build cannot show", extra.join(", "))))
    }
}

/// The answer to an [`Approval`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Declined; the note (when there is one) reaches the model as the person's words.
    Deny {
        note: Option<String>,
    },
}

/// A question of the model's `request_user_input` tool that a choice form carries: one
/// question, not secret, with options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub header: String,
    pub text: String,
    /// Each option's label and description.
    pub options: Vec<(String, String)>,
    /// The model accepts an answer outside the options.
    pub other: bool,
}

/// The answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An option's label (or, where the question allows it, other words).
    Chose(String),
    /// Not answered; the note reaches the model as the tool's answer.
    Deny { note: String },
}

/// What asks the person. It is called on the driver's thread, and the turn waits for it: a
/// handler that waits for a person also watches the turn's cancel flag, and denies on it.
pub trait Handler {
    fn approval(&mut self, approval: &Approval) -> Decision;
    fn question(&mut self, question: &Question) -> Answer;
    /// Every `item/started` and `item/completed` notification's item, as it comes.
    fn item(&mut self, _method: &str, _item: &Value) {}
    /// The owner's words to add to the running turn now (`turn/steer`), each with its id.
    fn steers(&mut self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// What became of steer `id`: app-server took it, or why not.
    fn steered(&mut self, _id: &str, _delivered: Result<(), String>) {}
}

/// A [`Handler`] made of two closures.
pub struct Callbacks<A, Q> {
    pub approval: A,
    pub question: Q,
}

impl<A: FnMut(&Approval) -> Decision, Q: FnMut(&Question) -> Answer> Handler for Callbacks<A, Q> {
    fn approval(&mut self, approval: &Approval) -> Decision {
        (self.approval)(approval)
    }
    fn question(&mut self, question: &Question) -> Answer {
        (self.question)(question)
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// With the agent's last message ("" when it sent none).
    Completed {
        message: String,
    },
    Interrupted,
    Failed {
        reason: String,
    },
}

/// Why the driver could not go on with the child.
#[derive(Debug)]
pub enum DriverError {
    /// It could not be started or written to.
    Io(std::io::Error),
    /// It ended, or closed its stdout; with the end of what it wrote to stderr.
    Exited { stderr: String },
    /// It answered a request with an error.
    Rpc { method: String, error: Value },
    /// It did not answer a request in time.
    Timeout { method: String },
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::Io(e) => write!(f, "codex app-server: {e}"),
            DriverError::Exited { stderr } => write!(f, "codex app-server ended: {}", stderr.trim()),
            DriverError::Rpc { method, error } => write!(
                f,
                "codex app-server refused {method}: {}",
                error["message"].as_str().map_or_else(|| error.to_string(), str::to_string)
            ),
            DriverError::Timeout { method } => {
                write!(f, "codex app-server did not answer {method} within {} s", REQUEST_TIMEOUT.as_secs())
            }
        }
    }
}

impl std::error::Error for DriverError {}

impl From<std::io::Error> for DriverError {
    fn from(e: std::io::Error) -> Self {
        DriverError::Io(e)
    }
}

/// A running `codex app-server`, initialized.
pub struct AppServer {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    /// Messages read while waiting for a response, handled next.
    stashed: VecDeque<Value>,
    next_id: u64,
    stderr: Arc<Mutex<Tail>>,
    cwd: PathBuf,
    approval_policy: String,
    /// The thread's model, when the owner named one; else Codex's own default.
    model: Option<String>,
    stopped: bool,
}

impl AppServer {
    /// Starts `codex app-server` as `config` says and initializes it.
    pub fn start(config: &Config) -> Result<AppServer, DriverError> {
        let mut cmd = Command::new(&config.program);
        cmd.arg("app-server").args(ENABLE_QUESTIONS).args(NO_HOOKS);
        // The workspace's own `.codex/` is the model's to write: never applied.
        cmd.args(crate::workspace::codex_untrusted(&config.cwd)).args(&config.args).current_dir(&config.cwd);
        for name in &config.env_remove {
            cmd.env_remove(name);
        }
        cmd.envs(config.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        crate::machine::group::own_group_dying_with_parent(&mut cmd);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let (tx, messages) = sync_channel(MESSAGES_QUEUED_MAX);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(line) = read_line_bounded(&mut reader, MESSAGE_BYTES_MAX) {
                let Some(line) = line else { continue };
                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Tail::default()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]);
            }
            sink.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        });
        let mut server = AppServer {
            child,
            stdin,
            messages,
            stashed: VecDeque::new(),
            next_id: 0,
            stderr,
            cwd: config.cwd.clone(),
            approval_policy: config.approval_policy.clone(),
            model: None,
            stopped: false,
        };
        let info = json!({"clientInfo": {"name": "handoff", "title": "handoff serve", "version": env!("CARGO_PKG_VERSION")}, "capabilities": {"experimentalApi": false}});
        server.request("initialize", info)?;
        server.notify("initialized", None)?;
        Ok(server)
    }

    /// The child's process id (its process group's too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The end of what the child wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).text()
    }

    /// The model the next thread started or resumed runs with (the thread's `model`); `None`
    /// leaves Codex's own default.
    pub fn set_model(&mut self, model: Option<String>) {
        self.model = model;
    }

    fn with_model(&self, mut params: Value) -> Value {
        if let Some(model) = &self.model {
            params["model"] = Value::from(model.as_str());
        }
        params
    }

    /// The models app-server's `model/list` answers (every page, at most [`MODEL_PAGES_MAX`]),
    /// hidden ones left out, as their ids.
    pub fn model_list(&mut self) -> Result<Vec<String>, DriverError> {
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MODEL_PAGES_MAX {
            let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let page = self.request("model/list", params)?;
            ids.extend(listed_models(&page));
            cursor = page["nextCursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(ids)
    }

    /// Starts a thread in the workspace, in [`SANDBOX`], with the configured approval policy;
    /// answers its id.
    pub fn start_thread(&mut self) -> Result<String, DriverError> {
        let params = self.with_model(json!({"cwd": self.cwd, "approvalPolicy": self.approval_policy, "approvalsReviewer": APPROVALS_REVIEWER, "sandbox": SANDBOX}));
        let result = self.request("thread/start", params)?;
        Ok(result["thread"]["id"].as_str().unwrap_or_default().to_string())
    }

    /// Resumes thread `id` (from Codex's own store), so its next turn carries the exchange so far.
    pub fn resume_thread(&mut self, id: &str) -> Result<String, DriverError> {
        let params = self.with_model(json!({"threadId": id, "cwd": self.cwd, "approvalPolicy": self.approval_policy, "approvalsReviewer": APPROVALS_REVIEWER, "sandbox": SANDBOX}));
        let result = self.request("thread/resume", params)?;
        Ok(result["thread"]["id"].as_str().unwrap_or(id).to_string())
    }

    /// Runs one turn of `thread` with `prompt` as the person's message, to its end. While it
    /// runs, `cancel` is looked at every [`CANCEL_POLL`]: once set, the turn is interrupted
    /// (`turn/interrupt`) and, once it ends, the app-server is stopped, since Codex 0.169.0
    /// keeps the turn's running commands alive as background terminals. The next turn then
    /// needs a new [`AppServer`] that resumes the thread.
    #[allow(
        clippy::too_many_lines,
        reason = "one turn's protocol with app-server, start to end, in the order it is spoken"
    )]
    pub fn run_turn(
        &mut self,
        thread: &str,
        prompt: &str,
        cancel: &AtomicBool,
        handler: &mut dyn Handler,
    ) -> Result<TurnOutcome, DriverError> {
        let input = json!([{"type": "text", "text": prompt, "text_elements": []}]);
        let started = self.request("turn/start", json!({"threadId": thread, "input": input}))?;
        let turn = started["turn"]["id"].as_str().unwrap_or_default().to_string();
        let mut file_changes: HashMap<String, Value> = HashMap::new();
        let mut last_message = String::new();
        let mut interrupted_at: Option<Instant> = None;
        // The owner's steers sent as `turn/steer`, by request id, until app-server answers.
        let mut steering: HashMap<u64, String> = HashMap::new();
        loop {
            if interrupted_at.is_none() {
                for (steer, words) in handler.steers() {
                    let input = json!([{"type": "text", "text": words, "text_elements": []}]);
                    let params = json!({"threadId": thread, "expectedTurnId": turn, "input": input});
                    steering.insert(self.send_request("turn/steer", params)?, steer);
                }
            }
            if interrupted_at.is_none() && cancel.load(Ordering::SeqCst) {
                self.send_request("turn/interrupt", json!({"threadId": thread, "turnId": turn}))?;
                interrupted_at = Some(Instant::now());
            }
            if interrupted_at.is_some_and(|at| at.elapsed() > Duration::from_millis(INTERRUPT_GRACE_MS)) {
                self.stop();
                return Ok(TurnOutcome::Interrupted);
            }
            let Some(message) = self.next_message(CANCEL_POLL)? else { continue };
            let method = message["method"].as_str().unwrap_or_default().to_string();
            let params = &message["params"];
            match (message.get("id"), method.as_str()) {
                // A response to a request sent without waiting (`turn/interrupt`, `turn/steer`).
                (Some(id), "") => {
                    if let Some(steer) = id.as_u64().and_then(|n| steering.remove(&n)) {
                        let delivered = match message.get("error") {
                            Some(e) => {
                                Err(format!("codex refused turn/steer: {}", e["message"].as_str().unwrap_or("?")))
                            }
                            None => Ok(()),
                        };
                        handler.steered(&steer, delivered);
                    }
                }
                (Some(id), _) => {
                    let id = id.clone();
                    let reply = self.answer(&method, params, thread, &turn, &file_changes, cancel, handler)?;
                    match reply {
                        Ok(result) => self.write(&json!({"id": id, "result": result}))?,
                        Err(error) => self.write(&json!({"id": id, "error": error}))?,
                    }
                }
                (None, "item/started" | "item/completed") => {
                    let item = &params["item"];
                    match item["type"].as_str() {
                        Some("fileChange") => {
                            file_changes.insert(item["id"].as_str().unwrap_or_default().to_string(), item.clone());
                        }
                        Some("agentMessage") if method == "item/completed" => {
                            last_message = item["text"].as_str().unwrap_or_default().to_string()
                        }
                        _ => {}
                    }
                    handler.item(&method, item);
                }
                (None, "turn/completed") if params["turn"]["id"] == turn.as_str() => {
                    for (_, steer) in steering.drain() {
                        handler.steered(&steer, Err("the turn ended before codex answered its turn/steer".into()));
                    }
                    let ended = outcome(&params["turn"], &last_message);
                    if ended == TurnOutcome::Interrupted {
                        self.stop();
                    }
                    return Ok(ended);
                }
                _ => {}
            }
        }
    }

    /// The result (or JSON-RPC error) of one request from the server.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &mut self,
        method: &str,
        params: &Value,
        thread: &str,
        turn: &str,
        file_changes: &HashMap<String, Value>,
        cancel: &AtomicBool,
        handler: &mut dyn Handler,
    ) -> Result<Result<Value, Value>, DriverError> {
        let decided = |handler: &mut dyn Handler, approval: Result<Approval, Unshowable>| match approval {
            _ if cancel.load(Ordering::SeqCst) => Decision::Deny { note: None },
            Ok(approval) => handler.approval(&approval),
            // Never put to the owner, never approved blind: the note says why.
            Err(why) => Decision::Deny { note: Some(why.note()) },
        };
        match method {
            "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
                let approval = if method == "item/commandExecution/requestApproval" {
                    command_approval(params)
                } else {
                    file_change_approval(params, file_changes.get(params["itemId"].as_str().unwrap_or_default()))
                };
                let decision = decided(handler, approval);
                if let Decision::Deny { note: Some(note) } = &decision {
                    self.steer(thread, turn, note)?;
                }
                Ok(Ok(json!({"decision": if decision == Decision::Allow { "accept" } else { "decline" }})))
            }
            "item/permissions/requestApproval" => {
                let decision = decided(handler, permissions_approval(params));
                if let Decision::Deny { note: Some(note) } = &decision {
                    self.steer(thread, turn, note)?;
                }
                // A grant is the profile asked for; a refusal grants nothing.
                let granted = if decision == Decision::Allow { params["permissions"].clone() } else { json!({}) };
                Ok(Ok(json!({"permissions": granted, "scope": "turn"})))
            }
            "item/tool/requestUserInput" => {
                let questions = params["questions"].as_array().cloned().unwrap_or_default();
                let answer = match question_of(&questions) {
                    Ok(_) if cancel.load(Ordering::SeqCst) => {
                        Err("The person did not answer: the turn was cancelled.".to_string())
                    }
                    Ok(q) => Ok(handler.question(&q)),
                    // Never put to the person: the note says why and how to ask instead.
                    Err(why) => Err(why.note()),
                };
                let words = match answer {
                    Ok(Answer::Chose(label)) => label,
                    Ok(Answer::Deny { note }) => format!("The person did not answer: {note}"),
                    Err(words) => words,
                };
                let answers: serde_json::Map<String, Value> = questions
                    .iter()
                    .map(|q| (q["id"].as_str().unwrap_or_default().to_string(), json!({"answers": [words.clone()]})))
                    .collect();
                Ok(Ok(json!({"answers": answers})))
            }
            // The `handoff` MCP server asks nothing of the person through Codex.
            "mcpServer/elicitation/request" => Ok(Ok(json!({"action": "decline", "content": null}))),
            // The older names of the approvals, for a conversation of the first protocol.
            "execCommandApproval" | "applyPatchApproval" => Ok(Ok(json!({"decision": "denied"}))),
            _ => Ok(Err(json!({"code": -32601, "message": format!("handoff serve does not answer {method}")}))),
        }
    }

    /// The person's words into the running turn: Codex's answer to a `decline` carries no
    /// message, so a deny's note goes to the model as input added to the turn.
    fn steer(&mut self, thread: &str, turn: &str, note: &str) -> Result<(), DriverError> {
        let input = json!([{"type": "text", "text": note, "text_elements": []}]);
        self.send_request("turn/steer", json!({"threadId": thread, "expectedTurnId": turn, "input": input}))?;
        Ok(())
    }

    /// Sends a request and waits for its response, keeping whatever else comes meanwhile.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, DriverError> {
        let id = self.send_request(method, params)?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut kept = VecDeque::new();
        let result = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(DriverError::Timeout { method: method.to_string() });
            }
            let message = match self.next_message(left) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => break Err(e),
            };
            if message.get("method").is_none() && message["id"] == id {
                break match message.get("error") {
                    Some(error) => Err(DriverError::Rpc { method: method.to_string(), error: error.clone() }),
                    None => Ok(message["result"].clone()),
                };
            }
            kept.push_back(message);
        };
        kept.append(&mut self.stashed);
        self.stashed = kept;
        result
    }

    fn send_request(&mut self, method: &str, params: Value) -> Result<u64, DriverError> {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), DriverError> {
        let mut message = json!({"method": method});
        if let Some(p) = params {
            message["params"] = p;
        }
        self.write(&message)
    }

    fn write(&mut self, message: &Value) -> Result<(), DriverError> {
        if self.stopped {
            return Err(self.exited());
        }
        let mut line = message.to_string();
        line.push('\n');
        match self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(self.exited()),
            Err(e) => Err(e.into()),
        }
    }

    /// The next message (a stashed one first), `None` when none came within `wait`.
    fn next_message(&mut self, wait: Duration) -> Result<Option<Value>, DriverError> {
        if let Some(m) = self.stashed.pop_front() {
            return Ok(Some(m));
        }
        match self.messages.recv_timeout(wait) {
            Ok(m) => Ok(Some(m)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(self.exited()),
        }
    }

    /// Ends the child's whole process group ([`group::stop`]). Once stopped, every call answers
    /// [`DriverError::Exited`].
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let child = &mut self.child;
        group::stop(child.id(), || child.try_wait().ok().flatten());
        let _ = self.child.wait();
    }

    fn exited(&mut self) -> DriverError {
        // Its end and the rest of its stderr have a moment to arrive (a grandchild may hold
        // stderr open, hence the limit).
        let deadline = Instant::now() + Duration::from_millis(500);
        let drained = |s: &Self| s.stderr.lock().unwrap_or_else(|e| e.into_inner()).closed;
        while Instant::now() < deadline && (matches!(self.child.try_wait(), Ok(None)) || !drained(self)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!("({s}) "),
            _ => String::new(),
        };
        DriverError::Exited { stderr: format!("{status}{}", self.stderr_tail()) }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One line (without its newline); `Some(None)` for a line longer than `max`, skipped; `None`
/// at the end.
fn read_line_bounded(reader: &mut impl BufRead, max: usize) -> Option<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().ok()?;
        if buf.is_empty() {
            return if line.is_empty() && !too_long { None } else { Some((!too_long).then_some(line)) };
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Some((!too_long).then_some(line));
        }
    }
}

/// The last [`STDERR_TAIL_BYTES_MAX`] bytes written, and whether the writer closed it.
#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    closed: bool,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend(bytes);
        let over = self.bytes.len().saturating_sub(STDERR_TAIL_BYTES_MAX);
        self.bytes.drain(..over);
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.iter().copied().collect::<Vec<u8>>()).into_owned()
    }
}

/// A turn's end from its `turn/completed` turn: its status, error and agent's message (the
/// last `agentMessage` of its items, else the last one seen streaming).
pub fn outcome(turn: &Value, streamed_message: &str) -> TurnOutcome {
    match turn["status"].as_str() {
        Some("completed") => {
            let items = turn["items"].as_array().into_iter().flatten();
            let message = items
                .rev()
                .filter(|i| i["type"] == "agentMessage")
                .find_map(|i| i["text"].as_str())
                .unwrap_or(streamed_message);
            TurnOutcome::Completed { message: message.to_string() }
        }
        Some("interrupted") => TurnOutcome::Interrupted,
        other => {
            let reason = turn["error"]["message"]
                .as_str()
                .map_or_else(|| format!("the turn ended {}", other.unwrap_or("without a status")), str::to_string);
            TurnOutcome::Failed { reason }
        }
    }
}

/// `item/commandExecution/requestApproval`, shown whole: its kind (a command, input to a
/// running terminal, a checkpoint), the command and its folder, the network host it wants
/// (`networkApprovalContext`), the reason, and the rules Codex proposes to add
/// (`proposedExecpolicyAmendment`, `proposedNetworkPolicyAmendments`), which an Allow does not
/// add (it accepts this once). A kind or a field this build does not know is [`Unshowable`].
pub fn command_approval(params: &Value) -> Result<Approval, Unshowable> {
    const SHOWN: [&str; 9] = [
        "kind",
        "command",
        "cwd",
        "environmentId",
        "networkApprovalContext",
        "reason",
        "proposedExecpolicyAmendment",
        "proposedNetworkPolicyAmendments",
        "commandActions",
    ];
    unshown(params, &SHOWN)?;
    let network = &params["networkApprovalContext"];
    let kind = match (params["kind"].as_str(), network.is_null()) {
        (None | Some("command"), true) => ApprovalKind::Command,
        (None | Some("command"), false) => ApprovalKind::Network,
        (Some("writeStdin"), true) => ApprovalKind::TerminalInput,
        (Some("humanCommand"), true) => ApprovalKind::HumanCommand,
        (Some(other), _) => return Err(Unshowable(format!("it is of a kind this build cannot show ({other})"))),
    };
    let mut lines: Vec<String> = Vec::new();
    if kind == ApprovalKind::Network {
        let (host, protocol) = (network["host"].as_str(), network["protocol"].as_str());
        let (Some(host), Some(protocol)) = (host, protocol) else {
            return Err(Unshowable(format!("its network access names no host and protocol ({network})")));
        };
        lines.push(format!("{host} over {protocol}"));
    }
    match (params["command"].as_str(), kind) {
        (Some(command), ApprovalKind::TerminalInput) => lines.push(format!("writes to the terminal: {command}")),
        (Some(command), ApprovalKind::Network) => lines.push(format!("for the command: {command}")),
        (Some(command), _) => lines.push(command.to_string()),
        (None, ApprovalKind::Network) => {}
        (None, _) => return Err(Unshowable("it names no command".into())),
    }
    if let Some(cwd) = params["cwd"].as_str() {
        lines.push(format!("in {cwd}"));
    }
    if let Some(environment) = params["environmentId"].as_str() {
        lines.push(format!("in environment {environment}"));
    }
    let reason = params["reason"].as_str().map(str::to_string);
    if let Some(r) = &reason {
        lines.push(format!("reason: {r}"));
    }
    lines.extend(proposed_rules(params)?);
    Ok(Approval { kind, text: lines.join("\n"), reason })
}

/// The rules a command approval proposes to add, as lines; an Allow adds none of them.
fn proposed_rules(params: &Value) -> Result<Vec<String>, Unshowable> {
    let mut lines = Vec::new();
    if let Some(words) = params["proposedExecpolicyAmendment"].as_array() {
        let words: Option<Vec<&str>> = words.iter().map(Value::as_str).collect();
        let words = words.ok_or_else(|| Unshowable("its proposed command rule is not a list of words".into()))?;
        lines.push(format!(
            "Codex proposes a rule to run commands starting `{}` without asking; Allow runs this once and adds no rule",
            words.join(" ")
        ));
    }
    if let Some(amendments) = params["proposedNetworkPolicyAmendments"].as_array() {
        for a in amendments {
            let (Some(action), Some(host)) = (a["action"].as_str(), a["host"].as_str()) else {
                return Err(Unshowable(format!("a proposed network rule this build cannot show ({a})")));
            };
            lines.push(format!(
                "Codex proposes a network rule: {action} {host} from now on; Allow answers this once and adds no rule"
            ));
        }
    }
    Ok(lines)
}

/// `item/fileChange/requestApproval`: the paths and diffs of its `fileChange` item (the
/// request names the item; the changes come with the item's `item/started`).
pub fn file_change_approval(params: &Value, item: Option<&Value>) -> Result<Approval, Unshowable> {
    unshown(params, &["reason", "grantRoot"])?;
    let changes = item.and_then(|i| i["changes"].as_array()).cloned().unwrap_or_default();
    let mut text = String::new();
    for change in &changes {
        let kind = change["kind"]["type"].as_str().unwrap_or("change");
        let path = change["path"].as_str().unwrap_or("?");
        text.push_str(&format!("{kind} {path}"));
        if let Some(to) = change["kind"]["move_path"].as_str() {
            text.push_str(&format!(" → {to}"));
        }
        text.push('\n');
        text.push_str(change["diff"].as_str().unwrap_or_default());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if changes.is_empty() {
        text.push_str("a change of files (Codex did not say which)\n");
    }
    if let Some(root) = params["grantRoot"].as_str() {
        text.push_str(&format!("and writes under {root} for the rest of the session\n"));
    }
    let reason = params["reason"].as_str().map(str::to_string);
    if let Some(r) = &reason {
        text.push_str(&format!("reason: {r}\n"));
    }
    Ok(Approval { kind: ApprovalKind::FileChange, text: text.trim_end().to_string(), reason })
}

/// `item/permissions/requestApproval`: the permissions asked for, and the folder.
pub fn permissions_approval(params: &Value) -> Result<Approval, Unshowable> {
    unshown(params, &["permissions", "cwd", "environmentId", "reason"])?;
    let mut text = format!("more permissions: {}", params["permissions"]);
    if let Some(cwd) = params["cwd"].as_str() {
        text.push_str(&format!("\nin {cwd}"));
    }
    if let Some(environment) = params["environmentId"].as_str() {
        text.push_str(&format!("\nin environment {environment}"));
    }
    let reason = params["reason"].as_str().map(str::to_string);
    if let Some(r) = &reason {
        text.push_str(&format!("\nreason: {r}"));
    }
    Ok(Approval { kind: ApprovalKind::Permissions, text, reason })
}

/// The one question the owner's choice form carries, or why these cannot be asked (several
/// at once, a secret, no options, more or longer than the form holds whole).
pub fn question_of(questions: &[Value]) -> Result<Question, Unaskable> {
    let [q] = questions else {
        return Err(Unaskable::Several(questions.len()));
    };
    if q["isSecret"] == true {
        return Err(Unaskable::Secret);
    }
    let options: Vec<(String, String)> = q["options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                o["label"].as_str().unwrap_or_default().to_string(),
                o["description"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let text = q["question"].as_str().unwrap_or_default().to_string();
    let labels: Vec<String> = options.iter().map(|(label, _)| label.clone()).collect();
    crate::ask::choice_fits(&text, &labels)?;
    Ok(Question {
        header: q["header"].as_str().unwrap_or_default().to_string(),
        text,
        options,
        other: q["isOther"] == true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_turns_handoff_server_may_outlast_ask_owners_served_wait_and_reads_that_it_is_served() {
        let args = served_settings("/usr/bin/handoff", 900);
        assert!(args.chunks(2).all(|pair| pair[0] == "-c"), "every setting is a -c: {args:?}");
        let settings: Vec<&str> = args.iter().skip(1).step_by(2).map(String::as_str).collect();
        assert!(settings.contains(&"mcp_servers.handoff.tool_timeout_sec=960"), "{settings:?}");
        let env_vars = settings.iter().find(|s| s.starts_with("mcp_servers.handoff.env_vars=")).expect("env_vars");
        for name in env::CODEX_MCP_NAMES.iter().chain(&env::SERVED_MCP_NAMES) {
            assert!(env_vars.contains(&format!("\"{name}\"")), "{name} in {env_vars}");
        }
        assert_eq!(
            settings.iter().filter(|s| s.starts_with("mcp_servers.handoff.env_vars=")).count(),
            1,
            "one env_vars, not the launcher's overridden"
        );
        // Everything else is the launcher's.
        let launcher = launcher_settings("/usr/bin/handoff");
        let others = |a: &[String]| {
            a.iter()
                .skip(1)
                .step_by(2)
                .filter(|s| !s.contains("env_vars") && !s.contains("tool_timeout_sec"))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(others(&args), others(&launcher));
        // The longest served wait, and its margin, is what Codex waits.
        let longest = served_settings("h", crate::ask::ANSWER_WAIT_S_MAX);
        assert!(longest.contains(&format!(
            "mcp_servers.handoff.tool_timeout_sec={}",
            crate::ask::ANSWER_WAIT_S_MAX + MCP_TOOL_TIMEOUT_MARGIN_S
        )));
    }

    #[test]
    fn a_command_approval_reads_as_the_whole_command_and_its_folder() {
        let a = command_approval(
            &json!({"command": "touch a && rm -rf b", "cwd": "/w", "itemId": "i", "threadId": "t", "turnId": "u", "startedAtMs": 1}),
        )
        .unwrap();
        assert_eq!((a.kind, a.text.as_str()), (ApprovalKind::Command, "touch a && rm -rf b\nin /w"));
        assert_eq!(a.title(), "Command: touch a && rm -rf b");
    }

    #[test]
    fn a_codex_approval_is_shown_whole_its_kind_host_reason_and_proposed_rules_or_declined_with_a_note() {
        let base =
            json!({"itemId": "i", "threadId": "t", "turnId": "u", "startedAtMs": 1, "approvalId": null, "cwd": "/w"});
        let with = |extra: Value| {
            let mut p = base.clone();
            p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            command_approval(&p)
        };
        let network = with(json!({
            "command": "curl https://evil.example/x",
            "networkApprovalContext": {"host": "evil.example", "protocol": "https"},
            "reason": "network access",
            "proposedNetworkPolicyAmendments": [{"action": "allow", "host": "evil.example"}],
        }))
        .unwrap();
        assert_eq!(network.kind, ApprovalKind::Network);
        assert_eq!(network.title(), "Network access: evil.example over https");
        for shown in [
            "evil.example over https",
            "curl https://evil.example/x",
            "in /w",
            "reason: network access",
            "network rule: allow evil.example",
        ] {
            assert!(network.text.contains(shown), "{shown} in {}", network.text);
        }
        let policy = with(json!({"command": "cargo test", "proposedExecpolicyAmendment": ["cargo", "test"]})).unwrap();
        assert!(policy.text.contains("commands starting `cargo test` without asking"), "{}", policy.text);
        let stdin = with(json!({"kind": "writeStdin", "command": "y"})).unwrap();
        assert_eq!(
            (stdin.kind, stdin.title().as_str()),
            (ApprovalKind::TerminalInput, "Input to a running terminal: writes to the terminal: y")
        );
        assert_eq!(
            with(json!({"kind": "humanCommand", "command": "deploy"})).unwrap().kind,
            ApprovalKind::HumanCommand
        );

        // What cannot be shown is declined, never asked: an unknown kind or field, a host missing.
        let unknown_kind = with(json!({"kind": "somethingNew", "command": "ls"})).unwrap_err();
        assert!(
            unknown_kind.note().contains("somethingNew") && unknown_kind.note().contains("declined"),
            "{unknown_kind:?}"
        );
        let unknown_field =
            with(json!({"command": "ls", "additionalPermissions": {"network": {"enabled": true}}})).unwrap_err();
        assert!(unknown_field.0.contains("additionalPermissions"), "{unknown_field:?}");
        assert!(with(json!({"command": "ls", "networkApprovalContext": {"protocol": "https"}})).is_err());
        assert!(with(json!({"command": "ls", "proposedNetworkPolicyAmendments": [{"host": "a"}]})).is_err());
        assert!(with(json!({})).is_err(), "no command and no host: nothing to show");
        assert!(with(json!({"command": "ls", "extra": null})).is_ok(), "a field without a value changes nothing");
        assert!(file_change_approval(&json!({"itemId": "i", "somethingNew": 1}), None).is_err());
        assert!(
            permissions_approval(&json!({"itemId": "i", "permissions": {}, "cwd": "/w", "scope": "session"})).is_err()
        );
    }

    #[test]
    fn a_file_change_approval_carries_the_paths_and_diffs_of_its_item() {
        let item = json!({"type": "fileChange", "id": "i", "status": "inProgress", "changes": [
            {"path": "a.rs", "kind": {"type": "add"}, "diff": "+fn a() {}\n"},
            {"path": "b.rs", "kind": {"type": "update", "move_path": "c.rs"}, "diff": "-x\n+y"},
        ]});
        let a = file_change_approval(&json!({"itemId": "i"}), Some(&item)).unwrap();
        assert_eq!(a.text, "add a.rs\n+fn a() {}\nupdate b.rs → c.rs\n-x\n+y");
        assert!(file_change_approval(&json!({"itemId": "i"}), None).unwrap().text.contains("did not say which"));
    }

    #[test]
    fn only_one_plain_question_with_options_goes_to_the_person_and_anything_else_is_denied_saying_why() {
        let q = json!({"id": "q1", "header": "Pick", "question": "Which?", "options": [{"label": "A", "description": "first"}]});
        assert_eq!(
            question_of(std::slice::from_ref(&q)).unwrap().options,
            vec![("A".to_string(), "first".to_string())]
        );
        assert_eq!(question_of(&[q.clone(), q.clone()]).unwrap_err(), Unaskable::Several(2));
        assert_eq!(question_of(&[]).unwrap_err(), Unaskable::Several(0));
        let mut secret = q.clone();
        secret["isSecret"] = json!(true);
        assert_eq!(question_of(&[secret]).unwrap_err(), Unaskable::Secret);
        let mut open = q.clone();
        open["options"] = Value::Null;
        assert_eq!(question_of(&[open]).unwrap_err(), Unaskable::NoOptions);
        let mut seven = q.clone();
        seven["options"] =
            json!((0..7).map(|i| json!({"label": format!("{i}"), "description": ""})).collect::<Vec<_>>());
        assert_eq!(question_of(&[seven]).unwrap_err(), Unaskable::TooManyOptions(7));
        let mut long = q;
        long["question"] = json!("x".repeat(handoff_core::limits::QUESTION_TEXT_BYTES_MAX + 1));
        assert_eq!(question_of(&[long]).unwrap_err(), Unaskable::DoesNotFit);
    }

    #[test]
    fn a_turn_ends_as_its_status_says_with_the_agents_last_message() {
        let done = json!({"id": "t", "status": "completed", "items": [{"type": "agentMessage", "id": "1", "text": "first"}, {"type": "agentMessage", "id": "2", "text": "last"}]});
        assert_eq!(outcome(&done, "streamed"), TurnOutcome::Completed { message: "last".into() });
        assert_eq!(
            outcome(&json!({"status": "completed", "items": []}), "streamed"),
            TurnOutcome::Completed { message: "streamed".into() }
        );
        assert_eq!(outcome(&json!({"status": "interrupted", "items": []}), ""), TurnOutcome::Interrupted);
        assert_eq!(
            outcome(&json!({"status": "failed", "items": [], "error": {"message": "quota"}}), ""),
            TurnOutcome::Failed { reason: "quota".into() }
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped_and_the_next_one_read() {
        let mut r = std::io::Cursor::new(b"0123456789\nabc\nlast".to_vec());
        assert_eq!(read_line_bounded(&mut r, 5), Some(None));
        assert_eq!(read_line_bounded(&mut r, 5), Some(Some(b"abc".to_vec())));
        assert_eq!(read_line_bounded(&mut r, 5), Some(Some(b"last".to_vec())));
        assert_eq!(read_line_bounded(&mut r, 5), None);
    }

    #[test]
    fn a_model_list_page_gives_the_ids_of_the_models_not_hidden() {
        let page = json!({"data": [{"id": "gpt-a", "hidden": false}, {"id": "gpt-hidden", "hidden": true}, {"model": "gpt-b"}], "nextCursor": null});
        assert_eq!(listed_models(&page), ["gpt-a", "gpt-b"]);
        assert!(listed_models(&json!({})).is_empty());
    }

    #[test]
    fn the_stderr_tail_keeps_only_the_end() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; STDERR_TAIL_BYTES_MAX]);
        t.push(b"end");
        assert_eq!(t.bytes.len(), STDERR_TAIL_BYTES_MAX);
        assert!(t.text().ends_with("aend"));
    }
}
