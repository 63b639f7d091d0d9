//! `handoff serve ID`: runs, on the cloud machine, every turn the owner opens from anywhere.
//!
//! A thread follows the hand-off over the watch (the `/wait` fallback where it is not served),
//! again after any drop, with capped exponential backoff and jitter and never giving up on a
//! reachable service; the main thread decides with [`decide::decide`] on each record and on each
//! harness exit, and acts: it starts a harness (the state record written first), stops one
//! (its whole process group), or reports a turn whose harness is gone `failed`.
//!
//! Claude Code runs in print mode, one process per turn: `claude -p` with `--session-id` on its
//! first turn and `--resume` after, the owner's words on standard input, `--output-format json`,
//! `--settings` carrying the hooks for this run only (the person's own settings are left as
//! they are), `--mcp-config` for `handoff mcp`. A fresh process per turn gives a fresh MCP
//! server, which pins the turn it serves.

pub mod child;
pub mod codex;
pub mod codex_run;
pub mod decide;
pub mod state;

use crate::client::{Client, Error, Handoff, ReportInput, Retry, RuntimesInput};
use crate::hook::{self, Log};
use crate::launch::{self, Runtime};
use decide::{Action, Brief, Gone, Harness as Alive, HarnessSession, Local, Started, StopWhy, View};
use handoff_api::error::Code;
use handoff_core::turn::ReportStatus;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a question of a served turn waits for the owner unless
/// `HANDOFF_SERVE_ANSWER_WAIT_S` says: nobody is at the terminal, so it is long; at the limit
/// the question is denied with a note the model reads.
pub const SERVE_ANSWER_WAIT_S_DEFAULT: u64 = 900;
/// The variable naming that wait.
pub const ENV_SERVE_ANSWER_WAIT_S: &str = "HANDOFF_SERVE_ANSWER_WAIT_S";
/// Claude Code's permission mode in a served turn unless `--permission-mode` says: `default`,
/// where every tool call that needs permission is asked of the owner (on the phone).
pub const PERMISSION_MODE_DEFAULT: &str = "default";
/// The backoff between follows of a reachable-but-dropping service: from this…
pub const FOLLOW_BACKOFF_MS_BASE: u64 = 500;
/// …doubling up to this, jittered.
pub const FOLLOW_BACKOFF_MS_MAX: u64 = 30_000;
/// Each `/wait` of the fallback is held this long.
const FOLLOW_WAIT_S: u64 = 60;
/// The main loop looks at the harness this often.
const TICK_MS: u64 = 100;

/// `handoff serve`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The hand-off to serve.
    pub id: String,
    /// The runtime for turns handed to none before any ran here (claude-code or codex).
    #[arg(long, value_name = "RUNTIME", default_value = "claude-code")]
    pub runtime: String,
    /// Claude Code's permission mode for served turns (default, acceptEdits, plan, …):
    /// `default` asks the owner about every tool call that needs permission. The record shows
    /// the mode each turn ran in (Codex's: its approval policy, untrusted).
    #[arg(long, value_name = "MODE", default_value = PERMISSION_MODE_DEFAULT)]
    pub permission_mode: String,
    /// A file holding the machine token, read again when the API says the token expired.
    #[arg(long, value_name = "PATH", env = "HANDOFF_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Print a systemd unit that keeps `handoff serve ID` running, and exit.
    #[arg(long)]
    pub print_unit: bool,
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

/// What the follower thread tells the main loop.
enum Event {
    Record(Box<Handoff>, Instant),
    /// The hand-off is gone (404), or the token is refused with no fresh one: the error.
    Ended(Error),
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

/// The served runtimes: Claude Code in print mode, one process per turn; Codex through its
/// app-server, one per turn, on a thread of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    ClaudeCode,
    Codex,
}

impl Driver {
    fn of(runtime: &str) -> Result<Driver, String> {
        match Runtime::parse(runtime) {
            Some(Runtime::ClaudeCode) => Ok(Driver::ClaudeCode),
            Some(Runtime::Codex) => Ok(Driver::Codex),
            None => Err(format!("handoff serve runs claude-code or codex, not {runtime}")),
        }
    }
}

/// A harness running a turn.
enum Running {
    Process { h: child::Harness },
    Codex { run: codex_run::Run },
}

impl Running {
    fn turn(&self) -> u64 {
        match self {
            Running::Process { h } => h.turn,
            Running::Codex { run } => run.turn,
        }
    }

