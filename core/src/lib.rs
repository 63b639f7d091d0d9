//! The hand-off service's rules, as plain Rust: no HTTP, no `worker` types. The Worker
//! (`src/`) loads a value, asks this crate what a command does to it, stores the answer and
//! wakes whoever waits; the HTTP contract (`api/`) reads requests into the values here.

pub mod actions;
pub mod applied;
pub mod briefing;
pub mod decider;
pub mod digest;
pub mod enrolment;
pub mod error;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod follows;
#[cfg(any(test, feature = "golden"))]
pub mod golden;
pub mod handoff;
pub mod hooks;
pub mod idempotency;
pub mod ids;
pub mod json;
pub mod limits;
pub mod listed;
pub mod machines;
pub mod notice;
pub mod order;
pub mod outbox;
pub mod owner;
pub mod package;
pub mod placement;
pub mod question;
pub mod retention;
pub mod role;
pub mod rows;
pub mod runtimes;
pub mod suggestion;
pub mod text;
pub mod time;
pub mod timeline;
pub mod turn;
pub mod waiters;
pub mod watch;
pub mod work;
