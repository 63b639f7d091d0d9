//! Setting up: a development token minted from the signing key, and the hooks and MCP server
//! added to (or removed from) a harness's settings.

use super::shared::{Failure, Out};
use crate::hook;
use crate::machine::Runtime;
use serde_json::json;

/// Lifetime of an owner token minted by `handoff token --owner` unless `--ttl` says.
const OWNER_TOKEN_TTL_S_DEFAULT: i64 = 12 * 60 * 60;

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    #[arg(long)]
    pub owner: String,
    /// The hand-off id a machine token is for.
    #[arg(long, value_name = "HID")]
    pub machine: Option<String>,
    /// Seconds an owner token stays valid (machine tokens: 24 h, as the service mints them).
    #[arg(long, value_name = "SECONDS", default_value_t = OWNER_TOKEN_TTL_S_DEFAULT)]
    pub ttl: i64,
}

impl TokenArgs {
    pub fn run(self, out: &Out) -> Result<(), Failure> {
        let (owner, ttl_s) = (self.owner.as_str(), self.ttl);
        let key = std::env::var(crate::machine::env::ENV_SIGNING_KEY).unwrap_or_default();
        if key.is_empty() {
            return Err(Failure::Credential(
                "HANDOFF_SIGNING_KEY is not set: refusing to mint a token without it".into(),
            ));
        }
        if !handoff_api::input::is_id(owner) {
            return Err(Failure::Usage("--owner: 1-128 characters of [A-Za-z0-9._:-]".into()));
        }
        if ttl_s <= 0 {
            return Err(Failure::Usage("--ttl: a positive number of seconds".into()));
        }
        let now_s =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let token = match self.machine.as_deref() {
            Some(hid) if handoff_api::input::is_handoff_id(hid) => {
                handoff_api::token::machine_token(owner, hid, key.as_bytes(), now_s)
            }
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
}

/// What `hook install` and `mcp install` take.
#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    #[arg(value_parser = parse_harness)]
    pub harness: Runtime,
    /// The project's settings instead of the user's.
    #[arg(long, value_name = "DIR")]
    pub project: Option<std::path::PathBuf>,
    /// Remove exactly what install added.
    #[arg(long)]
    pub uninstall: bool,
}

impl InstallArgs {
    /// `hook install`: each file it edited, and the step the harness still needs.
    pub fn install_hooks(&self) -> Result<(), Failure> {
        let files =
            hook::install_settings(self.harness, self.project.as_deref(), self.uninstall).map_err(Failure::Usage)?;
        for (path, changed) in files {
            if changed {
                println!("hooks {} {}", self.verb(), path.display());
            } else {
                println!("nothing to change in {}", path.display());
            }
        }
        match (self.harness, self.uninstall) {
            (Runtime::Codex, false) => println!("{}", hook::install::CODEX_TRUST_STEP),
            (Runtime::ClaudeCode, false) => println!("{}", hook::install::CLAUDE_CODE_MODE_STEP),
            (_, true) => {}
        }
        Ok(())
    }

    /// `mcp install`: the file it edited.
    pub fn install_mcp_server(&self) -> Result<(), Failure> {
        let (path, changed) =
            crate::mcp::install::install_settings(self.harness, self.project.as_deref(), self.uninstall)
                .map_err(Failure::Usage)?;
        if changed {
            println!("the handoff MCP server {} {}", self.verb(), path.display());
        } else {
            println!("nothing to change in {}", path.display());
        }
        Ok(())
    }

    fn verb(&self) -> &'static str {
        if self.uninstall {
            "removed from"
        } else {
            "installed in"
        }
    }
}

fn parse_harness(word: &str) -> Result<Runtime, String> {
    Runtime::parse(word).ok_or_else(|| format!("{word}: one of claude-code, codex"))
}
