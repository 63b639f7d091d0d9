//! `handoff launch`, the pure half: which turn a launch briefs and from what, the prompt (the
//! briefing and the launcher's own paragraph on how to record), the runtime's command line and
//! the names of the variables it is given, and what a session without network left behind.
//! No I/O here; [`run`] reads the hand-off, accepts, spawns and records.
//!
//! | runtime | program | network | print mode | interactive |
//! |---|---|---|---|---|
//! | `claude-code` | `claude` | yes | `claude -p PROMPT --permission-mode default --mcp-config JSON --strict-mcp-config --allowedTools mcp__handoff` | the same without `-p` |
//! | `codex` | `codex` | no (`workspace-write`); its MCP server has | `codex exec --sandbox workspace-write -c notify=[] --output-last-message FILE -c mcp_servers.handoff.… PROMPT` | `codex --sandbox workspace-write --ask-for-approval on-request --no-daemon --enable hooks -c mcp_servers.handoff.… PROMPT` |
//!
//! **Invariants:**
//! - The prompt and the command line name the session's variables ([`ENV_NAMES`]) and never
//!   hold the token: nothing here is ever given it. Of their values the paragraph writes only
//!   the hand-off's id.
//! - Both runtimes record through the `handoff` MCP server ([`MCP_SERVER`], `handoff mcp`),
//!   which reads the variables itself; a Codex whose server did not start is told to leave its
//!   record in `NOTES.md` and its final message, which [`read_left`] reads back.

pub mod run;

use crate::client::{Handoff, Reach, WorkRecord};
use crate::hook::install::Harness;
use handoff_core::limits::{
    BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN, STATEMENT_BYTES_MAX, TITLE_BYTES_MAX, URI_BYTES_MAX,
};
use handoff_core::text::clip;
use handoff_core::turn::{ReportStatus, State, Status};
use handoff_core::work::Severity;
use std::fmt;

/// The briefing budget Claude Code gets unless `--budget` says: it can read the whole package
/// (the `handoff://package.md` resource of its MCP server) whenever the briefing leaves
/// something out.
pub const CLAUDE_CODE_BUDGET_BYTES: u32 = 16 * 1024;
/// The briefing budget Codex gets unless `--budget` says: twice Claude Code's, because in its
/// sandbox, with no network, the briefing is all of the package it will ever see.
pub const CODEX_BUDGET_BYTES: u32 = 32 * 1024;
const _: () = assert!(CODEX_BUDGET_BYTES > CLAUDE_CODE_BUDGET_BYTES, "the runtime that cannot ask for more gets more");

/// The variable holding the API's address.
pub const ENV_URL: &str = "HANDOFF_URL";
/// The variable holding the hand-off's id.
pub const ENV_ID: &str = "HANDOFF_ID";
/// The variable holding the machine token; the launcher takes it out of the runtime's
/// environment, whose shell would hand it to every command the model runs.
pub const ENV_TOKEN: &str = "HANDOFF_TOKEN";
/// The variable naming the 0600 file that holds the machine token, which the hooks and the
/// MCP server read (and `handoff serve`).
pub use crate::client::ENV_TOKEN_FILE;
/// Every variable the launcher sets in the runtime's environment, as the prompt names them.
pub const ENV_NAMES: [&str; 3] = [ENV_URL, ENV_ID, ENV_TOKEN_FILE];
/// The variable naming the hooks' (and the MCP server's) state folder, when set.
pub const ENV_STATE_DIR: &str = "HANDOFF_STATE_DIR";
/// What Codex passes its stdio MCP server by name (it passes only an allowlist of the
/// environment, `codex-rs/rmcp-client/src/utils.rs`): the session's address and id, its token
/// (in a file when launched, in the variable for a session started by hand), and the state
/// folder where the server notes that it served.
pub const CODEX_MCP_ENV_NAMES: [&str; 5] = [ENV_URL, ENV_ID, ENV_TOKEN_FILE, ENV_TOKEN, ENV_STATE_DIR];

