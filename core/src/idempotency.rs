//! What an `Idempotency-Key` remembers, and what a repeat of it is answered: plain decisions
//! over plain data, carried out by the hand-off's Durable Object.
//!
//! Rules:
//! - only an applied change is remembered (one that moved the version, or a no-op that
//!   answered 2xx); a refusal or a dry run changed nothing, so a retry is simply evaluated
//!   again and can change nothing the first attempt could not have;
//! - a repeat with the same fingerprint (method, path, canonical query, role, body) answers
//!   the remembered answer; with another fingerprint it is 422 `idempotency.mismatch`;
//! - an answer over [`IDEMPOTENCY_ANSWER_BYTES_MAX`] is remembered without its `package`,
//!   with the digest of the whole answer; a replay puts the package back from the ledger while
//!   that package is still the current one, and the digest proves the answer is byte for byte
//!   the first; otherwise the replay is the remembered answer without its package;
//! - a hand-off keeps at most [`IDEMPOTENCY_KEYS_PER_HANDOFF_MAX`] keys and
//!   [`IDEMPOTENCY_BYTES_PER_HANDOFF_MAX`] bytes of answers, the oldest forgotten first, and
//!   none older than [`IDEMPOTENCY_TTL_MS`].

use crate::limits::{IDEMPOTENCY_ANSWER_BYTES_MAX, IDEMPOTENCY_BYTES_PER_HANDOFF_MAX, IDEMPOTENCY_KEYS_PER_HANDOFF_MAX};
#[cfg(doc)]
use crate::limits::IDEMPOTENCY_TTL_MS;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// An answer as the store keeps it for its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub fingerprint: String,
    pub status: u16,
    /// The answer's JSON, without its `package` when [`Remembered::slim`].
    pub body: String,
    pub slim: bool,
    /// SHA-256 (hex) of the whole answer as first sent.
    pub digest: String,
}

impl Remembered {
    /// The bytes this row costs against [`IDEMPOTENCY_BYTES_PER_HANDOFF_MAX`].
    pub fn bytes(&self) -> usize {
        self.body.len() + self.fingerprint.len() + self.digest.len()
    }
}

/// What a keyed request finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'a> {
    /// The key is new (or forgotten): carry the request out.
    Fresh,
    /// The key answered this same request: answer it again.
    Replay(&'a Remembered),
    /// The key answered another request: 422 `idempotency.mismatch`.
    Mismatch,
}

pub fn decide<'a>(remembered: Option<&'a Remembered>, fingerprint: &str) -> Decision<'a> {
    match remembered {
        None => Decision::Fresh,
        Some(r) if r.fingerprint == fingerprint => Decision::Replay(r),
        Some(_) => Decision::Mismatch,
    }
}

fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// What to remember of an answer to a keyed change, or `None` when nothing need be: a refusal
/// (`status` not 2xx) or a dry run.
pub fn remember(fingerprint: &str, status: u16, body: &Value, dry_run: bool) -> Option<Remembered> {
    if dry_run || !(200..300).contains(&status) {
        return None;
    }
    let whole = body.to_string();
    let digest = digest(&whole);
    if whole.len() <= IDEMPOTENCY_ANSWER_BYTES_MAX {
        return Some(Remembered { fingerprint: fingerprint.to_string(), status, body: whole, slim: false, digest });
    }
    let mut slim = body.clone();
    let had_package = slim.as_object_mut().and_then(|o| o.remove("package")).is_some();
    Some(Remembered { fingerprint: fingerprint.to_string(), status, body: slim.to_string(), slim: had_package, digest })
}

/// The body a replay answers: the remembered one, with its package put back when `current`
/// (the ledger's current package hash and package) is the package it named.
pub fn replay_body(r: &Remembered, current: Option<(&str, Value)>) -> String {
    if !r.slim {
        return r.body.clone();
    }
    let Ok(mut body) = serde_json::from_str::<Value>(&r.body) else {
        return r.body.clone();
    };
    let named = body.get("package_hash").and_then(Value::as_str).map(str::to_string);
    if let (Some(named), Some((hash, package)), Some(fields)) = (named, current, body.as_object_mut()) {
        if named == hash {
            fields.insert("package".into(), package);
            let whole = body.to_string();
            if digest(&whole) == r.digest {
                return whole;
            }
        }
    }
    r.body.clone()
}

/// How many of the oldest rows to forget so that a table of `count` rows and `bytes` bytes
/// (the newest row included) fits both caps; `oldest_bytes` gives the rows' sizes, oldest first.
pub fn evictions(count: usize, bytes: usize, oldest_bytes: impl IntoIterator<Item = usize>) -> usize {
    let (mut count, mut bytes) = (count, bytes);
    let mut forget = 0;
    for size in oldest_bytes {
        if count <= IDEMPOTENCY_KEYS_PER_HANDOFF_MAX && bytes <= IDEMPOTENCY_BYTES_PER_HANDOFF_MAX {
            break;
        }
        count -= 1;
        bytes = bytes.saturating_sub(size);
        forget += 1;
    }
    forget
}

