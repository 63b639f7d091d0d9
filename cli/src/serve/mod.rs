//! `handoff serve ID`: runs, on the cloud machine, every turn the owner opens from anywhere.
//!
//! One loop receives every input on one channel ([`Input`]): each record of the hand-off (a
//! thread follows it over the watch, the `/wait` fallback where it is not served, again after
//! any drop, with capped exponential backoff and jitter, never giving up on a reachable
//! service), each event of the running harness ([`harness::Event`]), a timer, and TERM or INT.
//! It decides with [`decide`] and acts: it starts a harness through [`crate::machine::turn`]
//! (the state record written first), stops one (its whole process group), answers its
//! question, or reports a turn whose harness is gone `failed`.
//!
//! Claude Code runs in print mode, one process per turn: `claude -p` with `--session-id` on its
//! first turn and `--resume=ID` after, on stream-json both ways (the owner's words the first
//! user message on standard input, each steer one more, the input closed at the result after
//! which no steer is left unread, when serve reports the turn's end), `--settings` carrying
//! the hooks for this run only (the person's own settings are left
//! as they are), `--mcp-config` for `handoff mcp`. A fresh process per turn gives a fresh MCP
//! server, which pins the turn it serves. Codex runs through its app-server, one per turn.

pub mod batch;
pub mod claude_code;
pub mod codex;
pub mod codex_run;
pub mod decide;
pub mod events;
pub mod harness;
pub mod sender;
pub mod signal;
pub mod state;
pub mod steer_event;

use crate::client::{Client, Error, Handoff, ReportInput, Retry, RuntimesInput};
use crate::hook::{self, Log};
use crate::machine::env::{ENV_ANSWER_WAIT_S, ENV_SERVED, ENV_SERVE_ANSWER_WAIT_S, ENV_TOKEN_FILE};
use crate::machine::server::{claude_code_mcp_config, CLAUDE_CODE_ALLOW_RULE};
use crate::machine::turn::{self as turn_start, First, Ready, Setup, TurnError};
use crate::machine::{group, paths, Runtime};
use decide::{Action, Alive, Asked, Brief, Gone, GoneTurn, HarnessSession, Local, Started, SteerTo, StopWhy, View};
use handoff_api::error::Code;
use handoff_core::suggestion::Usage;
use handoff_core::timeline::SyncMode;
use handoff_core::turn::ReportStatus;
use harness::{Command, Event, Harness};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a question of a served turn waits for the owner unless
/// `HANDOFF_SERVE_ANSWER_WAIT_S` says: nobody is at the terminal, so it is long; at the limit
/// the question is denied with a note the model reads.
pub const SERVE_ANSWER_WAIT_S_DEFAULT: u64 = 900;
/// Claude Code's permission mode in a served turn unless `--permission-mode` says: `default`,
/// where every tool call that needs permission is asked of the owner (on the phone).
pub const PERMISSION_MODE_DEFAULT: &str = "default";
/// The backoff between follows of a reachable-but-dropping service: from this…
pub const FOLLOW_BACKOFF_MS_BASE: u64 = 500;
/// …doubling up to this, jittered.
pub const FOLLOW_BACKOFF_MS_MAX: u64 = 30_000;
/// Each `/wait` of the fallback is held this long.
const FOLLOW_WAIT_S: u64 = 60;
/// A failed report that no record will bring back is tried again after this (the timer).
const REPORT_RETRY_MS: u64 = 5_000;
/// The most decisions one input leads to: each carried out changes what the next one reads.
const DECISIONS_PER_INPUT_MAX: usize = 4;
/// The versions whose arrival is kept, for the latencies the log gives.
const ARRIVALS_KEPT_MAX: usize = 64;
/// As serve ends, how long it waits for its timelines' senders before it spools what is left.
const TIMELINE_FLUSH_WAIT_MS: u64 = 1_000;

/// `handoff serve`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The hand-off to serve (none with --machine).
    #[arg(required_unless_present = "machine")]
    pub id: Option<String>,
    /// The daemon: every session created for this enrolled machine, each in its workspace.
    #[command(flatten)]
    pub daemon: crate::daemon::DaemonArgs,
    /// The runtime for turns handed to none before any ran here (claude-code or codex).
    #[arg(long, value_name = "RUNTIME", default_value = "claude-code")]
    pub runtime: String,
    /// Claude Code's permission mode for served turns (default, acceptEdits, plan, …):
    /// `default` asks the owner about every tool call that needs permission. The record shows
    /// the mode each turn ran in (Codex's: its approval policy, untrusted).
    #[arg(long, value_name = "MODE", default_value = PERMISSION_MODE_DEFAULT)]
    pub permission_mode: String,
    /// What leaves this machine (the record shows it): `metadata` (tool names, states,
    /// durations and counts), `messages` (adds the model's words, each tool's input and the
    /// whole reply) or `full` (adds tool outputs, clipped).
    #[arg(long, value_name = "MODE", default_value = "messages", value_parser = parse_sync)]
    pub sync: SyncMode,
    /// A file holding the machine token, read again when the API says the token expired.
    #[arg(long, value_name = "PATH", env = ENV_TOKEN_FILE)]
    pub token_file: Option<PathBuf>,
    /// Print a systemd unit that keeps `handoff serve ID` running, and exit.
    #[arg(long)]
    pub print_unit: bool,
}

/// `--sync`'s word.
fn parse_sync(word: &str) -> Result<SyncMode, String> {
    serde_json::from_value(serde_json::Value::String(word.to_string()))
        .map_err(|_| format!("{word}: one of metadata, messages, full"))
}

/// The systemd unit `--print-unit` prints: restarted when it ends, and on a stop every process
/// of its control group ended, so no grandchild of the harness survives.
pub fn unit(program: &str, id: &str, url: &str, workdir: &str) -> String {
    format!(
        "[Unit]\n\
         Description=handoff serve {id}: runs the hand-off's turns on this machine\n\
         After=network-online.target\n\
         Wants=network-online.target\n\n\
         [Service]\n\
         Type=simple\n\
         WorkingDirectory={workdir}\n\
         Environment=HANDOFF_URL={url}\n\
         # A 0600 file holding the machine token; write a fresh token there to rotate it.\n\
         Environment=HANDOFF_TOKEN_FILE=%h/.config/handoff/{id}.token\n\
         ExecStart={program} serve {id}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         KillMode=control-group\n\
         TimeoutStopSec=10\n\n\
         [Install]\n\
         WantedBy=default.target\n"
    )
}

/// Everything serve's loop is told, on its one channel.
enum Input {
    /// A record of the hand-off, and when it arrived.
    Record(Box<Handoff>, Instant),
    /// The hand-off is gone (404), or the token is refused with no fresh one: the error.
    Refused(Error),
    /// The follower stopped after the hand-off closed.
    FollowerStopped,
    /// An event of the harness running turn `.0`.
    Harness(u64, Event),
    /// A timer set by serve itself went off.
    Timer,
    /// TERM or INT.
    Signal(i32),
}

