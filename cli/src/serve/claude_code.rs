//! The Claude Code driver of a served turn: `claude -p` on stream-json both ways
//! (`--input-format stream-json --output-format stream-json --verbose`) as a child leading a
//! process group of its own (a parent-death signal on Linux), stopped as a group.
//!
//! Standard input stays open while the turn runs: the owner's words are the first user
//! message ([`Input::write_user_message`]), and the input is closed ([`Input::close`]) when
//! the turn's `result` line comes, so that Claude Code ends. Standard output is read line by
//! line, each JSON line handed to the turn's reader ([`OnLine`]), its tail kept; the end is
//! told to serve's loop by a thread that waits for the process.

use super::events::Shaper;
use super::harness::{Command, Emit, Event, Exit, Harness};
use super::sender::Timeline;
use crate::hook::transcript;
use crate::machine::{env::ENV_CONTEXT_WINDOW, group, Runtime};
use handoff_core::suggestion::Usage;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most of the harness's standard output kept (its tail).
pub const OUTPUT_KEPT_BYTES_MAX: usize = 256 * 1024;
/// The longest stream-json line read; a longer one is kept in the tail but not read as JSON.
pub const LINE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Why a steer of a Claude Code turn is undelivered once its turn is over: its input closed.
pub const TURN_OVER_TAKES_NO_STEER: &str =
    "Claude Code had finished the turn and its input was closed: send the words as the next turn";
/// Why a steer written to Claude Code is undelivered when it ended before reading it.
pub const ENDED_BEFORE_READING: &str = "Claude Code ended before it read the words";
/// After SIGKILL, how long a stop waits for the waiting thread to see the exit.
const REAPED_WAIT_MS: u64 = 1_000;
/// Once the process ended, how long its end waits for the reader to finish its output (a
/// grandchild may hold the pipe open): every line is read before the end is told.
const READER_WAIT_MS: u64 = 2_000;

/// What to run: `program args` with `vars` set and `remove` taken out, `input` its first user
/// message on standard input.
pub struct Spawn<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub vars: &'a [(&'a str, String)],
    pub remove: &'a [&'a str],
    pub input: &'a str,
    pub turn: u64,
}

/// A running Claude Code.
pub struct ClaudeCode {
    pid: u32,
    turn: u64,
    started: Instant,
    /// The tail of its standard output.
    out: Arc<Mutex<Vec<u8>>>,
    /// Its standard input, open until the turn's result.
    input: Input,
    /// The messages it was given and the results it gave: the input is closed only once each
    /// has its result and no steer is kept.
    messages: Arc<Mutex<Messages>>,
    emit: Emit,
    exit: Exit,
}

/// The steers written to a turn's Claude Code: each is delivered once Claude Code replays it
/// (`--replay-user-messages` echoes each user message once it is in the conversation: with the
/// next request between tool calls, with the model's answer for a message of its own), and a
/// result ends the turn only once none is left unread.
#[derive(Debug, Default)]
pub struct Messages {
    /// Steers written and not read back yet: `(id, words)`, oldest first.
    written: std::collections::VecDeque<(String, String)>,
    /// The input was closed: no message is written after.
    closed: bool,
}

/// What one output line says became of the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// Steer `.0` was read by Claude Code.
    Read(String),
    /// The last message's result: the turn is over (its text, and whether it is an error).
    Over { result: String, error: bool },
}

impl Messages {
    pub fn new() -> Messages {
        Messages::default()
    }

    /// Notes steer `id` as written; `false` once the input is closed (nothing is written).
    pub fn write(&mut self, id: &str, words: &str, write: impl FnOnce() -> std::io::Result<()>) -> bool {
        if self.closed || write().is_err() {
            return false;
        }
        self.written.push_back((id.to_string(), words.to_string()));
        true
    }

    /// Reads one output line: each written steer a replayed user message carries is that steer
    /// read; a result with no steer left unread is the turn's end, after which the input is
    /// closed (one with a steer unread is followed by that steer's own exchange).
    pub fn on_line(&mut self, line: &Value) -> Vec<Said> {
        if line["type"] == "user" {
            return self.read_back(line);
        }
        if !is_result(line) || !super::decide::messages_done(self.written.len(), 0) {
            return Vec::new();
        }
        self.closed = true;
        let result = line["result"].as_str().unwrap_or_default().to_string();
        let error = line["is_error"].as_bool().unwrap_or(false);
        vec![Said::Over { result, error }]
    }

