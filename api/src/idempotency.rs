//! An answer's JSON as an `Idempotency-Key` keeps it: the core decides what is kept and when a
//! replay is the first answer (`handoff_core::idempotency`); this module says which part of an
//! answer is its package, the part a large answer is kept without.

use handoff_core::idempotency::{self, Remembered};
use serde_json::Value;

/// What to remember of `body`, answered with `status`, or `None` for a refusal or a dry run.
pub fn remember(fingerprint: &str, status: u16, body: &Value, dry_run: bool) -> Option<Remembered> {
    if !idempotency::keeps(status, dry_run) {
        return None;
    }
    let without_package = || {
        let mut slim = body.clone();
        slim.as_object_mut()?.remove("package")?;
        Some(slim.to_string())
    };
    Some(idempotency::remember(fingerprint, status, &body.to_string(), without_package))
}

/// The text a replay answers. `current` is the ledger's current package hash and package: a
/// slim answer gets its package back when it named that hash (and the core's digest agrees).
pub fn replay(r: &Remembered, current: Option<(&str, Value)>) -> String {
    idempotency::replay(r, |slim| {
        let mut body: Value = serde_json::from_str(slim).ok()?;
        let (hash, package) = current?;
        if body.get("package_hash")?.as_str()? != hash {
            return None;
        }
        body.as_object_mut()?.insert("package".into(), package);
        Some(body.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::limits::IDEMPOTENCY_ANSWER_BYTES_MAX;
    use serde_json::json;

    #[test]
    fn a_refusal_or_a_dry_run_is_not_remembered_and_an_applied_change_is() {
        let body = json!({"handoff": {"version": 2}});
        assert_eq!(remember("f", 409, &body, false), None);
        assert_eq!(remember("f", 200, &body, true), None);
        let r = remember("f", 200, &body, false).unwrap();
        assert_eq!((r.status, r.slim, r.body.as_str()), (200, false, body.to_string().as_str()));
        assert_eq!(replay(&r, None), body.to_string());
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
        assert_eq!(replay(&r, Some(("h3", package.clone()))), body.to_string(), "byte for byte the first answer");
        let without: Value = serde_json::from_str(&replay(&r, Some(("h4", json!({"goal": "newer"}))))).unwrap();
        assert_eq!(without.get("package"), None, "a superseded package is not passed off as the first");
        assert_eq!(without["package_hash"], "h3");
        // A current package with the same hash but other bytes fails the digest: never a wrong answer.
        let forged: Value = serde_json::from_str(&replay(&r, Some(("h3", json!({"goal": "other"}))))).unwrap();
        assert_eq!(forged.get("package"), None);
        assert_eq!(replay(&r, None), r.body, "no current package: the slim answer");
    }

    #[test]
    fn a_large_answer_without_a_package_is_kept_whole() {
        let body = json!({"note": "x".repeat(IDEMPOTENCY_ANSWER_BYTES_MAX)});
        let r = remember("f", 200, &body, false).unwrap();
        assert_eq!((r.slim, r.body), (false, body.to_string()));
    }
}
