use super::*;
use crate::limits::PUSH_BODY_BYTES_MAX;
use proptest::prelude::*;

/// RFC 8291 Appendix A, "Intermediate Values for Encryption".
mod rfc8291 {
    pub const PLAINTEXT: &[u8] = b"When I grow up, I want to be a watermelon";
    pub const AS_PRIVATE: &str = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw";
    pub const AS_PUBLIC: &str =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8";
    pub const UA_PRIVATE: &str = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94";
    pub const UA_PUBLIC: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    pub const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";
    pub const SALT: &str = "DGv6ra1nlYgDCS1FRnbzlw";
    pub const BODY: &str = concat!(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml",
        "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT",
        "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
    );
}

fn decode<const N: usize>(text: &str) -> [u8; N] {
    b64::url_decode(text).unwrap().try_into().unwrap()
}

fn rfc_entropy() -> MessageEntropy {
    let mut bytes = [0u8; MessageEntropy::BYTES];
    bytes[..32].copy_from_slice(&decode::<32>(rfc8291::AS_PRIVATE));
    bytes[32..].copy_from_slice(&decode::<16>(rfc8291::SALT));
    MessageEntropy::from_bytes(&bytes).unwrap()
}

fn rfc_user_agent() -> UserAgent {
    UserAgent::from_bytes(&decode::<32>(rfc8291::UA_PRIVATE), decode::<16>(rfc8291::AUTH)).unwrap()
}

#[test]
fn the_rfc_8291_example_encrypts_byte_for_byte() {
    let keys = SubscriptionKeys::parse(rfc8291::UA_PUBLIC, rfc8291::AUTH).unwrap();
    let body = encrypt(rfc8291::PLAINTEXT, &keys, &rfc_entropy()).unwrap();
    assert_eq!(b64::url_encode(&body), rfc8291::BODY);
}

#[test]
fn a_message_prepared_and_sealed_apart_is_the_rfc_8291_example_byte_for_byte() {
    // The Worker seals with WebCrypto: here an AES-128-GCM of RustCrypto's stands in for it,
    // called only through the cek, nonce and record the prepared message shows.
    let keys = SubscriptionKeys::parse(rfc8291::UA_PUBLIC, rfc8291::AUTH).unwrap();
    let unsealed = prepare(rfc8291::PLAINTEXT, 0, &keys, &rfc_entropy()).unwrap();
    let cipher = Aes128Gcm::new(unsealed.cek().into());
    let sealed = cipher.encrypt(Nonce::from_slice(unsealed.nonce()), unsealed.record()).unwrap();
    assert_eq!(unsealed.record().len() + PUSH_TAG_BYTES, sealed.len());
    assert_eq!(b64::url_encode(&unsealed.finish(&sealed)), rfc8291::BODY);
    assert!(matches!(
        prepare(&[0; PUSH_PLAINTEXT_BYTES_MAX], 1, &keys, &rfc_entropy()),
        Err(EncryptError::TooLong { .. })
    ));
}

#[test]
fn a_message_from_an_ecdh_made_apart_is_the_rfc_8291_example_byte_for_byte() {
    // The Worker's ECDH is WebCrypto's; RustCrypto's, on the example's keys, stands in for it.
    let keys = SubscriptionKeys::parse(rfc8291::UA_PUBLIC, rfc8291::AUTH).unwrap();
    assert_eq!(b64::url_encode(&keys.p256dh_point()), rfc8291::UA_PUBLIC);
    let entropy = rfc_entropy();
    let shared =
        p256::ecdh::diffie_hellman(entropy.key.to_nonzero_scalar(), public_key(&keys.p256dh).unwrap().as_affine());
    let exchanged = Exchanged {
        as_public: decode::<P256_POINT_BYTES>(rfc8291::AS_PUBLIC),
        secret: shared.raw_secret_bytes().as_slice().try_into().unwrap(),
        salt: decode::<SALT_BYTES>(rfc8291::SALT),
    };
    let unsealed = prepare_with(rfc8291::PLAINTEXT, 0, &keys, &exchanged).unwrap();
    let sealed = unsealed.keys.seal(unsealed.record());
    assert_eq!(b64::url_encode(&unsealed.finish(&sealed)), rfc8291::BODY);
    let too_long = vec![0u8; PUSH_PLAINTEXT_BYTES_MAX + 1];
    assert!(matches!(prepare_with(&too_long, 0, &keys, &exchanged), Err(EncryptError::TooLong { .. })));
}

