//! The machine side's one vocabulary, which `launch`, `serve`, `mcp` and the hooks import and
//! never each other: the runtimes ([`Runtime`]), the `HANDOFF_*` environment contract
//! ([`env`]), every path in the state folder ([`paths`]) with the hand-off's lock, the `handoff`
//! MCP server as each runtime declares it ([`server`]), the process-group stopper ([`group`]),
//! and the start of a turn ([`turn::start_turn`]): find the program, write the token file, set
//! the environment, then prepare, accept, brief and add the owner's words.
//!
//! Architecture invariant: no file under `cli/src` reaches into another command's module
//! (`launch`, `serve`, `mcp`); what two of them share lives here (`cli/tests/imports.rs`).

pub mod env;
pub mod group;
pub mod paths;
pub mod server;
pub mod turn;

use crate::client::Reach;

/// The briefing budget Claude Code gets unless `--budget` says: it can read the whole package
/// (the `handoff://package.md` resource of its MCP server) whenever the briefing leaves
/// something out.
pub const CLAUDE_CODE_BUDGET_BYTES: u32 = 16 * 1024;
/// The briefing budget Codex gets unless `--budget` says: twice Claude Code's, because in its
/// sandbox, with no network, the briefing is all of the package it will ever see.
pub const CODEX_BUDGET_BYTES: u32 = 32 * 1024;
const _: () = assert!(CODEX_BUDGET_BYTES > CLAUDE_CODE_BUDGET_BYTES, "the runtime that cannot ask for more gets more");

/// The agent runtimes (harnesses) this machine runs: the one name for each, whether it is
/// launched, served, or has its settings edited by `hook install` and `mcp install`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// Claude Code: hooks in `settings.json`; served in print mode, one process per turn.
    ClaudeCode,
    /// Codex: `notify` in `config.toml`; served through its app-server, one per turn.
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
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_is_read_back_from_its_name_and_no_other_name_is_one() {
        for r in Runtime::ALL {
            assert_eq!(Runtime::parse(r.name()), Some(r));
        }
        assert_eq!(Runtime::parse("claude"), None);
    }
}
