use super::*;
use crate::json::parse_checked;
use crate::turn::{Record, State};
use serde_json::json;

fn handoff() -> Record {
    Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000)
}

/// The command as the API hands it over: its input checked once, as the body is read.
fn checked(command: Command) -> Result<Command, Refusal> {
    Ok(match command {
        Command::SetWork(i) => Command::SetWork(i.checked()?),
        Command::RecordDecision(i) => Command::RecordDecision(i.checked()?),
        Command::AddArtifact(i) => Command::AddArtifact(i.checked()?),
        Command::AddBlocker(i) => Command::AddBlocker(i.checked()?),
        Command::ReportWorkspace(i) => Command::ReportWorkspace(i.checked()?),
        resolve @ Command::ResolveBlocker { .. } => resolve,
    })
}

fn run(work: &Work, command: Command, by: Role) -> Applied<Work, Item> {
    apply(work, &handoff(), &checked(command).expect("a valid input"), by, 5_000).expect("accepted")
}

fn refused(work: &Work, command: Command, by: Role) -> Refusal {
    checked(command).and_then(|c| apply(work, &handoff(), &c, by, 5_000)).expect_err("refused")
}

fn work_input(criteria: &[&str]) -> WorkInput {
    WorkInput {
        title: "Ship search".into(),
        goal: "Users find any note in under a second.".into(),
        task_type: Some("feature".into()),
        priority: None,
        constraints: vec!["no new services".into()],
        acceptance_criteria: criteria.iter().map(|s| s.to_string()).collect(),
    }
}

fn decision(statement: &str, supersedes: Option<&str>) -> Command {
    Command::RecordDecision(DecisionInput {
        statement: statement.into(),
        rationale: None,
        evidence: vec![],
        supersedes: supersedes.map(str::to_string),
    })
}

fn artifact(title: &str, uri: &str, sha: Option<&str>) -> Command {
    Command::AddArtifact(ArtifactInput {
        kind: "doc".into(),
        title: title.into(),
        uri: uri.into(),
        sha256: sha.map(str::to_string),
    })
}

fn files(list: &[(&str, u32, u32)]) -> Command {
    Command::ReportWorkspace(WorkspaceInput {
        files: list.iter().map(|(p, i, d)| FileInput { path: p.to_string(), insertions: *i, deletions: *d }).collect(),
    })
}

#[test]
fn setting_the_same_work_again_changes_nothing() {
    let a = run(&Work::default(), Command::SetWork(work_input(&["fast"])), Role::Owner);
    assert!(a.moved);
    assert_eq!(a.effect.kind(), "work");
    assert_eq!(a.effect, Item::Work(work_input(&["fast"])));
    let b = run(&a.next, Command::SetWork(work_input(&["fast"])), Role::Owner);
    assert!(!b.moved);
    assert_eq!(b.next, a.next);
}

#[test]
fn a_closed_hand_off_refuses_every_work_command() {
    let mut closed = handoff();
    closed.state = State::Closed;
    let e = apply(&Work::default(), &closed, &decision("x", None), Role::Owner, 1).unwrap_err();
    assert_eq!(e.code, Code::HandoffClosed);
}

#[test]
fn decisions_get_counter_ids_and_a_superseded_one_stays_on_the_record() {
    let w = run(&Work::default(), decision("use sqlite", None), Role::Machine).next;
    let a = run(&w, decision("use postgres", Some("dec_1")), Role::Owner);
    let Item::Decision(d) = &a.effect else { panic!("{:?}", a.effect) };
    assert_eq!((d.id.as_str(), d.recorded_at.ms(), d.by), ("dec_2", 5_000, Role::Owner));
    assert_eq!(a.next.decisions.len(), 2);
    assert_eq!(a.next.decisions[0].superseded_by.as_deref(), Some("dec_2"));
    let standing: Vec<_> = a.next.standing_decisions().map(|d| d.id.as_str()).collect();
    assert_eq!(standing, ["dec_2"]);
}

#[test]
fn superseding_an_unknown_decision_is_404_and_an_already_superseded_one_is_409() {
    let e = refused(&Work::default(), decision("x", Some("dec_9")), Role::Owner);
    assert_eq!(e.code, Code::DecisionNotFound);
    let w = run(&Work::default(), decision("a", None), Role::Owner).next;
    let w = run(&w, decision("b", Some("dec_1")), Role::Owner).next;
    let e = refused(&w, decision("c", Some("dec_1")), Role::Owner);
    assert_eq!(e.code, Code::HandoffConflict);
}

