//! The machine's commands, run with its machine token inside the cloud machine: its reports,
//! its record (decisions, artifacts, blockers), its questions to the owner, the runtime it
//! launches, and the hooks and MCP server a harness runs.

use super::setup::InstallArgs;
use super::shared::{parse_serde, say, Failure, Key, Out};
use crate::ask::{self, Waited};
use crate::client::{
    ArtifactInput, BlockerInput, Choice, Client, DecisionInput, Limit, QuestionInput, QuestionKind, ReportInput,
    Runtime, RuntimesInput, Severity, Usage,
};
use crate::launch::{self, run::LaunchError, run::Request, Mode};
use crate::output::{self, EXIT_AUTH_OR_NETWORK};
use crate::{hook, mcp};
use handoff_core::turn::ReportStatus;
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    pub id: String,
    #[arg(long)]
    pub turn: u64,
    #[arg(long, value_parser = parse_serde::<ReportStatus>)]
    pub status: ReportStatus,
    #[arg(long)]
    pub summary: Option<String>,
    /// Acceptance criteria (indexes) this final report leaves unmet: 0,2
    #[arg(long, value_delimiter = ',', value_name = "I,…")]
    pub unmet: Option<Vec<u32>>,
    /// Tokens of the context window in use.
    #[arg(long, value_name = "TOKENS", requires = "context_window")]
    pub context_used: Option<u64>,
    #[arg(long, value_name = "TOKENS", requires = "context_used")]
    pub context_window: Option<u64>,
    /// Requests (or any count) left of the provider's quota.
    #[arg(long, value_name = "N")]
    pub quota_remaining: Option<u64>,
    /// The session ended on a provider's cap.
    #[arg(long)]
    pub provider_limit: bool,
    #[command(flatten)]
    pub key: Key,
}

impl ReportArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let usage = Usage {
            context_used: self.context_used,
            context_window: self.context_window,
            quota_remaining: self.quota_remaining,
            limit: self.provider_limit.then_some(Limit::ProviderLimit),
        };
        let usage = (usage != Usage::default()).then_some(usage);
        let report = ReportInput {
            turn: self.turn,
            status: self.status,
            summary: self.summary,
            unmet: self.unmet,
            usage,
            question: None,
            permission_mode: None,
            runtime: None,
            reply: None,
            sync_mode: None,
        };
        let reply = self.key.on(client).report(&self.id, &report)?;
        out.emit(&reply, output::reported_lines(&reply.value));
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct WorkspaceArgs {
    pub id: String,
    /// Read the changes from `git diff --numstat HEAD` in the current folder.
    #[arg(long)]
    pub git: bool,
    #[command(flatten)]
    pub key: Key,
}

impl WorkspaceArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        if !self.git {
            return Err(Failure::Usage(
                "workspace needs --git: the file counts come from `git diff --numstat HEAD`".into(),
            ));
        }
        let dir = std::env::current_dir().map_err(|e| Failure::Usage(format!("the current folder: {e}")))?;
        let files = crate::git::numstat(&dir).map_err(Failure::Usage)?;
        let reply = self.key.on(client).workspace(&self.id, &files)?;
        let count = files.len();
        let noun = if count == 1 { "file" } else { "files" };
        out.emit(&reply, [format!("{count} {noun} sent; {}", output::item_line(&reply.value))]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct DecideArgs {
    pub id: String,
    pub statement: String,
    #[arg(long)]
    pub rationale: Option<String>,
    /// A URI that supports the decision (repeatable).
    #[arg(long, value_name = "URI")]
    pub evidence: Vec<String>,
    /// The id of the decision this one replaces.
    #[arg(long, value_name = "DECISION")]
    pub supersedes: Option<String>,
    #[command(flatten)]
    pub key: Key,
}

impl DecideArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let decision = DecisionInput {
            statement: self.statement,
            rationale: self.rationale,
            evidence: self.evidence,
            supersedes: self.supersedes,
        };
        let reply = self.key.on(client).decide(&self.id, &decision)?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct ArtifactArgs {
    pub id: String,
    #[arg(long = "type", value_name = "T")]
    pub kind: String,
    #[arg(long)]
    pub title: String,
    #[arg(long)]
    pub uri: String,
    #[arg(long, value_name = "H")]
    pub sha256: Option<String>,
    #[command(flatten)]
    pub key: Key,
}

impl ArtifactArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let artifact = ArtifactInput { kind: self.kind, title: self.title, uri: self.uri, sha256: self.sha256 };
        let reply = self.key.on(client).artifact(&self.id, &artifact)?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct BlockArgs {
    pub id: String,
    #[arg(long, value_parser = parse_serde::<Severity>)]
    pub severity: Severity,
    pub title: String,
    #[command(flatten)]
    pub key: Key,
}

impl BlockArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply =
            self.key.on(client).block(&self.id, &BlockerInput { severity: self.severity, title: self.title })?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct ResolveArgs {
    pub id: String,
    pub blocker: String,
    #[command(flatten)]
    pub key: Key,
}

impl ResolveArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = self.key.on(client).resolve_blocker(&self.id, &self.blocker)?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct RuntimesArgs {
    pub id: String,
    /// Find `claude` and `codex` on PATH and ask each for its version and credential.
    #[arg(long, conflicts_with = "runtimes")]
    pub detect: bool,
    /// A runtime, as NAME=signed-in, NAME=signed-out or NAME=unchecked (repeatable).
    #[arg(long = "runtime", value_name = "NAME=STATE", value_parser = parse_runtime)]
    pub runtimes: Vec<Runtime>,
    #[command(flatten)]
    pub key: Key,
}

impl RuntimesArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        if !self.detect && self.runtimes.is_empty() {
            return Err(Failure::Usage("runtimes: --detect, or --runtime NAME=STATE for each runtime".into()));
        }
        let runtimes =
            if self.detect { crate::detect::detect(std::env::var("PATH").ok().as_deref()) } else { self.runtimes };
        let reply = self.key.on(client).put_runtimes(&self.id, &RuntimesInput { runtimes, checked_at: None })?;
        out.emit(&reply, output::runtimes_lines(&reply.value));
        Ok(())
    }
}

