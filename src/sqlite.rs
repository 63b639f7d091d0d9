//! What both Durable Objects' SQL shares: the runtime's synchronous transaction, and a count.
//! Each object keeps its own statements and tables.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::{Error, Result, SqlStorage, SqlStorageValue, Storage};

/// Runs `body` in one `storage.transactionSync`: if it returns an error (a statement's, or its
/// own), the runtime rolls back every statement it ran, and nothing of it is stored.
pub fn transaction_sync(
    storage: &Storage,
    body: impl FnOnce() -> std::result::Result<(), JsValue> + 'static,
) -> Result<()> {
    let run = Closure::once(move || body().map(|()| JsValue::UNDEFINED));
    let raw: &JsValue = storage.as_raw().as_ref();
    let transaction_sync: js_sys::Function = js_sys::Reflect::get(raw, &JsValue::from_str("transactionSync"))
        .map_err(Error::from)?
        .dyn_into()
        .map_err(|_| Error::RustError("storage.transactionSync is missing".into()))?;
    transaction_sync.call1(raw, run.as_ref().unchecked_ref()).map(|_| ()).map_err(Error::from)
}

#[derive(serde::Deserialize)]
struct CountRow {
    n: i64,
}

/// The `n` of a `SELECT COUNT(*) AS n …` query.
pub fn count(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> Result<i64> {
    Ok(sql.exec(query, args)?.to_array::<CountRow>()?.first().map_or(0, |r| r.n))
}
