use super::*;
use crate::json::parse_checked;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn message(seq: u64, text: &str) -> Event {
    Event { text: Some(text.into()), ..Event::of(seq, Kind::Message) }
}

fn tool(seq: u64, state: ToolState) -> Event {
    Event {
        kind: Kind::Tool,
        text: None,
        id: Some("toolu_1".into()),
        name: Some("Bash".into()),
        state: Some(state),
        input: Some("ls -la".into()),
        ..message(seq, "")
    }
}

fn batch(turn: u64, events: Vec<Event>) -> Batch {
    Batch { turn, events }
}

/// A turn's timeline as storage keeps it: `(seq, json)`.
#[derive(Default)]
struct Stored {
    facts: TurnFacts,
    events: BTreeMap<u64, String>,
}

impl Stored {
    fn post(&mut self, b: &Batch, current: u64) -> Result<Taken, Refused> {
        let repeated: Vec<(u64, String)> =
            b.events.iter().filter_map(|e| self.events.get(&e.seq).map(|json| (e.seq, json.clone()))).collect();
        let taken = take(b, current, &self.facts, &repeated)?;
        for (seq, json) in &taken.new {
            self.events.insert(*seq, json.clone());
        }
        self.facts = taken.facts;
        Ok(taken)
    }
}

#[test]
fn a_batch_is_taken_and_answers_the_next_seq() {
    let mut s = Stored::default();
    let taken = s.post(&batch(1, vec![message(1, "hello"), tool(2, ToolState::Started)]), 1).unwrap();
    assert_eq!(taken.next(), 3);
    assert_eq!(taken.new.len(), 2);
    assert_eq!(s.facts.events, 2);
}

#[test]
fn a_repeated_seq_with_the_same_content_changes_nothing() {
    let mut s = Stored::default();
    s.post(&batch(1, vec![message(1, "a"), message(2, "b")]), 1).unwrap();
    let again = s.post(&batch(1, vec![message(1, "a"), message(2, "b")]), 1).unwrap();
    assert!(again.new.is_empty());
    assert_eq!(again.next(), 3);
    // A batch that repeats some and adds some is taken: only the new ones are stored.
    let overlap = s.post(&batch(1, vec![message(2, "b"), message(3, "c")]), 1).unwrap();
    assert_eq!(overlap.new.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3]);
}

#[test]
fn a_repeated_seq_with_other_content_is_a_conflict_and_stores_nothing() {
    let mut s = Stored::default();
    s.post(&batch(1, vec![message(1, "a")]), 1).unwrap();
    let refused = s.post(&batch(1, vec![message(1, "other"), message(2, "b")]), 1).unwrap_err();
    assert_eq!(refused.refusal.code, Code::TimelineConflict);
    assert_eq!(refused.next, Some(2));
    assert_eq!(s.facts.events, 1, "the batch is taken whole or not at all");
}

#[test]
fn a_gap_is_refused_naming_the_next_seq_expected() {
    let mut s = Stored::default();
    s.post(&batch(1, vec![message(1, "a")]), 1).unwrap();
    let refused = s.post(&batch(1, vec![message(3, "c")]), 1).unwrap_err();
    assert_eq!(refused.refusal.code, Code::TimelineGap);
    assert_eq!(refused.next, Some(2));
    assert!(refused.refusal.message.contains("seq 2"), "{}", refused.refusal.message);
}

#[test]
fn events_are_taken_for_any_kept_turn_and_refused_for_a_dropped_or_unopened_one() {
    let s = Stored::default();
    let current = 1 + TIMELINE_TURNS_KEPT_MAX;
    assert!(take(&batch(current - TIMELINE_TURNS_KEPT_MAX + 1, vec![message(1, "a")]), current, &s.facts, &[]).is_ok());
    let old = take(&batch(1, vec![message(1, "a")]), current, &s.facts, &[]).unwrap_err();
    assert_eq!(old.refusal.code, Code::TimelineDropped);
    let ahead = take(&batch(current + 1, vec![message(1, "a")]), current, &s.facts, &[]).unwrap_err();
    assert_eq!(ahead.refusal.code, Code::TurnOutOfOrder);
    let dropped = TurnFacts { events: 3, bytes: 10, dropped: true };
    assert_eq!(
        take(&batch(current, vec![message(4, "a")]), current, &dropped, &[]).unwrap_err().refusal.code,
        Code::TimelineDropped
    );
    assert_eq!(dropped_through(TIMELINE_TURNS_KEPT_MAX), None);
    assert_eq!(dropped_through(TIMELINE_TURNS_KEPT_MAX + 1), Some(1));
}