    /// The written steers a replayed user message carries, one a text part. Seen with Claude
    /// Code 2.1.328: the messages queued while the model answers come back as one, a part each,
    /// every part but the last with a newline added.
    fn read_back(&mut self, line: &Value) -> Vec<Said> {
        let parts = user_parts(line);
        let joined = parts.len() > 1;
        let mut read = Vec::new();
        for words in &parts {
            let same = |w: &String| w == words || (joined && format!("{w}\n") == *words);
            if let Some(at) = self.written.iter().position(|(_, w)| same(w)) {
                read.extend(self.written.remove(at).map(|(id, _)| Said::Read(id)));
            }
        }
        read
    }

    /// The input is closed (the reader ended): the steers written and never read back.
    pub fn close(&mut self) -> Vec<String> {
        self.closed = true;
        self.written.drain(..).map(|(id, _)| id).collect()
    }
}

/// The text parts of a stream-json user message (its text, when it is one string).
fn user_parts(line: &Value) -> Vec<String> {
    let content = &line["message"]["content"];
    if let Some(text) = content.as_str() {
        return vec![text.to_string()];
    }
    let parts = content.as_array().into_iter().flatten();
    parts.filter_map(|p| p["text"].as_str().map(String::from)).collect()
}

/// Claude Code's standard input on stream-json: user messages, one a line, until closed.
#[derive(Clone, Default)]
pub struct Input {
    pipe: Arc<Mutex<Option<ChildStdin>>>,
}

impl Input {
    /// Writes one user message carrying `text`; an error once the input is closed or the
    /// harness gone.
    pub fn write_user_message(&self, text: &str) -> std::io::Result<()> {
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        let Some(stdin) = pipe.as_mut() else {
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "Claude Code's input is closed"));
        };
        stdin.write_all(user_message(text).as_bytes())?;
        stdin.flush()
    }

    /// Closes the input: Claude Code ends once its turn has. Closing twice does nothing.
    pub fn close(&self) {
        drop(self.pipe.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// One stream-json user message carrying `text`, as one line.
pub fn user_message(text: &str) -> String {
    let message = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}});
    format!("{message}\n")
}

/// Whether a stream-json line is the turn's `result`, after which the input is closed.
pub fn is_result(line: &Value) -> bool {
    line["type"] == "result"
}

/// What reads each JSON line of its standard output, in order, on the reading thread.
pub type OnLine = Box<dyn FnMut(&Value) + Send>;

/// A served turn's reader of Claude Code's output: each line's events to the turn's timeline,
/// the result to serve's loop as [`Event::Finished`], with the context the last call used
/// (as a transcript's assistant lines give it, which stream-json's are).
pub fn reader(turn: u64, mut shaper: Shaper, timeline: Timeline, emit: Emit) -> OnLine {
    let mut context: Option<(u64, Option<String>)> = None;
    Box::new(move |line| {
        timeline.extend(shaper.claude_code(line, crate::hook::now_ms()));
        if line["type"] == "assistant" {
            let tail = transcript::tail_of(&line.to_string());
            if let Some(used) = tail.context_used {
                context = Some((used, tail.model));
            }
        }
        if is_result(line) {
            let window = std::env::var(ENV_CONTEXT_WINDOW).ok().and_then(|w| w.parse().ok());
            let usage = context.as_ref().map(|(used, model)| Usage {
                context_used: Some(*used),
                context_window: Some(transcript::context_window(model.as_deref(), window)),
                ..Usage::default()
            });
            let answer = line["result"].as_str().unwrap_or_default().to_string();
            let failed = line["is_error"] == true || line["subtype"] != "success";
            emit(turn, Event::Finished { answer, failed, usage });
        }
    })
}

