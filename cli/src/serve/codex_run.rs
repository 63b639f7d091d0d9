//! A served Codex turn: [`super::codex`]'s app-server driven on a thread of its own, its
//! approvals and questions asked of the owner, its outcome reported by serve (app-server runs
//! no hooks, so nothing else would report it).

use super::codex::{self, AppServer, Approval, ApprovalKind, Decision, Handler, Question, TurnOutcome};
use crate::ask::{self, Prompt, Waited};
use crate::client::{Client, ReportInput};
use handoff_core::turn::ReportStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Codex's approval policy in a served turn: `untrusted`, where every command that is not
/// known to be safe is asked of the owner, as Claude Code's `default` mode asks.
pub const APPROVAL_POLICY: &str = "untrusted";

/// What the turn's thread tells the main loop.
pub enum Note {
    /// The Codex thread the turn runs in (its harness session id).
    Thread(String),
    /// The turn ended, as said (`None`: interrupted on a cancel).
    Ended(Option<Result<String, String>>),
}

/// A Codex turn running on its thread.
pub struct Run {
    pub turn: u64,
    pub started: Instant,
    cancel: Arc<AtomicBool>,
    notes: mpsc::Receiver<Note>,
    ended: Option<String>,
    /// A thread id given and not yet taken by [`Run::thread_id`].
    given: Option<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Everything a turn's thread needs.
pub struct Start {
    pub config: codex::Config,
    pub resume: Option<String>,
    pub prompt: String,
    pub client: Client,
    pub id: String,
    pub turn: u64,
    pub wait_s: u64,
}

impl Run {
    pub fn spawn(start: Start) -> Run {
        let cancel = Arc::new(AtomicBool::new(false));
        let (tx, notes) = mpsc::channel();
        let (flag, turn) = (cancel.clone(), start.turn);
        let thread = std::thread::spawn(move || {
            let ended = run(&start, &flag, &tx);
            let _ = tx.send(Note::Ended(ended));
        });
        Run { turn, started: Instant::now(), cancel, notes, ended: None, given: None, thread: Some(thread) }
    }

    fn receive(&mut self) {
        while let Ok(note) = self.notes.try_recv() {
            match note {
                Note::Thread(t) => self.given = Some(t),
                Note::Ended(e) => self.ended = Some(describe(e)),
            }
        }
    }

    /// The thread id Codex gave, once (taken by the first call after it came).
    pub fn thread_id(&mut self) -> Option<String> {
        self.receive();
        self.given.take()
    }

    /// How the turn ended, once it did.
    pub fn exited(&mut self) -> Option<String> {
        self.receive();
        self.ended.clone()
    }

    /// Interrupts the turn (the driver stops its app-server), and waits for its thread.
    pub fn stop(&mut self) -> Option<String> {
        self.cancel.store(true, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Some(e) = self.exited() {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                return Some(e);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
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
fn run(s: &Start, cancel: &AtomicBool, tx: &mpsc::Sender<Note>) -> Option<Result<String, String>> {
    let outcome = (|| -> Result<TurnOutcome, codex::DriverError> {
        let mut server = AppServer::start(&s.config)?;
        let thread = match &s.resume {
            Some(id) => server.resume_thread(id)?,
            None => server.start_thread()?,
        };
        let _ = tx.send(Note::Thread(thread.clone()));
        let mut asker = Asker { s, cancel };
        let outcome = server.run_turn(&thread, &s.prompt, cancel, &mut asker);
        server.stop();
        outcome
    })();
    let (status, summary) = match outcome {
        Ok(TurnOutcome::Interrupted) => return None,
        Ok(TurnOutcome::Completed { message }) => (
            ReportStatus::Done,
            if message.trim().is_empty() { "codex ended its turn without a message".to_string() } else { message },
        ),
        Ok(TurnOutcome::Failed { reason }) => (ReportStatus::Failed, format!("codex's turn failed: {reason}")),
        Err(e) => (ReportStatus::Failed, e.to_string()),
    };
    if cancel.load(Ordering::SeqCst) {
        return None;
    }
    let report = ReportInput {
        turn: s.turn,
        status,
        summary: Some(crate::hook::clip_summary(&summary)),
        unmet: None,
        usage: None,
        question: None,
        runtime: None,
        permission_mode: None,
        reply: None,
        sync_mode: None,
    };
    // A turn the model ended through the MCP server's `report` refuses this one: that stands.
    let _ = s.client.report(&s.id, &report);
    Some(if status == ReportStatus::Done { Ok(summary) } else { Err(summary) })
}

/// Asks the owner what app-server asks, and waits for the answer, a withdrawal (a cancel) or
/// the served wait.
struct Asker<'a> {
    s: &'a Start,
    cancel: &'a AtomicBool,
}

impl Asker<'_> {
    /// The owner's answer to `prompt`: the option chosen and the note, or `None` with why.
    fn ask(&self, prompt: &Prompt) -> Result<(String, Option<String>), String> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err("the owner cancelled the turn".into());
        }
        let question = prompt.question();
        let report = ReportInput {
            turn: self.s.turn,
            status: ReportStatus::NeedsYou,
            summary: None,
            unmet: None,
            usage: None,
            question: Some(question),
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        };
        let asked =
            self.s.client.report(&self.s.id, &report).map_err(|e| format!("the question could not be asked: {e}"))?;
        let Some(q) = asked.value.question.as_ref().filter(|q| q.is_open()) else {
            return Err("the question was not taken".into());
        };
        let deadline = Instant::now() + Duration::from_secs(self.s.wait_s);
        match ask::wait_for_answer(&self.s.client, &self.s.id, &q.id, asked.value.version, deadline) {
            Waited::Answered(answer, _) => {
                let running = ReportInput {
                    turn: self.s.turn,
                    status: ReportStatus::Running,
                    summary: None,
                    unmet: None,
                    usage: None,
                    question: None,
                    runtime: None,
                    permission_mode: None,
                    reply: None,
                    sync_mode: None,
                };
                let _ = self.s.client.report(&self.s.id, &running);
                Ok((answer.option, answer.note))
            }
            Waited::Withdrawn => Err("the question was withdrawn".into()),
            Waited::TimedOut => {
                let running = ReportInput {
                    turn: self.s.turn,
                    status: ReportStatus::Running,
                    summary: None,
                    unmet: None,
                    usage: None,
                    question: None,
                    runtime: None,
                    permission_mode: None,
                    reply: None,
                    sync_mode: None,
                };
                let _ = self.s.client.report(&self.s.id, &running);
                Err(format!("The owner did not answer within {} s and nobody is at this machine's terminal, so this was denied. Go on without it, or ask again later.", self.s.wait_s))
            }
        }
    }
}

impl Handler for Asker<'_> {
    fn approval(&mut self, approval: &Approval) -> Decision {
        let what = match approval.kind {
            ApprovalKind::Command => "Command",
            ApprovalKind::FileChange => "File change",
            ApprovalKind::Permissions => "Permissions",
        };
        let title = format!("{what}: {}", approval.text.lines().next().unwrap_or_default());
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