/// The session's MCP server, as the harnesses name it (Claude Code's tools are
/// `mcp__handoff__<tool>`).
pub const MCP_SERVER: &str = "handoff";
/// The arguments that start the server.
pub const MCP_SERVER_ARGS: [&str; 1] = ["mcp"];
/// Codex's approval for the server's tools: a tool call that needs approval is cancelled in
/// `codex exec`, so ours are approved up front.
pub const CODEX_MCP_APPROVAL: &str = "approve";
/// Claude Code's permission rule that lets the session use the `handoff` server's tools (and
/// only those) without asking.
pub const CLAUDE_CODE_ALLOW_RULE: &str = "mcp__handoff";
/// Claude Code's permission mode for a launched session: the one where the allow rule decides
/// and any other tool call is asked (of the owner through the `PermissionRequest` hook, then at
/// the terminal). Claude Code 2.1.328 starts an interactive session in `auto` otherwise, which
/// asks nothing; an `--permission-mode` among the extra arguments comes later and wins.
pub const CLAUDE_CODE_PERMISSION_MODE: &str = "default";
/// Codex's sandbox: the workspace is writable, the network is not reachable.
pub const CODEX_SANDBOX: &str = "workspace-write";
/// Codex's approvals in interactive mode (exec never asks).
pub const CODEX_APPROVAL_INTERACTIVE: &str = "on-request";
/// Codex's hooks feature, asked for by name: on by default in 0.169.0, where the older
/// `codex_hooks` is deprecated in its favour; a version that has it off runs no hook without it.
pub const CODEX_ENABLE_HOOKS: [&str; 2] = ["--enable", "hooks"];
/// Codex's flag that keeps an interactive session off the shared background server: Codex
/// 0.169.0's TUI otherwise starts a `codex app-server` daemon that outlives the session and is
/// shared by the next one on the machine.
pub const CODEX_NO_DAEMON: &str = "--no-daemon";
/// Codex's config override for an exec run: no `notify` program. The launcher reports that
/// turn from the final message after recording what the session left; the hook would end the
/// turn first, and what the session left would land after its end.
pub const CODEX_EXEC_NO_NOTIFY: &str = "notify=[]";
/// The 0600 file in the state folder that holds hand-off `id`'s machine token for the hooks
/// and the MCP server of a launched runtime (its path goes down as [`ENV_TOKEN_FILE`]).
pub fn token_file(state_dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    state_dir.join("tokens").join(format!("{id}.token"))
}

/// Codex's override that keeps the session's token variables out of every command the model
/// runs: its `shell_environment_policy` passes the whole environment by default
/// (`inherit = "all"`, with its own `*KEY*`/`*SECRET*`/`*TOKEN*` excludes ignored), while its
/// hooks and `notify` get Codex's own environment and its MCP servers the names they list.
pub const CODEX_SHELL_EXCLUDE: &str = r#"shell_environment_policy.exclude=["HANDOFF_TOKEN", "HANDOFF_TOKEN_FILE"]"#;

/// Where a session without network writes its decisions, in the folder it was started in.
pub const NOTES_FILE: &str = "NOTES.md";

/// The runtimes the launcher starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    ClaudeCode,
    Codex,
}

impl Runtime {
    pub const ALL: [Runtime; 2] = [Runtime::ClaudeCode, Runtime::Codex];

    /// The runtime as the API and `handoff turn --to` name it.
    pub fn parse(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "claude-code",
            Runtime::Codex => "codex",
        }
    }

    /// The program on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "claude",
            Runtime::Codex => "codex",
        }
    }

    pub fn budget_bytes_default(self) -> u32 {
        match self {
            Runtime::ClaudeCode => CLAUDE_CODE_BUDGET_BYTES,
            Runtime::Codex => CODEX_BUDGET_BYTES,
        }
    }

    /// Whether a session of this runtime, as launched, can reach the hand-off service.
    pub fn has_network(self) -> bool {
        match self {
            Runtime::ClaudeCode => true,
            Runtime::Codex => false,
        }
    }

    /// What the briefing's closing instruction is written for.
    pub fn reach(self) -> Reach {
        if self.has_network() {
            Reach::Api
        } else {
            Reach::None
        }
    }

    pub fn harness(self) -> Harness {
        match self {
            Runtime::ClaudeCode => Harness::ClaudeCode,
            Runtime::Codex => Harness::Codex,
        }
    }
}

