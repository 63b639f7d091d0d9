//! `handoff serve --machine`: one daemon per enrolled machine. With the machine credential
//! (`STATE/machine/credential.json`, from `handoff machine enrol`) it reports the machine's
//! presence at the heartbeat the service answers (its workspaces, its installed runtimes and
//! the models each reaches, the sessions running), follows the hand-offs created for the
//! machine, and serves each open one in its workspace through a child `handoff serve ID` of
//! its own: its own token file (the token got through the credential route, which ends no
//! other), its own folder as the child's current folder, so every guarantee `serve ID` has
//! holds unchanged (at most once per turn, questions back, cancel stops, restarts safe).
//!
//! One loop takes every input on one channel: the list of hand-offs (a follower thread holds
//! `GET /v1/machine/handoffs?after=V`, or polls it every [`rules::LIST_POLL_MS`] from a service that
//! does not hold it), a revocation, TERM or INT, and a tick that reaps the children. The
//! rules (where a session runs, which start and which wait, worktrees, models, the unit) are
//! [`rules`]'s.

pub mod models;
pub mod rules;

use crate::client::{Client, Error, Handoff, Presence, ReportInput, RuntimeModels};
use crate::hook::Log;
use crate::machine::{group, paths};
use crate::serve::{events, signal, steer_event};
use handoff_api::error::Code;
use handoff_core::limits::{MACHINE_HANDOFFS_KEPT, MACHINE_HEARTBEAT_S, MACHINE_SESSIONS_MAX};
use handoff_core::timeline::SyncMode;
use handoff_core::turn::{ReportStatus, State};
use rules::{Met, Workspaces};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Sessions served at once unless `--max-sessions` says: each runs a harness, and a small
/// cloud machine runs a few well.
pub const MAX_SESSIONS_DEFAULT: usize = 4;
/// How long one held follow of the list waits for a change: the service's most.
pub const LIST_HOLD_S: u64 = handoff_core::limits::MACHINE_FOLLOW_TIMEOUT_S_MAX;
/// The daemon's exit status once its owner revoked the machine: the unit does not restart it.
pub const EXIT_REVOKED: i32 = 5;
/// A session whose serve ended while its hand-off is open is started again after this.
pub const RESTART_BACKOFF_MS: u64 = 5_000;
/// A running session's token file gets a fresh machine token this often (one lasts 24 h).
pub const TOKEN_REFRESH_S: u64 = 3_600;
/// How often the loop looks at its children when nothing else comes.
const TICK_MS: u64 = 500;
/// On a stop, how long a session's serve gets to stop its harness before SIGKILL.
const CHILD_STOP_GRACE_MS: u64 = 10_000;

/// `handoff serve --machine`'s own flags (beside serve's `--runtime`, `--permission-mode`,
/// `--sync` and `--print-unit`, which it passes on).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DaemonArgs {
    /// Serve every session created for this enrolled machine, each in its workspace (the
    /// daemon; the machine credential from `handoff machine enrol` in the state folder).
    #[arg(long)]
    pub machine: bool,
    /// A workspace the machine serves, NAME=PATH (repeatable; the first is the default, where
    /// a session that names none runs).
    #[arg(long = "workspace", value_name = "NAME=PATH", requires = "machine")]
    pub workspaces: Vec<String>,
    /// A file of workspaces, one NAME=PATH a line (`#` comments; a relative PATH from the
    /// file's folder), after those of --workspace.
    #[arg(long, value_name = "PATH", requires = "machine")]
    pub workspaces_file: Option<PathBuf>,
    /// The most sessions served at once; a session past it waits, and its timeline says so.
    #[arg(long, value_name = "N", default_value_t = MAX_SESSIONS_DEFAULT, requires = "machine")]
    pub max_sessions: usize,
    /// Each new session gets its own git worktree of its workspace, on the branch
    /// handoff/ID, beside the workspace (NAME.worktrees/ID); kept on close and on erase.
    #[arg(long, requires = "machine")]
    pub worktree: bool,
    /// A full Claude Code model name this machine allows besides the aliases (repeatable).
    #[arg(long = "model-allow", value_name = "NAME", requires = "machine")]
    pub model_allow: Vec<String>,
}

