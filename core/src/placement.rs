//! Where and how the owner asks a turn to run: the workspace, the runtime, the model and the
//! permission mode named by a create (turn 1). Shown on the record and on each lineage entry;
//! the record's `runtime` and `permission_mode` stay what the machine reports.

use crate::error::{Code, Refusal};
use crate::ids::check_name;
use crate::limits::{MODEL_BYTES_MAX, PERMISSION_MODE_BYTES_MAX, RUNTIME_BYTES_MAX, WORKSPACE_BYTES_MAX};
use serde::{Deserialize, Serialize};

/// The owner's asks for a turn, each absent unless named. On the record and a lineage entry
/// the runtime reads `requested_runtime`, beside the `runtime` the machine reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, rename = "requested_runtime", skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_permission_mode: Option<String>,
}

impl Placement {
    pub fn is_empty(&self) -> bool {
        *self == Placement::default()
    }

    /// Each named value is a name of `[A-Za-z0-9._:-]` within its limit, or 400
    /// `request.invalid` naming the field as the create's body spells it.
    pub fn check(&self) -> Result<(), Refusal> {
        let fields = [
            ("workspace", &self.workspace, WORKSPACE_BYTES_MAX),
            ("runtime", &self.runtime, RUNTIME_BYTES_MAX),
            ("model", &self.model, MODEL_BYTES_MAX),
            ("requested_permission_mode", &self.requested_permission_mode, PERMISSION_MODE_BYTES_MAX),
        ];
        for (field, value, max) in fields {
            if let Some(value) = value {
                check_name(field, value, max)?;
            }
        }
        Ok(())
    }

    /// A repeated create answers the hand-off when every value it names is turn 1's; one it
    /// names otherwise is 409 `handoff.conflict`. A value it leaves out is not compared, as
    /// a repeated create without a prompt is not.
    pub fn check_again(&self, first: &Placement) -> Result<(), Code> {
        let same = |asked: &Option<String>, had: &Option<String>| asked.is_none() || asked == had;
        let all_same = same(&self.workspace, &first.workspace)
            && same(&self.runtime, &first.runtime)
            && same(&self.model, &first.model)
            && same(&self.requested_permission_mode, &first.requested_permission_mode);
        if all_same {
            Ok(())
        } else {
            Err(Code::HandoffConflict)
        }
    }
}

/// The model a hand-off turn to `request.runtime` runs: the one the owner chose, else the
/// previous turn's, carried over.
pub fn handed_model<'a>(previous: &'a Placement, request: &'a crate::package::PackageRequest) -> Option<&'a str> {
    request.model.as_deref().or(previous.model.as_deref())
}

/// A hand-off turn's model against what its target runtime reaches on `machine`, as the
/// machine reported it (`None`: a machine not enrolled, or one that has not reported, which is
/// not checked): one it does not reach is 409 `model.unavailable` naming the model and the
/// runtime, never replaced by another.
pub fn check_reach(machine: &str, runtime: &str, model: &str, reached: Option<&[String]>) -> Result<(), Refusal> {
    match reached {
        Some(models) if !models.iter().any(|m| m == model) => Err(Refusal::new(
            Code::ModelUnavailable,
            format!("model: {runtime} on {machine} does not reach model {model:?}; choose one it reaches"),
        )),
        _ => Ok(()),
    }
}

/// A hand-off turn's placement: the previous turn's, with the target runtime asked for and the
/// model chosen (else carried over).
pub fn handed(previous: &Placement, request: &crate::package::PackageRequest) -> Placement {
    Placement {
        runtime: Some(request.runtime.clone()),
        model: handed_model(previous, request).map(str::to_string),
        ..previous.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(workspace: Option<&str>, model: Option<&str>) -> Placement {
        Placement { workspace: workspace.map(str::to_string), model: model.map(str::to_string), ..Placement::default() }
    }

    use crate::fixtures::hand_off as to;

    #[test]
    fn a_hand_off_turn_carries_the_previous_model_over_unless_the_owner_chooses_another() {
        let previous = asked(Some("api"), Some("opus"));
        let carried = handed(&previous, &to("codex", None));
        assert_eq!((carried.model.as_deref(), carried.runtime.as_deref()), (Some("opus"), Some("codex")));
        assert_eq!(carried.workspace.as_deref(), Some("api"), "the workspace stays");
        assert_eq!(handed(&previous, &to("codex", Some("gpt-5-codex"))).model.as_deref(), Some("gpt-5-codex"));
        assert_eq!(handed(&Placement::default(), &to("codex", None)).model, None, "none to carry: none");
    }

    #[test]
    fn a_model_the_target_runtime_does_not_reach_is_refused_naming_the_model_and_the_runtime() {
        let reached = vec!["gpt-5-codex".to_string()];
        let r = check_reach("vm-7", "codex", "opus", Some(&reached)).unwrap_err();
        assert_eq!(r.code, Code::ModelUnavailable);
        assert!(
            r.message.starts_with("model:") && r.message.contains("codex") && r.message.contains("\"opus\""),
            "{}",
            r.message
        );
        assert_eq!(check_reach("vm-7", "codex", "gpt-5-codex", Some(&reached)), Ok(()));
        assert_eq!(check_reach("vm-7", "codex", "opus", None), Ok(()), "a machine that never reported is not checked");
        assert!(
            check_reach("vm-7", "aider", "opus", Some(&[])).is_err(),
            "a runtime it did not report reaches nothing"
        );
    }

    #[test]
    fn a_repeated_create_with_the_same_values_or_none_answers_and_with_other_values_conflicts() {
        let first = asked(Some("api"), Some("opus"));
        assert_eq!(asked(Some("api"), Some("opus")).check_again(&first), Ok(()));
        assert_eq!(Placement::default().check_again(&first), Ok(()));
        assert_eq!(asked(Some("web"), Some("opus")).check_again(&first), Err(Code::HandoffConflict));
        assert_eq!(asked(None, Some("sonnet")).check_again(&first), Err(Code::HandoffConflict));
        assert_eq!(asked(Some("api"), None).check_again(&Placement::default()), Err(Code::HandoffConflict));
    }

    #[test]
    fn each_value_is_a_short_name_refused_by_its_field() {
        assert!(asked(Some("api"), Some("claude-opus-4-1")).check().is_ok());
        let bad = asked(Some("a b"), None).check().unwrap_err();
        assert!(bad.message.starts_with("workspace:"), "{}", bad.message);
        let long = Placement { model: Some("m".repeat(MODEL_BYTES_MAX + 1)), ..Placement::default() };
        assert!(long.check().unwrap_err().message.starts_with("model:"));
    }

    #[test]
    fn on_the_record_the_runtime_reads_requested_runtime() {
        let p = Placement { runtime: Some("codex".into()), ..Placement::default() };
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"requested_runtime":"codex"}"#);
    }
}