/// Starts it; its end is told to `emit` as [`Event::Gone`], each line of its output to
/// `on_line`.
pub fn spawn(s: &Spawn<'_>, emit: Emit, on_line: OnLine) -> std::io::Result<ClaudeCode> {
    let mut cmd = Process::new(s.program);
    cmd.args(s.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for name in s.remove {
        cmd.env_remove(name);
    }
    for (k, v) in s.vars {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    group::own_group_dying_with_parent(&mut cmd);
    let mut child = cmd.spawn()?;
    let out = Arc::new(Mutex::new(Vec::new()));
    let input = Input { pipe: Arc::new(Mutex::new(child.stdin.take())) };
    let messages = Arc::new(Mutex::new(Messages::new()));
    let (read, all_read) = std::sync::mpsc::channel::<()>();
    if let Some(stdout) = child.stdout.take() {
        let said = said(s.turn, messages.clone(), input.clone(), emit.clone());
        read_lines(stdout, out.clone(), input.clone(), Box::new(said), on_line, read);
    }
    if let Some(stderr) = child.stderr.take() {
        drain(stderr);
    }
    // On a thread of its own: a long briefing fills the pipe before Claude Code reads it.
    let (first, words) = (input.clone(), s.input.to_string());
    std::thread::spawn(move || {
        let _ = first.write_user_message(&words);
    });
    let (pid, turn, exit) = (child.id(), s.turn, Exit::default());
    let (seen, told, written) = (exit.clone(), emit.clone(), messages.clone());
    std::thread::spawn(move || {
        let how = child.wait().map_or_else(|e| format!("unknown ({e})"), group::describe);
        let _ = all_read.recv_timeout(Duration::from_millis(READER_WAIT_MS));
        for id in written.lock().unwrap_or_else(|e| e.into_inner()).close() {
            emit(turn, Event::Steered { id, delivered: Err(ENDED_BEFORE_READING.to_string()) });
        }
        seen.set(how.clone());
        emit(turn, Event::Gone { how });
    });
    Ok(ClaudeCode { pid, turn, started: Instant::now(), out, input, messages, emit: told, exit })
}

/// What the reader does with each output line for the turn's messages: a steer read is told
/// delivered; the result after which no steer is unread closes the input. Answers whether the
/// line goes on to the turn's reader: a result that leaves a steer unread does not, since
/// that steer's own exchange and result follow and only the last result is the turn's end.
fn said(turn: u64, messages: Arc<Mutex<Messages>>, input: Input, emit: Emit) -> impl Fn(&Value) -> bool + Send {
    move |line| {
        let said = messages.lock().unwrap_or_else(|e| e.into_inner()).on_line(line);
        if said.is_empty() && is_result(line) {
            return false;
        }
        for s in said {
            match s {
                Said::Read(id) => emit(turn, Event::Steered { id, delivered: Ok(()) }),
                Said::Over { .. } => input.close(),
            }
        }
        true
    }
}

/// What reads each line first for the turn's messages, answering whether it goes on to the
/// turn's reader.
type TurnLine = Box<dyn Fn(&Value) -> bool + Send>;

/// Reads standard output to its end, line by line: each JSON line to `turn_line` (the turn's
/// messages: it closes the input on the turn's last result) and then, unless it says not, to
/// `on_line`, the last [`OUTPUT_KEPT_BYTES_MAX`] bytes kept.
fn read_lines(
    from: impl Read + Send + 'static,
    keep: Arc<Mutex<Vec<u8>>>,
    input: Input,
    turn_line: TurnLine,
    mut on_line: OnLine,
    done: std::sync::mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.by_ref().take(LINE_BYTES_MAX as u64).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            {
                let mut kept = keep.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&line);
                if kept.len() > OUTPUT_KEPT_BYTES_MAX {
                    let cut = kept.len() - OUTPUT_KEPT_BYTES_MAX;
                    kept.drain(..cut);
                }
            }
            let Ok(value) = serde_json::from_slice::<Value>(&line) else { continue };
            if turn_line(&value) {
                on_line(&value);
            }
        }
        input.close();
        let _ = done.send(());
    });
}

/// Reads `from` to its end, keeping nothing.
fn drain(mut from: impl Read + Send + 'static) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while matches!(from.read(&mut buf), Ok(n) if n > 0) {}
    });
}

impl ClaudeCode {
    /// What it wrote on standard output (the kept tail).
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// How it ended, once it did.
    pub fn exited(&self) -> Option<String> {
        self.exit.get()
    }

    /// Its standard input: more user messages, then the close.
    pub fn input(&self) -> Input {
        self.input.clone()
    }
}

impl Harness for ClaudeCode {
    fn turn(&self) -> u64 {
        self.turn
    }

    fn runtime(&self) -> Runtime {
        Runtime::ClaudeCode
    }

    fn started(&self) -> Instant {
        self.started
    }

    fn group(&self) -> Option<u32> {
        Some(self.pid)
    }