/// The steers of one turn that serve has dealt with (each once), and when each was handed on.
#[derive(Default)]
struct Steers {
    turn: u64,
    sent: BTreeSet<String>,
    handed: BTreeMap<String, Instant>,
}

/// The steers of one turn whose outcome is on its timeline, and the seq serve's next event of
/// the turn takes.
#[derive(Default)]
struct SteerEvents {
    turn: u64,
    reported: BTreeSet<String>,
    next_seq: u64,
}

/// The token, and the file it is read again from.
#[derive(Clone)]
struct Token {
    current: Arc<Mutex<String>>,
    file: Option<PathBuf>,
}

impl Token {
    fn get(&self) -> String {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads the file again: answers whether it held another token than the one in use.
    fn refresh(&self) -> bool {
        let Some(file) = &self.file else { return false };
        let Ok(Some(fresh)) = crate::client::read_token_file(file) else { return false };
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if *current == fresh {
            return false;
        }
        *current = fresh;
        true
    }
}

/// One line per event, to standard error and to the state folder's bounded log; a token is
/// never in it (nothing here is given one to write).
#[derive(Clone)]
struct Say {
    log: Arc<Log>,
}

impl Say {
    fn line(&self, text: &str) {
        eprintln!("serve: {}", crate::output::escape(text, false));
        self.log.line(text);
    }
}

/// What serve starts with, once its start-up is checked.
struct Checked {
    token: String,
    runtime: Runtime,
    state_dir: PathBuf,
}

/// The one place serve checks its start-up: the token, the runtime, the permission mode.
/// Answers the exit code when it cannot start.
fn check_start(token: Option<String>, args: &Args) -> Result<Checked, i32> {
    let from_file = args.token_file.as_ref().and_then(|f| crate::client::read_token_file(f).ok().flatten());
    let Some(token) = token.filter(|t| !t.is_empty()).or(from_file) else {
        eprintln!("serve: no token: pass --token-file PATH (or HANDOFF_TOKEN_FILE) naming a file that holds the hand-off's machine token");
        return Err(crate::output::EXIT_AUTH_OR_NETWORK);
    };
    let Some(runtime) = Runtime::parse(&args.runtime) else {
        eprintln!("serve: --runtime {}: handoff serve runs claude-code or codex, not {}", args.runtime, args.runtime);
        return Err(crate::output::EXIT_USAGE);
    };
    // The record shows the mode each turn runs in: one the API would refuse is refused here.
    if let Err(why) = handoff_core::turn::check_permission_mode(&args.permission_mode) {
        eprintln!("serve: --permission-mode: {}", why.message);
        return Err(crate::output::EXIT_USAGE);
    }
    let state_dir = paths::state_dir(&|k| std::env::var(k).ok());
    if let Err(why) = crate::workspace::serve_may_run(&state_dir) {
        eprintln!("serve: {why}");
        return Err(crate::output::EXIT_REFUSED);
    }
    Ok(Checked { token, runtime, state_dir })
}

/// `handoff serve`: answers the exit code.
pub fn run(url: &str, token: Option<String>, args: &Args) -> i32 {
    if args.daemon.machine {
        let passed = crate::daemon::Passed {
            runtime: &args.runtime,
            permission_mode: &args.permission_mode,
            sync: args.sync,
            print_unit: args.print_unit,
        };
        return crate::daemon::run(url, &args.daemon, &passed);
    }
    let Some(id) = args.id.clone() else {
        eprintln!("serve: name the hand-off to serve, or serve every session of this machine with --machine");
        return crate::output::EXIT_USAGE;
    };
    if args.print_unit {
        let program = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "handoff".into());
        let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "%h".into());
        print!("{}", unit(&program, &id, url, &cwd));
        return crate::output::EXIT_OK;
    }
    let checked = match check_start(token, args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let say = Say { log: Arc::new(Log::new(&checked.state_dir, "serve", Some(&id))) };
    let _lock = match paths::lock(&checked.state_dir, &id) {
        Ok(lock) => lock,
        Err(why) => {
            eprintln!("serve: {why}");
            return crate::output::EXIT_REFUSED;
        }
    };
    let local = match state::load(&checked.state_dir, &id) {
        Ok(l) => l,
        Err(why) => {
            eprintln!("serve: the state record: {why}");
            return crate::output::EXIT_REFUSED;
        }
    };
    let (tx, rx) = mpsc::channel();
    let mut serve = Serve {
        url: url.to_string(),
        id,
        args: args.clone(),
        default_runtime: checked.runtime,
        state_dir: checked.state_dir,
        say,
        token: Token { current: Arc::new(Mutex::new(checked.token)), file: args.token_file.clone() },
        local,
        harness: None,
        asked: None,
        arrivals: BTreeMap::new(),
        steers: Steers::default(),
        steer_events: SteerEvents::default(),
        timeline: None,
        finishing: Vec::new(),
        tx,
    };
    serve.main(&rx)
}

struct Serve {
    url: String,
    id: String,
    args: Args,
    default_runtime: Runtime,
    state_dir: PathBuf,
    say: Say,
    token: Token,
    local: Local,
    harness: Option<Box<dyn Harness>>,
    /// The question the running harness asked and waits on.
    asked: Option<Asked>,
    /// When each version arrived (the newest few), for the latencies the log gives.
    arrivals: BTreeMap<u64, Instant>,
    /// The current turn's steers handed to a harness or reported undelivered.
    steers: Steers,
    /// The steers whose outcome serve wrote on the timeline.
    steer_events: SteerEvents,
    /// The running turn's timeline sender, and the senders of ended turns still sending.
    timeline: Option<sender::Sender>,
    finishing: Vec<sender::Sender>,
    /// The loop's channel, for the follower, the harness, the timer and the signals.
    tx: mpsc::Sender<Input>,
}

impl Serve {
    fn client(&self) -> Client {
        Client::new(&self.url, Some(&self.token.get()))
            .with_insecure_http(crate::client::insecure_http_from_env(&|k| std::env::var(k).ok()))
    }

    /// A call of the API, the token read again once on a 401.
    fn call<T>(&self, what: impl Fn(&Client) -> Result<T, Error>) -> Result<T, Error> {
        match what(&self.client()) {
            Err(e) if is_unauthorized(&e) && self.token.refresh() => {
                self.say.line("the API refused the token: read a fresh one from the token file");
                what(&self.client())
            }
            other => other,
        }
    }