/// Interactive (a person at the terminal) or print/exec mode (one run, then exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Interactive,
    Print,
}

/// The turn a launch briefs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub runtime: Runtime,
    pub turn: u64,
    /// The turn was handed to this runtime with a package; otherwise the work record briefs it.
    pub from_package: bool,
}

/// Why a hand-off cannot be launched as asked; the API was asked nothing that changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Closed {
        id: String,
    },
    /// The token is an owner's, which the session must never be given.
    OwnerToken,
    TurnEnded {
        turn: u64,
        status: Status,
    },
    OtherRuntime {
        turn: u64,
        handed_to: String,
        asked: String,
    },
    NoRuntime {
        turn: u64,
    },
    UnknownRuntime {
        name: String,
    },
    NothingToBrief {
        turn: u64,
    },
    Budget {
        bytes: u32,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Closed { id } => write!(f, "{id} is closed: there is no turn to launch"),
            Refused::OwnerToken => write!(
                f,
                "that is an owner's token, and the session is given the token it launches with: launch with the \
                 hand-off's machine token"
            ),
            Refused::TurnEnded { turn, status } => {
                write!(f, "turn {turn} is {}: open the next turn (handoff turn) before launching it", status.as_str())
            }
            Refused::OtherRuntime { turn, handed_to, asked } => {
                write!(f, "turn {turn} was handed to {handed_to}, not {asked}: launch it with --runtime {handed_to}")
            }
            Refused::NoRuntime { turn } => {
                write!(
                    f,
                    "turn {turn} was handed to no runtime: say which with --runtime claude-code or --runtime codex"
                )
            }
            Refused::UnknownRuntime { name } => write!(f, "the launcher starts claude-code or codex, not {name}"),
            Refused::NothingToBrief { turn } => write!(
                f,
                "turn {turn} has no package and the work record has no title or goal: set it with `handoff work` first"
            ),
            Refused::Budget { bytes } => {
                write!(f, "--budget {bytes}: {BRIEFING_BUDGET_BYTES_MIN} to {BRIEFING_BUDGET_BYTES_MAX} bytes")
            }
        }
    }
}

impl std::error::Error for Refused {}

/// Which turn of `h` (as read with the token the launch gives the session) a launch of
/// `asked`, or of the runtime the turn was handed to, briefs.
pub fn target(h: &Handoff, asked: Option<&str>) -> Result<Target, Refused> {
    if h.state == State::Closed {
        return Err(Refused::Closed { id: h.id.clone() });
    }
    // Only the owner may close: a record that lists `close` was read with an owner's token.
    if h.actions.iter().any(|a| a == "close") {
        return Err(Refused::OwnerToken);
    }
    if h.status.has_ended() {
        return Err(Refused::TurnEnded { turn: h.turn, status: h.status });
    }
    let handed_to = h.briefed.runtime.as_deref();
    let name = asked.or(handed_to).ok_or(Refused::NoRuntime { turn: h.turn })?;
    let runtime = Runtime::parse(name).ok_or_else(|| Refused::UnknownRuntime { name: name.to_string() })?;
    if let Some(handed_to) = handed_to.filter(|r| *r != name) {
        return Err(Refused::OtherRuntime { turn: h.turn, handed_to: handed_to.to_string(), asked: name.to_string() });
    }
    Ok(Target { runtime, turn: h.turn, from_package: handed_to.is_some() && h.briefed.package_hash.is_some() })
}

