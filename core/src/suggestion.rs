//! Hand-off suggestions: when a report crosses the owner's context threshold, ends a turn on a
//! provider's limit, or reports quota at or below its threshold, the record gains a
//! suggestion naming the runtimes that could take over. Nothing switches by itself: no turn
//! opens and no runtime changes until the owner acts.
//!
//! Invariants: at most one suggestion per turn and reason; none without a policy or without
//! an eligible runtime (one of the policy's, other than the current turn's, and available on
//! the machine: see [`crate::runtimes`]); cleared when the next turn opens.

use crate::error::Refusal;
use crate::ids::is_id;
use crate::json::Checked;
use crate::limits::POLICY_RUNTIMES_MAX;
use crate::runtimes::{availability, Availability, MachineRuntimes};
use crate::time::EpochMs;
use serde::{Deserialize, Serialize};

/// `PUT /v1/handoffs/:id/policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub runtimes: Vec<String>,
    pub context_threshold_pct: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_threshold: Option<u64>,
}

impl Checked for Policy {
    fn checked(self) -> Result<Self, Refusal> {
        let policy = self;
        if !(1..=99).contains(&policy.context_threshold_pct) {
            return Err(Refusal::invalid("context_threshold_pct: from 1 to 99"));
        }
        if policy.runtimes.len() > POLICY_RUNTIMES_MAX {
            return Err(Refusal::invalid(format!("runtimes: at most {POLICY_RUNTIMES_MAX}")));
        }
        if let Some(bad) = policy.runtimes.iter().position(|r| !is_id(r)) {
            return Err(Refusal::invalid(format!("runtimes[{bad}]: 1-128 characters of [A-Za-z0-9._:-]")));
        }
        Ok(policy)
    }
}

/// What a machine may say of its session's budget on a report.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_used: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_remaining: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    ProviderLimit,
}

/// Why a hand-off is suggested. Written by its name; a name a newer service adds reads as
/// [`Reason::Other`] with its text kept, which the rules never raise.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    ContextThreshold,
    ProviderLimit,
    QuotaThreshold,
    Other(String),
}

impl Reason {
    pub fn as_str(&self) -> &str {
        match self {
            Reason::ContextThreshold => "context-threshold",
            Reason::ProviderLimit => "provider-limit",
            Reason::QuotaThreshold => "quota-threshold",
            Reason::Other(name) => name,
        }
    }

    fn named(name: String) -> Reason {
        [Reason::ContextThreshold, Reason::ProviderLimit, Reason::QuotaThreshold]
            .into_iter()
            .find(|r| r.as_str() == name)
            .unwrap_or(Reason::Other(name))
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        String::deserialize(d).map(Reason::named)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    pub reason: Reason,
    pub turn: u64,
    pub runtimes: Vec<String>,
    pub command: String,
}

/// The reasons this report raises, in a fixed order. `ends_turn`: the report is done or failed.
pub fn reasons(policy: &Policy, usage: &Usage, ends_turn: bool) -> Vec<Reason> {
    let mut found = Vec::new();
    if let (Some(used), Some(window)) = (usage.context_used, usage.context_window) {
        // used / window >= pct / 100, in integers.
        let crossed =
            window > 0 && u128::from(used) * 100 >= u128::from(window) * u128::from(policy.context_threshold_pct);
        if crossed {
            found.push(Reason::ContextThreshold);
        }
    }
    if ends_turn && usage.limit == Some(Limit::ProviderLimit) {
        found.push(Reason::ProviderLimit);
    }
    if let (Some(left), Some(threshold)) = (usage.quota_remaining, policy.quota_threshold) {
        if left <= threshold {
            found.push(Reason::QuotaThreshold);
        }
    }
    found
}

/// Where a suggestion is raised: the hand-off, its turn, the runtime running it (when the turn
/// was handed to one), what the machine reported it can run, and the time.
pub struct Context<'a> {
    pub id: &'a str,
    pub turn: u64,
    pub current_runtime: Option<&'a str>,
    pub machine: Option<&'a MachineRuntimes>,
    pub now: EpochMs,
}

