//! What happens after a trap. The release build aborts on a panic (`panic = "abort"`): the
//! wasm instance traps where it panicked, and nothing above it unwinds, so the object that was
//! running may hold a change in memory it never stored, and a borrow it never gave back. The
//! entry module (`src/entry.mjs`) has no guard around calls, so the answer is here: the panic
//! hook counts the trap, and an object made before it aborts itself (`ctx.abort()`, after
//! which the runtime makes it again from storage) the next time the runtime calls it. The
//! Worker holds nothing between requests and goes on.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::DurableObjectState;

thread_local! {
    /// How many panics this instance has had.
    static TRAPS: Cell<u64> = const { Cell::new(0) };
}

#[wasm_bindgen]
extern "C" {
    /// An object's `ctx`, for the one method of it the `worker` crate does not bind.
    pub type Ctx;
    /// `ctx.abort(reason)`: the runtime resets the object; this call does not return.
    #[wasm_bindgen(method, js_name = abort)]
    fn abort(this: &Ctx, reason: &str);
}

impl Ctx {
    pub fn of(state: &DurableObjectState) -> Ctx {
        JsValue::from(state).unchecked_into()
    }
}

/// Run once, when the instance starts (the entry module calls `__wbindgen_start`).
#[wasm_bindgen(start)]
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        TRAPS.with(|t| t.set(t.get().wrapping_add(1)));
        worker::console_error!("panic (the objects made before it will reset): {info}");
    }));
}

/// When an object was made: the traps before it.
#[derive(Clone, Copy)]
pub struct Born(u64);

impl Born {
    pub fn now() -> Born {
        Born(TRAPS.with(Cell::get))
    }

    /// Aborts the object (`state` is its own) when a trap has happened since it was made; a
    /// no-op otherwise.
    pub fn check(self, state: &Ctx) {
        if TRAPS.with(Cell::get) != self.0 {
            state.abort("a panic since this object was made: reset, to read again what is stored");
        }
    }
}