    fn main(&mut self, rx: &mpsc::Receiver<Input>) -> i32 {
        self.say.line(&format!(
            "serving {} from {} (pid {}), runtime {} for turns handed to none, permission mode {}",
            self.id,
            self.url,
            std::process::id(),
            self.default_runtime,
            self.args.permission_mode
        ));
        // A serve killed with -9 took its harness with it (the parent-death signal), but not
        // what the harness started in groups of its own (a hook waiting for an answer).
        self.end_leftovers("the serve before");
        let first = match self.call(|c| c.get(&self.id)) {
            Ok(r) => r.value,
            Err(e) => return self.ended(&e),
        };
        self.report_runtimes();
        let tx = self.tx.clone();
        if let Err(e) = signal::forward(move |sig| drop(tx.send(Input::Signal(sig)))) {
            self.say.line(&format!("could not take TERM and INT: {e}"));
        }
        let _ = self.tx.send(Input::Record(Box::new(first.clone()), Instant::now()));
        let (url, id, token, say, tx) =
            (self.url.clone(), self.id.clone(), self.token.clone(), self.say.clone(), self.tx.clone());
        std::thread::spawn(move || follow(&url, &id, first.version, &token, &say, &tx));
        self.resume_timelines();
        let mut latest: Option<Handoff> = None;
        // serve holds a sender itself, so the channel never disconnects.
        while let Ok(input) = rx.recv() {
            let code = self.take(input, &mut latest).or_else(|| latest.clone().and_then(|r| self.act(&r)));
            if let Some(code) = code {
                self.flush_timelines();
                return code;
            }
        }
        crate::output::EXIT_AUTH_OR_NETWORK
    }

    /// Takes one input in: the newest record kept, a harness's event carried out. Answers the
    /// exit code when serve ends on it.
    fn take(&mut self, input: Input, latest: &mut Option<Handoff>) -> Option<i32> {
        match input {
            Input::Record(h, at) => {
                if latest.as_ref().is_none_or(|l| h.version >= l.version) {
                    self.arrivals.insert(h.version, at);
                    while self.arrivals.len() > ARRIVALS_KEPT_MAX {
                        self.arrivals.pop_first();
                    }
                    *latest = Some(*h);
                }
            }
            Input::Refused(e) => {
                self.stop_for_good();
                return Some(self.ended(&e));
            }
            Input::FollowerStopped => {
                if latest.as_ref().is_some_and(|l| l.state != handoff_core::turn::State::Closed) {
                    self.say.line("the follower stopped");
                    return Some(crate::output::EXIT_AUTH_OR_NETWORK);
                }
            }
            Input::Harness(turn, event) => {
                if let Some(fresh) = self.on_event(turn, event) {
                    *latest = Some(fresh);
                }
            }
            Input::Timer => {}
            Input::Signal(sig) => {
                self.say.line(&format!("serve got signal {sig}: stopping the harness and what it left"));
                self.stop_for_good();
                signal::end_by(sig);
            }
        }
        None
    }

    /// Decides on `record` and acts, again while an action changed what the decision reads.
    fn act(&mut self, record: &Handoff) -> Option<i32> {
        let view = View::of(record);
        if self.local.incarnation != Some(view.incarnation) {
            self.local = std::mem::take(&mut self.local).for_life(view.incarnation);
        }
        self.answer(record);
        for _ in 0..DECISIONS_PER_INPUT_MAX {
            let alive = self.harness.as_ref().map_or(Alive::None, |h| Alive::Running { turn: h.turn() });
            let again = match decide::decide(&view, &self.local, alive, self.default_runtime) {
                Action::Nothing => false,
                Action::Exit => return Some(self.exit()),
                Action::Start { turn, runtime, session } => {
                    self.start(record, turn, runtime, session);
                    false
                }
                Action::Stop { turn, why } => {
                    self.stop(turn, why, record.version);
                    true
                }
                Action::Fail { turn, why } => self.fail(turn, &why),
                Action::Refuse { turn, runtime, why } => {
                    self.local.turns.insert(turn, unstarted(&runtime, &why));
                    self.refuse(turn, &why);
                    false
                }
            };
            self.local.version = self.local.version.max(view.version);
            if !again {
                break;
            }
        }
        self.steer(record);
        None
    }

    /// Hands each steer of the current turn to the harness running it, once; one whose turn's
    /// harness ran here and ended is reported undelivered ([`decide::steer_to`]).
    fn steer(&mut self, record: &Handoff) {
        if self.steers.turn != record.turn {
            self.steers = Steers { turn: record.turn, ..Steers::default() };
        }
        let arrived = self.arrivals.get(&record.version).copied().unwrap_or_else(Instant::now);
        for s in &record.steers {
            let alive = self.harness.as_ref().map_or(Alive::None, |h| Alive::Running { turn: h.turn() });
            let over = record.status.has_ended() || record.state == handoff_core::turn::State::Closed;
            match decide::steer_to(&s.id, record.turn, &self.steers.sent, alive, &self.local, over) {
                None | Some(SteerTo::Keep) => {}
                Some(SteerTo::Harness) => {
                    self.steers.sent.insert(s.id.clone());
                    self.steers.handed.insert(s.id.clone(), arrived);
                    if let Some(h) = self.harness.as_mut() {
                        h.send(Command::Steer { id: s.id.clone(), prompt: s.prompt.clone() });
                    }
                }
                Some(SteerTo::Undelivered(why)) => {
                    self.steers.sent.insert(s.id.clone());
                    self.steered(record.turn, &s.id, &Err(why));
                }
            }
        }
    }

    /// Says what became of steer `id`: one line in serve's log, with the time from the version
    /// that carried it, and, once per steer, its `steer` event on the turn's timeline (by the
    /// turn's sender while it runs, else by [`steer_event::write`]).
    fn steered(&mut self, turn: u64, id: &str, delivered: &Result<(), String>) {
        let since = self
            .steers
            .handed
            .remove(id)
            .map(|at| format!(", {} ms after its version arrived", at.elapsed().as_millis()));
        match delivered {
            Ok(()) => self.say.line(&format!("turn {turn}: steer {id} delivered{}", since.unwrap_or_default())),
            Err(why) => self.say.line(&format!("turn {turn}: steer {id} not delivered: {why}")),
        }
        if self.steer_events.turn != turn {
            self.steer_events = SteerEvents { turn, ..SteerEvents::default() };
        }
        if !decide::steer_reported(&mut self.steer_events.reported, id) {
            return;
        }
        let outcome = delivered.as_ref().map(|()| ()).map_err(String::as_str);
        // The running turn's sender numbers it with the turn's other events.
        if let Some(sender) = self.timeline.as_ref().filter(|s| s.turn() == turn) {
            return sender.timeline().push(handoff_core::timeline::Event::steer(0, id, outcome));
        }
        // No sender runs for the turn (its harness is gone, or serve restarted): once the turn's
        // last sender is done, one direct event after the turn's last seq.
        for sender in self.finishing.iter().filter(|s| s.turn() == turn) {
            sender.wait(Duration::from_millis(TIMELINE_FLUSH_WAIT_MS));
        }
        let next = std::cell::Cell::new(self.steer_events.next_seq);
        let written = self.call(|c| {
            let mut seq = next.get();
            let written = steer_event::write(c, &self.id, turn, &mut seq, id, outcome);
            next.set(seq);
            written
        });
        self.steer_events.next_seq = next.get();
        if let Err(e) = written {
            self.say.line(&format!("turn {turn}: could not write steer {id}'s event on the timeline: {e}"));
        }
    }

