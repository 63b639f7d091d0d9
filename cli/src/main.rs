//! `handoff`: the command line of the hand-off service, for owners at a terminal and for
//! machine reporters inside cloud machines. Arguments in, one client call (or two: a read
//! first where a default comes from the record), lines or the API's JSON out, and an exit code
//! a script can act on. The rules stay in the API; this file only asks and prints.

use clap::{Args, Parser, Subcommand};
use handoff_core::turn::{ReportStatus, State};
use handoff_cli::client::{Client, Error, Reply, URL_DEFAULT, WAIT_TIMEOUT_S_MAX};
use handoff_cli::client::*;
use handoff_cli::hook;
use handoff_cli::launch::{self, run::LaunchError, run::Request, Mode};
use handoff_cli::output::{self, EXIT_AUTH_OR_NETWORK, EXIT_OK, EXIT_USAGE};
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lifetime of an owner token minted by `handoff token --owner` unless `--ttl` says.
const OWNER_TOKEN_TTL_S_DEFAULT: i64 = 12 * 60 * 60;
/// How long each wait of `wait --follow` is held before it is asked again.
const FOLLOW_WAIT_S: u64 = 60;
/// How often a terminal's waiting line is redrawn.
const TICK_MS: u64 = 250;

#[derive(Parser, Debug)]
#[command(name = "handoff", version, about = "Hand-off sessions from the command line: create, watch, report, hand off.")]
struct Cli {
    /// The API's base URL.
    #[arg(long, global = true, env = "HANDOFF_URL", default_value = URL_DEFAULT)]
    url: String,
    /// A bearer token: an owner's, or the machine token that `create` printed.
    #[arg(long, global = true, env = "HANDOFF_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the API's JSON instead of short lines.
    #[arg(long, global = true)]
    json: bool,
    /// Send the token over plain http:// to a host other than this machine (loopback needs
    /// no flag). The hooks and the MCP server read HANDOFF_INSECURE_HTTP.
    #[arg(long, global = true, env = "HANDOFF_INSECURE_HTTP", value_parser = clap::builder::FalseyValueParser::new())]
    insecure_http: bool,
    #[command(subcommand)]
    command: Command,
}

/// State-changing commands send an `Idempotency-Key`: this one, or a fresh one.
#[derive(Args, Debug, Clone, Default)]
struct Key {
    /// Send this Idempotency-Key (reuse it to retry a command whose answer was lost).
    #[arg(long = "idempotency-key", value_name = "K")]
    idempotency_key: Option<String>,
}

/// The owner's words for the turn a command opens.
#[derive(Args, Debug, Default)]
struct Prompt {
    /// The owner's words for the turn (at most 16 KiB; newlines and tabs allowed).
    #[arg(long, short = 'm', value_name = "TEXT", conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// Read the words from a file, or from standard input with `-` (one trailing newline is
    /// dropped).
    #[arg(long, value_name = "PATH")]
    prompt_file: Option<std::path::PathBuf>,
}

