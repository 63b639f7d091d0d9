//! A served turn's one sender of timeline events: a thread of its own that sends the turn's
//! [`Queue`] to `POST …/events` as [`super::batch`] says, so that neither the harness nor
//! serve's loop ever waits on the network for an event ([`Timeline::push`] only takes a lock).
//!
//! When a batch cannot be delivered (the service unreachable, a 429 or a 5xx), what waits is
//! written to the turn's spool file in the state folder (`STATE/timeline/ID-turn-N.jsonl`,
//! rewritten whole, 0600) and sent again after a capped, jittered backoff, in order; the file
//! goes once everything in it was taken. A serve that starts finds the files an earlier one
//! left and sends them ([`resume_spooled`]): the service takes events for any kept turn, also
//! after it ended.

use super::batch::Queue;
use crate::client::{Client, Error, Retry};
use handoff_api::error::Code;
use handoff_core::timeline::{Batch, Event};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest one `POST …/events` of the sender may take.
pub const SEND_TIMEOUT_MS: u64 = 10_000;
/// The backoff between failed sends: from this…
pub const SEND_BACKOFF_MS_BASE: u64 = 250;
/// …doubling up to this, jittered.
pub const SEND_BACKOFF_MS_MAX: u64 = 5_000;

/// Where a sender sends, and what it says in serve's log.
#[derive(Clone)]
pub struct Link {
    pub id: String,
    pub turn: u64,
    /// The turn's spool file.
    pub spool: PathBuf,
    /// A client with the current token.
    pub client: Arc<dyn Fn() -> Client + Send + Sync>,
    /// Reads the token file again; answers whether it held a fresh token.
    pub refresh: Arc<dyn Fn() -> bool + Send + Sync>,
    pub say: Arc<dyn Fn(&str) + Send + Sync>,
}

struct State {
    queue: Queue,
    /// No more events come: send what waits, then end.
    finished: bool,
    /// Everything was sent or refused, and the thread ended.
    done: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where a harness's events go: the turn's queue, numbered there.
#[derive(Clone)]
pub struct Timeline {
    shared: Arc<Shared>,
}

impl Timeline {
    /// Queues `event` (its `seq` is the queue's to give); never waits on the network.
    pub fn push(&self, event: Event) {
        let mut state = self.shared.lock();
        state.queue.push(event, crate::hook::now_ms());
        drop(state);
        self.shared.wake.notify_all();
    }