/// The suggestion for `reason`, or `None` when no runtime is eligible: one in the policy, other
/// than the current turn's, and available on the machine (reported installed and signed in,
/// recently enough).
pub fn suggest(at: &Context<'_>, reason: Reason, policy: &Policy) -> Option<Suggestion> {
    let eligible = |r: &&String| {
        Some(r.as_str()) != at.current_runtime && availability(at.machine, r, at.now) == Availability::Available
    };
    let runtimes: Vec<String> = policy.runtimes.iter().filter(eligible).cloned().collect();
    let (id, turn) = (at.id, at.turn);
    let first = runtimes.first()?;
    let command = format!("handoff turn {id} --after {turn} --to {first} --objective \"…\" --purpose \"…\"");
    Some(Suggestion { reason, turn, runtimes, command })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_checked;
    use crate::limits::RUNTIMES_FRESH_MS;
    use crate::runtimes::Runtime;

    fn policy() -> Policy {
        Policy {
            runtimes: vec!["claude-code".into(), "codex".into()],
            context_threshold_pct: 80,
            quota_threshold: Some(5),
        }
    }

    #[test]
    fn each_reason_is_raised_by_its_own_signal() {
        let p = policy();
        let ctx = Usage { context_used: Some(80), context_window: Some(100), ..Usage::default() };
        assert_eq!(reasons(&p, &ctx, false), vec![Reason::ContextThreshold]);
        let below = Usage { context_used: Some(79), context_window: Some(100), ..Usage::default() };
        assert!(reasons(&p, &below, false).is_empty());
        let cap = Usage { limit: Some(Limit::ProviderLimit), ..Usage::default() };
        assert_eq!(reasons(&p, &cap, true), vec![Reason::ProviderLimit]);
        assert!(reasons(&p, &cap, false).is_empty(), "a provider limit counts when it ends the turn");
        let quota = Usage { quota_remaining: Some(5), ..Usage::default() };
        assert_eq!(reasons(&p, &quota, false), vec![Reason::QuotaThreshold]);
        let no_quota_policy = Policy { quota_threshold: None, ..p };
        assert!(reasons(&no_quota_policy, &quota, false).is_empty());
    }

    #[test]
    fn quota_at_or_below_its_threshold_raises_and_above_it_does_not() {
        let p = policy();
        for (left, raised) in [(0, true), (4, true), (5, true), (6, false)] {
            let usage = Usage { quota_remaining: Some(left), ..Usage::default() };
            assert_eq!(reasons(&p, &usage, false) == vec![Reason::QuotaThreshold], raised, "{left} left");
        }
    }

    #[test]
    fn an_empty_context_window_never_crosses_the_threshold() {
        let usage = Usage { context_used: Some(0), context_window: Some(0), ..Usage::default() };
        assert!(reasons(&policy(), &usage, false).is_empty());
    }

    fn machine(signed_in: &[(&str, Option<bool>)]) -> MachineRuntimes {
        let runtimes = signed_in
            .iter()
            .map(|(name, s)| Runtime { name: name.to_string(), version: None, signed_in: *s })
            .collect();
        MachineRuntimes { runtimes, reported_at: 1_000.into() }
    }

    fn at<'a>(current_runtime: Option<&'a str>, machine: Option<&'a MachineRuntimes>, now: EpochMs) -> Context<'a> {
        Context { id: "ho_1", turn: 2, current_runtime, machine, now }
    }

    #[test]
    fn the_current_runtime_is_never_suggested_and_none_eligible_means_no_suggestion() {
        let both = machine(&[("claude-code", Some(true)), ("codex", Some(true))]);
        let s = suggest(&at(Some("claude-code"), Some(&both), 1_000), Reason::ContextThreshold, &policy()).unwrap();
        assert_eq!(s.runtimes, vec!["codex".to_string()]);
        assert!(s.command.starts_with("handoff turn ho_1 --after 2 --to codex"));
        let only = Policy { runtimes: vec!["codex".into()], ..policy() };
        assert_eq!(suggest(&at(Some("codex"), Some(&both), 1_000), Reason::ContextThreshold, &only), None);
    }

    #[test]
    fn only_runtimes_the_machine_reported_available_are_suggested() {
        let suggested = |m: Option<&MachineRuntimes>, now| {
            suggest(&at(None, m, now), Reason::ContextThreshold, &policy()).map(|s| s.runtimes)
        };
        let signed_out = machine(&[("claude-code", Some(false)), ("codex", Some(true))]);
        assert_eq!(suggested(Some(&signed_out), 1_000), Some(vec!["codex".to_string()]));
        let unchecked = machine(&[("claude-code", None), ("codex", Some(true))]);
        assert_eq!(suggested(Some(&unchecked), 1_000), Some(vec!["codex".to_string()]));
        let absent = machine(&[("codex", Some(true)), ("aider", Some(true))]);
        assert_eq!(suggested(Some(&absent), 1_000), Some(vec!["codex".to_string()]), "aider is not in the policy");
        assert_eq!(
            suggested(Some(&absent), 1_000 + RUNTIMES_FRESH_MS + 1),
            None,
            "a stale report makes none available"
        );
        assert_eq!(suggested(None, 1_000), None, "a machine that never reported offers nothing");
        let none_signed_in = machine(&[("claude-code", Some(false)), ("codex", None)]);
        assert_eq!(suggested(Some(&none_signed_in), 1_000), None);
    }

    #[test]
    fn a_policy_is_bounded() {
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":0}"#).is_err());
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":100}"#).is_err());
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a b"],"context_threshold_pct":50}"#).is_err());
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":50,"auto":true}"#).is_err());
        assert_eq!(
            parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":50}"#).unwrap().quota_threshold,
            None
        );
        let runtimes = |n: usize| (0..n).map(|i| format!("\"r{i}\"")).collect::<Vec<_>>().join(",");
        let with = |n: usize| format!(r#"{{"runtimes":[{}],"context_threshold_pct":50}}"#, runtimes(n));
        assert_eq!(
            parse_checked::<Policy>(with(POLICY_RUNTIMES_MAX).as_bytes()).unwrap().runtimes.len(),
            POLICY_RUNTIMES_MAX
        );
        assert!(parse_checked::<Policy>(with(POLICY_RUNTIMES_MAX + 1).as_bytes()).is_err());
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":1}"#).is_ok());
        assert!(parse_checked::<Policy>(br#"{"runtimes":["a"],"context_threshold_pct":99}"#).is_ok());
    }

    #[test]
    fn a_reason_is_written_by_its_name_and_a_name_a_newer_service_adds_is_kept_as_written() {
        for reason in [Reason::ContextThreshold, Reason::ProviderLimit, Reason::QuotaThreshold] {
            let text = serde_json::to_string(&reason).unwrap();
            assert_eq!(text, format!("\"{}\"", reason.as_str()));
            assert_eq!(serde_json::from_str::<Reason>(&text).unwrap(), reason);
        }
        let newer: Reason = serde_json::from_str("\"tokens-spent\"").unwrap();
        assert_eq!((newer.as_str(), &newer), ("tokens-spent", &Reason::Other("tokens-spent".into())));
    }
}
