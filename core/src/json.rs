//! Reading a JSON object into a typed value, with an error that names the field that is
//! wrong (`files[0].path: …`). Bodies and stored values are read through here.

use crate::error::Refusal;
use serde::de::DeserializeOwned;

/// Parses a JSON object body into `T`; the error names the field that is wrong. Every body of
/// this API is an object: serde would otherwise read an array as a struct's fields in order.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(Refusal::invalid("body: expected a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path == "?" {
            Refusal::invalid(format!("body: {inner}"))
        } else {
            Refusal::invalid(format!("{path}: {inner}"))
        }
    })?;
    de.end().map_err(|e| Refusal::invalid(format!("body: {e}")))?;
    Ok(value)
}

/// A body that may be empty (treated as `{}`).
pub fn parse_json_or_empty<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    if body.iter().all(u8::is_ascii_whitespace) {
        parse_json(b"{}")
    } else {
        parse_json(body)
    }
}

/// A value whose rules are checked once, as it is read and before anything uses it: the
/// limits on each field, the URI schemes, the shape of a hash. `checked` may also put a value
/// in its one written form (a hash in lowercase). The HTTP contract reads a body as
/// `parse_json::<T>(body)?.checked()` (`handoff_api::input::parse_body`).
pub trait Checked: Sized {
    fn checked(self) -> Result<Self, Refusal>;
}

/// What the API reads a body as, for the core's own tests.
#[cfg(test)]
pub(crate) fn parse_checked<T: DeserializeOwned + Checked>(body: &[u8]) -> Result<T, Refusal> {
    parse_json::<T>(body)?.checked()
}