#[test]
fn the_same_artifact_title_is_the_next_version_unless_nothing_differs() {
    let w = run(&Work::default(), artifact("Design", "https://x/1", None), Role::Machine).next;
    let same = run(&w, artifact("Design", "https://x/1", None), Role::Machine);
    assert!(!same.moved);
    assert!(matches!(&same.effect, Item::Artifact(a) if a.version == 1));
    let sha = "AB".repeat(32);
    let v2 = run(&w, artifact("Design", "https://x/1", Some(&sha)), Role::Machine);
    assert!(v2.moved);
    let Item::Artifact(a) = &v2.effect else { panic!("{:?}", v2.effect) };
    assert_eq!((a.id.as_str(), a.version), ("art_1", 2));
    assert_eq!(a.sha256, Some("ab".repeat(32)));
    let other = run(&v2.next, artifact("Plan", "https://x/2", None), Role::Machine);
    assert!(matches!(&other.effect, Item::Artifact(a) if a.id == "art_2"));
    assert_eq!(other.next.artifacts.len(), 3, "every version stays on the record");
    let latest: Vec<_> = other.next.latest_artifacts().iter().map(|a| (a.id.as_str(), a.version)).collect();
    assert_eq!(latest, [("art_2", 1), ("art_1", 2)]);
}

