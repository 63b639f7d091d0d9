//! The hand-off service's HTTP contract, apart from the runtime: how a request is read
//! (bodies, queries, the idempotency fingerprint), how a bearer token is checked, which
//! status each error code answers, every answer's shape (`view`), and what the Worker asks a hand-off's object. Depends on
//! `handoff-core`, never on `worker`.

pub mod conditional;
pub mod error;
pub mod idempotency;
pub mod input;
pub mod token;
pub mod protocol;
pub mod view;