#[test]
fn a_turn_past_its_cap_of_events_or_bytes_refuses_more() {
    let near = TurnFacts { events: TIMELINE_EVENTS_PER_TURN_MAX - 1, bytes: 0, dropped: false };
    let seq = near.next();
    assert!(take(&batch(1, vec![message(seq, "a")]), 1, &near, &[]).is_ok());
    let refused = take(&batch(1, vec![message(seq, "a"), message(seq + 1, "b")]), 1, &near, &[]).unwrap_err();
    assert_eq!(refused.refusal.code, Code::TimelineFull);
    let heavy = TurnFacts { events: 1, bytes: TIMELINE_BYTES_PER_TURN_MAX as u64 - 10, dropped: false };
    let refused = take(&batch(1, vec![message(2, "more than ten bytes")]), 1, &heavy, &[]).unwrap_err();
    assert_eq!(refused.refusal.code, Code::TimelineFull);
}

#[test]
fn each_kind_carries_only_its_fields_within_its_caps() {
    let ok = |body: &str| parse_checked::<Batch>(body.as_bytes());
    assert!(ok(r#"{"turn":1,"events":[{"seq":1,"kind":"message","text":"hi"}]}"#).is_ok());
    assert!(ok(
        r#"{"turn":1,"events":[{"seq":1,"kind":"tool","id":"t1","name":"Bash","state":"started","input":"ls"}]}"#
    )
    .is_ok());
    assert!(ok(r#"{"turn":1,"events":[{"seq":1,"kind":"note","text":"resumed"}]}"#).is_ok());
    for (bad, field) in [
        (r#"{"turn":1,"events":[]}"#, "events"),
        (r#"{"turn":0,"events":[{"seq":1,"kind":"note","text":"x"}]}"#, "turn"),
        (r#"{"turn":1,"events":[{"seq":0,"kind":"note","text":"x"}]}"#, "events[0].seq"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"message"}]}"#, "events[0].text"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"message","text":"x","name":"Bash"}]}"#, "events[0].name"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"tool","id":"t","name":"B"}]}"#, "events[0].state"),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"tool","id":"t","name":"B","state":"done","text":"x"}]}"#,
            "events[0].text",
        ),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"steer","text":"x"}]}"#, "events[0].id"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"note","text":"a\u001b[2J"}]}"#, "events[0].text"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"note","text":"a","at":"2026-01-01T00:00:00Z"}]}"#, "events[0].at"),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"note","text":"a"},{"seq":3,"kind":"note","text":"b"}]}"#,
            "events[1].seq",
        ),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"tool","id":"t","name":"B","state":"done","output":"abc","output_bytes":2}]}"#,
            "events[0].output_bytes",
        ),
    ] {
        let refused = ok(bad).unwrap_err();
        assert!(refused.message.starts_with(field), "{bad}: {}", refused.message);
    }
    let long = "x".repeat(TIMELINE_MESSAGE_BYTES_MAX + 1);
    let body = format!(r#"{{"turn":1,"events":[{{"seq":1,"kind":"message","text":"{long}"}}]}}"#);
    assert!(ok(&body).is_err(), "a message is at most 16 KiB");
    let output = "x".repeat(TIMELINE_OUTPUT_BYTES_MAX + 1);
    let body = format!(
        r#"{{"turn":1,"events":[{{"seq":1,"kind":"tool","id":"t","name":"B","state":"done","output":"{output}"}}]}}"#
    );
    assert!(ok(&body).is_err(), "an output is at most 4 KiB");
    let many: Vec<String> = (1..=TIMELINE_EVENTS_PER_REQUEST_MAX as u64 + 1)
        .map(|s| format!(r#"{{"seq":{s},"kind":"note","text":"n"}}"#))
        .collect();
    assert!(ok(&format!(r#"{{"turn":1,"events":[{}]}}"#, many.join(","))).is_err(), "at most 64 events a request");
}

/// A steer event names the steer and says `delivered`, or `undelivered` with `why`, and
/// carries nothing else; a tool's states are a tool's, a steer's a steer's.
#[test]
fn a_steer_event_names_its_steer_and_says_delivered_or_undelivered_with_why() {
    let ok = |body: &str| parse_checked::<Batch>(body.as_bytes());
    let delivered = r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"delivered"}]}"#;
    assert_eq!(ok(delivered).unwrap().events[0], Event::steer(1, "st_5_1", Ok(())));
    let undelivered =
        r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"undelivered","why":"ended"}]}"#;
    assert_eq!(ok(undelivered).unwrap().events[0], Event::steer(1, "st_5_1", Err("ended")));
    for (bad, field) in [
        (r#"{"turn":1,"events":[{"seq":1,"kind":"steer","state":"delivered"}]}"#, "events[0].id"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1"}]}"#, "events[0].state"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"done"}]}"#, "events[0].state"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"undelivered"}]}"#, "events[0].why"),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"delivered","why":"x"}]}"#,
            "events[0].why",
        ),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"delivered","text":"x"}]}"#,
            "events[0].text",
        ),
        (
            r#"{"turn":1,"events":[{"seq":1,"kind":"steer","id":"st_5_1","state":"undelivered","why":"a\u001b[2J"}]}"#,
            "events[0].why",
        ),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"tool","id":"t","name":"B","state":"delivered"}]}"#, "events[0].state"),
        (r#"{"turn":1,"events":[{"seq":1,"kind":"note","text":"x","why":"y"}]}"#, "events[0].why"),
    ] {
        let refused = ok(bad).unwrap_err();
        assert!(refused.message.starts_with(field), "{bad}: {}", refused.message);
    }
    let long = "x".repeat(TIMELINE_WHY_BYTES_MAX + 1);
    let body =
        format!(r#"{{"turn":1,"events":[{{"seq":1,"kind":"steer","id":"s","state":"undelivered","why":"{long}"}}]}}"#);
    assert!(ok(&body).is_err(), "a why is at most 1 KiB");
    let clipped = Event::steer(1, "s", Err(&long));
    assert_eq!(clipped.why.as_ref().map(String::len), Some(TIMELINE_WHY_BYTES_MAX), "the machine clips it");
}