impl Prompt {
    /// The words given, read from their file or standard input where they are.
    fn words(self) -> Result<Option<String>, Failure> {
        let Some(path) = self.prompt_file else {
            return Ok(self.prompt);
        };
        let read = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(&path)
        };
        let text = read.map_err(|e| Failure::Usage(format!("--prompt-file {}: {e}", path.display())))?;
        let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
        Ok(Some(text.to_string()))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Mint a development token from HANDOFF_SIGNING_KEY (an owner's, or with --machine a machine's).
    Token {
        #[arg(long)]
        owner: String,
        /// The hand-off id a machine token is for.
        #[arg(long, value_name = "HID")]
        machine: Option<String>,
        /// Seconds an owner token stays valid (machine tokens: 24 h, as the service mints them).
        #[arg(long, value_name = "SECONDS", default_value_t = OWNER_TOKEN_TTL_S_DEFAULT)]
        ttl: i64,
    },
    /// Create the hand-off of a session (or find it); prints its id, then its machine token.
    Create {
        session: String,
        #[arg(long)]
        machine: String,
        #[arg(long)]
        size: String,
        #[command(flatten)]
        prompt: Prompt,
        #[command(flatten)]
        key: Key,
    },
    /// List your hand-offs, newest first (every page).
    List {
        #[arg(long, value_parser = parse_serde::<State>)]
        state: Option<State>,
    },
    /// Show one hand-off.
    Show {
        id: String,
        /// Print the question's whole input (what an Allow approves), nothing else.
        #[arg(long)]
        question: bool,
    },
    /// Open the next turn (after the current one unless --after), or hand it to another runtime.
    Turn {
        id: String,
        #[arg(long)]
        after: Option<u64>,
        /// Hand the turn to this runtime, compiling its package in the same write.
        #[arg(long, value_name = "RUNTIME", requires_all = ["objective", "purpose"])]
        to: Option<String>,
        #[arg(long, requires = "to")]
        objective: Option<String>,
        #[arg(long, requires = "to")]
        purpose: Option<String>,
        #[arg(long, requires = "to")]
        note: Option<String>,
        #[command(flatten)]
        prompt: Prompt,
        #[command(flatten)]
        key: Key,
    },
    /// Stop the current turn (or only if it is turn N).
    Cancel {
        id: String,
        #[arg(long)]
        turn: Option<u64>,
        #[command(flatten)]
        key: Key,
    },
    /// Close the hand-off: a turn still going is cancelled.
    Close {
        id: String,
        #[command(flatten)]
        key: Key,
    },
    /// Erase the hand-off now: closed if open, then its record, storage and list row are gone.
    Erase {
        id: String,
        #[command(flatten)]
        key: Key,
    },
    /// Wait for the next version (after the current one unless --after); --follow until it closes.
    Wait {
        id: String,
        #[arg(long, value_name = "V")]
        after: Option<u64>,
        /// Print every new version as it arrives, until the hand-off closes.
        #[arg(long)]
        follow: bool,
        /// Seconds each wait is held by the server (at most 300).
        #[arg(long, value_name = "S")]
        timeout: Option<u64>,
    },
    /// The lineage: every turn, its runtime, package and times.
    Turns { id: String },
    /// (machine) Report the turn's status.
    Report {
        id: String,
        #[arg(long)]
        turn: u64,
        #[arg(long, value_parser = parse_serde::<ReportStatus>)]
        status: ReportStatus,
        #[arg(long)]
        summary: Option<String>,
        /// Acceptance criteria (indexes) this final report leaves unmet: 0,2
        #[arg(long, value_delimiter = ',', value_name = "I,…")]
        unmet: Option<Vec<u32>>,
        /// Tokens of the context window in use.
        #[arg(long, value_name = "TOKENS", requires = "context_window")]
        context_used: Option<u64>,
        #[arg(long, value_name = "TOKENS", requires = "context_used")]
        context_window: Option<u64>,
        /// Requests (or any count) left of the provider's quota.
        #[arg(long, value_name = "N")]
        quota_remaining: Option<u64>,
        /// The session ended on a provider's cap.
        #[arg(long)]
        provider_limit: bool,
        #[command(flatten)]
        key: Key,
    },
    /// (machine) Send the files changed against HEAD, as paths with line counts only.
    Workspace {
        id: String,
        /// Read the changes from `git diff --numstat HEAD` in the current folder.
        #[arg(long)]
        git: bool,
        #[command(flatten)]
        key: Key,
    },
    /// Record a decision.
    Decide {
        id: String,
        statement: String,
        #[arg(long)]
        rationale: Option<String>,
        /// A URI that supports the decision (repeatable).
        #[arg(long, value_name = "URI")]
        evidence: Vec<String>,
        /// The id of the decision this one replaces.
        #[arg(long, value_name = "DECISION")]
        supersedes: Option<String>,
        #[command(flatten)]
        key: Key,
    },
    /// Record an artifact (the same title again is its next version).
    Artifact {
        id: String,
        #[arg(long = "type", value_name = "T")]
        kind: String,
        #[arg(long)]
        title: String,
        #[arg(long)]
        uri: String,
        #[arg(long, value_name = "H")]
        sha256: Option<String>,
        #[command(flatten)]
        key: Key,
    },
    /// Record a blocker.
    Block {
        id: String,
        #[arg(long, value_parser = parse_serde::<Severity>)]
        severity: Severity,
        title: String,
        #[command(flatten)]
        key: Key,
    },
    /// Resolve a blocker.
    Resolve {
        id: String,
        blocker: String,
        #[command(flatten)]
        key: Key,
    },
    /// (owner) Set the work: title, goal, constraints, acceptance criteria.
    Work {
        id: String,
        #[arg(long)]
        title: String,
        #[arg(long)]
        goal: String,
        #[arg(long)]
        task_type: Option<String>,
        #[arg(long)]
        priority: Option<String>,
        /// A constraint (repeatable).
        #[arg(long = "constraint", value_name = "TEXT")]
        constraints: Vec<String>,
        /// An acceptance criterion (repeatable; indexed from 0 in the order given).
        #[arg(long = "criterion", value_name = "TEXT")]
        criteria: Vec<String>,
        #[command(flatten)]
        key: Key,
    },
    /// (owner) The runtimes you can hand off to and when to be told: nothing switches by itself.
    Policy {
        id: String,
        /// A runtime you can hand off to (repeatable).
        #[arg(long = "runtime", value_name = "RUNTIME", required = true)]
        runtimes: Vec<String>,
        /// Suggest a hand-off when a report's context use reaches this percent (1-99).
        #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u8).range(1..=99))]
        context_threshold_pct: u8,
        /// Suggest a hand-off when a report's remaining quota is at or below this.
        #[arg(long, value_name = "N")]
        quota_threshold: Option<u64>,
        #[command(flatten)]
        key: Key,
    },
    /// (machine) Report the runtimes this machine can run: found with --detect, or named.
    Runtimes {
        id: String,
        /// Find `claude` and `codex` on PATH and ask each for its version and credential.
        #[arg(long, conflicts_with = "runtimes")]
        detect: bool,
        /// A runtime, as NAME=signed-in, NAME=signed-out or NAME=unchecked (repeatable).
        #[arg(long = "runtime", value_name = "NAME=STATE", value_parser = parse_runtime)]
        runtimes: Vec<Runtime>,
        #[command(flatten)]
        key: Key,
    },
    /// (machine) The session's MCP server on standard input and output, for the harness to
    /// start: it records, asks and briefs for the hand-off HANDOFF_URL, HANDOFF_ID and
    /// HANDOFF_TOKEN name. `mcp install claude-code|codex` adds it to the harness's settings.
    Mcp {
        #[command(subcommand)]
        command: Option<McpCommand>,
    },
    /// (machine) The reporters an agent harness runs: `hook claude-code`, `hook codex`, and
    /// `hook install` to add them to the harness's settings.
    #[command(subcommand)]
    Hook(HookCommand),
    /// Compile the package for the next runtime, or show, accept or reject it.
    Package(PackageCommand),
    /// (machine) Start the runtime a turn was handed to, briefed from its package (or from
    /// the work record), with the session's variables and `handoff` allowed.
    Launch {
        id: String,
        /// claude-code or codex; the runtime the turn was handed to unless given.
        #[arg(long, value_name = "RUNTIME")]
        runtime: Option<String>,
        /// The briefing's budget in bytes (default: the runtime's).
        #[arg(long, value_name = "BYTES")]
        budget: Option<u32>,
        /// Print mode: `claude -p`, `codex exec`; one run, then exit.
        #[arg(long)]
        print: bool,
        /// Print the prompt and the command line; accept nothing, start nothing.
        #[arg(long)]
        dry_run: bool,
        /// Arguments for the runtime itself, after `--`.
        #[arg(last = true, value_name = "RUNTIME_ARGS")]
        runtime_args: Vec<String>,
    },
    /// (machine) Run every turn the owner opens, on this machine, for the life of the session:
    /// each turn's runtime started (or its harness session resumed) with the owner's words,
    /// its questions brought to the owner (each waits HANDOFF_SERVE_ANSWER_WAIT_S, default
    /// 900 s, then is denied with a note the model reads), a cancel or close stopping it.
    /// `--print-unit` prints a systemd unit that keeps it running.
    Serve(handoff_cli::serve::Args),
    /// The plain-text briefing a runtime reads, within a byte budget.
    Briefing {
        id: String,
        #[arg(long, value_name = "BYTES")]
        budget: Option<u32>,
        #[arg(long, value_parser = parse_serde::<Reach>)]
        reach: Option<Reach>,
    },
    /// (machine) Ask the owner a question on turn N (a needs-you report) and wait for the
    /// answer: prints the chosen option's id and exits 0, or exits 4 with nothing printed when
    /// no answer came within --wait seconds (default HANDOFF_ANSWER_WAIT_S, else 120).
    Ask {
        id: String,
        #[arg(long)]
        turn: u64,
        #[arg(long)]
        text: String,
        /// An option, as ID=LABEL (repeatable, 1 to 6; ids of [a-z0-9_-]).
        #[arg(long = "option", value_name = "ID=LABEL", required = true, value_parser = parse_choice)]
        options: Vec<Choice>,
        /// choice, or permission (a harness's allow/deny prompt).
        #[arg(long, value_parser = parse_serde::<QuestionKind>, default_value = "choice")]
        kind: QuestionKind,
        /// Seconds to wait for the answer.
        #[arg(long, value_name = "S")]
        wait: Option<u64>,
        #[command(flatten)]
        key: Key,
    },
    /// (owner) Answer the open question with one of its options. Without --question, on a
    /// terminal, the question is shown whole and answered only once you confirm.
    Answer {
        id: String,
        option: String,
        /// A note for the agent (a deny's reason).
        #[arg(long)]
        note: Option<String>,
        /// The question you saw (`q_…`); the open one unless given.
        #[arg(long, value_name = "Q")]
        question: Option<String>,
        #[command(flatten)]
        key: Key,
    },
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct PackageCommand {
    #[command(subcommand)]
    action: Option<PackageAction>,
    #[arg(required = true)]
    id: Option<String>,
    #[arg(long, required = true)]
    objective: Option<String>,
    #[arg(long, required = true)]
    purpose: Option<String>,
    #[arg(long, required = true)]
    runtime: Option<String>,
    #[arg(long)]
    note: Option<String>,
    /// Preview: answer the same, write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    key: Key,
}

#[derive(Subcommand, Debug)]
enum PackageAction {
    /// The latest package, its state and whole hash.
    Show {
        id: String,
        /// The package rendered for a person to read.
        #[arg(long)]
        markdown: bool,
    },
    /// Accept the package (the current hash unless --hash, shown first).
    Accept {
        id: String,
        #[arg(long, value_name = "H")]
        hash: Option<String>,
        #[command(flatten)]
        key: Key,
    },
    /// Reject the package: a statement about the package, not the work.
    Reject {
        id: String,
        #[arg(long, value_parser = parse_serde::<RejectReason>)]
        reason: RejectReason,
        #[arg(long)]
        note: String,
        #[command(flatten)]
        key: Key,
    },
}

#[derive(Subcommand, Debug)]
enum HookCommand {
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
        #[arg(long, env = "HANDOFF_ID")]
        id: String,
    },
    /// Adds the hooks to a harness's settings, keeping every other entry (or --uninstall);
    /// --project DIR: DIR/.claude/settings.json, DIR/.codex/config.toml.
    Install(InstallArgs),
}

