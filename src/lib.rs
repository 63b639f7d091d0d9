//! The hand-off service. The pure core (no `worker` types) is compiled everywhere and
//! tested natively; the Worker adapters exist only on `wasm32`.

pub mod error;
pub mod limits;
pub mod time;
pub mod turn;
pub mod input;
pub mod token;
pub mod index;
pub mod protocol;
pub mod suggestion;
pub mod handoff;
pub mod work;
pub mod package;
pub mod briefing;
pub mod waiters;
pub mod idempotency;

#[cfg(target_arch = "wasm32")]
mod bindings;
#[cfg(target_arch = "wasm32")]
mod handoff_object;
#[cfg(target_arch = "wasm32")]
mod owner_index;
#[cfg(target_arch = "wasm32")]
mod router;
#[cfg(target_arch = "wasm32")]
mod sqlite;
