//! serve's state record in the private state folder (`STATE/serve/ID.json`, named in
//! [`crate::machine::paths`]): which turns it started, with which harness session, in which
//! life of the hand-off. The lock that keeps one runner per hand-off is
//! [`crate::machine::paths::lock`].

use super::decide::Local;
use crate::machine::paths::serve_record;
use std::io::Write;
use std::path::Path;

/// The state record; an absent file is an empty one. A file that cannot be read is an error:
/// serve would otherwise run again a turn it started.
pub fn load(state_dir: &Path, id: &str) -> Result<Local, String> {
    let path = serve_record(state_dir, id);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Local::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the state record whole (a temporary file renamed over it), syncing the file and
/// then its folder, so that a harness is never started on a record that could be lost. The
/// error names the path that could not be written.
pub fn store(state_dir: &Path, id: &str, local: &Local) -> Result<(), String> {
    let path = serve_record(state_dir, id);
    let dir = path.parent().expect("a file in a folder");
    crate::private::dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string(local).map_err(|e| e.to_string())?;
    let write = || -> std::io::Result<()> {
        let mut f = crate::private::open(&tmp, std::fs::OpenOptions::new().create(true).write(true).truncate(true))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    };
    write().map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::decide::Started;
    use std::path::PathBuf;

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
        let mut local = Local { version: 9, incarnation: Some(0), ..Local::default() };
        local.turns.insert(
            2,
            Started {
                runtime: "claude-code".into(),
                session: "u-1".into(),
                started_ms: 5,
                group: None,
                ended: None,
                settled: false,
                refused: None,
            },
        );
        store(&d, "h_1", &local).unwrap();
        assert_eq!(load(&d, "h_1").unwrap(), local);
        std::fs::write(serve_record(&d, "h_1"), "{not json").unwrap();
        assert!(load(&d, "h_1").is_err(), "a record that cannot be read stops serve");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_record_of_the_older_build_without_its_life_is_read() {
        let d = dir();
        let older = r#"{"turns":{"1":{"runtime":"claude-code","session":"u","started_ms":1}},"version":4}"#;
        std::fs::create_dir_all(d.join("serve")).unwrap();
        std::fs::write(serve_record(&d, "h_1"), older).unwrap();
        let local = load(&d, "h_1").unwrap();
        assert_eq!((local.incarnation, local.version, local.turns.len()), (None, 4, 1));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_state_record_that_cannot_be_written_is_an_error_naming_where() {
        let d = dir();
        std::fs::create_dir_all(serve_record(&d, "h_1").with_extension("json.tmp")).unwrap();
        let refused = store(&d, "h_1", &Local::default()).expect_err("a folder where the file goes");
        assert!(refused.contains("h_1.json.tmp"), "{refused}");
        let _ = std::fs::remove_dir_all(d);
    }
}
