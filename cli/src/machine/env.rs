//! The `HANDOFF_*` environment contract: every variable the CLI reads or hands a harness, its
//! hooks and its MCP server, named once.

/// The API's address.
pub const ENV_URL: &str = "HANDOFF_URL";
/// The hand-off's id.
pub const ENV_ID: &str = "HANDOFF_ID";
/// A token, directly. The launcher and serve take it out of a harness's environment, whose
/// shell would hand it to every command the model runs.
pub const ENV_TOKEN: &str = "HANDOFF_TOKEN";
/// A 0600 file holding the token: what a harness hands its hooks and MCP server in its place
/// (and `handoff serve` reads again when the API says the token expired).
pub const ENV_TOKEN_FILE: &str = "HANDOFF_TOKEN_FILE";
/// The hooks' (and the MCP server's) state folder, when set.
pub const ENV_STATE_DIR: &str = "HANDOFF_STATE_DIR";
/// Set to `1` in a turn `handoff serve` runs: nobody is at the terminal.
pub const ENV_SERVED: &str = "HANDOFF_SERVED";
/// How long a hook (or `ask_owner`) waits for the owner's answer, in whole seconds.
pub const ENV_ANSWER_WAIT_S: &str = "HANDOFF_ANSWER_WAIT_S";
/// How long a served turn's question waits for the owner, set for `handoff serve`.
pub const ENV_SERVE_ANSWER_WAIT_S: &str = "HANDOFF_SERVE_ANSWER_WAIT_S";
/// Lets the token go over plain `http://` to a host off this machine.
pub const ENV_INSECURE_HTTP: &str = "HANDOFF_INSECURE_HTTP";
/// The model's context window in tokens, when a hook should not guess it.
pub const ENV_CONTEXT_WINDOW: &str = "HANDOFF_CONTEXT_WINDOW";
/// The signing key `handoff setup` mints a local owner's token with.
pub const ENV_SIGNING_KEY: &str = "HANDOFF_SIGNING_KEY";

/// Every variable the launcher and serve set in a harness's environment, as the prompt names them.
pub const SESSION_NAMES: [&str; 3] = [ENV_URL, ENV_ID, ENV_TOKEN_FILE];
/// What Codex passes its stdio MCP server by name (it passes only an allowlist of the
/// environment, `codex-rs/rmcp-client/src/utils.rs`): the session's address and id, its token
/// (in a file when launched, in the variable for a session started by hand), and the state
/// folder where the server notes that it served.
pub const CODEX_MCP_NAMES: [&str; 5] = [ENV_URL, ENV_ID, ENV_TOKEN_FILE, ENV_TOKEN, ENV_STATE_DIR];
/// What a served turn's `handoff` server reads beyond those: that it is served, and the wait.
pub const SERVED_MCP_NAMES: [&str; 2] = [ENV_SERVED, ENV_ANSWER_WAIT_S];
/// The variables the MCP server reads, as the launcher names them.
pub const MCP_NAMES: [&str; 3] = [ENV_URL, ENV_ID, ENV_TOKEN];
/// Codex's override that keeps the session's token variables out of every command the model
/// runs: its `shell_environment_policy` passes the whole environment by default
/// (`inherit = "all"`, with its own `*KEY*`/`*SECRET*`/`*TOKEN*` excludes ignored), while its
/// hooks and `notify` get Codex's own environment and its MCP servers the names they list.
pub const CODEX_SHELL_EXCLUDE: &str = r#"shell_environment_policy.exclude=["HANDOFF_TOKEN", "HANDOFF_TOKEN_FILE"]"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_exclude_names_both_token_variables() {
        assert!(CODEX_SHELL_EXCLUDE.contains(&format!("\"{ENV_TOKEN}\"")));
        assert!(CODEX_SHELL_EXCLUDE.contains(&format!("\"{ENV_TOKEN_FILE}\"")));
    }
}
