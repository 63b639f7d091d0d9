//! `handoff hook install claude-code|codex [--project DIR] [--uninstall]`, the pure half: where
//! an agent harness keeps its settings ([`settings_path`]), and the text of that file with the
//! reporter hooks added or removed ([`apply`]). No I/O: the caller reads the file (an absent one
//! is `""`), calls [`apply`] and writes the answer back, or skips the write when the answer is
//! what it read.
//!
//! - Claude Code (`settings.json`): one hook group per event of [`CLAUDE_CODE_EVENTS`], whose
//!   one handler runs `<program> hook claude-code`.
//! - Claude Code's `PermissionRequest` too, whose handler waits for the owner's answer: its
//!   `timeout` is [`permission_timeout_s`], above the hook's wait (`HANDOFF_ANSWER_WAIT_S`).
//! - Codex (`config.toml`): the top-level `notify = ["<program>", "hook", "codex"]`. Codex
//!   appends one argument, the event as JSON, to that argv when it runs it. Beside it, in the
//!   same folder's `hooks.json` (which Codex reads as it reads `[hooks]` of `config.toml`:
//!   `codex-rs/hooks/src/engine/discovery.rs`), a `PermissionRequest` handler and a handler of
//!   each of [`CODEX_STEP_EVENTS`] running `<program> hook codex`, its document on standard
//!   input ([`install_codex_hooks`]).
//!
//! **Invariants:**
//! - Only ours is added or removed; every other entry of the file is kept.
//! - Install is idempotent: installing into its own answer gives that answer back.
//! - Uninstall removes exactly what install added: installing any number of times, then
//!   uninstalling, gives the original file back. For Codex byte for byte (`toml_edit` keeps
//!   comments and layout); for Claude Code as the same JSON value, since `serde_json` (without
//!   `preserve_order`) writes keys sorted and re-indents. The one loss: an empty `hooks` object
//!   or event array that was there before install is gone after uninstall.
//! - "Ours" is told by the program's file name, `handoff` or `handoff.exe`, never by its whole
//!   path, so uninstall still finds entries written before the binary moved. For the same
//!   reason install refuses a program by any other name: uninstall could not find its entries.
//! - Nothing is overwritten: a file of an unexpected shape, or a Codex `notify` that runs
//!   another program, is refused with an [`InstallError`].
//! - When nothing changes, the answer is `text` itself, byte for byte.

/// What `hook install claude-code` prints: the hooks ask the owner only in a permission mode
/// that asks (Claude Code 2.1.328 starts an interactive session in `auto`, which asks nothing).
pub const CLAUDE_CODE_MODE_STEP: &str = "Claude Code asks the owner through these hooks only in a permission mode that asks (default, \
acceptEdits, plan): start it with --permission-mode default, as `handoff launch` does; in auto, bypassPermissions or dontAsk \
the session's running report says no question will come";

/// What `hook install codex` prints. Codex runs a hook it does not manage only once its hash is
/// trusted in `[hooks.state]` (`codex-rs/hooks/src/engine/discovery.rs`) and until then shows
/// "Hooks need review" (seen with Codex 0.169.0); a user's install records that trust for our
/// hooks ([`codex_trust`]), a project's leaves it to the person.
pub const CODEX_TRUST_STEP: &str = "Codex runs the PermissionRequest and tool hooks once they are trusted: install recorded that \
trust for these hooks in config.toml ([hooks.state]); hooks installed with --project are reviewed in Codex (its \"Hooks need \
review\" screen, or /hooks). A Codex whose hooks feature is off needs --enable hooks, as `handoff launch` passes";

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use toml_edit::{Array, DocumentMut, Item};

// The runtimes whose settings file this module edits: Claude Code's hooks in `settings.json`,
// Codex's `notify` in `config.toml`.
use crate::machine::Runtime;

/// The Claude Code events the reporter hooks: a session's start, each prompt, a wait for the
/// user, a tool's start, end (the person let it run) and failure, and a turn's end, with or
/// without an error.
pub const CLAUDE_CODE_EVENTS: [&str; 8] = [
    "SessionStart",
    "UserPromptSubmit",
    "Notification",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "StopFailure",
];

/// The Codex hook events whose handler sends a tool call's steps to the turn's timeline.
pub const CODEX_STEP_EVENTS: [&str; 2] = ["PreToolUse", "PostToolUse"];

