//! The owner's commands: a hand-off made, read, steered (its turns, work and policy), answered
//! and ended.

use super::shared::{say_block, Failure, Key, Out, Prompt};
use crate::client::{AnswerInput, Client, PackageRequest, Policy, Reply, WorkInput};
use crate::output;
use handoff_core::turn::State;
use std::io::{IsTerminal, Write};

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    pub session: String,
    #[arg(long)]
    pub machine: String,
    #[arg(long)]
    pub size: String,
    #[command(flatten)]
    pub prompt: Prompt,
    /// The workspace on the machine turn 1 runs in.
    #[arg(long)]
    pub workspace: Option<String>,
    /// The runtime turn 1 runs on (claude-code, codex).
    #[arg(long)]
    pub runtime: Option<String>,
    /// The model turn 1 runs with.
    #[arg(long)]
    pub model: Option<String>,
    /// The permission mode asked for turn 1.
    #[arg(long = "permission-mode")]
    pub requested_permission_mode: Option<String>,
    #[command(flatten)]
    pub key: Key,
}

impl CreateArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let body = handoff_api::input::CreateInput {
            prompt: self.prompt.words()?,
            session: self.session,
            machine: self.machine,
            size: self.size,
            workspace: self.workspace,
            runtime: self.runtime,
            model: self.model,
            requested_permission_mode: self.requested_permission_mode,
        };
        let reply = self.key.on(client).create_with(&body)?;
        out.emit(&reply, output::created_lines(&reply.value));
        Ok(())
    }
}

/// `handoff machine-token ID`: a fresh machine token for the hand-off, which ends the ones
/// before it; printed bare on stdout.
#[derive(clap::Args, Debug)]
pub struct MachineTokenArgs {
    pub id: String,
}

impl MachineTokenArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = client.machine_token(&self.id)?;
        out.emit(&reply, output::created_lines(&reply.value).into_iter().skip(1));
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[arg(long, value_parser = super::shared::parse_serde::<State>)]
    pub state: Option<State>,
}

impl ListArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = client.list_all(self.state)?;
        if reply.value.is_empty() && !out.json {
            eprintln!("no hand-offs");
        }
        out.emit(&reply, reply.value.iter().flat_map(output::row_lines));
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    pub id: String,
    /// Print the question's whole input (what an Allow approves), nothing else.
    #[arg(long)]
    pub question: bool,
}

