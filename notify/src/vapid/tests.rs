use super::*;
use crate::endpoint::Environment;
use proptest::prelude::*;

const NOW_MS: i64 = 1_796_041_234_567;
const NOW_S: i64 = NOW_MS / 1000;

fn endpoint() -> Endpoint {
    Endpoint::parse("endpoint", "https://fcm.googleapis.com/fcm/send/abc:def", Environment::Deployed).unwrap()
}

fn subject() -> VapidSubject {
    VapidSubject::parse("mailto:ops@example.com").unwrap()
}

fn key(byte: u8) -> VapidKey {
    VapidKey::from_bytes(&[byte; 32]).unwrap()
}

fn decode_part(part: &str) -> serde_json::Value {
    serde_json::from_slice(&b64::url_decode(part).unwrap()).unwrap()
}

#[test]
fn the_development_pair_is_one_pair_and_says_what_it_is() {
    let dev = VapidKey::parse(DEV_VAPID_PRIVATE_KEY).unwrap();
    assert_eq!(dev.public_key(), DEV_VAPID_PUBLIC_KEY);
    assert!(dev.is_development());
    assert!(DEV_VAPID_PRIVATE_KEY.contains("do-not-deploy"));
    assert_eq!(dev.reveal(), DEV_VAPID_PRIVATE_KEY);
    assert!(is_development_key(DEV_VAPID_PRIVATE_KEY));
    assert!(is_development_key(&format!(" {DEV_VAPID_PRIVATE_KEY}=\n")));
    assert!(!key(1).is_development());
    assert!(!is_development_key(&key(1).reveal()));
    assert!(!is_development_key("not a key"));
}

#[test]
fn the_public_key_is_the_base64url_uncompressed_point() {
    let public = b64::url_decode(key(1).public_key()).unwrap();
    assert_eq!(public.len(), 65);
    assert_eq!(public[0], 0x04);
    assert!(!key(1).public_key().contains('='));
    assert_eq!(VerifyingKey::from_sec1_bytes(&public).unwrap(), *key(1).signing().verifying_key());
}

#[test]
fn a_private_key_is_32_bytes_of_base64url_below_the_group_order() {
    assert_eq!(VapidKey::parse("not base64!").unwrap_err(), VapidKeyError::Base64);
    assert_eq!(VapidKey::parse(&b64::url_encode(&[1; 31])).unwrap_err(), VapidKeyError::Length { bytes: 31 });
    assert_eq!(VapidKey::parse(&b64::url_encode(&[1; 33])).unwrap_err(), VapidKeyError::Length { bytes: 33 });
    assert_eq!(VapidKey::parse(&b64::url_encode(&[0; 32])).unwrap_err(), VapidKeyError::OutOfRange);
    assert_eq!(VapidKey::parse(&b64::url_encode(&[0xff; 32])).unwrap_err(), VapidKeyError::OutOfRange);
    assert_eq!(VapidKey::parse(&key(7).reveal()).unwrap().public_key(), key(7).public_key());
}

#[test]
fn a_token_is_an_es256_jwt_for_the_endpoints_origin_that_the_public_key_verifies() {
    let vapid = key(3);
    let token = vapid.token(&endpoint(), &subject(), NOW_MS, 3600);
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(decode_part(parts[0]), serde_json::json!({"typ": "JWT", "alg": "ES256"}));
    assert_eq!(
        decode_part(parts[1]),
        serde_json::json!({"aud": "https://fcm.googleapis.com", "exp": NOW_S + 3600, "sub": "mailto:ops@example.com"})
    );
    // Checked here with p256 directly, apart from this module's `verify`.
    let public = VerifyingKey::from_sec1_bytes(&b64::url_decode(vapid.public_key()).unwrap()).unwrap();
    let signature = Signature::from_slice(&b64::url_decode(parts[2]).unwrap()).unwrap();
    let signed = format!("{}.{}", parts[0], parts[1]);
    assert!(public.verify(signed.as_bytes(), &signature).is_ok());
    assert!(public.verify(b"something else", &signature).is_err());
    let other = VerifyingKey::from_sec1_bytes(&b64::url_decode(key(4).public_key()).unwrap()).unwrap();
    assert!(other.verify(signed.as_bytes(), &signature).is_err());
}

#[test]
fn a_token_never_lives_past_24_hours() {
    let claims = |ttl_s: i64| {
        let token = key(3).token(&endpoint(), &subject(), NOW_MS, ttl_s);
        decode_part(token.split('.').nth(1).unwrap())
    };
    assert_eq!(claims(7 * 24 * 3600)["exp"], NOW_S + VAPID_TOKEN_TTL_S_MAX);
    assert_eq!(claims(0)["exp"], NOW_S + 1);
    assert_eq!(claims(-5)["exp"], NOW_S + 1);
}

