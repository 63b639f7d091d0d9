//! Machine reporters: the hooks an agent harness runs on this machine (`handoff hook
//! claude-code`, `handoff hook codex`), which turn the harness's events into reports on the
//! session's hand-off, and `handoff hook flush`, which delivers what they could not.
//!
//! A hook is never in the agent's way:
//! - it exits 0 within [`HOOK_BUDGET_MS`] whatever happens (`main` holds the budget; the work
//!   stops sending once its deadline passes);
//! - it prints nothing on standard output (Claude Code reads a hook's output as context for
//!   some events) and logs to `hook.log` in its state directory instead, capped at
//!   [`LOG_BYTES_MAX`];
//! - every change is spooled before it is sent ([`spool`]) and delivered in order, its
//!   `Idempotency-Key` kept across tries, so a network blip loses and repeats nothing;
//! - a report goes only to a turn the hooks saw open ([`seen`]), and the service refuses one
//!   for a turn that has ended since, which the spool then drops.
//!
//! The session is named by the environment the harness runs in: `HANDOFF_ID`,
//! `HANDOFF_TOKEN` (its machine token) or `HANDOFF_TOKEN_FILE` (a 0600 file holding it, as
//! `handoff launch` passes it) and `HANDOFF_URL`. Its state folder, spool, seen turns and log
//! are private ([`crate::private`]).

pub mod claude_code;
pub mod codex;
pub mod event;
pub mod install;
pub mod seen;
pub mod spool;
pub mod transcript;

use crate::ask::Prompt;
use crate::client::new_idempotency_key;
use crate::client::{Client, Error, Handoff, QuestionInput, ReportInput, Retry, RuntimesInput};
use crate::detect;
use crate::machine::Runtime;
use event::{permission_input, Intent};
use handoff_core::limits::RUNTIMES_FRESH_MS;
use handoff_core::suggestion::Usage;
use handoff_core::time::rfc3339;
use handoff_core::turn::{ReportStatus, Status};
use seen::Seen;
use spool::{Entry, Send, Spool, SPOOL_ENTRY_AGE_MS_MAX};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// Where the rest of the crate, and its tests, name them.
pub use event::{clip_summary, sendable};
pub use install::HOOK_BUDGET_MS;

/// The longest one request of a hook may take.
pub const HOOK_REQUEST_MS: u64 = 2_000;
/// The most of a hook document read from standard input (or of Codex's argument).
pub const HOOK_INPUT_BYTES_MAX: u64 = 1024 * 1024;
/// `hook.log` is moved to `hook.log.1` (replacing it) when it passes this.
pub const LOG_BYTES_MAX: u64 = 1024 * 1024;
/// A machine reports its runtimes again, on a prompt, once its last report is this old: half
/// of the service's freshness window, so a session that runs for days stays fresh.
pub const RUNTIMES_REFRESH_MS: i64 = RUNTIMES_FRESH_MS / 2;

/// Where a hook keeps its spool, what it saw and its log: the state folder.
pub use crate::machine::paths::state_dir;

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The hook's log: one line per thing it did or declined to do.
pub struct Log {
    path: PathBuf,
    prefix: String,
}

impl Log {
    pub fn new(dir: &Path, source: &str, id: Option<&str>) -> Log {
        Log { path: crate::machine::paths::log_file(dir), prefix: format!("{source} {}", id.unwrap_or("-")) }
    }

    /// Appends a line; a log that cannot be written is not the agent's problem.
    pub fn line(&self, text: &str) {
        if let Some(parent) = self.path.parent() {
            let _ = crate::private::dir(parent);
        }
        if self.path.metadata().is_ok_and(|m| m.len() > LOG_BYTES_MAX) {
            let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
        }
        let line = format!("{} {} {}\n", rfc3339(now_ms()), self.prefix, text.replace('\n', " "));
        if let Ok(mut f) = crate::private::open(&self.path, std::fs::OpenOptions::new().create(true).append(true)) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// One hook run: the session, its client, its files and its deadline.
pub struct Hook {
    pub id: String,
    pub client: Client,
    pub dir: PathBuf,
    pub log: Log,
    pub deadline: Instant,
    /// `PATH`, where runtimes are looked for.
    pub path_var: Option<String>,
}

/// What one delivery of the spool did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivered {
    pub sent: usize,
    pub dropped: usize,
    pub left: usize,
}

impl Hook {
    pub fn new(id: &str, url: &str, token: &str, dir: PathBuf, log: Log, budget: Duration) -> Hook {
        let client = Client::new(url, Some(token)).with_retry(Retry::none());
        let path_var = std::env::var("PATH").ok();
        Hook { id: id.to_string(), client, dir, log, deadline: Instant::now() + budget, path_var }
    }

