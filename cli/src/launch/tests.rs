use super::*;

const SERVER: &str = "/opt/bin/handoff";

#[test]
fn claude_code_takes_the_prompt_after_p_the_handoff_server_and_the_allow_rule_last() {
    let config = r#"{"mcpServers":{"handoff":{"args":["mcp"],"command":"/opt/bin/handoff","type":"stdio"}}}"#;
    assert_eq!(claude_code_mcp_config(SERVER), config);
    let print = command_line(Runtime::ClaudeCode, Mode::Print, "PROMPT", None, SERVER, &[]);
    let expected = [
        "claude",
        "-p",
        "PROMPT",
        "--permission-mode",
        "default",
        "--mcp-config",
        config,
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__handoff",
    ];
    assert_eq!(print.argv(), expected);
    assert_eq!(print.args[print.prompt_at], "PROMPT");
    assert_eq!(print.display(), format!("claude -p <prompt> --permission-mode default --mcp-config '{config}' --strict-mcp-config --allowedTools mcp__handoff"));
    let extra = ["--output-format".to_string(), "json".to_string()];
    let interactive = command_line(Runtime::ClaudeCode, Mode::Interactive, "PROMPT", None, SERVER, &extra);
    assert_eq!(interactive.argv()[..2], ["claude", "PROMPT"]);
    assert_eq!(interactive.argv()[7..], ["--output-format", "json", "--allowedTools", "mcp__handoff"]);
    assert!(
        !interactive.argv().iter().any(|a| a.contains("dangerously") || a == "bypassPermissions" || a == "auto"),
        "no mode that asks nothing"
    );
    assert!(
        !print.argv().iter().any(|a| a.contains("TOKEN=") || a.contains("Bearer")),
        "no token value on the command line"
    );
}

#[test]
fn codex_runs_in_its_workspace_sandbox_with_the_handoff_server_and_the_prompt_last() {
    let mcp = [
        "-c",
        r#"mcp_servers.handoff.command="/opt/bin/handoff""#,
        "-c",
        r#"mcp_servers.handoff.args=["mcp"]"#,
        "-c",
        r#"mcp_servers.handoff.env_vars=["HANDOFF_URL", "HANDOFF_ID", "HANDOFF_TOKEN_FILE", "HANDOFF_TOKEN", "HANDOFF_STATE_DIR"]"#,
        "-c",
        r#"mcp_servers.handoff.default_tools_approval_mode="approve""#,
        "-c",
        r#"shell_environment_policy.exclude=["HANDOFF_TOKEN", "HANDOFF_TOKEN_FILE"]"#,
    ];
    let print = command_line(Runtime::Codex, Mode::Print, "PROMPT", Some("/s/last.txt"), SERVER, &[]);
    let exec =
        ["codex", "exec", "--sandbox", "workspace-write", "-c", "notify=[]", "--output-last-message", "/s/last.txt"];
    assert_eq!(print.argv(), [&exec[..], &mcp[..], &["PROMPT"]].concat(), "exec reports nothing through notify");
    let extra = ["-m".to_string(), "gpt-5-codex".to_string()];
    let interactive = command_line(Runtime::Codex, Mode::Interactive, "PROMPT", None, SERVER, &extra);
    let tui = [
        "codex",
        "--sandbox",
        "workspace-write",
        "--ask-for-approval",
        "on-request",
        "--no-daemon",
        "--enable",
        "hooks",
    ];
    assert_eq!(interactive.argv(), [&tui[..], &mcp[..], &["-m", "gpt-5-codex", "PROMPT"]].concat());
    assert_eq!(interactive.args[interactive.prompt_at], "PROMPT");
}

#[test]
fn a_displayed_command_quotes_what_a_shell_would_split() {
    let c = CommandLine {
        program: "codex".into(),
        args: vec!["a b".into(), "it's".into(), "".into(), "p".into()],
        prompt_at: 3,
    };
    assert_eq!(c.display(), "codex 'a b' 'it'\\''s' '' <prompt>");
}

#[test]
fn only_lines_new_in_the_notes_and_those_of_the_final_message_are_recorded() {
    let before = "# Notes\nDecision: Use Postgres\n";
    let after = "# Notes\nDecision: Use Postgres\n- Decision: Keep the parser in one pass\n**Decision:** Fold accents\nnot a decision\n";
    let message = "Parsed the config.\nArtifact: src/parser.rs\nBlocker (high): CI has no FTS5\nDecision: Fold accents\nStatus: failed\nUnmet: 0, 2\n";
    let left = read_left(before, after, Some(message));
    assert_eq!(left.decisions, ["Keep the parser in one pass", "Fold accents"], "once each, the old one not again");
    assert_eq!(left.artifacts, ["src/parser.rs"]);
    assert_eq!(left.blockers, [(Severity::High, "CI has no FTS5".to_string())]);
    assert_eq!((left.status, left.unmet), (Some(ReportStatus::Failed), Some(vec![0, 2])));
    assert_eq!(left.summary.as_deref(), Some(message.trim()));
}

#[test]
fn a_repeated_line_counts_as_new_only_beyond_its_copies_before() {
    let left = read_left("Decision: A\n", "Decision: A\nDecision: A\nDecision: B\n", None);
    assert_eq!(left.decisions, ["A", "B"], "the second copy of A is new, and recorded once");
    let left = read_left("Decision: A\nDecision: B\n", "Decision: B\nDecision: A\n", None);
    assert!(left.decisions.is_empty(), "reordered lines are not new: {left:?}");
}

#[test]
fn status_and_unmet_count_only_in_the_final_message_and_odd_lines_are_ignored() {
    let left =
        read_left("", "Status: done\nUnmet: 1\nBlocker: CI is red\nBlocker (urgent): x\nDecision:\nUnmet: a,b\n", None);
    assert_eq!((left.status, left.unmet.as_ref(), left.summary.as_ref()), (None, None, None));
    assert_eq!(left.blockers, [(Severity::Medium, "CI is red".to_string())], "an unknown severity is no blocker line");
    assert!(left.decisions.is_empty(), "an empty decision is none");
    let left = read_left("", "", Some("done\nStatus: DONE\nUnmet: none"));
    assert_eq!((left.status, left.unmet), (Some(ReportStatus::Done), Some(vec![])));
    assert_eq!(read_left("", "", Some("  \n")).summary, None, "a blank final message is none");
}

#[test]
fn what_a_session_left_is_clipped_to_what_the_service_accepts() {
    let long = "x".repeat(STATEMENT_BYTES_MAX + 50);
    let left = read_left("", &format!("Decision: {long}\nBlocker: {long}\n"), Some(&"m".repeat(10_000)));
    assert_eq!(left.decisions[0].len(), STATEMENT_BYTES_MAX);
    assert_eq!(left.blockers[0].1.len(), TITLE_BYTES_MAX);
    assert!(left.summary.unwrap().len() <= handoff_core::limits::SUMMARY_BYTES_MAX);
}
