//! The Claude Code driver of a served turn: `claude -p` as a child leading a process group of
//! its own (a parent-death signal on Linux), its output drained and bounded, its end told to
//! serve's loop by a thread that waits for it, stopped as a group.

use super::harness::{Command, Emit, Event, Exit, Harness, Kept};
use crate::machine::{group, Runtime};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most of the harness's standard output kept (its tail): Claude Code's final JSON result.
pub const OUTPUT_KEPT_BYTES_MAX: usize = 256 * 1024;
/// Why a steer of a Claude Code turn is undelivered: `claude -p` reads the owner's words once.
pub const PRINT_MODE_TAKES_NO_STEER: &str =
    "Claude Code in print mode reads the owner's words once, at its start: send them as the next turn";
/// After SIGKILL, how long a stop waits for the waiting thread to see the exit.
const REAPED_WAIT_MS: u64 = 1_000;

/// What to run: `program args` with `vars` set and `remove` taken out, `input` on its standard
/// input (then closed).
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
    /// The owner's steers: print mode reads its words once, so they are reported undelivered
    /// when it ends.
    kept: Kept,
    emit: Emit,
    exit: Exit,
}

/// Starts it; its end is told to `emit` as [`Event::Gone`].
pub fn spawn(s: &Spawn<'_>, emit: Emit) -> std::io::Result<ClaudeCode> {
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
    if let Some(stdout) = child.stdout.take() {
        drain(stdout, Some(out.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        drain(stderr, None);
    }
    if let Some(mut stdin) = child.stdin.take() {
        let input = s.input.to_string();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    let (pid, turn, exit, kept) = (child.id(), s.turn, Exit::default(), Kept::new());
    let (seen, steers, told) = (exit.clone(), kept.clone(), emit.clone());
    std::thread::spawn(move || {
        let how = child.wait().map_or_else(|e| format!("unknown ({e})"), group::describe);
        for (id, _) in steers.close() {
            emit(turn, Event::Steered { id, delivered: Err(PRINT_MODE_TAKES_NO_STEER.to_string()) });
        }
        seen.set(how.clone());
        emit(turn, Event::Gone { how });
    });
    Ok(ClaudeCode { pid, turn, started: Instant::now(), out, kept, emit: told, exit })
}

/// Reads `from` to its end, keeping only the last [`OUTPUT_KEPT_BYTES_MAX`] bytes (or none).
fn drain(mut from: impl Read + Send + 'static, keep: Option<Arc<Mutex<Vec<u8>>>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Some(keep) = &keep {
                let mut kept = keep.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > OUTPUT_KEPT_BYTES_MAX {
                    let cut = kept.len() - OUTPUT_KEPT_BYTES_MAX;
                    kept.drain(..cut);
                }
            }
        }
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
            // Kept, and reported undelivered once the turn ends (its waiting thread says so).
            Command::Steer { id, prompt } => {
                if !self.kept.keep(id.clone(), prompt) {
                    (self.emit)(
                        self.turn,
                        Event::Steered { id, delivered: Err(PRINT_MODE_TAKES_NO_STEER.to_string()) },
                    );
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
        spawn(&s, Arc::new(|_, _| {})).unwrap()
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
        let h = spawn(&s, Arc::new(move |turn, e| tx.send((turn, e)).unwrap())).unwrap();
        let told = rx.recv_timeout(Duration::from_secs(10)).expect("its end is told");
        assert_eq!(told, (7, Event::Gone { how: "exit 0".into() }));
        std::thread::sleep(Duration::from_millis(100));
        let out = h.output();
        assert!(out.len() <= OUTPUT_KEPT_BYTES_MAX && out.ends_with("END\n"), "{}", out.len());
    }
}