impl ShowArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = client.get(&self.id)?;
        if !self.question {
            out.emit(&reply, output::show_lines(&reply.value));
            return Ok(());
        }
        match output::question_whole(&reply.value) {
            Some(whole) if !out.json => say_block(&whole),
            Some(_) => out.emit(&reply, []),
            None => return Err(Failure::Usage(format!("show --question: {} has no question", self.id))),
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct TurnArgs {
    pub id: String,
    #[arg(long)]
    pub after: Option<u64>,
    /// Hand the turn to this runtime, compiling its package in the same write.
    #[arg(long, value_name = "RUNTIME", requires_all = ["objective", "purpose"])]
    pub to: Option<String>,
    #[arg(long, requires = "to")]
    pub objective: Option<String>,
    #[arg(long, requires = "to")]
    pub purpose: Option<String>,
    #[arg(long, requires = "to")]
    pub note: Option<String>,
    #[command(flatten)]
    pub prompt: Prompt,
    #[command(flatten)]
    pub key: Key,
}

impl TurnArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let words = self.prompt.words()?;
        let after = match self.after {
            Some(n) => n,
            None => client.get(&self.id)?.value.turn,
        };
        let (objective, purpose, note) = (self.objective, self.purpose, self.note);
        let handoff = self.to.map(|runtime| PackageRequest {
            runtime,
            objective: objective.unwrap_or_default(),
            purpose: purpose.unwrap_or_default(),
            note,
            model: None,
        });
        let reply = self.key.on(client).open_turn_saying(&self.id, after, words.as_deref(), handoff.as_ref())?;
        out.emit(&reply, [output::opened_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct CancelArgs {
    pub id: String,
    #[arg(long)]
    pub turn: Option<u64>,
    #[command(flatten)]
    pub key: Key,
}

impl CancelArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = self.key.on(client).cancel(&self.id, self.turn)?;
        out.emit(&reply, [output::cancelled_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct SteerArgs {
    pub id: String,
    /// The running turn the words are for (the current one unless given).
    #[arg(long)]
    pub turn: Option<u64>,
    #[command(flatten)]
    pub prompt: Prompt,
    #[command(flatten)]
    pub key: Key,
}

impl SteerArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let Some(words) = self.prompt.words()? else {
            return Err(Failure::Usage("steer: give the words with -m TEXT or --prompt-file PATH".into()));
        };
        let turn = match self.turn {
            Some(n) => n,
            None => client.get(&self.id)?.value.turn,
        };
        let reply = self.key.on(client).steer(&self.id, turn, &words)?;
        out.emit(&reply, [output::steered_line(&reply.value)]);
        Ok(())
    }
}

/// The hand-off a command ends (`close`, `erase`).
#[derive(clap::Args, Debug)]
pub struct EndArgs {
    pub id: String,
    #[command(flatten)]
    pub key: Key,
}

impl EndArgs {
    pub fn close(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = self.key.on(client).close(&self.id)?;
        out.emit(&reply, [output::closed_line(&reply.value)]);
        Ok(())
    }

    pub fn erase(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let id = self.id;
        match self.key.on(client).erase(&id) {
            Ok(reply) => out.emit(&reply, [format!("erased {id}")]),
            // The service answers "not there" and "not yours" alike, so a retried erase whose
            // first answer was lost ends here too: nothing is left to erase either way.
            Err(e) if e.code().map(crate::code::ErrorCode::as_str) == Some("handoff.not_found") => {
                let reply = Reply {
                    status: 404,
                    body: e.refusal().map_or(serde_json::Value::Null, |r| r.body.clone()),
                    value: (),
                };
                out.emit(&reply, [format!("nothing to erase: {id} is not there (erased already, or not yours)")]);
            }
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct TurnsArgs {
    pub id: String,
}

impl TurnsArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let reply = client.turns(&self.id)?;
        out.emit(&reply, reply.value.iter().flat_map(output::lineage_lines));
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct WorkArgs {
    pub id: String,
    #[arg(long)]
    pub title: String,
    #[arg(long)]
    pub goal: String,
    #[arg(long)]
    pub task_type: Option<String>,
    #[arg(long)]
    pub priority: Option<String>,
    /// A constraint (repeatable).
    #[arg(long = "constraint", value_name = "TEXT")]
    pub constraints: Vec<String>,
    /// An acceptance criterion (repeatable; indexed from 0 in the order given).
    #[arg(long = "criterion", value_name = "TEXT")]
    pub criteria: Vec<String>,
    #[command(flatten)]
    pub key: Key,
}

impl WorkArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let work = WorkInput {
            title: self.title,
            goal: self.goal,
            task_type: self.task_type,
            priority: self.priority,
            constraints: self.constraints,
            acceptance_criteria: self.criteria,
        };
        let reply = self.key.on(client).put_work(&self.id, &work)?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct PolicyArgs {
    pub id: String,
    /// A runtime you can hand off to (repeatable).
    #[arg(long = "runtime", value_name = "RUNTIME", required = true)]
    pub runtimes: Vec<String>,
    /// Suggest a hand-off when a report's context use reaches this percent (1-99).
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub context_threshold_pct: u8,
    /// Suggest a hand-off when a report's remaining quota is at or below this.
    #[arg(long, value_name = "N")]
    pub quota_threshold: Option<u64>,
    #[command(flatten)]
    pub key: Key,
}

impl PolicyArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let policy = Policy {
            runtimes: self.runtimes,
            context_threshold_pct: self.context_threshold_pct,
            quota_threshold: self.quota_threshold,
        };
        let reply = self.key.on(client).put_policy(&self.id, &policy)?;
        out.emit(&reply, [output::item_line(&reply.value)]);
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct AnswerArgs {
    pub id: String,
    pub option: String,
    /// A note for the agent (a deny's reason).
    #[arg(long)]
    pub note: Option<String>,
    /// The question you saw (`q_…`); the open one unless given.
    #[arg(long, value_name = "Q")]
    pub question: Option<String>,
    #[command(flatten)]
    pub key: Key,
}

impl AnswerArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let question = match self.question {
            Some(q) => q,
            None => confirm_answer(client, &self.id, &self.option)?,
        };
        let reply =
            self.key.on(client).answer(&self.id, &AnswerInput { question, option: self.option, note: self.note })?;
        out.emit(&reply, [output::answered_line(&reply.value)]);
        Ok(())
    }
}

/// `answer` without `--question`: on a terminal, the open question whole and a yes to answer
/// exactly it; with no terminal, a refusal naming the flag (the question open when the
/// answer arrives may not be the one the person read).
fn confirm_answer(client: &Client, id: &str, option: &str) -> Result<String, Failure> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Failure::Usage(output::answer_needs_question(id)));
    }
    let record = client.get(id)?.value;
    // No question open: the service answers question.none (or that it was answered).
    let Some(q) = record.question.clone().filter(|q| q.is_open()) else { return Ok(String::new()) };
    let mut lines = output::confirm_answer_lines(&q, option);
    let ask = lines.pop().unwrap_or_default();
    for line in lines {
        eprintln!("{}", output::escape(&line, false));
    }
    eprint!("{}", output::escape(&ask, false));
    let _ = std::io::stderr().flush();
    let mut reply = String::new();
    std::io::stdin().read_line(&mut reply).map_err(|e| Failure::Usage(format!("answer: {e}")))?;
    if !output::is_yes(&reply) {
        return Err(Failure::Usage(format!("answer: not confirmed; {} is not answered", q.id)));
    }
    Ok(q.id)
}
