// What the fuzz targets assert, one function per target. Included (not a crate) by
// fuzz/fuzz_targets/*.rs and by test/tests/fuzz_regressions.rs, so that a committed crash
// input replays natively through exactly the code that found it.

/// The fixed clock and key the token checks run at.
#[allow(dead_code)]
const FUZZ_NOW_S: i64 = 1_800_000_000;
#[allow(dead_code)]
const FUZZ_KEY: &[u8] = handoff_api::token::DEV_SIGNING_KEY.as_bytes();

#[allow(dead_code)]
fn refused_as_invalid<T, E: Into<handoff_api::error::ApiError>>(what: &str, result: Result<T, E>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            let e: handoff_api::error::ApiError = e.into();
            assert_eq!(e.code, handoff_api::error::Code::RequestInvalid, "{what}: {e:?}");
            assert_eq!(handoff_api::error::status(e.code), 400);
            None
        }
    }
}

/// Every body parser and every query parser, on the same input.
#[allow(dead_code)]
pub fn check_bodies(data: &[u8]) {
    use handoff_api::input;
    use handoff_core::{package, work};

    // Every body of the API is a JSON object (cancel and close may also be empty): an array
    // is a wrong type, 400 (issue 2), even where serde would read it as a struct's fields.
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    let object_or_empty = matches!(first, None | Some(b'{'));
    let refused_as_invalid = |what: &str, ok: bool| {
        assert!(!ok || object_or_empty, "{what}: accepted a body that is not a JSON object");
    };
    refused_as_invalid("create", refused(input::parse_create(data)).is_some());
    refused_as_invalid("report", refused(input::parse_report(data)).is_some());
    refused_as_invalid("open_turn", refused(input::parse_open_turn(data)).is_some());
    refused_as_invalid("cancel", refused(input::parse_cancel(data)).is_some());
    refused_as_invalid("close", refused(input::parse_close(data)).is_some());
    refused_as_invalid("work", refused(input::parse_body::<work::WorkInput>(data)).is_some());
    refused_as_invalid("decision", refused(input::parse_body::<work::DecisionInput>(data)).is_some());
    refused_as_invalid("artifact", refused(input::parse_body::<work::ArtifactInput>(data)).is_some());
    refused_as_invalid("blocker", refused(input::parse_body::<work::BlockerInput>(data)).is_some());
    refused_as_invalid("workspace", refused(input::parse_body::<work::WorkspaceInput>(data)).is_some());
    refused_as_invalid("package", refused(input::parse_body::<package::PackageRequest>(data)).is_some());
    refused_as_invalid("accept", refused(input::parse_body::<package::AcceptInput>(data)).is_some());
    refused_as_invalid("reject", refused(input::parse_body::<package::RejectInput>(data)).is_some());
    refused_as_invalid("policy", refused(input::parse_body::<handoff_core::suggestion::Policy>(data)).is_some());
    check_limits(data);
}

#[allow(dead_code)]
fn refused<T, E>(result: Result<T, E>) -> Option<T> {
    result.ok()
}