    fn runtime(&self) -> &'static str {
        match self {
            Running::Process { .. } => Runtime::ClaudeCode.name(),
            Running::Codex { .. } => Runtime::Codex.name(),
        }
    }

    fn started(&self) -> Instant {
        match self {
            Running::Process { h } => h.started,
            Running::Codex { run } => run.started,
        }
    }

    /// How it ended, once it did.
    fn exited(&mut self) -> Option<String> {
        match self {
            Running::Process { h } => h.exited().map(child::describe),
            Running::Codex { run } => run.exited(),
        }
    }

    fn stop(&mut self) -> Option<String> {
        match self {
            Running::Process { h } => h.stop().map(child::describe),
            Running::Codex { run } => run.stop(),
        }
    }
}

/// `handoff serve`: answers the exit code.
pub fn run(url: &str, token: Option<String>, args: &Args) -> i32 {
    if args.print_unit {
        let program = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "handoff".into());
        let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "%h".into());
        print!("{}", unit(&program, &args.id, url, &cwd));
        return crate::output::EXIT_OK;
    }
    let env = |k: &str| std::env::var(k).ok();
    let from_file = args.token_file.as_ref().and_then(|f| crate::client::read_token_file(f).ok().flatten());
    let Some(token) = token.filter(|t| !t.is_empty()).or(from_file) else {
        eprintln!("serve: no token: pass --token-file PATH (or HANDOFF_TOKEN_FILE) naming a file that holds the hand-off's machine token");
        return crate::output::EXIT_AUTH_OR_NETWORK;
    };
    if let Err(why) = Driver::of(&args.runtime) {
        eprintln!("serve: --runtime {}: {why}", args.runtime);
        return crate::output::EXIT_USAGE;
    }
    // The record shows the mode each turn runs in: one the API would refuse is refused here.
    if let Err(why) = handoff_core::turn::check_permission_mode(&args.permission_mode) {
        eprintln!("serve: --permission-mode: {}", why.message);
        return crate::output::EXIT_USAGE;
    }
    let state_dir = hook::state_dir(&env);
    let say = Say { log: Arc::new(Log::new(&state_dir, "serve", Some(&args.id))) };
    let _lock = match state::lock(&state_dir, &args.id) {
        Ok(lock) => lock,
        Err(why) => {
            eprintln!("serve: {why}");
            return crate::output::EXIT_REFUSED;
        }
    };
    let local = match state::load(&state_dir, &args.id) {
        Ok(l) => l,
        Err(why) => {
            eprintln!("serve: the state record: {why}");
            return crate::output::EXIT_REFUSED;
        }
    };
    let token = Token { current: Arc::new(Mutex::new(token)), file: args.token_file.clone() };
    let mut serve = Serve {
        url: url.to_string(),
        id: args.id.clone(),
        args: args.clone(),
        state_dir,
        say,
        token,
        local,
        harness: None,
        arrivals: BTreeMap::new(),
    };
    serve.main()
}

struct Serve {
    url: String,
    id: String,
    args: Args,
    state_dir: PathBuf,
    say: Say,
    token: Token,
    local: Local,
    harness: Option<Running>,
    /// When each version arrived (the newest few), for the latencies the log gives.
    arrivals: BTreeMap<u64, Instant>,
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

    fn main(&mut self) -> i32 {
        self.say.line(&format!(
            "serving {} from {} (pid {}), runtime {} for turns handed to none, permission mode {}",
            self.id,
            self.url,
            std::process::id(),
            self.args.runtime,
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
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(Event::Record(Box::new(first.clone()), Instant::now()));
        {
            let (url, id, token, say) = (self.url.clone(), self.id.clone(), self.token.clone(), self.say.clone());
            std::thread::spawn(move || follow(&url, &id, first.version, &token, &say, &tx));
        }
        let mut latest: Option<Handoff> = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(TICK_MS)) {
                Ok(Event::Record(h, at)) => {
                    if latest.as_ref().is_none_or(|l| h.version >= l.version) {
                        self.arrivals.insert(h.version, at);
                        while self.arrivals.len() > 64 {
                            self.arrivals.pop_first();
                        }
                        latest = Some(*h);
                    }
                }
                Ok(Event::Ended(e)) => {
                    if let Some(h) = &mut self.harness {
                        h.stop();
                    }
                    return self.ended(&e);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if latest.as_ref().is_some_and(|l| l.state != handoff_core::turn::State::Closed) {
                        self.say.line("the follower stopped");
                        return crate::output::EXIT_AUTH_OR_NETWORK;
                    }
                }
            }
            if let Some(fresh) = self.on_exit() {
                latest = Some(fresh);
            }
            let Some(record) = latest.clone() else { continue };
            let view = View::of(&record);
            self.note_codex_thread();
            let alive = self.harness.as_ref().map_or(Alive::None, |h| Alive::Running { turn: h.turn() });
            match decide::decide(&view, &self.local, alive, &self.args.runtime) {
                Action::Nothing => {}
                Action::Exit => {
                    // An erase closes the hand-off first: a closed record that cannot be read
                    // again was erased.
                    if let Err(e @ Error::Refused(_)) = self.call(|c| c.get(&self.id)) {
                        return self.ended(&e);
                    }
                    self.say.line(&format!("{} is closed: serve exits", self.id));
                    return crate::output::EXIT_OK;
                }
                Action::Start { turn, runtime, session } => self.start(&record, turn, &runtime, session),
                Action::Stop { turn, why } => self.stop(turn, why, record.version),
                Action::Fail { turn, why } => self.fail(turn, &why),
            }
            self.local.version = self.local.version.max(view.version);
        }
    }

