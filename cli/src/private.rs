//! The machine's private files: the hooks' state folder, spool, log and seen turns, the MCP
//! server's marker and the launcher's token file hold summaries, commands, final messages and
//! credentials. Folders are 0700 and files 0600 whatever the umask: created with those modes,
//! and an existing one set back to them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// A private folder's mode.
pub const DIR_MODE: u32 = 0o700;
/// A private file's mode.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and each missing parent) 0700, and sets `dir` back to 0700 when it exists
/// with another mode.
pub fn dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
        if std::fs::metadata(dir)?.permissions().mode() & 0o777 != DIR_MODE {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// Opens `path` as `options` say, creating it 0600, and sets an existing file back to 0600.
pub fn open(path: &Path, options: &mut OpenOptions) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let file = options.mode(FILE_MODE).open(path)?;
        if file.metadata()?.permissions().mode() & 0o777 != FILE_MODE {
            file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Writes `bytes` to `path` whole (created or truncated), 0600.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open(path, OpenOptions::new().create(true).write(true).truncate(true))?.write_all(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn folders_are_0700_and_files_0600_whatever_the_umask_and_existing_ones_are_set_back() {
        let root = std::env::temp_dir().join(format!("handoff-private-{}", std::process::id()));
        for umask in [0o000, 0o022] {
            // SAFETY: umask only changes this process's creation mask; it is restored below.
            let before = unsafe { libc::umask(umask) };
            let d = root.join(format!("u{umask:o}")).join("spool");
            dir(&d).unwrap();
            write(&d.join("a.jsonl"), b"x").unwrap();
            let appended = open(&d.join("b.log"), OpenOptions::new().create(true).append(true)).unwrap();
            drop(appended);
            unsafe { libc::umask(before) };
            assert_eq!((mode(&d), mode(d.parent().unwrap())), (0o700, 0o700), "umask {umask:o}");
            assert_eq!((mode(&d.join("a.jsonl")), mode(&d.join("b.log"))), (0o600, 0o600), "umask {umask:o}");
        }
        let old = root.join("old");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(old.join("hook.log"), b"x").unwrap();
        std::fs::set_permissions(old.join("hook.log"), std::fs::Permissions::from_mode(0o644)).unwrap();
        dir(&old).unwrap();
        drop(open(&old.join("hook.log"), OpenOptions::new().append(true)).unwrap());
        assert_eq!(
            (mode(&old), mode(&old.join("hook.log"))),
            (0o700, 0o600),
            "an earlier build's 0755/0644 are set back"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
