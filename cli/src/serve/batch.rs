//! The rules of a served turn's one sender, without I/O: how its events are numbered, when a
//! batch is due, what a batch holds, and what each answer of the service does to the queue.
//!
//! - serve numbers a turn's events: `seq` from 1, consecutive, in the order they came;
//! - a batch is due once [`BATCH_EVENTS_MAX`] events wait or the oldest has waited
//!   [`BATCH_WAIT_MS`]; it holds the oldest events, at most [`BATCH_EVENTS_MAX`] and within the
//!   route's body cap ([`BATCH_BODY_BYTES_MAX`]);
//! - an event leaves the queue only when the service's `next` has passed its `seq`, so a batch
//!   whose answer was lost is sent again whole, and the service takes the repeat as nothing;
//! - past the turn's caps ([`TIMELINE_EVENTS_PER_TURN_MAX`], [`TIMELINE_BYTES_PER_TURN_MAX`])
//!   an event is not queued but counted refused, as is every event the service refuses for
//!   good (`timeline.full`, `timeline.dropped`).

use handoff_core::limits::{
    TIMELINE_BODY_BYTES_MAX, TIMELINE_BYTES_PER_TURN_MAX, TIMELINE_EVENTS_PER_REQUEST_MAX, TIMELINE_EVENTS_PER_TURN_MAX,
};
use handoff_core::timeline::Event;
use std::collections::VecDeque;

/// The longest an event waits for its batch.
pub const BATCH_WAIT_MS: u64 = 250;
/// The most events one batch carries: the route's own limit.
pub const BATCH_EVENTS_MAX: usize = TIMELINE_EVENTS_PER_REQUEST_MAX;
/// The most bytes one batch's events take, leaving room for the body's frame.
pub const BATCH_BODY_BYTES_MAX: usize = TIMELINE_BODY_BYTES_MAX - 1024;

/// One turn's events not yet taken by the service, numbered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    /// The `seq` the next event pushed takes.
    next_seq: u64,
    /// Events waiting, oldest first, each with when it was pushed.
    waiting: VecDeque<(Event, i64)>,
    /// Events numbered so far, and their stored bytes: what the turn's caps count.
    numbered: u64,
    bytes: u64,
    /// Events not recorded: over the turn's caps, or refused by the service for good.
    pub refused: u64,
}

impl Queue {
    pub fn new() -> Queue {
        Queue { next_seq: 1, ..Queue::default() }
    }

    /// A queue of events numbered already (spooled by an earlier serve), oldest first.
    pub fn of(events: Vec<Event>, now_ms: i64) -> Queue {
        let next_seq = events.last().map_or(1, |e| e.seq + 1);
        let bytes = events.iter().map(|e| e.stored_json().len() as u64).sum();
        let numbered = events.len() as u64;
        let waiting = events.into_iter().map(|e| (e, now_ms)).collect();
        Queue { next_seq, waiting, numbered, bytes, refused: 0 }
    }