#[test]
fn the_rfc_8291_example_decrypts_with_the_user_agents_keys() {
    let body = b64::url_decode(rfc8291::BODY).unwrap();
    assert_eq!(rfc_user_agent().decrypt(&body).unwrap(), rfc8291::PLAINTEXT);
}

#[test]
fn the_rfc_8291_keys_are_the_pairs_the_example_names() {
    assert_eq!(rfc_user_agent().subscription_keys().p256dh(), rfc8291::UA_PUBLIC);
    assert_eq!(b64::url_encode(&uncompressed(&rfc_entropy().key.public_key())), rfc8291::AS_PUBLIC);
}

#[test]
fn the_header_carries_salt_record_size_and_the_senders_key() {
    let keys = SubscriptionKeys::parse(rfc8291::UA_PUBLIC, rfc8291::AUTH).unwrap();
    let body = encrypt(rfc8291::PLAINTEXT, &keys, &rfc_entropy()).unwrap();
    assert_eq!(&body[..16], &decode::<16>(rfc8291::SALT));
    assert_eq!(u32::from_be_bytes(body[16..20].try_into().unwrap()), PUSH_RECORD_BYTES);
    assert_eq!(body[20], 65);
    assert_eq!(&body[21..86], &decode::<65>(rfc8291::AS_PUBLIC));
    assert_eq!(body.len(), PUSH_HEADER_BYTES + rfc8291::PLAINTEXT.len() + 1 + PUSH_TAG_BYTES);
}

#[test]
fn another_auth_secret_does_not_decrypt() {
    let body = b64::url_decode(rfc8291::BODY).unwrap();
    let stranger = UserAgent::from_bytes(&decode::<32>(rfc8291::UA_PRIVATE), [7; 16]).unwrap();
    assert_eq!(stranger.decrypt(&body), Err(DecryptError::Tag));
}

#[test]
fn the_largest_plaintext_fills_the_4096_bytes_a_push_service_accepts() {
    let ua = rfc_user_agent();
    let keys = ua.subscription_keys();
    let largest = vec![b'x'; PUSH_PLAINTEXT_BYTES_MAX];
    let body = encrypt(&largest, &keys, &rfc_entropy()).unwrap();
    assert_eq!(body.len(), PUSH_BODY_BYTES_MAX);
    assert_eq!(ua.decrypt(&body).unwrap(), largest);
    let over = vec![b'x'; PUSH_PLAINTEXT_BYTES_MAX + 1];
    assert_eq!(
        encrypt(&over, &keys, &rfc_entropy()),
        Err(EncryptError::TooLong { bytes: PUSH_PLAINTEXT_BYTES_MAX + 1 })
    );
    assert_eq!(
        encrypt_padded(&largest, 1, &keys, &rfc_entropy()),
        Err(EncryptError::TooLong { bytes: PUSH_PLAINTEXT_BYTES_MAX + 1 })
    );
}

#[test]
fn padding_is_zeros_after_the_last_record_delimiter_and_is_removed() {
    let ua = rfc_user_agent();
    let keys = ua.subscription_keys();
    let body = encrypt_padded(b"hi", 100, &keys, &rfc_entropy()).unwrap();
    assert_eq!(body.len(), PUSH_HEADER_BYTES + 2 + 1 + 100 + PUSH_TAG_BYTES);
    assert_eq!(ua.decrypt(&body).unwrap(), b"hi");
}