/// The budget of a launch: `--budget`, else the runtime's.
pub fn budget_bytes(runtime: Runtime, asked: Option<u32>) -> Result<u32, Refused> {
    let bytes = asked.unwrap_or(runtime.budget_bytes_default());
    let allowed = BRIEFING_BUDGET_BYTES_MIN as u32..=BRIEFING_BUDGET_BYTES_MAX as u32;
    if allowed.contains(&bytes) {
        Ok(bytes)
    } else {
        Err(Refused::Budget { bytes })
    }
}

/// The package a launch briefs from, as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRef {
    pub version: u64,
    pub hash: String,
}

/// What the launcher logs and prints: `briefed from package v3 (9f2c1a8b…)`, or
/// `briefed from the work record`.
pub fn briefed_line(package: Option<&PackageRef>) -> String {
    match package {
        Some(p) => format!("briefed from package v{} ({})", p.version, crate::output::short_hash(&p.hash)),
        None => "briefed from the work record".to_string(),
    }
}

/// The marker a clipped work-record briefing ends with, as the package briefing marks its own.
const CUT_MARK: &str = "\n[cut]";

/// The briefing of a turn that has no package: the work record alone (goal, constraints,
/// acceptance criteria), its title standing in for an objective, within `budget_bytes`.
pub fn work_briefing(h: &Handoff, work: &WorkRecord, budget_bytes: u32) -> Result<String, Refused> {
    let spec = work.spec.as_ref().filter(|s| !s.title.trim().is_empty() || !s.goal.trim().is_empty());
    let Some(spec) = spec else {
        return Err(Refused::NothingToBrief { turn: h.turn });
    };
    let mut text = String::from("# Hand-off briefing\n");
    text.push_str(&format!("{}\n", spec.title));
    let mut facts = format!("Hand-off {} (session {}), turn {}", h.id, h.session, h.turn);
    if let Some(t) = spec.task_type.as_deref().filter(|t| !t.is_empty()) {
        facts.push_str(&format!(", task type {t}"));
    }
    if let Some(p) = spec.priority.as_deref().filter(|p| !p.is_empty()) {
        facts.push_str(&format!(", priority {p}"));
    }
    text.push_str(&format!(
        "{facts}.\nNo package was compiled for this turn: this briefing is the work record alone.\n"
    ));
    text.push_str(&format!("\n## Goal\n{}\n", spec.goal));
    text.push_str(&format!("\n## Next objective\n{}\n", spec.title));
    if !spec.constraints.is_empty() {
        text.push_str("\n## Constraints\n");
        spec.constraints.iter().for_each(|c| text.push_str(&format!("- {c}\n")));
    }
    if !spec.acceptance_criteria.is_empty() {
        text.push_str("\n## Acceptance criteria\n");
        spec.acceptance_criteria.iter().enumerate().for_each(|(i, c)| text.push_str(&format!("[{i}] {c}\n")));
    }
    let budget = (budget_bytes as usize).clamp(BRIEFING_BUDGET_BYTES_MIN, BRIEFING_BUDGET_BYTES_MAX);
    if text.len() > budget {
        let kept = clip(&text, budget - CUT_MARK.len()).to_string();
        text = kept + CUT_MARK;
    }
    assert!(text.len() <= budget, "a briefing never exceeds its budget");
    Ok(text)
}

/// The tools of `handoff mcp` a session records with, as the paragraph lists them.
const TOOL_LINES: &str = "\x20 record_decision: what you decided, and why\n\
     \x20 add_artifact: a file, report or pull request you produced\n\
     \x20 raise_blocker: something you cannot get past by yourself\n\
     \x20 ask_owner: a question for the owner with the answers they may pick; it waits for the answer\n\
     \x20 report: done or failed before you stop (unmet: the indices of the acceptance criteria you did not meet)\n";

