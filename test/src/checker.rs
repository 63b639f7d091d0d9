//! A linearisability checker for the history of one hand-off, with the contract's reference
//! model (`crate::model`) as its model, not the service's own turn machine: a bug in the
//! machine would otherwise be in the model too, and the checker could catch only faults of
//! the object around it.
//!
//! A history is every call made on one hand-off by concurrent clients: what was asked, what
//! was answered, and when (client-side times: `invoked_ns` before the request was sent,
//! `answered_ns` after its answer was read). It is linearisable when the calls can be put
//! in one order that (1) keeps real-time order (a call answered before another was invoked
//! comes first) and (2) gives, call by call, exactly the answers the model gives.
//!
//! The search is Wing & Gong's: pick any call that no pending call precedes, apply it to the
//! model, keep it if the model agrees with the answer, backtrack otherwise; with Lowe's
//! memoisation of (calls linearised, model state) pairs already explored, so that commuting
//! calls are not tried in every order. Histories are per hand-off: hand-offs share nothing,
//! so a set of hand-offs is linearisable exactly when each one's history is.
//!
//! What the model compares: the record's turn, state, status, summary and version (times
//! are the server's clock and are not part of the rules). A refusal must carry the code the
//! model gives and, when it carries the hand-off, the model's current record.
//!
//! Waits. A wait is a read that takes effect at one point inside its interval: the object
//! answers with the record as it is when the wait ends (at once, on a wake-up or at the
//! timeout). So the model treats it as a `Get` at its linearisation point, plus the wait's
//! own promise, which is a property of the record it returned: unless it ran its whole
//! timeout, the record must have `version > after` or be closed. The driver only asks with
//! `after` at most the version it has already seen, so "a version moved during the wait"
//! implies "version > after", and the promise is exactly checkable without a second point.
//! That a wait answered promptly (no missed wake-up) is a timing property, checked apart by
//! [`missed_wake_ups`].
//!
//! The calls are recorded in the service's own command type (the drivers send them), and read
//! into the model's terms here ([`model_command`], [`Snapshot::of`]): field for field, no rule.

use crate::model::{self, Handoff, Refusal};
use handoff_core::turn::{self, Command, Record, State};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// What the model compares of a record: the model's hand-off.
pub type Snapshot = Handoff;

// Reading the service's records and answers into the model's terms lives here, not in the
// model, which names nothing of the service.
impl Handoff {
    pub fn of(record: &Record) -> Handoff {
        let status = match record.status {
            turn::Status::Running => model::Status::Running,
            turn::Status::NeedsYou => model::Status::NeedsYou,
            turn::Status::Done => model::Status::Done,
            turn::Status::Failed => model::Status::Failed,
            turn::Status::Cancelled => model::Status::Cancelled,
        };
        Handoff {
            turn: record.turn,
            closed: record.state == State::Closed,
            status,
            summary: record.summary.clone(),
            version: record.version,
            steers: record.steers.len(),
        }
    }

    /// Reads an API record (`{"turn", "state", "status", "summary", "version", ...}`).
    pub fn from_json(v: &Value) -> Option<Handoff> {
        let closed = match v["state"].as_str()? {
            "open" => false,
            "closed" => true,
            _ => return None,
        };
        let summary = match &v["summary"] {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            _ => return None,
        };
        Some(Handoff {
            turn: v["turn"].as_u64()?,
            closed,
            status: model::Status::parse(v["status"].as_str()?)?,
            summary,
            version: v["version"].as_u64()?,
            steers: v.get("steers").and_then(Value::as_array).map_or(0, Vec::len),
        })
    }
}

/// A service command in the model's terms.
pub fn model_command(command: &Command) -> model::Command {
    match command {
        Command::OpenTurn { after, .. } => model::Command::OpenTurn { after: *after },
        Command::Report { turn: t, status, summary, .. } => {
            let status = match status {
                turn::ReportStatus::Running => model::ReportStatus::Running,
                turn::ReportStatus::NeedsYou => model::ReportStatus::NeedsYou,
                turn::ReportStatus::Done => model::ReportStatus::Done,
                turn::ReportStatus::Failed => model::ReportStatus::Failed,
            };
            model::Command::Report { turn: *t, status, summary: summary.clone() }
        }
        Command::Cancel { turn: t } => model::Command::Cancel { turn: *t },
        Command::Close => model::Command::Close,
        Command::Answer { .. } => unreachable!("the checker's histories ask no questions"),
        Command::Steer { turn: t, .. } => model::Command::Steer { turn: *t },
    }
}

/// What a client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Apply(Command),
    Get,
    /// `timed_out`: the wait was held at least its whole timeout (client-side measure).
    Wait {
        after: u64,
        timed_out: bool,
    },
}

