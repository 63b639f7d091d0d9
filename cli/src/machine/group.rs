//! A harness's process group: started leading a group of its own (with a parent-death signal
//! on Linux), stopped as a group with one grace period, and what a served harness left found
//! and ended by its environment.

use super::env::{ENV_ID, ENV_SERVED};
use std::process::Command;
use std::time::{Duration, Instant};

/// After SIGTERM to its group, a harness gets this long before SIGKILL.
pub const STOP_GRACE_MS: u64 = 2_000;
/// How often a stop looks whether the group's leader has exited.
const STOP_POLL_MS: u64 = 20;

/// The child leads a process group of its own, and on Linux is killed when this process dies
/// (armed between fork and exec; a parent already gone by then ends the child at once).
#[cfg(unix)]
pub fn own_group_dying_with_parent(cmd: &mut Command) {
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

/// Ends the process group `leader` leads: SIGTERM, then, once `exited` answers or after
/// [`STOP_GRACE_MS`], SIGKILL (grandchildren left in the group go with it). Answers what
/// `exited` answered within the grace period.
pub fn stop<T>(leader: u32, exited: impl FnMut() -> Option<T>) -> Option<T> {
    stop_within(leader, STOP_GRACE_MS, exited)
}

/// [`stop`] with a grace period of `grace_ms`.
pub fn stop_within<T>(leader: u32, grace_ms: u64, mut exited: impl FnMut() -> Option<T>) -> Option<T> {
    signal(leader, libc::SIGTERM);
    let until = Instant::now() + Duration::from_millis(grace_ms);
    let status = loop {
        if let Some(status) = exited() {
            break Some(status);
        }
        if Instant::now() >= until {
            break None;
        }
        std::thread::sleep(Duration::from_millis(STOP_POLL_MS));
    };
    signal(leader, libc::SIGKILL);
    status
}

fn signal(leader: u32, signal: i32) {
    // SAFETY: a signal to the process group this serve or launch created for its child.
    unsafe {
        libc::killpg(leader as libc::pid_t, signal);
    }
}

/// Kills (SIGKILL) every process left of a served harness of hand-off `id`: those whose
/// environment names the hand-off and says it is served. Claude Code starts its hooks in
/// process groups of their own, so a group's end does not reach a hook still waiting for an
/// answer. Only the serve holding the hand-off's lock calls this. Answers how many it ended.
pub fn end_leftovers(id: &str) -> usize {
    let mut ended = 0;
    let served = format!("{ENV_SERVED}=1");
    let named = format!("{ENV_ID}={id}");
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
pub fn describe(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("signal {signal}");
    }
    format!("exit {}", status.code().unwrap_or(-1))
}
