//! A steer's `steer` event (`delivered`, or `undelivered` with why) for a turn no sender runs
//! for any more (its harness is gone, or serve restarted): one direct `POST …/events` after
//! the turn's last seq. While the turn runs, its sender ([`super::sender`]) numbers it with
//! the turn's other events.

use crate::client::{Batch, Client, Error, Event};
use handoff_api::error::Code;

/// Attempts at a free `seq`: the service names the turn's next one on a gap or a conflict.
const ATTEMPTS_MAX: usize = 3;

/// Writes steer `steer`'s outcome as turn `turn`'s event at `*next`, moving `*next` past it;
/// on a gap or a conflict (another writer took that seq) it goes on from the `next` the
/// service names. Answers the seq taken.
pub fn write(
    client: &Client,
    id: &str,
    turn: u64,
    next: &mut u64,
    steer: &str,
    delivered: Result<(), &str>,
) -> Result<u64, Error> {
    write_event(client, id, turn, next, &|seq| Event::steer(seq, steer, delivered))
}

/// Writes `event(seq)` as turn `turn`'s event at `*next`, moving `*next` past it; on a gap or
/// a conflict (another writer took that seq) it goes on from the `next` the service names, so
/// it never takes a seq another writer numbered. Answers the seq taken.
pub fn write_event(
    client: &Client,
    id: &str,
    turn: u64,
    next: &mut u64,
    event: &dyn Fn(u64) -> Event,
) -> Result<u64, Error> {
    let mut last = None;
    for _ in 0..ATTEMPTS_MAX {
        let seq = (*next).max(1);
        let batch = Batch { turn, events: vec![event(seq)] };
        match client.post_events(id, &batch) {
            Ok(taken) => {
                *next = taken.value.next;
                return Ok(seq);
            }
            Err(e) => {
                let named = e.refusal().and_then(|r| r.body["next"].as_u64()).filter(|n| *n != seq);
                let again = e.code().is_some_and(|c| c.is(Code::TimelineGap) || c.is(Code::TimelineConflict));
                match named {
                    Some(n) if again => {
                        *next = n;
                        last = Some(e);
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    Err(last.expect("at least one attempt was made"))
}
