//! The one interface to a harness running a served turn, which the Claude Code driver
//! ([`super::claude_code`]) and the Codex driver ([`super::codex_run`]) implement: events come
//! out on serve's one channel ([`Event`]), commands go in ([`Command`]). A new event (a running
//! commentary) is one more variant the loop handles once; a new command (the owner's words
//! mid-turn) is one more variant each driver carries out in its own `send`: serve's loop never
//! matches over the drivers.

use crate::ask::Waited;
use crate::machine::Runtime;
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
}

/// What serve's loop tells a harness.
#[derive(Debug)]
pub enum Command {
    /// What became of question `question` it asked (the owner's pick, or withdrawn).
    Answer { question: String, waited: Waited },
    /// End the turn now, its whole process group with it.
    Stop,
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
