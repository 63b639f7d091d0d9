use super::*;
use crate::limits::WATCH_EVENTS_FRAME_BYTES_MAX;
use proptest::prelude::*;

const FRAME: usize = 1_000;
const LATER: i64 = 1_000;

fn watcher(after: u64, version: u64) -> (Watcher, SocketStep) {
    Watcher::open(Role::Owner, LATER, after, version, false, FRAME)
}

#[test]
fn a_watch_gets_the_record_at_once_only_when_its_version_is_above_after() {
    assert_eq!(watcher(3, 4).1, SocketStep::Send);
    assert_eq!(watcher(4, 4).1, SocketStep::Nothing);
    assert_eq!(watcher(9, 4).1, SocketStep::Nothing);
    assert_eq!(watcher(3, 4).0.sent, 4);
}

#[test]
fn each_version_is_sent_once_in_order_and_never_again() {
    let (mut w, _) = watcher(0, 1);
    assert_eq!(w.on_version(1, false, FRAME, 0), SocketStep::Nothing, "version 1 went at the open");
    assert_eq!(w.on_version(2, false, FRAME, 0), SocketStep::Send);
    assert_eq!(
        w.on_version(2, false, FRAME, 0),
        SocketStep::Nothing,
        "a woken object compares and sends nothing twice"
    );
    assert_eq!(w.on_version(1, false, FRAME, 0), SocketStep::Nothing, "an older version never goes out");
    assert_eq!(w.sent, 2);
}