    /// A stop ends its whole process group. An answer is its hook's to read: Claude Code's
    /// `PermissionRequest` hook waits for the owner itself, in a process of its own.
    fn send(&mut self, command: Command) -> Option<String> {
        match command {
            Command::Answer { .. } => None,
            // Written at once as a user message, delivered when Claude Code reads it back; once
            // the turn is over (its input closed) it is undelivered.
            Command::Steer { id, prompt } => {
                let input = self.input.clone();
                let written = self
                    .messages
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .write(&id, &prompt, || input.write_user_message(&prompt));
                if !written {
                    let why = TURN_OVER_TAKES_NO_STEER.to_string();
                    (self.emit)(self.turn, Event::Steered { id, delivered: Err(why) });
                }
                None
            }
            Command::Stop => {
                let exit = self.exit.clone();
                group::stop(self.pid, || exit.get()).or_else(|| self.exit.wait(Duration::from_millis(REAPED_WAIT_MS)))
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn sh(script: &str) -> ClaudeCode {
        let args = vec!["-c".to_string(), script.to_string()];
        let s = Spawn { program: Path::new("/bin/sh"), args: &args, vars: &[], remove: &[], input: "", turn: 1 };
        spawn(&s, Arc::new(|_, _| {}), Box::new(|_| {})).unwrap()
    }

    #[test]
    fn a_stopped_harness_is_ended_with_its_whole_process_group() {
        let mut h = sh("sleep 30 & echo $!; wait");
        let grandchild = loop {
            if let Ok(pid) = h.output().trim().parse::<i32>() {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let started = Instant::now();
        let how = h.send(Command::Stop).expect("it ended");
        assert!(started.elapsed() < Duration::from_secs(5), "stopped within 5 s");
        assert_eq!(how, "signal 15");
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(grandchild, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default().contains(") Z");
        assert!(!alive, "the grandchild went with the group");
    }

    #[test]
    fn the_harness_output_is_drained_and_only_its_tail_kept_and_its_end_is_told() {
        let (tx, rx) = std::sync::mpsc::channel();
        let args = vec!["-c".to_string(), "head -c 1000000 /dev/zero | tr '\\0' a; echo END".to_string()];
        let s = Spawn { program: Path::new("/bin/sh"), args: &args, vars: &[], remove: &[], input: "", turn: 7 };
        let h = spawn(&s, Arc::new(move |turn, e| tx.send((turn, e)).unwrap()), Box::new(|_| {})).unwrap();
        let told = rx.recv_timeout(Duration::from_secs(10)).expect("its end is told");
        assert_eq!(told, (7, Event::Gone { how: "exit 0".into() }));
        std::thread::sleep(Duration::from_millis(100));
        let out = h.output();
        assert!(out.len() <= OUTPUT_KEPT_BYTES_MAX && out.ends_with("END\n"), "{}", out.len());
    }

    fn replayed(words: &str) -> Value {
        serde_json::from_str(&user_message(words)).unwrap()
    }

    fn result(text: &str) -> Value {
        json!({"type": "result", "subtype": "success", "is_error": false, "result": text})
    }

    /// A steer written while the turn works is one more message: it is delivered when Claude
    /// Code reads it back, and the turn is over only at the result of the last message.
    #[test]
    fn a_steer_is_delivered_when_read_back_and_the_turn_ends_only_at_the_last_messages_result() {
        let mut m = Messages::new();
        assert_eq!(m.on_line(&replayed("Make the file.")), [], "the prompt is no steer");
        assert!(m.write("st_4_1", "Call it b.txt", || Ok(())));
        assert_eq!(m.on_line(&result("Made a.txt")), [], "the steer is not read yet: its exchange comes");
        assert_eq!(m.on_line(&replayed("Call it b.txt")), vec![Said::Read("st_4_1".into())]);
        assert_eq!(m.on_line(&replayed("Call it b.txt")), [], "once");
        assert_eq!(
            m.on_line(&result("Renamed to b.txt")),
            vec![Said::Over { result: "Renamed to b.txt".into(), error: false }]
        );
        assert!(!m.write("st_5_1", "late", || Ok(())), "after the turn's end nothing is written");
        assert!(m.close().is_empty());
        // Read between tool calls, it joins the running exchange: that one result ends the turn.
        let mut m = Messages::new();
        assert!(m.write("st_6_1", "Use SQLite", || Ok(())));
        assert_eq!(m.on_line(&replayed("Use SQLite")), vec![Said::Read("st_6_1".into())]);
        let over = vec![Said::Over { result: "Using SQLite".into(), error: false }];
        assert_eq!(m.on_line(&result("Using SQLite")), over);
    }

    /// Steers queued while the model answers come back as one message, one part each (every part
    /// but the last with a newline Claude Code adds): each is read, and that exchange's result
    /// ends the turn.
    #[test]
    fn steers_queued_while_the_model_answers_are_read_back_as_one_message_and_each_is_delivered() {
        let mut m = Messages::new();
        assert!(m.write("st_4_1", "Use SQLite", || Ok(())));
        assert!(m.write("st_4_2", "Name it db.sqlite", || Ok(())));
        assert_eq!(m.on_line(&result("The parser reads JSON.")), [], "both steers' exchange comes");
        let joined = json!({"type": "user", "isReplay": true, "message": {"role": "user", "content": [
            {"type": "text", "text": "Use SQLite\n"}, {"type": "text", "text": "Name it db.sqlite"}]}});
        assert_eq!(m.on_line(&joined), [Said::Read("st_4_1".into()), Said::Read("st_4_2".into())]);
        let over = vec![Said::Over { result: "Using db.sqlite".into(), error: false }];
        assert_eq!(m.on_line(&result("Using db.sqlite")), over);
        // The same words sent twice are two steers: each is read once, as its part comes back.
        let mut m = Messages::new();
        assert!(m.write("st_5_1", "yes\n", || Ok(())));
        assert!(m.write("st_5_2", "yes\n", || Ok(())));
        assert_eq!(m.on_line(&replayed("yes\n")), [Said::Read("st_5_1".into())]);
        assert_eq!(m.on_line(&replayed("yes\n")), [Said::Read("st_5_2".into())]);
    }

    #[test]
    fn a_steer_not_read_back_when_claude_code_ends_is_undelivered_and_a_failed_write_is_not_written() {
        let mut m = Messages::new();
        assert!(!m.write("st_4_1", "x", || Err(std::io::Error::other("broken pipe"))));
        assert!(m.write("st_5_1", "y", || Ok(())));
        assert_eq!(m.close(), ["st_5_1"]);
        let mut m = Messages::new();
        assert_eq!(m.on_line(&result("done")), vec![Said::Over { result: "done".into(), error: false }]);
        let mut m = Messages::new();
        let failed = json!({"type": "result", "is_error": true, "result": "API error"});
        assert_eq!(m.on_line(&failed), vec![Said::Over { result: "API error".into(), error: true }]);
    }

    #[test]
    fn a_user_message_is_one_stream_json_line_carrying_the_words_whole() {
        let line = user_message("two\nlines \"quoted\"");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "{line:?}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["role"], "user");
        assert_eq!(v["message"]["content"][0]["text"], "two\nlines \"quoted\"");
    }

    #[test]
    fn the_input_stays_open_for_more_messages_until_the_turns_result_and_is_closed_then() {
        let (tx, rx) = std::sync::mpsc::channel();
        // Echoes each message's text as a line of its own; a message saying "end" makes it print
        // the result, after which it waits for its input to close.
        let script = r#"while read -r l; do case "$l" in *'"end"'*) echo '{"type":"result","result":"r"}'; cat >/dev/null; echo '{"type":"closed"}'; exit 0;; *) echo '{"type":"seen"}';; esac; done"#;
        let args = vec!["-c".to_string(), script.to_string()];
        let s = Spawn { program: Path::new("/bin/sh"), args: &args, vars: &[], remove: &[], input: "first", turn: 3 };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        let h = spawn(
            &s,
            Arc::new(move |turn, e| tx.send((turn, e)).unwrap()),
            Box::new(move |v| seen.lock().unwrap().push(v["type"].as_str().unwrap_or_default().to_string())),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(h.exited().is_none(), "the input stays open after the first message");
        h.input().write_user_message("second").unwrap();
        h.input().write_user_message("end").unwrap();
        let told = rx.recv_timeout(Duration::from_secs(10)).expect("it ends once its input is closed");
        assert_eq!(told, (3, Event::Gone { how: "exit 0".into() }));
        assert_eq!(*lines.lock().unwrap(), ["seen", "seen", "result", "closed"], "every line read before the end");
        assert!(h.input().write_user_message("late").is_err(), "closed on the result");
    }
}
