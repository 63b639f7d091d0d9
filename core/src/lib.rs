//! The hand-off service's rules, as plain Rust: no HTTP, no `worker` types. The Worker
//! (`src/`) loads a value, asks this crate what a command does to it, stores the answer and
//! wakes whoever waits; the HTTP contract (`api/`) reads requests into the values here.

pub mod applied;
pub mod listed;
pub mod error;
pub mod limits;
pub mod time;
pub mod ids;
pub mod json;
pub mod text;
pub mod role;
pub mod turn;
pub mod rows;
pub mod suggestion;
pub mod runtimes;
pub mod handoff;
pub mod actions;
pub mod work;
pub mod digest;
pub mod package;
pub mod briefing;
pub mod waiters;
pub mod watch;
pub mod idempotency;
pub mod outbox;
pub mod decider;
pub mod hooks;
pub mod question;
pub mod notice;
pub mod owner;
pub mod retention;
#[cfg(any(test, feature = "golden"))]
pub mod golden;