/// `NAME=signed-in|signed-out|unchecked`.
fn parse_runtime(word: &str) -> Result<Runtime, String> {
    let (name, state) =
        word.split_once('=').ok_or_else(|| format!("{word}: NAME=signed-in, NAME=signed-out or NAME=unchecked"))?;
    let signed_in = match state {
        "signed-in" => Some(true),
        "signed-out" => Some(false),
        "unchecked" => None,
        _ => return Err(format!("{state}: one of signed-in, signed-out, unchecked")),
    };
    Ok(Runtime { name: name.to_string(), version: None, signed_in })
}

#[derive(clap::Args, Debug)]
pub struct AskArgs {
    pub id: String,
    #[arg(long)]
    pub turn: u64,
    #[arg(long)]
    pub text: String,
    /// An option, as ID=LABEL (repeatable, 1 to 6; ids of [a-z0-9_-]).
    #[arg(long = "option", value_name = "ID=LABEL", required = true, value_parser = parse_choice)]
    pub options: Vec<Choice>,
    /// choice, or permission (a harness's allow/deny prompt).
    #[arg(long, value_parser = parse_serde::<QuestionKind>, default_value = "choice")]
    pub kind: QuestionKind,
    /// Seconds to wait for the answer.
    #[arg(long, value_name = "S")]
    pub wait: Option<u64>,
    #[command(flatten)]
    pub key: Key,
}

impl AskArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let id = self.id;
        let wait_s = self.wait.unwrap_or_else(|| ask::answer_wait_s(&|k| std::env::var(k).ok()));
        let question = QuestionInput { kind: self.kind, text: self.text, input: None, options: self.options };
        let report = ReportInput { question: Some(question), ..ReportInput::of(self.turn, ReportStatus::NeedsYou) };
        let asked = self.key.on(client).report(&id, &report)?;
        let Some(q) = asked.value.question.clone() else {
            return Err(Failure::Usage("ask: the service did not keep the question".into()));
        };
        eprintln!(
            "asked {} on turn {} (v{}); waiting up to {wait_s} s for the answer",
            q.id, q.turn, asked.value.version
        );
        let deadline = Instant::now() + Duration::from_secs(wait_s);
        match ask::wait_for_answer(client, &id, &q.id, asked.value.version, deadline) {
            Waited::Answered(answer, record) => {
                if out.json {
                    println!("{}", output::escape_json(&json!({ "handoff": record }).to_string()));
                } else {
                    say([answer.option.clone()]);
                    if let Some(note) = &answer.note {
                        eprintln!("{}", output::escape(&format!("note: {note}"), false));
                    }
                }
                Ok(())
            }
            Waited::Withdrawn => {
                eprintln!("no answer: {} was withdrawn", q.id);
                Err(Failure::Exit(output::EXIT_NO_ANSWER))
            }
            Waited::TimedOut => {
                eprintln!("no answer within {wait_s} s");
                Err(Failure::Exit(output::EXIT_NO_ANSWER))
            }
        }
    }
}