/// What it was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok(Snapshot),
    Refused { code: String, record: Option<Snapshot> },
}

impl Outcome {
    /// Reads an answer: 200 with `{"handoff"}`, or an error with its code and maybe the hand-off.
    pub fn from_answer(status: u16, body: &Value) -> Outcome {
        if status == 200 {
            return match Snapshot::from_json(&body["handoff"]) {
                Some(s) => Outcome::Ok(s),
                None => Outcome::Refused { code: format!("unreadable 200: {body}"), record: None },
            };
        }
        let code =
            body["error"]["code"].as_str().map(str::to_string).unwrap_or_else(|| format!("HTTP {status}: {body}"));
        Outcome::Refused { code, record: Snapshot::from_json(&body["handoff"]) }
    }

    /// The record an answer shows, whichever kind it is.
    pub fn record(&self) -> Option<&Snapshot> {
        match self {
            Outcome::Ok(s) => Some(s),
            Outcome::Refused { record, .. } => record.as_ref(),
        }
    }
}

/// One call of one client, with its times (nanoseconds from a common start).
#[derive(Debug, Clone)]
pub struct Event {
    pub client: usize,
    pub call: Call,
    pub outcome: Outcome,
    pub invoked_ns: u64,
    pub answered_ns: u64,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        let outcome = match &self.outcome {
            Outcome::Ok(s) => format!("200 {s}"),
            Outcome::Refused { code, record: Some(s) } => format!("{code} [{s}]"),
            Outcome::Refused { code, record: None } => code.clone(),
        };
        write!(
            f,
            "client {} [{:.3} .. {:.3} ms] {:?} -> {}",
            self.client,
            ms(self.invoked_ns),
            ms(self.answered_ns),
            self.call,
            outcome
        )
    }
}

/// The model's step: the next state when `outcome` is what the model answers to `call` in
/// `state`, or `None` when it is not.
pub fn next(state: &Snapshot, call: &Call, outcome: &Outcome) -> Option<Snapshot> {
    match call {
        Call::Get => matches!(outcome, Outcome::Ok(s) if s == state).then(|| state.clone()),
        Call::Wait { after, timed_out } => {
            let kept_its_promise = *timed_out || state.answers_wait(*after);
            let same = matches!(outcome, Outcome::Ok(s) if s == state);
            (same && kept_its_promise).then(|| state.clone())
        }
        Call::Apply(command) => match model::answer(state, &model_command(command)) {
            Ok(accepted) => matches!(outcome, Outcome::Ok(s) if *s == accepted.handoff).then_some(accepted.handoff),
            Err(refusal) => match outcome {
                Outcome::Refused { code, record }
                    if code == refusal.code() && record.as_ref().is_none_or(|r| r == state) =>
                {
                    Some(state.clone())
                }
                _ => None,
            },
        },
    }
}

/// As [`next`], on a service record, for tests that track one (`concurrency.rs`): the record
/// with the model's turn, state, status, summary and version, its other fields as they were.
pub fn step(state: &Record, call: &Call, outcome: &Outcome) -> Option<Record> {
    let after = next(&Snapshot::of(state), call, outcome)?;
    let mut record = state.clone();
    record.turn = after.turn;
    record.state = if after.closed { State::Closed } else { State::Open };
    record.status = match after.status {
        model::Status::Running => turn::Status::Running,
        model::Status::NeedsYou => turn::Status::NeedsYou,
        model::Status::Done => turn::Status::Done,
        model::Status::Failed => turn::Status::Failed,
        model::Status::Cancelled => turn::Status::Cancelled,
    };
    record.summary = after.summary;
    record.version = after.version;
    Some(record)
}

/// Why a history is not linearisable, with what the search got furthest to.
#[derive(Debug)]
pub struct Violation {
    /// The longest order (indices into the history) the model accepted.
    pub longest_prefix: Vec<usize>,
    /// Calls that could come next after that prefix, none of which the model accepted.
    pub stuck_on: Vec<usize>,
    pub explored: usize,
}

/// Explored (calls linearised, model state) pairs past which the search gives up; far above
/// what the harness's histories need (a few thousand), so that a pathological one fails loudly
/// instead of hanging the run.
pub const EXPLORED_MAX: usize = 2_000_000;

struct Search<'a> {
    history: &'a [Event],
    seen: HashSet<(Vec<u64>, Snapshot)>,
    order: Vec<usize>,
    best: Vec<usize>,
    best_stuck: Vec<usize>,
    gave_up: bool,
}

// The search below is recursive: its depth is the history's length, a few dozen calls.