/// What `hook install` and `mcp install` take.
#[derive(clap::Args, Debug)]
struct InstallArgs {
    #[arg(value_parser = parse_harness)]
    harness: hook::install::Harness,
    /// The project's settings instead of the user's.
    #[arg(long, value_name = "DIR")]
    project: Option<std::path::PathBuf>,
    /// Remove exactly what install added.
    #[arg(long)]
    uninstall: bool,
}

#[derive(Subcommand, Debug)]
enum McpCommand {
    /// Adds the server to a harness's own MCP settings, keeping every other entry (or
    /// --uninstall): Claude Code's ~/.claude.json (--project DIR: DIR/.mcp.json), Codex's
    /// config.toml.
    Install(InstallArgs),
}

fn parse_harness(word: &str) -> Result<hook::install::Harness, String> {
    match word {
        "claude-code" => Ok(hook::install::Harness::ClaudeCode),
        "codex" => Ok(hook::install::Harness::Codex),
        _ => Err(format!("{word}: one of claude-code, codex")),
    }
}

/// `NAME=signed-in|signed-out|unchecked`.
fn parse_runtime(word: &str) -> Result<Runtime, String> {
    let (name, state) = word.split_once('=').ok_or_else(|| format!("{word}: NAME=signed-in, NAME=signed-out or NAME=unchecked"))?;
    let signed_in = match state {
        "signed-in" => Some(true),
        "signed-out" => Some(false),
        "unchecked" => None,
        _ => return Err(format!("{state}: one of signed-in, signed-out, unchecked")),
    };
    Ok(Runtime { name: name.to_string(), version: None, signed_in })
}

