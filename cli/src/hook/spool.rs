//! The local spool: every change a hook makes (a report, the runtimes, a turn's events) is
//! written here first, with its `Idempotency-Key`, and leaves only when the service has
//! answered it. One file of JSON lines per hand-off; a hook appends its own entry at the end
//! and delivers from the front, so changes arrive in the order the hooks made them, and a send
//! whose answer was lost is sent again with the same key, which the service applies once (a
//! batch of events repeats by its `seq`s, which change nothing the second time).
//!
//! Invariants:
//! - an entry is appended with one write under the spool's lock, and removed only after it
//!   was answered or dropped; a crash between the two sends it again, under its key;
//! - the file never passes [`SPOOL_BYTES_MAX`]: an append that would pass it drops the oldest
//!   entries first (a newer report supersedes them), and says which;
//! - an entry older than [`SPOOL_ENTRY_AGE_MS_MAX`] is dropped unsent: the service remembers a
//!   key for 25 h, so an older one could apply twice.
//!
//! The lock is held only around reading and rewriting the file, never across a request: two
//! hooks that deliver at once may both send an entry, and its key makes that one change.

use crate::client::{Batch, ReportInput, RuntimesInput};
use handoff_core::limits::TIMELINE_EVENTS_PER_REQUEST_MAX;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bytes one hand-off's spool may hold.
pub const SPOOL_BYTES_MAX: usize = 256 * 1024;
/// How long an entry may wait for delivery: under the service's 25 h memory of a key.
pub const SPOOL_ENTRY_AGE_MS_MAX: i64 = 24 * 60 * 60 * 1000;

/// A change a hook sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "body", rename_all = "snake_case")]
pub enum Send {
    /// `POST …/report` (boxed: a report is many times the size of the other changes).
    Report(Box<ReportInput>),
    /// `PUT …/runtimes`.
    Runtimes(RuntimesInput),
    /// `POST …/events`: a turn's events, numbered by the hooks' counter.
    Events(Batch),
}

/// One change waiting for delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The `Idempotency-Key` it is sent with, every time.
    pub key: String,
    /// When the hook spooled it (ms since the epoch).
    pub at_ms: i64,
    /// Which hook event made it, for the log.
    pub event: String,
    pub send: Send,
}

pub struct Spool {
    path: PathBuf,
    lock_path: PathBuf,
}

