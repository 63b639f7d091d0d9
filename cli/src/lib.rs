//! A small typed, blocking client of the hand-off API, and the pure pieces of the `handoff`
//! command line built on it.
//!
//! - [`client`]: every route of the API, one method each; refusals as [`client::Refusal`] with
//!   the API's [`code::ErrorCode`]; retries with jittered backoff for connection errors, 429
//!   and 503 only (never another 4xx); [`client::Client::follow`], a wait loop that follows
//!   versions.
//!   Its request bodies and answers are the service's own types, from `handoff-api` and
//!   `handoff-core`, re-exported there.
//! - [`output`]: the human lines and exit codes, as pure functions of answers.
//! - [`command`]: the `handoff` command line, one args type per command with the method that
//!   runs it; `main.rs` only parses, dispatches and exits.
//! - [`git`]: `git diff --numstat` read into paths and counts, nothing else.
//! - [`hook`]: the machine reporters an agent harness runs (Claude Code's hooks, Codex's
//!   `notify`), their spool and their settings; [`detect`]: the runtimes this machine has.
//! - [`launch`]: `handoff launch`, which starts the runtime a turn was handed to, briefed
//!   from its package, and records what a session without network left.
//! - [`serve`]: `handoff serve`, which runs every turn the owner opens, on this machine.
//! - [`daemon`]: `handoff serve --machine`, one daemon per enrolled machine, which serves every
//!   session created for it through a `handoff serve ID` of its own, each in its workspace.
//! - [`machine`]: the machine side's one vocabulary, which `launch`, `serve`, `mcp` and the
//!   hooks share: the runtimes, the `HANDOFF_*` variables, the state folder's paths, the
//!   process-group stopper and the start of a turn. No command's module imports another's.
//! - [`workspace`]: what keeps the workspace, which the model writes, from deciding for the owner.
//!
//! Architecture invariant: nothing here knows the turn machine's rules; the API decides and
//! this crate reports what it said. No code outside [`client`] does I/O with the service.

pub mod ask;
pub mod client;
pub mod code;
pub mod command;
pub mod daemon;
pub mod detect;
pub mod git;
pub mod hook;
pub mod launch;
pub mod machine;
pub mod mcp;
pub mod output;
pub mod private;
pub mod serve;
pub mod workspace;

pub use client::{Client, Error, Refusal};
pub use code::ErrorCode;