#[test]
fn a_close_sends_the_last_record_then_closes_with_1000() {
    let (mut w, _) = watcher(0, 1);
    assert_eq!(w.on_version(2, true, FRAME, 0), SocketStep::SendThenClose(Close::HANDOFF_CLOSED));
    assert_eq!(Close::HANDOFF_CLOSED.code, 1000);
    assert_eq!(w.on_version(2, true, FRAME, 0), SocketStep::Nothing, "a closed socket is sent nothing more");
    assert_eq!(w.on_message(Some(r#"{"after":0}"#), 2, true, FRAME, 0), SocketStep::Nothing);
}

#[test]
fn a_watch_opened_on_a_closed_hand_off_gets_its_last_record_and_the_close_whatever_after_says() {
    for after in [0, 4, 5, 9] {
        let (w, step) = Watcher::open(Role::Owner, LATER, after, 5, true, FRAME);
        assert_eq!(step, SocketStep::SendThenClose(Close::HANDOFF_CLOSED), "after={after}");
        assert!(w.closed);
    }
}

#[test]
fn an_expired_token_closes_with_4401_at_the_next_send_or_message_and_not_before() {
    let (mut w, _) = Watcher::open(Role::Machine, 100, 0, 1, false, FRAME);
    assert_eq!(w.on_version(2, false, FRAME, 100), SocketStep::Send, "still valid at its last second");
    assert_eq!(w.on_version(3, false, FRAME, 101), SocketStep::Close(Close::TOKEN_EXPIRED));
    assert_eq!(Close::TOKEN_EXPIRED.code, 4401);
    let (mut w, _) = Watcher::open(Role::Machine, 100, 0, 1, false, FRAME);
    assert_eq!(w.on_message(Some(r#"{"after":1}"#), 1, false, FRAME, 101), SocketStep::Close(Close::TOKEN_EXPIRED));
}

#[test]
fn anything_but_after_closes_with_1003() {
    for text in [Some("pong"), Some("{}"), Some(r#"{"after":-1}"#), Some(r#"{"after":1,"x":2}"#), Some("[1]"), None] {
        let (mut w, _) = watcher(0, 1);
        assert_eq!(w.on_message(text, 1, false, FRAME, 0), SocketStep::Close(Close::UNSUPPORTED), "{text:?}");
        assert_eq!(Close::UNSUPPORTED.code, 1003);
    }
}

#[test]
fn after_resynchronises_and_acknowledges() {
    let (mut w, _) = watcher(0, 3);
    assert_eq!(w.unacked, vec![(3, FRAME as u32)]);
    // The client says it has 5 (from elsewhere): nothing up to 5 is owed.
    assert_eq!(w.on_message(Some(r#"{"after":5}"#), 5, false, FRAME, 0), SocketStep::Nothing);
    assert!(w.unacked.is_empty(), "acknowledged");
    assert_eq!(w.on_version(6, false, FRAME, 0), SocketStep::Send);
    // Acknowledging exactly the last version sent leaves nothing unacknowledged.
    assert_eq!(w.on_message(Some(r#"{"after":6}"#), 6, false, FRAME, 0), SocketStep::Nothing);
    assert!(w.unacked.is_empty(), "{:?}", w.unacked);
    // A client behind the record is answered with it, each time it says it is behind.
    let (mut w, _) = watcher(7, 7);
    w.sent = 2;
    assert_eq!(w.on_message(Some(r#"{"after":2}"#), 7, false, FRAME, 0), SocketStep::Send);
    assert_eq!(w.on_message(Some(r#"{"after":7}"#), 7, false, FRAME, 0), SocketStep::Nothing, "it has 7 now");
}

#[test]
fn after_v_re_synchronises_a_socket_that_was_sent_the_record_already_and_pushes_stay_once() {
    let (mut w, step) = watcher(0, 4);
    assert_eq!(step, SocketStep::Send, "version 4 went at the open");
    assert_eq!(w.on_version(4, false, FRAME, 0), SocketStep::Nothing, "never pushed twice unasked");
    // The client lost its state and says it has only 1: it is sent the record again.
    assert_eq!(w.on_message(Some(r#"{"after":1}"#), 4, false, FRAME, 0), SocketStep::Send);
    assert_eq!(w.sent, 4);
    assert_eq!(
        w.on_version(4, false, FRAME, 0),
        SocketStep::Nothing,
        "and the next push is still only a newer version"
    );
    assert_eq!(w.on_version(5, false, FRAME, 0), SocketStep::Send);
    // Saying it has the current version asks for nothing.
    assert_eq!(w.on_message(Some(r#"{"after":5}"#), 5, false, FRAME, 0), SocketStep::Nothing);
}

#[test]
fn a_reader_that_never_acknowledges_is_closed_with_1013_before_its_bytes_pass_the_cap() {
    let big = WATCH_UNACKED_BYTES_MAX / 4;
    let (mut w, _) = Watcher::open(Role::Owner, LATER, 0, 1, false, big);
    let mut version = 1;
    let step = loop {
        version += 1;
        let step = w.on_version(version, false, big, 0);
        if step != SocketStep::Send {
            break step;
        }
    };
    assert_eq!(step, SocketStep::Close(Close::SLOW_READER));
    assert_eq!(Close::SLOW_READER.code, 1013);
    assert!(w.unacked_bytes() <= WATCH_UNACKED_BYTES_MAX as u64);
    assert_eq!(version, 5, "four frames of a quarter of the cap fit, the fifth does not");
}

#[test]
fn a_reader_that_acknowledges_is_never_closed() {
    let (mut w, _) = Watcher::open(Role::Owner, LATER, 0, 1, false, FRAME);
    for version in 2..10 * WATCH_UNACKED_FRAMES_MAX as u64 {
        assert_eq!(w.on_version(version, false, FRAME, 0), SocketStep::Send);
        if version % 8 == 0 {
            let ack = format!(r#"{{"after":{version}}}"#);
            assert_eq!(w.on_message(Some(&ack), version, false, FRAME, 0), SocketStep::Nothing);
        }
    }
}

#[test]
fn clients_acknowledge_at_half_the_caps_as_the_contract_says() {
    // docs/openapi.yaml: "acknowledge with {"after": V} at least every 32 frames and every
    // 128 KiB": half the frames' cap and a quarter of the bytes' (512 KiB, room
    // for the longest record frame beside a timeline frame), so an acknowledgement on its way
    // never lets a cap pass, and a timeline frame waiting for room is always owed one.
    assert_eq!((ACK_EVERY_FRAMES, ACK_EVERY_BYTES), (32, 128 * 1024));
    assert_eq!((2 * ACK_EVERY_FRAMES, 4 * ACK_EVERY_BYTES), (WATCH_UNACKED_FRAMES_MAX, WATCH_UNACKED_BYTES_MAX));
    assert!(WATCH_UNACKED_BYTES_MAX - WATCH_EVENTS_FRAME_BYTES_MAX >= ACK_EVERY_BYTES);
}

#[test]
fn too_many_unacknowledged_frames_close_with_1013_too() {
    let (mut w, _) = Watcher::open(Role::Owner, LATER, 0, 1, false, 1);
    let sends = (2..).take_while(|v| w.on_version(*v, false, 1, 0) == SocketStep::Send).count();
    assert_eq!(sends + 1, WATCH_UNACKED_FRAMES_MAX);
    assert!(w.closed);
}

#[test]
fn each_role_is_capped_apart_and_the_cap_is_named() {
    let (name, max) = cap(Role::Machine);
    assert_eq!(name, "MACHINE_WATCHERS_PER_HANDOFF_MAX");
    assert!(admit(max - 1, max, name).is_ok());
    let refusal = admit(max, max, name).unwrap_err();
    assert_eq!(refusal.code, Code::WatchTooMany);
    assert!(refusal.message.contains(name));
    assert!(cap(Role::Owner).1 > cap(Role::Machine).1);
    assert_eq!(cap(Role::Owner).0, "OWNER_WATCHERS_PER_HANDOFF_MAX");
}

#[test]
fn the_subprotocols_offer_a_bearer_only_next_to_handoff_v1() {
    assert_eq!(offered(None).unwrap(), Offered::default());
    assert_eq!(
        offered(Some("handoff.v1, bearer.abc.def")).unwrap(),
        Offered { bearer: Some("abc.def".into()), handoff_v1: true, handoff_v2: false }
    );
    assert_eq!(offered(Some("handoff.v1")).unwrap(), Offered { bearer: None, handoff_v1: true, handoff_v2: false });
    assert_eq!(offered(Some("bearer.abc")).unwrap_err().code, Code::RequestInvalid);
    assert_eq!(offered(Some("chat")).unwrap_err().code, Code::RequestInvalid);
    assert_eq!(offered(Some("handoff.v1,bearer.a,bearer.b")).unwrap_err().code, Code::RequestInvalid);
}

#[test]
fn the_attachment_round_trips_and_refuses_what_it_did_not_write() {
    let (mut w, _) = watcher(0, 3);
    w.on_version(4, false, 12, 0);
    assert_eq!(Watcher::decode(&w.encode()), Some(w.clone()));
    assert_eq!(Watcher::decode("{}"), None);
    assert_eq!(Watcher::decode("null"), None);
    let (w, _) = Watcher::open(Role::Owner, LATER, 0, 1, false, FRAME);
    let mut full = w;
    full.unacked = (0..WATCH_UNACKED_FRAMES_MAX as u64).map(|v| (u64::MAX - v, u32::MAX)).collect();
    assert!(full.encode().len() < 16 * 1024, "under the runtime's 16 KiB attachment limit");
}

/// What happens to one socket: versions published (each one above the last, closed or not),
/// acknowledgements and resynchronisations, with the clock moving.
#[derive(Debug, Clone)]
enum Event {
    Publish { closes: bool, frame: usize },
    Ack { behind: u64 },
    Tick { s: i64 },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (proptest::bool::weighted(0.05), 1usize..40_000).prop_map(|(closes, frame)| Event::Publish { closes, frame }),
        3 => (0u64..4).prop_map(|behind| Event::Ack { behind }),
        1 => (0i64..30).prop_map(|s| Event::Tick { s }),
    ]
}

proptest! {
    /// The watch's rules over any history: the versions a socket is pushed rise strictly by
    /// one from where it started up to the point it is closed (gap-free while it is
    /// open, each once), and a client that says it is behind is sent the current record;
    /// nothing goes out after a close; the unacknowledged bytes never pass
    /// the cap; a close of the hand-off ends with its last record; an expired token ends the
    /// socket at the next step and not before.
    #[test]
    fn a_socket_sees_a_gap_free_rising_run_of_versions_until_it_is_closed(
        after in 0u64..5,
        events in proptest::collection::vec(event(), 0..120),
        lifetime_s in 0i64..400,
    ) {
        let mut version = after + 1;
        let mut now = 0i64;
        let mut closed = false;
        let (mut w, step) = Watcher::open(Role::Owner, lifetime_s, after, version, false, 100);
        prop_assert_eq!(step, SocketStep::Send);
        let mut seen = vec![version];
        let mut pushed = vec![version];
        let mut ended: Option<Close> = None;
        for e in events {
            if closed {
                break;
            }
            let (step, asked_after) = match e {
                Event::Publish { closes, frame } => {
                    version += 1;
                    closed = closes;
                    (w.on_version(version, closed, frame, now), None)
                }
                Event::Ack { behind } => {
                    let acked = seen.last().copied().unwrap_or(after).saturating_sub(behind);
                    (w.on_message(Some(&format!(r#"{{"after":{acked}}}"#)), version, closed, 100, now), Some(acked))
                }
                Event::Tick { s } => {
                    now += s;
                    (SocketStep::Nothing, None)
                }
            };
            match step {
                SocketStep::Send | SocketStep::SendThenClose(_) => {
                    prop_assert!(ended.is_none(), "sent after a close");
                    prop_assert!(now <= lifetime_s, "sent on an expired token");
                    match asked_after {
                        // A re-synchronisation answers the current record, only when it is newer.
                        Some(acked) => prop_assert!(version > acked),
                        None => pushed.push(version),
                    }
                    seen.push(version);
                }
                SocketStep::Nothing if ended.is_none() && asked_after.is_some_and(|acked| acked < version) => {
                    prop_assert!(false, "a socket behind the record by its own word was not re-synchronised");
                }
                _ => {}
            }
            match step {
                SocketStep::SendThenClose(c) | SocketStep::Close(c) => {
                    prop_assert!(ended.is_none(), "closed twice");
                    if c == Close::TOKEN_EXPIRED {
                        prop_assert!(now > lifetime_s);
                    }
                    if c == Close::HANDOFF_CLOSED {
                        prop_assert!(closed);
                        prop_assert_eq!(seen.last().copied(), Some(version), "the last record goes before the close");
                    }
                    ended = Some(c);
                }
                _ => {}
            }
            if ended.is_none() && !w.closed {
                prop_assert_eq!(w.sent, version, "an open socket is never left behind the record");
            }
            prop_assert!(w.unacked_bytes() <= WATCH_UNACKED_BYTES_MAX as u64);
            prop_assert!(w.unacked.len() <= WATCH_UNACKED_FRAMES_MAX);
        }
        for pair in pushed.windows(2) {
            prop_assert_eq!(pair[1], pair[0] + 1, "pushes are gap-free and each once: {:?}", pushed);
        }
        for pair in seen.windows(2) {
            prop_assert!(pair[1] >= pair[0], "nothing older than what was sent goes out: {:?}", seen);
        }
    }
}

// ---- handoff.v2: the timeline beside the records. ----

fn v2(seen: Seen) -> Watcher {
    let (mut w, _) = watcher(1, 1);
    w.timeline = Some(seen);
    w
}

#[test]
fn a_v2_socket_is_owed_its_turns_events_once_in_order_and_a_new_turns_from_the_first() {
    let mut w = v2(Seen { turn: 1, seq: 0 });
    assert_eq!(w.owed_events(1, 3), Some(0));
    assert_eq!(w.send_events(1, 3, FRAME, 0), SocketStep::Send);
    assert_eq!(w.owed_events(1, 3), None, "sent once");
    assert_eq!(w.owed_events(1, 5), Some(3), "the next ones after what it has");
    assert_eq!(w.owed_events(2, 2), Some(0), "a new turn's from its first");
    w.send_events(2, 2, FRAME, 0);
    assert_eq!(w.owed_events(1, 9), None, "an older turn's late events are read, not pushed");
    let (v1, _) = watcher(1, 1);
    assert_eq!(v1.owed_events(1, 3), None, "a v1 socket is sent records only");
}

#[test]
fn a_v2_acknowledgement_names_the_timeline_and_resynchronises_it_and_v1_takes_after_alone() {
    let mut w = v2(Seen { turn: 1, seq: 0 });
    w.send_events(1, 4, FRAME, 0);
    w.send_events(1, 6, FRAME, 0);
    assert_eq!(w.on_message(Some(r#"{"after":1,"turn":1,"seq":4}"#), 1, false, FRAME, 0), SocketStep::Nothing);
    assert_eq!(w.unacked_events, vec![(1, 6, FRAME as u32)]);
    assert_eq!(w.timeline, Some(Seen { turn: 1, seq: 4 }), "what the client has is what it says");
    assert_eq!(w.owed_events(1, 6), Some(4), "anything newer is owed again");
    assert_eq!(
        w.on_message(Some(r#"{"after":1,"turn":1}"#), 1, false, FRAME, 0),
        SocketStep::Close(Close::UNSUPPORTED)
    );
    let (mut v1, _) = watcher(1, 1);
    let step = v1.on_message(Some(r#"{"after":1,"turn":1,"seq":1}"#), 1, false, FRAME, 0);
    assert_eq!(step, SocketStep::Close(Close::UNSUPPORTED), "v1 is exactly today's: {{\"after\": V}} alone");
}

#[test]
fn the_slow_reader_bounds_count_timeline_frames_too() {
    let mut w = v2(Seen::default());
    let big = WATCH_UNACKED_BYTES_MAX / 4;
    for last in 1..=4 {
        assert_eq!(w.send_events(1, last, big, 0), SocketStep::Send);
    }
    assert_eq!(
        w.on_version(2, false, FRAME, 0),
        SocketStep::Close(Close::SLOW_READER),
        "the record is counted with them"
    );
    let mut w = v2(Seen::default());
    for last in 1..WATCH_UNACKED_FRAMES_MAX as u64 {
        assert_eq!(w.send_events(1, last, 1, 0), SocketStep::Send);
    }
    assert_eq!(w.on_version(2, false, 1, 0), SocketStep::Send, "the 64th frame");
    assert_eq!(w.send_events(1, 99, 1, 0), SocketStep::Nothing, "a timeline frame past the bounds waits");
    assert_eq!(w.owed_events(1, 99), Some(WATCH_UNACKED_FRAMES_MAX as u64 - 1), "still owed, from storage");
    assert_eq!(w.on_version(3, false, 1, 0), SocketStep::Close(Close::SLOW_READER), "a record past them closes");
    assert_eq!(w.send_events(1, 100, 1, 0), SocketStep::Nothing, "nothing more once closed");
}

#[test]
fn a_client_may_offer_handoff_v2_alone_or_beside_handoff_v1() {
    let both = offered(Some("handoff.v1, handoff.v2, bearer.t")).unwrap();
    assert!(both.handoff_v1 && both.handoff_v2);
    assert!(offered(Some("handoff.v2")).unwrap().handoff_v2);
    assert!(offered(Some("bearer.t")).is_err());
}