/// A body whose one record is `record`, sealed with the RFC example's keys.
fn sealed_with_rfc_keys(record: &[u8], record_bytes: u32) -> Vec<u8> {
    let entropy = rfc_entropy();
    let ua = rfc_user_agent();
    let ua_public = uncompressed(&ua.key.public_key());
    let as_public = uncompressed(&entropy.key.public_key());
    let shared = p256::ecdh::diffie_hellman(entropy.key.to_nonzero_scalar(), ua.key.public_key().as_affine());
    let keys = ContentKeys::derive(shared.raw_secret_bytes(), &ua.auth, &ua_public, &as_public, &entropy.salt);
    let mut body = entropy.salt.to_vec();
    body.extend_from_slice(&record_bytes.to_be_bytes());
    body.push(65);
    body.extend_from_slice(&as_public);
    body.extend_from_slice(&keys.seal(record));
    body
}

#[test]
fn a_record_must_end_with_the_last_record_delimiter_and_zero_padding() {
    let ua = rfc_user_agent();
    assert_eq!(ua.decrypt(&sealed_with_rfc_keys(b"ok\x02\0\0", 4096)).unwrap(), b"ok");
    for bad in [&b"ok\x01"[..], b"ok\x01\0\0", b"ok", b"ok\x02\0\x05", b"\0\0\0"] {
        assert_eq!(ua.decrypt(&sealed_with_rfc_keys(bad, 4096)), Err(DecryptError::Padding), "{bad:?}");
    }
    // A tag and nothing else holds no delimiter at all.
    assert_eq!(ua.decrypt(&sealed_with_rfc_keys(b"", 4096)), Err(DecryptError::NotOneRecord));
}

#[test]
fn a_malformed_header_or_more_than_one_record_is_refused() {
    let ua = rfc_user_agent();
    let body = b64::url_decode(rfc8291::BODY).unwrap();
    assert_eq!(ua.decrypt(&body[..PUSH_HEADER_BYTES - 1]), Err(DecryptError::Header));
    assert_eq!(ua.decrypt(&body[..PUSH_HEADER_BYTES + PUSH_TAG_BYTES]), Err(DecryptError::NotOneRecord));

    let mut small_rs = body.clone();
    small_rs[16..20].copy_from_slice(&(RECORD_BYTES_MIN - 1).to_be_bytes());
    assert_eq!(ua.decrypt(&small_rs), Err(DecryptError::RecordSize));

    // The record is 58 bytes: a record size under that means a second record follows.
    let mut two_records = body.clone();
    two_records[16..20].copy_from_slice(&57u32.to_be_bytes());
    assert_eq!(ua.decrypt(&two_records), Err(DecryptError::NotOneRecord));
    let mut exact = body.clone();
    exact[16..20].copy_from_slice(&58u32.to_be_bytes());
    assert_eq!(ua.decrypt(&exact).unwrap(), rfc8291::PLAINTEXT);

    let mut key_id_length = body.clone();
    key_id_length[20] = 64;
    assert_eq!(ua.decrypt(&key_id_length), Err(DecryptError::Header));
    let mut off_curve = body.clone();
    off_curve[22] ^= 1;
    assert_eq!(ua.decrypt(&off_curve), Err(DecryptError::Header));
}

#[test]
fn subscription_keys_are_refused_naming_their_field() {
    let refused = |p256dh: &str, auth: &str| SubscriptionKeys::parse(p256dh, auth).unwrap_err();
    let point = decode::<65>(rfc8291::UA_PUBLIC);

    assert_eq!(refused("not base64!", rfc8291::AUTH), KeyRefusal { field: "keys.p256dh", problem: KeyProblem::Base64 });
    let compressed = p256::PublicKey::from_sec1_bytes(&point).unwrap().to_encoded_point(true);
    assert_eq!(
        refused(&b64::url_encode(compressed.as_bytes()), rfc8291::AUTH),
        KeyRefusal { field: "keys.p256dh", problem: KeyProblem::Length { expected: 65 } }
    );
    let mut off_curve = point;
    off_curve[64] ^= 1;
    assert_eq!(
        refused(&b64::url_encode(&off_curve), rfc8291::AUTH),
        KeyRefusal { field: "keys.p256dh", problem: KeyProblem::NotOnCurve }
    );
    let mut not_uncompressed = point;
    not_uncompressed[0] = 0x06;
    assert_eq!(refused(&b64::url_encode(&not_uncompressed), rfc8291::AUTH).problem, KeyProblem::NotOnCurve);

    assert_eq!(refused(rfc8291::UA_PUBLIC, "***"), KeyRefusal { field: "keys.auth", problem: KeyProblem::Base64 });
    assert_eq!(
        refused(rfc8291::UA_PUBLIC, &b64::url_encode(&[1; 15])),
        KeyRefusal { field: "keys.auth", problem: KeyProblem::Length { expected: 16 } }
    );
    let refusal = refused(rfc8291::UA_PUBLIC, "");
    assert_eq!(refusal.to_string(), "keys.auth must hold 16 bytes");
}