    /// Tells the running harness what became of the question it asked, once the record says.
    fn answer(&mut self, record: &Handoff) {
        let (Some(h), Some(asked)) = (self.harness.as_mut(), self.asked.as_ref()) else { return };
        let Some(waited) = decide::answer(asked, record) else { return };
        h.send(Command::Answer { question: asked.question.clone(), waited });
        self.asked = None;
    }

    /// The hand-off reads closed and nothing runs: erased when it cannot be read again.
    fn exit(&self) -> i32 {
        let again = self.call(|c| c.get(&self.id));
        match (decide::exit(matches!(again, Err(Error::Refused(_)))), again) {
            (decide::Exit::Erased, Err(e)) => self.ended(&e),
            _ => {
                self.say.line(&format!("{} is closed: serve exits", self.id));
                crate::output::EXIT_OK
            }
        }
    }

    /// The line and the code serve ends with on an error it cannot get past.
    fn ended(&self, e: &Error) -> i32 {
        let what = match e.refusal() {
            Some(r) if r.status == 404 => format!("{} was erased, or this token does not reach it (404): nothing to serve", self.id),
            Some(r) if r.status == 401 || r.status == 403 => format!(
                "the API refused the machine token ({}): mint a fresh one (`handoff machine-token ID`, the owner's) and write it to the token file{}",
                crate::output::refusal_line(r),
                self.token.file.as_ref().map(|f| format!(" {}", f.display())).unwrap_or_default()
            ),
            _ => e.to_string(),
        };
        self.say.line(&what);
        crate::output::exit_code(e)
    }

    /// Reports the runtimes this machine can run, so the console offers only those; on a
    /// thread of its own, since asking each harness its version takes seconds.
    fn report_runtimes(&self) {
        let (client, id, say) = (self.client(), self.id.clone(), self.say.clone());
        std::thread::spawn(move || {
            let runtimes = crate::detect::detect(std::env::var("PATH").ok().as_deref());
            let names: Vec<String> = runtimes.iter().map(|r| r.name.clone()).collect();
            match client.put_runtimes(&id, &RuntimesInput { runtimes, checked_at: None }) {
                Ok(_) => say.line(&format!("reported runtimes: {}", names.join(", "))),
                Err(e) => say.line(&format!("could not report the runtimes: {e}")),
            }
        });
    }

    /// Writes the state record, saying so when it cannot.
    fn store(&self) -> Result<(), String> {
        let stored = state::store(&self.state_dir, &self.id, &self.local);
        if let Err(e) = &stored {
            self.say.line(&format!("could not write the state record: {e}"));
        }
        stored
    }

    /// Carries out an event of the harness running `turn` (one of an earlier harness, stopped
    /// already, is passed over). Answers the record read afresh once the harness is gone.
    fn on_event(&mut self, turn: u64, event: Event) -> Option<Handoff> {
        // What became of a steer names its turn: said also after a stop took the harness.
        if let Event::Steered { id, delivered } = &event {
            self.steered(turn, id, delivered);
            return None;
        }
        if self.harness.as_ref().is_none_or(|h| h.turn() != turn) {
            return None;
        }
        match event {
            Event::Started { session } => {
                self.say.line(&format!("turn {turn}: {} thread {session}", self.harness.as_ref()?.runtime()));
                if let Some(s) = self.local.turns.get_mut(&turn) {
                    s.session = session;
                }
                let _ = self.store();
                None
            }
            Event::Asked { question, version } => {
                self.asked = Some(Asked { question, version });
                None
            }
            Event::Steered { .. } => None,
            Event::Finished { answer, failed, usage } => {
                self.finished(turn, &answer, failed, usage);
                None
            }
            Event::Gone { how } => self.on_gone(turn, &how),
        }
    }

    /// The harness's result (Claude Code's `result` line, Codex's last agent message): the
    /// turn's one final report, `done` with the reply as the sync mode lets it (the Stop hook
    /// sends none in a served turn). An error result is left to the hooks (`StopFailure`) and,
    /// failing them, to the harness's end.
    fn finished(&mut self, turn: u64, answer: &str, failed: bool, usage: Option<Usage>) {
        if failed {
            let line = handoff_core::text::clip(answer, 200);
            return self.say.line(&format!("turn {turn}: the harness's result is an error: {line}"));
        }
        let report = ReportInput {
            summary: Some(answer).filter(|a| !a.trim().is_empty()).map(hook::clip_summary),
            reply: events::reply(self.args.sync, answer),
            usage,
            ..ReportInput::of(turn, ReportStatus::Done)
        };
        let with = if report.reply.is_some() { " with its reply" } else { "" };
        // Spooled first, as the hooks' reports are: a drop delays it and never loses it, and a
        // gone harness's turn is judged only once the spool was delivered.
        let Some(session) = hook::session("serve", &self.url, Some(&self.token.get()), Some(&self.id)) else { return };
        let entry = hook::spool::Entry {
            key: crate::client::new_idempotency_key(),
            at_ms: hook::now_ms(),
            event: "result".into(),
            send: hook::spool::Send::Report(Box::new(report)),
        };
        let spool = hook::spool::Spool::open(&session.dir, &self.id);
        match spool.and_then(|spool| spool.append(&entry).and_then(|_| session.deliver(&spool))) {
            Ok(d) => self.say.line(&format!(
                "turn {turn}: final report done{with}: delivered {}, dropped {}, left {}",
                d.sent, d.dropped, d.left
            )),
            Err(e) => self.say.line(&format!("turn {turn}: could not spool its final report: {e}")),
        }
    }

