use super::*;
use crate::client::Reach;
use crate::machine::env::SESSION_NAMES;
use crate::machine::{CLAUDE_CODE_BUDGET_BYTES, CODEX_BUDGET_BYTES};
use serde_json::json;
use std::path::PathBuf;

const ID: &str = "ho_0123456789abcdef0123456789abcdef";

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../test/fixtures/launch").join(name)
}

fn check_golden(name: &str, actual: &str) {
    handoff_core::golden::check(&fixture_path(name), actual);
}

fn handoff(turn: u64, status: &str, runtime: Option<&str>, package: bool) -> Handoff {
    let mut h = json!({"id": ID, "owner": "alice", "session": "sess-42", "machine": "m-7", "size": "large",
        "turn": turn, "state": "open", "status": status, "summary": null, "version": 7,
        "created_at": "2026-11-30T12:00:00.000Z", "updated_at": "2026-11-30T12:00:00.000Z", "runtime": runtime,
        "actions": ["report", "accept", "reject"]});
    if package {
        h["package_version"] = json!(3);
        h["package_hash"] = json!("9f2c1a8b".repeat(8));
    }
    serde_json::from_value(h).unwrap()
}

fn work(spec: serde_json::Value) -> WorkRecord {
    serde_json::from_value(
        json!({"spec": spec, "decisions": [], "artifacts": [], "blockers": [], "files": [], "unmet": []}),
    )
    .unwrap()
}

fn parser_work() -> WorkRecord {
    work(json!({"id": ID, "title": "Parser", "goal": "Parse the config file, empty input included",
        "task_type": "feature", "priority": "high",
        "constraints": ["no new dependencies"], "acceptance_criteria": ["empty input parses", "errors name the line"]}))
}

#[test]
fn the_access_paragraph_with_network_is_its_fixture() {
    check_golden("access-api.txt", &access_paragraph(Runtime::ClaudeCode, ID, 2));
}

#[test]
fn the_access_paragraph_without_network_is_its_fixture() {
    check_golden("access-none.txt", &access_paragraph(Runtime::Codex, ID, 2));
}

#[test]
fn the_work_record_briefing_is_its_fixture() {
    let h = handoff(1, "running", None, false);
    check_golden("work-record.txt", &work_briefing(&h, &parser_work(), CODEX_BUDGET_BYTES).unwrap());
}

#[test]
fn the_access_paragraph_names_the_server_its_tools_and_the_variables_but_no_value() {
    for runtime in Runtime::ALL {
        let p = access_paragraph(runtime, ID, 5);
        for name in SESSION_NAMES {
            assert!(p.contains(name), "{name} is named");
        }
        for tool in ["record_decision", "add_artifact", "raise_blocker", "ask_owner", "report", "get_briefing"] {
            assert!(p.contains(tool), "{tool}: {p}");
        }
        assert!(p.contains("`handoff`") && p.contains(ID) && p.contains("turn 5"), "{p}");
        assert!(!p.contains('$') && !p.contains("handoff decide"), "no shell command to type: {p}");
    }
    let without = access_paragraph(Runtime::Codex, ID, 5);
    assert!(without.contains("no network") && without.contains("raise no blocker"), "{without}");
    assert!(
        without.contains("Only if the handoff tools are not there") && without.contains("Decision: WHAT YOU DECIDED"),
        "the fallback: {without}"
    );
    assert!(
        !access_paragraph(Runtime::ClaudeCode, ID, 5).contains("NOTES.md"),
        "a session with network needs no fallback"
    );
}

#[test]
fn each_runtime_has_its_program_budget_network_and_harness() {
    assert_eq!(Runtime::parse("claude-code"), Some(Runtime::ClaudeCode));
    assert_eq!(Runtime::parse("codex"), Some(Runtime::Codex));
    assert_eq!(Runtime::parse("claude"), None, "the API's names, not the programs'");
    assert_eq!((Runtime::ClaudeCode.program(), Runtime::Codex.program()), ("claude", "codex"));
    assert_eq!(Runtime::ClaudeCode.budget_bytes_default(), CLAUDE_CODE_BUDGET_BYTES);
    assert_eq!(Runtime::Codex.budget_bytes_default(), CODEX_BUDGET_BYTES);
    assert_eq!((Runtime::ClaudeCode.reach(), Runtime::Codex.reach()), (Reach::Api, Reach::None));
    assert_eq!(
        SESSION_NAMES,
        ["HANDOFF_URL", "HANDOFF_ID", "HANDOFF_TOKEN_FILE"],
        "the token itself is never in the runtime's environment"
    );
}

#[test]
fn a_budget_is_the_runtimes_unless_given_and_within_the_services_range() {
    assert_eq!(budget_bytes(Runtime::Codex, None), Ok(CODEX_BUDGET_BYTES));
    assert_eq!(budget_bytes(Runtime::ClaudeCode, Some(1024)), Ok(1024));
    assert_eq!(budget_bytes(Runtime::ClaudeCode, Some(100)), Err(Refused::Budget { bytes: 100 }));
    assert_eq!(budget_bytes(Runtime::ClaudeCode, Some(70_000)), Err(Refused::Budget { bytes: 70_000 }));
}

