//! Every path in the state folder, named once, and the hand-off's lock on this machine.
//!
//! ```text
//! STATE/hook.log                       the hooks', launch's, serve's and the MCP server's log
//! STATE/spool/ID.jsonl, ID.lock        the hooks' spool of reports not yet delivered
//! STATE/seen/ID.json                   what the hooks last saw of the hand-off
//! STATE/tokens/ID.token                the machine token a harness's hooks and server read (0600)
//! STATE/serve/ID.json                  serve's state record: the turns it started
//! STATE/serve/ID.lock                  held by the one serve (or launch) running ID's turns
//! STATE/launch/ID-turn-N.last-message.txt  Codex exec's final message, for the launcher
//! STATE/mcp/ID.served                  when the MCP server last served ID
//! ```

use super::env::ENV_STATE_DIR;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The state folder: `HANDOFF_STATE_DIR`, else `$XDG_STATE_HOME/handoff`, else
/// `~/.local/state/handoff`.
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(d) = env(ENV_STATE_DIR).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = env("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("handoff");
    }
    let home = env("HOME").unwrap_or_else(|| ".".into());
    PathBuf::from(home).join(".local").join("state").join("handoff")
}

/// `STATE/hook.log`.
pub fn log_file(state_dir: &Path) -> PathBuf {
    state_dir.join("hook.log")
}

/// `STATE/spool`.
pub fn spool_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spool")
}

/// `STATE/timeline`: the served turns' events not yet taken by the service, one file a turn.
pub fn timeline_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("timeline")
}

/// `STATE/timeline/ID-turn-N.jsonl`: turn `turn`'s events waiting for the service.
pub fn timeline_spool(state_dir: &Path, id: &str, turn: u64) -> PathBuf {
    timeline_dir(state_dir).join(format!("{id}-turn-{turn}.jsonl"))
}

/// `STATE/seen/ID.json`.
pub fn seen_file(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("seen").join(format!("{id}.json"))
}

/// `STATE/tokens/ID.token`: the 0600 file that holds hand-off `id`'s machine token for the
/// hooks and the MCP server of a harness (its path goes down as `HANDOFF_TOKEN_FILE`).
pub fn token_file(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("tokens").join(format!("{id}.token"))
}

/// `STATE/serve/ID.json`: the turns serve started on this machine.
pub fn serve_record(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("serve").join(format!("{id}.json"))
}

/// `STATE/serve/ID.lock`: held (`flock`, exclusive) for the life of a serve, or a launch's
/// turn; holds its pid.
pub fn lock_file(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("serve").join(format!("{id}.lock"))
}

/// `STATE/launch/ID-turn-N.last-message.txt`: where Codex's exec writes its final message.
pub fn last_message(state_dir: &Path, id: &str, turn: u64) -> PathBuf {
    state_dir.join("launch").join(format!("{id}-turn-{turn}.last-message.txt"))
}

/// `STATE/mcp/ID.served`: the time (epoch ms) the MCP server last served hand-off `id`.
pub fn served_marker(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("mcp").join(format!("{id}.served"))
}

/// When the MCP server last served hand-off `id` (epoch ms), if it ever did.
pub fn served_since(state_dir: &Path, id: &str) -> Option<i64> {
    std::fs::read_to_string(served_marker(state_dir, id)).ok()?.trim().parse().ok()
}

/// The hand-off's lock; released when dropped (or when the process dies, however it dies).
pub struct Lock {
    _file: File,
}

/// Takes hand-off `id`'s lock on this machine, or answers the pid of the serve (or launch)
/// that holds it: one runner of its turns at a time.
#[cfg(unix)]
pub fn lock(state_dir: &Path, id: &str) -> Result<Lock, String> {
    use std::os::unix::io::AsRawFd;
    let path = lock_file(state_dir, id);
    let dir = path.parent().expect("a file in a folder");
    crate::private::dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut file = crate::private::open(&path, std::fs::OpenOptions::new().create(true).read(true).write(true))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !taken {
        let mut pid = String::new();
        let _ = file.read_to_string(&mut pid);
        let pid = pid.trim();
        let holder = if pid.is_empty() { "another process".to_string() } else { format!("pid {pid}") };
        return Err(format!("{holder} runs {id}'s turns on this machine, a handoff serve or launch (it holds the lock {}): stop it first", path.display()));
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    let _ = file.flush();
    Ok(Lock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "handoff-machine-lock-{}-{}",
            std::process::id(),
            crate::client::new_idempotency_key()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_second_lock_on_the_same_hand_off_is_refused_naming_the_first_holders_pid() {
        let d = dir();
        let first = lock(&d, "h_1").unwrap();
        let refused = lock(&d, "h_1").err().expect("a second serve is refused");
        assert!(refused.contains(&format!("pid {}", std::process::id())), "{refused}");
        assert!(lock(&d, "h_2").is_ok(), "another hand-off has its own lock");
        drop(first);
        assert!(lock(&d, "h_1").is_ok(), "the lock goes with its holder");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn the_state_folder_is_the_variable_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(state_dir(&env(&[(ENV_STATE_DIR, "/s"), ("HOME", "/h")])), PathBuf::from("/s"));
        assert_eq!(state_dir(&env(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")])), PathBuf::from("/x/handoff"));
        assert_eq!(state_dir(&env(&[("HOME", "/h")])), PathBuf::from("/h/.local/state/handoff"));
    }
}
