//! The crate's webhook signatures, push bodies and VAPID tokens, checked by implementations
//! written by others: the `standardwebhooks` package (the specification's reference library),
//! `http_ece` (the RFC 8188/8291 decoder under pywebpush) and `cryptography`'s ECDSA, run from
//! a Python virtual environment this test makes under `target/` (pinned in
//! `tests/independent/requirements.txt`, installed from PyPI on first use).

use handoff_notify::limits::PUSH_PLAINTEXT_BYTES_MAX;
use handoff_notify::{
    ece, webhook, Endpoint, Environment, MessageEntropy, MessageId, UserAgent, VapidKey, VapidSubject, WebhookSecret,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

#[path = "independent/checker.rs"]
mod checker;
use checker::run_checker;

/// Reproducible bytes: SHA-256 of a label.
fn bytes32(label: &str) -> [u8; 32] {
    Sha256::digest(label.as_bytes()).into()
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn independent_implementations_accept_what_the_crate_makes_and_refuse_changes() {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;

    // Webhooks: three deliveries as signed, then one whose body changed after signing.
    let bodies = [
        r#"{"type":"handoff.done","data":{}}"#,
        r#"{"type":"handoff.needs_you","data":{"summary":"Postgres — or SQLite?"}}"#,
        "{}",
    ];
    let mut webhooks = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let secret = WebhookSecret::from_random(&bytes32(&format!("secret {i}"))[..24 + i * 4]).unwrap();
        let id = MessageId::from_random(bytes32(&format!("id {i}"))[..16].try_into().unwrap());
        let signed = webhook::sign(&secret, &id, now_ms, body.as_bytes());
        webhooks.push(json!({"secret": secret.reveal(), "id": signed.id, "timestamp": signed.timestamp, "signature": signed.signature, "body": body}));
    }
    let mut tampered = webhooks[0].clone();
    tampered["body"] = json!(r#"{"type":"handoff.failed","data":{}}"#);
    webhooks.push(tampered);

    // Push bodies: several sizes up to the largest, one padded, then one for another auth secret.
    let mut pushes = Vec::new();
    let mut plaintexts = Vec::new();
    for (i, (size, padding)) in [(0, 0), (41, 0), (300, 700), (PUSH_PLAINTEXT_BYTES_MAX, 0)].into_iter().enumerate() {
        let ua_private = bytes32(&format!("ua {i}"));
        let auth: [u8; 16] = bytes32(&format!("auth {i}"))[..16].try_into().unwrap();
        let ua = UserAgent::from_bytes(&ua_private, auth).unwrap();
        let mut entropy = [0u8; MessageEntropy::BYTES];
        entropy[..32].copy_from_slice(&bytes32(&format!("sender {i}")));
        entropy[32..].copy_from_slice(&bytes32(&format!("salt {i}"))[..16]);
        let plaintext: Vec<u8> = (0..size).map(|n| (n * 7 + i) as u8).collect();
        let body = ece::encrypt_padded(
            &plaintext,
            padding,
            &ua.subscription_keys(),
            &MessageEntropy::from_bytes(&entropy).unwrap(),
        )
        .unwrap();
        pushes.push(json!({"ua_private": b64url(&ua_private), "auth": b64url(&auth), "body": b64url(&body)}));
        plaintexts.push(plaintext);
    }
    let mut stranger = pushes[1].clone();
    stranger["auth"] = json!(b64url(&[9; 16]));
    pushes.push(stranger);

    // VAPID: two keys' headers, then one whose k= names another key.
    let endpoint =
        Endpoint::parse("endpoint", "https://updates.push.services.mozilla.com/wpush/v2/gAAAA", Environment::Deployed)
            .unwrap();
    let subject = VapidSubject::parse("mailto:ops@example.com").unwrap();
    let keys: Vec<VapidKey> = (0..2).map(|i| VapidKey::from_bytes(&bytes32(&format!("vapid {i}"))).unwrap()).collect();
    let mut vapid: Vec<Value> =
        keys.iter().map(|key| json!({"authorization": key.authorization(&endpoint, &subject, now_ms)})).collect();
    let swapped =
        keys[0].authorization(&endpoint, &subject, now_ms).replace(keys[0].public_key(), keys[1].public_key());
    vapid.push(json!({"authorization": swapped}));

    let seen = run_checker(&json!({"webhooks": webhooks, "pushes": pushes, "vapid": vapid}));

    for (i, case) in webhooks.iter().enumerate().take(bodies.len()) {
        assert_eq!(seen["webhooks"][i]["verified"], true, "webhook {i}");
        assert_eq!(seen["webhooks"][i]["signature"], case["signature"], "webhook {i}");
    }
    assert_eq!(seen["webhooks"][bodies.len()]["verified"], false, "a changed body must not verify");

    for (i, plaintext) in plaintexts.iter().enumerate() {
        assert_eq!(seen["pushes"][i]["plaintext"], json!(b64(plaintext)), "push {i}: {}", seen["pushes"][i]);
    }
    assert!(seen["pushes"][plaintexts.len()]["error"].is_string(), "another auth secret must not decrypt");

    let now_s = now_ms / 1000;
    for (i, key) in keys.iter().enumerate() {
        let v = &seen["vapid"][i];
        assert_eq!(v["scheme"], "vapid");
        assert_eq!(v["verified"], true, "vapid {i}");
        assert_eq!(v["k"], key.public_key());
        assert_eq!(v["header"], json!({"typ": "JWT", "alg": "ES256"}));
        assert_eq!(v["claims"]["aud"], "https://updates.push.services.mozilla.com");
        assert_eq!(v["claims"]["sub"], "mailto:ops@example.com");
        let exp = v["claims"]["exp"].as_i64().unwrap();
        assert!(exp > now_s && exp <= now_s + 24 * 3600, "exp {exp} within 24 h of {now_s}");
    }
    assert_eq!(seen["vapid"][keys.len()]["verified"], false, "another key must not verify the token");
}
