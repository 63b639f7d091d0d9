//! SQL helpers both Durable Objects use; each object keeps its own statements and tables.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use worker::{Result, SqlStorage, SqlStorageValue};

#[derive(serde::Deserialize)]
struct CountRow {
    n: i64,
}

/// The `n` of a `SELECT COUNT(*) AS n …` query.
pub fn count(sql: &SqlStorage, query: &str, args: Vec<SqlStorageValue>) -> Result<i64> {
    Ok(sql.exec(query, args)?.to_array::<CountRow>()?.first().map_or(0, |r| r.n))
}

/// Whether `table` exists, from the catalogue alone: reading it writes nothing, so an object
/// asked about an id never created stays empty.
pub fn table_exists(sql: &SqlStorage, table: &str) -> Result<bool> {
    let n = count(sql, "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?", vec![table.into()])?;
    Ok(n > 0)
}
