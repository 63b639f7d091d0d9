//! A linearisability checker for the history of one hand-off, with the pure turn machine
//! (`handoff::turn::apply`) as the model.
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

use handoff::error::Code;
use handoff::turn::{self, Command, Record, State, Status};
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;

/// What the model compares of a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Snapshot {
    pub turn: u64,
    pub closed: bool,
    pub status: Status,
    pub summary: Option<String>,
    pub version: u64,
}

impl Snapshot {
    pub fn of(record: &Record) -> Snapshot {
        Snapshot {
            turn: record.turn,
            closed: record.state == State::Closed,
            status: record.status,
            summary: record.summary.clone(),
            version: record.version,
        }
    }

    /// Reads an API record (`{"turn", "state", "status", "summary", "version", ...}`).
    pub fn from_json(v: &Value) -> Option<Snapshot> {
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
        Some(Snapshot {
            turn: v["turn"].as_u64()?,
            closed,
            status: Status::parse(v["status"].as_str()?)?,
            summary,
            version: v["version"].as_u64()?,
        })
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.closed { "closed" } else { "open" };
        write!(f, "v{} turn {} {} {} {:?}", self.version, self.turn, state, self.status.as_str(), self.summary)
    }
}

/// What a client asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Apply(Command),
    Get,
    /// `timed_out`: the wait was held at least its whole timeout (client-side measure).
    Wait { after: u64, timed_out: bool },
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
        let code = body["error"]["code"].as_str().map(str::to_string).unwrap_or_else(|| format!("HTTP {status}: {body}"));
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
        write!(f, "client {} [{:.3} .. {:.3} ms] {:?} -> {}", self.client, ms(self.invoked_ns), ms(self.answered_ns), self.call, outcome)
    }
}