/// A hook returns (exit 0) within this, whatever the network does.
pub const HOOK_BUDGET_MS: u64 = 5_000;

/// The `timeout` (seconds) written in each Claude Code handler: the reporter only queues a
/// report, and a hook must never hold the agent up for long.
pub const HOOK_TIMEOUT_S: u64 = 10;

/// The event whose handler waits for the owner's answer, in Claude Code and in Codex.
pub const PERMISSION_EVENT: &str = "PermissionRequest";

/// The `timeout` (seconds) of a `PermissionRequest` handler: the hook's wait for the answer,
/// its budget to report, and a margin, so that the harness never kills a hook that is about
/// to answer.
pub fn permission_timeout_s(answer_wait_s: u64) -> u64 {
    answer_wait_s + HOOK_BUDGET_MS / 1000 + 10
}

/// The subcommand Claude Code runs, after the program.
const CLAUDE_CODE_ARGS: &str = "hook claude-code";
/// The subcommand Codex's hooks run, after the program.
const CODEX_HOOK_ARGS: &str = "hook codex";
/// The arguments of Codex's `notify` argv, after the program.
const CODEX_ARGS: [&str; 2] = ["hook", "codex"];
/// The file names the `handoff` binary can have; an entry running a program of either is ours.
const PROGRAM_NAMES: [&str; 2] = ["handoff", "handoff.exe"];

/// Where `harness` keeps the settings the hooks go in: the project's own file with `--project`,
/// else the user's, in the directory the harness's environment variable names (an empty value
/// counts as unset), else under `home`.
///
/// | harness     | `project`                      | variable            | default                      |
/// |-------------|--------------------------------|---------------------|------------------------------|
/// | Claude Code | `DIR/.claude/settings.json`    | `CLAUDE_CONFIG_DIR` | `HOME/.claude/settings.json` |
/// | Codex       | `DIR/.codex/config.toml`       | `CODEX_HOME`        | `HOME/.codex/config.toml`    |
pub fn settings_path(
    harness: Runtime,
    project: Option<&Path>,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> PathBuf {
    let (dir, var, file) = match harness {
        Runtime::ClaudeCode => (".claude", "CLAUDE_CONFIG_DIR", "settings.json"),
        Runtime::Codex => (".codex", "CODEX_HOME", "config.toml"),
    };
    if let Some(project) = project {
        return project.join(dir).join(file);
    }
    match env(var).filter(|value| !value.is_empty()) {
        Some(config_dir) => PathBuf::from(config_dir).join(file),
        None => home.join(dir).join(file),
    }
}

/// Why a settings file was left as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallError {
    /// The file does not parse as `format` (JSON or TOML).
    Unreadable { format: &'static str, reason: String },
    /// The value at `at` is `found` where the harness documents `expected`: what to keep in a
    /// file of another shape cannot be told, so nothing is written.
    Shape { at: String, expected: &'static str, found: &'static str },
    /// Codex's `notify` (as written: `existing`) runs another program, and Codex runs only one.
    ForeignNotify { existing: String },
    /// `program` cannot be written into the hook entries.
    Program { program: String, reason: &'static str },
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::Unreadable { format, reason } => {
                write!(f, "the settings file is not valid {format}, so it was left as it is: {reason}")
            }
            InstallError::Shape { at, expected, found } => write!(
                f,
                "the settings file's {at} is {found}, not {expected}: hooks are only installed into a file of \
                 the documented shape, so it was left as it is"
            ),
            InstallError::ForeignNotify { existing } => write!(
                f,
                "Codex runs only one notify program, and config.toml already has notify = {existing}: it was \
                 left as it is. Remove that line to install handoff's, or have that program also run \
                 `handoff hook codex` with the same last argument"
            ),
            InstallError::Program { program, reason } => {
                write!(f, "cannot install {program:?} as the hook program: {reason}")
            }
        }
    }
}

impl std::error::Error for InstallError {}

/// Adding an entry of ours to a settings file's text, running a program, and taking it out.
#[derive(Clone, Copy)]
pub struct Edit {
    pub install: fn(&str, &str) -> Result<String, InstallError>,
    pub uninstall: fn(&str) -> Result<String, InstallError>,
}

