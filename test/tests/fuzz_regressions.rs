//! Replays every input under `fuzz/regressions/<target>/` (crashes the fuzzers found, and
//! hostile inputs kept on purpose) and every seed under `fuzz/seeds/<target>/` through the
//! same checks the `cargo fuzz` targets run, natively, in `cargo test`. Needs no Worker.
//! How to run the fuzzers and add a crash here: fuzz/README.md.

include!("../../fuzz/checks.rs");

use std::path::PathBuf;

fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz").join(kind).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file() && path.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read(&path).expect("readable"))).collect()
}

fn replay(target: &str, check: fn(&[u8])) {
    for kind in ["regressions", "seeds"] {
        for (path, data) in inputs(kind, target) {
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{} broke a check of {target}", path.display());
        }
    }
}

#[test]
fn every_parse_bodies_regression_and_seed_passes_the_fuzz_checks() {
    replay("parse_bodies", check_bodies);
}

#[test]
fn every_verify_token_regression_and_seed_passes_the_fuzz_checks() {
    replay("verify_token", check_token);
}

/// Inputs that break a check today, each a Worker bug reported and not yet fixed. Un-ignore
/// once fixed, then move the files to `fuzz/regressions/`.
#[test]
#[ignore = "known bug: a JSON array is accepted as a struct body (serde reads a sequence as the fields in order)"]
fn known_bugs_of_parse_bodies_are_fixed() {
    for (path, data) in inputs("known-bugs", "parse_bodies") {
        let outcome = std::panic::catch_unwind(|| check_bodies(&data));
        assert!(outcome.is_ok(), "{} still breaks a check of parse_bodies", path.display());
    }
}

#[test]
fn a_hand_signed_token_equals_a_minted_one() {
    // The fuzz checks sign tokens with their own HMAC-SHA256; it must agree with the service's.
    use handoff::token::{mint, Claims, Role};
    let claims = Claims { sub: "alice".into(), role: Role::Owner, hid: None, exp: FUZZ_NOW_S + 10, nbf: None };
    let minted = mint(&claims, FUZZ_KEY);
    let mut parts = minted.split('.');
    let (header, payload) = (parts.next().unwrap(), parts.next().unwrap());
    let decode = |part: &str| {
        let padded = format!("{part}{}", "=".repeat((4 - part.len() % 4) % 4));
        base64_decode(&padded)
    };
    assert_eq!(sign_raw(&decode(header), &decode(payload)), minted);
    assert_eq!(sha256(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf], "FIPS 180-4's first example");
}

/// Standard padded base64url, for the test above only.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => 0,
    };
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let n = chunk.iter().fold(0u32, |n, &c| n << 6 | value(c) as u32);
        let bytes = n.to_be_bytes();
        let kept = chunk.iter().filter(|&&c| c != b'=').count() - 1;
        out.extend_from_slice(&bytes[1..1 + kept]);
    }
    out
}
