//! `handoff launch`, the pure half: the runtime's command line, and what a session without
//! network left behind. Which turn is briefed, from what, and the prompt are the machine side's
//! ([`crate::machine::turn`], which `serve` shares); [`run`] starts the turn through it, spawns
//! and records.
//!
//! | runtime | program | network | print mode | interactive |
//! |---|---|---|---|---|
//! | `claude-code` | `claude` | yes | `claude -p PROMPT --permission-mode default --mcp-config JSON --strict-mcp-config --allowedTools mcp__handoff` | the same without `-p` |
//! | `codex` | `codex` | no (`workspace-write`); its MCP server has | `codex exec --sandbox workspace-write -c notify=[] --output-last-message FILE -c mcp_servers.handoff.… PROMPT` | `codex --sandbox workspace-write --ask-for-approval on-request --no-daemon --enable hooks -c mcp_servers.handoff.… PROMPT` |
//!
//! **Invariants:**
//! - The prompt and the command line name the session's variables ([`SESSION_NAMES`]) and never
//!   hold the token: nothing here is ever given it. Of their values the paragraph writes only
//!   the hand-off's id.
//! - Both runtimes record through the `handoff` MCP server ([`MCP_SERVER`], `handoff mcp`),
//!   which reads the variables itself; a Codex whose server did not start is told to leave its
//!   record in `NOTES.md` and its final message, which [`read_left`] reads back.

pub mod run;

use crate::machine::env::{CODEX_SHELL_EXCLUDE, SESSION_NAMES};
use crate::machine::server::{claude_code_mcp_config, codex_mcp_settings, CLAUDE_CODE_ALLOW_RULE, MCP_SERVER};
use crate::machine::turn::{PackageRef, NOTES_FILE};
use crate::machine::Runtime;
use handoff_core::limits::{STATEMENT_BYTES_MAX, TITLE_BYTES_MAX, URI_BYTES_MAX};
use handoff_core::text::clip;
use handoff_core::turn::ReportStatus;
use handoff_core::work::Severity;

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

/// Interactive (a person at the terminal) or print/exec mode (one run, then exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Interactive,
    Print,
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