/// One kind of entry (the reporter hooks, [`HOOKS`]; the MCP server, `mcp install`'s) as each
/// harness's file holds it.
pub struct Edits {
    pub claude_code: Edit,
    pub codex: Edit,
}

impl Edits {
    /// `text`, `harness`'s settings file, with the entry added (or, with `uninstall`,
    /// removed). `program` is the path of the `handoff` binary it runs; an uninstall does not
    /// need it.
    pub fn apply(&self, harness: Runtime, text: &str, program: &str, uninstall: bool) -> Result<String, InstallError> {
        let edit = match harness {
            Runtime::ClaudeCode => self.claude_code,
            Runtime::Codex => self.codex,
        };
        if uninstall {
            (edit.uninstall)(text)
        } else {
            (edit.install)(text, program)
        }
    }
}

/// The reporter hooks.
pub const HOOKS: Edits = Edits {
    claude_code: Edit { install: install_claude_code, uninstall: uninstall_claude_code },
    codex: Edit { install: install_codex, uninstall: uninstall_codex },
};

/// Installs (or with `uninstall`, removes) the reporter hooks of `harness` in `text`, the
/// settings file's content ([`Edits::apply`]).
pub fn apply(harness: Runtime, text: &str, program: &str, uninstall: bool) -> Result<String, InstallError> {
    HOOKS.apply(harness, text, program, uninstall)
}

// ---- Claude Code: settings.json ----

/// Adds our handler to each event of [`CLAUDE_CODE_EVENTS`] that has none yet, as a group of its
/// own appended to `hooks.<Event>`; `hooks` and the event's array are created when missing.
/// `text` empty or blank is a file not written yet, `{}`. The answer is pretty JSON with a
/// final newline, or `text` itself when every event already had ours.
///
/// Refuses a file that is not JSON, not an object, whose `hooks` is not an object, or where one
/// of our events is not an array; and a program not named `handoff` or that a shell would not
/// read back as written (see [`claude_code_command`]).
pub fn install_claude_code(text: &str, program: &str) -> Result<String, InstallError> {
    install_claude_code_waiting(text, program, crate::ask::ANSWER_WAIT_S_DEFAULT)
}

/// [`install_claude_code`], the `PermissionRequest` handler's timeout above `answer_wait_s`.
pub fn install_claude_code_waiting(text: &str, program: &str, answer_wait_s: u64) -> Result<String, InstallError> {
    let mut events: Vec<(&str, u64)> = CLAUDE_CODE_EVENTS.iter().map(|e| (*e, HOOK_TIMEOUT_S)).collect();
    events.push((PERMISSION_EVENT, permission_timeout_s(answer_wait_s)));
    install_json_hooks(text, &shell_command(program, CLAUDE_CODE_ARGS)?, CLAUDE_CODE_ARGS, &events)
}

/// Codex's `hooks.json`: our `PermissionRequest` handler, as for Claude Code, and our
/// handler of each of [`CODEX_STEP_EVENTS`].
pub fn install_codex_hooks(text: &str, program: &str, answer_wait_s: u64) -> Result<String, InstallError> {
    let mut events = vec![(PERMISSION_EVENT, permission_timeout_s(answer_wait_s))];
    events.extend(CODEX_STEP_EVENTS.iter().map(|e| (*e, HOOK_TIMEOUT_S)));
    install_json_hooks(text, &shell_command(program, CODEX_HOOK_ARGS)?, CODEX_HOOK_ARGS, &events)
}

/// Removes our handlers from Codex's `hooks.json`, as [`uninstall_claude_code`] does.
pub fn uninstall_codex_hooks(text: &str) -> Result<String, InstallError> {
    uninstall_json_hooks(text, CODEX_HOOK_ARGS)
}

/// Adds a handler running `command` to each of `events` (with its timeout) that has none of
/// ours (a handler whose command ends with `args`) yet.
fn install_json_hooks(text: &str, command: &str, args: &str, events: &[(&str, u64)]) -> Result<String, InstallError> {
    let mut settings = json_object(text)?;
    let hooks = object_at(&mut settings, "hooks")?;
    let mut added = false;
    for (event, timeout_s) in events {
        let groups = match hooks.entry(event.to_string()).or_insert_with(|| json!([])) {
            Value::Array(groups) => groups,
            other => return Err(shape(&format!("`hooks.{event}`"), "an array", other)),
        };
        if !groups.iter().any(|g| group_has_ours(g, args)) {
            groups.push(json!({"hooks": [{"type": "command", "command": command, "timeout": timeout_s}]}));
            added = true;
        }
    }
    Ok(if added { pretty(settings) } else { text.to_string() })
}