/// What each parser promises of what it accepts, and that it refuses only with 400.
#[allow(dead_code)]
fn check_limits(data: &[u8]) {
    use handoff_core::limits::*;
    use handoff_api::input;
    use handoff_core::{package, work};

    if let Some(c) = refused_as_invalid("create", input::parse_create(data)) {
        assert!(input::is_id(&c.session) && input::is_id(&c.machine) && input::is_id(&c.size));
        assert!(input::is_handoff_id(&input::handoff_id("owner", &c.session)));
    }
    if let Some(r) = refused_as_invalid("report", input::parse_report(data)) {
        assert!(r.summary.as_ref().map_or(0, String::len) <= SUMMARY_BYTES_MAX);
    }
    refused_as_invalid("open_turn", input::parse_open_turn(data));
    refused_as_invalid("cancel", input::parse_cancel(data));
    refused_as_invalid("close", input::parse_close(data));
    if let Some(w) = refused_as_invalid("work", input::parse_body::<work::WorkInput>(data)) {
        assert!(w.title.len() <= TITLE_BYTES_MAX && w.goal.len() <= GOAL_BYTES_MAX);
        assert!(w.constraints.len() <= CONSTRAINTS_MAX);
        assert!(w.acceptance_criteria.len() <= ACCEPTANCE_CRITERIA_MAX);
    }
    if let Some(d) = refused_as_invalid("decision", input::parse_body::<work::DecisionInput>(data)) {
        assert!(d.evidence.len() <= EVIDENCE_PER_DECISION_MAX);
        assert!(d.statement.len() <= STATEMENT_BYTES_MAX);
    }
    if let Some(a) = refused_as_invalid("artifact", input::parse_body::<work::ArtifactInput>(data)) {
        assert!(a.sha256.iter().all(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))));
    }
    refused_as_invalid("blocker", input::parse_body::<work::BlockerInput>(data));
    if let Some(ws) = refused_as_invalid("workspace", input::parse_body::<work::WorkspaceInput>(data)) {
        assert!(ws.files.len() <= FILES_PER_REPORT_MAX);
        assert!(ws.files.iter().all(|f| !f.path.is_empty() && f.path.len() <= PATH_BYTES_MAX));
    }
    if let Some(p) = refused_as_invalid("package", input::parse_body::<package::PackageRequest>(data)) {
        assert!(p.runtime.len() <= RUNTIME_BYTES_MAX && p.objective.len() <= OBJECTIVE_BYTES_MAX);
    }
    if let Some(a) = refused_as_invalid("accept", input::parse_body::<package::AcceptInput>(data)) {
        assert!(a.package_hash.len() == 64 && !a.package_hash.bytes().any(|b| b.is_ascii_uppercase()));
    }
    refused_as_invalid("reject", input::parse_body::<package::RejectInput>(data));
    if let Some(p) = refused_as_invalid("policy", input::parse_body::<handoff_core::suggestion::Policy>(data)) {
        assert!((1..=99).contains(&p.context_threshold_pct));
        assert!(p.runtimes.len() <= POLICY_RUNTIMES_MAX && p.runtimes.iter().all(|r| input::is_id(r)));
    }

    // Query strings reach the Worker as text.
    let Ok(query) = std::str::from_utf8(data) else { return };
    if let Some(w) = refused_as_invalid("wait query", input::parse_wait_query(query)) {
        assert!(w.timeout_s <= WAIT_TIMEOUT_S_MAX);
    }
    if let Some(l) = refused_as_invalid("list query", input::parse_list_query(query)) {
        assert!((1..=LIST_LIMIT_MAX).contains(&l.limit));
        assert!(l.cursor.iter().all(|c| input::is_handoff_id(&c.id)));
    }
    if let Some((bytes, _)) = refused_as_invalid("briefing query", input::parse_briefing_query(query)) {
        assert!((BRIEFING_BUDGET_BYTES_MIN..=BRIEFING_BUDGET_BYTES_MAX).contains(&bytes));
    }
}

/// A token, raw or signed with the right key; whatever verifies keeps the promises of
/// `handoff_api::token::verify`.
#[allow(dead_code)]
pub fn check_token(data: &[u8]) {
    use handoff_api::token::{self, Role};
    let Some((&mode, rest)) = data.split_first() else { return };
    let candidate = if mode & 1 == 0 {
        match std::str::from_utf8(rest) {
            Ok(raw) => raw.to_string(),
            Err(_) => return,
        }
    } else {
        let split = rest.iter().position(|&b| b == 0xFF).unwrap_or(rest.len());
        let (header, payload) = (&rest[..split], rest.get(split + 1..).unwrap_or(&[]));
        sign_raw(header, payload)
    };
    match token::verify(&candidate, FUZZ_KEY, FUZZ_NOW_S) {
        Ok(claims) => {
            assert!(handoff_api::input::is_id(&claims.sub), "{claims:?}");
            assert!(FUZZ_NOW_S <= claims.exp.saturating_add(handoff_core::limits::TOKEN_CLOCK_SKEW_S));
            assert!(claims.role == Role::Owner || claims.hid.is_some());
            // A token that verifies under one key never verifies under another.
            assert!(token::verify(&candidate, b"another key", FUZZ_NOW_S).is_err());
        }
        Err(e) => {
            let _ = e.message();
        }
    }
}

/// An HS256 JWT over arbitrary header and payload bytes, signed with [`FUZZ_KEY`] by the same
/// crates the service uses (`hmac`, `sha2`, `base64`), so that fuzzed claims get past the
/// signature into the claim checks.
#[allow(dead_code)]
pub fn sign_raw(header: &[u8], payload: &[u8]) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(FUZZ_KEY).expect("HMAC takes any key");
    mac.update(signing_input.as_bytes());
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}