#[test]
fn the_authorization_header_is_vapid_t_and_k() {
    let vapid = key(3);
    let header = vapid.authorization(&endpoint(), &subject(), NOW_MS);
    let token = vapid.token(&endpoint(), &subject(), NOW_MS, VAPID_TOKEN_TTL_S);
    assert_eq!(header, format!("vapid t={token}, k={}", vapid.public_key()));
    // RFC 6979: the same inputs sign the same token.
    assert_eq!(header, vapid.authorization(&endpoint(), &subject(), NOW_MS));
}

#[test]
fn a_push_service_accepts_the_header_and_reads_its_claims() {
    let vapid = key(3);
    let header = vapid.authorization(&endpoint(), &subject(), NOW_MS);
    let claims = verify(&header, Some(vapid.public_key()), "https://fcm.googleapis.com", NOW_MS + 60_000).unwrap();
    assert_eq!(
        claims,
        VapidClaims {
            aud: "https://fcm.googleapis.com".into(),
            exp: NOW_S + VAPID_TOKEN_TTL_S,
            sub: Some("mailto:ops@example.com".into()),
            public_key: vapid.public_key().into(),
        }
    );
    let reordered = format!("vapid k={},t={}", vapid.public_key(), vapid.token(&endpoint(), &subject(), NOW_MS, 60));
    assert!(verify(&reordered, None, "https://fcm.googleapis.com", NOW_MS).is_ok());
}

/// A token with claims of the test's choosing, signed by `vapid`.
fn forged(vapid: &VapidKey, header: &str, claims: &str) -> String {
    let input = format!("{}.{}", b64::url_encode(header.as_bytes()), b64::url_encode(claims.as_bytes()));
    let signature: Signature = vapid.signing().sign(input.as_bytes());
    format!("vapid t={input}.{}, k={}", b64::url_encode(&signature.to_bytes()), vapid.public_key())
}