#[test]
fn a_steer_event_naming_a_steer_its_turn_did_not_take_is_refused() {
    let b = batch(3, vec![message(1, "hi"), Event::steer(2, "st_9_1", Ok(()))]);
    assert!(unknown_steer(&b, |id| id == "st_9_1").is_ok());
    let refused = unknown_steer(&b, |id| id == "st_8_1").unwrap_err();
    assert_eq!(refused.code, Code::RequestInvalid);
    assert_eq!(refused.message, "events[1].id: turn 3 took no steer st_9_1");
}

#[test]
fn a_stored_event_reads_back_with_the_time_it_was_taken_and_compares_without_it() {
    let e = message(1, "hi");
    let back = read_back(&e.stored_json(), 1_000).unwrap();
    assert_eq!(back.at, Some(Timestamp::from_ms(1_000)));
    assert_eq!(back.stored_json(), e.stored_json());
}

#[derive(Debug, Clone)]
enum Post {
    /// A batch from `from` of `n` events, each text `v{seq}`, or `other` for a changed one.
    Batch { from: u64, n: u64, other: bool },
}

fn post() -> impl Strategy<Value = Post> {
    (1u64..40, 1u64..8, proptest::bool::weighted(0.1)).prop_map(|(from, n, other)| Post::Batch { from, n, other })
}

proptest! {
    /// Whatever batches arrive (repeats, overlaps, conflicts, gaps), the timeline holds the
    /// events 1..=next-1, each as first taken, and a refused batch stores nothing.
    #[test]
    fn any_run_of_batches_keeps_a_gap_free_timeline_each_event_as_first_taken(posts in proptest::collection::vec(post(), 1..60)) {
        let mut s = Stored::default();
        for Post::Batch { from, n, other } in posts {
            let events: Vec<Event> = (from..from + n)
                .map(|seq| message(seq, &if other { format!("x{seq}") } else { format!("v{seq}") }))
                .collect();
            let before = (s.facts, s.events.clone());
            let next = s.facts.next();
            match s.post(&batch(1, events), 1) {
                Ok(taken) => {
                    prop_assert!(from <= next);
                    prop_assert_eq!(taken.next(), next.max(from + n));
                }
                Err(refused) => {
                    prop_assert_eq!((s.facts, &s.events), (before.0, &before.1));
                    let gap = from > next;
                    let code = refused.refusal.code;
                    let expected = if gap { Code::TimelineGap } else { Code::TimelineConflict };
                    prop_assert_eq!(code, expected);
                }
            }
            prop_assert_eq!(s.events.len() as u64, s.facts.events);
            for (i, seq) in s.events.keys().enumerate() {
                prop_assert_eq!(*seq, i as u64 + 1);
            }
            for (seq, json) in &before.1 {
                prop_assert_eq!(s.events.get(seq), Some(json), "a taken event never changes");
            }
            let bytes: u64 = s.events.values().map(|j| j.len() as u64).sum();
            prop_assert_eq!(bytes, s.facts.bytes);
        }
    }
}
