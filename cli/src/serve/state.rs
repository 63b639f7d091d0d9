//! What `handoff serve` keeps on this machine, in the private state folder: the state record
//! (which turns it started, with which harness session) and the lock that keeps one serve per
//! hand-off.

use super::decide::Local;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// `STATE/serve/ID.json`: the turns this machine started.
pub fn record_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("serve").join(format!("{id}.json"))
}

/// `STATE/serve/ID.lock`: held (`flock`, exclusive) for the life of a serve, or a launch's
/// turn; holds its pid.
pub fn lock_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("serve").join(format!("{id}.lock"))
}

/// The state record; an absent file is an empty one. A file that cannot be read is an error:
/// serve would otherwise run again a turn it started.
pub fn load(state_dir: &Path, id: &str) -> Result<Local, String> {
    let path = record_path(state_dir, id);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Local::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the state record whole (a temporary file renamed over it) and syncs it, so that a
/// harness is never started on a record that could be lost.
pub fn store(state_dir: &Path, id: &str, local: &Local) -> Result<(), String> {
    let path = record_path(state_dir, id);
    let dir = path.parent().expect("a file in a folder");
    crate::private::dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string(local).map_err(|e| e.to_string())?;
    let write = || -> std::io::Result<()> {
        let mut f = crate::private::open(&tmp, std::fs::OpenOptions::new().create(true).write(true).truncate(true))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| format!("{}: {e}", path.display()))
}

/// The held lock; released when dropped (or when the process dies, however it dies).
pub struct Lock {
    _file: File,
}

/// Takes the hand-off's lock, or answers the pid of the serve (or launch) that holds it.
#[cfg(unix)]
pub fn lock(state_dir: &Path, id: &str) -> Result<Lock, String> {
    use std::os::unix::io::AsRawFd;
    let path = lock_path(state_dir, id);
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
    use crate::serve::decide::Started;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "handoff-serve-state-{}-{}",
            std::process::id(),
            crate::client::new_idempotency_key()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_state_record_is_read_back_as_written_and_an_absent_one_is_empty() {
        let d = dir();
        assert_eq!(load(&d, "h_1").unwrap(), Local::default());
        let mut local = Local { version: 9, ..Local::default() };
        local.turns.insert(
            2,
            Started {
                runtime: "claude-code".into(),
                session: "u-1".into(),
                started_ms: 5,
                group: None,
                ended: None,
                settled: false,
            },
        );
        store(&d, "h_1", &local).unwrap();
        assert_eq!(load(&d, "h_1").unwrap(), local);
        std::fs::write(record_path(&d, "h_1"), "{not json").unwrap();
        assert!(load(&d, "h_1").is_err(), "a record that cannot be read stops serve");
        let _ = std::fs::remove_dir_all(d);
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
}
