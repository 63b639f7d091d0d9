//! The one interface to a harness running a served turn, which the Claude Code driver
//! ([`super::claude_code`]) and the Codex driver ([`super::codex_run`]) implement: events come
//! out on serve's one channel ([`Event`]), commands go in ([`Command`]). A new event (a running
//! commentary) is one more variant the loop handles once; a new command (the owner's words
//! mid-turn) is one more variant each driver carries out in its own `send`: serve's loop never
//! matches over the drivers.

use crate::ask::Waited;
use crate::machine::Runtime;
use handoff_core::suggestion::Usage;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a harness tells serve's loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// It runs in this harness session (Codex's thread, once Codex gave it).
    Started { session: String },
    /// It asked the owner question `question`, the record at `version` carrying it.
    Asked { question: String, version: u64 },
    /// Its process is gone, as said (`exit 0`, `signal 9`, `interrupted`, `failed: …`).
    Gone { how: String },
    /// What became of steer `id`: the harness took the words, or why they never reached it.
    Steered { id: String, delivered: Result<(), String> },
    /// Its turn's result (Claude Code's `result` line after which no steer is left unread,
    /// Codex's completed turn): the final answer whole, whether the result is an error, and the
    /// context its last call used.
    Finished { answer: String, failed: bool, usage: Option<Usage> },
}

/// What serve's loop tells a harness.
#[derive(Debug)]
pub enum Command {
    /// What became of question `question` it asked (the owner's pick, or withdrawn).
    Answer { question: String, waited: Waited },
    /// The owner's words for the running turn (steer `id`): delivered once, or kept until the
    /// harness can take them, or reported undelivered at the turn's end ([`Event::Steered`]).
    Steer { id: String, prompt: String },
    /// End the turn now, its whole process group with it.
    Stop,
}

/// Steers handed to a driver and not yet taken by its harness: `None` once the turn's end
/// reported them undelivered, so that a steer arriving after that is refused at once and no
/// steer is ever lost between the two.
#[derive(Clone)]
pub struct Kept {
    queue: Arc<Mutex<Option<Vec<SteerWords>>>>,
}

/// A steer's id and its words.
pub type SteerWords = (String, String);

impl Kept {
    /// An open queue: it keeps steers until [`Kept::close`].
    #[allow(clippy::new_without_default)]
    pub fn new() -> Kept {
        Kept { queue: Arc::new(Mutex::new(Some(Vec::new()))) }
    }

    /// Keeps steer `id`; answers `false` when the turn has ended already.
    pub fn keep(&self, id: String, prompt: String) -> bool {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        match q.as_mut() {
            Some(list) => {
                list.push((id, prompt));
                true
            }
            None => false,
        }
    }

    /// The steers kept, oldest first, taken out to be delivered now.
    pub fn take(&self) -> Vec<(String, String)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The turn ended: the steers still kept, which no harness will take; none is kept after.
    pub fn close(&self) -> Vec<(String, String)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default()
    }
}

/// Where a harness sends its events: serve's channel, each event with the turn.
pub type Emit = Arc<dyn Fn(u64, Event) + Send + Sync>;

/// A harness running a served turn.
pub trait Harness: Send {
    fn turn(&self) -> u64;
    fn runtime(&self) -> Runtime;
    fn started(&self) -> Instant;
    /// The leader of its process group, for the state record.
    fn group(&self) -> Option<u32>;
    /// Carries out `command`; a stop answers how the harness ended, once it has.
    fn send(&mut self, command: Command) -> Option<String>;
}

/// How a harness's process ended, set once by the thread that saw it, and waited for by a stop.
#[derive(Clone, Default)]
pub struct Exit {
    how: Arc<(Mutex<Option<String>>, Condvar)>,
}

impl Exit {
    pub fn set(&self, how: String) {
        let (cell, ready) = &*self.how;
        *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(how);
        ready.notify_all();
    }

    pub fn get(&self) -> Option<String> {
        self.how.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits up to `wait` for the end.
    pub fn wait(&self, wait: Duration) -> Option<String> {
        let (cell, ready) = &*self.how;
        let guard = cell.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = ready.wait_timeout_while(guard, wait, |how| how.is_none()).unwrap_or_else(|e| e.into_inner());
        guard.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A steer is kept until taken or until the turn ends; once it ended, none is kept, so a
    /// late steer is refused at once and never lost between the two.
    #[test]
    fn a_steer_is_kept_until_taken_or_the_turn_ends_and_none_is_kept_after() {
        let kept = Kept::new();
        assert!(kept.keep("st_2_1".into(), "use SQLite".into()));
        assert!(kept.keep("st_3_1".into(), "and tests".into()));
        let taken: Vec<String> = kept.take().into_iter().map(|(id, _)| id).collect();
        assert_eq!(taken, ["st_2_1", "st_3_1"], "oldest first");
        assert!(kept.take().is_empty(), "each once");
        assert!(kept.keep("st_4_1".into(), "late".into()));
        assert_eq!(kept.clone().close(), [("st_4_1".to_string(), "late".to_string())], "the end reports what is left");
        assert!(!kept.keep("st_5_1".into(), "after".into()), "after the end, nothing is kept");
        assert!(kept.take().is_empty() && kept.close().is_empty());
    }
}