    /// The harness's end: records how it ended, delivers the hooks' spool (so a spooled report
    /// is not taken for none), ends what it left, and answers the record read afresh.
    fn on_gone(&mut self, turn: u64, how: &str) -> Option<Handoff> {
        let h = self.harness.take()?;
        self.asked = None;
        let ms = h.started().elapsed().as_millis();
        self.say.line(&format!("{} of turn {turn} ended ({how}) after {ms} ms", h.runtime()));
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.ended = Some(how.to_string());
        }
        let _ = self.store();
        self.flush_spool();
        self.end_leftovers(&format!("turn {turn}"));
        self.report_files(turn);
        self.close_timeline();
        self.call(|c| c.get(&self.id)).ok().map(|r| r.value)
    }

    /// Ends what is left of a served harness of this hand-off, saying so when there was any.
    fn end_leftovers(&self, whose: &str) {
        let ended = group::end_leftovers(&self.id);
        if ended > 0 {
            self.say.line(&format!("ended {ended} process(es) left by {whose}'s harness"));
        }
    }

    /// Stops the running harness, its group and its leftovers, as serve ends.
    fn stop_for_good(&mut self) {
        let Some(mut h) = self.harness.take() else {
            self.end_leftovers("the serve before");
            return;
        };
        let turn = h.turn();
        let how = h.send(Command::Stop).unwrap_or_else(|| "unknown".to_string());
        self.end_leftovers(&format!("turn {turn}"));
        self.say.line(&format!("turn {turn}: stopped {} as serve ends ({how})", h.runtime()));
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.ended = Some(how);
        }
        let _ = self.store();
        self.flush_timelines();
    }

    /// Delivers the hooks' spool; answers how many entries are left in it.
    fn flush_spool(&self) -> usize {
        let Some(session) = hook::session("serve", &self.url, Some(&self.token.get()), Some(&self.id)) else {
            return 0;
        };
        match hook::spool::Spool::open(&session.dir, &self.id).and_then(|spool| session.deliver(&spool)) {
            Ok(d) => {
                if d.sent + d.dropped + d.left > 0 {
                    let (sent, dropped, left) = (d.sent, d.dropped, d.left);
                    self.say
                        .line(&format!("flushed the hooks' spool: delivered {sent}, dropped {dropped}, left {left}"));
                }
                d.left
            }
            Err(e) => {
                self.say.line(&format!("could not flush the hooks' spool: {e}"));
                0
            }
        }
    }

    /// Starts a harness for `turn`: the state record first (a turn written there is never
    /// started again, and one that cannot be written starts nothing), then the turn prepared,
    /// its `running` report (a turn cancelled meanwhile is not spawned), then the spawn.
    fn start(&mut self, record: &Handoff, turn: u64, rt: Runtime, plan: HarnessSession) {
        let arrived =
            self.arrivals.range(..=record.version).next_back().map(|(_, at)| *at).unwrap_or_else(Instant::now);
        let session = match &plan {
            HarnessSession::Resume(id) => id.clone(),
            HarnessSession::New(_) => new_uuid(),
        };
        self.local.turns.insert(turn, started(rt.name(), &session));
        if self.local.base.is_none() {
            self.local.base = std::env::current_dir().ok().and_then(|dir| crate::git::base(&dir).ok());
        }
        if let Err(e) = self.store() {
            let why = format!("the state record could not be written ({e}), so no harness was started for turn {turn}");
            return self.refuse(turn, &why);
        }
        let ready = match self.ready(record, turn, rt, &plan) {
            Ok(r) => r,
            Err(e) => return self.refuse(turn, &e.to_string()),
        };
        let mode = match rt {
            Runtime::ClaudeCode => self.args.permission_mode.clone(),
            Runtime::Codex => codex_run::APPROVAL_POLICY.to_string(),
        };
        if !self.name_runtime(turn, rt, &mode) {
            self.say
                .line(&format!("turn {turn} was cancelled or moved on while it was prepared: {rt} was not started"));
            self.local
                .turns
                .insert(turn, Started { settled: true, ..unstarted(rt.name(), "cancelled while prepared") });
            let _ = self.store();
            return;
        }
        let timeline = self.open_timeline(turn);
        if let HarnessSession::Resume(id) = &plan {
            self.note(&format!("Resumed the {rt} session {id}."));
        }
        let spawned = match rt {
            Runtime::ClaudeCode => self.spawn_claude_code(record, &ready, turn, &plan, &session, timeline),
            Runtime::Codex => Ok(self.spawn_codex(record, ready, turn, &plan, timeline)),
        };
        match spawned {
            Ok(h) => self.started(h, record, &plan, &session, arrived),
            Err(why) => self.refuse(turn, &why),
        }
    }

    /// Notes the harness started: its group in the state record, the line with the latencies.
    fn started(
        &mut self,
        h: Box<dyn Harness>,
        record: &Handoff,
        plan: &HarnessSession,
        session: &str,
        arrived: Instant,
    ) {
        let turn = h.turn();
        if let (Some(s), Some(group)) = (self.local.turns.get_mut(&turn), h.group()) {
            s.group = Some(group as i32);
        }
        let _ = self.store();
        let how = match plan {
            HarnessSession::Resume(_) => "resumed",
            HarnessSession::New(_) => "new",
        };
        let late_s = (hook::now_ms() - record.updated_at.ms()).max(0) / 1000;
        let what = match h.group() {
            Some(pid) => format!("{} session {session} ({how}), pid {pid}", h.runtime()),
            None => format!("{} app-server", h.runtime()),
        };
        self.say.line(&format!(
            "turn {turn} started: {what}, {} ms after v{} arrived; the turn was opened {late_s} s before",
            arrived.elapsed().as_millis(),
            record.version
        ));
        self.harness = Some(h);
    }

    /// The turn made ready to spawn, one way for every runtime ([`turn_start::start_turn`]).
    fn ready(&self, record: &Handoff, turn: u64, runtime: Runtime, plan: &HarnessSession) -> Result<Ready, TurnError> {
        let client = self.client();
        let token = self.token.get();
        let nothing = || Ok(());
        let setup = Setup {
            url: &self.url,
            id: &self.id,
            token: &token,
            state_dir: &self.state_dir,
            runtime,
            turn,
            before_accept: &nothing,
        };
        let words = record.prompt.as_deref();
        let mut ready = match plan {
            HarnessSession::Resume(_) => turn_start::start_turn(&client, &setup, &First::Resumed(words))?,
            HarnessSession::New(Brief::Prompt) => {
                turn_start::start_turn(&client, &setup, &First::Words(words.unwrap_or_default()))?
            }
            HarnessSession::New(Brief::Package | Brief::Work) => {
                let prepared = turn_start::prepare(&client, &self.id, Some(runtime.name()), None)?;
                turn_start::start_turn(&client, &setup, &First::Briefed(&prepared))?
            }
        };
        let wait_s = serve_answer_wait_s(&|k| std::env::var(k).ok());
        ready.vars.extend([(ENV_ANSWER_WAIT_S, wait_s.to_string()), (ENV_SERVED, "1".to_string())]);
        Ok(ready)
    }

    fn spawn_claude_code(
        &self,
        record: &Handoff,
        ready: &Ready,
        turn: u64,
        plan: &HarnessSession,
        session: &str,
        timeline: sender::Timeline,
    ) -> Result<Box<dyn Harness>, String> {
        let server = this_program();
        let wait_s = serve_answer_wait_s(&|k| std::env::var(k).ok());
        let settings = hook::install::install_claude_code_waiting("", &server, wait_s)
            .map_err(|e| format!("the hooks' settings: {e}"))?;
        let mcp_config = claude_code_mcp_config(&server);
        let model = record.placement.model.as_deref();
        let args = claude_args(plan, session, &self.args.permission_mode, &settings, &mcp_config, model);
        let spawn = claude_code::Spawn {
            program: &ready.program,
            args: &args,
            vars: &ready.vars,
            remove: &turn_start::REMOVED_VARS,
            input: &ready.prompt,
            turn,
        };
        let reader = claude_code::reader(turn, events::Shaper::new(self.args.sync), timeline, self.emit());
        let h = claude_code::spawn(&spawn, self.emit(), reader)
            .map_err(|e| format!("{} could not start: {e}", ready.program.display()))?;
        Ok(Box::new(h))
    }

    fn spawn_codex(
        &self,
        record: &Handoff,
        ready: Ready,
        turn: u64,
        plan: &HarnessSession,
        timeline: sender::Timeline,
    ) -> Box<dyn Harness> {
        let wait_s = serve_answer_wait_s(&|k| std::env::var(k).ok());
        let config = codex::Config {
            program: ready.program,
            args: codex::served_settings(&this_program(), wait_s),
            env: ready.vars.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            env_remove: turn_start::REMOVED_VARS.map(String::from).to_vec(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            approval_policy: codex_run::APPROVAL_POLICY.to_string(),
        };
        let resume = match plan {
            HarnessSession::Resume(id) => Some(id.clone()),
            HarnessSession::New(_) => None,
        };
        let start = codex_run::Start {
            config,
            model: record.placement.model.clone(),
            resume,
            prompt: ready.prompt,
            client: self.client(),
            id: self.id.clone(),
            turn,
            wait_s,
            sync: self.args.sync,
            timeline,
        };
        Box::new(codex_run::Run::spawn(start, self.emit()))
    }

    /// Where turn `turn`'s events are sent from, and its spool file.
    fn link(&self, turn: u64, spool: PathBuf) -> sender::Link {
        let (url, token, say) = (self.url.clone(), self.token.clone(), self.say.clone());
        let refresh = token.clone();
        sender::Link {
            id: self.id.clone(),
            turn,
            spool,
            client: Arc::new(move || {
                Client::new(&url, Some(&token.get()))
                    .with_insecure_http(crate::client::insecure_http_from_env(&|k| std::env::var(k).ok()))
            }),
            refresh: Arc::new(move || refresh.refresh()),
            say: Arc::new(move |line| say.line(line)),
        }
    }

    /// Starts turn `turn`'s one sender, numbering its events from 1; answers where they go.
    fn open_timeline(&mut self, turn: u64) -> sender::Timeline {
        self.close_timeline();
        let spool = paths::timeline_spool(&self.state_dir, &self.id, turn);
        let sender = sender::Sender::start(self.link(turn, spool), batch::Queue::new());
        let timeline = sender.timeline();
        self.timeline = Some(sender);
        timeline
    }

    /// What the machine itself says on the running turn's timeline (not in `metadata`).
    fn note(&self, text: &str) {
        if let (Some(sender), Some(note)) = (&self.timeline, events::note(self.args.sync, text)) {
            sender.timeline().push(note);
        }
    }

    /// The running turn's sender sends what is left and ends; those that ended are let go.
    fn close_timeline(&mut self) {
        if let Some(sender) = self.timeline.take() {
            sender.finish();
            self.finishing.push(sender);
        }
        self.finishing.retain(|s| !s.wait(Duration::ZERO));
    }

    /// As serve ends: every sender gets a moment to send, then what is left is spooled.
    fn flush_timelines(&mut self) {
        self.close_timeline();
        let deadline = Instant::now() + Duration::from_millis(TIMELINE_FLUSH_WAIT_MS);
        for sender in &self.finishing {
            if !sender.wait(deadline.saturating_duration_since(Instant::now())) {
                sender.spool_left();
                self.say.line(&format!("turn {}: its events left to send are spooled", sender.turn()));
            }
        }
    }

    /// Sends what an earlier serve spooled of its turns' timelines.
    fn resume_timelines(&mut self) {
        let resumed = sender::resume_spooled(&self.state_dir, &self.id, &|turn, spool| self.link(turn, spool));
        for sender in &resumed {
            self.say.line(&format!("turn {}: sending the events an earlier serve spooled", sender.turn()));
        }
        self.finishing.extend(resumed);
    }

    /// The files touched since the session's base commit, as `handoff workspace --git` would
    /// say, reported at a turn's end so the package's relevant files follow a served session.
    fn report_files(&self, turn: u64) {
        let Some(base) = self.local.base.as_deref() else { return };
        let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let files = match crate::git::changed_since(&dir, base, handoff_core::limits::FILES_PER_REPORT_MAX) {
            Ok(files) => files,
            Err(why) => return self.say.line(&format!("turn {turn}: no files touched reported: {why}")),
        };
        // The report adds to what the work record lists: none is nothing to send.
        if files.is_empty() {
            return;
        }
        match self.call(|c| c.workspace(&self.id, &files)) {
            Ok(_) => self.say.line(&format!("turn {turn}: reported {} file(s) touched since {base:.12}", files.len())),
            Err(e) => self.say.line(&format!("turn {turn}: could not report the files touched: {e}")),
        }
    }

    /// Where a harness's events go: this loop's channel.
    fn emit(&self) -> harness::Emit {
        let tx = Mutex::new(self.tx.clone());
        Arc::new(move |turn, event| {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(Input::Harness(turn, event));
        })
    }

    /// The turn's first report, before its harness starts (so no hook's report can come before
    /// it): `running`, naming the runtime that runs it and its permission mode (Claude Code's
    /// mode, Codex's approval policy), which the record then shows. Answers whether the turn
    /// still stands ([`decide::start_stands`]).
    fn name_runtime(&self, turn: u64, runtime: Runtime, mode: &str) -> bool {
        let mut report = running_report(turn, runtime.name(), mode, self.args.sync);
        // A workspace carrying its own settings is named on the turn and in the log.
        report.summary =
            crate::workspace::served_turn_note().inspect(|note| self.say.line(&format!("turn {turn}: {note}")));
        let answer = match self.call(|c| c.report(&self.id, &report)) {
            Ok(r) => Some(Some(View::of(&r.value))),
            Err(Error::Refused(r))
                if r.code.is(Code::TurnFinished) || r.code.is(Code::HandoffStale) || r.code.is(Code::HandoffClosed) =>
            {
                None
            }
            Err(e) => {
                self.say.line(&format!(
                    "turn {turn}: could not name its runtime {runtime} and permission mode {mode}: {e}"
                ));
                Some(None)
            }
        };
        decide::start_stands(turn, answer.as_ref().map(Option::as_ref))
    }

    fn stop(&mut self, turn: u64, why: StopWhy, version: u64) {
        let Some(mut h) = self.harness.take() else { return };
        self.asked = None;
        let arrived = self.arrivals.get(&version).copied().unwrap_or_else(Instant::now);
        let how = h.send(Command::Stop).unwrap_or_else(|| "unknown".to_string());
        self.end_leftovers(&format!("turn {turn}"));
        let reason = match why {
            StopWhy::Cancelled => "the owner cancelled it",
            StopWhy::Closed => "the owner closed the hand-off",
            StopWhy::NextTurn => "a newer turn is open",
        };
        self.say.line(&format!(
            "turn {turn}: stopped {} because {reason} ({how}), {} ms after v{version} arrived",
            h.runtime(),
            arrived.elapsed().as_millis()
        ));
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.ended = Some(how);
            s.settled = decide::settled_by_stop(why);
        }
        let _ = self.store();
        // A newer turn opens only once this one ended: its harness was only on its way out.
        if why != StopWhy::NextTurn {
            self.note(&format!("Stopped {} because {reason}.", h.runtime()));
        }
        self.report_files(turn);
        self.close_timeline();
    }

    /// Reports `turn` failed, its harness gone, unless the record read afresh says it needs
    /// no report. Answers whether it is settled.
    fn fail(&mut self, turn: u64, why: &Gone) -> bool {
        let runtime = self.local.turns.get(&turn).map(|s| s.runtime.clone()).unwrap_or_default();
        // A spooled report may still say how the turn ended.
        let left = self.flush_spool();
        let fresh = self.call(|c| c.get(&self.id)).ok().map(|r| View::of(&r.value));
        match decide::gone_turn(turn, fresh.as_ref(), left) {
            GoneTurn::Settled => {
                self.settle(turn);
                true
            }
            GoneTurn::Wait => {
                self.say.line(&format!("turn {turn}: {left} spooled report(s) to send before it is judged"));
                self.try_again_later();
                false
            }
            GoneTurn::Fails => self.fail_saying(turn, &why.summary(&runtime)),
        }
    }

    /// Starts no harness for `turn`, which the state record says, and reports it failed saying
    /// why.
    fn refuse(&mut self, turn: u64, why: &str) {
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.refused = Some(why.to_string());
        }
        let _ = self.store();
        self.fail_saying(turn, why);
    }

    /// Reports `turn` failed with `summary`, once; answers whether it is settled (a report
    /// that did not reach the service is tried again when the timer goes off).
    fn fail_saying(&mut self, turn: u64, summary: &str) -> bool {
        let report =
            ReportInput { summary: Some(hook::clip_summary(summary)), ..ReportInput::of(turn, ReportStatus::Failed) };
        match self.call(|c| c.report(&self.id, &report)) {
            Ok(r) => self.say.line(&format!("reported turn {turn} failed (v{}): {summary}", r.value.version)),
            Err(Error::Refused(r)) if r.code.is(Code::TurnFinished) || r.code.is(Code::HandoffStale) => {
                self.say.line(&format!("turn {turn} had ended already: {}", crate::output::refusal_line(&r)));
            }
            Err(e) => {
                self.say.line(&format!("could not report turn {turn} failed: {e}"));
                self.try_again_later();
                return false;
            }
        }
        self.settle(turn);
        true
    }

    /// Wakes the loop after `REPORT_RETRY_MS`, to try again what could not be done now.
    fn try_again_later(&self) {
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(REPORT_RETRY_MS));
            let _ = tx.send(Input::Timer);
        });
    }

    fn settle(&mut self, turn: u64) {
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.settled = true;
        }
        let _ = self.store();
    }
}

