use super::*;
use proptest::prelude::*;

/// The test vector of the Standard Webhooks reference libraries (their test suites sign it in
/// every language); the specification's text shows the scheme but no secret to check with.
const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const VECTOR_TIMESTAMP_S: i64 = 1_614_265_330;
const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

fn vector_secret() -> WebhookSecret {
    WebhookSecret::parse(VECTOR_SECRET).unwrap()
}

#[test]
fn signs_the_reference_vector() {
    let id = MessageId::parse(VECTOR_ID).unwrap();
    let signed = sign(&vector_secret(), &id, VECTOR_TIMESTAMP_S * 1000 + 999, VECTOR_BODY);
    assert_eq!(
        signed,
        SignedHeaders {
            id: VECTOR_ID.to_string(),
            timestamp: VECTOR_TIMESTAMP_S.to_string(),
            signature: VECTOR_SIGNATURE.to_string()
        }
    );
    assert_eq!(
        signed.pairs(),
        [("webhook-id", VECTOR_ID), ("webhook-timestamp", "1614265330"), ("webhook-signature", VECTOR_SIGNATURE)]
    );
}

#[test]
fn verifies_the_reference_vector_and_refuses_any_change() {
    let now_ms = VECTOR_TIMESTAMP_S * 1000;
    let check =
        |id: &str, ts: &str, sig: &str, body: &[u8], now_ms: i64| verify(&vector_secret(), id, ts, sig, body, now_ms);
    assert_eq!(check(VECTOR_ID, "1614265330", VECTOR_SIGNATURE, VECTOR_BODY, now_ms), Ok(()));
    assert_eq!(
        check(VECTOR_ID, "1614265330", VECTOR_SIGNATURE, br#"{"test": 2432232315}"#, now_ms),
        Err(VerifyError::Signature)
    );
    assert_eq!(check("msg_other", "1614265330", VECTOR_SIGNATURE, VECTOR_BODY, now_ms), Err(VerifyError::Signature));
    assert_eq!(check(VECTOR_ID, "1614265331", VECTOR_SIGNATURE, VECTOR_BODY, now_ms), Err(VerifyError::Signature));
    assert_eq!(
        check(VECTOR_ID, "1614265330", "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", VECTOR_BODY, now_ms),
        Err(VerifyError::Signature)
    );
    assert_eq!(check(VECTOR_ID, "1614265330", "", VECTOR_BODY, now_ms), Err(VerifyError::Signature));
    assert_eq!(check("msg.1", "1614265330", VECTOR_SIGNATURE, VECTOR_BODY, now_ms), Err(VerifyError::Id));
    assert_eq!(check(VECTOR_ID, "-1614265330", VECTOR_SIGNATURE, VECTOR_BODY, now_ms), Err(VerifyError::Timestamp));
    assert_eq!(
        check(VECTOR_ID, "16142653300000000000000", VECTOR_SIGNATURE, VECTOR_BODY, now_ms),
        Err(VerifyError::Timestamp)
    );
}

#[test]
fn a_key_rotation_sends_two_signatures_and_either_verifies() {
    let now_ms = VECTOR_TIMESTAMP_S * 1000;
    let both = format!("v1,AAAA{} {VECTOR_SIGNATURE}", &VECTOR_SIGNATURE[7..]);
    assert_eq!(verify(&vector_secret(), VECTOR_ID, "1614265330", &both, VECTOR_BODY, now_ms), Ok(()));
}

#[test]
fn a_timestamp_outside_the_tolerance_is_stale_either_way() {
    let secret = vector_secret();
    let ok = |now_s: i64| verify(&secret, VECTOR_ID, "1614265330", VECTOR_SIGNATURE, VECTOR_BODY, now_s * 1000);
    let edge = WEBHOOK_TIMESTAMP_TOLERANCE_S;
    assert_eq!(ok(VECTOR_TIMESTAMP_S + edge), Ok(()));
    assert_eq!(ok(VECTOR_TIMESTAMP_S - edge), Ok(()));
    assert_eq!(ok(VECTOR_TIMESTAMP_S + edge + 1), Err(VerifyError::Stale));
    assert_eq!(ok(VECTOR_TIMESTAMP_S - edge - 1), Err(VerifyError::Stale));
}

#[test]
fn secrets_hold_24_to_64_bytes() {
    for bytes in [0, 1, 23, 65, 100] {
        assert_eq!(WebhookSecret::from_random(&vec![7; bytes]), Err(SecretError::Length { bytes }));
        let shown = format!("whsec_{}", b64::std_encode(&vec![7; bytes]));
        assert_eq!(WebhookSecret::parse(&shown), Err(SecretError::Length { bytes }), "{bytes}");
    }
    for bytes in [24, 32, 64] {
        let secret = WebhookSecret::from_random(&vec![9; bytes]).unwrap();
        assert_eq!(WebhookSecret::parse(&secret.reveal()).unwrap(), secret);
    }
    assert_eq!(vector_secret().as_bytes().len(), 24);
}

#[test]
fn a_secret_is_whsec_and_standard_base64() {
    let key = [0xfb; 32];
    let shown = WebhookSecret::from_random(&key).unwrap().reveal();
    assert_eq!(shown, format!("whsec_{}", b64::std_encode(&key)));
    assert!(shown.contains('+') || shown.contains('/'), "standard, not URL-safe, alphabet: {shown}");
    assert_eq!(WebhookSecret::parse(&shown[6..]), Err(SecretError::Prefix));
    assert_eq!(WebhookSecret::parse("whsec_not base64!"), Err(SecretError::Base64));
    assert_eq!(WebhookSecret::parse(&shown.replace('+', "-").replace('/', "_")), Err(SecretError::Base64));
}

#[test]
fn a_secret_never_shows_its_bytes_in_debug() {
    let secret = vector_secret();
    assert_eq!(format!("{secret:?}"), "WebhookSecret(24 bytes)");
}

#[test]
fn message_ids_are_plain_and_bounded() {
    let id = MessageId::from_random([0xff; 16]);
    assert_eq!(id.as_str(), format!("msg_{}w", "_".repeat(21)));
    assert_eq!(MessageId::parse(id.as_str()), Some(id));
    for bad in ["", "msg.1", "msg 1", "msg/1", "é", &"a".repeat(WEBHOOK_ID_CHARS_MAX + 1)] {
        assert_eq!(MessageId::parse(bad), None, "{bad}");
    }
    assert!(MessageId::parse(&"a".repeat(WEBHOOK_ID_CHARS_MAX)).is_some());
}

proptest! {
    #[test]
    fn every_signed_delivery_verifies_and_no_other_body_does(
        key in prop::collection::vec(any::<u8>(), WEBHOOK_SECRET_BYTES_MIN..=WEBHOOK_SECRET_BYTES_MAX),
        id in any::<[u8; 16]>(),
        at_ms in 0i64..4_000_000_000_000,
        body in prop::collection::vec(any::<u8>(), 0..512),
        other in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let secret = WebhookSecret::from_random(&key).unwrap();
        let signed = sign(&secret, &MessageId::from_random(id), at_ms, &body);
        prop_assert_eq!(verify(&secret, &signed.id, &signed.timestamp, &signed.signature, &body, at_ms), Ok(()));
        if other != body {
            prop_assert_eq!(
                verify(&secret, &signed.id, &signed.timestamp, &signed.signature, &other, at_ms),
                Err(VerifyError::Signature)
            );
        }
    }
}
