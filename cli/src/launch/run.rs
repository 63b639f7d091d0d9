//! `handoff launch`, the half that does I/O: reads the hand-off and what briefs it, accepts
//! the package, installs the runtime's hooks, starts the runtime with the prompt and the
//! session's variables, and afterwards records what a session without network left.
//!
//! In order: read the record and the package (or the work record) → find the program → install
//! the hooks → accept → read the briefing → log and print → start → wait → record. A dry run
//! stops after reading and prints the plan: it accepts nothing, writes nothing, starts nothing.

use super::*;
use crate::client::{ArtifactInput, BlockerInput, Client, DecisionInput, Error, OfferState, ReportInput};
use crate::hook::{self, Log};
use handoff_api::error::Code;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// A file named by an `Artifact:` line is hashed only up to this size.
pub const ARTIFACT_HASH_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// A launch as the command line asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: String,
    /// The runtime to start; the one the turn was handed to when `None`.
    pub runtime: Option<String>,
    pub budget_bytes: Option<u32>,
    pub mode: Mode,
    pub dry_run: bool,
    /// Arguments passed to the runtime as they are.
    pub extra: Vec<String>,
}

/// Why a launch stopped before the runtime started, or could not record what it left.
#[derive(Debug)]
pub enum LaunchError {
    /// The API refused, or could not be reached.
    Api(Error),
    /// The hand-off cannot be launched as asked.
    Refused(Refused),
    /// This machine is not ready: the program is missing, the hooks could not be installed.
    Setup(String),
}

impl From<Error> for LaunchError {
    fn from(e: Error) -> Self {
        LaunchError::Api(e)
    }
}

impl From<Refused> for LaunchError {
    fn from(r: Refused) -> Self {
        LaunchError::Refused(r)
    }
}

/// What briefs the turn, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Package { package: PackageRef, accepted: bool },
    Work(Box<WorkRecord>),
}

/// Everything read before anything is accepted or started.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub handoff: Handoff,
    pub target: Target,
    pub budget_bytes: u32,
    pub source: Source,
}

impl Prepared {
    pub fn package(&self) -> Option<&PackageRef> {
        match &self.source {
            Source::Package { package, .. } => Some(package),
            Source::Work(_) => None,
        }
    }
}

/// Reads the hand-off, decides which turn is launched, and reads what briefs it: the latest
/// package (its version, hash and whether it is accepted) or the work record.
pub fn prepare(client: &Client, id: &str, runtime: Option<&str>, budget: Option<u32>) -> Result<Prepared, LaunchError> {
    let handoff = client.get(id)?.value;
    let target = target(&handoff, runtime)?;
    let budget_bytes = budget_bytes(target.runtime, budget)?;
    let source = if target.from_package {
        let latest = client.package_latest(id)?.value;
        let package = PackageRef { version: latest.package_version, hash: latest.package_hash };
        Source::Package { package, accepted: latest.state == OfferState::Accepted }
    } else {
        Source::Work(Box::new(client.work(id)?.value))
    };
    Ok(Prepared { handoff, target, budget_bytes, source })
}