#[test]
fn a_turn_handed_with_a_package_is_briefed_from_it_and_one_without_from_the_work_record() {
    let handed = handoff(2, "running", Some("codex"), true);
    assert_eq!(target(&handed, None), Ok(Target { runtime: Runtime::Codex, turn: 2, from_package: true }));
    assert_eq!(target(&handed, Some("codex")).map(|t| t.from_package), Ok(true));
    let plain = handoff(1, "running", None, false);
    assert_eq!(
        target(&plain, Some("claude-code")),
        Ok(Target { runtime: Runtime::ClaudeCode, turn: 1, from_package: false })
    );
    let waiting = handoff(3, "needs-you", Some("claude-code"), true);
    assert!(target(&waiting, None).is_ok(), "a turn waiting for its person is still the turn to launch");
}

#[test]
fn a_launch_is_refused_for_a_closed_hand_off_an_ended_turn_another_runtime_or_none() {
    let mut closed = handoff(2, "cancelled", Some("codex"), true);
    closed.state = State::Closed;
    assert_eq!(target(&closed, None), Err(Refused::Closed { id: ID.into() }));
    assert_eq!(
        target(&handoff(2, "done", Some("codex"), true), None),
        Err(Refused::TurnEnded { turn: 2, status: Status::Done })
    );
    assert_eq!(
        target(&handoff(2, "failed", None, false), Some("codex")),
        Err(Refused::TurnEnded { turn: 2, status: Status::Failed })
    );
    assert_eq!(
        target(&handoff(2, "running", Some("codex"), true), Some("claude-code")),
        Err(Refused::OtherRuntime { turn: 2, handed_to: "codex".into(), asked: "claude-code".into() })
    );
    assert_eq!(target(&handoff(1, "running", None, false), None), Err(Refused::NoRuntime { turn: 1 }));
    assert_eq!(
        target(&handoff(1, "running", None, false), Some("gemini")),
        Err(Refused::UnknownRuntime { name: "gemini".into() })
    );
    let mut as_owner = handoff(2, "running", Some("codex"), true);
    as_owner.actions = vec!["open_turn".into(), "cancel".into(), "close".into()];
    assert_eq!(target(&as_owner, None), Err(Refused::OwnerToken), "the session is never given an owner's token");
    let message = Refused::OtherRuntime { turn: 2, handed_to: "codex".into(), asked: "claude-code".into() }.to_string();
    assert!(message.contains("--runtime codex"), "{message}");
}

#[test]
fn the_launcher_says_which_source_briefed_the_session() {
    let p = PackageRef { version: 3, hash: "9f2c1a8b".repeat(8) };
    assert_eq!(briefed_line(Some(&p)), "briefed from package v3 (9f2c1a8b…)");
    assert_eq!(briefed_line(None), "briefed from the work record");
}

#[test]
fn the_work_record_briefing_has_goal_constraints_criteria_and_the_title_as_objective() {
    let h = handoff(1, "running", None, false);
    let text = work_briefing(&h, &parser_work(), 8192).unwrap();
    assert!(text.contains("## Goal\nParse the config file, empty input included\n"), "{text}");
    assert!(text.contains("## Next objective\nParser\n"), "the title stands in for an objective: {text}");
    assert!(text.contains("- no new dependencies") && text.contains("[1] errors name the line"), "{text}");
    assert!(text.contains("task type feature, priority high"), "{text}");
    let bare = work(
        json!({"id": ID, "title": "Parser", "goal": "g", "task_type": null, "priority": null, "constraints": [], "acceptance_criteria": []}),
    );
    let text = work_briefing(&h, &bare, 8192).unwrap();
    assert!(
        !text.contains("## Constraints") && !text.contains("## Acceptance criteria"),
        "empty sections are not rendered: {text}"
    );
    let none = work(serde_json::Value::Null);
    assert_eq!(work_briefing(&h, &none, 8192), Err(Refused::NothingToBrief { turn: 1 }));
}

#[test]
fn a_work_record_briefing_never_exceeds_its_budget_and_marks_the_cut() {
    let h = handoff(1, "running", None, false);
    let long = work(json!({"id": ID, "title": "Parser", "goal": "é".repeat(2000), "task_type": null, "priority": null,
        "constraints": (0..50).map(|i| format!("constraint {i} {}", "ü".repeat(300))).collect::<Vec<_>>(), "acceptance_criteria": []}));
    let whole = work_briefing(&h, &long, BRIEFING_BUDGET_BYTES_MAX as u32).unwrap();
    assert!(!whole.ends_with("[cut]"), "it fits the largest budget whole");
    for budget in [256, 300, 1000, 4096, 65_536, 100, 1_000_000] {
        let text = work_briefing(&h, &long, budget).unwrap();
        let cap = (budget as usize).clamp(BRIEFING_BUDGET_BYTES_MIN, BRIEFING_BUDGET_BYTES_MAX);
        assert!(text.len() <= cap, "{budget}: {} bytes", text.len());
        assert_eq!(
            text.ends_with("\n[cut]"),
            whole.len() > cap,
            "{budget}: a clipped briefing says so, a whole one does not"
        );
    }
}

#[test]
fn the_prompt_is_the_briefing_then_the_paragraph() {
    assert_eq!(
        prompt("# Hand-off briefing\nbody\n\n", "## Recording this turn\n"),
        "# Hand-off briefing\nbody\n\n## Recording this turn\n"
    );
}

#[test]
fn a_resumed_session_reads_the_owners_words_whole_or_a_line_saying_there_were_none() {
    assert_eq!(resumed_message(Some("--help me"), 2), "--help me");
    assert!(resumed_message(None, 3).contains("turn 3 without words"));
}
