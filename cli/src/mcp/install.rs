//! `handoff mcp install claude-code|codex [--project DIR] [--uninstall]`: the session's MCP
//! server in the harness's own settings, for sessions not started by `handoff launch`. The
//! same rules as the hooks' install (`crate::hook::install`): every other entry is kept, a
//! second install changes nothing, uninstall removes exactly what install added, a file of
//! another shape (or a server named `handoff` that is not ours) is refused, never rewritten.
//! No token is written: the server reads `HANDOFF_URL`, `HANDOFF_ID` and `HANDOFF_TOKEN` (or
//! `HANDOFF_TOKEN_FILE`) from the harness's environment, which Codex passes on by name
//! (`env_vars`).
//!
//! | harness     | file                                                    | entry |
//! |-------------|---------------------------------------------------------|-------|
//! | Claude Code | `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`; `--project`: `DIR/.mcp.json`) | `mcpServers.handoff`: `{"type": "stdio", "command", "args": ["mcp"]}` |
//! | Codex       | `config.toml`, as the hooks'                            | `[mcp_servers.handoff]`: `command`, `args`, `env_vars`, `default_tools_approval_mode = "approve"` |

use crate::hook::install::{
    check_program_name, is_handoff, json_object, keep_line_endings, object_at, parse_toml, pretty, settings_path,
    shape, Edit, Edits, InstallError,
};
use crate::machine::server::{claude_code_entry, codex_entry, MCP_SERVER, MCP_SERVER_ARGS};
use crate::machine::Runtime;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use toml_edit::{Item, Table};

