//! The harness as `handoff serve` runs it: a child in a process group of its own, given a
//! parent-death signal on Linux, its output drained and bounded, stopped as a group.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most of the harness's standard output kept (its tail): Claude Code's final JSON result.
pub const OUTPUT_KEPT_BYTES_MAX: usize = 256 * 1024;
/// After SIGTERM to its group, a harness gets this long before SIGKILL.
pub const STOP_GRACE_MS: u64 = 2_000;

/// A running harness.
pub struct Harness {
    child: Child,
    pub turn: u64,
    pub runtime: String,
    /// The tail of its standard output.
    out: Arc<Mutex<Vec<u8>>>,
    pub started: Instant,
}

/// Starts `program args` in `cwd` with `vars`, `input` written to its standard input (then
/// closed), in a new process group, with SIGKILL as its parent-death signal.
pub fn spawn(
    program: &Path,
    args: &[String],
    vars: &[(&str, String)],
    remove: &[&str],
    input: &str,
    turn: u64,
    runtime: &str,
) -> std::io::Result<Harness> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for name in remove {
        cmd.env_remove(name);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    own_group_dying_with_parent(&mut cmd);
    let mut child = cmd.spawn()?;
    let out = Arc::new(Mutex::new(Vec::new()));
    if let Some(stdout) = child.stdout.take() {
        drain(stdout, Some(out.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        drain(stderr, None);
    }
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_string();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    Ok(Harness { child, turn, runtime: runtime.to_string(), out, started: Instant::now() })
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

impl Harness {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit, once it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// What it wrote on standard output (the kept tail).
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Ends its whole process group: SIGTERM, then SIGKILL after [`STOP_GRACE_MS`]. Answers
    /// its exit.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let group = self.child.id() as i32;
        signal_group(group, libc::SIGTERM);
        let until = Instant::now() + Duration::from_millis(STOP_GRACE_MS);
        while Instant::now() < until {
            if let Some(status) = self.exited() {
                // Grandchildren left in the group go with it.
                signal_group(group, libc::SIGKILL);
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        signal_group(group, libc::SIGKILL);
        self.child.wait().ok()
    }
}

fn signal_group(group: i32, signal: i32) {
    // SAFETY: a signal to the process group this serve created for its child.
    unsafe {
        libc::killpg(group, signal);
    }
}

/// Kills (SIGKILL) every process left of a served harness of hand-off `id`: those whose
/// environment names the hand-off and says it is served. Claude Code starts its hooks in
/// process groups of their own, so a group's end does not reach a hook still waiting for an
/// answer. Only the serve holding the hand-off's lock calls this. Answers how many it ended.
pub fn end_leftovers(id: &str) -> usize {
    let mut ended = 0;
    let served = format!("{}=1", crate::hook::ENV_SERVED);
    let named = format!("HANDOFF_ID={id}");
    let me = std::process::id() as i32;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == me {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if vars.contains(&served.as_bytes()) && vars.contains(&named.as_bytes()) {
            // SAFETY: a signal to a process of this hand-off's served harness.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            ended += 1;
        }
    }
    ended
}

/// An exit as the log and a summary say it: `exit 3`, `signal 9`.
pub fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("signal {signal}");
    }
    format!("exit {}", status.code().unwrap_or(-1))
}

/// The child leads a process group of its own, and on Linux is killed when this process dies
/// (armed between fork and exec; a parent already gone by then ends the child at once).
#[cfg(unix)]
pub(crate) fn own_group_dying_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: `prctl` and `getppid` are async-signal-safe, as `pre_exec` requires.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_harness_is_ended_with_its_whole_process_group() {
        let sh = Path::new("/bin/sh");
        let args = vec!["-c".to_string(), "sleep 30 & echo $!; wait".to_string()];
        let mut h = spawn(sh, &args, &[], &[], "", 1, "test").unwrap();
        let grandchild = loop {
            if let Ok(pid) = h.output().trim().parse::<i32>() {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let started = Instant::now();
        let status = h.stop().expect("it ended");
        assert!(started.elapsed() < Duration::from_secs(5), "stopped within 5 s");
        assert_eq!(describe(status), "signal 15");
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(grandchild, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default().contains(") Z");
        assert!(!alive, "the grandchild went with the group");
    }

    #[test]
    fn the_harness_output_is_drained_and_only_its_tail_kept() {
        let sh = Path::new("/bin/sh");
        let args = vec!["-c".to_string(), "head -c 1000000 /dev/zero | tr '\\0' a; echo END".to_string()];
        let mut h = spawn(sh, &args, &[], &[], "", 1, "test").unwrap();
        while h.exited().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        let out = h.output();
        assert!(out.len() <= OUTPUT_KEPT_BYTES_MAX && out.ends_with("END\n"), "{}", out.len());
    }
}
