//! The runtime's SHA-256 as the core's native digest (`handoff_core::digest`): the entry hands
//! the hand-off object `node:crypto`'s `createHash`, native code, in place of `sha2` compiled
//! for size. It is handed again to every object made after a trap, in the fresh instance.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::console_error;

#[wasm_bindgen]
extern "C" {
    /// A `node:crypto` `Hash`.
    type Hash;
    #[wasm_bindgen(method, catch)]
    fn update(this: &Hash, data: &[u8]) -> Result<Hash, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn digest(this: &Hash) -> Result<Vec<u8>, JsValue>;
}

thread_local! {
    static CREATE_HASH: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

/// Installs `create_hash` (absent where the entry predates it: software answers then).
pub fn install(create_hash: Option<js_sys::Function>) {
    let Some(create_hash) = create_hash else { return };
    CREATE_HASH.with(|c| *c.borrow_mut() = Some(create_hash));
    handoff_core::digest::install(native);
}

/// Why the runtime's digest gave none (the software one answers instead).
enum Failed {
    Threw(JsValue),
    Length(usize),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Threw(e) => write!(f, "it threw {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))),
            Failed::Length(n) => write!(f, "it gave {n} bytes, not 32"),
        }
    }
}

fn native(parts: &[&[u8]]) -> Option<[u8; 32]> {
    let digest = CREATE_HASH.with(|c| {
        let c = c.borrow();
        let create_hash = c.as_ref()?;
        let run = || -> Result<Vec<u8>, JsValue> {
            let hash: Hash = create_hash.call1(&JsValue::NULL, &JsValue::from_str("sha256"))?.unchecked_into();
            for part in parts {
                hash.update(part)?;
            }
            hash.digest()
        };
        Some(
            run()
                .map_err(Failed::Threw)
                .and_then(|d| <[u8; 32]>::try_from(d.as_slice()).map_err(|_| Failed::Length(d.len()))),
        )
    })?;
    digest.map_err(|e| console_error!("the runtime's SHA-256 failed ({e}); sha2 answers")).ok()
}