/// `ID=LABEL` of `handoff ask --option`.
fn parse_choice(word: &str) -> Result<Choice, String> {
    let (id, label) = word.split_once('=').ok_or_else(|| format!("{word}: ID=LABEL"))?;
    Ok(Choice { id: id.to_string(), label: label.to_string() })
}

/// Reads a word the way the API spells it (`needs-you`, `missing_context`, `high`).
fn parse_serde<T: serde::de::DeserializeOwned>(word: &str) -> Result<T, String> {
    serde_json::from_value(Value::String(word.to_string())).map_err(|_| format!("not one of the API's values: {word}"))
}

/// Why a command stopped before it succeeded.
#[derive(Debug)]
enum Failure {
    Api(Error),
    /// A command line the API was never asked about (exit 2).
    Usage(String),
    /// No credential to send or mint with (exit 3).
    Credential(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Api(e)
    }
}

fn main() {
    let cli = Cli::parse();
    let json = cli.json;
    let code = match run(cli) {
        Ok(()) => EXIT_OK,
        Err(Failure::Api(error)) => {
            if let (true, Error::Refused(r)) = (json, &error) {
                println!("{}", output::escape_json(&r.body.to_string()));
            }
            eprintln!("{}", output::escape(&output::error_line(&error), false));
            output::exit_code(&error)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("usage: {}", output::escape(&message, false));
            EXIT_USAGE
        }
        Err(Failure::Credential(message)) => {
            eprintln!("auth: {}", output::escape(&message, false));
            EXIT_AUTH_OR_NETWORK
        }
    };
    std::process::exit(code);
}

/// Prints the API's JSON with `--json`, the human lines otherwise.
struct Out {
    json: bool,
}

impl Out {
    fn emit<T>(&self, reply: &Reply<T>, lines: impl IntoIterator<Item = String>) {
        if self.json {
            println!("{}", output::escape_json(&reply.body.to_string()));
        } else {
            say(lines);
        }
    }
}

/// Prints human lines, each escaped (nothing from the service reaches the terminal raw).
fn say(lines: impl IntoIterator<Item = String>) {
    for line in lines {
        println!("{}", output::escape(&line, false));
    }
}

/// Prints a multi-line text from the service (a briefing, a package), escaped as a block.
fn say_block(text: &str) {
    let text = output::escape(text, true);
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
}

/// The hook commands: a harness's hooks always exit 0 and print nothing; `flush` and
/// `install` are run by a person and say what they did.
fn hook_command(command: &HookCommand, url: &str, token: Option<&str>) -> Result<(), Failure> {
    match command {
        HookCommand::ClaudeCode => hook::claude_code(url, token),
        HookCommand::Codex { notification } => hook::codex(url, token, notification.last().cloned()),
        HookCommand::Flush { id } => {
            let Some(session) = hook::session("flush", url, token, Some(id)) else {
                return Err(Failure::Credential("no token: set HANDOFF_TOKEN to the session's machine token".into()));
            };
            let spool = hook::spool::Spool::open(&session.dir, id).map_err(|e| Failure::Usage(format!("the spool: {e}")))?;
            let done = session.deliver(&spool).map_err(|e| Failure::Usage(format!("the spool: {e}")))?;
            println!("delivered {}, dropped {}, left {} (log: {})", done.sent, done.dropped, done.left, session.dir.join("hook.log").display());
            if done.left > 0 {
                std::process::exit(EXIT_AUTH_OR_NETWORK);
            }
        }
        HookCommand::Install(InstallArgs { harness, project, uninstall }) => {
            let files = hook::install_settings(*harness, project.as_deref(), *uninstall).map_err(Failure::Usage)?;
            let verb = if *uninstall { "removed from" } else { "installed in" };
            for (path, changed) in files {
                if changed {
                    println!("hooks {verb} {}", path.display());
                } else {
                    println!("nothing to change in {}", path.display());
                }
            }
            match (harness, *uninstall) {
                (hook::install::Harness::Codex, false) => println!("{}", hook::install::CODEX_TRUST_STEP),
                (hook::install::Harness::ClaudeCode, false) => println!("{}", hook::install::CLAUDE_CODE_MODE_STEP),
                (_, true) => {}
            }
        }
    }
    Ok(())
}

