//! The one SQL helper the hand-off object's test hook uses; each object keeps its own
//! statements and tables.
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