/// The launcher's paragraph after the briefing: how this session records its turn, through the
/// `handoff` MCP server the launcher starts it with. Codex's adds what to leave for the launcher
/// when the server cannot start. The two wordings are `test/fixtures/launch/access-api.txt` and
/// `access-none.txt`.
pub fn access_paragraph(runtime: Runtime, id: &str, turn: u64) -> String {
    let server = format!(
        "The MCP server `{MCP_SERVER}` this session was started with records on hand-off {id} for you: it reads \
         {ENV_URL}, {ENV_ID} and the token in {ENV_TOKEN_FILE} itself, so never read, print or pass them anywhere. Record with its \
         tools as you work, not only at the end:\n{TOOL_LINES}\
         get_briefing and get_handoff read the briefing and the hand-off again. A session that stops without a report \
         leaves turn {turn} open.\n"
    );
    if runtime.has_network() {
        format!("## Recording this turn\n{server}")
    } else {
        format!(
            "## Recording this turn\n\
             This sandbox has no network: do not try to reach the hand-off service, and raise no blocker about that. \
             {server}\
             Only if the {MCP_SERVER} tools are not there, the launcher that started you records turn {turn} after you \
             stop, from what you leave:\n\
             \x20 in {NOTES_FILE}, one line for each decision: Decision: WHAT YOU DECIDED\n\
             \x20 in {NOTES_FILE} or your final message, one line for each file you produced: Artifact: PATH\n\
             \x20 and one for each thing that blocks you: Blocker (low|medium|high): WHAT BLOCKS YOU\n\
             \x20 in your final message, what you did, then a line Status: done or Status: failed, and a line \
             Unmet: 0,2 naming by index the acceptance criteria you did not meet.\n"
        )
    }
}

/// The first prompt: the briefing, then the launcher's paragraph.
pub fn prompt(briefing: &str, paragraph: &str) -> String {
    format!("{}\n\n{paragraph}", briefing.trim_end())
}

/// A program and its arguments, the prompt among them at `prompt_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    pub program: String,
    pub args: Vec<String>,
    pub prompt_at: usize,
}

impl CommandLine {
    /// The whole argv, program first, as `--json` gives it.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.clone()).chain(self.args.iter().cloned()).collect()
    }

    /// The command as a shell would read it, the prompt shown as `<prompt>`.
    pub fn display(&self) -> String {
        let mut words = vec![shell_word(&self.program)];
        for (i, arg) in self.args.iter().enumerate() {
            words.push(if i == self.prompt_at { "<prompt>".to_string() } else { shell_word(arg) });
        }
        words.join(" ")
    }
}

/// How `runtime` is started in `mode` with `prompt` as its first prompt. `last_message` is
/// where Codex's exec writes its final message; `extra` goes to the runtime as given.
///
/// Claude Code takes the prompt right after `-p` and the rules of `--allowedTools` last, since
/// that flag takes every word after it as a rule. Codex takes the prompt as its last operand.
pub fn command_line(
    runtime: Runtime,
    mode: Mode,
    prompt: &str,
    last_message: Option<&str>,
    server: &str,
    extra: &[String],
) -> CommandLine {
    let mut args: Vec<String> = Vec::new();
    let prompt_at;
    match runtime {
        Runtime::ClaudeCode => {
            if mode == Mode::Print {
                args.push("-p".into());
            }
            prompt_at = args.len();
            args.push(prompt.into());
            args.extend(["--permission-mode".to_string(), CLAUDE_CODE_PERMISSION_MODE.to_string()]);
            args.extend([
                "--mcp-config".to_string(),
                claude_code_mcp_config(server),
                "--strict-mcp-config".to_string(),
            ]);
            args.extend(extra.iter().cloned());
            args.extend(["--allowedTools".to_string(), CLAUDE_CODE_ALLOW_RULE.to_string()]);
        }
        Runtime::Codex => {
            match mode {
                Mode::Print => {
                    args.extend(["exec", "--sandbox", CODEX_SANDBOX, "-c", CODEX_EXEC_NO_NOTIFY].map(String::from));
                    if let Some(file) = last_message {
                        args.extend(["--output-last-message".to_string(), file.to_string()]);
                    }
                }
                Mode::Interactive => {
                    args.extend(
                        ["--sandbox", CODEX_SANDBOX, "--ask-for-approval", CODEX_APPROVAL_INTERACTIVE, CODEX_NO_DAEMON]
                            .map(String::from),
                    );
                    args.extend(CODEX_ENABLE_HOOKS.map(String::from));
                }
            }
            for setting in codex_mcp_settings(server) {
                args.extend(["-c".to_string(), setting]);
            }
            args.extend(["-c".to_string(), CODEX_SHELL_EXCLUDE.to_string()]);
            args.extend(extra.iter().cloned());
            prompt_at = args.len();
            args.push(prompt.into());
        }
    }
    CommandLine { program: runtime.program().to_string(), args, prompt_at }
}