    /// Does what `intent` asks for the event `event`, then delivers the spool.
    pub fn run(&self, event: &str, intent: Intent) -> std::io::Result<Delivered> {
        let spool = Spool::open(&self.dir, &self.id)?;
        let intent = match intent {
            Intent::Nothing(why) => {
                self.log.line(&format!("{event}: nothing to report: {why}"));
                return self.deliver(&spool);
            }
            Intent::ResumeIfWaiting => match seen::load(&self.dir, &self.id) {
                // The common case (every tool use): nothing to do, nothing to log, no request.
                Some(s) if s.status == Status::NeedsYou && !s.closed => {
                    Intent::Report { status: ReportStatus::Running, summary: None, usage: None, refresh: false }
                }
                _ => return Ok(Delivered { left: spool.entries()?.len(), ..Delivered::default() }),
            },
            other => other,
        };
        // What is owed goes first, so the service is caught up before this event is read.
        self.deliver(&spool)?;
        match intent {
            Intent::Runtimes => {
                // Read the hand-off first when nothing was seen, so that the time of this report
                // is kept and the first prompt does not report the runtimes again.
                let mut seen = seen::load(&self.dir, &self.id).or_else(|| self.refresh(None));
                self.spool_runtimes(&spool, event, &mut seen)?;
            }
            Intent::Report { status, summary, usage, refresh } => {
                let mut seen = seen::load(&self.dir, &self.id);
                if refresh || seen.is_none() {
                    seen = self.refresh(seen);
                    let stale = seen
                        .as_ref()
                        .is_none_or(|s| s.runtimes_reported_ms.is_none_or(|at| now_ms() - at > RUNTIMES_REFRESH_MS));
                    if refresh && stale {
                        self.spool_runtimes(&spool, event, &mut seen)?;
                    }
                }
                self.spool_report(&spool, event, seen, status, summary, usage)?;
            }
            Intent::ResumeIfWaiting | Intent::Nothing(_) => {}
        }
        self.deliver(&spool)
    }