/// What serve's own flags say, passed on to each session's serve.
pub struct Passed<'a> {
    /// The runtime of a session whose record names none.
    pub runtime: &'a str,
    /// The permission mode of a session whose record asks for none.
    pub permission_mode: &'a str,
    pub sync: SyncMode,
    pub print_unit: bool,
}

/// The credential `machine enrol` keeps.
#[derive(serde::Deserialize)]
struct Stored {
    url: String,
    name: String,
    credential: String,
}

/// Everything the loop is told, on its one channel.
enum Input {
    /// The hand-offs created for this machine, newest first.
    Listed(Vec<String>),
    /// The credential was refused as revoked: why.
    Revoked(String),
    Signal(i32),
}

/// Where a session stands in the daemon.
enum Phase {
    /// Open, placed, not running: starts when a place is free.
    Ready {
        noted: bool,
    },
    Running {
        child: Child,
        token_at: Instant,
    },
    /// Its serve ended while the hand-off may be open: looked at again at this time.
    Again(Instant),
    /// Closed, erased or refused: never looked at again.
    Done,
}

struct Session {
    turn: u64,
    folder: PathBuf,
    runtime: String,
    permission_mode: String,
    phase: Phase,
}

/// One line per event, to standard error and to the state folder's log; never a token.
#[derive(Clone)]
struct Say {
    log: Arc<Log>,
}

impl Say {
    fn line(&self, text: &str) {
        eprintln!("serve --machine: {}", crate::output::escape(text, false));
        self.log.line(text);
    }
}

/// What the daemon starts with, once its start-up is checked.
struct Start {
    workspaces: Workspaces,
    state_dir: PathBuf,
    stored: Stored,
}

/// The one place the daemon checks its start-up: the workspaces, the cap, the credential.
/// Answers the exit code when it cannot start (or printed the unit).
fn check_start(args: &DaemonArgs, passed: &Passed) -> Result<Start, i32> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let workspaces = workspaces(args, &cwd).map_err(|why| {
        eprintln!("serve --machine: {why}");
        crate::output::EXIT_USAGE
    })?;
    let state_dir = paths::state_dir(&|k| std::env::var(k).ok());
    if passed.print_unit {
        let program = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "handoff".into());
        let args = unit_args(args, &workspaces, passed);
        print!("{}", rules::unit(&program, &args, &state_dir.display().to_string(), EXIT_REVOKED));
        return Err(crate::output::EXIT_OK);
    }
    if !(1..=MACHINE_SESSIONS_MAX).contains(&args.max_sessions) {
        eprintln!("serve --machine: --max-sessions: 1 to {MACHINE_SESSIONS_MAX} (MACHINE_SESSIONS_MAX)");
        return Err(crate::output::EXIT_USAGE);
    }
    if let Some((name, path)) = workspaces.list.iter().find(|(_, p)| !p.is_dir()) {
        eprintln!("serve --machine: the workspace {name}: {} is not a folder", path.display());
        return Err(crate::output::EXIT_USAGE);
    }
    let file = paths::credential_file(&state_dir);
    let Some(stored) = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice::<Stored>(&b).ok()) else {
        eprintln!(
            "serve --machine: no machine credential in {}: enrol this machine first (handoff machine enrol --name NAME)",
            file.display()
        );
        return Err(crate::output::EXIT_AUTH_OR_NETWORK);
    };
    Ok(Start { workspaces, state_dir, stored })
}