    /// Numbers `event` and queues it, or counts it refused past the turn's caps.
    pub fn push(&mut self, event: Event, now_ms: i64) {
        let event = Event { seq: self.next_seq, ..event };
        let bytes = event.stored_json().len() as u64;
        let over_count = self.numbered >= TIMELINE_EVENTS_PER_TURN_MAX;
        let over_bytes = self.bytes + bytes > TIMELINE_BYTES_PER_TURN_MAX as u64;
        if over_count || over_bytes {
            self.refused += 1;
            return;
        }
        self.next_seq += 1;
        self.numbered += 1;
        self.bytes += bytes;
        self.waiting.push_back((event, now_ms));
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The events waiting, oldest first.
    pub fn waiting(&self) -> impl Iterator<Item = &Event> {
        self.waiting.iter().map(|(e, _)| e)
    }

    /// In how many ms a batch is due at `now_ms` (0: now); `None` when nothing waits.
    pub fn due_in_ms(&self, now_ms: i64) -> Option<u64> {
        let (_, oldest) = self.waiting.front()?;
        if self.waiting.len() >= BATCH_EVENTS_MAX {
            return Some(0);
        }
        Some(BATCH_WAIT_MS.saturating_sub((now_ms - oldest).max(0) as u64))
    }

    /// The next batch: the oldest events, at most [`BATCH_EVENTS_MAX`], within
    /// [`BATCH_BODY_BYTES_MAX`] (one event always goes, since the route takes any one).
    pub fn batch(&self) -> Vec<Event> {
        let mut bytes = 0;
        let mut out = Vec::new();
        for (event, _) in self.waiting.iter().take(BATCH_EVENTS_MAX) {
            let size = serde_json::to_string(event).map_or(0, |j| j.len()) + 1;
            if !out.is_empty() && bytes + size > BATCH_BODY_BYTES_MAX {
                break;
            }
            bytes += size;
            out.push(event.clone());
        }
        out
    }

    /// The service took the turn's events before `next`: they leave the queue.
    pub fn taken(&mut self, next: u64) {
        while self.waiting.front().is_some_and(|(e, _)| e.seq < next) {
            self.waiting.pop_front();
        }
    }

    /// The service numbers differently (`timeline.conflict` or `timeline.gap`, naming its
    /// `next`): what waits is numbered again from there, in the same order.
    pub fn renumber_from(&mut self, next: u64) {
        for (i, (event, _)) in self.waiting.iter_mut().enumerate() {
            event.seq = next + i as u64;
        }
        self.next_seq = next + self.waiting.len() as u64;
    }

    /// The service refuses the turn's events for good: everything waiting is counted refused.
    pub fn refuse_all(&mut self) -> u64 {
        let n = self.waiting.len() as u64;
        self.waiting.clear();
        self.refused += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::timeline::Kind;

    fn message(text: &str) -> Event {
        Event { text: Some(text.into()), ..Event::of(0, Kind::Message) }
    }

    fn seqs(events: &[Event]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn a_turns_events_are_numbered_from_1_consecutively_in_the_order_they_came() {
        let mut q = Queue::new();
        for (i, t) in ["a", "b", "c"].into_iter().enumerate() {
            q.push(message(t), i as i64);
        }
        let batch = q.batch();
        assert_eq!(seqs(&batch), [1, 2, 3]);
        assert_eq!(batch.iter().map(|e| e.text.clone().unwrap()).collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn a_batch_is_due_after_250_ms_or_at_64_events_whichever_comes_first() {
        let mut q = Queue::new();
        assert_eq!(q.due_in_ms(0), None, "nothing waits");
        q.push(message("a"), 1_000);
        assert_eq!(q.due_in_ms(1_000), Some(BATCH_WAIT_MS));
        assert_eq!(q.due_in_ms(1_100), Some(BATCH_WAIT_MS - 100));
        assert_eq!(q.due_in_ms(1_000 + BATCH_WAIT_MS as i64), Some(0));
        let mut full = Queue::new();
        for _ in 0..BATCH_EVENTS_MAX {
            full.push(message("x"), 5_000);
        }
        assert_eq!(full.due_in_ms(5_000), Some(0), "64 events go at once");
        full.push(message("y"), 5_000);
        assert_eq!(full.batch().len(), BATCH_EVENTS_MAX, "at most 64 a batch");
    }

    #[test]
    fn a_batch_fits_the_routes_body_cap_and_one_event_always_goes() {
        let mut q = Queue::new();
        let big = "w".repeat(handoff_core::limits::TIMELINE_MESSAGE_BYTES_MAX);
        for _ in 0..40 {
            q.push(message(&big), 0);
        }
        let batch = q.batch();
        let body = serde_json::to_string(&handoff_core::timeline::Batch { turn: 1, events: batch.clone() }).unwrap();
        assert!(body.len() <= TIMELINE_BODY_BYTES_MAX, "{}", body.len());
        assert!(batch.len() > 1 && batch.len() < 40, "{}", batch.len());
    }

    #[test]
    fn events_leave_only_once_taken_so_a_lost_answer_sends_the_same_batch_again() {
        let mut q = Queue::new();
        for t in ["a", "b", "c"] {
            q.push(message(t), 0);
        }
        let first = q.batch();
        // The answer was lost: nothing was taken, the same batch goes again.
        assert_eq!(q.batch(), first);
        q.taken(3);
        assert_eq!(seqs(&q.batch()), [3]);
        q.push(message("d"), 0);
        assert_eq!(seqs(&q.batch()), [3, 4], "in order, after a drop too");
        q.taken(5);
        assert!(q.is_empty());
    }

    #[test]
    fn a_conflict_or_a_gap_numbers_what_waits_again_from_the_services_next() {
        let mut q = Queue::new();
        for t in ["a", "b"] {
            q.push(message(t), 0);
        }
        q.renumber_from(7);
        assert_eq!(seqs(&q.batch()), [7, 8]);
        q.push(message("c"), 0);
        assert_eq!(seqs(&q.batch()), [7, 8, 9]);
    }

    #[test]
    fn past_the_turns_caps_events_are_counted_refused_and_never_queued() {
        let mut q = Queue::new();
        for _ in 0..TIMELINE_EVENTS_PER_TURN_MAX + 5 {
            q.push(message("x"), 0);
        }
        assert_eq!(q.refused, 5);
        assert_eq!(q.waiting().count() as u64, TIMELINE_EVENTS_PER_TURN_MAX);
        let mut bytes = Queue::new();
        let big = "w".repeat(handoff_core::limits::TIMELINE_MESSAGE_BYTES_MAX);
        for _ in 0..100 {
            bytes.push(message(&big), 0);
        }
        assert!(bytes.refused > 0, "the turn's bytes cap");
        let held: usize = bytes.waiting().map(|e| e.stored_json().len()).sum();
        assert!(held <= TIMELINE_BYTES_PER_TURN_MAX);
        assert_eq!(q.refuse_all(), TIMELINE_EVENTS_PER_TURN_MAX);
        assert_eq!(q.refused, TIMELINE_EVENTS_PER_TURN_MAX + 5);
    }

    #[test]
    fn a_spooled_queue_goes_on_from_its_last_seq() {
        let mut first = Queue::new();
        for t in ["a", "b"] {
            first.push(message(t), 0);
        }
        first.taken(2);
        let mut again = Queue::of(first.waiting().cloned().collect(), 10);
        again.push(message("c"), 10);
        assert_eq!(seqs(&again.batch()), [2, 3]);
    }
}
