//! What both Durable Objects' SQL shares: a statement run with its values bound in one call, the
//! runtime's synchronous transaction, the rows of a query, and a count. Each object keeps its own
//! statements and tables.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::{Error, Result, SqlStorage, SqlStorageValue, Storage};

// The runtime's SQL and storage calls, bound directly: a statement crosses into the runtime
// once with its values in one slice, where the `worker` crate's `exec` pushed each value into
// an array (a crossing each) and checked each integer with `Number.isSafeInteger` (another).
#[wasm_bindgen]
extern "C" {
    type Sql;
    #[wasm_bindgen(method, catch, variadic, js_name = exec)]
    fn exec_with(this: &Sql, query: &str, values: &[JsValue]) -> std::result::Result<Cursor, JsValue>;
    type Cursor;
    #[wasm_bindgen(method, catch)]
    fn raw(this: &Cursor) -> std::result::Result<JsValue, JsValue>;
    type Transactions;
    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(this: &Transactions, body: &JsValue) -> std::result::Result<JsValue, JsValue>;
}

/// A bound value as the runtime takes it. An integer past 2^53 goes as the nearest float, as
/// the `worker` crate's conversion sends it too (it only logs it).
fn js(value: SqlStorageValue) -> JsValue {
    match value {
        SqlStorageValue::Null => JsValue::NULL,
        SqlStorageValue::Boolean(b) => JsValue::from_bool(b),
        SqlStorageValue::Integer(i) => JsValue::from_f64(i as f64),
        SqlStorageValue::Float(f) => JsValue::from_f64(f),
        SqlStorageValue::String(s) => JsValue::from_str(&s),
        SqlStorageValue::Blob(bytes) => js_sys::Uint8Array::from(bytes.as_slice()).into(),
    }
}

/// Runs one statement with `args` bound: its values cross into the runtime in one call.
pub fn exec(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> std::result::Result<(), JsValue> {
    run(sql, query, args).map(drop)
}

fn run(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> std::result::Result<Cursor, JsValue> {
    let values: Vec<JsValue> = args.into_iter().map(js).collect();
    let raw: &JsValue = sql.as_ref();
    raw.unchecked_ref::<Sql>().exec_with(query, &values)
}

/// The most values one statement binds: the runtime's limit for a Durable Object's SQLite
/// (Cloudflare's "maximum bound parameters per query", 100), far under SQLite's own default
/// (`SQLITE_MAX_VARIABLE_NUMBER`, 32,766).
pub const BOUND_PARAMETERS_MAX: usize = 100;

/// Runs `body` in one `storage.transactionSync`: if it returns an error (a statement's, or its
/// own), the runtime rolls back every statement it ran, and nothing of it is stored.
pub fn transaction_sync(
    storage: &Storage,
    body: impl FnOnce() -> std::result::Result<(), JsValue> + 'static,
) -> Result<()> {
    let run = Closure::once(move || body().map(|()| JsValue::UNDEFINED));
    let raw: &JsValue = storage.as_raw().as_ref();
    raw.unchecked_ref::<Transactions>().transaction_sync(run.as_ref()).map(drop).map_err(Error::from)
}

/// The `n` of a `SELECT COUNT(*) AS n …` query.
pub fn count(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> Result<i64> {
    match rows(sql, query, args)?.first_mut() {
        Some(row) => row.int(0),
        None => Ok(0),
    }
}

/// The rows of a query, each read by the position of its columns: one reader for every
/// statement, where a row type read by `to_array` compiled a deserializer of its own
/// (serde_wasm_bindgen's), about 10 KB of the gzipped `.wasm` over both objects. The rows cross
/// as one array of arrays (`Array.from(cursor.raw())`), each cell read only when asked for.
pub fn rows(sql: &SqlStorage, query: &str, args: impl Into<Option<Vec<SqlStorageValue>>>) -> Result<Vec<Cells>> {
    let cursor = run(sql, query, args.into().unwrap_or_default())?;
    let all = js_sys::Array::from(&cursor.raw()?);
    let mut rows = Vec::with_capacity(all.length() as usize);
    for row in all.iter() {
        rows.push(Cells(row.unchecked_into()));
    }
    Ok(rows)
}

/// Each of `rows` read by `read`, or the first error: a loop, where collecting into a `Result`
/// compiled an adapter for each row type.
pub fn each<T>(rows: Vec<Cells>, mut read: impl FnMut(Cells) -> Result<T>) -> Result<Vec<T>> {
    let mut read_all = Vec::with_capacity(rows.len());
    for row in rows {
        read_all.push(read(row)?);
    }
    Ok(read_all)
}

/// The first column of each of `rows`, text (a table's or a column's name, a stored value).
pub fn texts(rows: Vec<Cells>) -> Result<Vec<String>> {
    each(rows, |mut row| row.text(0))
}

/// One row's columns, in the statement's order, as the runtime gave them.
pub struct Cells(js_sys::Array);

impl Cells {
    /// Column `i`, text.
    pub fn text(&mut self, i: usize) -> Result<String> {
        self.opt_text(i)?.ok_or_else(|| unexpected(i, "text", "NULL"))
    }

    /// Column `i`, text or NULL.
    pub fn opt_text(&mut self, i: usize) -> Result<Option<String>> {
        let cell = self.0.get(i as u32);
        if cell.is_null() || cell.is_undefined() {
            return Ok(None);
        }
        cell.as_string().map(Some).ok_or_else(|| unexpected(i, "text", "another type"))
    }

    /// Column `i`, an integer.
    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?.ok_or_else(|| unexpected(i, "an integer", "NULL"))
    }

    /// Column `i`, an integer or NULL. Past 2^53 the runtime hands a number over as a float,
    /// which still reads as one.
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        let cell = self.0.get(i as u32);
        if cell.is_null() || cell.is_undefined() {
            return Ok(None);
        }
        match cell.as_f64() {
            Some(n) if n.fract() == 0.0 => Ok(Some(n as i64)),
            _ => Err(unexpected(i, "an integer", "another type")),
        }
    }
}

fn unexpected(i: usize, wanted: &str, found: &str) -> Error {
    Error::RustError(format!("column {i}: {wanted} expected, {found} found"))
}