/// Claude Code's entry for the server run by `program` (this program), in the `mcpServers` form
/// of its settings and of `--mcp-config`: the server inherits the session's variables. `mcp
/// install` writes the same entry.
pub fn claude_code_entry(program: &str) -> serde_json::Value {
    serde_json::json!({"type": "stdio", "command": program, "args": MCP_SERVER_ARGS})
}

/// Codex's entry for the server run by `program`, key by key, as `config.toml`'s
/// `[mcp_servers.handoff]` (`mcp install codex`) and the launcher's `-c
/// mcp_servers.handoff.KEY=VALUE` write it: the program, its arguments, the variables Codex
/// passes it by name (its stdio servers get only an allowlist of the environment), and its tools
/// approved (`codex exec` cancels a call that waits for an approval).
pub fn codex_entry(program: &str) -> [(&'static str, toml_edit::Value); 4] {
    let list = |items: &[&str]| toml_edit::Value::Array(items.iter().copied().collect::<toml_edit::Array>());
    [
        ("command", program.into()),
        ("args", list(&MCP_SERVER_ARGS)),
        ("env_vars", list(&CODEX_MCP_ENV_NAMES)),
        ("default_tools_approval_mode", CODEX_MCP_APPROVAL.into()),
    ]
}

/// Claude Code's `--mcp-config`: the `handoff` server run by `server` (this program), in the
/// `mcpServers` form of its settings; the server inherits the session's variables, so no value
/// of theirs is in it.
pub fn claude_code_mcp_config(server: &str) -> String {
    serde_json::json!({"mcpServers": {MCP_SERVER: claude_code_entry(server)}}).to_string()
}

/// Codex's `-c` overrides that declare the `handoff` server, the same entry `mcp install codex`
/// writes to `config.toml`.
pub fn codex_mcp_settings(server: &str) -> Vec<String> {
    codex_entry(server).into_iter().map(|(key, entry)| format!("mcp_servers.{MCP_SERVER}.{key}={entry}")).collect()
}

/// `word` as a POSIX shell reads it back: bare when it is plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What a session without network left for the launcher to record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Left {
    /// Statements, each once, in the order they were written.
    pub decisions: Vec<String>,
    /// Paths, each once.
    pub artifacts: Vec<String>,
    pub blockers: Vec<(Severity, String)>,
    /// `Status: done|failed` of the final message.
    pub status: Option<ReportStatus>,
    /// `Unmet: 0,2` of the final message (`Unmet: none` is an empty list).
    pub unmet: Option<Vec<u32>>,
    /// The final message, trimmed; `None` when there was none or it was empty.
    pub summary: Option<String>,
}

