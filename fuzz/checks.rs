// What the fuzz targets assert, one function per target. Included (not a crate) by
// fuzz/fuzz_targets/*.rs and by test/tests/fuzz_regressions.rs, so that a committed crash
// input replays natively through exactly the code that found it.

/// The fixed clock and key the token checks run at.
#[allow(dead_code)]
const FUZZ_NOW_S: i64 = 1_800_000_000;
#[allow(dead_code)]
const FUZZ_KEY: &[u8] = handoff::token::DEV_SIGNING_KEY.as_bytes();

#[allow(dead_code)]
fn refused_as_invalid<T>(what: &str, result: Result<T, handoff::error::ApiError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            assert_eq!(e.code, handoff::error::Code::RequestInvalid, "{what}: {e:?}");
            assert_eq!(e.code.status(), 400);
            None
        }
    }
}

/// Every body parser and every query parser, on the same input.
#[allow(dead_code)]
pub fn check_bodies(data: &[u8]) {
    use handoff::limits::*;
    use handoff::{briefing, index, input, package, work};

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
    refused_as_invalid("work", refused(work::parse_work(data)).is_some());
    refused_as_invalid("decision", refused(work::parse_decision(data)).is_some());
    refused_as_invalid("artifact", refused(work::parse_artifact(data)).is_some());
    refused_as_invalid("blocker", refused(work::parse_blocker(data)).is_some());
    refused_as_invalid("workspace", refused(work::parse_workspace(data)).is_some());
    refused_as_invalid("package", refused(package::parse_package_request(data)).is_some());
    refused_as_invalid("accept", refused(package::parse_accept(data)).is_some());
    refused_as_invalid("reject", refused(package::parse_reject(data)).is_some());
    refused_as_invalid("policy", refused(handoff::suggestion::parse_policy(data)).is_some());
    check_limits(data);
}

#[allow(dead_code)]
fn refused<T>(result: Result<T, handoff::error::ApiError>) -> Option<T> {
    result.ok()
}

/// What each parser promises of what it accepts, and that it refuses only with 400.
#[allow(dead_code)]
fn check_limits(data: &[u8]) {
    use handoff::limits::*;
    use handoff::{briefing, index, input, package, work};

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
    if let Some(w) = refused_as_invalid("work", work::parse_work(data)) {
        assert!(w.title.len() <= TITLE_BYTES_MAX && w.goal.len() <= GOAL_BYTES_MAX);
        assert!(w.constraints.len() <= CONSTRAINTS_MAX);
        assert!(w.acceptance_criteria.len() <= ACCEPTANCE_CRITERIA_MAX);
    }
    if let Some(d) = refused_as_invalid("decision", work::parse_decision(data)) {
        assert!(d.evidence.len() <= EVIDENCE_PER_DECISION_MAX);
        assert!(d.statement.len() <= STATEMENT_BYTES_MAX);
    }
    if let Some(a) = refused_as_invalid("artifact", work::parse_artifact(data)) {
        assert!(a.sha256.iter().all(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))));
    }
    refused_as_invalid("blocker", work::parse_blocker(data));
    if let Some(ws) = refused_as_invalid("workspace", work::parse_workspace(data)) {
        assert!(ws.files.len() <= FILES_PER_REPORT_MAX);
        assert!(ws.files.iter().all(|f| !f.path.is_empty() && f.path.len() <= PATH_BYTES_MAX));
    }
    if let Some(p) = refused_as_invalid("package", package::parse_package_request(data)) {
        assert!(p.runtime.len() <= RUNTIME_BYTES_MAX && p.objective.len() <= OBJECTIVE_BYTES_MAX);
    }
    if let Some(a) = refused_as_invalid("accept", package::parse_accept(data)) {
        assert!(a.package_hash.len() == 64 && !a.package_hash.bytes().any(|b| b.is_ascii_uppercase()));
    }
    refused_as_invalid("reject", package::parse_reject(data));
    if let Some(p) = refused_as_invalid("policy", handoff::suggestion::parse_policy(data)) {
        assert!((1..=99).contains(&p.context_threshold_pct));
        assert!(p.runtimes.len() <= handoff::suggestion::POLICY_RUNTIMES_MAX && p.runtimes.iter().all(|r| input::is_id(r)));
    }

    // Query strings reach the Worker as text.
    let Ok(query) = std::str::from_utf8(data) else { return };
    if let Some(w) = refused_as_invalid("wait query", input::parse_wait_query(query)) {
        assert!(w.timeout_s <= WAIT_TIMEOUT_S_MAX);
    }
    if let Some(l) = refused_as_invalid("list query", index::parse_list_query(query)) {
        assert!((1..=index::LIST_LIMIT_MAX).contains(&l.limit));
        assert!(l.cursor.iter().all(|c| input::is_handoff_id(&c.id)));
    }
    let (budget, reach) = query.split_once('&').unwrap_or((query, ""));
    let reach = (!reach.is_empty()).then_some(reach);
    if let Some((bytes, _)) = refused_as_invalid("briefing query", briefing::parse_query(Some(budget), reach)) {
        assert!((BRIEFING_BUDGET_BYTES_MIN..=BRIEFING_BUDGET_BYTES_MAX).contains(&bytes));
    }
}

/// A token, raw or signed with the right key; whatever verifies keeps the promises of
/// `handoff::token::verify`.
#[allow(dead_code)]
pub fn check_token(data: &[u8]) {
    use handoff::token::{self, Role};
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
            assert!(handoff::input::is_id(&claims.sub), "{claims:?}");
            assert!(FUZZ_NOW_S <= claims.exp.saturating_add(handoff::limits::TOKEN_CLOCK_SKEW_S));
            assert!(claims.role == Role::Owner || claims.hid.is_some());
            // A token that verifies under one key never verifies under another.
            assert!(token::verify(&candidate, b"another key", FUZZ_NOW_S).is_err());
        }
        Err(e) => {
            let _ = e.message();
        }
    }
}

/// An HS256 JWT over arbitrary header and payload bytes, signed with [`FUZZ_KEY`]. HMAC and
/// SHA-256 are written out here (FIPS 180-4, RFC 2104) so that the regression test needs no
/// crate beyond `handoff`; `a_hand_signed_token_equals_a_minted_one` checks them against
/// `handoff::token::mint`.
#[allow(dead_code)]
pub fn sign_raw(header: &[u8], payload: &[u8]) -> String {
    let signing_input = format!("{}.{}", b64url(header), b64url(payload));
    format!("{signing_input}.{}", b64url(&hmac_sha256(FUZZ_KEY, signing_input.as_bytes())))
}

#[allow(dead_code)]
fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[allow(dead_code)]
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha256(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = sha256(&[pad(0x36), message.to_vec()].concat());
    sha256(&[pad(0x5c), inner.to_vec()].concat())
}

#[allow(dead_code)]
fn sha256(message: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut data = message.to_vec();
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&((message.len() as u64) * 8).to_be_bytes());
    for block in data.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, word) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&word.to_be_bytes());
    }
    out
}