/// Accepts exactly the package that was read, unless it was accepted already; answers whether
/// it accepted now. A package that moved since is refused by the API with `package.stale`.
/// Once accepted, the package of this turn cannot move (a compile is refused).
pub fn accept(client: &Client, prepared: &Prepared) -> Result<bool, Error> {
    match &prepared.source {
        Source::Package { package, accepted: false } => {
            client.accept(&prepared.handoff.id, &package.hash)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The briefing at the launch's budget: the API's rendering of the package for what the
/// runtime can reach, or the work record's.
pub fn briefing(client: &Client, prepared: &Prepared) -> Result<String, LaunchError> {
    match &prepared.source {
        Source::Package { .. } => {
            let reach = prepared.target.runtime.reach();
            Ok(client.briefing(&prepared.handoff.id, Some(prepared.budget_bytes), Some(reach))?.value)
        }
        Source::Work(work) => Ok(work_briefing(&prepared.handoff, work, prepared.budget_bytes)?),
    }
}

/// The plan a launch carries out, as `--json` gives it.
pub fn plan_json(prompt: &str, command: &CommandLine, package: Option<&PackageRef>) -> Value {
    json!({
        "prompt": prompt,
        "command": command.argv(),
        "env_names": ENV_NAMES,
        "package": package.map(|p| json!({"version": p.version, "hash": p.hash})),
    })
}

/// Where Codex's exec writes its final message for the launcher to read.
pub fn last_message_path(state_dir: &Path, id: &str, turn: u64) -> PathBuf {
    state_dir.join("launch").join(format!("{id}-turn-{turn}.last-message.txt"))
}

/// `handoff launch`: answers the exit code to leave with (the runtime's own once it started).
pub fn launch(url: &str, token: &str, request: &Request, json_out: bool) -> Result<i32, LaunchError> {
    let client = Client::new(url, Some(token));
    let prepared = prepare(&client, &request.id, request.runtime.as_deref(), request.budget_bytes)?;
    let (runtime, turn, id) = (prepared.target.runtime, prepared.target.turn, prepared.handoff.id.clone());
    let env = |k: &str| std::env::var(k).ok();
    let state_dir = hook::state_dir(&env);
    let last_message =
        (runtime == Runtime::Codex && request.mode == Mode::Print).then(|| last_message_path(&state_dir, &id, turn));
    let last_message_arg = last_message.as_ref().map(|p| p.to_string_lossy().into_owned());
    let paragraph = access_paragraph(runtime, &id, turn);
    // The `handoff mcp` server the session records through is this program.
    let server = std::env::current_exe().map_err(|e| LaunchError::Setup(format!("where is this program? {e}")))?;
    let server = server.to_string_lossy().into_owned();
    let briefed = briefed_line(prepared.package());

    if request.dry_run {
        let prompt = prompt(&briefing(&client, &prepared)?, &paragraph);
        let command =
            command_line(runtime, request.mode, &prompt, last_message_arg.as_deref(), &server, &request.extra);
        if json_out {
            println!("{}", crate::output::escape_json(&plan_json(&prompt, &command, prepared.package()).to_string()));
        } else {
            println!("{briefed}");
            println!("dry run: nothing accepted, nothing started");
            println!("env: {}", ENV_NAMES.join(" "));
            println!("command: {}", crate::output::escape(&command.display(), false));
            println!("prompt:\n{}", crate::output::escape(&prompt, true));
        }
        return Ok(crate::output::EXIT_OK);
    }

    // The hand-off's lock on this machine, held for the turn: a running `handoff serve` (or
    // another launch) and this one never run the same turn.
    let _lock = crate::serve::state::lock(&state_dir, &id).map_err(LaunchError::Setup)?;
    let path_var = std::env::var("PATH").ok();
    let program = crate::detect::find(runtime.program(), path_var.as_deref()).ok_or_else(|| {
        LaunchError::Setup(format!("{} is not on PATH: install {} first", runtime.program(), runtime.name()))
    })?;
    // A work record with nothing to brief from is refused before anything is written.
    let from_work = match &prepared.source {
        Source::Work(_) => Some(briefing(&client, &prepared)?),
        Source::Package { .. } => None,
    };
    let files = hook::install_settings(runtime.harness(), None, false).map_err(LaunchError::Setup)?;
    let log = Log::new(&state_dir, "launch", Some(&id));
    let settings: Vec<String> = files.iter().map(|(path, _)| path.display().to_string()).collect();
    log.line(&format!("hooks of {} in {}", runtime.name(), settings.join(" and ")));
    if accept(&client, &prepared)? {
        if let Some(p) = prepared.package() {
            log.line(&format!("accepted package v{} ({})", p.version, p.hash));
        }
    }
    let text = match from_work {
        Some(text) => text,
        None => briefing(&client, &prepared)?,
    };
    let prompt = prompt(&text, &paragraph);
    let command = command_line(runtime, request.mode, &prompt, last_message_arg.as_deref(), &server, &request.extra);
    log.line(&format!("{briefed} for {} on turn {turn}", runtime.name()));
    if json_out {
        eprintln!("{briefed}");
        println!("{}", crate::output::escape_json(&plan_json(&prompt, &command, prepared.package()).to_string()));
    } else {
        println!("{briefed}");
    }

    let cwd = std::env::current_dir().map_err(|e| LaunchError::Setup(format!("the current folder: {e}")))?;
    let notes = cwd.join(NOTES_FILE);
    let notes_before = read_or_empty(&notes);
    if let Some(file) = &last_message {
        let _ = std::fs::remove_file(file);
        if let Some(dir) = file.parent() {
            crate::private::dir(dir.parent().unwrap_or(dir))
                .and_then(|()| crate::private::dir(dir))
                .map_err(|e| LaunchError::Setup(format!("{}: {e}", dir.display())))?;
        }
    }
    if runtime == Runtime::ClaudeCode {
        log.line(&format!(
            "claude-code runs in permission mode {CLAUDE_CODE_PERMISSION_MODE}: the {CLAUDE_CODE_ALLOW_RULE} rule lets the session record, \
             and any other tool that needs permission is asked (of the owner through the hooks, then at the terminal)"
        ));
    }
    let started_ms = hook::now_ms();
    log.line(&format!("started {}", command.display()));
    // The state folder goes down by name too, so that the hooks and the MCP server (which Codex
    // passes only named variables) keep their state, and its marker, where this launcher reads.
    let state = state_dir.to_string_lossy().into_owned();
    // The token goes down as a 0600 file, never as a variable: the harness's shell would hand
    // a variable to every command the model runs.
    let token_path = token_file(&state_dir, &id);
    crate::client::write_token_file(&token_path, token)
        .map_err(|e| LaunchError::Setup(format!("{}: {e}", token_path.display())))?;
    let token_path = token_path.to_string_lossy().into_owned();
    let status = start(
        &program,
        &command,
        request.mode,
        &[(ENV_URL, url), (ENV_ID, &id), (ENV_TOKEN_FILE, &token_path), (ENV_STATE_DIR, &state)],
    )
    .map_err(|e| LaunchError::Setup(format!("{}: {e}", program.display())))?;
    let code = exit_code_of(status);
    log.line(&format!("{} exited {}", runtime.program(), describe_exit(status)));

    if !runtime.has_network() {
        // The session recorded through the MCP server (outside its sandbox) when the server
        // served it during this run; otherwise the launcher records what it left.
        let final_message = last_message.as_ref().and_then(|f| std::fs::read_to_string(f).ok());
        let left = read_left(&notes_before, &read_or_empty(&notes), final_message.as_deref());
        let served = crate::mcp::served_since(&state_dir, &id).is_some_and(|at| at >= started_ms);
        if served {
            log.line(&format!("{} recorded through the {MCP_SERVER} MCP server", runtime.program()));
            let open = match client.get(&id) {
                Ok(r) => r.value.turn == turn && !r.value.status.has_ended(),
                Err(e) => {
                    // Not known to have ended: the report is sent, and a refusal is logged as one.
                    log.line(&format!(
                        "could not read turn {turn} after {} exited ({e}): reporting it anyway",
                        runtime.program()
                    ));
                    true
                }
            };
            if open {
                log.line(&format!(
                    "{} left turn {turn} open: its report is the launcher's, from its final message",
                    runtime.program()
                ));
                let report_only = Left { decisions: Vec::new(), artifacts: Vec::new(), blockers: Vec::new(), ..left };
                record_left(&client, &log, &id, turn, runtime, &report_only, status.success(), &cwd)?;
            }
        } else {
            log.line(&format!("{} did not start the {MCP_SERVER} MCP server: recording what it left in {NOTES_FILE} and its final message", runtime.program()));
            record_left(&client, &log, &id, turn, runtime, &left, status.success(), &cwd)?;
        }
    }
    if code != 0 {
        eprintln!("{} exited {}", runtime.program(), describe_exit(status));
    }
    Ok(code)
}

/// Records what a session without network left, in the order it would have recorded it:
/// decisions, artifacts and blockers, then the report that ends the turn. A report for a turn
/// that has ended already (in an interactive session Codex's `notify` hook reports each of its
/// turns) is left as it is.
#[allow(clippy::too_many_arguments)]
fn record_left(
    client: &Client,
    log: &Log,
    id: &str,
    turn: u64,
    runtime: Runtime,
    left: &Left,
    ran_ok: bool,
    cwd: &Path,
) -> Result<(), LaunchError> {
    let mut first_error: Option<Error> = None;
    let mut outcome = |what: &str, result: Result<String, Error>| match result {
        Ok(line) => {
            log.line(&format!("recorded {line} from what {} left", runtime.program()));
            println!("recorded {}", crate::output::escape(&line, false));
        }
        Err(e) => {
            log.line(&format!("could not record {what}: {e}"));
            eprintln!("could not record {what}: {}", crate::output::escape(&e.to_string(), false));
            first_error.get_or_insert(e);
        }
    };
    for statement in &left.decisions {
        let input =
            DecisionInput { statement: statement.clone(), rationale: None, evidence: Vec::new(), supersedes: None };
        outcome(
            "a decision",
            client.decide(id, &input).map(|r| format!("decision {}: {statement}", r.value.id().unwrap_or("?"))),
        );
    }
    for path in &left.artifacts {
        let title = clip(path, TITLE_BYTES_MAX).to_string();
        let input = ArtifactInput { kind: "file".into(), title, uri: path.clone(), sha256: sha256_inside(cwd, path) };
        outcome(
            "an artifact",
            client.artifact(id, &input).map(|r| format!("artifact {}: {path}", r.value.id().unwrap_or("?"))),
        );
    }
    for (severity, title) in &left.blockers {
        let input = BlockerInput { severity: *severity, title: title.clone() };
        outcome(
            "a blocker",
            client.block(id, &input).map(|r| format!("blocker {}: {title}", r.value.id().unwrap_or("?"))),
        );
    }
    let status = left.status.unwrap_or(if ran_ok { ReportStatus::Done } else { ReportStatus::Failed });
    let summary = left.summary.clone().unwrap_or_else(|| format!("{} left no final message", runtime.program()));
    let report = ReportInput {
        turn,
        status,
        summary: Some(summary),
        unmet: left.unmet.clone(),
        usage: None,
        question: None,
        runtime: None,
        permission_mode: None,
        reply: None,
        sync_mode: None,
    };
    let status_name = Status::from(status).as_str();
    match client.report(id, &report) {
        Ok(reply) => outcome("the report", Ok(format!("{status_name} for turn {turn} (v{})", reply.value.version))),
        Err(Error::Refused(r)) if r.code.is(Code::TurnFinished) || r.code.is(Code::HandoffStale) => {
            let line = format!(
                "turn {turn} had ended already, so its report stays as it was ({})",
                crate::output::refusal_line(&r)
            );
            log.line(&line);
            println!("{}", crate::output::escape(&line, false));
        }
        Err(e) => outcome("the report", Err(e)),
    }
    first_error.map_or(Ok(()), |e| Err(LaunchError::Api(e)))
}

/// The SHA-256 of `path` when it is a file inside `cwd` and not too large to read.
fn sha256_inside(cwd: &Path, path: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    let root = cwd.canonicalize().ok()?;
    let file = root.join(path).canonicalize().ok()?;
    let meta = file.metadata().ok()?;
    if !file.starts_with(&root) || !meta.is_file() || meta.len() > ARTIFACT_HASH_BYTES_MAX {
        return None;
    }
    Some(hex::encode(Sha256::digest(std::fs::read(file).ok()?)))
}

fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The runtime's exit code, or 128 and the signal that ended it, as a shell reports it.
fn exit_code_of(status: ExitStatus) -> i32 {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return 128 + signal;
    }
    status.code().unwrap_or(crate::output::EXIT_REFUSED)
}

fn describe_exit(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => code.to_string(),
        None => "on a signal".to_string(),
    }
}

/// Starts `program` as `command` says, with `vars` set and this program's folder first on
/// `PATH` (so that `handoff` in the session is this one), and waits for it. A print-mode run
/// reads nothing from standard input; an interactive one has the terminal. While it runs, a
/// Ctrl-C is the runtime's alone: the launcher outlives it to record what it left.
fn start(program: &Path, command: &CommandLine, mode: Mode, vars: &[(&str, &str)]) -> std::io::Result<ExitStatus> {
    let mut cmd = Command::new(program);
    cmd.args(&command.args);
    cmd.env_remove(ENV_TOKEN);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)) {
        let rest = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest)))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        cmd.env("PATH", path);
    }
    cmd.stdin(if mode == Mode::Print { Stdio::null() } else { Stdio::inherit() });
    wait_keeping_interrupts_for_the_child(&mut cmd)
}

#[cfg(unix)]
fn wait_keeping_interrupts_for_the_child(cmd: &mut Command) -> std::io::Result<ExitStatus> {
    use std::os::unix::process::CommandExt;
    // SAFETY: `signal` is async-signal-safe, so it may run between fork and exec; the child
    // gets the default dispositions back that the parent set aside below.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    // SAFETY: setting a disposition to SIG_IGN and restoring the one it answered.
    let (int, quit) =
        unsafe { (libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGQUIT, libc::SIG_IGN)) };
    let status = cmd.status();
    unsafe {
        libc::signal(libc::SIGINT, int);
        libc::signal(libc::SIGQUIT, quit);
    }
    status
}

#[cfg(not(unix))]
fn wait_keeping_interrupts_for_the_child(cmd: &mut Command) -> std::io::Result<ExitStatus> {
    cmd.status()
}