    /// The line and the code serve ends with on an error it cannot get past.
    fn ended(&self, e: &Error) -> i32 {
        let what = match e.refusal() {
            Some(r) if r.status == 404 => format!("{} was erased, or this token does not reach it (404): nothing to serve", self.id),
            Some(r) if r.status == 401 || r.status == 403 => format!(
                "the API refused the machine token ({}): mint a fresh one (create the hand-off again for the same session) and write it to the token file{}",
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

    fn store(&self) {
        if let Err(e) = state::store(&self.state_dir, &self.id, &self.local) {
            self.say.line(&format!("could not write the state record: {e}"));
        }
    }

    /// Notices the harness's exit: records how it ended, delivers the hooks' spool (so a
    /// spooled report is not taken for none), and answers the record read afresh.
    fn on_exit(&mut self) -> Option<Handoff> {
        self.note_codex_thread();
        let h = self.harness.as_mut()?;
        let status = h.exited()?;
        let (turn, runtime, ms) = (h.turn(), h.runtime(), h.started().elapsed().as_millis());
        self.harness = None;
        let how = status;
        self.say.line(&format!("{runtime} of turn {turn} ended ({how}) after {ms} ms"));
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.ended = Some(how);
        }
        self.store();
        self.flush_spool();
        self.end_leftovers(&format!("turn {turn}"));
        self.call(|c| c.get(&self.id)).ok().map(|r| r.value)
    }

    /// Keeps the Codex thread a turn runs in, once Codex gave it, as the turn's session.
    fn note_codex_thread(&mut self) {
        let Some(Running::Codex { run }) = &mut self.harness else { return };
        let turn = run.turn;
        let Some(thread) = run.thread_id() else { return };
        self.say.line(&format!("turn {turn}: codex thread {thread}"));
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.session = thread;
        }
        self.store();
    }

    /// Ends what is left of a served harness of this hand-off, saying so when there was any.
    fn end_leftovers(&self, whose: &str) {
        let ended = child::end_leftovers(&self.id);
        if ended > 0 {
            self.say.line(&format!("ended {ended} process(es) left by {whose}'s harness"));
        }
    }

    fn flush_spool(&self) {
        let Some(session) = hook::session("serve", &self.url, Some(&self.token.get()), Some(&self.id)) else { return };
        match hook::spool::Spool::open(&session.dir, &self.id).and_then(|spool| session.deliver(&spool)) {
            Ok(d) if d.sent + d.dropped + d.left > 0 => self.say.line(&format!(
                "flushed the hooks' spool: delivered {}, dropped {}, left {}",
                d.sent, d.dropped, d.left
            )),
            Ok(_) => {}
            Err(e) => self.say.line(&format!("could not flush the hooks' spool: {e}")),
        }
    }

    fn start(&mut self, record: &Handoff, turn: u64, runtime: &str, session: HarnessSession) {
        let arrived =
            self.arrivals.range(..=record.version).next_back().map(|(_, at)| *at).unwrap_or_else(Instant::now);
        let late_s = (hook::now_ms() - record.updated_at.ms()).max(0) / 1000;
        // The state record first: a turn written here is never started again.
        let session_id = match &session {
            HarnessSession::Resume(id) => id.clone(),
            HarnessSession::New(_) => new_uuid(),
        };
        self.local.turns.insert(
            turn,
            Started {
                runtime: runtime.to_string(),
                session: session_id.clone(),
                started_ms: hook::now_ms(),
                group: None,
                ended: None,
                settled: false,
            },
        );
        self.store();
        let driver = match Driver::of(runtime) {
            Ok(d) => d,
            Err(why) => return self.fail_saying(turn, &why),
        };
        let input = match self.input(record, turn, runtime, &session) {
            Ok(text) => text,
            Err(why) => return self.fail_saying(turn, &why),
        };
        let runtime_of = if driver == Driver::Codex { Runtime::Codex } else { Runtime::ClaudeCode };
        let program = match crate::detect::find(runtime_of.program(), std::env::var("PATH").ok().as_deref()) {
            Some(p) => p,
            None => {
                return self.fail_saying(
                    turn,
                    &format!(
                        "{} is not on PATH on the machine: install {} there",
                        runtime_of.program(),
                        runtime_of.name()
                    ),
                )
            }
        };
        let token_path = launch::token_file(&self.state_dir, &self.id);
        if let Err(e) = crate::client::write_token_file(&token_path, &self.token.get()) {
            return self.fail_saying(turn, &format!("could not write the token file {}: {e}", token_path.display()));
        }
        let mode = match driver {
            Driver::ClaudeCode => self.args.permission_mode.as_str(),
            Driver::Codex => codex_run::APPROVAL_POLICY,
        };
        self.name_runtime(turn, runtime, mode);
        let server = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "handoff".into());
        let wait_s = serve_answer_wait_s(&|k| std::env::var(k).ok());
        let settings = match hook::install::install_claude_code_waiting("", &server, wait_s) {
            Ok(s) => s,
            Err(e) => return self.fail_saying(turn, &format!("the hooks' settings: {e}")),
        };
        let mut vars = vec![
            (launch::ENV_URL, self.url.clone()),
            (launch::ENV_ID, self.id.clone()),
            (launch::ENV_TOKEN_FILE, token_path.display().to_string()),
            (launch::ENV_STATE_DIR, self.state_dir.display().to_string()),
            ("HANDOFF_ANSWER_WAIT_S", wait_s.to_string()),
            (hook::ENV_SERVED, "1".to_string()),
        ];
        if let Some(path) = path_with_this_program() {
            vars.push(("PATH", path));
        }
        if driver == Driver::Codex {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            let config = codex::Config {
                program,
                args: codex::served_settings(&server, wait_s),
                env: vars.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
                env_remove: vec![launch::ENV_TOKEN.to_string()],
                cwd,
                approval_policy: codex_run::APPROVAL_POLICY.to_string(),
            };
            let resume = match &session {
                HarnessSession::Resume(id) => Some(id.clone()),
                HarnessSession::New(_) => None,
            };
            let start = codex_run::Start {
                config,
                resume,
                prompt: input,
                client: self.client(),
                id: self.id.clone(),
                turn,
                wait_s,
            };
            self.harness = Some(Running::Codex { run: codex_run::Run::spawn(start) });
            self.say.line(&format!(
                "turn {turn} started: codex app-server, {} ms after v{} arrived; the turn was opened {late_s} s before",
                arrived.elapsed().as_millis(),
                record.version
            ));
            return;
        }
        let args = claude_args(
            &session,
            &session_id,
            &self.args.permission_mode,
            &settings,
            &launch::claude_code_mcp_config(&server),
        );
        match child::spawn(&program, &args, &vars, &[launch::ENV_TOKEN], &input, turn, runtime) {
            Ok(h) => {
                if let Some(s) = self.local.turns.get_mut(&turn) {
                    s.group = Some(h.pid() as i32);
                }
                self.store();
                let how = match &session {
                    HarnessSession::Resume(_) => "resumed",
                    HarnessSession::New(_) => "new",
                };
                self.say.line(&format!(
                    "turn {turn} started: {runtime} session {session_id} ({how}), pid {}, {} ms after v{} arrived; the turn was opened {late_s} s before",
                    h.pid(),
                    arrived.elapsed().as_millis(),
                    record.version
                ));
                self.harness = Some(Running::Process { h });
            }
            Err(e) => self.fail_saying(turn, &format!("{} could not start: {e}", program.display())),
        }
    }