/// `handoff serve --machine`: answers the exit code.
pub fn run(url: &str, args: &DaemonArgs, passed: &Passed) -> i32 {
    let Start { workspaces, state_dir, stored } = match check_start(args, passed) {
        Ok(start) => start,
        Err(code) => return code,
    };
    // The credential names its service; --url (or HANDOFF_URL) other than the default wins.
    let url = if url == crate::client::URL_DEFAULT { stored.url.clone() } else { url.to_string() };
    let say = Say { log: Arc::new(Log::new(&state_dir, "daemon", Some(&stored.name))) };
    let path_var = std::env::var("PATH").ok();
    let runtimes = models::reachable(path_var.as_deref(), &args.model_allow, &workspaces.list[0].1, &|l| say.line(l));
    let (tx, rx) = mpsc::channel();
    let signal_tx = tx.clone();
    if let Err(e) = signal::forward(move |sig| drop(signal_tx.send(Input::Signal(sig)))) {
        say.line(&format!("could not take TERM and INT: {e}"));
    }
    let credential = Credential { url: url.clone(), token: stored.credential.clone() };
    let running = Arc::new(Mutex::new(Vec::new()));
    let presence = Presence { workspaces: workspaces.names(), runtimes: runtimes.clone(), sessions: Vec::new() };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (credential, running, tx, say, stop) =
            (credential.clone(), running.clone(), tx.clone(), say.clone(), stop.clone());
        std::thread::spawn(move || report_presence(&credential, presence, &running, &tx, &say, &stop));
    }
    {
        let (credential, tx, say, stop) = (credential.clone(), tx.clone(), say.clone(), stop.clone());
        std::thread::spawn(move || follow(&credential, &tx, &say, &stop));
    }
    say.line(&format!(
        "serving machine {} from {url} (pid {}): workspaces {}, at most {} sessions at once{}",
        stored.name,
        std::process::id(),
        workspaces.names().join(", "),
        args.max_sessions,
        if args.worktree { ", a worktree each" } else { "" }
    ));
    let mut daemon = Daemon {
        url,
        args: args.clone(),
        runtime: passed.runtime.to_string(),
        permission_mode: passed.permission_mode.to_string(),
        sync: passed.sync,
        workspaces,
        runtimes,
        state_dir,
        say,
        credential,
        running,
        sessions: BTreeMap::new(),
        order: Vec::new(),
        listed: Vec::new(),
        finished: Vec::new(),
    };
    daemon.finished = daemon.load_finished();
    let code = daemon.main(&rx);
    stop.store(true, Ordering::Relaxed);
    code
}

/// The workspaces of the command line, then of the file.
fn workspaces(args: &DaemonArgs, cwd: &Path) -> Result<Workspaces, String> {
    let mut given: Vec<(String, PathBuf)> =
        args.workspaces.iter().map(|w| rules::parse_workspace(w, cwd)).collect::<Result<_, _>>()?;
    if let Some(file) = &args.workspaces_file {
        let text = std::fs::read_to_string(file).map_err(|e| format!("--workspaces-file {}: {e}", file.display()))?;
        let dir = file.parent().map_or_else(|| cwd.to_path_buf(), |d| cwd.join(d));
        given.extend(rules::parse_workspaces_file(&text, &dir).map_err(|e| format!("{}: {e}", file.display()))?);
    }
    Workspaces::of(given)
}

/// The daemon's own flags again, for the unit's `ExecStart`, the workspaces made absolute.
fn unit_args(args: &DaemonArgs, workspaces: &Workspaces, passed: &Passed) -> Vec<String> {
    let mut out = Vec::new();
    for (name, path) in &workspaces.list {
        out.extend(["--workspace".to_string(), format!("{name}={}", path.display())]);
    }
    out.extend(["--max-sessions".to_string(), args.max_sessions.to_string()]);
    if args.worktree {
        out.push("--worktree".into());
    }
    for m in &args.model_allow {
        out.extend(["--model-allow".to_string(), m.clone()]);
    }
    out.extend(["--runtime".to_string(), passed.runtime.to_string()]);
    out.extend(["--permission-mode".to_string(), passed.permission_mode.to_string()]);
    out.extend(["--sync".to_string(), sync_word(passed.sync)]);
    out
}

fn sync_word(sync: SyncMode) -> String {
    serde_json::to_value(sync).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "messages".into())
}

/// The service and the machine credential.
#[derive(Clone)]
struct Credential {
    url: String,
    token: String,
}

impl Credential {
    fn client(&self) -> Client {
        Client::new(&self.url, Some(&self.token))
            .with_insecure_http(crate::client::insecure_http_from_env(&|k| std::env::var(k).ok()))
    }
}

/// Why the credential was refused for good, if it was ([`rules::revocation`]).
fn revoked(e: &Error) -> Option<String> {
    let r = e.refusal()?;
    rules::revocation(r.status, r.code.as_str(), &r.message)
}