impl Search<'_> {
    fn run(&mut self, done: &mut Vec<u64>, state: &Snapshot) -> bool {
        if self.order.len() == self.history.len() {
            return true;
        }
        if self.seen.len() >= EXPLORED_MAX {
            self.gave_up = true;
            return false;
        }
        if !self.seen.insert((done.clone(), state.clone())) {
            return false;
        }
        let is_done = |done: &[u64], i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        // A call may come next when no pending call was answered before it was invoked.
        let first_answer =
            (0..self.history.len()).filter(|&i| !is_done(done, i)).map(|i| self.history[i].answered_ns).min().unwrap();
        let candidates: Vec<usize> = (0..self.history.len())
            .filter(|&i| !is_done(done, i) && self.history[i].invoked_ns <= first_answer)
            .collect();
        for &i in &candidates {
            let event = &self.history[i];
            let Some(after) = next(state, &event.call, &event.outcome) else {
                continue;
            };
            done[i / 64] |= 1 << (i % 64);
            self.order.push(i);
            if self.run(done, &after) {
                return true;
            }
            self.order.pop();
            done[i / 64] &= !(1 << (i % 64));
        }
        if self.order.len() >= self.best.len() {
            self.best = self.order.clone();
            self.best_stuck = candidates;
        }
        false
    }
}

/// Checks one hand-off's history from `initial` (the hand-off before any of its calls).
/// `Ok`: an order of the calls (indices into `history`) that the model accepts.
pub fn check(initial: &Snapshot, history: &[Event]) -> Result<Vec<usize>, Violation> {
    for e in history {
        assert!(e.invoked_ns <= e.answered_ns, "a call is answered after it is invoked: {e}");
    }
    let mut search =
        Search { history, seen: HashSet::new(), order: vec![], best: vec![], best_stuck: vec![], gave_up: false };
    let mut done = vec![0u64; history.len().div_ceil(64).max(1)];
    if search.run(&mut done, initial) {
        return Ok(search.order);
    }
    let explored = if search.gave_up { usize::MAX } else { search.seen.len() };
    Err(Violation { longest_prefix: search.best, stuck_on: search.best_stuck, explored })
}

/// A readable account of a failed check: the history in invocation order, then how far the
/// model got and where it was stuck.
pub fn explain(initial: &Snapshot, history: &[Event], violation: &Violation) -> String {
    let mut out = format!("initial: {initial}\nhistory ({} calls, by invocation):\n", history.len());
    let mut by_invocation: Vec<usize> = (0..history.len()).collect();
    by_invocation.sort_by_key(|&i| history[i].invoked_ns);
    for i in by_invocation {
        out += &format!("  #{i:<3} {}\n", history[i]);
    }
    if violation.explored == usize::MAX {
        out += &format!("the search gave up after {EXPLORED_MAX} states\n");
    }
    let mut state = initial.clone();
    out += "longest order the model accepts:\n";
    for &i in &violation.longest_prefix {
        state = next(&state, &history[i].call, &history[i].outcome).expect("the prefix replays");
        out += &format!("  #{i:<3} -> {state}\n");
    }
    out += &format!("then no candidate fits the model state {state}: {:?}\n", violation.stuck_on);
    for &i in &violation.stuck_on {
        let model = match &history[i].call {
            Call::Apply(c) => match model::answer(&state, &model_command(c)) {
                Ok(a) => format!("200 {}", a.handoff),
                Err(refusal) => refusal.code().to_string(),
            },
            Call::Get | Call::Wait { .. } => format!("200 {state}"),
        };
        out += &format!("  #{i:<3} model answers {model}; got {:?}\n", history[i].outcome);
    }
    out
}

/// Waits that returned a newer version only at their timeout although the change that made
/// `after + 1` was answered more than `slack_ns` before: a wake-up that was missed. Every wait
/// of the history asked for `timeout_ns`.
pub fn missed_wake_ups(history: &[Event], slack_ns: u64, timeout_ns: u64) -> Vec<String> {
    let mut missed = vec![];
    for w in history {
        let Call::Wait { after, timed_out: true } = w.call else {
            continue;
        };
        let Outcome::Ok(got) = &w.outcome else {
            continue;
        };
        if got.version <= after {
            continue;
        }
        let change = history
            .iter()
            .find(|e| matches!((&e.call, &e.outcome), (Call::Apply(_), Outcome::Ok(s)) if s.version == after + 1));
        if let Some(change) = change {
            let held_past_change = w.answered_ns.saturating_sub(change.answered_ns.max(w.invoked_ns));
            if held_past_change > slack_ns && w.answered_ns - w.invoked_ns >= timeout_ns {
                missed.push(format!("{w}\n    although version {} was answered by {change}", after + 1));
            }
        }
    }
    missed
}

/// A refusal as the service answers it, for tests that build histories by hand.
pub fn refused(refusal: Refusal, record: Option<&Snapshot>) -> Outcome {
    Outcome::Refused { code: refusal.code().to_string(), record: record.cloned() }
}

#[cfg(test)]
mod tests;