/// Removes every handler of ours, from every event; then each group that ours left with an
/// empty `hooks`, each event array left empty, and `hooks` when left empty. Everything else
/// stays, including groups and arrays that were empty before. The answer is pretty JSON with a
/// final newline, or `text` itself when there was nothing of ours.
///
/// Refuses only a file that is not JSON: in a value of an unexpected shape there is nothing of
/// ours to remove, so it is left alone.
pub fn uninstall_claude_code(text: &str) -> Result<String, InstallError> {
    uninstall_json_hooks(text, CLAUDE_CODE_ARGS)
}

fn uninstall_json_hooks(text: &str, args: &str) -> Result<String, InstallError> {
    let mut settings = match parse_json(text)? {
        Value::Object(settings) => settings,
        _ => return Ok(text.to_string()),
    };
    let Some(Value::Object(hooks)) = settings.get_mut("hooks") else {
        return Ok(text.to_string());
    };
    let mut removed = false;
    let mut emptied = Vec::new();
    for (event, groups) in hooks.iter_mut() {
        let Value::Array(groups) = groups else { continue };
        if remove_ours(groups, args) {
            removed = true;
            if groups.is_empty() {
                emptied.push(event.clone());
            }
        }
    }
    if !removed {
        return Ok(text.to_string());
    }
    for event in &emptied {
        hooks.remove(event);
    }
    if hooks.is_empty() {
        settings.remove("hooks");
    }
    Ok(pretty(settings))
}

/// The shell command Claude Code runs: `<program> hook claude-code`, with `program` in double
/// quotes when it has whitespace or any other character a shell would not read as itself (a
/// Windows path's `\`, say). Refuses a program not named `handoff`, and one with `"`, `$` or
/// `` ` ``, which a shell reads even inside double quotes.
fn shell_command(program: &str, args: &str) -> Result<String, InstallError> {
    check_program_name(program)?;
    if program.contains(['"', '$', '`']) {
        let reason = "a shell would not read its \", $ or ` as written; run handoff from a path without them";
        return Err(InstallError::Program { program: program.to_string(), reason });
    }
    let plain = program.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%~".contains(c));
    Ok(if plain { format!("{program} {args}") } else { format!("\"{program}\" {args}") })
}

/// Whether a handler object runs `<P> <args>` with P (quotes stripped) a `handoff`.
fn is_our_handler(handler: &Value, args: &str) -> bool {
    let Some(command) = handler.get("command").and_then(Value::as_str) else {
        return false;
    };
    command
        .strip_suffix(args)
        .and_then(|rest| rest.strip_suffix(' '))
        .is_some_and(|program| is_handoff(unquote(program)))
}

/// Whether a group (`{"matcher"?, "hooks": [handler, ...]}`) has a handler of ours.
fn group_has_ours(group: &Value, args: &str) -> bool {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|handlers| handlers.iter().any(|h| is_our_handler(h, args)))
}

/// Removes our handlers from an event's groups, and the groups that were left empty by it;
/// says whether it removed any.
fn remove_ours(groups: &mut Vec<Value>, args: &str) -> bool {
    let mut removed = false;
    groups.retain_mut(|group| {
        let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            return true;
        };
        let before = handlers.len();
        handlers.retain(|handler| !is_our_handler(handler, args));
        if handlers.len() == before {
            return true;
        }
        removed = true;
        !handlers.is_empty()
    });
    removed
}

/// A settings file's top-level object; blank text is a file not written yet, `{}`.
pub(crate) fn json_object(text: &str) -> Result<Map<String, Value>, InstallError> {
    match parse_json(text)? {
        Value::Object(settings) => Ok(settings),
        other => Err(shape("top level", "an object", &other)),
    }
}

/// The object under `key` of `settings`, made empty when absent; another value is refused.
pub(crate) fn object_at<'a>(
    settings: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, InstallError> {
    match settings.entry(key).or_insert_with(|| json!({})) {
        Value::Object(inner) => Ok(inner),
        other => Err(shape(&format!("`{key}`"), "an object", other)),
    }
}