    /// A permission prompt: spools and delivers a needs-you with the permission question, within
    /// the budget. Answers the question's id and the version that asked it, when the service
    /// holds it now; `None` (logged) when the report is not delivered (it stays spooled) or
    /// not for a turn seen open.
    pub fn ask(&self, event: &str, prompt: &Prompt) -> std::io::Result<Option<(String, u64)>> {
        let spool = Spool::open(&self.dir, &self.id)?;
        self.deliver(&spool)?;
        let seen = seen::load(&self.dir, &self.id).or_else(|| self.refresh(None));
        let question = prompt.question();
        let Some((key, turn)) =
            self.spool_asking(&spool, event, seen, prompt.text().to_string(), Some(question.clone()))?
        else {
            return Ok(None);
        };
        // The id only from the service's answer to this very report, and only when every field
        // of its question is the one asked.
        let (_, answers) = self.deliver_keeping(&spool)?;
        let asked = answers
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, answer)| crate::ask::own_question(&question, turn, answer));
        if asked.is_none() {
            self.log.line(&format!("{event}: the question is not on the service yet; no answer is waited for"));
        }
        Ok(asked)
    }

    /// After the owner's answer: what the hooks saw is the record that carried it (the turn runs
    /// again), so that the tool's `PostToolUse` reports nothing.
    pub fn answered(&self, record: &Handoff) {
        let before = seen::load(&self.dir, &self.id);
        self.store_seen(&Seen::of(record, before.as_ref()));
    }

    /// Spools a needs-you with `question`; answers its spool key and turn, `None` (logged) when
    /// no turn is seen open.
    fn spool_asking(
        &self,
        spool: &Spool,
        event: &str,
        seen: Option<Seen>,
        text: String,
        question: Option<QuestionInput>,
    ) -> std::io::Result<Option<(String, u64)>> {
        let turn = match Seen::turn_for_report(seen.as_ref()) {
            Ok(turn) => turn,
            Err(why) => {
                self.log.line(&format!("{event}: not asking: {why}"));
                return Ok(None);
            }
        };
        let report = ReportInput {
            summary: Some(clip_summary(&text)),
            question,
            ..ReportInput::of(turn, ReportStatus::NeedsYou)
        };
        let key = self.append(spool, event, Send::Report(report))?;
        if let Some(seen) = seen {
            self.store_seen(&seen.reported(ReportStatus::NeedsYou));
        }
        Ok(Some((key, turn)))
    }

    /// The current turn as the service says, or what was seen before when it cannot be asked.
    fn refresh(&self, before: Option<Seen>) -> Option<Seen> {
        match self.client().get(&self.id) {
            Ok(reply) => {
                let seen = Seen::of(&reply.value, before.as_ref());
                self.store_seen(&seen);
                Some(seen)
            }
            Err(e) => {
                self.log.line(&format!("could not read the hand-off, using what was seen: {e}"));
                before
            }
        }
    }

    fn spool_report(
        &self,
        spool: &Spool,
        event: &str,
        seen: Option<Seen>,
        status: ReportStatus,
        summary: Option<String>,
        usage: Option<Usage>,
    ) -> std::io::Result<()> {
        let turn = match Seen::turn_for_report(seen.as_ref()) {
            Ok(turn) => turn,
            Err(why) => {
                self.log.line(&format!("{event}: not reporting {}: {why}", status_name(status)));
                return Ok(());
            }
        };
        let report = ReportInput {
            turn,
            status,
            summary,
            unmet: None,
            usage,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        };
        self.append(spool, event, Send::Report(report))?;
        if let Some(seen) = seen {
            self.store_seen(&seen.reported(status));
        }
        Ok(())
    }

    /// Spools the runtimes found on this machine, and notes when in `seen`.
    fn spool_runtimes(&self, spool: &Spool, event: &str, seen: &mut Option<Seen>) -> std::io::Result<()> {
        let runtimes = detect::detect(self.path_var.as_deref());
        // Spooled, it may arrive late: it counts from when it was looked for.
        let input = RuntimesInput { runtimes, checked_at: Some(rfc3339(now_ms())) };
        self.append(spool, event, Send::Runtimes(input))?;
        if let Some(s) = seen.as_mut() {
            s.runtimes_reported_ms = Some(now_ms());
            self.store_seen(s);
        }
        Ok(())
    }

    /// Spools `send`; answers its key.
    fn append(&self, spool: &Spool, event: &str, send: Send) -> std::io::Result<String> {
        let entry = Entry { key: new_idempotency_key(), at_ms: now_ms(), event: event.to_string(), send };
        for dropped in spool.append(&entry)? {
            self.log.line(&format!("spool full: dropped {} from {} unsent", describe(&dropped.send), dropped.event));
        }
        Ok(entry.key)
    }

    /// Sends the spool's entries in order until one cannot be delivered or the deadline comes.
    pub fn deliver(&self, spool: &Spool) -> std::io::Result<Delivered> {
        self.deliver_keeping(spool).map(|(done, _)| done)
    }

    /// [`Hook::deliver`], answering also the record the service answered to each entry it
    /// took, by the entry's key.
    fn deliver_keeping(&self, spool: &Spool) -> std::io::Result<(Delivered, Vec<(String, Handoff)>)> {
        let mut done = Delivered::default();
        let mut last: Option<Handoff> = None;
        let mut answers: Vec<(String, Handoff)> = Vec::new();
        let entries = spool.entries()?;
        for (i, entry) in entries.iter().enumerate() {
            let what = format!("{} from {}", describe(&entry.send), entry.event);
            if now_ms() - entry.at_ms > SPOOL_ENTRY_AGE_MS_MAX {
                self.log.line(&format!("dropped {what}: spooled more than 24 h ago"));
                spool.remove(&entry.key)?;
                done.dropped += 1;
                continue;
            }
            if Instant::now() >= self.deadline {
                done.left = entries.len() - i;
                self.log.line(&format!("out of time: {} left in the spool", done.left));
                break;
            }
            let client = self.client().with_idempotency_key(Some(&entry.key));
            let result = match &entry.send {
                Send::Report(r) => client.report(&self.id, r),
                Send::Runtimes(r) => client.put_runtimes(&self.id, r),
            };
            match result {
                Ok(reply) => {
                    self.log.line(&format!("delivered {what} (version {})", reply.value.version));
                    spool.remove(&entry.key)?;
                    done.sent += 1;
                    answers.push((entry.key.clone(), reply.value.clone()));
                    last = Some(reply.value);
                }
                Err(Error::Refused(r)) if is_final(r.status) => {
                    self.log.line(&format!("dropped {what}: {} {}: {}", r.status, r.code, r.message));
                    spool.remove(&entry.key)?;
                    done.dropped += 1;
                    last = r.handoff.clone().or(last);
                }
                Err(e) => {
                    done.left = entries.len() - i;
                    self.log.line(&format!("kept {what} and {} after it for later: {e}", done.left - 1));
                    break;
                }
            }
        }
        if let (Some(record), 0) = (&last, done.left) {
            let before = seen::load(&self.dir, &self.id);
            self.store_seen(&Seen::of(record, before.as_ref()));
        }
        Ok((done, answers))
    }

    /// The client, with requests cut to what is left of the budget.
    fn client(&self) -> Client {
        let left = self.deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        self.client.clone().with_request_timeout(left.min(Duration::from_millis(HOOK_REQUEST_MS)))
    }

    fn store_seen(&self, seen: &Seen) {
        if let Err(e) = seen::store(&self.dir, &self.id, seen) {
            self.log.line(&format!("could not keep what was seen: {e}"));
        }
    }
}