/// A turn as the state record keeps it once started.
fn started(runtime: &str, session: &str) -> Started {
    Started {
        runtime: runtime.to_string(),
        session: session.to_string(),
        started_ms: hook::now_ms(),
        group: None,
        ended: None,
        settled: false,
        refused: None,
    }
}

/// A turn this machine took and started no harness for, saying why.
fn unstarted(runtime: &str, why: &str) -> Started {
    Started { refused: Some(why.to_string()), ..started(runtime, "") }
}

/// This program, which serves the harness's hooks and MCP server.
fn this_program() -> String {
    std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "handoff".into())
}

fn is_unauthorized(e: &Error) -> bool {
    e.refusal().is_some_and(|r| r.status == 401)
}

/// `HANDOFF_SERVE_ANSWER_WAIT_S`: whole seconds, at most the hooks' own maximum.
pub fn serve_answer_wait_s(env: &dyn Fn(&str) -> Option<String>) -> u64 {
    env(ENV_SERVE_ANSWER_WAIT_S)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(SERVE_ANSWER_WAIT_S_DEFAULT, |s| s.min(crate::ask::ANSWER_WAIT_S_MAX))
}

/// The report naming how a served turn runs: its runtime, permission mode and sync mode.
pub fn running_report(turn: u64, runtime: &str, mode: &str, sync: SyncMode) -> ReportInput {
    ReportInput {
        runtime: Some(runtime.to_string()),
        permission_mode: Some(mode.to_string()),
        sync_mode: Some(sync),
        ..ReportInput::of(turn, ReportStatus::Running)
    }
}

