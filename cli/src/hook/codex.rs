//! What a Codex `notify` call reports. Codex runs its configured `notify` program with one
//! JSON argument after each turn: `type` (`agent-turn-complete`, the only type), `thread-id`,
//! `turn-id`, `cwd`, `input-messages` and `last-assistant-message` (which may be null).
//! A completed turn is `done`, with the last assistant message as the summary.

use super::{clip_summary, Intent};
use handoff_core::turn::ReportStatus;
use serde_json::Value;

pub fn intent(doc: &Value) -> Intent {
    match doc["type"].as_str() {
        Some("agent-turn-complete") => {
            let summary = doc["last-assistant-message"].as_str().map(clip_summary);
            Intent::Report { status: ReportStatus::Done, summary, usage: None, refresh: true }
        }
        other => Intent::Nothing(format!("a {other:?} notification reports nothing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_completed_turn_is_done_with_the_last_assistant_message() {
        let doc = json!({"type": "agent-turn-complete", "thread-id": "t", "turn-id": "1", "cwd": "/w", "input-messages": ["go"], "last-assistant-message": "Renamed foo to bar."});
        match intent(&doc) {
            Intent::Report { status, summary, usage, refresh } => {
                assert_eq!((status, summary.as_deref(), usage, refresh), (ReportStatus::Done, Some("Renamed foo to bar."), None, true));
            }
            other => panic!("{other:?}"),
        }
        let silent = json!({"type": "agent-turn-complete", "last-assistant-message": null});
        assert!(matches!(intent(&silent), Intent::Report { summary: None, .. }));
        assert!(matches!(intent(&json!({"type": "approval-requested"})), Intent::Nothing(_)));
    }
}
