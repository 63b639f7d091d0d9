//! Runtimes the machine can run: what a session's machine reported installed (`PUT
//! …/runtimes`), and whether a runtime is *available* to be suggested or handed to.
//!
//! Invariants:
//! - a report replaces the previous one whole and carries the time it was received;
//! - a runtime is available only when the newest report, younger than
//!   [`RUNTIMES_FRESH_MS`], lists it with `signed_in: true`;
//! - a hand-off is refused only on what the machine said: the runtime missing from a fresh
//!   report, or listed signed out. A runtime never reported, reported without a credential
//!   check (`signed_in: null`) or reported too long ago may still be handed to (an
//!   orchestrator with its own machines), though it is never suggested.

use crate::error::{Code, Refusal};
use crate::ids::check_name;
use crate::json::Checked;
use crate::limits::{MACHINE_RUNTIMES_MAX, RUNTIMES_FRESH_MS, RUNTIME_BYTES_MAX, RUNTIME_VERSION_BYTES_MAX};
use crate::time::{parse_rfc3339, EpochMs, Timestamp};
use serde::{Deserialize, Serialize};

/// One runtime a machine reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// The name a policy and a hand-off use (`claude-code`, `codex`).
    pub name: String,
    /// What its version command printed, when it answered.
    #[serde(default)]
    pub version: Option<String>,
    /// `true` or `false` when the machine could check its credential; `null` when it could not.
    #[serde(default)]
    pub signed_in: Option<bool>,
}

/// `PUT /v1/handoffs/:id/runtimes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimesInput {
    pub runtimes: Vec<Runtime>,
    /// When the machine looked (RFC 3339, UTC). A report sent late (a hook's spool delivered
    /// after a network cut) is as fresh as its look, not its arrival; absent, it is the arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
}

impl RuntimesInput {
    /// The time the report counts from: its `checked_at`, never later than its arrival `now`.
    pub fn reported_at(&self, now: EpochMs) -> EpochMs {
        self.checked_at.as_deref().and_then(parse_rfc3339).map_or(now, |at| at.min(now))
    }
}

impl Checked for RuntimesInput {
    fn checked(self) -> Result<Self, Refusal> {
        if self.checked_at.as_deref().is_some_and(|t| parse_rfc3339(t).is_none()) {
            return Err(Refusal::invalid("checked_at: an RFC 3339 time in UTC, like 2026-12-01T09:30:00Z"));
        }
        if self.runtimes.len() > MACHINE_RUNTIMES_MAX {
            return Err(Refusal::invalid(format!("runtimes: at most {MACHINE_RUNTIMES_MAX}")));
        }
        for (i, r) in self.runtimes.iter().enumerate() {
            check_name(&format!("runtimes[{i}].name"), &r.name, RUNTIME_BYTES_MAX)?;
            if self.runtimes[..i].iter().any(|before| before.name == r.name) {
                return Err(Refusal::invalid(format!("runtimes[{i}].name: {} is listed twice", r.name)));
            }
            let version_ok =
                |v: &String| !v.is_empty() && v.len() <= RUNTIME_VERSION_BYTES_MAX && !v.chars().any(char::is_control);
            if r.version.as_ref().is_some_and(|v| !version_ok(v)) {
                return Err(Refusal::invalid(format!(
                    "runtimes[{i}].version: 1-{RUNTIME_VERSION_BYTES_MAX} bytes of text without control characters"
                )));
            }
        }
        Ok(self)
    }
}

/// The machine's newest report, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineRuntimes {
    pub runtimes: Vec<Runtime>,
    pub reported_at: Timestamp,
}

/// What the service knows of one runtime on the session's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Reported installed and signed in, within the freshness window.
    Available,
    /// A fresh report does not list it.
    Absent,
    /// A fresh report lists it signed out.
    SignedOut,
    /// A fresh report lists it, but its credential could not be checked.
    Unchecked,
    /// The newest report is older than the freshness window.
    Stale,
    /// The machine never reported.
    Unreported,
}

/// The availability of `name` at `now`, from the machine's newest report.
pub fn availability(reported: Option<&MachineRuntimes>, name: &str, now: EpochMs) -> Availability {
    let Some(reported) = reported else {
        return Availability::Unreported;
    };
    if now.saturating_sub(reported.reported_at.ms()) > RUNTIMES_FRESH_MS {
        return Availability::Stale;
    }
    match reported.runtimes.iter().find(|r| r.name == name).map(|r| r.signed_in) {
        None => Availability::Absent,
        Some(Some(true)) => Availability::Available,
        Some(Some(false)) => Availability::SignedOut,
        Some(None) => Availability::Unchecked,
    }
}

