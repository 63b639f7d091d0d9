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

#[test]
fn a_token_signed_over_raw_parts_equals_a_minted_one() {
    // The fuzz checks sign raw header and payload bytes; for real claims that must be the
    // service's own token, byte for byte.
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use handoff_api::token::{mint, Claims, Role};
    let claims = Claims {
        sub: "alice".into(),
        role: Role::Owner,
        hid: None,
        exp: FUZZ_NOW_S + 10,
        nbf: None,
        inc: None,
        mch: None,
    };
    let minted = mint(&claims, FUZZ_KEY);
    let mut parts = minted.split('.');
    let (header, payload) = (parts.next().unwrap(), parts.next().unwrap());
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).unwrap();
    assert_eq!(sign_raw(&decode(header), &decode(payload)), minted);
}
