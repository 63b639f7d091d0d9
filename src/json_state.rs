//! What the machines' two objects share (`Enrolments`, `Machines`): each holds one small,
//! bounded value of the core's, kept whole as one JSON text in SQLite, loaded once per object
//! life. For each ask it loads, hands the ask to the api's answer function (which applies the
//! core's rules), stores the value if it changed, and answers; it decides nothing. The
//! `Machines` object's held follows are carried out here too, as its answers say
//! (`crate::follows`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::bindings::store_failed;
use crate::clock::now_ms;
use crate::follows::Followers;
use handoff_api::error::ApiError;
use handoff_api::machines::{Answer, Follow};
use handoff_api::protocol::{self, Unreadable};
use handoff_core::decider::JSON;
use handoff_core::time::EpochMs;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
use worker::{web_sys, Result, SqlStorage, State};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS state (k INTEGER PRIMARY KEY, v TEXT NOT NULL)";

/// An answer's status and body, or its refusal.
type ApiAnswered = std::result::Result<(u16, Vec<u8>), ApiError>;

/// An object's value: what it answers an ask's wire text with, and its stored text. Behind a
/// trait object, so that the loop below (its awaits, the SQL, the answer) is compiled once for
/// both objects; only reading an ask and the value is each type's own.
pub trait Kept {
    fn answer(&mut self, ask: &str, now: EpochMs) -> std::result::Result<Answer, Unreadable>;
    fn text(&self) -> serde_json::Result<String>;
}

/// Reads an ask of type `A` from its wire text and answers it by `answer`.
pub fn answer_by<T, A: DeserializeOwned>(
    value: &mut T,
    ask: &str,
    now: EpochMs,
    answer: fn(&mut T, A, EpochMs) -> Answer,
) -> std::result::Result<Answer, Unreadable> {
    Ok(answer(value, protocol::decode(ask)?, now))
}

/// The value stored as `text`, or the default where none was ever stored.
pub fn read<T: DeserializeOwned + Default + Kept + 'static>(text: Option<&str>) -> serde_json::Result<Box<dyn Kept>> {
    // From a slice, as every ask is read: one reader's instance of each type's deserializer.
    let value: T = match text {
        Some(text) => handoff_core::json::from_slice(text.as_bytes())?,
        None => T::default(),
    };
    Ok(Box::new(value))
}

/// The stored text: reading creates no table, so an owner whose creates only ask (no machine
/// enrolled) leaves nothing on disk.
fn load(sql: &SqlStorage) -> Result<Option<String>> {
    if crate::sqlite::count(
        sql,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'state'",
        vec![],
    )? == 0
    {
        return Ok(None);
    }
    let texts = crate::sqlite::texts(crate::sqlite::rows(sql, "SELECT v FROM state WHERE k = 1", None)?)?;
    Ok(texts.into_iter().next())
}

fn store(sql: &SqlStorage, value: &dyn Kept) -> Result<()> {
    sql.exec(TABLE, None)?;
    let text = value.text().map_err(|e| worker::Error::RustError(e.to_string()))?;
    sql.exec("INSERT OR REPLACE INTO state (k, v) VALUES (1, ?)", vec![text.into()])?;
    Ok(())
}

/// The JSON text of `value`, as [`Kept::text`] stores it.
pub fn text_of(value: &impl Serialize) -> serde_json::Result<String> {
    serde_json::to_string(value)
}

/// One object's value, loaded once by `read`, and the follows it holds (the `Machines`
/// object's; the `Enrolments` object holds none).
pub struct Held {
    state: State,
    value: RefCell<Option<Box<dyn Kept>>>,
    read: fn(Option<&str>) -> serde_json::Result<Box<dyn Kept>>,
    followers: Rc<Followers>,
}

impl Held {
    pub fn new(state: State, read: fn(Option<&str>) -> serde_json::Result<Box<dyn Kept>>) -> Held {
        Held { state, value: RefCell::new(None), read, followers: Rc::default() }
    }

    /// Answers `ask` and stores what changed (no await: the value is borrowed throughout);
    /// `Err` is the answer to give at once.
    fn apply(&self, ask: &str) -> std::result::Result<(ApiAnswered, Option<Follow>), Result<web_sys::Response>> {
        let sql = self.state.storage().sql();
        let mut held = self.value.borrow_mut();
        if held.is_none() {
            let loaded = load(&sql)
                .and_then(|text| (self.read)(text.as_deref()).map_err(|e| worker::Error::RustError(e.to_string())));
            match loaded {
                Ok(value) => *held = Some(value),
                Err(e) => return Err(store_failed("loading a machines object", &e)),
            }
        }
        let Some(value) = held.as_mut() else {
            return Err(crate::http::refusal(&ApiError::unavailable()));
        };
        let (answered, changed, follow) = match value.answer(ask, now_ms()) {
            Ok(answer) => answer,
            Err(e) => return Err(store_failed("an unreadable machines ask", &e)),
        };
        if changed {
            if let Err(e) = store(&sql, value.as_ref()) {
                *held = None;
                return Err(store_failed("storing a machines object", &e));
            }
        }
        Ok((answered, follow))
    }

    /// Reads one ask from `req`, answers it, and stores what changed. A failed store makes the
    /// object forget its value (it loads again) and answers the one 503.
    pub async fn serve(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        let ask = match crate::http::ask_text(&req).await {
            Ok(Ok(ask)) => ask,
            Ok(Err(e)) => return store_failed("an unreadable machines ask", &e),
            Err(e) => return store_failed("an unreadable machines ask", &e),
        };
        let (answered, follow) = match self.apply(&ask) {
            Ok(applied) => applied,
            Err(failed) => return failed,
        };
        let (status, body) = match answered {
            Ok(answered) => answered,
            Err(refusal) => return crate::http::refusal(&refusal),
        };
        match follow {
            Some(Follow::Hold(machine, timeout_ms)) => {
                return self.followers.hold(&machine, timeout_ms, body).unwrap_or_else(|r| crate::http::refusal(&r));
            }
            // Told only once the runtime confirms the change is stored, as a hand-off's waiters.
            Some(Follow::Wake(machine, list)) => {
                if let Err(e) = self.state.storage().sync().await {
                    *self.value.borrow_mut() = None;
                    return store_failed("storing a machines object", &e);
                }
                self.followers.wake(&machine, std::str::from_utf8(&list).unwrap_or_default());
            }
            Some(Follow::End(machine)) => self.followers.end(&machine),
            None => {}
        }
        Ok(crate::http::Plain::new(status, JSON, body, false, Vec::new()).response()?)
    }
}