/// The heartbeat: the presence at once, then every `heartbeat_s` the service answers.
fn report_presence(
    credential: &Credential,
    mut presence: Presence,
    running: &Mutex<Vec<String>>,
    tx: &mpsc::Sender<Input>,
    say: &Say,
    stop: &AtomicBool,
) {
    let mut heartbeat_s = MACHINE_HEARTBEAT_S as u64;
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        presence.sessions = running.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match credential.client().presence(&presence) {
            Ok(r) => {
                heartbeat_s =
                    u64::try_from(r.value.heartbeat_s).unwrap_or(heartbeat_s).clamp(1, MACHINE_HEARTBEAT_S as u64);
                failing = false;
            }
            Err(e) => {
                if let Some(why) = revoked(&e) {
                    let _ = tx.send(Input::Revoked(why));
                    return;
                }
                if !failing {
                    say.line(&format!("presence not reported: {e}"));
                }
                failing = true;
            }
        }
        std::thread::sleep(Duration::from_secs(heartbeat_s));
    }
}

/// Follows the list of hand-offs as [`rules::Follow`] says, until the credential is revoked.
fn follow(credential: &Credential, tx: &mpsc::Sender<Input>, say: &Say, stop: &AtomicBool) {
    let mut follow = rules::Follow::default();
    while !stop.load(Ordering::Relaxed) {
        let wait_ms = match credential.client().machine_handoffs(follow.after(), LIST_HOLD_S) {
            Ok(r) => {
                let ids = r.value.handoffs.into_iter().map(|h| h.id).collect();
                if tx.send(Input::Listed(ids)).is_err() {
                    return;
                }
                follow.listed(r.value.version)
            }
            Err(e) => {
                if let Some(why) = revoked(&e) {
                    let _ = tx.send(Input::Revoked(why));
                    return;
                }
                match follow.failed(e.refusal().map(|r| r.status)) {
                    None => {
                        say.line("the service does not hold the list: reading it every 2 s");
                        0
                    }
                    Some(wait_ms) => {
                        say.line(&format!("the list of hand-offs: {e}; again in {wait_ms} ms"));
                        wait_ms
                    }
                }
            }
        };
        std::thread::sleep(Duration::from_millis(wait_ms));
    }
}

struct Daemon {
    url: String,
    args: DaemonArgs,
    runtime: String,
    permission_mode: String,
    sync: SyncMode,
    workspaces: Workspaces,
    runtimes: Vec<RuntimeModels>,
    state_dir: PathBuf,
    say: Say,
    credential: Credential,
    /// The sessions running, for the presence.
    running: Arc<Mutex<Vec<String>>>,
    sessions: BTreeMap<String, Session>,
    /// Every session met, oldest first.
    order: Vec<String>,
    /// The newest list, newest first.
    listed: Vec<String>,
    /// The sessions done with (closed, erased, refused), kept across restarts.
    finished: Vec<String>,
}