/// Whether a table of `count` rows and `bytes` bytes is over either cap.
pub fn over_caps(count: usize, bytes: usize) -> bool {
    count > IDEMPOTENCY_KEYS_PER_HANDOFF_MAX || bytes > IDEMPOTENCY_BYTES_PER_HANDOFF_MAX
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_refusal_or_a_dry_run_is_not_remembered_and_an_applied_change_is() {
        let body = json!({"handoff": {"version": 2}});
        assert_eq!(remember("f", 409, &body, false), None);
        assert_eq!(remember("f", 200, &body, true), None);
        let r = remember("f", 200, &body, false).unwrap();
        assert_eq!((r.status, r.slim, r.body.as_str()), (200, false, body.to_string().as_str()));
        assert_eq!(replay_body(&r, None), body.to_string());
    }

    #[test]
    fn the_same_key_replays_the_same_request_and_refuses_another() {
        let r = remember("f1", 201, &json!({}), false).unwrap();
        assert_eq!(decide(None, "f1"), Decision::Fresh);
        assert_eq!(decide(Some(&r), "f1"), Decision::Replay(&r));
        assert_eq!(decide(Some(&r), "f2"), Decision::Mismatch);
    }

    fn big_compile_answer(hash: &str) -> (Value, Value) {
        let package = json!({"goal": "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX)});
        let body = json!({"package_version": 3, "package_hash": hash, "changed": true, "package": package, "handoff": {"version": 7}});
        (body, package)
    }

    #[test]
    fn a_large_answer_is_kept_without_its_package_and_replayed_whole_while_that_package_is_current() {
        let (body, package) = big_compile_answer("h3");
        let r = remember("f", 200, &body, false).unwrap();
        assert!(r.slim);
        assert!(r.body.len() < IDEMPOTENCY_ANSWER_BYTES_MAX, "the package is not stored");
        assert_eq!(replay_body(&r, Some(("h3", package.clone()))), body.to_string(), "byte for byte the first answer");
        let without: Value = serde_json::from_str(&replay_body(&r, Some(("h4", json!({"goal": "newer"}))))).unwrap();
        assert_eq!(without.get("package"), None, "a superseded package is not passed off as the first");
        assert_eq!(without["package_hash"], "h3");
        // A current package with the same hash but other bytes fails the digest: never a wrong answer.
        let forged: Value = serde_json::from_str(&replay_body(&r, Some(("h3", json!({"goal": "other"}))))).unwrap();
        assert_eq!(forged.get("package"), None);
    }

    #[test]
    fn the_oldest_rows_are_forgotten_until_both_caps_fit() {
        assert_eq!(evictions(IDEMPOTENCY_KEYS_PER_HANDOFF_MAX, 10, [1, 1]), 0);
        assert_eq!(evictions(IDEMPOTENCY_KEYS_PER_HANDOFF_MAX + 2, 10, [1, 1, 1]), 2);
        let over = IDEMPOTENCY_BYTES_PER_HANDOFF_MAX + 100;
        assert_eq!(evictions(5, over, [60, 30, 20, 1]), 3);
        assert!(over_caps(5, over) && !over_caps(5, 100));
    }

    #[test]
    fn a_remembered_answer_costs_its_body_fingerprint_and_digest_bytes() {
        let r = remember("fp", 200, &json!({"a": 1}), false).unwrap();
        assert_eq!(r.digest.len(), 64, "SHA-256 in hex");
        assert_eq!(r.bytes(), "{\"a\":1}".len() + "fp".len() + 64);
    }

    #[test]
    fn an_answer_of_exactly_the_answer_cap_is_kept_whole_and_one_byte_more_is_kept_slim() {
        // {"package":"xx…"} is 14 bytes around the string.
        let at_cap = json!({"package": "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX - 14)});
        assert_eq!(at_cap.to_string().len(), IDEMPOTENCY_ANSWER_BYTES_MAX);
        let r = remember("f", 200, &at_cap, false).unwrap();
        assert_eq!((r.slim, r.body), (false, at_cap.to_string()));
        let over = json!({"package": "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX - 13)});
        let r = remember("f", 200, &over, false).unwrap();
        assert_eq!((r.slim, r.body.as_str()), (true, "{}"));
    }

    #[test]
    fn every_2xx_is_remembered_and_nothing_outside_it() {
        let body = json!({});
        for status in [200, 201, 204, 299] {
            assert!(remember("f", status, &body, false).is_some(), "{status}");
        }
        for status in [199, 300, 422, 503] {
            assert_eq!(remember("f", status, &body, false), None, "{status}");
        }
    }

    #[test]
    fn a_table_exactly_at_both_caps_fits_and_one_more_row_or_byte_is_over() {
        let (keys, bytes) = (IDEMPOTENCY_KEYS_PER_HANDOFF_MAX, IDEMPOTENCY_BYTES_PER_HANDOFF_MAX);
        assert!(!over_caps(keys, bytes));
        assert!(over_caps(keys + 1, bytes));
        assert!(over_caps(keys, bytes + 1));
        assert_eq!(evictions(keys, bytes, [1, 1]), 0, "nothing is forgotten at the caps");
        assert_eq!(evictions(keys + 1, bytes, [1, 1]), 1);
        assert_eq!(evictions(keys, bytes + 1, [1, 1]), 1);
        assert_eq!(evictions(3, bytes + 5, [6, 1, 1]), 1, "the bytes of the forgotten row count");
    }

    proptest! {
        #[test]
        fn after_evictions_the_rows_kept_fit_both_caps(sizes in prop::collection::vec(1usize..200_000, 0..1_200)) {
            let bytes: usize = sizes.iter().sum();
            let forget = evictions(sizes.len(), bytes, sizes.iter().copied());
            let kept = &sizes[forget..];
            prop_assert!(!over_caps(kept.len(), kept.iter().sum()));
            // And no more than needed: keeping one more of the oldest would be over a cap.
            if forget > 0 {
                let one_more = &sizes[forget - 1..];
                prop_assert!(over_caps(one_more.len(), one_more.iter().sum()));
            }
        }
    }
}