fn mcp_command(command: Option<&McpCommand>) -> Result<(), Failure> {
    match command {
        None => {
            let (url, id, token) = handoff_cli::mcp::from_env(&|k| std::env::var(k).ok()).map_err(Failure::Usage)?;
            let code = handoff_cli::mcp::serve(&url, &id, &token);
            if code != 0 {
                std::process::exit(code);
            }
        }
        Some(McpCommand::Install(InstallArgs { harness, project, uninstall })) => {
            let (path, changed) = handoff_cli::mcp::install::install_settings(*harness, project.as_deref(), *uninstall).map_err(Failure::Usage)?;
            let verb = if *uninstall { "removed from" } else { "installed in" };
            if changed {
                println!("the handoff MCP server {verb} {}", path.display());
            } else {
                println!("nothing to change in {}", path.display());
            }
        }
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), Failure> {
    let out = Out { json: cli.json };
    if let Command::Token { owner, machine, ttl } = &cli.command {
        return token(&out, owner, machine.as_deref(), *ttl);
    }
    let env = |k: &str| std::env::var(k).ok();
    if let Command::Hook(command) = &cli.command {
        // A hook never fails out loud: a token file it cannot read is no token, and it logs so.
        let token = cli.token.clone().filter(|t| !t.is_empty()).or_else(|| handoff_cli::client::token_from_env(&env).ok().flatten());
        return hook_command(command, &cli.url, token.as_deref());
    }
    if let Command::Mcp { command } = &cli.command {
        return mcp_command(command.as_ref());
    }
    handoff_cli::client::check_url(&cli.url, cli.insecure_http).map_err(Failure::Usage)?;
    if cli.insecure_http {
        // The hooks and the MCP server a launched harness starts read the same permission.
        std::env::set_var(handoff_cli::client::ENV_INSECURE_HTTP, "1");
    }
    if let Command::Serve(args) = &cli.command {
        let code = handoff_cli::serve::run(&cli.url, cli.token.clone().or_else(|| std::env::var("HANDOFF_TOKEN").ok()), args);
        if code != EXIT_OK {
            std::process::exit(code);
        }
        return Ok(());
    }
    let token = match cli.token.clone().filter(|t| !t.is_empty()) {
        Some(token) => Some(token),
        None => handoff_cli::client::token_from_env(&env).map_err(Failure::Credential)?,
    };
    let Some(token) = token.as_deref() else {
        return Err(Failure::Credential("no token: set HANDOFF_TOKEN or HANDOFF_TOKEN_FILE, or pass --token (see `handoff token`)".into()));
    };
    let client = Client::new(&cli.url, Some(token)).with_insecure_http(cli.insecure_http);
    let keyed = |key: &Key| client.clone().with_idempotency_key(key.idempotency_key.as_deref());
    match cli.command {
        Command::Token { .. } => unreachable!("answered above"),
        Command::Create { session, machine, size, prompt, key } => {
            let reply = keyed(&key).create_saying(&session, &machine, &size, prompt.words()?.as_deref())?;
            out.emit(&reply, output::created_lines(&reply.value));
        }
        Command::List { state } => {
            let reply = client.list_all(state)?;
            if reply.value.is_empty() && !out.json {
                eprintln!("no hand-offs");
            }
            out.emit(&reply, reply.value.iter().flat_map(output::row_lines));
        }
        Command::Show { id, question: true } => {
            let reply = client.get(&id)?;
            match output::question_whole(&reply.value) {
                Some(whole) if !out.json => say_block(&whole),
                Some(_) => out.emit(&reply, []),
                None => return Err(Failure::Usage(format!("show --question: {id} has no question"))),
            }
        }
        Command::Show { id, question: false } => {
            let reply = client.get(&id)?;
            out.emit(&reply, output::show_lines(&reply.value));
        }
        Command::Turn { id, after, to, objective, purpose, note, prompt, key } => {
            let words = prompt.words()?;
            let after = match after {
                Some(n) => n,
                None => client.get(&id)?.value.turn,
            };
            let handoff = to.map(|runtime| PackageRequest {
                runtime,
                objective: objective.unwrap_or_default(),
                purpose: purpose.unwrap_or_default(),
                note,
            });
            let reply = keyed(&key).open_turn_saying(&id, after, words.as_deref(), handoff.as_ref())?;
            out.emit(&reply, [output::opened_line(&reply.value)]);
        }
        Command::Cancel { id, turn, key } => {
            let reply = keyed(&key).cancel(&id, turn)?;
            out.emit(&reply, [output::cancelled_line(&reply.value)]);
        }
        Command::Close { id, key } => {
            let reply = keyed(&key).close(&id)?;
            out.emit(&reply, [output::closed_line(&reply.value)]);
        }
        Command::Erase { id, key } => match keyed(&key).erase(&id) {
            Ok(reply) => out.emit(&reply, [format!("erased {id}")]),
            // The service answers "not there" and "not yours" alike, so a retried erase whose
            // first answer was lost ends here too: nothing is left to erase either way.
            Err(e) if e.code().map(handoff_cli::ErrorCode::as_str) == Some("handoff.not_found") => {
                let reply = Reply { status: 404, body: e.refusal().map_or(serde_json::Value::Null, |r| r.body.clone()), value: () };
                out.emit(&reply, [format!("nothing to erase: {id} is not there (erased already, or not yours)")]);
            }
            Err(e) => return Err(e.into()),
        },
        Command::Wait { id, after, follow, timeout } => wait(&out, &client, &id, after, follow, timeout)?,
        Command::Turns { id } => {
            let reply = client.turns(&id)?;
            out.emit(&reply, reply.value.iter().flat_map(output::lineage_lines));
        }
        Command::Report {
            id,
            turn,
            status,
            summary,
            unmet,
            context_used,
            context_window,
            quota_remaining,
            provider_limit,
            key,
        } => {
            let usage = Usage {
                context_used,
                context_window,
                quota_remaining,
                limit: provider_limit.then_some(Limit::ProviderLimit),
            };
            let report = ReportInput { turn, status, summary, unmet, usage: (usage != Usage::default()).then_some(usage), question: None, runtime: None, permission_mode: None };
            let reply = keyed(&key).report(&id, &report)?;
            out.emit(&reply, output::reported_lines(&reply.value));
        }
        Command::Workspace { id, git, key } => {
            if !git {
                return Err(Failure::Usage("workspace needs --git: the file counts come from `git diff --numstat HEAD`".into()));
            }
            let dir = std::env::current_dir().map_err(|e| Failure::Usage(format!("the current folder: {e}")))?;
            let files = handoff_cli::git::numstat(&dir).map_err(Failure::Usage)?;
            let reply = keyed(&key).workspace(&id, &files)?;
            let count = files.len();
            let noun = if count == 1 { "file" } else { "files" };
            out.emit(&reply, [format!("{count} {noun} sent; {}", output::item_line(&reply.value))]);
        }
        Command::Decide { id, statement, rationale, evidence, supersedes, key } => {
            let reply = keyed(&key).decide(&id, &DecisionInput { statement, rationale, evidence, supersedes })?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Artifact { id, kind, title, uri, sha256, key } => {
            let reply = keyed(&key).artifact(&id, &ArtifactInput { kind, title, uri, sha256 })?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Block { id, severity, title, key } => {
            let reply = keyed(&key).block(&id, &BlockerInput { severity, title })?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Resolve { id, blocker, key } => {
            let reply = keyed(&key).resolve_blocker(&id, &blocker)?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Work { id, title, goal, task_type, priority, constraints, criteria, key } => {
            let work = WorkInput { title, goal, task_type, priority, constraints, acceptance_criteria: criteria };
            let reply = keyed(&key).put_work(&id, &work)?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Policy { id, runtimes, context_threshold_pct, quota_threshold, key } => {
            let reply = keyed(&key).put_policy(&id, &Policy { runtimes, context_threshold_pct, quota_threshold })?;
            out.emit(&reply, [output::item_line(&reply.value)]);
        }
        Command::Runtimes { id, detect, runtimes, key } => {
            if !detect && runtimes.is_empty() {
                return Err(Failure::Usage("runtimes: --detect, or --runtime NAME=STATE for each runtime".into()));
            }
            let runtimes = if detect { handoff_cli::detect::detect(std::env::var("PATH").ok().as_deref()) } else { runtimes };
            let reply = keyed(&key).put_runtimes(&id, &RuntimesInput { runtimes, checked_at: None })?;
            out.emit(&reply, output::runtimes_lines(&reply.value));
        }
        Command::Launch { id, runtime, budget, print, dry_run, runtime_args } => {
            let mode = if print { Mode::Print } else { Mode::Interactive };
            let request = Request { id, runtime, budget_bytes: budget, mode, dry_run, extra: runtime_args };
            let code = launch::run::launch(&cli.url, token, &request, out.json).map_err(|e| match e {
                LaunchError::Api(e) => Failure::Api(e),
                LaunchError::Refused(r) => Failure::Usage(format!("launch: {r}")),
                LaunchError::Setup(s) => Failure::Usage(format!("launch: {s}")),
            })?;
            if code != EXIT_OK {
                std::process::exit(code);
            }
        }
        Command::Hook(_) | Command::Mcp { .. } | Command::Serve(_) => unreachable!("answered above"),
        Command::Package(p) => package(&out, &client, p)?,
        Command::Ask { id, turn, text, options, kind, wait, key } => {
            let wait_s = wait.unwrap_or_else(|| handoff_cli::ask::answer_wait_s(&|k| std::env::var(k).ok()));
            let question = QuestionInput { kind, text, input: None, options };
            let report = ReportInput { turn, status: ReportStatus::NeedsYou, summary: None, unmet: None, usage: None, question: Some(question), runtime: None, permission_mode: None };
            let asked = keyed(&key).report(&id, &report)?;
            let Some(q) = asked.value.question.clone() else {
                return Err(Failure::Usage("ask: the service did not keep the question".into()));
            };
            eprintln!("asked {} on turn {} (v{}); waiting up to {wait_s} s for the answer", q.id, q.turn, asked.value.version);
            let deadline = Instant::now() + Duration::from_secs(wait_s);
            match handoff_cli::ask::wait_for_answer(&client, &id, &q.id, asked.value.version, deadline) {
                handoff_cli::ask::Waited::Answered(answer, record) => {
                    if out.json {
                        println!("{}", output::escape_json(&json!({ "handoff": record }).to_string()));
                    } else {
                        say([answer.option.clone()]);
                        if let Some(note) = &answer.note {
                            eprintln!("{}", output::escape(&format!("note: {note}"), false));
                        }
                    }
                }
                handoff_cli::ask::Waited::Withdrawn => {
                    eprintln!("no answer: {} was withdrawn", q.id);
                    std::process::exit(output::EXIT_NO_ANSWER);
                }
                handoff_cli::ask::Waited::TimedOut => {
                    eprintln!("no answer within {wait_s} s");
                    std::process::exit(output::EXIT_NO_ANSWER);
                }
            }
        }
        Command::Answer { id, option, note, question, key } => {
            let question = match question {
                Some(q) => q,
                None => confirm_answer(&client, &id, &option)?,
            };
            let reply = keyed(&key).answer(&id, &AnswerInput { question, option, note })?;
            out.emit(&reply, [output::answered_line(&reply.value)]);
        }
        Command::Briefing { id, budget, reach } => {
            let reply = client.briefing(&id, budget, reach)?;
            // Plain text is what the API sends; --json has no JSON to print and prints it as is.
            say_block(&reply.value);
        }
    }
    Ok(())
}

/// `answer` without `--question`: on a terminal, the open question whole and a yes to answer
/// exactly it; with no terminal, a refusal naming the flag (the question open when the
/// answer arrives may not be the one the person read).
fn confirm_answer(client: &Client, id: &str, option: &str) -> Result<String, Failure> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Failure::Usage(output::answer_needs_question(id)));
    }
    let record = client.get(id)?.value;
    // No question open: the service answers question.none (or that it was answered).
    let Some(q) = record.question.clone().filter(|q| q.is_open()) else { return Ok(String::new()) };
    let mut lines = output::confirm_answer_lines(&q, option);
    let ask = lines.pop().unwrap_or_default();
    for line in lines {
        eprintln!("{}", output::escape(&line, false));
    }
    eprint!("{}", output::escape(&ask, false));
    let _ = std::io::stderr().flush();
    let mut reply = String::new();
    std::io::stdin().read_line(&mut reply).map_err(|e| Failure::Usage(format!("answer: {e}")))?;
    if !output::is_yes(&reply) {
        return Err(Failure::Usage(format!("answer: not confirmed; {} is not answered", q.id)));
    }
    Ok(q.id)
}

fn token(out: &Out, owner: &str, machine: Option<&str>, ttl_s: i64) -> Result<(), Failure> {
    let key = std::env::var("HANDOFF_SIGNING_KEY").unwrap_or_default();
    if key.is_empty() {
        return Err(Failure::Credential("HANDOFF_SIGNING_KEY is not set: refusing to mint a token without it".into()));
    }
    if !handoff_api::input::is_id(owner) {
        return Err(Failure::Usage("--owner: 1-128 characters of [A-Za-z0-9._:-]".into()));
    }
    if ttl_s <= 0 {
        return Err(Failure::Usage("--ttl: a positive number of seconds".into()));
    }
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let token = match machine {
        Some(hid) if handoff_api::input::is_handoff_id(hid) => handoff_api::token::machine_token(owner, hid, key.as_bytes(), now_s),
        Some(_) => return Err(Failure::Usage("--machine: a hand-off id (ho_ and 32 hexadecimal digits)".into())),
        None => handoff_api::token::owner_token(owner, ttl_s, key.as_bytes(), now_s),
    };
    if out.json {
        println!("{}", json!({"token": token}));
    } else {
        println!("{token}");
    }
    Ok(())
}

fn package(out: &Out, client: &Client, p: PackageCommand) -> Result<(), Failure> {
    let keyed = |key: &Key| client.clone().with_idempotency_key(key.idempotency_key.as_deref());
    match p.action {
        None => {
            // clap has checked these are present: they are required unless a subcommand is given.
            let missing = || Failure::Usage("package needs ID --objective --purpose --runtime".into());
            let id = p.id.ok_or_else(missing)?;
            let request = PackageRequest {
                objective: p.objective.ok_or_else(missing)?,
                purpose: p.purpose.ok_or_else(missing)?,
                runtime: p.runtime.ok_or_else(missing)?,
                note: p.note,
            };
            let reply = keyed(&p.key).package(&id, &request, p.dry_run)?;
            out.emit(&reply, [output::compiled_line(&reply.value, p.dry_run)]);
        }
        Some(PackageAction::Show { id, markdown: true }) => {
            let reply = client.package_markdown(&id)?;
            say_block(&reply.value);
        }
        Some(PackageAction::Show { id, markdown: false }) => {
            let reply = client.package_latest(&id)?;
            out.emit(&reply, output::latest_lines(&reply.value));
        }
        Some(PackageAction::Accept { id, hash, key }) => {
            let (version, hash) = match hash {
                Some(h) => (None, h),
                None => {
                    // Accept what the person saw: show the current package first, then accept
                    // exactly that hash (a newer one in between is refused as package.stale).
                    let latest = client.package_latest(&id)?;
                    if !out.json {
                        say(output::latest_lines(&latest.value));
                    }
                    (Some(latest.value.package_version), latest.value.package_hash)
                }
            };
            let reply = keyed(&key).accept(&id, &hash)?;
            let version = reply.body["package_version"].as_u64().or(version).unwrap_or_default();
            out.emit(&reply, [output::accepted_line(version, &hash)]);
        }
        Some(PackageAction::Reject { id, reason, note, key }) => {
            let reply = keyed(&key).reject(&id, reason, &note)?;
            let version = reply.body["package_version"].as_u64().unwrap_or_default();
            let hash = reply.body["package_hash"].as_str().unwrap_or_default().to_string();
            out.emit(&reply, [output::rejected_line(version, &hash, reason)]);
        }
    }
    Ok(())
}

/// `wait`: one version. `wait --follow`: every version until the hand-off closes; on a
/// terminal a waiting line counts the time since the last change, in a pipe only the version
/// lines are written (one JSON document a line with `--json`).
fn wait(out: &Out, client: &Client, id: &str, after: Option<u64>, follow: bool, timeout_s: Option<u64>) -> Result<(), Failure> {
    if timeout_s.is_some_and(|s| s == 0 || s > WAIT_TIMEOUT_S_MAX) {
        return Err(Failure::Usage(format!("--timeout: 1 to {WAIT_TIMEOUT_S_MAX} seconds")));
    }
    let after = match after {
        Some(v) => v,
        None => {
            let now = client.get(id)?;
            if follow {
                // Where it stands now, then every change from here.
                out.emit(&now, output::follow_lines(&now.value));
            }
            now.value.version
        }
    };
    if !follow {
        let reply = client.wait(id, after, timeout_s.unwrap_or(handoff_core::limits::WAIT_TIMEOUT_S_DEFAULT))?;
        out.emit(&reply, output::follow_lines(&reply.value));
        return Ok(());
    }
    let ticker = std::io::stdout().is_terminal().then(|| Ticker::start(after));
    let result = client.follow(id, after, timeout_s.unwrap_or(FOLLOW_WAIT_S), |reply| {
        let print = || {
            out.emit(reply, output::follow_lines(&reply.value));
            let _ = std::io::stdout().flush();
        };
        match &ticker {
            Some(t) => t.between_lines(reply.value.version, print),
            None => print(),
        }
        ControlFlow::Continue(())
    });
    if let Some(t) = ticker {
        t.stop();
    }
    result?;
    Ok(())
}

/// The waiting line of a terminal: redrawn every [`TICK_MS`] on a thread, erased whenever a
/// version line is printed. One mutex orders both writers.
struct Ticker {
    state: Arc<Mutex<Tick>>,
    thread: std::thread::JoinHandle<()>,
}

struct Tick {
    since: Instant,
    version: u64,
    stopped: bool,
}

const ERASE_LINE: &str = "\r\x1b[2K";

impl Ticker {
    fn start(version: u64) -> Ticker {
        let state = Arc::new(Mutex::new(Tick { since: Instant::now(), version, stopped: false }));
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let mut drawn = String::new();
            loop {
                std::thread::sleep(Duration::from_millis(TICK_MS));
                let tick = shared.lock().unwrap_or_else(|p| p.into_inner());
                if tick.stopped {
                    return;
                }
                // Redrawn only when the text changes, so a slow terminal is not flooded.
                let line = output::waiting_line(tick.version, tick.since.elapsed());
                if line != drawn {
                    let mut stdout = std::io::stdout().lock();
                    let _ = write!(stdout, "{ERASE_LINE}{line}");
                    let _ = stdout.flush();
                    drawn = line;
                }
            }
        });
        Ticker { state, thread }
    }

    fn between_lines(&self, version: u64, print: impl FnOnce()) {
        let mut tick = self.state.lock().unwrap_or_else(|p| p.into_inner());
        print!("{ERASE_LINE}");
        print();
        tick.since = Instant::now();
        tick.version = version;
    }

    fn stop(self) {
        {
            let mut tick = self.state.lock().unwrap_or_else(|p| p.into_inner());
            tick.stopped = true;
            print!("{ERASE_LINE}");
            let _ = std::io::stdout().flush();
        }
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("handoff").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn package_takes_an_id_and_flags_or_a_subcommand() {
        let p = |args: &[&str]| match parse(args).unwrap().command {
            Command::Package(p) => p,
            other => panic!("{other:?}"),
        };
        let compile = p(&["package", "ho_1", "--objective", "o", "--purpose", "p", "--runtime", "codex", "--dry-run"]);
        assert!(compile.action.is_none() && compile.dry_run);
        assert!(matches!(p(&["package", "show", "ho_1", "--markdown"]).action, Some(PackageAction::Show { markdown: true, .. })));
        assert!(matches!(p(&["package", "accept", "ho_1"]).action, Some(PackageAction::Accept { hash: None, .. })));
        let reject = p(&["package", "reject", "ho_1", "--reason", "missing_context", "--note", "n"]).action;
        assert!(matches!(reject, Some(PackageAction::Reject { reason: RejectReason::MissingContext, .. })));
        assert!(parse(&["package", "ho_1", "--objective", "o"]).is_err(), "purpose and runtime are required");
    }

    #[test]
    fn usage_errors_exit_2_and_help_exits_0() {
        for bad in [
            &["report", "ho_1", "--turn", "1", "--status", "sleeping"][..],
            &["turn", "ho_1", "--to", "codex"],
            &["turn", "ho_1", "--objective", "o"],
            &["policy", "ho_1", "--runtime", "codex", "--context-threshold-pct", "100"],
            &["frobnicate"],
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), EXIT_USAGE, "{bad:?}");
        }
        assert_eq!(parse(&["--help"]).unwrap_err().exit_code(), EXIT_OK);
    }

    #[test]
    fn report_reads_statuses_as_the_api_spells_them_and_unmet_as_a_list() {
        let cli = parse(&["report", "ho_1", "--turn", "2", "--status", "needs-you", "--unmet", "0,2", "--json"]).unwrap();
        assert!(cli.json);
        let Command::Report { status, unmet, .. } = cli.command else { panic!() };
        assert_eq!(status, ReportStatus::NeedsYou);
        assert_eq!(unmet, Some(vec![0, 2]));
    }

    #[test]
    fn global_flags_go_anywhere_and_the_key_is_optional() {
        let cli = parse(&["close", "ho_1", "--url", "http://x", "--token", "t", "--idempotency-key", "k1"]).unwrap();
        assert_eq!((cli.url.as_str(), cli.token.as_deref()), ("http://x", Some("t")));
        let Command::Close { key, .. } = cli.command else { panic!() };
        assert_eq!(key.idempotency_key.as_deref(), Some("k1"));
    }
}
