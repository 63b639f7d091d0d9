//! `handoff wait`: one version, or with `--follow` every version until the hand-off closes,
//! with a waiting line on a terminal.

use super::shared::{Failure, Out};
use crate::client::{Client, WAIT_TIMEOUT_S_MAX};
use crate::output;
use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long each wait of `wait --follow` is held before it is asked again.
const FOLLOW_WAIT_S: u64 = 60;
/// How often a terminal's waiting line is redrawn.
const TICK_MS: u64 = 250;

#[derive(clap::Args, Debug)]
pub struct WaitArgs {
    pub id: String,
    #[arg(long, value_name = "V")]
    pub after: Option<u64>,
    /// Print every new version as it arrives, until the hand-off closes.
    #[arg(long)]
    pub follow: bool,
    /// Seconds each wait is held by the server (at most 300).
    #[arg(long, value_name = "S")]
    pub timeout: Option<u64>,
}

impl WaitArgs {
    /// `wait`: one version. `wait --follow`: every version until the hand-off closes; on a
    /// terminal a waiting line counts the time since the last change, in a pipe only the
    /// version lines are written (one JSON document a line with `--json`).
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let (id, follow, timeout_s) = (self.id.as_str(), self.follow, self.timeout);
        if timeout_s.is_some_and(|s| s == 0 || s > WAIT_TIMEOUT_S_MAX) {
            return Err(Failure::Usage(format!("--timeout: 1 to {WAIT_TIMEOUT_S_MAX} seconds")));
        }
        let after = match self.after {
            Some(v) => v,
            None => {
                let now = client.get(id)?;
                if follow {
                    // Where it stands now, then every change from here.
                    out.emit(&now, output::follow_lines(&now.value));
                }
                now.value.version
            }
        };
        if !follow {
            let reply = client.wait(id, after, timeout_s.unwrap_or(handoff_core::limits::WAIT_TIMEOUT_S_DEFAULT))?;
            out.emit(&reply, output::follow_lines(&reply.value));
            return Ok(());
        }
        let ticker = std::io::stdout().is_terminal().then(|| Ticker::start(after));
        let result = client.follow(id, after, timeout_s.unwrap_or(FOLLOW_WAIT_S), |reply| {
            let print = || {
                out.emit(reply, output::follow_lines(&reply.value));
                let _ = std::io::stdout().flush();
            };
            match &ticker {
                Some(t) => t.between_lines(reply.value.version, print),
                None => print(),
            }
            ControlFlow::Continue(())
        });
        if let Some(t) = ticker {
            t.stop();
        }
        result?;
        Ok(())
    }
}

/// The waiting line of a terminal: redrawn every [`TICK_MS`] on a thread, erased whenever a
/// version line is printed. One mutex orders both writers.
struct Ticker {
    state: Arc<Mutex<Tick>>,
    thread: std::thread::JoinHandle<()>,
}

struct Tick {
    since: Instant,
    version: u64,
    stopped: bool,
}

const ERASE_LINE: &str = "\r\x1b[2K";

impl Ticker {
    fn start(version: u64) -> Ticker {
        let state = Arc::new(Mutex::new(Tick { since: Instant::now(), version, stopped: false }));
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let mut drawn = String::new();
            loop {
                std::thread::sleep(Duration::from_millis(TICK_MS));
                let tick = shared.lock().unwrap_or_else(|p| p.into_inner());
                if tick.stopped {
                    return;
                }
                // Redrawn only when the text changes, so a slow terminal is not flooded.
                let line = output::waiting_line(tick.version, tick.since.elapsed());
                if line != drawn {
                    let mut stdout = std::io::stdout().lock();
                    let _ = write!(stdout, "{ERASE_LINE}{line}");
                    let _ = stdout.flush();
                    drawn = line;
                }
            }
        });
        Ticker { state, thread }
    }

    fn between_lines(&self, version: u64, print: impl FnOnce()) {
        let mut tick = self.state.lock().unwrap_or_else(|p| p.into_inner());
        print!("{ERASE_LINE}");
        print();
        tick.since = Instant::now();
        tick.version = version;
    }

    fn stop(self) {
        {
            let mut tick = self.state.lock().unwrap_or_else(|p| p.into_inner());
            tick.stopped = true;
            print!("{ERASE_LINE}");
            let _ = std::io::stdout().flush();
        }
        let _ = self.thread.join();
    }
}
