//! Reading a JSON object into a typed value, with an error that names the field that is
//! wrong (`files[0].path: …`). Bodies and stored values are read through here.
//!
//! The field is found from where serde_json stopped, by walking the text up to that byte
//! ([`path_at`]), not by wrapping the deserializer: a wrapper is compiled again for every type
//! read, which cost the Worker about 19 KB of gzipped `.wasm`.

use crate::error::Refusal;
use serde::de::DeserializeOwned;

mod objects;
pub use objects::{from_slice, Objects};

/// Parses a JSON object body into `T`; the error names the field that is wrong. Every body of
/// this API is an object: serde would otherwise read an array as a struct's fields in order.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(Refusal::invalid("body: expected a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = T::deserialize(Objects(&mut de)).map_err(|e| refusal_of(body, &e))?;
    de.end().map_err(|e| refusal_of(body, &e))?;
    Ok(value)
}

/// The refusal of a body serde could not read, naming the field that is wrong where it can:
/// outside the generic reader, so compiled once rather than once per body type.
#[inline(never)]
fn refusal_of(body: &[u8], e: &serde_json::Error) -> Refusal {
    let path = match e.classify() {
        serde_json::error::Category::Data => path_at(body, offset_of(body, e.line(), e.column())),
        _ => String::new(),
    };
    if path.is_empty() {
        Refusal::invalid(format!("body: {e}"))
    } else {
        Refusal::invalid(format!("{path}: {}", without_position(e)))
    }
}

/// The byte offset of serde_json's one-based `line` and `column` (a column counts bytes).
fn offset_of(body: &[u8], line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        body.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(line - 2).map_or(body.len(), |(i, _)| i + 1)
    };
    (line_start + column).min(body.len())
}

/// serde_json's message without its " at line L column C", where a field names the place.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The path (`files[0].path`) of the value being read at byte `end` of a JSON text, or `""` at
/// the top level: each object's latest key and each array's index, outermost first.
pub(crate) fn path_at(body: &[u8], end: usize) -> String {
    enum Frame {
        Object { key: Option<String>, wants_key: bool },
        Array { index: usize },
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end.min(body.len()) {
        match body[i] {
            b'{' => stack.push(Frame::Object { key: None, wants_key: true }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { wants_key, .. }) => *wants_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while i < body.len() && body[i] != b'"' {
                    i += if body[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Frame::Object { key, wants_key: wants @ true }) = stack.last_mut() {
                    let text = body.get(start..=i).unwrap_or(&body[start..]);
                    *key = Some(from_slice(text).unwrap_or_else(|_| String::from_utf8_lossy(&text[1..]).into_owned()));
                    *wants = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object { key: Some(key), .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object { key: None, .. } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// A body that may be empty (treated as `{}`); any other body is a JSON object, so one of
/// whitespace alone is no JSON and refused as such.
pub fn parse_json_or_empty<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    if body.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::{json, Value};

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        files: Vec<File>,
        usage: Option<Usage>,
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct File {
        path: String,
        lines: u32,
        kind: Kind,
    }

    #[derive(Deserialize, Debug)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Text,
        Binary,
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Usage {
        used: u64,
    }

    /// The path serde_path_to_error gives, in `path_at`'s form (`""` at the top), and
    /// serde_json's message.
    fn independent(body: &[u8]) -> Option<(String, String)> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let e = serde_path_to_error::deserialize::<_, Doc>(&mut de).err()?;
        let path = e.path().to_string();
        Some((if path == "." { String::new() } else { path }, e.into_inner().to_string()))
    }

    fn doc(files: usize) -> Value {
        let files: Vec<Value> =
            (0..files).map(|i| json!({"path": format!("src/\"{i}\".rs"), "lines": i, "kind": "text"})).collect();
        json!({"name": "n, [x]: {y}", "files": files, "usage": {"used": 3}})
    }

    /// Every place a value can be wrong in a `Doc`, and a wrong value for it.
    fn spoil(doc: &mut Value, choice: usize, files: usize) {
        let i = choice / 8 % files.max(1);
        match (choice % 8, files) {
            (0, _) => doc["name"] = json!(1),
            (1, _) => doc["usage"]["used"] = json!("3"),
            (2, _) => doc["usage"]["extra"] = json!(true),
            (3, 0) | (4, 0) | (5, 0) | (6, 0) => doc["files"] = json!({}),
            (3, _) => doc["files"][i]["lines"] = json!(-1),
            (4, _) => doc["files"][i]["kind"] = json!("video"),
            (5, _) => {
                doc["files"][i].as_object_mut().unwrap().remove("path");
            }
            (6, _) => doc["files"][i]["unknown"] = json!([1, {"a": 2}]),
            _ => {
                doc.as_object_mut().unwrap().remove("name");
            }
        }
    }

    proptest! {
        #[test]
        fn the_field_named_is_the_one_serde_path_to_error_names(files in 0usize..4, choice in 0usize..64, pretty: bool) {
            let mut value = doc(files);
            spoil(&mut value, choice, files);
            let body = if pretty { serde_json::to_vec_pretty(&value) } else { serde_json::to_vec(&value) }.unwrap();
            let (expected, inner) = independent(&body).expect("a spoiled document is refused");
            let message = parse_json::<Doc>(&body).unwrap_err().message;
            // serde_json's own words follow the field; its position only where no field names the place.
            let wanted = if expected.is_empty() {
                format!("body: {inner}")
            } else {
                format!("{expected}: {}", &inner[..inner.rfind(" at line ").expect("serde_json gives a position")])
            };
            prop_assert_eq!(message, wanted, "for {}", String::from_utf8_lossy(&body));
        }
    }

    #[test]
    fn a_broken_text_is_a_body_error_whatever_its_place() {
        for body in
            [&br#"{"files": [{"path": "#[..], br#"{"name": "a" "files": []}"#, br#"{"usage": {"used": 1}} x"#, b"[1]"]
        {
            let message = parse_json::<Doc>(body).unwrap_err().message;
            assert!(message.starts_with("body: "), "{message}");
        }
    }

    #[test]
    fn a_path_is_read_through_escapes_and_punctuation_inside_strings() {
        let body = br#"{"a\"b": {"k,[": ["x]}", {"deep": 1}]}}"#;
        let at = body.windows(8).position(|w| w == b"\"deep\": ").unwrap() + 8;
        assert_eq!(path_at(body, at), r#"a"b.k,[[1].deep"#);
        assert_eq!(path_at(body, 0), "");
        assert_eq!(path_at(body, body.len()), "");
    }

    #[test]
    fn a_text_cut_inside_a_string_or_after_a_backslash_is_walked_to_its_end() {
        assert_eq!(path_at(br#"{"a": {"b": "unterminated"#, 100), "a.b");
        assert_eq!(path_at(br#"{"a": {"b\"#, 100), r"a.b\");
        assert_eq!(path_at(br#"{"a": ["#, 100), "a[0]");
    }
}
