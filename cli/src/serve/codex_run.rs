//! A served Codex turn: [`super::codex`]'s app-server driven on a thread of its own, its
//! approvals and questions asked of the owner, its items sent to the turn's timeline, its
//! outcome reported by serve (app-server runs no hooks, so nothing else would report it): a
//! failure from here, a done by serve's loop ([`Event::Finished`]), as for Claude Code.

use super::codex::{self, AppServer, Approval, Decision, Handler, Question, TurnOutcome};
use super::events::Shaper;
use super::harness::{Command, Emit, Event, Exit, Harness, Kept};
use super::sender::Timeline;
use crate::ask::{self, Prompt, Waited};
use crate::client::{Client, ReportInput};
use crate::machine::{group, Runtime};
use handoff_core::turn::ReportStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Codex's approval policy in a served turn: `untrusted`, where every command that is not
/// known to be safe is asked of the owner, as Claude Code's `default` mode asks.
pub const APPROVAL_POLICY: &str = "untrusted";

/// A Codex turn running on its thread.
pub struct Run {
    turn: u64,
    started: Instant,
    cancel: Arc<AtomicBool>,
    /// What became of the questions it asked, as serve's loop read them on the record.
    answers: mpsc::Sender<(String, Waited)>,
    /// The owner's steers, until the turn's thread sends them (`turn/steer`).
    kept: Kept,
    emit: Emit,
    exit: Exit,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Everything a turn's thread needs.
pub struct Start {
    pub config: codex::Config,
    /// The thread's model, as the record names it (the owner's choice), else Codex's default.
    pub model: Option<String>,
    pub resume: Option<String>,
    pub prompt: String,
    pub client: Client,
    pub id: String,
    pub turn: u64,
    pub wait_s: u64,
    /// What leaves the machine: the timeline's events and the reply.
    pub sync: handoff_core::timeline::SyncMode,
    /// Where the turn's items go, as events.
    pub timeline: Timeline,
}

/// How long a stop waits for the turn's thread: Codex's interrupt, then its group's stop.
const STOP_WAIT: Duration = Duration::from_millis(codex::INTERRUPT_GRACE_MS + group::STOP_GRACE_MS + 1_000);

impl Run {
    /// Starts the turn's thread; its thread id is told to `emit` as [`Event::Started`], its
    /// questions as [`Event::Asked`], its end as [`Event::Gone`].
    pub fn spawn(start: Start, emit: Emit) -> Run {
        let cancel = Arc::new(AtomicBool::new(false));
        let (answers, inbox) = mpsc::channel();
        let (flag, turn, exit, kept) = (cancel.clone(), start.turn, Exit::default(), Kept::new());
        let (seen, steers, told) = (exit.clone(), kept.clone(), emit.clone());
        let thread = std::thread::spawn(move || {
            let ended = run(&start, &flag, &told, &inbox, &steers);
            for (id, _) in steers.close() {
                let why = "the turn ended before codex could take it".to_string();
                told(start.turn, Event::Steered { id, delivered: Err(why) });
            }
            let how = describe(ended);
            seen.set(how.clone());
            told(start.turn, Event::Gone { how });
        });
        Run { turn, started: Instant::now(), cancel, answers, kept, emit, exit, thread: Some(thread) }
    }
}

impl Harness for Run {
    fn turn(&self) -> u64 {
        self.turn
    }

    fn runtime(&self) -> Runtime {
        Runtime::Codex
    }

    fn started(&self) -> Instant {
        self.started
    }

    /// The app-server's group is its own thread's to end.
    fn group(&self) -> Option<u32> {
        None
    }