/// A refusal that will be refused again, however often it is sent: bad input, no such
/// hand-off, a turn that has ended or moved on. Auth refusals, 429 and 5xx may pass later.
fn is_final(status: u16) -> bool {
    matches!(status, 400 | 404 | 409 | 413 | 422)
}

fn status_name(s: ReportStatus) -> &'static str {
    Status::from(s).as_str()
}

fn describe(send: &Send) -> String {
    match send {
        Send::Report(r) => format!("{} for turn {}", status_name(r.status), r.turn),
        Send::Runtimes(r) => {
            format!("runtimes ({})", r.runtimes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "))
        }
    }
}

/// How the hook commands start: the session from the environment, the state directory, the
/// log. `None` (logged) when the environment does not name a session.
pub fn session(source: &str, url: &str, token: Option<&str>, id: Option<&str>) -> Option<Hook> {
    let env = |k: &str| std::env::var(k).ok();
    let dir = state_dir(&env);
    let id = id.map(str::to_string).or_else(|| env(crate::machine::env::ENV_ID)).filter(|i| !i.is_empty());
    let log = Log::new(&dir, source, id.as_deref());
    let (Some(id), Some(token)) = (id, token.filter(|t| !t.is_empty())) else {
        log.line("not reporting: HANDOFF_ID and HANDOFF_TOKEN (or HANDOFF_TOKEN_FILE) name the session and its machine token");
        return None;
    };
    // The work stops sending a little before the budget, so that it ends on its own.
    let budget = Duration::from_millis(HOOK_BUDGET_MS - HOOK_BUDGET_MS / 10);
    let hook = Hook::new(&id, url, token, dir, log, budget);
    if let Some(why) = hook.client.refused() {
        hook.log.line(&format!("sending nothing: {why}"));
    }
    Some(hook)
}

/// Runs `work` and returns when it ends or when [`HOOK_BUDGET_MS`] has passed, whichever
/// comes first; the caller then exits 0.
pub fn within_budget(work: impl FnOnce() + std::marker::Send + 'static) {
    within_budget_then(move || {
        work();
        None::<()>
    });
}

/// [`within_budget`], answering what `work` answered when it ended in time.
pub fn within_budget_then<T: std::marker::Send + 'static>(
    work: impl FnOnce() -> Option<T> + std::marker::Send + 'static,
) -> Option<T> {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    finished.recv_timeout(Duration::from_millis(HOOK_BUDGET_MS)).ok().flatten()
}

/// A permission prompt asked of the owner: the hook run that asked, the question and the
/// version that asked it.
pub struct Asked {
    hook: Hook,
    prompt: Prompt,
    question: String,
    version: u64,
    /// When the hook started: the wait for the answer counts from then.
    started: Instant,
}

