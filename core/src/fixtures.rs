//! What the core's unit tests build again and again: a machine's report, named field by field,
//! the permission question a harness asks, and a hand-off's request.

use crate::handoff::Change;
use crate::package::PackageRequest;
use crate::question::{Choice, Kind, QuestionInput};
use crate::suggestion::Usage;
use crate::timeline::SyncMode;
use crate::turn::{Command, ReportStatus};

/// A report on `turn` saying only `status`; each method adds one field.
pub fn report(turn: u64, status: ReportStatus) -> Report {
    let (summary, question, runtime, permission_mode, reply, sync_mode) = (None, None, None, None, None, None);
    Report { turn, status, summary, question, runtime, permission_mode, reply, sync_mode, unmet: None, usage: None }
}

/// A permission question offering Allow and Deny, with nothing to show beside its text.
pub fn permission(text: &str) -> QuestionInput {
    let options = ["allow", "deny"].map(|id| Choice { id: id.into(), label: capitalised(id) }).to_vec();
    QuestionInput { kind: Kind::Permission, text: text.into(), input: None, options }
}

fn capitalised(word: &str) -> String {
    let mut letters = word.chars();
    letters.next().map(|first| first.to_uppercase().chain(letters).collect()).unwrap_or_default()
}

/// A turn command with nothing beside it.
pub fn turn(command: Command) -> Change {
    Change::Turn { command, unmet: None, usage: None, package: None }
}

pub struct Report {
    turn: u64,
    status: ReportStatus,
    summary: Option<String>,
    question: Option<QuestionInput>,
    runtime: Option<String>,
    permission_mode: Option<String>,
    reply: Option<String>,
    sync_mode: Option<SyncMode>,
    unmet: Option<Vec<u32>>,
    usage: Option<Usage>,
}

impl Report {
    pub fn summary(self, text: Option<&str>) -> Self {
        Report { summary: text.map(str::to_string), ..self }
    }

    pub fn says(self, text: &str) -> Self {
        self.summary(Some(text))
    }

    pub fn question(self, question: QuestionInput) -> Self {
        Report { question: Some(question), ..self }
    }

    pub fn runtime(self, name: &str) -> Self {
        Report { runtime: Some(name.into()), ..self }
    }

    pub fn permission_mode(self, mode: &str) -> Self {
        Report { permission_mode: Some(mode.into()), ..self }
    }

    pub fn reply(self, text: Option<&str>) -> Self {
        Report { reply: text.map(str::to_string), ..self }
    }

    pub fn sync_mode(self, mode: SyncMode) -> Self {
        Report { sync_mode: Some(mode), ..self }
    }

    pub fn unmet(self, criteria: Vec<u32>) -> Self {
        Report { unmet: Some(criteria), ..self }
    }

    pub fn usage(self, usage: Usage) -> Self {
        Report { usage: Some(usage), ..self }
    }

    pub fn command(self) -> Command {
        let Report { turn, status, summary, question, runtime, permission_mode, reply, sync_mode, .. } = self;
        Command::Report { turn, status, summary, question, runtime, permission_mode, reply, sync_mode }
    }

    pub fn change(mut self) -> Change {
        let (unmet, usage) = (self.unmet.take(), self.usage.take());
        Change::Turn { command: self.command(), unmet, usage, package: None }
    }
}

/// A hand-off to `runtime` with objective `o` and purpose `p`, and `model` if one is chosen.
pub fn hand_off(runtime: &str, model: Option<&str>) -> PackageRequest {
    PackageRequest {
        objective: "o".into(),
        purpose: "p".into(),
        runtime: runtime.into(),
        note: None,
        model: model.map(str::to_string),
    }
}