/// The model's step: the next state when `outcome` is what the model answers to `call` in
/// `state`, or `None` when it is not.
pub fn step(state: &Record, call: &Call, outcome: &Outcome) -> Option<Record> {
    let now = Snapshot::of(state);
    match call {
        Call::Get => matches!(outcome, Outcome::Ok(s) if *s == now).then(|| state.clone()),
        Call::Wait { after, timed_out } => {
            let kept_its_promise = *timed_out || turn::wait_answers_now(state, *after);
            let same = matches!(outcome, Outcome::Ok(s) if *s == now);
            (same && kept_its_promise).then(|| state.clone())
        }
        Call::Apply(command) => match turn::apply(state, command, state.updated_at + 1) {
            Ok(applied) => {
                matches!(outcome, Outcome::Ok(s) if *s == Snapshot::of(&applied.record)).then_some(applied.record)
            }
            Err(code) => match outcome {
                Outcome::Refused { code: got, record } if got == code.as_str() && record.as_ref().is_none_or(|r| *r == now) => {
                    Some(state.clone())
                }
                _ => None,
            },
        },
    }
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
    fn run(&mut self, done: &mut Vec<u64>, state: &Record) -> bool {
        if self.order.len() == self.history.len() {
            return true;
        }
        if self.seen.len() >= EXPLORED_MAX {
            self.gave_up = true;
            return false;
        }
        if !self.seen.insert((done.clone(), Snapshot::of(state))) {
            return false;
        }
        let is_done = |done: &[u64], i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        // A call may come next when no pending call was answered before it was invoked.
        let first_answer = (0..self.history.len()).filter(|&i| !is_done(done, i)).map(|i| self.history[i].answered_ns).min().unwrap();
        let candidates: Vec<usize> =
            (0..self.history.len()).filter(|&i| !is_done(done, i) && self.history[i].invoked_ns <= first_answer).collect();
        for &i in &candidates {
            let event = &self.history[i];
            let Some(next) = step(state, &event.call, &event.outcome) else {
                continue;
            };
            done[i / 64] |= 1 << (i % 64);
            self.order.push(i);
            if self.run(done, &next) {
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

/// Checks one hand-off's history from `initial` (the record before any of its calls).
/// `Ok`: an order of the calls (indices into `history`) that the model accepts.
pub fn check(initial: &Record, history: &[Event]) -> Result<Vec<usize>, Violation> {
    for e in history {
        assert!(e.invoked_ns <= e.answered_ns, "a call is answered after it is invoked: {e}");
    }
    let mut search = Search { history, seen: HashSet::new(), order: vec![], best: vec![], best_stuck: vec![], gave_up: false };
    let mut done = vec![0u64; history.len().div_ceil(64).max(1)];
    if search.run(&mut done, initial) {
        return Ok(search.order);
    }
    let explored = if search.gave_up { usize::MAX } else { search.seen.len() };
    Err(Violation { longest_prefix: search.best, stuck_on: search.best_stuck, explored })
}

/// A readable account of a failed check: the history in invocation order, then how far the
/// model got and where it was stuck.
pub fn explain(initial: &Record, history: &[Event], violation: &Violation) -> String {
    let mut out = format!("initial: {}\nhistory ({} calls, by invocation):\n", Snapshot::of(initial), history.len());
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
        state = step(&state, &history[i].call, &history[i].outcome).expect("the prefix replays");
        out += &format!("  #{i:<3} -> {}\n", Snapshot::of(&state));
    }
    out += &format!("then no candidate fits the model state {}: {:?}\n", Snapshot::of(&state), violation.stuck_on);
    for &i in &violation.stuck_on {
        let model = match &history[i].call {
            Call::Apply(c) => match turn::apply(&state, c, state.updated_at + 1) {
                Ok(a) => format!("200 {}", Snapshot::of(&a.record)),
                Err(code) => code.as_str().to_string(),
            },
            Call::Get | Call::Wait { .. } => format!("200 {}", Snapshot::of(&state)),
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
        let change = history.iter().find(|e| matches!((&e.call, &e.outcome), (Call::Apply(_), Outcome::Ok(s)) if s.version == after + 1));
        if let Some(change) = change {
            let held_past_change = w.answered_ns.saturating_sub(change.answered_ns.max(w.invoked_ns));
            if held_past_change > slack_ns && w.answered_ns - w.invoked_ns >= timeout_ns {
                missed.push(format!("{w}\n    although version {} was answered by {change}", after + 1));
            }
        }
    }
    missed
}

/// The refusal a code gives, for tests that build histories by hand.
pub fn refused(code: Code, record: Option<&Record>) -> Outcome {
    Outcome::Refused { code: code.as_str().to_string(), record: record.map(Snapshot::of) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff::turn::ReportStatus;

    fn fresh() -> Record {
        Record::create("ho_x".into(), "alice".into(), "s".into(), "m".into(), "l".into(), 0)
    }

    fn after(record: &Record, command: Command) -> Record {
        turn::apply(record, &command, 1).unwrap().record
    }

    fn ev(client: usize, call: Call, outcome: Outcome, invoked_ns: u64, answered_ns: u64) -> Event {
        Event { client, call, outcome, invoked_ns, answered_ns }
    }

    fn ok(r: &Record) -> Outcome {
        Outcome::Ok(Snapshot::of(r))
    }

    fn done() -> Command {
        Command::Report { turn: 1, status: ReportStatus::Done, summary: Some("s".into()) }
    }

    #[test]
    fn a_sequential_history_that_follows_the_rules_is_linearisable() {
        let r1 = fresh();
        let r2 = after(&r1, done());
        let r3 = after(&r2, Command::OpenTurn { after: 1 });
        let h = vec![
            ev(0, Call::Apply(done()), ok(&r2), 0, 10),
            ev(1, Call::Apply(Command::OpenTurn { after: 1 }), ok(&r3), 20, 30),
            ev(0, Call::Apply(done()), refused(Code::HandoffStale, Some(&r3)), 40, 50),
            ev(2, Call::Get, ok(&r3), 60, 70),
        ];
        assert_eq!(check(&r1, &h).unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn overlapping_calls_may_take_effect_in_the_other_order() {
        // The open-turn call was invoked first but took effect after the report that it needed.
        let r1 = fresh();
        let r2 = after(&r1, done());
        let r3 = after(&r2, Command::OpenTurn { after: 1 });
        let h = vec![
            ev(0, Call::Apply(Command::OpenTurn { after: 1 }), ok(&r3), 0, 100),
            ev(1, Call::Apply(done()), ok(&r2), 10, 50),
            ev(2, Call::Get, ok(&r2), 20, 60),
        ];
        assert_eq!(check(&r1, &h).unwrap(), vec![1, 2, 0]);
    }

    #[test]
    fn a_read_that_goes_back_in_time_is_rejected() {
        // The report was answered before the get was invoked, yet the get shows version 1.
        let r1 = fresh();
        let r2 = after(&r1, done());
        let h = vec![ev(0, Call::Apply(done()), ok(&r2), 0, 10), ev(1, Call::Get, ok(&r1), 20, 30)];
        let v = check(&r1, &h).unwrap_err();
        assert_eq!((v.longest_prefix, v.stuck_on), (vec![0], vec![1]));
        // Overlapping, the same answers are fine: the get took effect first.
        let h = vec![ev(0, Call::Apply(done()), ok(&r2), 0, 30), ev(1, Call::Get, ok(&r1), 20, 40)];
        assert!(check(&r1, &h).is_ok());
    }

    #[test]
    fn a_cancel_and_a_final_report_that_both_win_are_rejected() {
        // Both claim the turn ended their way at version 2: no order gives both answers.
        let r1 = fresh();
        let by_report = after(&r1, done());
        let by_cancel = after(&r1, Command::Cancel { turn: Some(1) });
        let h = vec![
            ev(0, Call::Apply(done()), ok(&by_report), 0, 50),
            ev(1, Call::Apply(Command::Cancel { turn: Some(1) }), ok(&by_cancel), 0, 50),
        ];
        let v = check(&r1, &h).unwrap_err();
        assert_eq!(v.longest_prefix.len(), 1);
        assert!(explain(&r1, &h, &v).contains("handoff.turn_finished"));
    }

    #[test]
    fn a_refusal_must_carry_the_record_it_was_refused_against() {
        let r1 = fresh();
        let r2 = after(&r1, done());
        // turn_finished is right for the cancel only after the report, and then it must show r2.
        let wrong = vec![
            ev(0, Call::Apply(done()), ok(&r2), 0, 10),
            ev(1, Call::Apply(Command::Cancel { turn: None }), refused(Code::TurnFinished, Some(&r1)), 20, 30),
        ];
        assert!(check(&r1, &wrong).is_err());
        let right = vec![wrong[0].clone(), ev(1, Call::Apply(Command::Cancel { turn: None }), refused(Code::TurnFinished, Some(&r2)), 20, 30)];
        assert!(check(&r1, &right).is_ok());
    }

    #[test]
    fn a_lost_change_is_rejected() {
        // Two reports each answered as moving the version to 2: one of them was lost.
        let r1 = fresh();
        let needs = Command::Report { turn: 1, status: ReportStatus::NeedsYou, summary: Some("a".into()) };
        let running = Command::Report { turn: 1, status: ReportStatus::Running, summary: Some("b".into()) };
        let h = vec![
            ev(0, Call::Apply(needs.clone()), ok(&after(&r1, needs)), 0, 10),
            ev(1, Call::Apply(running.clone()), ok(&after(&r1, running)), 20, 30),
        ];
        assert!(check(&r1, &h).is_err());
    }

    #[test]
    fn a_wait_must_answer_newer_or_closed_unless_it_ran_its_timeout() {
        let r1 = fresh();
        let r2 = after(&r1, done());
        // Answered early with nothing newer than it asked for: a broken promise.
        let early = vec![ev(0, Call::Wait { after: 1, timed_out: false }, ok(&r1), 0, 10)];
        assert!(check(&r1, &early).is_err());
        let at_timeout = vec![ev(0, Call::Wait { after: 1, timed_out: true }, ok(&r1), 0, 10)];
        assert!(check(&r1, &at_timeout).is_ok());
        // Woken by a change inside its interval, it shows the change.
        let woken = vec![
            ev(0, Call::Wait { after: 1, timed_out: false }, ok(&r2), 0, 100),
            ev(1, Call::Apply(done()), ok(&r2), 40, 60),
        ];
        assert!(check(&r1, &woken).is_ok());
        // A closed hand-off answers a wait at once, whatever it asked for.
        let closed = after(&r1, Command::Close);
        let h = vec![
            ev(1, Call::Apply(Command::Close), ok(&closed), 0, 10),
            ev(0, Call::Wait { after: 9, timed_out: false }, ok(&closed), 20, 30),
        ];
        assert!(check(&r1, &h).is_ok());
    }

    #[test]
    fn a_wait_held_to_its_timeout_past_a_change_is_a_missed_wake_up() {
        let r1 = fresh();
        let r2 = after(&r1, done());
        let ms = 1_000_000;
        let h = vec![
            ev(0, Call::Wait { after: 1, timed_out: true }, ok(&r2), 0, 2_100 * ms),
            ev(1, Call::Apply(done()), ok(&r2), 100 * ms, 110 * ms),
        ];
        assert!(check(&r1, &h).is_ok(), "linearisable: it is a timing fault");
        assert_eq!(missed_wake_ups(&h, 1_000 * ms, 2_000 * ms).len(), 1);
        let prompt = vec![ev(0, Call::Wait { after: 1, timed_out: false }, ok(&r2), 0, 120 * ms), h[1].clone()];
        assert!(missed_wake_ups(&prompt, 1_000 * ms, 2_000 * ms).is_empty());
    }

    #[test]
    fn memoisation_keeps_many_commuting_reads_cheap() {
        // 60 overlapping gets of one state: 60! orders, one memoised state per subset reached.
        let r1 = fresh();
        let h: Vec<Event> = (0..60).map(|i| ev(i, Call::Get, ok(&r1), 0, 100)).collect();
        assert!(check(&r1, &h).is_ok());
        // A history that fails only at its end: without memoisation every one of the 11! orders
        // of the overlapping calls is tried; with it, each subset of them once (2^11).
        let r2 = after(&r1, done());
        let mut h: Vec<Event> = (0..10).map(|i| ev(i, Call::Get, ok(&r1), 0, 100)).collect();
        h.push(ev(10, Call::Apply(done()), ok(&r2), 0, 100));
        h.push(ev(11, Call::Get, ok(&r1), 200, 300));
        let v = check(&r1, &h).unwrap_err();
        assert!(v.explored <= 1 << 11, "{}", v.explored);
    }
}