/// The harness's `PermissionRequest`: asks the owner within the budget (the report spooled as
/// every report is), then waits for the answer until `HANDOFF_ANSWER_WAIT_S` after the hook
/// started. Answers the decision document to print, or `None`: nothing to print, the harness
/// asks at its terminal.
fn permission(
    source: &'static str,
    url: String,
    token: Option<String>,
    event: String,
    prompt: Prompt,
) -> Option<String> {
    let started = Instant::now();
    let asked = within_budget_then(move || {
        let hook = session(source, &url, token.as_deref(), None)?;
        match hook.ask(&event, &prompt) {
            Ok(Some((question, version))) => Some(Asked { hook, prompt, question, version, started }),
            Ok(None) => None,
            Err(e) => {
                hook.log.line(&format!("{event}: the spool could not be used: {e}"));
                None
            }
        }
    })?;
    let wait = Duration::from_secs(crate::ask::answer_wait_s(&|k| std::env::var(k).ok()));
    let Asked { hook, prompt, question, version, started } = asked;
    let client = hook.client.clone();
    match crate::ask::wait_for_answer(&client, &hook.id, &question, version, started + wait) {
        crate::ask::Waited::Answered(answer, record) => {
            hook.answered(&record);
            hook.log.line(&format!("{question} answered {} (version {})", answer.option, record.version));
            Some(prompt.decision(&answer))
        }
        crate::ask::Waited::Withdrawn => {
            hook.log.line(&format!("{question} was withdrawn before an answer"));
            None
        }
        crate::ask::Waited::TimedOut if served(&|k| std::env::var(k).ok()) => {
            // Nobody is at a served harness's terminal: the question is withdrawn (the turn
            // back to running) and denied with a note the model reads.
            hook.log.line(&format!(
                "{question}: no answer within {} s in a served turn; denied, and the question withdrawn",
                wait.as_secs()
            ));
            if let Err(e) = hook.run("PermissionRequest", Intent::ResumeIfWaiting) {
                hook.log.line(&format!("PermissionRequest: the spool could not be used: {e}"));
            }
            Some(served_timeout_decision(wait.as_secs()))
        }
        crate::ask::Waited::TimedOut => {
            hook.log
                .line(&format!("{question}: no answer within {} s; the harness asks at its terminal", wait.as_secs()));
            None
        }
    }
}

/// What a hook prints for a question the owner's form cannot carry: in a served turn a deny
/// with the note the model reads (nobody is at the terminal); otherwise nothing, so the person
/// at the terminal answers it.
pub fn unaskable(why: &crate::ask::Unaskable, served: bool) -> Option<String> {
    served.then(|| crate::ask::unaskable_decision(why))
}

/// Set to `1` in a turn `handoff serve` runs.
pub use crate::machine::env::ENV_SERVED;

/// Whether this hook runs in a harness `handoff serve` started (nobody at its terminal).
pub fn served(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(ENV_SERVED).is_some_and(|v| v == "1")
}

/// In a served turn serve sends the one final report, with the reply: a hook's `done` is none.
pub fn served_done(intent: Intent, served: bool) -> Intent {
    match intent {
        Intent::Report { status: ReportStatus::Done, .. } if served => {
            Intent::Nothing("in a served turn, serve sends the final report".into())
        }
        other => other,
    }
}

/// The deny a served turn's unanswered question gets, with the note its model reads.
pub fn served_timeout_decision(wait_s: u64) -> String {
    let note = format!(
        "The owner did not answer within {wait_s} s and nobody is at this machine's terminal, so this was denied. \
         Go on without it, or ask again later."
    );
    crate::ask::deny_decision(note)
}

/// Prints a decision document, the only thing a hook ever prints.
fn print_decision(decision: Option<String>) {
    if let Some(document) = decision {
        println!("{document}");
    }
}

/// Reads at most [`HOOK_INPUT_BYTES_MAX`] of a hook document as JSON (`null` when it is not).
pub fn read_document(input: impl std::io::Read) -> serde_json::Value {
    use std::io::Read;
    let mut bytes = Vec::new();
    let _ = input.take(HOOK_INPUT_BYTES_MAX).read_to_end(&mut bytes);
    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
}