#[test]
fn subscription_keys_are_read_padded_or_not_and_shown_unpadded() {
    let padded = SubscriptionKeys::parse(&format!("{}=", rfc8291::UA_PUBLIC), &format!("{}==", rfc8291::AUTH)).unwrap();
    assert_eq!(padded, SubscriptionKeys::parse(rfc8291::UA_PUBLIC, rfc8291::AUTH).unwrap());
    assert_eq!(padded.p256dh(), rfc8291::UA_PUBLIC);
    assert_eq!(padded.auth(), rfc8291::AUTH);
}

#[test]
fn random_bytes_that_are_no_private_key_are_refused() {
    let mut zero = [0u8; MessageEntropy::BYTES];
    assert!(MessageEntropy::from_bytes(&zero).is_err());
    zero[..32].fill(0xff);
    assert!(MessageEntropy::from_bytes(&zero).is_err());
    assert!(UserAgent::from_bytes(&[0xff; 32], [0; 16]).is_err());
}

fn user_agent() -> impl Strategy<Value = UserAgent> {
    (any::<[u8; 32]>(), any::<[u8; 16]>())
        .prop_filter_map("a P-256 private key", |(key, auth)| UserAgent::from_bytes(&key, auth).ok())
}

fn entropy() -> impl Strategy<Value = MessageEntropy> {
    prop::collection::vec(any::<u8>(), MessageEntropy::BYTES)
        .prop_filter_map("a P-256 private key", |bytes| MessageEntropy::from_bytes(&bytes.try_into().unwrap()).ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_message_decrypts_to_its_plaintext(
        ua in user_agent(),
        entropy in entropy(),
        plaintext in prop::collection::vec(any::<u8>(), 0..=PUSH_PLAINTEXT_BYTES_MAX),
        padding in 0usize..200,
    ) {
        let padding = padding.min(PUSH_PLAINTEXT_BYTES_MAX - plaintext.len());
        let body = encrypt_padded(&plaintext, padding, &ua.subscription_keys(), &entropy).unwrap();
        prop_assert!(body.len() <= PUSH_BODY_BYTES_MAX);
        prop_assert_eq!(ua.decrypt(&body).unwrap(), plaintext);
    }

    #[test]
    fn a_changed_byte_never_decrypts(
        ua in user_agent(),
        entropy in entropy(),
        plaintext in prop::collection::vec(any::<u8>(), 0..64),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let mut body = encrypt(&plaintext, &ua.subscription_keys(), &entropy).unwrap();
        let at = at.index(body.len());
        body[at] ^= flip;
        // The record size (bytes 16..20) is not authenticated: a larger one still reads one
        // record; every other change is refused.
        let record_size = (16..20).contains(&at);
        if let Ok(decrypted) = ua.decrypt(&body) {
            prop_assert!(record_size && decrypted == plaintext);
        }
    }

    #[test]
    fn each_message_has_its_own_salt_and_key(
        ua in user_agent(),
        first in entropy(),
        second in entropy(),
    ) {
        let keys = ua.subscription_keys();
        let (a, b) = (encrypt(b"same", &keys, &first).unwrap(), encrypt(b"same", &keys, &second).unwrap());
        prop_assert_ne!(&a[..16], &b[..16]);
        prop_assert_ne!(&a[21..86], &b[21..86]);
        prop_assert_ne!(&a[86..], &b[86..]);
    }
}
