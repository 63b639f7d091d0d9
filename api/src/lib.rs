//! The hand-off service's HTTP contract, apart from the runtime: the route table, what the
//! Worker decides of a request before an object sees it (`admission`), how a request is read
//! (bodies, queries, the idempotency fingerprint), how a bearer token is checked, which status
//! each error code answers, and every answer's shape and bytes (`view`, `wire`). Depends on
//! `handoff-core`, never on `worker`.

pub mod admission;
pub mod conditional;
pub mod device;
pub mod error;
pub mod input;
pub mod machines;
pub mod notifications;
pub mod protocol;
pub mod routes;
pub mod token;
pub mod view;
pub mod wire;