    /// The turn's first report, before its harness starts (so no hook's report can come before
    /// it): `running`, naming the runtime that runs it and its permission mode (Claude Code's
    /// mode, Codex's approval policy), which the record then shows.
    fn name_runtime(&self, turn: u64, runtime: &str, mode: &str) {
        let report = running_report(turn, runtime, mode);
        if let Err(e) = self.call(|c| c.report(&self.id, &report)) {
            self.say
                .line(&format!("turn {turn}: could not name its runtime {runtime} and permission mode {mode}: {e}"));
        }
    }

    /// What the harness reads on standard input: the briefing (then the access paragraph) for
    /// a new session, the owner's words for a resumed one.
    fn input(&self, record: &Handoff, turn: u64, runtime: &str, session: &HarnessSession) -> Result<String, String> {
        let runtime_of = Runtime::parse(runtime).ok_or_else(|| format!("unknown runtime {runtime}"))?;
        let paragraph = launch::access_paragraph(runtime_of, &self.id, turn);
        let words = record.prompt.clone();
        match session {
            HarnessSession::Resume(_) => {
                Ok(words.unwrap_or_else(|| format!("The owner opened turn {turn} without words: go on with the work.")))
            }
            HarnessSession::New(Brief::Prompt) => Ok(launch::prompt(words.as_deref().unwrap_or_default(), &paragraph)),
            HarnessSession::New(Brief::Package | Brief::Work) => {
                let client = self.client();
                let prepared = launch::run::prepare(&client, &self.id, Some(runtime), None)
                    .map_err(|e| describe_launch_error(&e))?;
                if let Some(p) = prepared.package() {
                    launch::run::accept(&client, &prepared)
                        .map_err(|e| format!("could not accept package v{}: {e}", p.version))?;
                }
                let mut briefing = launch::run::briefing(&client, &prepared).map_err(|e| describe_launch_error(&e))?;
                if prepared.package().is_none() {
                    if let Some(w) = &words {
                        briefing =
                            format!("{}\n\n{}\n{w}\n", briefing.trim_end(), handoff_core::briefing::WORDS_HEADING);
                    }
                }
                Ok(launch::prompt(&briefing, &paragraph))
            }
        }
    }