    /// Queues each of `events`, in order.
    pub fn extend(&self, events: Vec<Event>) {
        for event in events {
            self.push(event);
        }
    }
}

/// A turn's sender.
pub struct Sender {
    shared: Arc<Shared>,
    turn: u64,
    spool: PathBuf,
    say: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Sender {
    /// Starts the sender of `link.turn` with what `queue` holds.
    pub fn start(link: Link, queue: Queue) -> Sender {
        let shared =
            Arc::new(Shared { state: Mutex::new(State { queue, finished: false, done: false }), wake: Condvar::new() });
        let (turn, spool, say) = (link.turn, link.spool.clone(), link.say.clone());
        let run = shared.clone();
        std::thread::spawn(move || send_all(&link, &run));
        Sender { shared, turn, spool, say }
    }

    pub fn turn(&self) -> u64 {
        self.turn
    }

    pub fn timeline(&self) -> Timeline {
        Timeline { shared: self.shared.clone() }
    }

    /// No more events come: what waits is sent at once, and the thread ends once it was.
    pub fn finish(&self) {
        self.shared.lock().finished = true;
        self.shared.wake.notify_all();
    }

    /// Writes what still waits to the turn's spool file, for the next serve to send: serve
    /// ends before this sender did.
    pub fn spool_left(&self) {
        let state = self.shared.lock();
        if !state.done && !state.queue.is_empty() {
            spool(&self.spool, &state.queue, &self.say);
        }
    }

    /// Waits up to `within` for everything to be sent (or refused); answers whether it was.
    pub fn wait(&self, within: Duration) -> bool {
        let state = self.shared.lock();
        let (state, _) =
            self.shared.wake.wait_timeout_while(state, within, |s| !s.done).unwrap_or_else(|e| e.into_inner());
        state.done
    }
}

/// What one failed send leads to.
enum Then {
    /// The service numbers from `next`: what waits is numbered again from there.
    Renumber(u64),
    /// Refused for good: what waits is counted refused.
    RefuseAll(String),
    /// Try again after the backoff.
    Retry(String),
    /// The token was refused and a fresh one read: try again now.
    Again,
}

fn then(e: &Error, link: &Link) -> Then {
    let Some(r) = e.refusal() else { return Then::Retry(e.to_string()) };
    let next = r.body["next"].as_u64();
    if r.status == 401 && (link.refresh)() {
        return Then::Again;
    }
    match next {
        Some(next) if r.code.is(Code::TimelineConflict) || r.code.is(Code::TimelineGap) => Then::Renumber(next),
        _ if r.status == 401 || r.status == 429 || r.status >= 500 => Then::Retry(e.to_string()),
        _ => Then::RefuseAll(crate::output::refusal_line(r)),
    }
}

/// The sender's thread: a batch whenever one is due, until finished and empty.
fn send_all(link: &Link, shared: &Shared) {
    let backoff =
        Retry { attempts_max: u32::MAX, backoff_ms_base: SEND_BACKOFF_MS_BASE, backoff_ms_max: SEND_BACKOFF_MS_MAX };
    let mut failures = 0u32;
    let mut spooled = false;
    while let Some(events) = next_batch(shared) {
        let batch = Batch { turn: link.turn, events };
        let client =
            (link.client)().with_retry(Retry::none()).with_request_timeout(Duration::from_millis(SEND_TIMEOUT_MS));
        let result = client.post_events(&link.id, &batch);
        let mut state = shared.lock();
        let wait = match result {
            Ok(taken) => {
                state.queue.taken(taken.value.next);
                failures = 0;
                None
            }
            Err(e) => match then(&e, link) {
                Then::Renumber(next) => {
                    (link.say)(&format!("turn {}: the timeline numbers from {next}: sending from there", link.turn));
                    state.queue.renumber_from(next);
                    None
                }
                Then::RefuseAll(why) => {
                    let n = state.queue.refuse_all();
                    (link.say)(&format!("turn {}: the timeline refused {n} event(s): {why}", link.turn));
                    None
                }
                Then::Again => None,
                Then::Retry(why) => {
                    failures = failures.saturating_add(1);
                    let pause = backoff.delay(failures, None, random_u64());
                    if failures == 1 {
                        (link.say)(&format!(
                            "turn {}: could not send its events ({why}): spooled, sending again in order",
                            link.turn
                        ));
                    }
                    Some(pause)
                }
            },
        };
        if wait.is_some() || spooled {
            spooled = spool(&link.spool, &state.queue, &link.say);
        }
        drop(state);
        if let Some(pause) = wait {
            std::thread::sleep(pause);
        }
    }
    let mut state = shared.lock();
    if spooled || link.spool.exists() {
        let _ = std::fs::remove_file(&link.spool);
    }
    if state.queue.refused > 0 {
        (link.say)(&format!("turn {}: {} event(s) were not recorded on its timeline", link.turn, state.queue.refused));
    }
    state.done = true;
    drop(state);
    shared.wake.notify_all();
}

/// Waits until a batch is due, and answers it; `None` once finished with nothing waiting.
fn next_batch(shared: &Shared) -> Option<Vec<Event>> {
    let mut state = shared.lock();
    loop {
        match state.queue.due_in_ms(crate::hook::now_ms()) {
            None if state.finished => return None,
            None => state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
            Some(0) => return Some(state.queue.batch()),
            Some(_) if state.finished => return Some(state.queue.batch()),
            Some(ms) => {
                state = shared.wake.wait_timeout(state, Duration::from_millis(ms)).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }
}

/// Writes what waits to the turn's spool file (or removes it when nothing does); answers
/// whether a file is left.
fn spool(path: &Path, queue: &Queue, say: &Arc<dyn Fn(&str) + Send + Sync>) -> bool {
    if queue.is_empty() {
        let _ = std::fs::remove_file(path);
        return false;
    }
    let mut text = String::new();
    for event in queue.waiting() {
        text.push_str(&serde_json::to_string(event).unwrap_or_default());
        text.push('\n');
    }
    let written = path
        .parent()
        .map_or(Ok(()), crate::private::dir)
        .and_then(|()| crate::private::write(&path.with_extension("jsonl.tmp"), text.as_bytes()))
        .and_then(|()| std::fs::rename(path.with_extension("jsonl.tmp"), path));
    if let Err(e) = written {
        say(&format!("could not spool the timeline to {}: {e}", path.display()));
    }
    true
}

/// The events a spool file holds, oldest first; a line that does not read is skipped.
pub fn read_spool(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Starts a sender for each turn of hand-off `id` whose events an earlier serve spooled, each
/// finished at once (it ends once its events were sent); `link` makes each one's link.
pub fn resume_spooled(state_dir: &Path, id: &str, link: &dyn Fn(u64, PathBuf) -> Link) -> Vec<Sender> {
    let prefix = format!("{id}-turn-");
    let Ok(entries) = std::fs::read_dir(crate::machine::paths::timeline_dir(state_dir)) else { return Vec::new() };
    let mut senders = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(turn) = name.strip_prefix(&prefix).and_then(|t| t.strip_suffix(".jsonl")).and_then(|t| t.parse().ok())
        else {
            continue;
        };
        let events = read_spool(&entry.path());
        let sender = Sender::start(link(turn, entry.path()), Queue::of(events, crate::hook::now_ms()));
        sender.finish();
        senders.push(sender);
    }
    senders
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::getrandom(&mut b);
    u64::from_le_bytes(b)
}