/// Claude Code's arguments for a served turn; the owner's words go on standard input, never
/// here. A session id is one word with its flag (`--resume=ID`), so no stored value can be read
/// as a flag of its own. `--allowedTools` comes last: it takes every word after it as a rule.
pub fn claude_args(
    session: &HarnessSession,
    session_id: &str,
    mode: &str,
    settings: &str,
    mcp_config: &str,
    model: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        // Each user message is echoed once it is in the conversation: a steer is delivered then.
        "--replay-user-messages",
        "--permission-mode",
        mode,
        "--settings",
        settings,
        "--mcp-config",
        mcp_config,
        "--strict-mcp-config",
    ]
    .map(String::from)
    .to_vec();
    args.extend(crate::workspace::CLAUDE_CODE_RESTRICTED.map(String::from));
    match session {
        HarnessSession::Resume(_) => args.push(format!("--resume={session_id}")),
        HarnessSession::New(_) => args.extend(["--session-id".to_string(), session_id.to_string()]),
    }
    // The model the owner asked for, one word with its flag (the API keeps it to [A-Za-z0-9._:-]).
    if let Some(model) = model {
        args.push(format!("--model={model}"));
    }
    args.extend(["--allowedTools".to_string(), CLAUDE_CODE_ALLOW_RULE.to_string()]);
    args
}