impl Spool {
    /// The spool of hand-off `id` under `dir` (created when missing).
    pub fn open(dir: &Path, id: &str) -> std::io::Result<Spool> {
        let dir = crate::machine::paths::spool_dir(dir);
        crate::private::dir(dir.parent().unwrap_or(&dir))?;
        crate::private::dir(&dir)?;
        Ok(Spool { path: dir.join(format!("{id}.jsonl")), lock_path: dir.join(format!("{id}.lock")) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry`, first dropping the oldest entries the cap needs; answers those dropped.
    pub fn append(&self, entry: &Entry) -> std::io::Result<Vec<Entry>> {
        let line = line_of(entry)?;
        let _lock = self.lock()?;
        let entries = self.read_unlocked()?;
        let held: usize = entries.iter().map(|e| line_of(e).map_or(0, |l| l.len())).sum();
        if held + line.len() <= SPOOL_BYTES_MAX {
            // A write torn by a crash left a line without its end: end it, so that this entry
            // starts a line of its own.
            let torn = std::fs::read(&self.path).is_ok_and(|b| b.last().is_some_and(|c| *c != b'\n'));
            let line = if torn { format!("\n{line}") } else { line };
            let mut file = crate::private::open(&self.path, OpenOptions::new().create(true).append(true))?;
            file.write_all(line.as_bytes())?;
            file.sync_data()?;
            return Ok(Vec::new());
        }
        let (dropped, kept) = fit(entries, line.len());
        let mut kept = kept;
        kept.push(entry.clone());
        self.write_unlocked(&kept)?;
        Ok(dropped)
    }

    /// Every entry, oldest first. A line that does not read (a torn write) is skipped.
    pub fn entries(&self) -> std::io::Result<Vec<Entry>> {
        let _lock = self.lock()?;
        self.read_unlocked()
    }

    /// Removes the entry with `key`, keeping any appended meanwhile.
    pub fn remove(&self, key: &str) -> std::io::Result<()> {
        let _lock = self.lock()?;
        let entries = self.read_unlocked()?;
        if entries.iter().any(|e| e.key == key) {
            let kept: Vec<Entry> = entries.into_iter().filter(|e| e.key != key).collect();
            self.write_unlocked(&kept)?;
        }
        Ok(())
    }

    fn lock(&self) -> std::io::Result<File> {
        let file = crate::private::open(&self.lock_path, OpenOptions::new().create(true).truncate(false).write(true))?;
        file.lock()?;
        Ok(file)
    }

    fn read_unlocked(&self) -> std::io::Result<Vec<Entry>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
    }

    /// Replaces the file whole: a new file renamed over the old one, so a crash leaves one or
    /// the other.
    fn write_unlocked(&self, entries: &[Entry]) -> std::io::Result<()> {
        if entries.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let mut text = String::new();
        for e in entries {
            text.push_str(&line_of(e)?);
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut file = crate::private::open(&tmp, OpenOptions::new().create(true).write(true).truncate(true))?;
        file.write_all(text.as_bytes())?;
        file.sync_data()?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// The events of `entries`' first ones as one batch, and how many entries it joins: the
/// entries from the first on that hold events of one turn, each batch's `seq`s following the
/// one before, none older than [`SPOOL_ENTRY_AGE_MS_MAX`] at `now_ms`, at most
/// [`TIMELINE_EVENTS_PER_REQUEST_MAX`] events in all. `None` unless it joins two or more: what
/// a network cut left goes in a few requests, in order.
pub fn events_run(entries: &[Entry], now_ms: i64) -> Option<(Batch, usize)> {
    let mut joined: Option<Batch> = None;
    let mut count = 0;
    for entry in entries {
        let Send::Events(batch) = &entry.send else { break };
        if now_ms - entry.at_ms > SPOOL_ENTRY_AGE_MS_MAX {
            break;
        }
        match joined.as_mut() {
            None => joined = Some(batch.clone()),
            Some(run) => {
                let follows = run.events.last().map(|e| e.seq + 1) == batch.events.first().map(|e| e.seq);
                let fits = run.events.len() + batch.events.len() <= TIMELINE_EVENTS_PER_REQUEST_MAX;
                if run.turn != batch.turn || !follows || !fits {
                    break;
                }
                run.events.extend(batch.events.iter().cloned());
            }
        }
        count += 1;
    }
    joined.filter(|_| count > 1).map(|run| (run, count))
}

fn line_of(entry: &Entry) -> std::io::Result<String> {
    let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    line.push('\n');
    Ok(line)
}

/// Splits `entries` into the oldest ones dropped and the rest, so that the rest and a new line
/// of `incoming` bytes fit [`SPOOL_BYTES_MAX`].
fn fit(entries: Vec<Entry>, incoming: usize) -> (Vec<Entry>, Vec<Entry>) {
    let sizes: Vec<usize> = entries.iter().map(|e| line_of(e).map_or(0, |l| l.len())).collect();
    let mut held: usize = sizes.iter().sum::<usize>() + incoming;
    let mut first_kept = 0;
    while held > SPOOL_BYTES_MAX && first_kept < entries.len() {
        held -= sizes[first_kept];
        first_kept += 1;
    }
    let mut entries = entries;
    let kept = entries.split_off(first_kept);
    (entries, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ReportInput;
    use handoff_core::turn::ReportStatus;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("handoff-spool-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn entry(key: &str, summary_bytes: usize) -> Entry {
        let summary = Some("s".repeat(summary_bytes));
        let report = ReportInput {
            turn: 1,
            status: ReportStatus::Running,
            summary,
            unmet: None,
            usage: None,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        };
        Entry { key: key.into(), at_ms: 1, event: "Stop".into(), send: Send::Report(Box::new(report)) }
    }

    #[test]
    fn entries_come_back_in_the_order_appended_until_each_is_removed() {
        let d = dir("order");
        let spool = Spool::open(&d, "ho_1").unwrap();
        for k in ["a", "b", "c"] {
            assert!(spool.append(&entry(k, 10)).unwrap().is_empty());
        }
        let keys = |s: &Spool| s.entries().unwrap().into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(keys(&spool), ["a", "b", "c"]);
        spool.remove("b").unwrap();
        assert_eq!(keys(&spool), ["a", "c"]);
        let reopened = Spool::open(&d, "ho_1").unwrap();
        assert_eq!(keys(&reopened), ["a", "c"], "the spool outlives the process that wrote it");
        reopened.remove("a").unwrap();
        reopened.remove("c").unwrap();
        assert!(!reopened.path().exists(), "an empty spool leaves no file");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_torn_line_is_skipped_and_the_rest_still_read() {
        let d = dir("torn");
        let spool = Spool::open(&d, "ho_1").unwrap();
        spool.append(&entry("a", 10)).unwrap();
        OpenOptions::new().append(true).open(spool.path()).unwrap().write_all(b"{\"key\":\"half").unwrap();
        spool.append(&entry("b", 10)).unwrap();
        let keys: Vec<String> = spool.entries().unwrap().into_iter().map(|e| e.key).collect();
        assert_eq!(keys, ["a", "b"], "b starts a line of its own after the torn one");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn events(key: &str, turn: u64, seqs: std::ops::RangeInclusive<u64>, at_ms: i64) -> Entry {
        let step = crate::hook::timeline::Step::new(Some("t"), Some("Bash"), crate::client::ToolState::Started);
        let events = seqs.map(|seq| crate::hook::timeline::metadata_event(seq, &step, None)).collect();
        Entry { key: key.into(), at_ms, event: "PreToolUse".into(), send: Send::Events(Batch { turn, events }) }
    }

    #[test]
    fn a_turns_spooled_events_that_follow_each_other_go_as_one_batch_in_order() {
        let now = SPOOL_ENTRY_AGE_MS_MAX + 10;
        let seqs = |b: &Batch| b.events.iter().map(|e| e.seq).collect::<Vec<_>>();
        let run = [events("a", 2, 3..=3, now), events("b", 2, 4..=5, now), events("c", 2, 6..=6, now)];
        let (batch, n) = events_run(&run, now).unwrap();
        assert_eq!((batch.turn, seqs(&batch), n), (2, vec![3, 4, 5, 6], 3));

        let report = entry("r", 1);
        let cut = [events("a", 2, 3..=3, now), events("b", 2, 4..=4, now), report.clone(), events("c", 2, 5..=5, now)];
        assert_eq!(events_run(&cut, now).map(|(_, n)| n), Some(2), "a report between keeps the order");
        let other_turn = [events("a", 2, 3..=3, now), events("b", 3, 1..=1, now)];
        assert_eq!(events_run(&other_turn, now), None, "one turn a batch");
        let gap = [events("a", 2, 3..=3, now), events("b", 2, 5..=5, now)];
        assert_eq!(events_run(&gap, now), None, "a gap is never joined over");
        let aged = [events("a", 2, 3..=3, now), events("b", 2, 4..=4, 1)];
        assert_eq!(events_run(&aged, now), None, "an entry past its age is dropped on its own");
        assert_eq!(events_run(&[report, events("a", 2, 1..=1, now)], now), None, "a run starts with events");
        let many: Vec<Entry> = (1..=100).map(|s| events(&format!("k{s}"), 1, s..=s, now)).collect();
        let (batch, n) = events_run(&many, now).unwrap();
        assert_eq!((batch.events.len(), n), (TIMELINE_EVENTS_PER_REQUEST_MAX, TIMELINE_EVENTS_PER_REQUEST_MAX));
    }

    #[test]
    fn the_spool_never_passes_its_cap_and_drops_the_oldest_first() {
        let d = dir("cap");
        let spool = Spool::open(&d, "ho_1").unwrap();
        let per = SPOOL_BYTES_MAX / 10;
        let mut dropped = Vec::new();
        for i in 0..25 {
            dropped.extend(spool.append(&entry(&format!("k{i:02}"), per)).unwrap().into_iter().map(|e| e.key));
        }
        let size = std::fs::metadata(spool.path()).unwrap().len() as usize;
        assert!(size <= SPOOL_BYTES_MAX, "{size}");
        let kept: Vec<String> = spool.entries().unwrap().into_iter().map(|e| e.key).collect();
        assert_eq!(kept.last().map(String::as_str), Some("k24"), "the newest is always kept");
        let all: Vec<String> = dropped.iter().chain(kept.iter()).cloned().collect();
        let expected: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
        assert_eq!(all, expected, "only the oldest are dropped, each once, in order");
        assert!(!dropped.is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