/// Parses a settings.json; blank text is a file not written yet, `{}`.
pub(crate) fn parse_json(text: &str) -> Result<Value, InstallError> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| InstallError::Unreadable { format: "JSON", reason: e.to_string() })
}

/// `serde_json::to_string_pretty`'s text and a final newline. `{:#}` writes the same text
/// (two-space indent) and, unlike `to_string_pretty`, cannot fail.
pub(crate) fn pretty(settings: Map<String, Value>) -> String {
    format!("{:#}\n", Value::Object(settings))
}

pub(crate) fn shape(at: &str, expected: &'static str, found: &Value) -> InstallError {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    InstallError::Shape { at: at.to_string(), expected, found }
}

// ---- Codex: config.toml ----

/// Sets the top-level `notify = ["<program>", "hook", "codex"]`, after the file's other
/// top-level keys; every other byte stays. A `notify` of ours already there (any path to a
/// `handoff`) leaves `text` as it is; one that runs another program is refused, never replaced.
/// A program not named `handoff` is refused too.
pub fn install_codex(text: &str, program: &str) -> Result<String, InstallError> {
    check_program_name(program)?;
    let mut config = parse_toml(text)?;
    if let Some(existing) = config.get("notify") {
        if is_our_notify(existing) {
            return Ok(text.to_string());
        }
        return Err(InstallError::ForeignNotify { existing: as_written(existing) });
    }
    let argv: Array = [program].into_iter().chain(CODEX_ARGS).collect();
    config.insert("notify", toml_edit::value(argv));
    Ok(keep_line_endings(text, config.to_string()))
}

/// Removes the top-level `notify` if it is ours; any other `text` is answered as it is.
pub fn uninstall_codex(text: &str) -> Result<String, InstallError> {
    let mut config = parse_toml(text)?;
    if !config.get("notify").is_some_and(is_our_notify) {
        return Ok(text.to_string());
    }
    config.remove("notify");
    Ok(keep_line_endings(text, config.to_string()))
}

/// Whether `notify` is `["<P>", "hook", "codex"]` with P (quotes stripped) a `handoff`.
fn is_our_notify(notify: &Item) -> bool {
    let Some(argv) = notify.as_array() else {
        return false;
    };
    let argv: Option<Vec<&str>> = argv.iter().map(|arg| arg.as_str()).collect();
    match argv.as_deref() {
        Some([program, rest @ ..]) => rest == CODEX_ARGS && is_handoff(unquote(program)),
        _ => false,
    }
}

/// A `notify` value as the file writes it, without the spaces and comment around it.
fn as_written(notify: &Item) -> String {
    match notify.as_value() {
        Some(value) => {
            let mut value = value.clone();
            value.decor_mut().clear();
            value.to_string()
        }
        None => "a table".to_string(),
    }
}

pub(crate) fn parse_toml(text: &str) -> Result<DocumentMut, InstallError> {
    text.parse().map_err(|e: toml_edit::TomlError| InstallError::Unreadable { format: "TOML", reason: e.to_string() })
}

/// `toml_edit` ends every key-value line with `\n`, also the last one and in a CRLF file. So
/// that the lines it did not touch stay byte for byte: a file whose line breaks are all `\r\n`
/// gets `\r\n` throughout, and a non-empty file without a final line break keeps none.
pub(crate) fn keep_line_endings(original: &str, mut edited: String) -> String {
    let crlf = original.contains("\r\n") && !original.replace("\r\n", "").contains('\n');
    if crlf {
        edited = edited.replace("\r\n", "\n").replace('\n', "\r\n");
    }
    if !original.is_empty() && !original.ends_with('\n') {
        let stripped = edited.strip_suffix(if crlf { "\r\n" } else { "\n" }).map(str::to_string);
        edited = stripped.unwrap_or(edited);
    }
    edited
}

// ---- Codex: the trust of our hook ----

