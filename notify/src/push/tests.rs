use super::*;
use crate::ece::UserAgent;
use crate::endpoint::Environment;
use crate::vapid;

#[test]
fn events_have_one_name_one_type_and_read_back() {
    let names: Vec<_> = Event::ALL.iter().map(|e| e.name()).collect();
    assert_eq!(names, ["needs-you", "done", "failed", "closed"]);
    let types: Vec<_> = Event::ALL.iter().map(|e| e.message_type()).collect();
    assert_eq!(types, ["handoff.needs_you", "handoff.done", "handoff.failed", "handoff.closed"]);
    for event in Event::ALL {
        assert_eq!(Event::parse(event.name()), Some(event));
    }
    for unknown in ["", "needs_you", "Done", "running", "handoff.done"] {
        assert_eq!(Event::parse(unknown), None, "{unknown}");
    }
}

#[test]
fn a_needs_you_is_high_urgency_and_the_rest_normal() {
    assert_eq!(Event::NeedsYou.urgency().header_value(), "high");
    for event in [Event::Done, Event::Failed, Event::Closed] {
        assert_eq!(event.urgency().header_value(), "normal");
    }
    assert_eq!(Urgency::VeryLow.header_value(), "very-low");
    assert_eq!(Urgency::Low.header_value(), "low");
}

#[test]
fn a_topic_is_32_url_safe_characters_stable_per_handoff() {
    let ids = ["ho_a", "ho_b", "", "ho_😀", &"x".repeat(10_000)];
    for id in ids {
        let topic = Topic::for_handoff(id);
        assert_eq!(topic.as_str().len(), TOPIC_CHARS_MAX, "{id}");
        assert!(topic.as_str().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(topic, Topic::for_handoff(id));
        assert!(!topic.as_str().contains(id) || id.is_empty());
    }
    assert_ne!(Topic::for_handoff("ho_a"), Topic::for_handoff("ho_b"));
    // SHA-256("ho_a"), its first 24 bytes in unpadded URL-safe base64.
    let digest = Sha256::digest(b"ho_a");
    assert_eq!(Topic::for_handoff("ho_a").as_str(), b64::url_encode(&digest[..24]));
}

#[test]
fn a_push_request_carries_the_rfc_8030_headers_and_a_body_the_subscriber_decrypts() {
    let ua = UserAgent::from_bytes(&[5; 32], [6; 16]).unwrap();
    let to = Subscription {
        endpoint: Endpoint::parse("endpoint", "https://web.push.apple.com/QGuQ", Environment::Deployed).unwrap(),
        keys: ua.subscription_keys(),
    };
    let from = Sender {
        key: VapidKey::from_bytes(&[9; 32]).unwrap(),
        subject: VapidSubject::parse("mailto:ops@example.com").unwrap(),
    };
    let entropy = MessageEntropy::from_bytes(&[3; MessageEntropy::BYTES]).unwrap();
    let now_ms = 1_796_041_234_567;
    let push =
        request(&to, &from, Event::NeedsYou, "ho_a", br#"{"type":"handoff.needs_you"}"#, &entropy, now_ms).unwrap();

    assert_eq!(push.endpoint, "https://web.push.apple.com/QGuQ");
    let header = |name: &str| push.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str()).unwrap();
    assert_eq!(header("content-encoding"), "aes128gcm");
    assert_eq!(header("content-type"), "application/octet-stream");
    assert_eq!(header("ttl"), PUSH_TTL_S.to_string());
    assert_eq!(header("urgency"), "high");
    assert_eq!(header("topic"), Topic::for_handoff("ho_a").as_str());
    let claims =
        vapid::verify(header("authorization"), Some(from.key.public_key()), "https://web.push.apple.com", now_ms)
            .unwrap();
    assert_eq!(claims.sub.as_deref(), Some("mailto:ops@example.com"));
    assert_eq!(push.headers.len(), 6);
    assert_eq!(ua.decrypt(&push.body).unwrap(), br#"{"type":"handoff.needs_you"}"#);

    let too_long = vec![b' '; crate::limits::PUSH_PLAINTEXT_BYTES_MAX + 1];
    assert!(request(&to, &from, Event::Done, "ho_a", &too_long, &entropy, now_ms).is_err());
}

#[test]
fn a_404_or_410_removes_the_subscription_and_only_2xx_delivers() {
    assert_eq!(PushOutcome::of_status(201), PushOutcome::Delivered);
    assert_eq!(PushOutcome::of_status(200), PushOutcome::Delivered);
    assert_eq!(PushOutcome::of_status(404), PushOutcome::Gone);
    assert_eq!(PushOutcome::of_status(410), PushOutcome::Gone);
    for status in [0, 199, 301, 400, 401, 403, 413, 429, 500, 502, 503] {
        assert_eq!(PushOutcome::of_status(status), PushOutcome::Retry, "{status}");
    }
}