/// `handoff hook install`: adds the reporter hooks of `harness` to its settings file (the
/// project's with `project`), or removes them with `uninstall`, running this program; for
/// Codex also its `PermissionRequest` hook in `hooks.json` beside `config.toml`. The
/// `PermissionRequest` handlers' timeout is above `HANDOFF_ANSWER_WAIT_S` as set now. Answers
/// each file and whether it changed; a file left as it was is not written.
pub fn install_settings(
    harness: Runtime,
    project: Option<&Path>,
    uninstall: bool,
) -> Result<Vec<(PathBuf, bool)>, String> {
    let home = std::env::var("HOME").map(PathBuf::from).unwrap_or_default();
    let env = |k: &str| std::env::var(k).ok();
    let path = install::settings_path(harness, project, &home, &env);
    let program = std::env::current_exe().map_err(|e| format!("where is this program? {e}"))?;
    let program = program.to_string_lossy().to_string();
    let wait_s = crate::ask::answer_wait_s(&env);
    let settings = edit_file(&path, |before| match (harness, uninstall) {
        (Runtime::ClaudeCode, false) => install::install_claude_code_waiting(before, &program, wait_s),
        _ => install::apply(harness, before, &program, uninstall),
    })?;
    let mut changed = vec![(path.clone(), settings)];
    if harness == Runtime::Codex {
        let hooks = path.with_file_name("hooks.json");
        // Codex keys its trust by the hooks file's absolute path and our handler's place in it.
        let hooks_key_path =
            std::path::absolute(&hooks).unwrap_or_else(|_| hooks.clone()).to_string_lossy().into_owned();
        let trust_before = install::codex_trust(&hooks_key_path, &std::fs::read_to_string(&hooks).unwrap_or_default());
        let edited = edit_file(&hooks, |before| {
            if uninstall {
                install::uninstall_codex_hooks(before)
            } else {
                install::install_codex_hooks(before, &program, wait_s)
            }
        })?;
        changed.push((hooks.clone(), edited));
        // The user's own install is the person's trust in this one hook; a project's hooks are
        // left for the person to review in Codex.
        if project.is_none() {
            // Uninstalled, nothing of ours is left in hooks.json to trust.
            let trust_after =
                install::codex_trust(&hooks_key_path, &std::fs::read_to_string(&hooks).unwrap_or_default());
            // The trust recorded for our handler where it was, when it is no longer there.
            let stale = trust_before.filter(|(key, _)| trust_after.as_ref().map(|(k, _)| k) != Some(key));
            let trusted = edit_file(&path, |before| {
                let text = match &stale {
                    Some((key, _)) => install::untrust_codex_hook(before, key)?,
                    None => before.to_string(),
                };
                match &trust_after {
                    Some((key, hash)) => install::trust_codex_hook(&text, key, hash),
                    None => Ok(text),
                }
            })?;
            if let Some(first) = changed.first_mut() {
                first.1 |= trusted;
            }
        }
    }
    Ok(changed)
}