/// Codex's key and hash for each handler of ours in `hooks_json` (the text of the
/// `hooks.json` at `hooks_path`), as Codex records a hook the person trusted: the key
/// `<hooks.json>:<event>:<group>:<handler>` (the event in snake case, `permission_request`),
/// the hash `sha256:` of the canonical JSON of `{"event_name", "hooks": [the handler with its
/// defaults]}` (`codex-rs/hooks/src/engine/discovery.rs`, `command_hook_hash`; seen to match
/// what Codex 0.169.0 writes when the person trusts the hook). Empty when none is there.
pub fn codex_trust(hooks_path: &str, hooks_json: &str) -> Vec<(String, String)> {
    let Ok(doc) = serde_json::from_str::<Value>(hooks_json) else { return Vec::new() };
    let mut trusted = Vec::new();
    for event in std::iter::once(PERMISSION_EVENT).chain(CODEX_STEP_EVENTS) {
        let event_name = snake_case(event);
        for (g, group) in doc["hooks"][event].as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group["hooks"].as_array().into_iter().flatten().enumerate() {
                if !is_our_handler(handler, CODEX_HOOK_ARGS) || group.get("matcher").is_some_and(|m| !m.is_null()) {
                    continue;
                }
                let normalized = json!({"type": "command", "command": handler["command"], "timeout": handler["timeout"].as_u64().unwrap_or(600).max(1), "async": false});
                // serde_json's maps are sorted, so this is the canonical form, compact.
                let identity = json!({"event_name": event_name, "hooks": [normalized]}).to_string();
                let hash =
                    format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(identity.as_bytes())));
                trusted.push((format!("{hooks_path}:{event_name}:{g}:{h}"), hash));
            }
        }
    }
    trusted
}

/// A hook event's name as Codex keys it: `PreToolUse` is `pre_tool_use`.
fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `config.toml` with `[hooks.state."<key>"] trusted_hash = "<hash>"`: Codex then runs the hook
/// without asking the person to review it (the person asked for it by installing it).
pub fn trust_codex_hook(text: &str, key: &str, hash: &str) -> Result<String, InstallError> {
    let mut doc = parse_toml(text)?;
    let implicit = || {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        Item::Table(t)
    };
    let shape_error = |at: &str| InstallError::Shape { at: at.into(), expected: "a table", found: "another value" };
    let hooks = doc.entry("hooks").or_insert_with(implicit).as_table_mut().ok_or_else(|| shape_error("`hooks`"))?;
    let state =
        hooks.entry("state").or_insert_with(implicit).as_table_mut().ok_or_else(|| shape_error("`hooks.state`"))?;
    if state.get(key).and_then(|e| e.get("trusted_hash")).and_then(Item::as_str) == Some(hash) {
        return Ok(text.to_string());
    }
    let entry = state
        .entry(key)
        .or_insert_with(|| Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| shape_error("the hook's state"))?;
    entry.insert("trusted_hash", toml_edit::value(hash));
    Ok(keep_line_endings(text, doc.to_string()))
}

/// `config.toml` without the state of `key` (and without the `hooks.state` and `hooks` tables
/// install made for it, once empty).
pub fn untrust_codex_hook(text: &str, key: &str) -> Result<String, InstallError> {
    let mut doc = parse_toml(text)?;
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_mut) else { return Ok(text.to_string()) };
    let Some(state) = hooks.get_mut("state").and_then(Item::as_table_mut) else { return Ok(text.to_string()) };
    if state.remove(key).is_none() {
        return Ok(text.to_string());
    }
    if state.is_empty() && state.is_implicit() {
        hooks.remove("state");
    }
    if hooks.is_empty() && hooks.is_implicit() {
        doc.remove("hooks");
    }
    Ok(keep_line_endings(text, doc.to_string()))
}

// ---- both ----

/// Whether `program`'s file name (after the last `/` or `\`) is `handoff` or `handoff.exe`.
pub(crate) fn is_handoff(program: &str) -> bool {
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    PROGRAM_NAMES.contains(&name)
}

/// `program` without one pair of surrounding double or single quotes.
fn unquote(program: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = program.strip_prefix(quote).and_then(|rest| rest.strip_suffix(quote)) {
            return inner;
        }
    }
    program
}

/// Install writes only entries uninstall can find: the program must be named `handoff`.
pub(crate) fn check_program_name(program: &str) -> Result<(), InstallError> {
    if is_handoff(program) {
        return Ok(());
    }
    let reason = "its file name is not handoff (or handoff.exe), and the entries are found again by that name";
    Err(InstallError::Program { program: program.to_string(), reason })
}

#[cfg(test)]
mod tests;
