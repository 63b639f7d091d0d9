//! The hand-off service's Worker: the router and its Durable Objects. They load, ask
//! `handoff-core` what a command does, store, answer and wake; the HTTP contract they speak
//! is `handoff-api`. Compiled only for wasm32 (natively this crate is empty).

#[cfg(target_arch = "wasm32")]
mod alarm;
#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod clock;
#[cfg(target_arch = "wasm32")]
mod digest;
#[cfg(target_arch = "wasm32")]
mod enrolments_object;
#[cfg(target_arch = "wasm32")]
mod follows;
#[cfg(target_arch = "wasm32")]
mod handoff_object;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod json_state;
#[cfg(target_arch = "wasm32")]
mod machines_object;
#[cfg(target_arch = "wasm32")]
mod owner_index;
#[cfg(target_arch = "wasm32")]
mod router;
#[cfg(target_arch = "wasm32")]
mod sqlite;
#[cfg(target_arch = "wasm32")]
mod webcrypto;
