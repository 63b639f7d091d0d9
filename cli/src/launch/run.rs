//! `handoff launch`, the half that does I/O: reads the hand-off and what briefs it, accepts
//! the package, installs the runtime's hooks, starts the runtime with the prompt and the
//! session's variables, and afterwards records what a session without network left.
//!
//! In order: read the record and the package (or the work record) → find the program → install
//! the hooks → accept → read the briefing → log and print → start → wait → record. A dry run
//! stops after reading and prints the plan: it accepts nothing, writes nothing, starts nothing.

use super::*;
use crate::client::{ArtifactInput, BlockerInput, Client, DecisionInput, Error, ReportInput};
use crate::hook::{self, Log};
use crate::machine::paths;
use crate::machine::turn::{
    access_paragraph, briefed_line, first_briefing, prepare, prompt, start_turn, First, Prepared, Ready, Setup,
    TurnError,
};
use handoff_api::error::Code;
use handoff_core::turn::Status;
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

/// Why a launch stopped before the runtime started, or could not record what it left: the
/// machine side's one error of a turn's start.
pub type LaunchError = TurnError;

/// The plan a launch carries out, as `--json` gives it.
pub fn plan_json(prompt: &str, command: &CommandLine, package: Option<&PackageRef>) -> Value {
    json!({
        "prompt": prompt,
        "command": command.argv(),
        "env_names": SESSION_NAMES,
        "package": package.map(|p| json!({"version": p.version, "hash": p.hash})),
    })
}

/// What a launch works with once the turn is read.
struct Launch<'a> {
    client: Client,
    request: &'a Request,
    json_out: bool,
    prepared: Prepared,
    state_dir: PathBuf,
    /// Where Codex's exec writes its final message.
    last_message: Option<PathBuf>,
    /// This program: the `handoff mcp` server the session records through.
    server: String,
}

impl Launch<'_> {
    fn runtime(&self) -> Runtime {
        self.prepared.target.runtime
    }

    fn command(&self, prompt: &str) -> CommandLine {
        let last_message = self.last_message.as_ref().map(|p| p.to_string_lossy().into_owned());
        command_line(
            self.runtime(),
            self.request.mode,
            prompt,
            last_message.as_deref(),
            &self.server,
            &self.request.extra,
        )
    }

    /// Prints the briefed line, and the plan in JSON when asked.
    fn print_plan(&self, prompt: &str) {
        let briefed = briefed_line(self.prepared.package());
        let plan = || plan_json(prompt, &self.command(prompt), self.prepared.package()).to_string();
        if self.json_out {
            if !self.request.dry_run {
                eprintln!("{briefed}");
            }
            println!("{}", crate::output::escape_json(&plan()));
        } else {
            println!("{briefed}");
        }
    }
}

/// `handoff launch`: answers the exit code to leave with (the runtime's own once it started).
pub fn launch(url: &str, token: &str, request: &Request, json_out: bool) -> Result<i32, LaunchError> {
    let client = Client::new(url, Some(token));
    let prepared = prepare(&client, &request.id, request.runtime.as_deref(), request.budget_bytes)?;
    let (runtime, turn, id) = (prepared.target.runtime, prepared.target.turn, prepared.handoff.id.clone());
    let state_dir = paths::state_dir(&|k| std::env::var(k).ok());
    let last_message =
        (runtime == Runtime::Codex && request.mode == Mode::Print).then(|| paths::last_message(&state_dir, &id, turn));
    let server = std::env::current_exe().map_err(|e| LaunchError::Setup(format!("where is this program? {e}")))?;
    let server = server.to_string_lossy().into_owned();
    let l = Launch { client, request, json_out, prepared, state_dir, last_message, server };
    if request.dry_run {
        return dry_run(&l);
    }
    // The hand-off's lock on this machine, held for the turn: a running `handoff serve` (or
    // another launch) and this one never run the same turn.
    let _lock = paths::lock(&l.state_dir, &id).map_err(LaunchError::Setup)?;
    let log = Log::new(&l.state_dir, "launch", Some(&id));
    let install = || install_hooks(runtime, &log);
    let setup = Setup { url, id: &id, token, state_dir: &l.state_dir, runtime, turn, before_accept: &install };
    let ready = start_turn(&l.client, &setup, &First::Briefed(&l.prepared))?;
    if let (true, Some(p)) = (ready.accepted, l.prepared.package()) {
        log.line(&format!("accepted package v{} ({})", p.version, p.hash));
    }
    run_and_record(&l, &log, &ready)
}

/// A dry run: the plan printed; nothing accepted, nothing written, nothing started.
fn dry_run(l: &Launch<'_>) -> Result<i32, LaunchError> {
    let (runtime, turn) = (l.runtime(), l.prepared.target.turn);
    let prompt = prompt(&first_briefing(&l.client, &l.prepared)?, &access_paragraph(runtime, &l.request.id, turn));
    l.print_plan(&prompt);
    if !l.json_out {
        println!("dry run: nothing accepted, nothing started");
        println!("env: {}", SESSION_NAMES.join(" "));
        println!("command: {}", crate::output::escape(&l.command(&prompt).display(), false));
        println!("prompt:\n{}", crate::output::escape(&prompt, true));
    }
    Ok(crate::output::EXIT_OK)
}

