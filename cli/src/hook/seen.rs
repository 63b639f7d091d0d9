//! What the hooks last saw of their hand-off: its current turn and that turn's status, kept in
//! a small file beside the spool so that a hook reports without asking the service first, and
//! still knows its turn when the network is gone.
//!
//! The rule it serves: a hook reports only for a turn it saw open, and never for one it saw
//! end. A report it spools moves the status it saw at once (so a `Notification` after a `Stop`
//! of the same turn reports nothing), before the service has answered it.

use crate::client::Handoff;
use handoff_core::turn::{ReportStatus, State, Status};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub turn: u64,
    pub status: Status,
    pub closed: bool,
    /// The version the service answered last (a report spooled since does not move it).
    pub version: u64,
    /// When this machine last reported its runtimes (ms since the epoch).
    #[serde(default)]
    pub runtimes_reported_ms: Option<i64>,
}

impl Seen {
    pub fn of(h: &Handoff, before: Option<&Seen>) -> Seen {
        Seen {
            turn: h.turn,
            status: h.status,
            closed: h.state == State::Closed,
            version: h.version,
            runtimes_reported_ms: before.and_then(|b| b.runtimes_reported_ms),
        }
    }

    /// The turn a report is for, or why there is none.
    pub fn turn_for_report(seen: Option<&Seen>) -> Result<u64, String> {
        match seen {
            None => Err("no turn of this hand-off has been seen open".into()),
            Some(s) if s.closed => Err("the hand-off is closed".into()),
            Some(s) if s.status.has_ended() => Err(format!("turn {} has ended ({})", s.turn, s.status.as_str())),
            Some(s) => Ok(s.turn),
        }
    }

    /// After spooling a report of `status` for the current turn.
    pub fn reported(mut self, status: ReportStatus) -> Seen {
        self.status = status.into();
        self
    }
}

/// The file of hand-off `id` under `dir`.
pub fn path(dir: &Path, id: &str) -> PathBuf {
    crate::machine::paths::seen_file(dir, id)
}

pub fn load(dir: &Path, id: &str) -> Option<Seen> {
    let text = std::fs::read_to_string(path(dir, id)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Written whole and renamed into place.
pub fn store(dir: &Path, id: &str, seen: &Seen) -> std::io::Result<()> {
    let file = path(dir, id);
    if let Some(parent) = file.parent() {
        crate::private::dir(parent.parent().unwrap_or(parent))?;
        crate::private::dir(parent)?;
    }
    let tmp = file.with_extension("json.tmp");
    crate::private::write(&tmp, &serde_json::to_vec(seen).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(turn: u64, status: Status, closed: bool) -> Seen {
        Seen { turn, status, closed, version: 3, runtimes_reported_ms: None }
    }

    #[test]
    fn a_report_is_for_a_turn_seen_open_and_never_one_seen_ended() {
        assert!(Seen::turn_for_report(None).is_err(), "never saw a turn");
        assert_eq!(Seen::turn_for_report(Some(&seen(2, Status::Running, false))), Ok(2));
        assert_eq!(Seen::turn_for_report(Some(&seen(2, Status::NeedsYou, false))), Ok(2));
        for ended in [Status::Done, Status::Failed, Status::Cancelled] {
            assert!(Seen::turn_for_report(Some(&seen(2, ended, false))).is_err(), "{ended:?}");
        }
        assert!(Seen::turn_for_report(Some(&seen(2, Status::Running, true))).is_err(), "closed");
    }

    #[test]
    fn a_spooled_final_report_ends_the_turn_the_hooks_see() {
        let s = seen(4, Status::Running, false).reported(ReportStatus::Done);
        assert!(Seen::turn_for_report(Some(&s)).is_err());
        assert_eq!(s.version, 3, "the service's version moves only when it answers");
    }

    #[test]
    fn what_was_seen_survives_the_process() {
        let d = std::env::temp_dir().join(format!("handoff-seen-{}", std::process::id()));
        let s = Seen { runtimes_reported_ms: Some(9), ..seen(7, Status::NeedsYou, false) };
        store(&d, "ho_1", &s).unwrap();
        assert_eq!(load(&d, "ho_1"), Some(s));
        assert_eq!(load(&d, "ho_2"), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
