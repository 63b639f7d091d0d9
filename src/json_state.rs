//! What the machines' two objects share (`Enrolments`, `Machines`): each holds one small,
//! bounded value of the core's, kept whole as one JSON text in SQLite, loaded once per object
//! life. For each ask it loads, hands the ask to the api's answer function (which applies the
//! core's rules), stores the value if it changed, and answers; it decides nothing.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::store_failed;
use crate::clock::now_ms;
use handoff_api::error::ApiError;
use handoff_api::machines::Answer;
use handoff_core::decider::JSON;
use handoff_core::time::EpochMs;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use worker::{web_sys, Result, SqlStorage, State};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS state (k INTEGER PRIMARY KEY, v TEXT NOT NULL)";

/// The stored value, or the default where none was ever stored: reading creates no table, so
/// an owner whose creates only ask (no machine enrolled) leaves nothing on disk.
fn load<T: DeserializeOwned + Default>(sql: &SqlStorage) -> Result<T> {
    if crate::sqlite::count(
        sql,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'state'",
        vec![],
    )? == 0
    {
        return Ok(T::default());
    }
    let texts = crate::sqlite::texts(crate::sqlite::rows(sql, "SELECT v FROM state WHERE k = 1", None)?)?;
    match texts.first() {
        // From a slice, as every ask is read: one reader's instance of each type's deserializer.
        Some(v) => serde_json::from_slice(v.as_bytes()).map_err(|e| worker::Error::RustError(e.to_string())),
        None => Ok(T::default()),
    }
}

fn store<T: Serialize>(sql: &SqlStorage, value: &T) -> Result<()> {
    sql.exec(TABLE, None)?;
    let text = serde_json::to_string(value).map_err(|e| worker::Error::RustError(e.to_string()))?;
    sql.exec("INSERT OR REPLACE INTO state (k, v) VALUES (1, ?)", vec![text.into()])?;
    Ok(())
}

/// One object's value, loaded once.
pub struct Held<T> {
    state: State,
    value: RefCell<Option<T>>,
}

impl<T: DeserializeOwned + Serialize + Default> Held<T> {
    pub fn new(state: State) -> Held<T> {
        Held { state, value: RefCell::new(None) }
    }

    /// Reads one ask from `req`, answers it by `answer`, and stores what changed. A failed
    /// store makes the object forget its value (it loads again) and answers the one 503.
    pub async fn serve<A: DeserializeOwned>(
        &self,
        req: web_sys::Request,
        answer: fn(&mut T, A, EpochMs) -> Answer,
    ) -> Result<web_sys::Response> {
        let ask: A = match crate::http::read_ask(&req).await {
            Ok(Ok(ask)) => ask,
            Ok(Err(e)) => return store_failed("an unreadable machines ask", &e),
            Err(e) => return store_failed("an unreadable machines ask", &e),
        };
        let sql = self.state.storage().sql();
        let mut held = self.value.borrow_mut();
        if held.is_none() {
            match load(&sql) {
                Ok(value) => *held = Some(value),
                Err(e) => return store_failed("loading a machines object", &e),
            }
        }
        let Some(value) = held.as_mut() else {
            return crate::http::refusal(&ApiError::unavailable());
        };
        let (answered, changed) = answer(value, ask, now_ms());
        if changed {
            if let Err(e) = store(&sql, value) {
                *held = None;
                return store_failed("storing a machines object", &e);
            }
        }
        match answered {
            Ok((204, _)) => Ok(crate::http::Plain::new(204, JSON, Vec::new(), false, Vec::new()).response()?),
            Ok((status, body)) => Ok(crate::http::Plain::new(status, JSON, body, false, Vec::new()).response()?),
            Err(refusal) => crate::http::refusal(&refusal),
        }
    }
}