/// A random (version 4) UUID: the harness session id chosen up front.
pub fn new_uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("the OS gives randomness");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// Follows the hand-off for the main loop until it closes, is erased, or the token is refused
/// with no fresh one; any other failure is followed again after a capped, jittered backoff.
fn follow(url: &str, id: &str, after: u64, token: &Token, say: &Say, tx: &mpsc::Sender<Input>) {
    let backoff = Retry {
        attempts_max: u32::MAX,
        backoff_ms_base: FOLLOW_BACKOFF_MS_BASE,
        backoff_ms_max: FOLLOW_BACKOFF_MS_MAX,
    };
    let after = std::cell::Cell::new(after);
    let mut failures = 0u32;
    loop {
        let client = Client::new(url, Some(&token.get()))
            .with_insecure_http(crate::client::insecure_http_from_env(&|k| std::env::var(k).ok()));
        let mut heard = false;
        let result = client.follow(id, after.get(), FOLLOW_WAIT_S, |reply| {
            heard = true;
            after.set(reply.value.version);
            match tx.send(Input::Record(Box::new(reply.value.clone()), Instant::now())) {
                Ok(()) => std::ops::ControlFlow::Continue(()),
                Err(_) => std::ops::ControlFlow::Break(()),
            }
        });
        if heard {
            failures = 0;
        }
        match result {
            Ok(last) => {
                let _ = tx.send(Input::Record(Box::new(last), Instant::now()));
                let _ = tx.send(Input::FollowerStopped);
                return;
            }
            Err(e) if is_unauthorized(&e) && token.refresh() => {
                say.line("the API refused the token: following again with a fresh one from the token file");
            }
            Err(e @ Error::Refused(_)) if !e.refusal().is_some_and(|r| r.status == 429 || r.status >= 500) => {
                let _ = tx.send(Input::Refused(e));
                return;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let pause = backoff.delay(failures, None, random_u64());
                say.line(&format!(
                    "lost the hand-off's watch ({e}): following again from v{} in {} ms",
                    after.get(),
                    pause.as_millis()
                ));
                std::thread::sleep(pause);
                // Whatever changed meanwhile comes first.
                if let Ok(r) = client.get(id) {
                    say.line(&format!("reconnected at v{}", r.value.version));
                    if r.value.version > after.get() {
                        after.set(r.value.version);
                        if tx.send(Input::Record(Box::new(r.value), Instant::now())).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::getrandom(&mut b);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::server::CLAUDE_CODE_ALLOW_RULE;

    #[test]
    fn the_records_model_is_passed_to_claude_code_as_one_word_before_the_allowed_tools() {
        let args = claude_args(&HarnessSession::New(Brief::Prompt), "u-1", "default", "{}", "{}", Some("opus"));
        let at = args.iter().position(|a| a == "--model=opus").expect("the model is passed");
        assert!(at < args.iter().position(|a| a == "--allowedTools").unwrap(), "{args:?}");
        let none = claude_args(&HarnessSession::New(Brief::Prompt), "u-1", "default", "{}", "{}", None);
        assert!(!none.iter().any(|a| a.starts_with("--model")), "none asked: the harness's own default");
    }

    #[test]
    fn the_owners_words_are_never_an_argument_and_the_session_is_chosen_up_front_or_resumed() {
        let new = claude_args(&HarnessSession::New(Brief::Prompt), "u-1", "default", "{}", "{}", None);
        assert_eq!(new.windows(2).find(|w| w[0] == "--session-id").map(|w| w[1].as_str()), Some("u-1"));
        assert!(!new.contains(&"--resume".to_string()));
        let resumed = claude_args(&HarnessSession::Resume("u-1".into()), "u-1", "acceptEdits", "{}", "{}", None);
        assert!(
            resumed.contains(&"--resume=u-1".to_string()),
            "one word: never a flag after a bare --resume: {resumed:?}"
        );
        assert!(!resumed.contains(&"--resume".to_string()));
        assert_eq!(
            resumed.windows(2).find(|w| w[0] == "--permission-mode").map(|w| w[1].as_str()),
            Some("acceptEdits")
        );
        assert_eq!(
            resumed.last().map(String::as_str),
            Some(CLAUDE_CODE_ALLOW_RULE),
            "--allowedTools takes what follows it"
        );
        assert!(new.iter().any(|a| a == "-p") && new.windows(2).any(|w| w == ["--output-format", "stream-json"]));
        assert!(new.windows(2).any(|w| w == ["--input-format", "stream-json"]) && new.contains(&"--verbose".into()));
    }

    #[test]
    fn a_served_turns_first_report_is_running_and_names_its_runtime_and_permission_mode() {
        let r = running_report(3, "codex", codex_run::APPROVAL_POLICY, SyncMode::Messages);
        assert_eq!(
            (r.turn, r.status, r.runtime.as_deref(), r.permission_mode.as_deref(), r.sync_mode),
            (3, ReportStatus::Running, Some("codex"), Some("untrusted"), Some(SyncMode::Messages))
        );
        let body = serde_json::to_vec(&r).unwrap();
        assert_eq!(
            handoff_api::input::parse_report(&body).unwrap().permission_mode.as_deref(),
            Some("untrusted"),
            "the API takes it"
        );
        let claude =
            serde_json::to_vec(&running_report(1, "claude-code", PERMISSION_MODE_DEFAULT, SyncMode::Metadata)).unwrap();
        assert!(handoff_api::input::parse_report(&claude).is_ok());
    }

    #[test]
    fn sync_takes_the_three_words_and_nothing_else() {
        assert_eq!(parse_sync("metadata"), Ok(SyncMode::Metadata));
        assert_eq!(parse_sync("messages"), Ok(SyncMode::Messages));
        assert_eq!(parse_sync("full"), Ok(SyncMode::Full));
        assert!(parse_sync("metadata_only").is_err() && parse_sync("").is_err());
    }

    #[test]
    fn a_session_id_is_a_version_4_uuid_and_fresh_each_time() {
        let (a, b) = (new_uuid(), new_uuid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(a.split('-').map(str::len).eq([8, 4, 4, 4, 12]));
    }

    #[test]
    fn the_served_answer_wait_defaults_to_15_minutes_and_is_capped() {
        assert_eq!(serve_answer_wait_s(&|_| None), SERVE_ANSWER_WAIT_S_DEFAULT);
        assert_eq!(serve_answer_wait_s(&|k| (k == ENV_SERVE_ANSWER_WAIT_S).then(|| "7".into())), 7);
        assert_eq!(
            serve_answer_wait_s(&|k| (k == ENV_SERVE_ANSWER_WAIT_S).then(|| "99999999".into())),
            crate::ask::ANSWER_WAIT_S_MAX
        );
    }

    #[test]
    fn the_unit_restarts_serve_and_ends_its_whole_control_group() {
        let u = unit("/usr/local/bin/handoff", "h_1", "https://handoff.example", "/work");
        assert!(u.contains("ExecStart=/usr/local/bin/handoff serve h_1"), "{u}");
        assert!(u.contains("\nRestart=on-failure\n") && u.contains("\nKillMode=control-group\n"), "{u}");
        assert!(!u.contains("HANDOFF_TOKEN="), "the unit names a token file, never a token: {u}");
    }
}