/// Reads `path` (an absent file is `""`), edits its text and writes it back when it changed;
/// answers whether it did.
pub(crate) fn edit_file(
    path: &Path,
    edit: impl FnOnce(&str) -> Result<String, install::InstallError>,
) -> Result<bool, String> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let after = edit(&before).map_err(|e| format!("{}: {e}", path.display()))?;
    if after == before {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(path, after).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// `handoff hook claude-code`: one Claude Code hook document on standard input.
pub fn claude_code(url: &str, token: Option<&str>) {
    let (url, token) = (url.to_string(), token.map(str::to_string));
    // Read within the budget too: a harness that never closes standard input holds nothing up.
    let Some(doc) = within_budget_then(|| Some(read_document(std::io::stdin().lock()))) else { return };
    match claude_code::prompt(&doc) {
        Some(Ok(prompt)) => {
            return print_decision(permission("claude-code", url, token, "PermissionRequest".into(), prompt))
        }
        Some(Err(why)) => {
            let served = served(&|k| std::env::var(k).ok());
            if let Some(hook) = session("claude-code", &url, token.as_deref(), None) {
                let then = if served {
                    "denied with a note, nobody being at the terminal"
                } else {
                    "answered at the terminal"
                };
                hook.log.line(&format!("PermissionRequest: not asking the owner, {}: {then}", why.reason()));
            }
            return print_decision(unaskable(&why, served));
        }
        None => {}
    }
    within_budget(move || {
        let Some(hook) = session("claude-code", &url, token.as_deref(), None) else { return };
        let event = doc["hook_event_name"].as_str().unwrap_or("(no event)").to_string();
        let window = std::env::var(crate::machine::env::ENV_CONTEXT_WINDOW).ok().and_then(|w| w.parse().ok());
        let intent = claude_code::intent(&doc, &|p| transcript::read(p).ok(), window);
        let intent = served_done(intent, served(&|k| std::env::var(k).ok()));
        if let Err(e) = hook.run(&event, intent) {
            hook.log.line(&format!("{event}: the spool could not be used: {e}"));
        }
    });
}

/// `handoff hook codex JSON`: Codex's `notify` argument; without one, a Codex hook document
/// on standard input (its `PermissionRequest`).
pub fn codex(url: &str, token: Option<&str>, argument: Option<String>) {
    let (url, token) = (url.to_string(), token.map(str::to_string));
    if argument.is_none() {
        let Some(doc) = within_budget_then(|| Some(read_document(std::io::stdin().lock()))) else { return };
        if let Some(text) = codex::permission_text(&doc) {
            let input = permission_input(&doc["tool_input"]);
            return print_decision(permission(
                "codex",
                url,
                token,
                "PermissionRequest".into(),
                Prompt::Permission { text, input },
            ));
        }
        let event = doc["hook_event_name"].as_str().unwrap_or("(no event)").to_string();
        if let Some(hook) = session("codex", &url, token.as_deref(), None) {
            hook.log.line(&format!("{event}: nothing to report"));
        }
        return;
    }
    within_budget(move || {
        let Some(hook) = session("codex", &url, token.as_deref(), None) else { return };
        let doc = read_document(argument.unwrap_or_default().as_bytes());
        let event = doc["type"].as_str().unwrap_or("(no type)").to_string();
        let intent = served_done(codex::intent(&doc), served(&|k| std::env::var(k).ok()));
        if let Err(e) = hook.run(&event, intent) {
            hook.log.line(&format!("{event}: the spool could not be used: {e}"));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_the_owners_form_cannot_carry_is_denied_with_a_note_in_a_served_turn_and_left_to_the_terminal_otherwise(
    ) {
        let why = crate::ask::Unaskable::Several(3);
        assert_eq!(unaskable(&why, false), None, "the person at the terminal answers it");
        let served: serde_json::Value = serde_json::from_str(&unaskable(&why, true).expect("a decision")).unwrap();
        let decision = &served["hookSpecificOutput"]["decision"];
        assert_eq!(
            (decision["behavior"].as_str(), decision["message"].as_str()),
            (Some("deny"), Some(why.note().as_str()))
        );
    }

    #[test]
    fn in_a_served_turn_the_stop_hook_sends_no_done_of_its_own_and_anything_else_as_before() {
        let done =
            Intent::Report { status: ReportStatus::Done, summary: Some("x".into()), usage: None, refresh: false };
        assert!(matches!(served_done(done.clone(), true), Intent::Nothing(_)), "serve sends the final report");
        assert_eq!(served_done(done.clone(), false), done, "at a terminal the hook reports done");
        let failed = Intent::Report { status: ReportStatus::Failed, summary: None, usage: None, refresh: false };
        assert_eq!(served_done(failed.clone(), true), failed, "a usage limit is still the hook's to report");
    }

    #[test]
    fn only_refusals_that_cannot_pass_later_drop_a_spooled_change() {
        for dropped in [400, 404, 409, 413, 422] {
            assert!(is_final(dropped), "{dropped}");
        }
        for kept in [401, 403, 429, 500, 502, 503] {
            assert!(!is_final(kept), "{kept}");
        }
    }

    #[test]
    fn the_state_directory_is_the_setting_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(state_dir(&env(&[("HANDOFF_STATE_DIR", "/s"), ("HOME", "/h")])), PathBuf::from("/s"));
        assert_eq!(state_dir(&env(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")])), PathBuf::from("/x/handoff"));
        assert_eq!(state_dir(&env(&[("HOME", "/h")])), PathBuf::from("/h/.local/state/handoff"));
    }
}