/// `ID=LABEL` of `handoff ask --option`.
fn parse_choice(word: &str) -> Result<Choice, String> {
    let (id, label) = word.split_once('=').ok_or_else(|| format!("{word}: ID=LABEL"))?;
    Ok(Choice { id: id.to_string(), label: label.to_string() })
}

#[derive(clap::Args, Debug)]
pub struct LaunchArgs {
    pub id: String,
    /// claude-code or codex; the runtime the turn was handed to unless given.
    #[arg(long, value_name = "RUNTIME")]
    pub runtime: Option<String>,
    /// The briefing's budget in bytes (default: the runtime's).
    #[arg(long, value_name = "BYTES")]
    pub budget: Option<u32>,
    /// Print mode: `claude -p`, `codex exec`; one run, then exit.
    #[arg(long)]
    pub print: bool,
    /// Print the prompt and the command line; accept nothing, start nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Arguments for the runtime itself, after `--`.
    #[arg(last = true, value_name = "RUNTIME_ARGS")]
    pub runtime_args: Vec<String>,
}

impl LaunchArgs {
    /// Starts the runtime and ends with its exit code.
    pub fn run(self, out: &Out, url: &str, token: &str) -> Result<(), Failure> {
        let mode = if self.print { Mode::Print } else { Mode::Interactive };
        let request = Request {
            id: self.id,
            runtime: self.runtime,
            budget_bytes: self.budget,
            mode,
            dry_run: self.dry_run,
            extra: self.runtime_args,
        };
        let code = launch::run::launch(url, token, &request, out.json).map_err(|e| match e {
            LaunchError::Api(e) => Failure::Api(e),
            LaunchError::Refused(r) => Failure::Usage(format!("launch: {r}")),
            LaunchError::Setup(s) => Failure::Usage(format!("launch: {s}")),
            LaunchError::Accept(_, e) => Failure::Api(e),
        })?;
        Failure::unless_ok(code)
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum HookCommand {
    /// A Claude Code hook: reads its JSON document on standard input, reports, exits 0.
    ClaudeCode,
    /// Codex's `notify` program: reads the JSON argument Codex appends, reports, exits 0.
    Codex {
        /// The notification, as Codex passes it (its last argument).
        #[arg(value_name = "NOTIFICATION", num_args = 0.., allow_hyphen_values = true)]
        notification: Vec<String>,
    },
    /// Delivers what the hooks spooled for HANDOFF_ID (or ID) and could not send.
    Flush {
        #[arg(long, env = crate::machine::env::ENV_ID)]
        id: String,
    },
    /// Adds the hooks to a harness's settings, keeping every other entry (or --uninstall);
    /// --project DIR: DIR/.claude/settings.json, DIR/.codex/config.toml.
    Install(InstallArgs),
}

impl HookCommand {
    /// A harness's hooks always exit 0 and print nothing; `flush` and `install` are run by a
    /// person and say what they did.
    pub fn run(self, url: &str, token: Option<&str>) -> Result<(), Failure> {
        match self {
            HookCommand::ClaudeCode => hook::claude_code(url, token),
            HookCommand::Codex { notification } => hook::codex(url, token, notification.last().cloned()),
            HookCommand::Flush { id } => {
                let Some(session) = hook::session("flush", url, token, Some(&id)) else {
                    return Err(Failure::Credential(
                        "no token: set HANDOFF_TOKEN to the session's machine token".into(),
                    ));
                };
                let spool = hook::spool::Spool::open(&session.dir, &id)
                    .map_err(|e| Failure::Usage(format!("the spool: {e}")))?;
                let done = session.deliver(&spool).map_err(|e| Failure::Usage(format!("the spool: {e}")))?;
                println!(
                    "delivered {}, dropped {}, left {} (log: {})",
                    done.sent,
                    done.dropped,
                    done.left,
                    session.dir.join("hook.log").display()
                );
                if done.left > 0 {
                    return Err(Failure::Exit(EXIT_AUTH_OR_NETWORK));
                }
            }
            HookCommand::Install(args) => args.install_hooks()?,
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
}

#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// Adds the server to a harness's own MCP settings, keeping every other entry (or
    /// --uninstall): Claude Code's ~/.claude.json (--project DIR: DIR/.mcp.json), Codex's
    /// config.toml.
    Install(InstallArgs),
}

impl McpArgs {
    /// The server on standard input and output until its client goes, or `mcp install`.
    pub fn run(self) -> Result<(), Failure> {
        match self.command {
            None => {
                let (url, id, token) = mcp::from_env(&|k| std::env::var(k).ok()).map_err(Failure::Usage)?;
                Failure::unless_ok(mcp::serve(&url, &id, &token))
            }
            Some(McpCommand::Install(args)) => args.install_mcp_server(),
        }
    }
}