    fn stop(&mut self, turn: u64, why: StopWhy, version: u64) {
        let Some(mut h) = self.harness.take() else { return };
        let arrived = self.arrivals.get(&version).copied().unwrap_or_else(Instant::now);
        let how = h.stop().unwrap_or_else(|| "unknown".to_string());
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
            // The record already says why it ended: serve reports nothing after a cancel.
            s.settled = matches!(why, StopWhy::Cancelled | StopWhy::Closed);
        }
        self.store();
    }

    fn fail(&mut self, turn: u64, why: &Gone) {
        let runtime = self.local.turns.get(&turn).map(|s| s.runtime.clone()).unwrap_or_default();
        // A spooled report may still say how the turn ended.
        self.flush_spool();
        if let Ok(r) = self.call(|c| c.get(&self.id)) {
            if r.value.turn != turn || r.value.status.has_ended() {
                self.settle(turn);
                return;
            }
        }
        self.fail_saying(turn, &why.summary(&runtime));
    }

    /// Reports `turn` failed with `summary`, once.
    fn fail_saying(&mut self, turn: u64, summary: &str) {
        let report = ReportInput {
            turn,
            status: ReportStatus::Failed,
            summary: Some(hook::clip_summary(summary)),
            unmet: None,
            usage: None,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        };
        match self.call(|c| c.report(&self.id, &report)) {
            Ok(r) => self.say.line(&format!("reported turn {turn} failed (v{}): {summary}", r.value.version)),
            Err(Error::Refused(r)) if r.code.is(Code::TurnFinished) || r.code.is(Code::HandoffStale) => {
                self.say.line(&format!("turn {turn} had ended already: {}", crate::output::refusal_line(&r)));
            }
            Err(e) => {
                // Not settled: tried again on the next record.
                self.say.line(&format!("could not report turn {turn} failed: {e}"));
                return;
            }
        }
        self.settle(turn);
    }

    fn settle(&mut self, turn: u64) {
        if let Some(s) = self.local.turns.get_mut(&turn) {
            s.settled = true;
        }
        self.store();
    }
}