    /// An answer goes to the question waiting for it; a stop interrupts the turn (the driver
    /// stops its app-server) and waits for its thread.
    fn send(&mut self, command: Command) -> Option<String> {
        match command {
            Command::Answer { question, waited } => {
                let _ = self.answers.send((question, waited));
                None
            }
            // Sent by the turn's thread as `turn/steer` on the active turn, once it can (not
            // while it waits on the owner's answer).
            Command::Steer { id, prompt } => {
                if !self.kept.keep(id.clone(), prompt) {
                    let why = "codex's turn had ended".to_string();
                    (self.emit)(self.turn, Event::Steered { id, delivered: Err(why) });
                }
                None
            }
            Command::Stop => {
                self.cancel.store(true, Ordering::SeqCst);
                let _ = self.answers.send((String::new(), Waited::Withdrawn));
                let how = self.exit.wait(STOP_WAIT)?;
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                Some(how)
            }
        }
    }
}

fn describe(ended: Option<Result<String, String>>) -> String {
    match ended {
        None => "interrupted".into(),
        Some(Ok(_)) => "exit 0".into(),
        Some(Err(why)) => format!("failed: {why}"),
    }
}

/// Runs the turn to its end and reports it: done with the agent's last message, or failed.
fn run(
    s: &Start,
    cancel: &AtomicBool,
    emit: &Emit,
    answers: &mpsc::Receiver<(String, Waited)>,
    kept: &Kept,
) -> Option<Result<String, String>> {
    let outcome = (|| -> Result<TurnOutcome, codex::DriverError> {
        let mut server = AppServer::start(&s.config)?;
        server.set_model(s.model.clone());
        let thread = match &s.resume {
            Some(id) => server.resume_thread(id)?,
            None => server.start_thread()?,
        };
        emit(s.turn, Event::Started { session: thread.clone() });
        let shaper = Shaper::new(s.sync);
        let mut asker = Asker { s, cancel, emit, answers, kept, shaper };
        let outcome = server.run_turn(&thread, &s.prompt, cancel, &mut asker);
        server.stop();
        outcome
    })();
    let summary = match outcome {
        Ok(TurnOutcome::Interrupted) => return None,
        // The turn's last agent message goes to serve's loop, which sends the one final report
        // (through the hooks' spool), the reply whole as the sync mode lets it.
        Ok(TurnOutcome::Completed { message }) => {
            if cancel.load(Ordering::SeqCst) {
                return None;
            }
            emit(s.turn, Event::Finished { answer: message.clone(), failed: false, usage: None });
            return Some(Ok(message));
        }
        Ok(TurnOutcome::Failed { reason }) => format!("codex's turn failed: {reason}"),
        Err(e) => e.to_string(),
    };
    if cancel.load(Ordering::SeqCst) {
        return None;
    }
    let report = ReportInput {
        summary: Some(crate::hook::clip_summary(&summary)),
        ..ReportInput::of(s.turn, ReportStatus::Failed)
    };
    // A turn the model ended through the MCP server's `report` refuses this one: that stands.
    let _ = s.client.report(&s.id, &report);
    Some(Err(summary))
}

/// Asks the owner what app-server asks, and waits for the answer, a withdrawal (a cancel) or
/// the served wait.
struct Asker<'a> {
    s: &'a Start,
    cancel: &'a AtomicBool,
    emit: &'a Emit,
    answers: &'a mpsc::Receiver<(String, Waited)>,
    kept: &'a Kept,
    shaper: Shaper,
}

impl Asker<'_> {
    /// The owner's answer to `prompt`: the option chosen and the note, or `None` with why.
    fn ask(&self, prompt: &Prompt) -> Result<(String, Option<String>), String> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err("the owner cancelled the turn".into());
        }
        let question = prompt.question();
        let report =
            ReportInput { question: Some(question.clone()), ..ReportInput::of(self.s.turn, ReportStatus::NeedsYou) };
        let asked =
            self.s.client.report(&self.s.id, &report).map_err(|e| format!("the question could not be asked: {e}"))?;
        let Some((id, version)) = ask::own_question(&question, self.s.turn, &asked.value) else {
            return Err("the question was not taken".into());
        };
        (self.emit)(self.s.turn, Event::Asked { question: id.clone(), version });
        match self.wait(&id) {
            Waited::Answered(answer, _) => {
                let running = ReportInput::of(self.s.turn, ReportStatus::Running);
                let _ = self.s.client.report(&self.s.id, &running);
                Ok((answer.option, answer.note))
            }
            Waited::Withdrawn => Err("the question was withdrawn".into()),
            Waited::TimedOut => {
                let running = ReportInput::of(self.s.turn, ReportStatus::Running);
                let _ = self.s.client.report(&self.s.id, &running);
                Err(format!("The owner did not answer within {} s and nobody is at this machine's terminal, so this was denied. Go on without it, or ask again later.", self.s.wait_s))
            }
        }
    }
}

impl Asker<'_> {
    /// What serve's loop says became of question `id`, within the served wait; an answer to
    /// an earlier question is passed over, and a stop withdraws.
    fn wait(&self, id: &str) -> Waited {
        let deadline = Instant::now() + Duration::from_secs(self.s.wait_s);
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                return Waited::Withdrawn;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok((question, waited)) if question == id => return waited,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => return Waited::TimedOut,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Waited::Withdrawn,
            }
        }
    }
}

impl Handler for Asker<'_> {
    fn item(&mut self, method: &str, item: &serde_json::Value) {
        self.s.timeline.extend(self.shaper.codex(method, item, crate::hook::now_ms()));
    }

    fn steers(&mut self) -> Vec<(String, String)> {
        self.kept.take()
    }

    fn steered(&mut self, id: &str, delivered: Result<(), String>) {
        (self.emit)(self.s.turn, Event::Steered { id: id.to_string(), delivered });
    }

    fn approval(&mut self, approval: &Approval) -> Decision {
        let title = approval.title();
        let prompt = Prompt::Permission {
            text: handoff_core::text::clip(&title, 200).to_string(),
            input: Some(approval.text.clone()),
        };
        match self.ask(&prompt) {
            Ok((option, _)) if option == "allow" => Decision::Allow,
            Ok((_, note)) => Decision::Deny { note },
            Err(why) => Decision::Deny { note: Some(why) },
        }
    }

    fn question(&mut self, question: &Question) -> codex::Answer {
        let labels: Vec<String> = question.options.iter().map(|(label, _)| label.clone()).collect();
        let prompt =
            Prompt::Choice { text: question.text.clone(), labels: labels.clone(), input: serde_json::Value::Null };
        match self.ask(&prompt) {
            Ok((option, _)) => match option.parse::<usize>().ok().and_then(|n| labels.get(n.wrapping_sub(1))) {
                Some(label) => codex::Answer::Chose(label.clone()),
                None => codex::Answer::Deny { note: "the owner's answer was not one of the options".into() },
            },
            Err(note) => codex::Answer::Deny { note },
        }
    }
}