/// The runtime's hooks in its settings, logged.
fn install_hooks(runtime: Runtime, log: &Log) -> Result<(), String> {
    let files = hook::install_settings(runtime, None, false)?;
    let settings: Vec<String> = files.iter().map(|(path, _)| path.display().to_string()).collect();
    log.line(&format!("hooks of {} in {}", runtime.name(), settings.join(" and ")));
    Ok(())
}

/// Starts the runtime, waits for it, and records what a session without network left.
fn run_and_record(l: &Launch<'_>, log: &Log, ready: &Ready) -> Result<i32, LaunchError> {
    let (runtime, turn) = (l.runtime(), l.prepared.target.turn);
    let command = l.command(&ready.prompt);
    log.line(&format!("{} for {} on turn {turn}", briefed_line(l.prepared.package()), runtime.name()));
    l.print_plan(&ready.prompt);
    let cwd = std::env::current_dir().map_err(|e| LaunchError::Setup(format!("the current folder: {e}")))?;
    let notes = cwd.join(NOTES_FILE);
    let notes_before = read_or_empty(&notes);
    if let Some(file) = &l.last_message {
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
    let status = start(&ready.program, &command, l.request.mode, &ready.vars)
        .map_err(|e| LaunchError::Setup(format!("{}: {e}", ready.program.display())))?;
    let code = exit_code_of(status);
    log.line(&format!("{} exited {}", runtime.program(), describe_exit(status)));
    if !runtime.has_network() {
        let final_message = l.last_message.as_ref().and_then(|f| std::fs::read_to_string(f).ok());
        let left = read_left(&notes_before, &read_or_empty(&notes), final_message.as_deref());
        let ran = Ran { turn, runtime, ok: status.success(), started_ms, cwd: &cwd };
        record_after(l, log, &ran, left)?;
    }
    if code != 0 {
        eprintln!("{} exited {}", runtime.program(), describe_exit(status));
    }
    Ok(code)
}

/// How the session ran, for what the launcher records after it.
struct Ran<'a> {
    turn: u64,
    runtime: Runtime,
    ok: bool,
    started_ms: i64,
    cwd: &'a Path,
}

/// The session recorded through the MCP server (outside its sandbox) when the server served it
/// during this run; otherwise the launcher records what it left.
fn record_after(l: &Launch<'_>, log: &Log, ran: &Ran<'_>, left: Left) -> Result<(), LaunchError> {
    let (id, turn, program) = (l.request.id.as_str(), ran.turn, ran.runtime.program());
    let served = paths::served_since(&l.state_dir, id).is_some_and(|at| at >= ran.started_ms);
    if !served {
        log.line(&format!("{program} did not start the {MCP_SERVER} MCP server: recording what it left in {NOTES_FILE} and its final message"));
        return record_left(&l.client, log, id, ran, &left);
    }
    log.line(&format!("{program} recorded through the {MCP_SERVER} MCP server"));
    let open = match l.client.get(id) {
        Ok(r) => r.value.turn == turn && !r.value.status.has_ended(),
        Err(e) => {
            // Not known to have ended: the report is sent, and a refusal is logged as one.
            log.line(&format!("could not read turn {turn} after {program} exited ({e}): reporting it anyway"));
            true
        }
    };
    if open {
        log.line(&format!("{program} left turn {turn} open: its report is the launcher's, from its final message"));
        let report_only = Left { decisions: Vec::new(), artifacts: Vec::new(), blockers: Vec::new(), ..left };
        record_left(&l.client, log, id, ran, &report_only)?;
    }
    Ok(())
}

/// Records what a session without network left, in the order it would have recorded it:
/// decisions, artifacts and blockers, then the report that ends the turn. A report for a turn
/// that has ended already (in an interactive session Codex's `notify` hook reports each of its
/// turns) is left as it is.
fn record_left(client: &Client, log: &Log, id: &str, ran: &Ran<'_>, left: &Left) -> Result<(), LaunchError> {
    let (turn, runtime, ran_ok, cwd) = (ran.turn, ran.runtime, ran.ok, ran.cwd);
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

/// Starts `program` as `command` says, with the session's `vars` set (this program's folder
/// first on `PATH`, so that `handoff` in the session is this one) and the token's variable
/// taken out, and waits for it. A print-mode run reads nothing from standard input; an
/// interactive one has the terminal. While it runs, a Ctrl-C is the runtime's alone: the
/// launcher outlives it to record what it left.
fn start(program: &Path, command: &CommandLine, mode: Mode, vars: &[(&str, String)]) -> std::io::Result<ExitStatus> {
    let mut cmd = Command::new(program);
    cmd.args(&command.args);
    for name in crate::machine::turn::REMOVED_VARS {
        cmd.env_remove(name);
    }
    for (name, value) in vars {
        cmd.env(name, value);
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
