//! The `handoff` MCP server a session records through, as each runtime declares it: in Claude
//! Code's `mcpServers` form (`--mcp-config`, `mcp install claude-code`) and in Codex's
//! `[mcp_servers.handoff]` (`-c` overrides, `mcp install codex`).

use super::env::CODEX_MCP_NAMES;

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
        ("env_vars", list(&CODEX_MCP_NAMES)),
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