fn describe_launch_error(e: &launch::run::LaunchError) -> String {
    match e {
        launch::run::LaunchError::Api(e) => e.to_string(),
        launch::run::LaunchError::Refused(r) => r.to_string(),
        launch::run::LaunchError::Setup(s) => s.clone(),
    }
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

/// The report naming how a served turn runs: its runtime and permission mode.
pub fn running_report(turn: u64, runtime: &str, mode: &str) -> ReportInput {
    ReportInput {
        turn,
        status: ReportStatus::Running,
        summary: None,
        unmet: None,
        usage: None,
        question: None,
        runtime: Some(runtime.to_string()),
        permission_mode: Some(mode.to_string()),
        reply: None,
        sync_mode: None,
    }
}

/// Claude Code's arguments for a served turn; the owner's words go on standard input, never
/// here. `--allowedTools` comes last: it takes every word after it as a rule.
pub fn claude_args(
    session: &HarnessSession,
    session_id: &str,
    mode: &str,
    settings: &str,
    mcp_config: &str,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        "--output-format",
        "json",
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
    match session {
        HarnessSession::Resume(_) => args.extend(["--resume".to_string(), session_id.to_string()]),
        HarnessSession::New(_) => args.extend(["--session-id".to_string(), session_id.to_string()]),
    }
    args.extend(["--allowedTools".to_string(), launch::CLAUDE_CODE_ALLOW_RULE.to_string()]);
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

/// `PATH` with this program's folder first, so that `handoff` in the session is this one.
fn path_with_this_program() -> Option<String> {
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let joined = std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).ok()?;
    Some(joined.to_string_lossy().into_owned())
}

/// Follows the hand-off for the main loop until it closes, is erased, or the token is refused
/// with no fresh one; any other failure is followed again after a capped, jittered backoff.
fn follow(url: &str, id: &str, after: u64, token: &Token, say: &Say, tx: &mpsc::Sender<Event>) {
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
            match tx.send(Event::Record(Box::new(reply.value.clone()), Instant::now())) {
                Ok(()) => std::ops::ControlFlow::Continue(()),
                Err(_) => std::ops::ControlFlow::Break(()),
            }
        });
        if heard {
            failures = 0;
        }
        match result {
            Ok(last) => {
                let _ = tx.send(Event::Record(Box::new(last), Instant::now()));
                return;
            }
            Err(e) if is_unauthorized(&e) && token.refresh() => {
                say.line("the API refused the token: following again with a fresh one from the token file");
            }
            Err(e @ Error::Refused(_)) if !e.refusal().is_some_and(|r| r.status == 429 || r.status >= 500) => {
                let _ = tx.send(Event::Ended(e));
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
                        if tx.send(Event::Record(Box::new(r.value), Instant::now())).is_err() {
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

    #[test]
    fn the_owners_words_are_never_an_argument_and_the_session_is_chosen_up_front_or_resumed() {
        let new = claude_args(&HarnessSession::New(Brief::Prompt), "u-1", "default", "{}", "{}");
        assert_eq!(new.windows(2).find(|w| w[0] == "--session-id").map(|w| w[1].as_str()), Some("u-1"));
        assert!(!new.contains(&"--resume".to_string()));
        let resumed = claude_args(&HarnessSession::Resume("u-1".into()), "u-1", "acceptEdits", "{}", "{}");
        assert_eq!(resumed.windows(2).find(|w| w[0] == "--resume").map(|w| w[1].as_str()), Some("u-1"));
        assert_eq!(
            resumed.windows(2).find(|w| w[0] == "--permission-mode").map(|w| w[1].as_str()),
            Some("acceptEdits")
        );
        assert_eq!(
            resumed.last().map(String::as_str),
            Some(launch::CLAUDE_CODE_ALLOW_RULE),
            "--allowedTools takes what follows it"
        );
        assert!(new.iter().any(|a| a == "-p") && new.windows(2).any(|w| w == ["--output-format", "json"]));
    }

    #[test]
    fn a_served_turns_first_report_is_running_and_names_its_runtime_and_permission_mode() {
        let r = running_report(3, "codex", codex_run::APPROVAL_POLICY);
        assert_eq!(
            (r.turn, r.status, r.runtime.as_deref(), r.permission_mode.as_deref()),
            (3, ReportStatus::Running, Some("codex"), Some("untrusted"))
        );
        let body = serde_json::to_vec(&r).unwrap();
        assert_eq!(
            handoff_api::input::parse_report(&body).unwrap().permission_mode.as_deref(),
            Some("untrusted"),
            "the API takes it"
        );
        let claude = serde_json::to_vec(&running_report(1, "claude-code", PERMISSION_MODE_DEFAULT)).unwrap();
        assert!(handoff_api::input::parse_report(&claude).is_ok());
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