/// The bytes of an artifact as the work record keeps and serves it, and as a package hands it
/// on (the same fields but who recorded it and when), field order and nulls included.
#[test]
fn an_artifact_serialises_to_exactly_these_bytes_on_the_record_and_in_a_package() {
    let sha = "ab".repeat(32);
    let w = run(&Work::default(), artifact("Design", "https://x/1", Some(&sha)), Role::Machine).next;
    let w = run(&w, artifact("Plan", "docs/plan.md", None), Role::Owner).next;
    let kept = r#"[{"id":"art_1","type":"doc","title":"Design","version":1,"uri":"https://x/1","sha256":"SHA","recorded_at":"1970-01-01T00:00:05.000Z","by":"machine"},{"id":"art_2","type":"doc","title":"Plan","version":1,"uri":"docs/plan.md","sha256":null,"recorded_at":"1970-01-01T00:00:05.000Z","by":"owner"}]"#
        .replace("SHA", &sha);
    assert_eq!(serde_json::to_string(&w.artifacts).unwrap(), kept);
    assert_eq!(serde_json::from_str::<Vec<Artifact>>(&kept).unwrap(), w.artifacts);
    // As first stored, with times in epoch milliseconds.
    let stored = kept.replace(r#""1970-01-01T00:00:05.000Z""#, "5000");
    assert_eq!(serde_json::from_str::<Vec<Artifact>>(&stored).unwrap(), w.artifacts);
    let mut spec = work_input(&[]);
    spec.task_type = None;
    let w = Work { spec: Some(spec), ..w };
    let request = crate::package::PackageRequest {
        objective: "o".into(),
        purpose: "p".into(),
        runtime: "r".into(),
        note: None,
        model: None,
    };
    let h = handoff();
    let sources = crate::package::Sources { record: &h, work: &w, lineage: &[] };
    let package = crate::package::compile(&sources, &request, None, 0).unwrap();
    let handed = r#"[{"id":"art_2","type":"doc","title":"Plan","version":1,"uri":"docs/plan.md","sha256":null},{"id":"art_1","type":"doc","title":"Design","version":1,"uri":"https://x/1","sha256":"SHA"}]"#
        .replace("SHA", &sha);
    assert_eq!(serde_json::to_string(&package.artifacts).unwrap(), handed);
    let package_json = serde_json::to_value(&package).unwrap();
    assert_eq!(serde_json::from_value::<crate::package::Package>(package_json.clone()).unwrap(), package);
    let mut with_who = package_json;
    with_who["artifacts"][0]["by"] = json!("owner");
    assert!(serde_json::from_value::<crate::package::Package>(with_who).is_err(), "a package's artifact has no `by`");
}

#[test]
fn blockers_open_then_resolve_once_and_an_unknown_one_is_404() {
    let add = |sev| Command::AddBlocker(BlockerInput { severity: sev, title: "no creds".into() });
    let w = run(&Work::default(), add(Severity::Low), Role::Machine).next;
    let w = run(&w, add(Severity::High), Role::Machine).next;
    let open: Vec<_> = w.open_blockers().iter().map(|b| b.id.as_str()).collect();
    assert_eq!(open, ["blk_2", "blk_1"], "most severe first");
    let r = run(&w, Command::ResolveBlocker { id: "blk_1".into() }, Role::Owner);
    assert!(r.moved);
    assert!(
        matches!(&r.effect, Item::Blocker(b) if b.status == BlockerStatus::Resolved && b.resolved_at == Some(5_000.into()))
    );
    assert!(!run(&r.next, Command::ResolveBlocker { id: "blk_1".into() }, Role::Owner).moved);
    let e = refused(&w, Command::ResolveBlocker { id: "blk_7".into() }, Role::Owner);
    assert_eq!(e.code, Code::BlockerNotFound);
}

#[test]
fn workspace_reports_accumulate_per_path_and_the_latest_counts_win() {
    let w = run(&Work::default(), files(&[("src/a.rs", 1, 2), ("b", 0, 0)]), Role::Machine).next;
    let a = run(&w, files(&[("src/a.rs", 7, 0), ("src/a.rs", 9, 1)]), Role::Machine);
    assert!(a.moved);
    assert_eq!(a.next.files.len(), 2);
    assert_eq!(a.next.files["src/a.rs"], FileCounts { insertions: 9, deletions: 1 });
    let Item::Workspace { files: named, paths_kept } = &a.effect else { panic!("{:?}", a.effect) };
    assert_eq!(*paths_kept, 2);
    assert_eq!(
        named,
        &[FileInput { path: "src/a.rs".into(), insertions: 9, deletions: 1 }],
        "each path once, with its latest counts"
    );
    assert!(!run(&a.next, files(&[("b", 0, 0)]), Role::Machine).moved);
}

#[test]
fn the_workspace_route_refuses_anything_but_paths_and_counts() {
    let bodies = [
        r#"{"files": [{"path": "a", "insertions": 1, "deletions": 0, "hunk": "@@ -1 +1 @@"}]}"#,
        r#"{"files": [{"path": "a", "insertions": 1, "deletions": 0, "contents": "fn main() {}"}]}"#,
        r#"{"files": [], "diff": "--- a\n+++ b"}"#,
        r#"{"files": [{"path": "a", "insertions": -1, "deletions": 0}]}"#,
        r#"{"files": [{"path": "a", "insertions": 1}]}"#,
        r#"{"files": [{"path": "", "insertions": 1, "deletions": 0}]}"#,
        r#"{"files": "a"}"#,
        r#"[]"#,
        "",
    ];
    for body in bodies {
        let e = parse_checked::<WorkspaceInput>(body.as_bytes()).expect_err(body);
        assert_eq!(e.code, Code::RequestInvalid, "{body}");
    }
    let e = parse_checked::<WorkspaceInput>(bodies[0].as_bytes()).unwrap_err();
    assert!(e.message.starts_with("files[0]"), "{}", e.message);
    assert!(e.message.contains("hunk"), "{}", e.message);
    let e = parse_checked::<WorkspaceInput>(bodies[2].as_bytes()).unwrap_err();
    assert!(e.message.contains("diff"), "{}", e.message);
    let ok = parse_checked::<WorkspaceInput>(br#"{"files": [{"path": "src/a.rs", "insertions": 3, "deletions": 4}]}"#)
        .unwrap();
    assert_eq!(ok.files[0].path, "src/a.rs");
}

#[test]
fn bad_bodies_are_refused_naming_the_field() {
    type Parse = fn(&[u8]) -> Option<Refusal>;
    let cases: [(&str, Parse, &str); 7] = [
        (
            r#"{"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": [], "owner": "x"}"#,
            |b| parse_checked::<WorkInput>(b).err(),
            "owner",
        ),
        (
            r#"{"title": "t", "goal": "", "constraints": [], "acceptance_criteria": []}"#,
            |b| parse_checked::<WorkInput>(b).err(),
            "goal",
        ),
        (
            r#"{"statement": "s", "evidence": ["not a uri"]}"#,
            |b| parse_checked::<DecisionInput>(b).err(),
            "evidence[0]",
        ),
        (r#"{"statement": "s"}"#, |b| parse_checked::<DecisionInput>(b).err(), "evidence"),
        (
            r#"{"type": "doc", "title": "t", "uri": "https://x", "sha256": "abc"}"#,
            |b| parse_checked::<ArtifactInput>(b).err(),
            "sha256",
        ),
        (r#"{"severity": "urgent", "title": "t"}"#, |b| parse_checked::<BlockerInput>(b).err(), "severity"),
        (r#"{"severity": "low", "title": "two\nlines"}"#, |b| parse_checked::<BlockerInput>(b).err(), "title"),
    ];
    for (body, parse, field) in cases {
        let e = parse(body.as_bytes()).expect(body);
        assert_eq!(e.code, Code::RequestInvalid);
        assert!(e.message.contains(field), "{body}: {}", e.message);
    }
    let long = format!(r#"{{"severity": "low", "title": "{}"}}"#, "x".repeat(TITLE_BYTES_MAX + 1));
    assert!(parse_checked::<BlockerInput>(long.as_bytes()).unwrap_err().message.contains("title"));
}

#[test]
fn collections_stop_at_their_named_limits() {
    let mut w = Work::default();
    for i in 0..DECISIONS_PER_HANDOFF_MAX {
        w = run(&w, decision(&format!("d{i}"), None), Role::Owner).next;
    }
    assert_eq!(refused(&w, decision("one more", None), Role::Owner).code, Code::RequestTooLarge);
}

/// Each field's limit is inclusive: a value exactly at it is accepted, one past it refused,
/// naming the field.
#[test]
fn every_text_and_list_limit_accepts_its_maximum_and_refuses_one_more() {
    let at_and_past = |build: &dyn Fn(usize) -> Result<(), Refusal>, max: usize, field: &str| {
        assert_eq!(build(max), Ok(()), "{field} at {max}");
        let e = build(max + 1).expect_err(field);
        assert_eq!(e.code, Code::RequestInvalid, "{field}");
        assert!(e.message.starts_with(field), "{field}: {}", e.message);
    };
    let work = |f: &dyn Fn(&mut WorkInput)| {
        let mut input = work_input(&["a"]);
        f(&mut input);
        input.checked().map(|_| ())
    };
    at_and_past(&|n| work(&|w| w.title = "t".repeat(n)), TITLE_BYTES_MAX, "title");
    at_and_past(&|n| work(&|w| w.goal = "g".repeat(n)), GOAL_BYTES_MAX, "goal");
    at_and_past(&|n| work(&|w| w.constraints = vec!["c".into(); n]), CONSTRAINTS_MAX, "constraints");
    at_and_past(
        &|n| work(&|w| w.acceptance_criteria = vec!["a".into(); n]),
        ACCEPTANCE_CRITERIA_MAX,
        "acceptance_criteria",
    );
    at_and_past(&|n| work(&|w| w.constraints = vec!["c".repeat(n)]), CRITERION_BYTES_MAX, "constraints[0]");
    let evidence = |n: usize| {
        DecisionInput {
            statement: "s".into(),
            rationale: None,
            evidence: vec!["https://x.example/e".into(); n],
            supersedes: None,
        }
        .checked()
        .map(|_| ())
    };
    at_and_past(&evidence, EVIDENCE_PER_DECISION_MAX, "evidence");
    let workspace = |n: usize| {
        WorkspaceInput { files: vec![FileInput { path: "src/a.rs".into(), insertions: 1, deletions: 0 }; n] }
            .checked()
            .map(|_| ())
    };
    at_and_past(&workspace, FILES_PER_REPORT_MAX, "files");
}

/// `apply` holds the report's limits again (a command may come from anywhere, not only a
/// checked body), and the hand-off keeps at most `FILES_PER_HANDOFF_MAX` paths in all.
#[test]
fn a_workspace_report_holds_up_to_its_limit_and_the_hand_off_up_to_its_own() {
    let report = |from: usize, n: usize| {
        Command::ReportWorkspace(WorkspaceInput {
            files: (from..from + n)
                .map(|i| FileInput { path: format!("src/{i}.rs"), insertions: 1, deletions: 0 })
                .collect(),
        })
    };
    let e = refused(&Work::default(), report(0, FILES_PER_REPORT_MAX + 1), Role::Machine);
    assert_eq!(e.code, Code::RequestInvalid);
    assert!(e.message.starts_with("files: more than"), "{}", e.message);
    let mut w = Work::default();
    for r in 0..FILES_PER_HANDOFF_MAX / FILES_PER_REPORT_MAX {
        w = run(&w, report(r * FILES_PER_REPORT_MAX, FILES_PER_REPORT_MAX), Role::Machine).next;
    }
    assert_eq!(w.files.len(), FILES_PER_HANDOFF_MAX);
    // A path already kept may be reported again; a new one is past the hand-off's limit.
    assert_eq!(run(&w, report(0, 1), Role::Machine).next.files.len(), FILES_PER_HANDOFF_MAX);
    assert_eq!(refused(&w, report(FILES_PER_HANDOFF_MAX, 1), Role::Machine).code, Code::RequestTooLarge);
}

#[test]
fn a_criterion_or_constraint_may_span_lines_but_holds_no_other_control_character() {
    let mut input = work_input(&["first line\nsecond line"]);
    assert!(input.clone().checked().is_ok());
    input.constraints = vec!["no\u{7}bell".into()];
    let e = input.checked().unwrap_err();
    assert!(e.message.starts_with("constraints[0]: control characters"), "{}", e.message);
}

#[test]
fn every_multi_line_field_allows_newline_and_tab_and_refuses_carriage_return_and_every_other_c0_or_c1_control() {
    for ok in ["one\ntwo", "a\tb", "plain", "é ✓ 中"] {
        assert!(crate::text::lines_only("f", ok).is_ok(), "{ok:?}");
        assert!(crate::text::multi_line("f", ok, 100).is_ok(), "{ok:?}");
    }
    let c0 = (0u32..0x20).filter(|c| *c != 0x0a && *c != 0x09);
    let c1 = 0x7fu32..=0x9f;
    for c in c0.chain(c1).filter_map(char::from_u32) {
        let text = format!("ok{c}ok");
        let e = crate::text::multi_line("constraints[0]", &text, 100).unwrap_err();
        assert!(e.message.starts_with("constraints[0]: control characters"), "U+{:04X}: {}", c as u32, e.message);
    }
    let mut input = work_input(&["windows line\r\nending"]);
    assert!(input.clone().checked().unwrap_err().message.contains(": control characters"), "\\r is refused too");
    input.acceptance_criteria = vec!["unix line\nending".into()];
    assert!(input.checked().is_ok());
}

#[test]
fn unmet_criteria_are_replaced_by_each_final_report_and_checked_against_the_criteria() {
    let w = run(&Work::default(), Command::SetWork(work_input(&["a", "b", "c"])), Role::Owner).next;
    let a = record_unmet(&w, &[2, 0, 2]).unwrap();
    assert_eq!(a.next.unmet, [0, 2]);
    assert!(!record_unmet(&a.next, &[0, 2]).unwrap().moved);
    let cleared = record_unmet(&a.next, &[]).unwrap();
    assert!(cleared.next.unmet.is_empty());
    assert_eq!(record_unmet(&w, &[3]).unwrap_err().code, Code::RequestInvalid);
    // Rewriting criterion 2 drops it from the unmet list; criterion 0 is unchanged and stays.
    let rewritten = run(&a.next, Command::SetWork(work_input(&["a", "b", "c, faster"])), Role::Owner);
    assert_eq!(rewritten.next.unmet, [0]);
}

// ---- Artifact and evidence URIs: http, https or relative, nothing else. ----

fn artifact_body(uri: &str) -> String {
    json!({"type": "doc", "title": "t", "uri": uri}).to_string()
}

fn evidence_body(third: &str) -> String {
    json!({"statement": "s", "evidence": ["https://a.example/1", "docs/adr/2.md", third]}).to_string()
}

/// Refused at the parser and again by `apply`, naming the field, with the scheme rule's words.
fn assert_refused_by_scheme(uri: &str) {
    let e = parse_checked::<ArtifactInput>(artifact_body(uri).as_bytes()).expect_err(uri);
    assert_eq!(e.code, Code::RequestInvalid, "{uri}");
    assert_eq!(e.message, "uri: only http, https or relative URIs are accepted", "{uri}");
    let e = parse_checked::<DecisionInput>(evidence_body(uri).as_bytes()).expect_err(uri);
    assert_eq!(e.message, "evidence[2]: only http, https or relative URIs are accepted", "{uri}");
    let e = refused(&Work::default(), artifact("Design", uri, None), Role::Machine);
    assert_eq!(
        (e.code, e.message.as_str()),
        (Code::RequestInvalid, "uri: only http, https or relative URIs are accepted")
    );
}

#[test]
fn an_artifact_uri_with_a_javascript_scheme_is_refused_naming_the_field() {
    assert_refused_by_scheme("javascript:alert(1)");
}

#[test]
fn a_scheme_is_refused_in_any_case_so_mixed_case_javascript_is_too() {
    for uri in ["JavaScript:alert(1)", "JAVASCRIPT:alert(1)", "jAvAsCrIpT:alert(document.cookie)//https://x"] {
        assert_refused_by_scheme(uri);
    }
}

#[test]
fn data_vbscript_file_and_every_other_scheme_are_refused_naming_the_field() {
    let uris = [
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "git+https://git.example/notes@3f2a#migrations/0007.sql",
        "s3://bucket/key",
        "git://git.example/repo",
        "mailto:someone@example.com",
        "ftp://ftp.example/x",
        "urn:isbn:0451450523",
        "a:b",
    ];
    for uri in uris {
        assert_refused_by_scheme(uri);
    }
}

#[test]
fn a_uri_with_leading_whitespace_or_a_control_character_is_refused_naming_the_field() {
    // Browsers strip leading spaces and C0 controls and drop tabs and newlines inside a URL, so
    // each of these would be read as `javascript:`.
    for uri in [
        " javascript:alert(1)",
        "\tjavascript:alert(1)",
        "\u{0}javascript:alert(1)",
        "\u{1}javascript:alert(1)",
        "java\nscript:alert(1)",
        "java\tscript:alert(1)",
        "https://x.example/ a",
    ] {
        let e = parse_checked::<ArtifactInput>(artifact_body(uri).as_bytes()).expect_err(uri);
        assert_eq!(e.code, Code::RequestInvalid, "{uri:?}");
        assert!(e.message.starts_with("uri: "), "{uri:?}: {}", e.message);
        let e = parse_checked::<DecisionInput>(evidence_body(uri).as_bytes()).expect_err(uri);
        assert!(e.message.starts_with("evidence[2]: "), "{uri:?}: {}", e.message);
    }
}

#[test]
fn a_protocol_relative_uri_and_a_backslash_are_refused_because_they_name_another_host() {
    assert_refused_by_scheme("//evil.example/x");
    assert_refused_by_scheme("//");
    // Browsers read `\` as `/`: each of these would reach evil.example.
    for uri in ["\\\\evil.example/x", "/\\evil.example/x", "https:\\\\evil.example"] {
        let e = parse_checked::<ArtifactInput>(artifact_body(uri).as_bytes()).expect_err(uri);
        assert_eq!(e.message, "uri: a URI has no whitespace and no backslash", "{uri}");
    }
}

#[test]
fn an_http_or_https_uri_needs_slashes_and_a_host() {
    for uri in [
        "http:",
        "https:",
        "http:evil.example",
        "https:/evil.example",
        "https:///evil.example",
        "http://",
        "https://?q",
        "https://#f",
    ] {
        assert_refused_by_scheme(uri);
    }
}

#[test]
fn http_and_https_uris_in_any_case_and_relative_references_are_accepted() {
    let uris = [
        "https://example.com/design.md",
        "http://example.com",
        "HTTPS://EXAMPLE.COM/A",
        "HtTp://user@x.example:8080/p?q=1&r=[2]#frag",
        "docs/design.md",
        "/abs/path",
        "../up/one",
        "./a:b",
        "a/b:c",
        "?q=1",
        "#section",
        "x/[click](javascript:alert(1))",
        "caf%C3%A9.md",
        "café.md",
    ];
    for uri in uris {
        assert!(parse_checked::<ArtifactInput>(artifact_body(uri).as_bytes()).is_ok(), "{uri}");
        assert!(parse_checked::<DecisionInput>(evidence_body(uri).as_bytes()).is_ok(), "{uri}");
        let a = run(&Work::default(), artifact("Design", uri, None), Role::Machine);
        assert!(matches!(&a.effect, Item::Artifact(art) if art.uri == uri), "kept as sent");
    }
}

#[test]
fn uris_keep_their_length_and_single_line_limits() {
    let long = format!("https://x.example/{}", "a".repeat(URI_BYTES_MAX));
    let e = parse_checked::<ArtifactInput>(artifact_body(&long).as_bytes()).unwrap_err();
    assert_eq!(e.message, format!("uri: longer than {URI_BYTES_MAX} bytes"));
    let e = parse_checked::<DecisionInput>(evidence_body("").as_bytes()).unwrap_err();
    assert_eq!(e.message, "evidence[2]: must not be empty");
    let e = parse_checked::<ArtifactInput>(artifact_body("https://x.example/\r").as_bytes()).unwrap_err();
    assert!(e.message.starts_with("uri: must be one line"), "{}", e.message);
}
