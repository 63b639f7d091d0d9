//! A served session: a hand-off created with turn 1's words, a machine for it with the scripted
//! model, and `handoff serve ID` there once started. Shared by the tests that drive serve.

use super::harness::{eventually, Machine, ScriptedModel, Step};
use super::{api_get, ok, owner, record, unique};
use serde_json::Value;
use std::process::{Child, Stdio};
use std::time::Duration;

/// The longest any one wait of a served session takes before its test fails.
pub const STEP_S: u64 = 60;

pub struct Served {
    pub owner: String,
    pub session: String,
    pub id: String,
    pub model: ScriptedModel,
    pub machine: Machine,
    pub serve: Option<Child>,
    /// serve's arguments after `serve ID`.
    pub args: Vec<String>,
}

impl Served {
    /// The hand-off and its machine, the model scripted with `steps`, serve not started yet.
    pub fn create(prompt: &str, steps: Vec<Step>, args: &[&str]) -> Served {
        Served::create_for(prompt, ScriptedModel::start(steps), args)
    }

    /// [`Served::create`] with a model of the test's own.
    pub fn create_for(prompt: &str, model: ScriptedModel, args: &[&str]) -> Served {
        let owner = owner();
        let session = unique("session");
        let out = ok(Some(&owner), &["create", &session, "--machine", "m1", "--size", "large", "--prompt", prompt]);
        let mut lines = out.lines();
        let (id, token) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
        let machine = Machine::new(&id, &token, &model);
        let args = args.iter().map(|a| a.to_string()).collect();
        Served { owner, session, id, model, machine, serve: None, args }
    }

    /// [`Served::create`], then serve started with the machine's variables and `vars` over them.
    pub fn start(prompt: &str, steps: Vec<Step>, vars: &[(&str, &str)], args: &[&str]) -> Served {
        let mut s = Served::create(prompt, steps, args);
        s.serve_with(vars);
        s
    }

    /// serve started on a created session, with `vars` over the machine's variables.
    pub fn serve_with(&mut self, vars: &[(&str, &str)]) {
        self.serve = Some(self.spawn(vars));
    }

    /// `handoff serve ID ARGS…`, its output left to its log.
    pub fn spawn(&self, vars: &[(&str, &str)]) -> Child {
        let mut argv = vec!["serve", self.id.as_str()];
        argv.extend(self.args.iter().map(String::as_str));
        let mut cmd = self.machine.handoff(&argv);
        cmd.envs(vars.iter().copied()).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.spawn().expect("handoff serve starts")
    }

    pub fn record(&self) -> Value {
        record(&self.owner, &self.id)
    }

    /// What a failed wait shows: the record and serve's log.
    pub fn context(&self) -> String {
        format!("record: {}\nlog:\n{}", self.record(), self.machine.log())
    }

    /// The record, once `check` holds of it.
    pub fn until(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(what, Duration::from_secs(STEP_S), || Some(self.record()).filter(|r| check(r)), || self.context())
    }

    /// The open question, once the harness asks it.
    pub fn question(&self) -> Value {
        let r = self.until("the harness asks the owner", |r| {
            r["question"]["id"].is_string() && r["question"]["answer"].is_null()
        });
        r["question"].clone()
    }

    /// The open question's id, once the harness asks it.
    pub fn question_id(&self) -> String {
        self.question()["id"].as_str().unwrap().to_string()
    }

    /// The owner answers the open question with `option`, once it is asked.
    pub fn answer(&self, option: &str) {
        let id = self.question_id();
        ok(Some(&self.owner), &["answer", &self.id, option, "--question", &id]);
    }

    /// Turn `turn`'s timeline, once `check` holds of its events.
    pub fn events_until(&self, turn: u64, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        eventually(
            what,
            Duration::from_secs(STEP_S),
            || {
                let (status, body) = api_get(&self.owner, &format!("/v1/handoffs/{}/events?turn={turn}", self.id));
                let events = body["events"].as_array().cloned().unwrap_or_default();
                (status == 200 && check(&events)).then_some(events)
            },
            || self.context(),
        )
    }

    /// serve's log, once it says `what`.
    pub fn log_says(&self, what: &str) -> String {
        eventually(
            &format!("the log says {what:?}"),
            Duration::from_secs(STEP_S),
            || Some(self.machine.log()).filter(|l| l.contains(what)),
            || self.context(),
        )
    }

    /// The owner closes the hand-off: serve exits 0, leaves nothing running, and its log never
    /// held the machine token.
    pub fn close(&mut self) {
        ok(Some(&self.owner), &["close", &self.id]);
        let mut serve = self.serve.take().expect("serve was started");
        let status = eventually(
            "serve exits on close",
            Duration::from_secs(STEP_S),
            || serve.try_wait().unwrap(),
            || self.context(),
        );
        assert_eq!(status.code(), Some(0), "serve exits 0 on close\n{}", self.context());
        eventually(
            "no process is left",
            Duration::from_secs(10),
            || Some(self.machine.processes()).filter(|p| p.is_empty()),
            || format!("{:?}", self.machine.processes()),
        );
        assert!(!self.machine.log().contains(&self.machine.token), "the log never holds the token");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.serve.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