/// Reads what a session left: the `Decision:`, `Artifact:` and `Blocker:` lines that
/// `NOTES.md` gained since the launch (`notes_before` → `notes_after`; a line already there
/// before is not recorded again) and those of its final message, with the final message's
/// `Status:` and `Unmet:` lines. A line may be a Markdown bullet and its key in bold.
pub fn read_left(notes_before: &str, notes_after: &str, final_message: Option<&str>) -> Left {
    let mut left = Left::default();
    let mut seen_before: Vec<&str> = notes_before.lines().map(str::trim).collect();
    let mut new_lines: Vec<&str> = Vec::new();
    for line in notes_after.lines().map(str::trim) {
        match seen_before.iter().position(|b| *b == line) {
            Some(i) => {
                seen_before.swap_remove(i);
            }
            None => new_lines.push(line),
        }
    }
    let message = final_message.map(str::trim).filter(|m| !m.is_empty());
    let message_lines = message.map(|m| m.lines().collect::<Vec<_>>()).unwrap_or_default();
    for (line, in_message) in new_lines.iter().map(|l| (*l, false)).chain(message_lines.iter().map(|l| (*l, true))) {
        match keyed_line(line) {
            Some(Keyed::Decision(s)) => push_once(&mut left.decisions, clip(s, STATEMENT_BYTES_MAX).trim().to_string()),
            Some(Keyed::Artifact(p)) => push_once(&mut left.artifacts, clip(p, URI_BYTES_MAX).trim().to_string()),
            Some(Keyed::Blocker(severity, title)) => {
                let blocker = (severity, clip(title, TITLE_BYTES_MAX).trim().to_string());
                if !left.blockers.contains(&blocker) {
                    left.blockers.push(blocker);
                }
            }
            Some(Keyed::Status(s)) if in_message => left.status = Some(s),
            Some(Keyed::Unmet(u)) if in_message => left.unmet = Some(u),
            _ => {}
        }
    }
    left.summary = message.map(crate::hook::clip_summary);
    left
}

fn push_once(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

enum Keyed<'a> {
    Decision(&'a str),
    Artifact(&'a str),
    Blocker(Severity, &'a str),
    Status(ReportStatus),
    Unmet(Vec<u32>),
}

/// One line of the grammar the no-network paragraph teaches, or `None`.
fn keyed_line(line: &str) -> Option<Keyed<'_>> {
    let line = line.trim().trim_start_matches(['-', '*', '>', ' ', '\t']);
    let (key, rest) = line.split_at(line.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(line.len()));
    let rest = rest.trim_start_matches(['*', '_']);
    match key.to_ascii_lowercase().as_str() {
        "decision" => value(rest).map(Keyed::Decision),
        "artifact" => value(rest).map(Keyed::Artifact),
        "blocker" => {
            let (severity, rest) = match rest.trim_start().strip_prefix('(') {
                Some(r) => {
                    let (word, after) = r.split_once(')')?;
                    (parse_severity(word.trim())?, after.trim_start_matches(['*', '_']))
                }
                None => (Severity::Medium, rest),
            };
            value(rest).map(|t| Keyed::Blocker(severity, t))
        }
        "status" => match value(rest)?.to_ascii_lowercase().as_str() {
            "done" => Some(Keyed::Status(ReportStatus::Done)),
            "failed" => Some(Keyed::Status(ReportStatus::Failed)),
            _ => None,
        },
        "unmet" => {
            let v = value(rest)?;
            if v.eq_ignore_ascii_case("none") {
                return Some(Keyed::Unmet(Vec::new()));
            }
            let indexes: Option<Vec<u32>> = v.split(',').map(|i| i.trim().parse().ok()).collect();
            indexes.map(Keyed::Unmet)
        }
        _ => None,
    }
}

/// What follows the key's colon, without the emphasis around it; `None` when empty.
fn value(rest: &str) -> Option<&str> {
    let v = rest.strip_prefix(':')?.trim().trim_matches(['*', '_', '`']).trim();
    (!v.is_empty()).then_some(v)
}

fn parse_severity(word: &str) -> Option<Severity> {
    match word.to_ascii_lowercase().as_str() {
        "low" => Some(Severity::Low),
        "medium" => Some(Severity::Medium),
        "high" => Some(Severity::High),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