/// Refuses a hand-off to `runtime` when the machine reported it absent or signed out.
pub fn check_handoff(reported: Option<&MachineRuntimes>, runtime: &str, now: EpochMs) -> Result<(), Refusal> {
    let why = match availability(reported, runtime, now) {
        Availability::Absent => "is not installed on this session's machine",
        Availability::SignedOut => "is installed on this session's machine but not signed in",
        _ => return Ok(()),
    };
    Err(Refusal::new(
        Code::RuntimeUnavailable,
        format!("{runtime} {why} (as it reported); hand the turn to another runtime"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_checked;

    fn reported(at: EpochMs) -> MachineRuntimes {
        let rt = |name: &str, signed_in| Runtime { name: name.into(), version: Some("1.0".into()), signed_in };
        MachineRuntimes {
            runtimes: vec![rt("claude-code", Some(true)), rt("codex", Some(false)), rt("gemini", None)],
            reported_at: at.into(),
        }
    }

    #[test]
    fn availability_follows_the_fresh_report_only() {
        let r = reported(1_000);
        let now = 1_000 + RUNTIMES_FRESH_MS;
        assert_eq!(availability(Some(&r), "claude-code", now), Availability::Available);
        assert_eq!(availability(Some(&r), "codex", now), Availability::SignedOut);
        assert_eq!(availability(Some(&r), "gemini", now), Availability::Unchecked);
        assert_eq!(availability(Some(&r), "aider", now), Availability::Absent);
        assert_eq!(availability(Some(&r), "claude-code", now + 1), Availability::Stale, "one ms past the window");
        assert_eq!(availability(None, "claude-code", now), Availability::Unreported);
    }

    #[test]
    fn a_report_counts_for_a_day_as_the_contract_says() {
        let hour = 60 * 60 * 1000;
        let r = reported(0);
        assert_eq!(availability(Some(&r), "claude-code", 23 * hour), Availability::Available);
        assert_eq!(availability(Some(&r), "claude-code", 25 * hour), Availability::Stale);
    }

    #[test]
    fn only_absent_or_signed_out_refuses_a_handoff() {
        let r = reported(0);
        let refused = |name: &str, now| check_handoff(Some(&r), name, now).err().map(|e| e.code);
        assert_eq!(refused("aider", 5), Some(Code::RuntimeUnavailable));
        assert_eq!(refused("codex", 5), Some(Code::RuntimeUnavailable));
        assert_eq!(refused("claude-code", 5), None);
        assert_eq!(refused("gemini", 5), None, "an unchecked credential is not a refusal");
        assert_eq!(refused("aider", RUNTIMES_FRESH_MS + 1), None, "a stale report says nothing");
        assert!(check_handoff(None, "aider", 5).is_ok(), "an unreported runtime may be handed to");
    }

    #[test]
    fn a_late_report_counts_from_when_the_machine_looked_never_from_the_future() {
        let input =
            |checked_at: Option<&str>| RuntimesInput { runtimes: vec![], checked_at: checked_at.map(str::to_string) };
        let now = 1_796_041_234_567;
        assert_eq!(input(None).reported_at(now), now);
        assert_eq!(input(Some("2026-11-30T12:00:00Z")).reported_at(now), 1_796_040_000_000);
        assert_eq!(input(Some("2099-01-01T00:00:00Z")).reported_at(now), now, "a clock ahead counts as now");
        assert!(parse_checked::<RuntimesInput>(br#"{"runtimes":[],"checked_at":"2026-11-30T12:00:00.250Z"}"#).is_ok());
        assert!(parse_checked::<RuntimesInput>(br#"{"runtimes":[],"checked_at":"an hour ago"}"#).is_err());
    }

    #[test]
    fn a_report_is_bounded_and_names_each_runtime_once() {
        let ok =
            br#"{"runtimes":[{"name":"codex","version":"codex-cli 0.50.0","signed_in":true},{"name":"claude-code"}]}"#;
        let input = parse_checked::<RuntimesInput>(ok).unwrap();
        assert_eq!(input.runtimes[1], Runtime { name: "claude-code".into(), version: None, signed_in: None });
        assert!(parse_checked::<RuntimesInput>(br#"{"runtimes":[]}"#).is_ok(), "nothing installed is a report");
        for bad in [
            r#"{"runtimes":[{"name":"a b"}]}"#.to_string(),
            r#"{"runtimes":[{"name":"codex"},{"name":"codex"}]}"#.to_string(),
            r#"{"runtimes":[{"name":"codex","version":""}]}"#.to_string(),
            r#"{"runtimes":[{"name":"codex","version":"1\n2"}]}"#.to_string(),
            r#"{"runtimes":[{"name":"codex","installed":true}]}"#.to_string(),
            format!(r#"{{"runtimes":[{{"name":"codex","version":"{}"}}]}}"#, "v".repeat(RUNTIME_VERSION_BYTES_MAX + 1)),
            format!(r#"{{"runtimes":[{{"name":"{}"}}]}}"#, "r".repeat(RUNTIME_BYTES_MAX + 1)),
        ] {
            assert!(parse_checked::<RuntimesInput>(bad.as_bytes()).is_err(), "{bad}");
        }
        let many = |n: usize| {
            format!(
                r#"{{"runtimes":[{}]}}"#,
                (0..n).map(|i| format!(r#"{{"name":"r{i}"}}"#)).collect::<Vec<_>>().join(",")
            )
        };
        assert!(parse_checked::<RuntimesInput>(many(MACHINE_RUNTIMES_MAX).as_bytes()).is_ok());
        assert!(parse_checked::<RuntimesInput>(many(MACHINE_RUNTIMES_MAX + 1).as_bytes()).is_err());
        let longest =
            format!(r#"{{"runtimes":[{{"name":"codex","version":"{}"}}]}}"#, "v".repeat(RUNTIME_VERSION_BYTES_MAX));
        assert!(parse_checked::<RuntimesInput>(longest.as_bytes()).is_ok());
        let longest_name = format!(r#"{{"runtimes":[{{"name":"{}"}}]}}"#, "r".repeat(RUNTIME_BYTES_MAX));
        assert!(parse_checked::<RuntimesInput>(longest_name.as_bytes()).is_ok());
    }
}