#[test]
fn a_push_service_refuses_what_rfc_8292_refuses() {
    let vapid = key(3);
    let origin = "https://fcm.googleapis.com";
    let header = vapid.authorization(&endpoint(), &subject(), NOW_MS);
    let check = |header: &str| verify(header, Some(vapid.public_key()), origin, NOW_MS).unwrap_err();

    assert_eq!(verify(&header, Some(key(4).public_key()), origin, NOW_MS).unwrap_err(), VapidRejection::Key);
    assert_eq!(
        verify(&header, None, "https://updates.push.services.mozilla.com", NOW_MS).unwrap_err(),
        VapidRejection::Audience
    );
    let expiry = (NOW_S + VAPID_TOKEN_TTL_S) * 1000;
    assert_eq!(verify(&header, None, origin, expiry).unwrap_err(), VapidRejection::Expiry);
    assert!(verify(&header, None, origin, expiry - 1000).is_ok());

    let far = format!(r#"{{"aud":"{origin}","exp":{},"sub":"mailto:a@b.c"}}"#, NOW_S + VAPID_TOKEN_TTL_S_MAX + 1);
    assert_eq!(check(&forged(&vapid, JWT_HEADER, &far)), VapidRejection::Expiry);
    let fine = format!(r#"{{"aud":"{origin}","exp":{}}}"#, NOW_S + 60);
    assert!(verify(&forged(&vapid, JWT_HEADER, &fine), None, origin, NOW_MS).is_ok());
    assert_eq!(check(&forged(&vapid, r#"{"typ":"JWT","alg":"HS256"}"#, &fine)), VapidRejection::Token);
    assert_eq!(check(&forged(&vapid, JWT_HEADER, r#"{"aud":5}"#)), VapidRejection::Token);

    let (token_part, key_part) = header.split_once(", ").unwrap();
    let mut tampered = token_part.to_string();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    assert!(matches!(check(&format!("{tampered}, {key_part}")), VapidRejection::Signature | VapidRejection::Token));
    let swapped = header.replace(vapid.public_key(), key(4).public_key());
    assert_eq!(verify(&swapped, None, origin, NOW_MS).unwrap_err(), VapidRejection::Signature);

    for bad in [
        "",
        "vapid",
        &header.replacen("vapid", "Bearer", 1),
        token_part,
        &format!("{header}, t=again"),
        &format!("{header}, x=1"),
    ] {
        assert_eq!(check(bad), VapidRejection::Header, "{bad}");
    }
    assert_eq!(check(&header.replacen("t=", "t=a.b.c.", 1)), VapidRejection::Token);
}

#[test]
fn a_subject_is_a_mailto_or_https_uri() {
    for good in ["mailto:ops@example.com", "https://handoff.example.com/contact"] {
        assert_eq!(VapidSubject::parse(good).unwrap().as_str(), good);
    }
    assert_eq!(VapidSubject::parse("ops@example.com"), Err(SubjectError::Scheme));
    assert_eq!(VapidSubject::parse("http://example.com"), Err(SubjectError::Scheme));
    for bad in ["mailto:", "https://", "mailto:a b@c.d", "mailto:\"a\"@c.d", "mailto:a\\@c.d", "mailto:é@c.d"] {
        assert_eq!(VapidSubject::parse(bad), Err(SubjectError::Text), "{bad}");
    }
    let long = format!("mailto:{}@example.com", "a".repeat(VAPID_SUBJECT_BYTES_MAX));
    assert_eq!(VapidSubject::parse(&long), Err(SubjectError::Text));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn every_key_signs_tokens_its_public_key_verifies(bytes in any::<[u8; 32]>(), now_ms in 0i64..4_000_000_000_000) {
        let Ok(vapid) = VapidKey::from_bytes(&bytes) else { return Ok(()) };
        let header = vapid.authorization(&endpoint(), &subject(), now_ms);
        let claims = verify(&header, Some(vapid.public_key()), "https://fcm.googleapis.com", now_ms).unwrap();
        prop_assert_eq!(claims.exp, now_ms / 1000 + VAPID_TOKEN_TTL_S);
    }
}

proptest::proptest! {
    #[test]
    fn a_private_scalar_is_what_rustcrypto_takes_for_one(bytes in proptest::array::uniform32(proptest::prelude::any::<u8>()), high in 0usize..4) {
        // Mostly near the order and zero, where the rule can break.
        let mut b = bytes;
        match high { 0 => b[..4].fill(0xff), 1 => b[..31].fill(0), 2 => b.copy_from_slice(&P256_ORDER), _ => {} }
        proptest::prop_assert_eq!(is_private_scalar(&b), p256::SecretKey::from_slice(&b).is_ok(), "{:?}", b);
    }
}

#[test]
fn the_pkcs8_document_is_the_scalar_under_rfc_5915_and_reads_back_as_the_same_key() {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    use p256::pkcs8::DecodePrivateKey;
    for byte in [1u8, 5, 200] {
        let key = key(byte);
        let read = p256::SecretKey::from_pkcs8_der(&key.pkcs8()).expect("a PKCS#8 P-256 private key");
        assert_eq!(read.to_bytes().as_slice(), b64::url_decode(&key.reveal()).unwrap().as_slice());
        let public = read.public_key().to_encoded_point(false);
        assert_eq!(b64::url_encode(public.as_bytes()), key.public_key(), "the public key a reader derives is ours");
    }
}

#[test]
fn a_token_signed_apart_from_its_signing_input_verifies_and_the_jwk_is_the_pair() {
    // The Worker signs with WebCrypto from the JWK; a signer of RustCrypto's built from the JWK's
    // `d` alone stands in for it here.
    let key = key(5);
    let (d, x, y) = key.jwk();
    assert_eq!(public_key_of_jwk(&x, &y).as_deref(), Some(key.public_key()));
    assert_eq!(public_key_of_jwk(&x, "AAAA"), None);
    let public = b64::url_decode(key.public_key()).unwrap();
    assert_eq!(
        (b64::url_decode(&x).unwrap(), b64::url_decode(&y).unwrap()),
        (public[1..33].to_vec(), public[33..].to_vec())
    );
    let signer = SigningKey::from_slice(&b64::url_decode(&d).unwrap()).unwrap();
    let input = signing_input(&endpoint(), &subject(), 1_796_000_000_000, VAPID_TOKEN_TTL_S);
    let signature: Signature = signer.sign(input.as_bytes());
    let header = authorization_signed(&input, &signature.to_bytes().into(), key.public_key());
    assert_eq!(
        header,
        key.authorization(&endpoint(), &subject(), 1_796_000_000_000),
        "RFC 6979 signs deterministically: the same header"
    );
    let claims = verify(&header, Some(key.public_key()), endpoint().origin(), 1_796_000_000_000).unwrap();
    assert_eq!(claims.sub.as_deref(), Some(subject().as_str()));
}