impl Daemon {
    fn main(&mut self, rx: &mpsc::Receiver<Input>) -> i32 {
        loop {
            match rx.recv_timeout(Duration::from_millis(TICK_MS)) {
                Ok(Input::Listed(ids)) => self.listed = ids,
                Ok(Input::Revoked(why)) => return self.revoked(&why),
                Ok(Input::Signal(sig)) => {
                    self.say.line(&format!("got signal {sig}: stopping every session's serve"));
                    self.stop_all();
                    signal::end_by(sig);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return crate::output::EXIT_AUTH_OR_NETWORK,
            }
            self.reap();
            if let Err(why) = self.examine() {
                return self.revoked(&why);
            }
            self.admit();
            self.refresh_tokens();
            let ids: Vec<String> = self.sessions_running().map(str::to_string).collect();
            *self.running.lock().unwrap_or_else(|e| e.into_inner()) = ids;
        }
    }

    fn sessions_running(&self) -> impl Iterator<Item = &str> {
        self.sessions.iter().filter(|(_, s)| matches!(s.phase, Phase::Running { .. })).map(|(id, _)| id.as_str())
    }

    /// Each listed hand-off not met yet, oldest first, and each due again: its token got
    /// through the credential, then done with, refused with a reason, or ready. Answers why
    /// when the credential is revoked.
    fn examine(&mut self) -> Result<(), String> {
        let now = Instant::now();
        let due = rules::to_examine(&self.listed, &self.finished, |id| match self.sessions.get(id).map(|s| &s.phase) {
            None => Met::Not,
            Some(Phase::Again(at)) => Met::Again { due: *at <= now },
            Some(_) => Met::Held,
        });
        for id in due {
            let created = match self.credential.client().credential_machine_token(&id) {
                Ok(c) => c.value,
                Err(e) => {
                    if let Some(why) = revoked(&e) {
                        return Err(why);
                    }
                    if e.code().is_some_and(|c| c.is(Code::HandoffNotFound)) {
                        self.finish(&id, "not found (erased)");
                    } else {
                        self.say.line(&format!("{id}: its machine token: {e}; trying again"));
                    }
                    continue;
                }
            };
            let Some(token) = created.machine_token.as_deref().map(str::to_string) else { continue };
            self.take(&id, &created.handoff, &token);
        }
        Ok(())
    }

    /// A hand-off met with its token: closed is done with; otherwise placed (or refused,
    /// saying why to the owner) and ready.
    fn take(&mut self, id: &str, record: &Handoff, token: &str) {
        if record.state == State::Closed {
            return self.finish(id, "closed");
        }
        if let Err(e) = crate::client::write_token_file(&paths::token_file(&self.state_dir, id), token) {
            self.say.line(&format!("{id}: its token file: {e}; trying again"));
            return;
        }
        let placed = self.place(id, record);
        if !self.order.iter().any(|o| o == id) {
            self.order.push(id.to_string());
        }
        match placed {
            Ok((folder, runtime, permission_mode)) => {
                let noted = matches!(self.sessions.get(id).map(|s| &s.phase), Some(Phase::Ready { noted: true }));
                let session =
                    Session { turn: record.turn, folder, runtime, permission_mode, phase: Phase::Ready { noted } };
                self.sessions.insert(id.to_string(), session);
            }
            Err(why) => {
                self.say.line(&format!("{id}: refused: {why}"));
                let report = ReportInput {
                    summary: Some(crate::hook::clip_summary(&format!("Refused by this machine: {why}"))),
                    ..ReportInput::of(record.turn, ReportStatus::Failed)
                };
                if let Err(e) = Client::new(&self.url, Some(token)).report(id, &report) {
                    self.say.line(&format!("{id}: could not report the refusal: {e}"));
                }
                self.finish(id, "refused");
            }
        }
    }

    /// Where and how session `id` runs: its folder (its workspace, or a worktree of it), its
    /// runtime and permission mode; or why it cannot run here.
    fn place(&self, id: &str, record: &Handoff) -> Result<(PathBuf, String, String), String> {
        let asked = &record.placement;
        let (name, workspace) = self.workspaces.place(asked.workspace.as_deref())?;
        let runtime = asked.runtime.clone().unwrap_or_else(|| self.runtime.clone());
        let Some(installed) = self.runtimes.iter().find(|r| r.name == runtime) else {
            let here: Vec<&str> = self.runtimes.iter().map(|r| r.name.as_str()).collect();
            return Err(format!("the runtime {runtime} is not installed here (it has: {})", here.join(", ")));
        };
        rules::model_reachable(asked.model.as_deref(), &runtime, &installed.models)?;
        let permission_mode = asked.requested_permission_mode.clone().unwrap_or_else(|| self.permission_mode.clone());
        let folder = if self.args.worktree {
            worktree(workspace, id).map_err(|e| format!("the worktree of workspace {name}: {e}"))?
        } else {
            workspace.to_path_buf()
        };
        Ok((folder, runtime, permission_mode))
    }

    /// Starts what the cap lets start, oldest first; the rest wait, each saying so once on
    /// its timeline.
    fn admit(&mut self) {
        let ready: Vec<&str> = self
            .order
            .iter()
            .filter(|id| matches!(self.sessions.get(*id).map(|s| &s.phase), Some(Phase::Ready { .. })))
            .map(String::as_str)
            .collect();
        let running = self.sessions_running().count();
        let (start, wait) = rules::admit(&ready, running, self.args.max_sessions);
        let (start, wait): (Vec<String>, Vec<String>) =
            (start.iter().map(|s| s.to_string()).collect(), wait.iter().map(|s| s.to_string()).collect());
        for id in wait {
            self.wait(&id);
        }
        for id in start {
            self.start(&id);
        }
    }

    /// Session `id` waits for a place: a note on its timeline, once.
    fn wait(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else { return };
        if matches!(session.phase, Phase::Ready { noted: true }) {
            return;
        }
        session.phase = Phase::Ready { noted: true };
        let (turn, max) = (session.turn, self.args.max_sessions);
        let text = rules::waiting_note(max);
        self.say.line(&format!("{id}: waits: {max} sessions run"));
        let Some(note) = events::note(self.sync, &text) else { return };
        let Some(token) = crate::client::read_token_file(&paths::token_file(&self.state_dir, id)).ok().flatten() else {
            return;
        };
        let client = Client::new(&self.url, Some(&token));
        let mut next = 1;
        if let Err(e) = steer_event::write_event(&client, id, turn, &mut next, &|seq| handoff_core::timeline::Event {
            seq,
            ..note.clone()
        }) {
            self.say.line(&format!("{id}: could not say on its timeline that it waits: {e}"));
        }
    }

    /// Starts session `id`'s serve: in its folder, with its token file.
    fn start(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else { return };
        let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("handoff"));
        let token_file = paths::token_file(&self.state_dir, id);
        let mut cmd = Command::new(program);
        cmd.arg("serve")
            .arg(id)
            .arg("--url")
            .arg(&self.url)
            .arg("--runtime")
            .arg(&session.runtime)
            .arg("--permission-mode")
            .arg(&session.permission_mode)
            .arg("--sync")
            .arg(sync_word(self.sync))
            .arg("--token-file")
            .arg(&token_file)
            .env_remove(crate::machine::env::ENV_TOKEN)
            .env_remove(crate::machine::env::ENV_TOKEN_FILE)
            .current_dir(&session.folder)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        group::own_group_dying_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(child) => {
                self.say.line(&format!(
                    "{id}: serving in {} on {} (serve pid {})",
                    session.folder.display(),
                    session.runtime,
                    child.id()
                ));
                session.phase = Phase::Running { child, token_at: Instant::now() };
            }
            Err(e) => {
                self.say.line(&format!("{id}: serve could not start: {e}; again in {RESTART_BACKOFF_MS} ms"));
                session.phase = Phase::Again(Instant::now() + Duration::from_millis(RESTART_BACKOFF_MS));
            }
        }
    }

    /// Each session's serve that ended: 0 when its hand-off closed (done with); otherwise
    /// looked at again after a backoff (a serve ends when its token file holds no fresh token,
    /// or the hand-off was erased), so a session is never left unserved while open.
    fn reap(&mut self) {
        let mut ended = Vec::new();
        for (id, s) in &mut self.sessions {
            if let Phase::Running { child, .. } = &mut s.phase {
                if let Ok(Some(status)) = child.try_wait() {
                    ended.push((id.clone(), status));
                }
            }
        }
        for (id, status) in ended {
            if status.success() {
                self.finish(&id, "closed: its serve exited 0");
                continue;
            }
            self.say.line(&format!("{id}: its serve ended ({status}); looking at it again in {RESTART_BACKOFF_MS} ms"));
            if let Some(s) = self.sessions.get_mut(&id) {
                s.phase = Phase::Again(Instant::now() + Duration::from_millis(RESTART_BACKOFF_MS));
            }
        }
    }

    /// A fresh machine token in each running session's token file, every [`TOKEN_REFRESH_S`]:
    /// its serve reads the file again when the API refuses the token it holds.
    fn refresh_tokens(&mut self) {
        let due: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| matches!(&s.phase, Phase::Running { token_at, .. } if token_at.elapsed() >= Duration::from_secs(TOKEN_REFRESH_S)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let Ok(created) = self.credential.client().credential_machine_token(&id) else { continue };
            if let Some(token) = created.value.machine_token.as_deref() {
                if crate::client::write_token_file(&paths::token_file(&self.state_dir, &id), token).is_ok() {
                    if let Some(Session { phase: Phase::Running { token_at, .. }, .. }) = self.sessions.get_mut(&id) {
                        *token_at = Instant::now();
                    }
                }
            }
        }
    }

    /// Session `id` is done with, for good: kept in the state folder so a restart does not
    /// look at it again.
    fn finish(&mut self, id: &str, why: &str) {
        if let Some(s) = self.sessions.get_mut(id) {
            s.phase = Phase::Done;
        }
        if !self.finished.iter().any(|f| f == id) {
            self.say.line(&format!("{id}: done with: {why}"));
            self.finished.push(id.to_string());
            let over = self.finished.len().saturating_sub(MACHINE_HANDOFFS_KEPT);
            self.finished.drain(..over);
            let _ = crate::private::write(&finished_file(&self.state_dir), self.finished.join("\n").as_bytes());
        }
    }

    fn load_finished(&self) -> Vec<String> {
        let text = std::fs::read_to_string(finished_file(&self.state_dir)).unwrap_or_default();
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
    }

    /// TERM to every session's serve (each stops its harness), SIGKILL after the grace.
    fn stop_all(&mut self) -> Vec<String> {
        let mut stopped = Vec::new();
        for (id, s) in &mut self.sessions {
            if let Phase::Running { child, .. } = &mut s.phase {
                group::stop_within(child.id(), CHILD_STOP_GRACE_MS, || child.try_wait().ok().flatten());
                let _ = child.wait();
                stopped.push(id.clone());
                s.phase = Phase::Again(Instant::now());
            }
        }
        stopped
    }

    /// The owner revoked this machine: no new session is taken; each running session is
    /// stopped and its open turn reported failed, saying so; the daemon exits [`EXIT_REVOKED`].
    fn revoked(&mut self, why: &str) -> i32 {
        let running: Vec<String> = self.sessions_running().map(str::to_string).collect();
        self.say.line(&format!(
            "this machine's credential is refused: {why}. It takes no new session; stopping the {} running ({}); enrol it again to serve",
            running.len(),
            running.join(", ")
        ));
        for id in self.stop_all() {
            self.fail_revoked(&id);
        }
        EXIT_REVOKED
    }

    /// Reports session `id`'s open turn failed: its machine was revoked.
    fn fail_revoked(&self, id: &str) {
        let Some(token) = crate::client::read_token_file(&paths::token_file(&self.state_dir, id)).ok().flatten() else {
            return;
        };
        let client = Client::new(&self.url, Some(&token));
        let Ok(record) = client.get(id) else { return };
        if record.value.state == State::Closed || record.value.status.has_ended() {
            return;
        }
        let summary = "This machine was revoked by its owner: its daemon stopped the session.";
        let report =
            ReportInput { summary: Some(summary.into()), ..ReportInput::of(record.value.turn, ReportStatus::Failed) };
        match client.report(id, &report) {
            Ok(_) => {
                self.say.line(&format!("{id}: turn {} reported failed: the machine was revoked", record.value.turn))
            }
            Err(e) => self.say.line(&format!("{id}: could not report turn {} failed: {e}", record.value.turn)),
        }
    }
}

/// The sessions the daemon is done with, one id a line.
fn finished_file(state_dir: &Path) -> PathBuf {
    paths::credential_file(state_dir).with_file_name("finished")
}

/// Session `id`'s worktree of `workspace`: made on the branch `handoff/ID` from the
/// workspace's HEAD, or the one made before (a restart).
fn worktree(workspace: &Path, id: &str) -> Result<PathBuf, String> {
    let dir = rules::worktree_dir(workspace, id);
    if dir.join(".git").exists() {
        return Ok(dir);
    }
    let branch = rules::worktree_branch(id);
    let git = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("git").arg("-C").arg(workspace).args(args).output().map_err(|e| format!("git: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    };
    let path = dir.display().to_string();
    let has_branch = git(&["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")]).is_ok();
    if has_branch {
        git(&["worktree", "add", &path, &branch])?;
    } else {
        git(&["worktree", "add", "-b", &branch, &path])?;
    }
    Ok(dir)
}