/// Where `harness` keeps its MCP servers.
pub fn mcp_settings_path(
    harness: Runtime,
    project: Option<&Path>,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> PathBuf {
    match harness {
        Runtime::ClaudeCode => match (project, env("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty())) {
            (Some(dir), _) => dir.join(".mcp.json"),
            (None, Some(config_dir)) => PathBuf::from(config_dir).join(".claude.json"),
            (None, None) => home.join(".claude.json"),
        },
        Runtime::Codex => settings_path(harness, project, home, env),
    }
}

/// The server's entry in each harness's file.
pub const SERVER: Edits = Edits {
    claude_code: Edit { install: install_claude_code, uninstall: uninstall_claude_code },
    codex: Edit { install: install_codex, uninstall: uninstall_codex },
};

/// `text` with the server added (or, with `uninstall`, removed).
pub fn apply(harness: Runtime, text: &str, program: &str, uninstall: bool) -> Result<String, InstallError> {
    SERVER.apply(harness, text, program, uninstall)
}

fn is_ours_json(entry: &Value) -> bool {
    entry["command"].as_str().is_some_and(is_handoff) && entry["args"] == json!(MCP_SERVER_ARGS)
}

fn install_claude_code(text: &str, program: &str) -> Result<String, InstallError> {
    check_program_name(program)?;
    let mut settings = json_object(text)?;
    let servers = object_at(&mut settings, "mcpServers")?;
    match servers.get(MCP_SERVER) {
        Some(entry) if is_ours_json(entry) => return Ok(text.to_string()),
        Some(other) => return Err(shape("`mcpServers.handoff`", "handoff's own server", other)),
        None => {}
    }
    servers.insert(MCP_SERVER.into(), claude_code_entry(program));
    Ok(pretty(settings))
}

fn uninstall_claude_code(text: &str) -> Result<String, InstallError> {
    let mut settings = json_object(text)?;
    let Some(Value::Object(servers)) = settings.get_mut("mcpServers") else { return Ok(text.to_string()) };
    if !servers.get(MCP_SERVER).is_some_and(is_ours_json) {
        return Ok(text.to_string());
    }
    servers.remove(MCP_SERVER);
    if servers.is_empty() {
        settings.remove("mcpServers");
    }
    Ok(pretty(settings))
}

fn is_ours_toml(table: &Table) -> bool {
    let command = table.get("command").and_then(Item::as_str).is_some_and(is_handoff);
    let args: Option<Vec<&str>> =
        table.get("args").and_then(Item::as_array).map(|a| a.iter().filter_map(|v| v.as_str()).collect());
    command && args.as_deref() == Some(&MCP_SERVER_ARGS[..])
}

fn install_codex(text: &str, program: &str) -> Result<String, InstallError> {
    check_program_name(program)?;
    let mut doc = parse_toml(text)?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let Some(servers) = servers.as_table_mut() else {
        return Err(InstallError::Shape { at: "`mcp_servers`".into(), expected: "a table", found: "another value" });
    };
    match servers.get(MCP_SERVER).map(|i| i.as_table()) {
        Some(Some(t)) if is_ours_toml(t) => return Ok(text.to_string()),
        Some(_) => {
            return Err(InstallError::Shape {
                at: "`mcp_servers.handoff`".into(),
                expected: "handoff's own server",
                found: "another server",
            })
        }
        None => {}
    }
    let mut table = Table::new();
    for (key, entry) in codex_entry(program) {
        table.insert(key, Item::Value(entry));
    }
    servers.insert(MCP_SERVER, Item::Table(table));
    Ok(keep_line_endings(text, doc.to_string()))
}

fn uninstall_codex(text: &str) -> Result<String, InstallError> {
    let mut doc = parse_toml(text)?;
    let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_mut) else { return Ok(text.to_string()) };
    if !servers.get(MCP_SERVER).and_then(Item::as_table).is_some_and(is_ours_toml) {
        return Ok(text.to_string());
    }
    servers.remove(MCP_SERVER);
    if servers.is_empty() && servers.is_implicit() {
        doc.remove("mcp_servers");
    }
    Ok(keep_line_endings(text, doc.to_string()))
}

/// `handoff mcp install`: edits the harness's file, writing it only when it changed; answers the
/// file and whether it did.
pub fn install_settings(harness: Runtime, project: Option<&Path>, uninstall: bool) -> Result<(PathBuf, bool), String> {
    let home = std::env::var("HOME").map(PathBuf::from).unwrap_or_default();
    let path = mcp_settings_path(harness, project, &home, &|k| std::env::var(k).ok());
    let program = std::env::current_exe().map_err(|e| format!("where is this program? {e}"))?;
    let changed =
        crate::hook::edit_file(&path, |before| apply(harness, before, &program.to_string_lossy(), uninstall))?;
    Ok((path, changed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::env::CODEX_MCP_NAMES as CODEX_MCP_ENV_NAMES;

    const PROGRAM: &str = "/usr/local/bin/handoff";

    #[test]
    fn claude_code_gets_one_stdio_server_and_keeps_everything_else() {
        let before = r#"{"numStartups": 3, "mcpServers": {"db": {"type": "stdio", "command": "db-mcp"}}}"#;
        let once = apply(Runtime::ClaudeCode, before, PROGRAM, false).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["mcpServers"]["handoff"], json!({"type": "stdio", "command": PROGRAM, "args": ["mcp"]}));
        assert_eq!((v["numStartups"].clone(), v["mcpServers"]["db"]["command"].clone()), (json!(3), json!("db-mcp")));
        assert_eq!(
            apply(Runtime::ClaudeCode, &once, PROGRAM, false).unwrap(),
            once,
            "a second install changes nothing"
        );
        let removed: Value = serde_json::from_str(&apply(Runtime::ClaudeCode, &once, PROGRAM, true).unwrap()).unwrap();
        assert_eq!(
            removed,
            serde_json::from_str::<Value>(before).unwrap(),
            "uninstall removes exactly what install added"
        );
        assert!(!once.contains("TOKEN"), "no token, not even its name, in Claude Code's file");
    }

    #[test]
    fn codex_gets_the_server_by_name_with_the_variables_by_name_and_approved_tools() {
        let before = "model = \"o4\"\n\n[mcp_servers.db]\ncommand = \"db-mcp\"\n";
        let once = apply(Runtime::Codex, before, PROGRAM, false).unwrap();
        let doc: toml_edit::DocumentMut = once.parse().unwrap();
        let ours = doc["mcp_servers"]["handoff"].as_table().unwrap();
        assert_eq!(ours["command"].as_str(), Some(PROGRAM));
        assert_eq!(
            ours["env_vars"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect::<Vec<_>>(),
            CODEX_MCP_ENV_NAMES
        );
        assert_eq!(ours["default_tools_approval_mode"].as_str(), Some("approve"));
        assert!(once.starts_with(before), "every byte before it stays: {once}");
        assert_eq!(apply(Runtime::Codex, &once, PROGRAM, false).unwrap(), once);
        assert_eq!(
            apply(Runtime::Codex, &once, PROGRAM, true).unwrap(),
            before,
            "uninstall gives the file back byte for byte"
        );
        assert_eq!(apply(Runtime::Codex, "", PROGRAM, true).unwrap(), "");
        assert_eq!(
            apply(Runtime::Codex, &apply(Runtime::Codex, "", PROGRAM, false).unwrap(), PROGRAM, true).unwrap(),
            ""
        );
    }

    #[test]
    fn a_server_named_handoff_that_is_not_ours_is_refused_and_left_alone() {
        let json_other = r#"{"mcpServers": {"handoff": {"command": "other"}}}"#;
        assert!(matches!(apply(Runtime::ClaudeCode, json_other, PROGRAM, false), Err(InstallError::Shape { .. })));
        assert_eq!(apply(Runtime::ClaudeCode, json_other, PROGRAM, true).unwrap(), json_other);
        let toml_other = "[mcp_servers.handoff]\ncommand = \"other\"\n";
        assert!(matches!(apply(Runtime::Codex, toml_other, PROGRAM, false), Err(InstallError::Shape { .. })));
        assert_eq!(apply(Runtime::Codex, toml_other, PROGRAM, true).unwrap(), toml_other);
        assert!(matches!(apply(Runtime::Codex, "", "/bin/other", false), Err(InstallError::Program { .. })));
    }

    #[test]
    fn claude_codes_servers_live_in_its_state_file_or_the_projects_mcp_json() {
        let home = Path::new("/h");
        let none = |_: &str| None;
        assert_eq!(mcp_settings_path(Runtime::ClaudeCode, None, home, &none), PathBuf::from("/h/.claude.json"));
        assert_eq!(
            mcp_settings_path(Runtime::ClaudeCode, Some(Path::new("/p")), home, &none),
            PathBuf::from("/p/.mcp.json")
        );
        let dir = |k: &str| (k == "CLAUDE_CONFIG_DIR").then(|| "/c".to_string());
        assert_eq!(mcp_settings_path(Runtime::ClaudeCode, None, home, &dir), PathBuf::from("/c/.claude.json"));
        assert_eq!(mcp_settings_path(Runtime::Codex, None, home, &none), PathBuf::from("/h/.codex/config.toml"));
    }
}
