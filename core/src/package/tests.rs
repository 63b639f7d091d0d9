use super::*;
use crate::json::parse_checked;
use crate::work::{
    self, ArtifactInput, BlockerInput, Command, DecisionInput, FileInput, Severity, WorkInput, WorkspaceInput,
};
use serde_json::json;
use std::path::PathBuf;

// ---- Golden files: compared byte for byte; rewritten only with UPDATE_GOLDEN=1. ----

pub(crate) fn fixture_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../test/fixtures").join(relative)
}

pub(crate) fn check_golden(relative: &str, actual: &str) {
    crate::golden::check(&fixture_path(relative), actual);
}

// ---- Builders ----

pub(crate) const T0: EpochMs = 1_796_040_000_000; // 2026-11-30T12:00:00Z

pub(crate) fn handoff(turn: u64, status: Status) -> Record {
    let mut r = Record::create(
        "ho_0123456789abcdef0123456789abcdef".into(),
        "alice".into(),
        "sess-42".into(),
        "m-7".into(),
        "large".into(),
        T0,
    );
    r.turn = turn;
    r.status = status;
    r
}

fn run(w: &Work, command: Command, by: Role, at: EpochMs) -> Work {
    work::apply(w, &handoff(1, Status::Running), &command, by, at).expect("accepted").next
}

pub(crate) fn work_input() -> WorkInput {
    WorkInput {
        title: "Search that answers in under a second".into(),
        goal: "Users find any note by a word in it, in under a second, on a 10k-note account.\nNo \"fuzzy\" matching yet; a \\ in a query is literal. Café, naïve, 検索 all work.".into(),
        task_type: Some("feature".into()),
        priority: Some("high".into()),
        constraints: vec!["no new services".into(), "SQLite FTS5 only".into()],
        acceptance_criteria: vec!["p95 under 1 s on 10k notes".into(), "accents fold: cafe finds café".into(), "tests in CI".into()],
    }
}

pub(crate) fn decision(
    statement: &str,
    rationale: Option<&str>,
    evidence: &[&str],
    supersedes: Option<&str>,
) -> Command {
    Command::RecordDecision(DecisionInput {
        statement: statement.into(),
        rationale: rationale.map(str::to_string),
        evidence: evidence.iter().map(|s| s.to_string()).collect(),
        supersedes: supersedes.map(str::to_string),
    })
}

pub(crate) fn artifact(title: &str, uri: &str) -> Command {
    Command::AddArtifact(ArtifactInput { kind: "doc".into(), title: title.into(), uri: uri.into(), sha256: None })
}

pub(crate) fn files(paths: impl IntoIterator<Item = (String, u32, u32)>) -> Command {
    Command::ReportWorkspace(WorkspaceInput {
        files: paths
            .into_iter()
            .map(|(path, insertions, deletions)| FileInput { path, insertions, deletions })
            .collect(),
    })
}

/// Adds a new artifact title as `apply` did before URIs were limited to http, https and relative
/// references: records stored then may hold any scheme, and must still compile to the same
/// bytes (the `rich` golden vectors hold one) and render as inert text in Markdown.
fn stored_before_the_uri_rule(w: &Work, title: &str, uri: &str, at: EpochMs) -> Work {
    let input = ArtifactInput { kind: "doc".into(), title: title.into(), uri: uri.into(), sha256: None };
    assert!(crate::json::Checked::checked(input).is_err(), "{uri} is refused now");
    let mut next = w.clone();
    next.counters.artifacts += 1;
    next.artifacts.push(work::Artifact {
        handed: work::HandedArtifact {
            id: format!("art_{}", next.counters.artifacts),
            kind: "doc".into(),
            title: title.into(),
            version: 1,
            uri: uri.into(),
            sha256: None,
        },
        recorded_at: at.into(),
        by: Role::Machine,
    });
    next
}

/// A record with a bit of everything: a superseded decision, an artifact in two versions,
/// a resolved and an open blocker, workspace paths, an unmet criterion.
pub(crate) fn rich_work() -> Work {
    let mut w = run(&Work::default(), Command::SetWork(work_input()), Role::Owner, T0);
    w = run(&w, decision("Use LIKE queries", None, &[], None), Role::Machine, T0 + 1_000);
    w = run(
        &w,
        decision(
            "Use SQLite FTS5 with the unicode61 tokenizer",
            Some("LIKE is 4 s on 10k notes"),
            &["https://bench.example/run/7", "https://sqlite.org/fts5.html"],
            Some("dec_1"),
        ),
        Role::Machine,
        T0 + 2_000,
    );
    w = run(
        &w,
        decision("Fold accents with remove_diacritics 2", None, &["https://sqlite.org/fts5.html"], None),
        Role::Owner,
        T0 + 3_000,
    );
    w = run(&w, artifact("Benchmark report", "https://bench.example/run/6"), Role::Machine, T0 + 4_000);
    w = run(
        &w,
        Command::AddArtifact(ArtifactInput {
            kind: "report".into(),
            title: "Benchmark report".into(),
            uri: "https://bench.example/run/7".into(),
            sha256: Some("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into()),
        }),
        Role::Machine,
        T0 + 5_000,
    );
    w = stored_before_the_uri_rule(
        &w,
        "Schema migration",
        "git+https://git.example/notes@3f2a#migrations/0007.sql",
        T0 + 6_000,
    );
    w = run(
        &w,
        Command::AddBlocker(BlockerInput { severity: Severity::Medium, title: "No staging database".into() }),
        Role::Machine,
        T0 + 7_000,
    );
    w = run(
        &w,
        Command::AddBlocker(BlockerInput { severity: Severity::High, title: "CI has no FTS5 build".into() }),
        Role::Machine,
        T0 + 8_000,
    );
    w = run(&w, Command::ResolveBlocker { id: "blk_1".into() }, Role::Owner, T0 + 9_000);
    w = run(
        &w,
        files([
            ("src/search.rs".to_string(), 120, 4),
            ("migrations/0007.sql".to_string(), 30, 0),
            ("README.md".to_string(), 2, 1),
        ]),
        Role::Machine,
        T0 + 10_000,
    );
    w = crate::work::record_unmet(&w, &[1]).expect("criterion 1 exists").next;
    w
}

// ---- Hostile strings: what a machine could write to make the Markdown do something ----

const IMG: &str = "<img src=x onerror=alert(1)>";
const LINK: &str = "[click](javascript:alert(1))";
const IMAGE: &str = "![x](http://evil/x.png)";
const SCRIPT: &str = "<script>alert(1)</script>";
const TABLE: &str = "| a | b |";

/// A stored record with hostile strings in every machine-written field, built as stored (not
/// through `apply`) so that it can also hold URIs refused since the scheme rule, as a record
/// kept from before it would: the Markdown must be inert whatever the record holds.
fn hostile_work() -> Work {
    let goal = [
        "# heading",
        "- item",
        "+ plus item",
        "* star item",
        "1. one",
        "2) two",
        TABLE,
        "|---|---|",
        "```",
        SCRIPT,
        "```",
        "~~~",
        "    indented code",
        "===",
        "---",
        "> quoted",
        "[x]: javascript:alert(1)",
        IMAGE,
        "lone CR\r# heading after a lone CR",
        "CRLF\r\n- item after a CRLF",
        "&lt;b&gt; &amp; &#106;avascript:alert(1) \\[escaped\\] *em* _em_ ~~strike~~ $x$ {: onclick=alert(1)} <!-- comment -->",
        "a ```` run of four and a trailing backslash \\",
    ]
    .join("\n");
    let spec = WorkInput {
        title: format!("{IMG} {LINK} # closing hashes #"),
        goal,
        task_type: Some("- item".into()),
        priority: Some("# heading".into()),
        constraints: vec![SCRIPT.into(), "- item\n# heading".into(), TABLE.into()],
        acceptance_criteria: vec![LINK.into(), IMAGE.into(), "`` ` ``".into()],
    };
    let decision = |n: u64, statement: String, rationale: Option<String>, evidence: &[&str]| work::Decision {
        id: format!("dec_{n}"),
        statement,
        rationale,
        evidence: evidence.iter().map(|e| e.to_string()).collect(),
        supersedes: None,
        superseded_by: None,
        recorded_at: (T0 + n as i64 * 1_000).into(),
        by: Role::Machine,
    };
    let artifact = |n: u64, kind: &str, title: &str, uri: &str| work::Artifact {
        handed: work::HandedArtifact {
            id: format!("art_{n}"),
            kind: kind.into(),
            title: title.into(),
            version: 1,
            uri: uri.into(),
            sha256: None,
        },
        recorded_at: (T0 + 10_000 + n as i64 * 1_000).into(),
        by: Role::Machine,
    };
    let blocker = |n: u64, title: &str| work::Blocker {
        id: format!("blk_{n}"),
        severity: Severity::High,
        title: title.into(),
        status: work::BlockerStatus::Open,
        raised_at: (T0 + 20_000).into(),
        resolved_at: None,
        by: Role::Machine,
    };
    let paths = [IMG, LINK, IMAGE, "# heading", "- item", TABLE, "a```b", "`start", "end`", " both spaces ", "&lt;.rs"];
    Work {
        spec: Some(spec),
        decisions: vec![
            decision(
                1,
                format!("# heading\n{IMG}"),
                Some(format!("{LINK}\n{TABLE}")),
                &["javascript:alert(1)", "JavaScript:alert(1)", "https://ok.example/path?q=1&r=2#f"],
            ),
            decision(
                2,
                IMAGE.into(),
                None,
                &[
                    "https://evil.example/a\"><img/src=x/onerror=alert(1)>",
                    "x/[click](javascript:alert(1))",
                    "https://ok.example/`a`",
                ],
            ),
        ],
        artifacts: vec![
            artifact(1, SCRIPT, IMAGE, "javascript:alert(1)"),
            artifact(2, TABLE, "`` ` ``", "//evil.example/x"),
            artifact(3, "doc", LINK, "data:text/html,<script>alert(1)</script>"),
            artifact(4, "- item", "# heading", "HTTPS://OK.EXAMPLE/Design.md"),
        ],
        blockers: vec![blocker(1, IMG), blocker(2, "- item")],
        files: paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.to_string(), work::FileCounts { insertions: i as u32, deletions: 0 }))
            .collect(),
        unmet: vec![0, 1, 2],
        counters: work::Counters { decisions: 2, artifacts: 4, blockers: 2 },
    }
}

pub(crate) fn lineage() -> Vec<TurnEntry> {
    vec![
        TurnEntry {
            turn: 1,
            status: Status::Failed,
            runtime: Some("codex".into()),
            permission_mode: None,
            placement: Placement::default(),
            package_version: None,
            package_hash: None,
            continued_from: None,
            opened_at: T0.into(),
            ended_at: Some((T0 + 12_000).into()),
            prompt: None,
            prompt_dropped: false,
            ..TurnEntry::outcome_unknown()
        },
        TurnEntry {
            turn: 2,
            status: Status::Running,
            runtime: Some("claude-code".into()),
            permission_mode: None,
            placement: Placement::default(),
            package_version: Some(1),
            package_hash: Some("ab".repeat(32)),
            continued_from: Some(ContinuedFrom { turn: 1, runtime: Some("codex".into()) }),
            opened_at: (T0 + 13_000).into(),
            ended_at: None,
            prompt: None,
            prompt_dropped: false,
            ..TurnEntry::outcome_unknown()
        },
    ]
}

pub(crate) fn request() -> PackageRequest {
    PackageRequest {
        objective: "Make accent folding pass and get FTS5 into CI".into(),
        purpose: "The last two acceptance criteria".into(),
        runtime: "claude-code".into(),
        note: Some("Keep the migration reversible.".into()),
        model: None,
    }
}

pub(crate) fn rich_package() -> Package {
    let (h, w, l) = (handoff(2, Status::Running), rich_work(), lineage());
    compile(&Sources { record: &h, work: &w, lineage: &l }, &request(), None, T0 + 20_000).unwrap()
}

// ---- Golden vectors ----

/// The committed inputs of one golden vector: everything the compiler reads.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct GoldenInput {
    handoff: GoldenHandoff,
    work: Work,
    lineage: Vec<TurnEntry>,
    request: PackageRequest,
    rejection: Option<Rejection>,
    now: EpochMs,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct GoldenHandoff {
    id: String,
    session: String,
    machine: String,
    turn: u64,
    state: State,
    status: Status,
}

fn golden_inputs() -> Vec<(&'static str, GoldenInput)> {
    let h = handoff(2, Status::Running);
    let gh = |h: &Record| GoldenHandoff {
        id: h.id.clone(),
        session: h.session.clone(),
        machine: h.machine.clone(),
        turn: h.turn,
        state: h.state,
        status: h.status,
    };
    let minimal = Work {
        spec: Some(WorkInput {
            title: "t".into(),
            goal: "g".into(),
            task_type: None,
            priority: None,
            constraints: vec![],
            acceptance_criteria: vec![],
        }),
        ..Work::default()
    };
    vec![
        (
            "minimal",
            GoldenInput {
                handoff: gh(&handoff(1, Status::Running)),
                work: minimal,
                lineage: vec![],
                request: PackageRequest {
                    objective: "o".into(),
                    purpose: "p".into(),
                    runtime: "r".into(),
                    note: None,
                    model: None,
                },
                rejection: None,
                now: 0,
            },
        ),
        (
            "rich",
            GoldenInput {
                handoff: gh(&h),
                work: rich_work(),
                lineage: lineage(),
                request: request(),
                rejection: None,
                now: T0 + 20_000,
            },
        ),
        (
            "rich-after-rejection",
            GoldenInput {
                handoff: gh(&h),
                work: rich_work(),
                lineage: lineage(),
                request: request(),
                rejection: Some(Rejection {
                    reason: RejectReason::MissingContext,
                    note: "which tokenizer? say why".into(),
                    rejected_at: (T0 + 15_000).into(),
                    by: Role::Machine,
                }),
                now: T0 + 20_000,
            },
        ),
        (
            "hostile",
            GoldenInput {
                handoff: gh(&h),
                work: hostile_work(),
                lineage: lineage(),
                request: PackageRequest {
                    objective: format!("{LINK}\n- item"),
                    purpose: TABLE.into(),
                    runtime: "`rt`<b>".into(),
                    note: Some(format!("{SCRIPT}\n# heading\n- item\n{IMAGE}")),
                    model: None,
                },
                rejection: Some(Rejection {
                    reason: RejectReason::Other,
                    note: format!("{IMAGE}\n# heading"),
                    rejected_at: (T0 + 15_000).into(),
                    by: Role::Machine,
                }),
                now: T0 + 20_000,
            },
        ),
    ]
}

/// Compiles the committed input of the golden vector `name`.
fn golden_package(name: &str) -> Package {
    let text = std::fs::read_to_string(fixture_path(&format!("package/{name}.input.json"))).unwrap();
    let input: GoldenInput = serde_json::from_str(&text).unwrap();
    let mut h = handoff(input.handoff.turn, input.handoff.status);
    (h.id, h.session, h.machine, h.state) =
        (input.handoff.id, input.handoff.session, input.handoff.machine, input.handoff.state);
    let sources = Sources { record: &h, work: &input.work, lineage: &input.lineage };
    compile(&sources, &input.request, input.rejection.as_ref(), input.now).unwrap()
}

#[test]
fn golden_vectors_compile_a_committed_record_to_its_exact_canonical_json_and_hash() {
    for (name, built) in golden_inputs() {
        // The committed record is the fixture, in the form it was first stored (times as epoch
        // milliseconds): it still reads as what the builder above produces.
        if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
            check_golden(
                &format!("package/{name}.input.json"),
                &(serde_json::to_string_pretty(&built).unwrap() + "\n"),
            );
        }
        let committed = std::fs::read_to_string(fixture_path(&format!("package/{name}.input.json"))).unwrap();
        assert_eq!(
            serde_json::from_str::<GoldenInput>(&committed).unwrap(),
            built,
            "{name}.input.json reads as the builder's record"
        );
        let package = golden_package(name);
        check_golden(&format!("package/{name}.canonical.json"), &hashed_json(&package));
        check_golden(&format!("package/{name}.sha256"), &(package_hash(&package) + "\n"));
        // The package is a stable format: what it serializes to reads back as itself.
        let back: Package = serde_json::from_value(serde_json::to_value(&package).unwrap()).unwrap();
        assert_eq!(back, package);
    }
}

#[test]
fn the_document_an_answer_carries_is_the_package_and_the_hashed_text_is_it_without_generated_at() {
    for (name, _) in golden_inputs() {
        let package = golden_package(name);
        let document = Document::of(&package);
        let read: Package = serde_json::from_str(document.json()).expect("the document reads back");
        assert_eq!(read, package, "{name}");
        let mut value = serde_json::to_value(&package).unwrap();
        value.as_object_mut().unwrap().remove("generated_at");
        assert_eq!(
            hashed_json(&package),
            canonical_json(&value),
            "{name}: the cut document is the package written without it"
        );
        let hashed = document.json().replacen(
            &format!(",\"generated_at\":{}", serde_json::to_string(&package.generated_at).unwrap()),
            "",
            1,
        );
        assert_eq!(hashed, hashed_json(&package), "{name}: one member and one comma less");
        assert_eq!(document.hash(), package_hash(&package), "{name}");
    }
}

#[test]
fn the_cut_takes_one_comma_wherever_generated_at_sorts() {
    for (value, hashed) in [
        (json!({"generated_at": "t", "z": 1}), r#"{"z":1}"#),
        (json!({"a": 1, "generated_at": "t", "z": 2}), r#"{"a":1,"z":2}"#),
        (json!({"a": 1, "generated_at": "t"}), r#"{"a":1}"#),
        (json!({"generated_at": "t"}), "{}"),
    ] {
        assert_eq!(Document::of_value(&value).hashed().concat(), hashed, "{value}");
    }
}

#[test]
fn canonical_json_sorts_keys_by_code_point_and_has_no_whitespace() {
    let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\"y\\\n", "é": 1, "Z": -2});
    assert_eq!(canonical_json(&v), r#"{"Z":-2,"a":"x\"y\\\n","b":[1,{"a":true,"z":null}],"é":1}"#);
}

#[test]
fn the_hash_leaves_out_generated_at_and_is_lowercase_hex() {
    let mut p = rich_package();
    let h1 = package_hash(&p);
    p.generated_at = crate::time::parse_rfc3339("2030-01-01T00:00:00.000Z").unwrap().into();
    assert_eq!(package_hash(&p), h1);
    assert!(!hashed_json(&p).contains("generated_at"));
    assert_eq!(h1.len(), 64);
    assert!(h1.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    p.notes = None;
    assert_ne!(package_hash(&p), h1);
}

#[test]
fn the_package_carries_exactly_the_format_one_fields() {
    let v = serde_json::to_value(rich_package()).unwrap();
    let keys: Vec<&str> =
        v.as_object().unwrap().keys().map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect();
    assert_eq!(
        keys,
        [
            "acceptance_criteria",
            "artifacts",
            "blockers",
            "constraints",
            "decisions",
            "evidence_links",
            "format",
            "generated_at",
            "next",
            "notes",
            "relevant_files",
            "source",
            "state",
            "truncation",
            "work"
        ]
    );
    assert_eq!(v["format"], 1);
    assert_eq!(v["state"]["phase"], json!({"state": "open", "turn": 2, "status": "running"}));
    assert_eq!(v["source"], json!({"session": "sess-42", "machine": "m-7", "runtime": "claude-code"}));
    assert_eq!(v["state"]["completed"], json!(["turn 1 opened", "turn 1 finished (failed)", "turn 2 opened"]));
    assert_eq!(
        v["state"]["unresolved"],
        json!([
            "blocker blk_2 (high): CI has no FTS5 build",
            "acceptance criterion 1 not met: accents fold: cafe finds café"
        ])
    );
    assert_eq!(
        v["blockers"],
        json!([{"id": "blk_2", "severity": "high", "title": "CI has no FTS5 build", "status": "open"}])
    );
    assert_eq!(v["artifacts"][0]["id"], "art_2");
    assert_eq!((v["artifacts"][1]["id"].as_str(), v["artifacts"][1]["version"].as_u64()), (Some("art_1"), Some(2)));
    assert_eq!(v["relevant_files"], json!(["README.md", "migrations/0007.sql", "src/search.rs"]));
    assert_eq!(
        v["evidence_links"],
        json!([
            "git+https://git.example/notes@3f2a#migrations/0007.sql",
            "https://bench.example/run/7",
            "https://sqlite.org/fts5.html"
        ])
    );
    assert_eq!(v["notes"], "Keep the migration reversible.");
}

#[test]
fn superseded_decisions_are_absent_from_the_package() {
    let p = rich_package();
    let ids: Vec<&str> = p.decisions.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["dec_3", "dec_2"]);
    assert!(!hashed_json(&p).contains("Use LIKE queries"));
}

#[test]
fn a_package_needs_the_work_to_be_set() {
    let h = handoff(1, Status::Running);
    let e = compile(&Sources { record: &h, work: &Work::default(), lineage: &[] }, &request(), None, T0).unwrap_err();
    assert_eq!(e.code, Code::RequestInvalid);
}

// ---- Bounds ----

fn with_work(extra: impl FnOnce(Work) -> Work) -> Package {
    let h = handoff(1, Status::Running);
    let w = extra(run(&Work::default(), Command::SetWork(work_input()), Role::Owner, T0));
    compile(&Sources { record: &h, work: &w, lineage: &[] }, &request(), None, T0).unwrap()
}

#[test]
fn twenty_one_decisions_keep_the_newest_twenty_and_count_one_omitted() {
    let p = with_work(|mut w| {
        for i in 1..=21 {
            w = run(
                &w,
                decision(&format!("decision {i}"), None, &[&format!("https://e.example/{i}")], None),
                Role::Machine,
                T0 + i,
            );
        }
        w
    });
    assert_eq!(p.decisions.len(), 20);
    assert_eq!(p.decisions[0].id, "dec_21");
    assert_eq!(p.decisions[19].id, "dec_2");
    assert_eq!(
        p.truncation,
        Truncation { decisions_omitted: 1, artifacts_omitted: 0, files_omitted: 0, completed_turns_omitted: 0 }
    );
    assert!(
        !p.evidence_links.contains(&"https://e.example/1".to_string()),
        "links of left-out decisions are left out too"
    );
}

#[test]
fn twenty_one_artifact_titles_keep_the_newest_twenty_each_at_its_latest_version() {
    let p = with_work(|mut w| {
        for i in 1..=21 {
            w = run(&w, artifact(&format!("artifact {i}"), &format!("https://a.example/{i}")), Role::Machine, T0 + i);
        }
        // Revising the oldest title makes it the newest.
        run(&w, artifact("artifact 1", "https://a.example/1b"), Role::Machine, T0 + 100)
    });
    assert_eq!(p.artifacts.len(), 20);
    assert_eq!((p.artifacts[0].id.as_str(), p.artifacts[0].version), ("art_1", 2));
    assert!(p.artifacts.iter().all(|a| a.id != "art_2"));
    assert_eq!(
        p.truncation,
        Truncation { decisions_omitted: 0, artifacts_omitted: 1, files_omitted: 0, completed_turns_omitted: 0 }
    );
}

#[test]
fn a_hundred_and_one_files_keep_a_hundred_most_changed_paths_in_code_point_order() {
    let p = with_work(|w| {
        let paths = (0..101).map(|i| (format!("src/f{i:03}.rs"), if i == 0 { 0 } else { 1 }, 0));
        run(&w, files(paths), Role::Machine, T0)
    });
    assert_eq!(p.relevant_files.len(), 100);
    assert!(!p.relevant_files.contains(&"src/f000.rs".to_string()), "the least changed path is left out");
    let mut sorted = p.relevant_files.clone();
    sorted.sort();
    assert_eq!(p.relevant_files, sorted);
    assert_eq!(
        p.truncation,
        Truncation { decisions_omitted: 0, artifacts_omitted: 0, files_omitted: 1, completed_turns_omitted: 0 }
    );
}

#[test]
fn paths_are_ordered_by_code_point_not_by_locale() {
    let p = with_work(|w| run(&w, files(["b", "B", "é", "a", "Z"].map(|s| (s.to_string(), 1, 1))), Role::Machine, T0));
    assert_eq!(p.relevant_files, ["B", "Z", "a", "b", "é"]);
}

// ---- Completed: the milestones of the newest turns only ----

const ENDED: [Status; 3] = [Status::Done, Status::Failed, Status::Cancelled];

/// A lineage of `turns` turns, as the hand-off keeps it: every turn but the last has ended, with
/// the status `ended(turn)`.
fn long_lineage(turns: u64, ended: impl Fn(u64) -> Status) -> Vec<TurnEntry> {
    (1..=turns)
        .map(|turn| TurnEntry {
            turn,
            status: if turn == turns { Status::Running } else { ended(turn) },
            runtime: Some(if turn % 2 == 0 { "codex" } else { "claude-code" }.into()),
            permission_mode: None,
            placement: Placement::default(),
            package_version: (turn > 1).then_some(turn - 1),
            package_hash: (turn > 1).then(|| format!("{:064x}", turn)),
            continued_from: (turn > 1).then(|| ContinuedFrom { turn: turn - 1, runtime: None }),
            opened_at: (T0 + turn as i64 * 1_000).into(),
            ended_at: (turn < turns).then_some((T0 + turn as i64 * 1_000 + 500).into()),
            prompt: Some(format!("turn {turn}'s words")),
            prompt_dropped: false,
            ..TurnEntry::outcome_unknown()
        })
        .collect()
}

fn compile_turns(lineage: &[TurnEntry], current: &TurnEntry) -> Package {
    let h = handoff(current.turn, current.status);
    let w = rich_work();
    compile(&Sources { record: &h, work: &w, lineage }, &request(), None, T0).unwrap()
}

#[test]
fn two_hundred_turns_keep_the_milestones_of_the_newest_twenty_and_count_the_rest_omitted() {
    let lineage = long_lineage(200, |t| ENDED[t as usize % 3]);
    let p = compile_turns(&lineage, &lineage[199]);
    assert_eq!(PACKAGE_COMPLETED_TURNS_MAX, 20);
    assert_eq!(p.state.completed.len(), 19 * 2 + 1, "opened and finished for 181..=199, opened for 200");
    assert_eq!(p.state.completed.first().map(String::as_str), Some("turn 181 opened"));
    assert_eq!(p.state.completed[1], format!("turn 181 finished ({})", ENDED[181 % 3].as_str()));
    assert_eq!(p.state.completed.last().map(String::as_str), Some("turn 200 opened"));
    assert_eq!(p.truncation.completed_turns_omitted, 180);
    assert!(p.truncation.any());
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["truncation"]["completed_turns_omitted"], 180);
    let back: Package = serde_json::from_value(v).unwrap();
    assert_eq!(back, p);
}

#[test]
fn the_newest_twenty_turns_are_all_listed_and_the_twenty_first_oldest_is_the_first_left_out() {
    let twenty = long_lineage(20, |_| Status::Done);
    let p = compile_turns(&twenty, &twenty[19]);
    assert_eq!((p.state.completed[0].as_str(), p.truncation.completed_turns_omitted), ("turn 1 opened", 0));
    assert!(!p.truncation.any());
    let twenty_one = long_lineage(21, |_| Status::Done);
    let p = compile_turns(&twenty_one, &twenty_one[20]);
    assert_eq!((p.state.completed[0].as_str(), p.truncation.completed_turns_omitted), ("turn 2 opened", 1));
}

#[test]
fn a_package_that_leaves_no_turn_out_keeps_its_format_one_truncation_bytes() {
    // The field is written only when it counts something, so every package compiled before it
    // existed keeps its bytes and hash (the golden vectors check the same on whole packages).
    let p = rich_package();
    assert_eq!(p.truncation.completed_turns_omitted, 0);
    assert_eq!(
        canonical_json(&serde_json::to_value(p.truncation).unwrap()),
        r#"{"artifacts_omitted":0,"decisions_omitted":0,"files_omitted":0}"#
    );
    let old: Truncation =
        serde_json::from_str(r#"{"decisions_omitted":1,"artifacts_omitted":0,"files_omitted":0}"#).unwrap();
    assert_eq!(old, Truncation { decisions_omitted: 1, ..Truncation::default() });
}

#[test]
fn the_hash_covers_the_kept_turns_only_so_a_change_in_a_left_out_turn_changes_nothing() {
    let lineage = long_lineage(200, |_| Status::Done);
    let mut other = lineage.clone();
    other[4].status = Status::Failed; // turn 5: left out
    other[4].runtime = Some("another".into());
    let (a, b) = (compile_turns(&lineage, &lineage[199]), compile_turns(&other, &other[199]));
    assert_eq!(package_hash(&a), package_hash(&b));
    other[189].status = Status::Failed; // turn 190: kept
    assert_ne!(package_hash(&a), package_hash(&compile_turns(&other, &other[199])));
}

#[test]
fn the_markdown_and_the_briefing_count_the_left_out_turns() {
    let lineage = long_lineage(200, |_| Status::Done);
    let package = compile_turns(&lineage, &lineage[199]);
    let latest = Latest {
        package_version: 1,
        package_hash: package_hash(&package),
        state: OfferState::Offered,
        rejection: None,
        package,
        document: Default::default(),
    };
    let md = render_markdown(&latest);
    assert!(md.contains("## Left out by the compiler's bounds\n\n"), "{md}");
    assert!(md.contains("- Turns: 180 (Completed lists the newest 20)\n"), "{md}");
    let briefing = crate::briefing::render(&latest, BRIEFING_BUDGET_BYTES_MAX, &crate::briefing::Reach::None).text;
    assert!(
        briefing.contains("The package itself leaves out the milestones of 180 older turns: it keeps "),
        "{briefing}"
    );
    assert!(briefing.contains("and the milestones of the newest 20 turns;"), "{briefing}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// The Durable Object may load only the newest `PACKAGE_COMPLETED_TURNS_MAX + 1` entries of
    /// the lineage: the package must be the same, byte for byte, as from the whole lineage.
    #[test]
    fn compiling_from_the_newest_entries_of_the_lineage_gives_the_same_bytes_as_from_the_whole(
        turns in 1u64..120,
        statuses in proptest::collection::vec(0usize..3, 120),
        current in proptest::sample::select(vec![Status::Running, Status::NeedsYou, Status::Done, Status::Failed, Status::Cancelled]),
    ) {
        let mut lineage = long_lineage(turns, |t| ENDED[statuses[t as usize - 1]]);
        let last = lineage.len() - 1;
        lineage[last].status = current;
        let whole = compile_turns(&lineage, &lineage[last]);
        for keep in [PACKAGE_COMPLETED_TURNS_MAX as usize + 1, PACKAGE_COMPLETED_TURNS_MAX as usize] {
            let tail = &lineage[lineage.len().saturating_sub(keep)..];
            let from_tail = compile_turns(tail, &lineage[last]);
            proptest::prop_assert_eq!(serde_json::to_string(&from_tail).unwrap(), serde_json::to_string(&whole).unwrap());
            proptest::prop_assert_eq!(package_hash(&from_tail), package_hash(&whole));
        }
        proptest::prop_assert_eq!(whole.truncation.completed_turns_omitted, turns.saturating_sub(PACKAGE_COMPLETED_TURNS_MAX));
        proptest::prop_assert!(whole.state.completed.len() as u64 <= 2 * PACKAGE_COMPLETED_TURNS_MAX);
    }
}

// ---- The ledger ----

struct World {
    handoff: Record,
    work: Work,
    lineage: Vec<TurnEntry>,
    ledger: Ledger,
}

impl World {
    fn new() -> World {
        World { handoff: handoff(2, Status::Running), work: rich_work(), lineage: lineage(), ledger: Ledger::default() }
    }

    fn sources(&self) -> Sources<'_> {
        Sources { record: &self.handoff, work: &self.work, lineage: &self.lineage }
    }

    fn compile(&mut self, at: EpochMs) -> Compiled {
        let applied = self.ledger.compile(&self.sources(), &request(), false, at).expect("compiled");
        assert_eq!(applied.moved, applied.effect.changed);
        self.ledger = applied.next;
        applied.effect
    }

    fn try_compile(&self) -> Result<crate::applied::Applied<Ledger, Compiled>, Refusal> {
        self.ledger.compile(&self.sources(), &request(), false, T0 + 99_000)
    }
}

#[test]
fn compiling_twice_answers_the_same_version_and_hash_and_writes_nothing() {
    let mut w = World::new();
    let first = w.compile(T0 + 20_000);
    assert_eq!((first.package_version, first.changed), (1, true));
    let before = w.ledger.clone();
    let again = w.ledger.compile(&w.sources(), &request(), false, T0 + 50_000).unwrap();
    assert!(!again.moved);
    assert!(!again.effect.changed);
    assert_eq!((again.effect.package_version, &again.effect.package_hash), (1, &first.package_hash));
    assert_eq!(again.effect.package.generated_at, first.package.generated_at, "the document it already had");
    assert_eq!(again.next, before);
}

#[test]
fn an_amendment_to_the_record_is_the_next_version() {
    let mut w = World::new();
    let v1 = w.compile(T0 + 20_000);
    w.work = run(&w.work, decision("Ship behind a flag", None, &[], None), Role::Owner, T0 + 21_000);
    let v2 = w.compile(T0 + 22_000);
    assert_eq!((v2.package_version, v2.changed), (2, true));
    assert_ne!(v2.package_hash, v1.package_hash);
    assert_eq!(w.ledger.latest().unwrap().state, OfferState::Offered);
}

#[test]
fn a_dry_run_answers_the_same_and_writes_nothing() {
    let mut w = World::new();
    let dry = w.ledger.compile(&w.sources(), &request(), true, T0 + 20_000).unwrap();
    assert!(!dry.moved);
    assert_eq!(dry.next, Ledger::default());
    assert_eq!(w.ledger.latest().unwrap_err().code, Code::PackageNotFound);
    let real = w.compile(T0 + 20_000);
    assert_eq!(dry.effect, real);
}

#[test]
fn rejection_then_recompile_then_recompile_gives_two_versions_and_is_stable_from_there() {
    let mut w = World::new();
    let v1 = w.compile(T0 + 20_000);
    let reject = RejectInput { reason: RejectReason::MissingContext, note: "which tokenizer?".into() };
    let r = w.ledger.reject(&w.handoff, &reject, Role::Machine, T0 + 21_000).unwrap();
    assert!(r.moved);
    assert_eq!(r.effect.state, OfferState::Rejected);
    assert_eq!(r.effect.rejection.as_ref().map(|r| r.reason), Some(RejectReason::MissingContext));
    w.ledger = r.next;

    // The owner amends the record and compiles: a new version, listing the rejection.
    w.work = run(&w.work, decision("Tokenizer: unicode61", None, &[], None), Role::Owner, T0 + 22_000);
    let v2 = w.compile(T0 + 23_000);
    assert_eq!(v2.package_version, v1.package_version + 1);
    assert_eq!(v2.package.state.unresolved[0], "handoff rejected (missing_context): which tokenizer?");
    assert_eq!(w.ledger.latest().unwrap().state, OfferState::Offered);

    // The next recompile no longer lists it: the row stopped being rejected when offered again.
    let v3 = w.compile(T0 + 24_000);
    assert_eq!(v3.package_version, 3);
    assert!(v3.package.state.unresolved.iter().all(|u| !u.starts_with("handoff rejected")));

    // Stable from there.
    let v3_again = w.compile(T0 + 25_000);
    assert_eq!((v3_again.package_version, v3_again.changed, &v3_again.package_hash), (3, false, &v3.package_hash));
}

#[test]
fn the_same_rejection_again_moves_nothing() {
    let mut w = World::new();
    w.compile(T0);
    let reject = RejectInput { reason: RejectReason::Other, note: "n".into() };
    w.ledger = w.ledger.reject(&w.handoff, &reject, Role::Owner, T0 + 1).unwrap().next;
    assert!(!w.ledger.reject(&w.handoff, &reject, Role::Owner, T0 + 2).unwrap().moved);
}

/// A rejection is the same only when both its reason and its note are: either one changed is
/// a new rejection, which moves and replaces the one on record.
#[test]
fn a_rejection_with_the_same_reason_and_another_note_or_the_same_note_and_another_reason_moves() {
    let mut w = World::new();
    w.compile(T0);
    let first = RejectInput { reason: RejectReason::Other, note: "n".into() };
    w.ledger = w.ledger.reject(&w.handoff, &first, Role::Owner, T0 + 1).unwrap().next;
    let others = [
        RejectInput { reason: RejectReason::Other, note: "another note".into() },
        RejectInput { reason: RejectReason::WrongRuntime, note: "n".into() },
    ];
    for other in others {
        let again = w.ledger.reject(&w.handoff, &other, Role::Owner, T0 + 2).unwrap();
        assert!(again.moved, "{other:?}");
        let on_record = again.next.current.as_ref().and_then(|c| c.rejection.as_ref()).expect("a rejection");
        assert_eq!((on_record.reason, on_record.note.as_str()), (other.reason, other.note.as_str()));
    }
}

#[test]
fn accepting_a_stale_hash_is_409_stale_carrying_the_current_hash() {
    let mut w = World::new();
    let v1 = w.compile(T0);
    w.work = run(&w.work, decision("Amend", None, &[], None), Role::Owner, T0 + 1);
    let v2 = w.compile(T0 + 2);
    let e = w.ledger.accept(&w.handoff, &v1.package_hash, Role::Machine, T0 + 3).unwrap_err();
    assert_eq!(e.code, Code::PackageStale);
    assert!(e.message.contains(&v2.package_hash), "{}", e.message);
}

#[test]
fn an_accepted_package_accepted_again_is_409_and_compiling_is_refused_until_the_next_turn() {
    let mut w = World::new();
    let v1 = w.compile(T0);
    let a = w.ledger.accept(&w.handoff, &v1.package_hash, Role::Machine, T0 + 1).unwrap();
    assert!(a.moved);
    assert_eq!(a.effect.state, OfferState::Accepted);
    w.ledger = a.next;
    assert_eq!(
        w.ledger.accept(&w.handoff, &v1.package_hash, Role::Machine, T0 + 2).unwrap_err().code,
        Code::PackageAccepted
    );
    let reject = RejectInput { reason: RejectReason::Other, note: "n".into() };
    assert_eq!(w.ledger.reject(&w.handoff, &reject, Role::Machine, T0 + 2).unwrap_err().code, Code::PackageAccepted);
    assert_eq!(w.try_compile().unwrap_err().code, Code::PackageAccepted);

    // The turn ends, the next one opens: it may compile again.
    w.handoff.turn = 3;
    let next = w.try_compile().unwrap();
    assert_eq!((next.effect.package_version, next.moved), (2, true));
}

#[test]
fn a_closed_hand_off_compiles_only_a_dry_run() {
    let mut w = World::new();
    w.handoff.state = State::Closed;
    assert_eq!(w.try_compile().unwrap_err().code, Code::HandoffClosed);
    assert!(w.ledger.compile(&w.sources(), &request(), true, T0).is_ok());
}

#[test]
fn answering_a_package_that_does_not_exist_is_404() {
    let w = World::new();
    assert_eq!(
        w.ledger.accept(&w.handoff, &"a".repeat(64), Role::Machine, T0).unwrap_err().code,
        Code::PackageNotFound
    );
    assert_eq!(w.ledger.latest().unwrap_err().code, Code::PackageNotFound);
}

#[test]
fn request_bodies_are_checked_field_by_field() {
    assert!(
        parse_checked::<PackageRequest>(br#"{"objective": "o", "purpose": "p", "runtime": "r", "note": "n"}"#).is_ok()
    );
    let e = parse_checked::<PackageRequest>(br#"{"objective": "o", "purpose": "p", "runtime": "r", "budget": 1}"#)
        .unwrap_err();
    assert!(e.message.contains("budget"), "{}", e.message);
    let e = parse_checked::<RejectInput>(br#"{"reason": "bored", "note": "n"}"#).unwrap_err();
    assert!(e.message.contains("reason"), "{}", e.message);
    assert!(parse_checked::<RejectInput>(br#"{"reason": "wrong_runtime"}"#).unwrap_err().message.contains("note"));
    assert_eq!(
        parse_checked::<AcceptInput>(format!(r#"{{"package_hash": "{}"}}"#, "AB".repeat(32)).as_bytes())
            .unwrap()
            .package_hash,
        "ab".repeat(32)
    );
    assert!(parse_checked::<AcceptInput>(br#"{"package_hash": "abc"}"#).is_err());
}

#[test]
fn the_markdown_rendering_ends_with_the_whole_hash_and_the_raw_json() {
    let mut w = World::new();
    w.compile(T0 + 20_000);
    let latest = w.ledger.latest().unwrap();
    let md = render_markdown(&latest);
    assert!(md.starts_with("# Hand-off package v1: Search that answers in under a second\n"));
    let tail = &md[md.find("## Package hash").unwrap()..];
    assert!(tail.contains(&latest.package_hash));
    let json_start = tail.find("```json\n").unwrap() + "```json\n".len();
    let json_end = tail.rfind("\n```").unwrap();
    let raw: Package = serde_json::from_str(&tail[json_start..json_end]).unwrap();
    assert_eq!(raw, latest.package);
    assert_eq!(package_hash(&raw), latest.package_hash);
}

// ---- Markdown: machine-written text is inert ----

/// The headings `render_markdown` writes; no other line may start with `#`.
const MD_HEADINGS: [&str; 16] = [
    "## Goal",
    "## Next",
    "## Operator's note",
    "## Constraints",
    "## Acceptance criteria",
    "## Completed",
    "## Unresolved",
    "## Decisions",
    "## Artifacts",
    "## Open blockers",
    "## Relevant files",
    "## Evidence links",
    "## Left out by the compiler's bounds",
    "## Package hash",
    "## Raw package JSON",
    "# Hand-off package v",
];

/// Asserts, without trusting any golden bytes, that `md` is the package's Markdown with every
/// machine-written string inert: the only blocks are the renderer's own (its headings, `- `
/// items, `> ` quote lines, the hash and the JSON block), and within them no unescaped markup
/// but the renderer's `**state**`, complete code spans, `[N]`/`[severity]` labels and
/// `<http(s)://…>` autolinks.
fn assert_inert_markdown(md: &str, package: &Package) {
    let (body, raw) = md.split_once("\n## Raw package JSON\n\n").expect("the raw JSON section");

    // The JSON block: fenced longer than any backtick run inside it, closed once, at the end.
    let fence_len = raw.chars().take_while(|&c| c == '`').count();
    let fence = "`".repeat(fence_len);
    let json = raw.strip_prefix(&format!("{fence}json\n")).expect("an opening fence");
    let json = json.strip_suffix(&format!("\n{fence}\n")).expect("one closing fence, at the end");
    assert!(longest_backtick_run(json) < fence_len, "the fence is longer than any run of backticks in the JSON");
    assert!(!json.lines().any(|l| l.trim_start().starts_with(&fence)), "no line of the JSON can close the fence");
    assert_eq!(&serde_json::from_str::<Package>(json).unwrap(), package);

    let mut headings = 0;
    for (n, line) in body.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        assert!(!line.contains(|c: char| c.is_control() && c != '\t'), "{}", at("a control character"));
        let content = if line.is_empty() || line == ">" {
            continue;
        } else if line.starts_with('#') {
            assert!(
                MD_HEADINGS.iter().any(|h| line == *h || (h.ends_with('v') && line.starts_with(h))),
                "{}",
                at("a heading the renderer does not write")
            );
            headings += 1;
            line.trim_start_matches('#').trim_start()
        } else if let Some(rest) = line.strip_prefix("- ").or_else(|| line.strip_prefix("> ")) {
            rest
        } else if line.starts_with('`') {
            line // the hash
        } else {
            panic!("{}", at("a line that is none of the renderer's blocks"));
        };
        // Nothing in a line's content may start a block of its own (a `<` is checked below: only
        // an autolink may start with one, and an autolink starts no HTML block).
        let first = content.chars().next().unwrap_or(' ');
        assert!(!first.is_whitespace(), "{}", at("indented content"));
        assert!(!"#-+*|>=~:".contains(first), "{}", at("content that starts a block"));
        let digits = content.chars().take_while(char::is_ascii_digit).count();
        assert!(!(digits > 0 && content[digits..].starts_with(['.', ')'])), "{}", at("an ordered list marker"));
        assert_inline_inert(content, &at);
    }
    assert!(headings >= 3, "the title, the hash and the JSON headings at least");
}

/// Walks one line's inline content: escapes, code spans and autolinks are skipped whole; any
/// other markup character is a failure.
fn assert_inline_inert(content: &str, at: &dyn Fn(&str) -> String) {
    let b = content.as_bytes();
    let mut i = 0;
    let state_line = content.starts_with("State: **") && content.ends_with("**");
    while i < b.len() {
        match b[i] {
            b'\\' => {
                assert!(
                    b.get(i + 1).is_some_and(u8::is_ascii_punctuation),
                    "{}",
                    at("a backslash that escapes nothing")
                );
                i += 2;
            }
            b'`' => {
                let run = b[i..].iter().take_while(|&&c| c == b'`').count();
                let mut j = i + run;
                let close = loop {
                    let Some(k) = b[j..].iter().position(|&c| c == b'`') else {
                        panic!("{}", at("an unclosed code span"))
                    };
                    let start = j + k;
                    let len = b[start..].iter().take_while(|&&c| c == b'`').count();
                    if len == run {
                        break start;
                    }
                    j = start + len;
                };
                i = close + run;
            }
            b'<' => {
                let rest = &content[i + 1..];
                let end = rest.find('>').unwrap_or_else(|| panic!("{}", at("an unescaped <")));
                let target = &rest[..end];
                let web = target.to_ascii_lowercase().starts_with("http://")
                    || target.to_ascii_lowercase().starts_with("https://");
                assert!(
                    web && !target.contains(|c: char| c == '<' || c.is_whitespace()),
                    "{}",
                    at("an unescaped < that is not an http(s) autolink")
                );
                i += 1 + end + 1;
            }
            b'&' => {
                let entity = ["&lt;", "&gt;", "&amp;"].iter().any(|e| content[i..].starts_with(e));
                assert!(entity, "{}", at("an unescaped &"));
                i += 1;
            }
            b'[' => {
                // The renderer's own labels: `[N] ` before a criterion, `[severity] ` before a blocker.
                let label = content[i + 1..].split_once("] ").map(|(l, _)| l).unwrap_or_default();
                let ours = (!label.is_empty() && label.bytes().all(|c| c.is_ascii_digit()))
                    || ["low", "medium", "high"].contains(&label);
                assert!(ours, "{}", at("an unescaped ["));
                i += 1 + label.len() + 1;
            }
            b'*' if state_line => i += 1,
            c if b"]*_{}|~$^>".contains(&c) => panic!("{}", at(&format!("an unescaped {}", c as char))),
            // GitHub links a bare `scheme://…` or `www.…` in text.
            b':' if content[i..].starts_with("://") => panic!("{}", at("a bare scheme://")),
            b'.' if i >= 3 && b[i - 3..i].eq_ignore_ascii_case(b"www") => panic!("{}", at("a bare www.")),
            _ => i += 1,
        }
    }
}

fn md_of(name: &str, state: OfferState, rejection: Option<Rejection>) -> (String, Package) {
    let package = golden_package(name);
    let latest = Latest {
        package_version: 2,
        package_hash: package_hash(&package),
        state,
        rejection,
        package: package.clone(),
        document: Default::default(),
    };
    (render_markdown(&latest), package)
}

#[test]
fn hostile_strings_in_every_machine_written_field_render_as_inert_markdown() {
    let rejection = Rejection {
        reason: RejectReason::Other,
        note: format!("{IMG}\r\n- item\r# heading"),
        rejected_at: T0.into(),
        by: Role::Machine,
    };
    let (md, package) = md_of("hostile", OfferState::Rejected, Some(rejection));
    assert_inert_markdown(&md, &package);
    check_golden("package/hostile.md", &md);
    // Every hostile string is there, shown as text, not lost.
    let shown = md.split("\n## Raw package JSON").next().unwrap();
    for escaped in [
        r"&lt;img src=x onerror=alert\(1\)&gt;",
        r"\[click\]\(javascript:alert\(1\)\)",
        r"!\[x\]\(http\://evil/x.png\)",
        r"&lt;script&gt;alert\(1\)&lt;/script&gt;",
        r"\# heading",
        r"\- item",
        r"\| a \| b \|",
    ] {
        assert!(shown.contains(escaped), "{escaped} is not in\n{shown}");
    }
    // A URI kept from before the scheme rule is text; a clean https one is an autolink.
    assert!(shown.contains("- javascript:alert\\(1\\)\n"), "{shown}");
    assert!(shown.contains("<https://ok.example/path?q=1&r=2#f>"), "{shown}");
    assert!(shown.contains("<HTTPS://OK.EXAMPLE/Design.md>"), "{shown}");
    assert!(!shown.contains("<https://evil.example"), "a URI with < or > is text, not an autolink");
    assert!(shown.contains("- `  both spaces  `\n"), "a path's spaces are kept: {shown}");
}

#[test]
fn the_rich_package_renders_as_inert_markdown_and_matches_its_golden_file() {
    let (md, package) = md_of("rich", OfferState::Offered, None);
    assert_inert_markdown(&md, &package);
    check_golden("package/rich.md", &md);
}

#[test]
fn text_is_escaped_so_it_renders_as_its_characters_and_starts_no_block() {
    let cases = [
        ("plain text, with a comma.", "plain text, with a comma."),
        ("<b>&amp;</b>", "&lt;b&gt;&amp;amp;&lt;/b&gt;"),
        ("[a](b) ![c](d)", r"\[a\]\(b\) !\[c\]\(d\)"),
        ("*a* _b_ `c` ~d~ $e$ ^f^ {g} #h |i|", r"\*a\* \_b\_ \`c\` \~d\~ \$e\$ \^f\^ \{g\} \#h \|i\|"),
        (r"\[not escaped\]", r"\\\[not escaped\\\]"),
        ("- item", r"\- item"),
        ("+ item", r"\+ item"),
        ("=====", r"\====="),
        ("---", r"\---"),
        (": definition", r"\: definition"),
        ("  - indented item", r"  \- indented item"),
        ("1. one", r"1\. one"),
        ("2026. A year", r"2026\. A year"),
        ("12) twelve", r"12\) twelve"),
        ("2026-11-30T12:00:00.000Z", "2026-11-30T12:00:00.000Z"),
        ("a - b + c = d. e: f! g? h'", "a - b + c = d. e: f! g? h'"),
        ("nul\u{0} nel\u{85}", "nul\u{FFFD} nel\u{FFFD}"),
        ("see http://evil.example/x and WWW.evil.example", r"see http\://evil.example/x and WWW\.evil.example"),
        ("a: b, c:/d", "a: b, c:/d"),
    ];
    for (text, escaped) in cases {
        assert_eq!(md_text(text), escaped, "{text:?}");
    }
}

#[test]
fn a_lone_carriage_return_cannot_start_a_line_outside_the_list_or_the_quote() {
    // Joined on one line, only the start of the text could start a block; `#` is escaped anywhere.
    assert_eq!(one_line("- a\r# heading\r\n- item\n\n  b  "), r"\- a \# heading - item b");
    assert_eq!(quote("a\r# heading\r\n- item\n\n    code\n"), "> a\n> \\# heading\n> \\- item\n>\n> code");
}

#[test]
fn a_code_span_is_fenced_longer_than_any_backtick_run_in_its_value() {
    assert_eq!(code_span("src/a.rs"), "`src/a.rs`");
    assert_eq!(code_span("a```b"), "````a```b````");
    assert_eq!(code_span("`start"), "`` `start ``");
    assert_eq!(code_span("end`"), "`` end` ``");
    assert_eq!(code_span(" both "), "`  both  `");
    assert_eq!(code_span("<img src=x>"), "`<img src=x>`");
    assert_eq!(code_span("two\nlines"), "`two lines`");
}

#[test]
fn only_clean_http_and_https_uris_become_autolinks_and_the_rest_are_text() {
    assert_eq!(md_uri("https://a.example/x?q=1&r=2#f"), "<https://a.example/x?q=1&r=2#f>");
    assert_eq!(md_uri("HTTP://A.EXAMPLE"), "<HTTP://A.EXAMPLE>");
    assert_eq!(md_uri("docs/design.md"), "docs/design.md");
    assert_eq!(md_uri("javascript:alert(1)"), r"javascript:alert\(1\)");
    assert_eq!(md_uri("//evil.example/x"), r"\//evil.example/x");
    assert_eq!(md_uri("https://a.example/<b>"), r"https\://a.example/&lt;b&gt;");
    assert_eq!(md_uri("https://a.example/\\@evil"), r"https\://a.example/\\@evil");
    assert_eq!(md_uri("https://a.example/ x"), r"https\://a.example/ x");
}

#[test]
fn the_raw_json_fence_is_longer_than_any_run_of_backticks_in_the_package() {
    let mut w = World::new();
    w.work = run(&w.work, decision("a ``````` run of seven", None, &[], None), Role::Owner, T0 + 1);
    let v = w.compile(T0 + 2);
    let md = render_markdown(&w.ledger.latest().unwrap());
    assert!(md.contains("\n````````json\n"), "a fence of eight");
    assert_inert_markdown(&md, &v.package);
}

/// Each field of a package request keeps its limit, checked once as the body is read.
#[test]
fn a_package_request_past_any_field_limit_is_refused_as_the_body_is_read() {
    let cases: [(&str, fn(&mut PackageRequest)); 5] = [
        ("objective", |r| r.objective = "o".repeat(OBJECTIVE_BYTES_MAX + 1)),
        ("purpose", |r| r.purpose = "p".repeat(PURPOSE_BYTES_MAX + 1)),
        ("runtime", |r| r.runtime = "r".repeat(RUNTIME_BYTES_MAX + 1)),
        ("runtime", |r| r.runtime = "two\nlines".into()),
        ("note", |r| r.note = Some("n".repeat(NOTE_BYTES_MAX + 1))),
    ];
    for (field, spoil) in cases {
        let mut bad = request();
        spoil(&mut bad);
        let e = bad.clone().checked().unwrap_err();
        assert_eq!(e.code, Code::RequestInvalid, "{field}");
        assert!(e.message.starts_with(field), "{field}: {}", e.message);
    }
    assert!(request().checked().is_ok());
}

/// A truncation is reported when any one of its counts is not zero, and only then.
#[test]
fn a_truncation_is_reported_when_any_single_count_is_not_zero() {
    assert!(!Truncation::default().any());
    let each: [fn(&mut Truncation); 4] = [
        |t| t.decisions_omitted = 1,
        |t| t.artifacts_omitted = 1,
        |t| t.files_omitted = 1,
        |t| t.completed_turns_omitted = 1,
    ];
    for (i, set) in each.into_iter().enumerate() {
        let mut t = Truncation::default();
        set(&mut t);
        assert!(t.any(), "count {i} alone");
    }
}

/// A file's churn is its insertions plus its deletions: a file that only lost lines ranks by
/// what it lost, and past `PACKAGE_FILES_MAX` the least churned files are the ones left out.
#[test]
fn files_are_ranked_by_insertions_plus_deletions_so_a_file_that_only_lost_lines_is_kept() {
    let mut w = Work::default();
    for i in 0..PACKAGE_FILES_MAX {
        w.files.insert(format!("src/kept_{i:03}.rs"), work::FileCounts { insertions: 10, deletions: 2 });
    }
    w.files.insert("src/deleted_most.rs".into(), work::FileCounts { insertions: 1, deletions: 50 });
    let kept = relevant_files(&w);
    assert_eq!(kept.len(), PACKAGE_FILES_MAX);
    assert!(kept.contains(&"src/deleted_most.rs".to_string()), "the file with the most churn is kept");
    assert!(
        !kept.contains(&format!("src/kept_{:03}.rs", PACKAGE_FILES_MAX - 1)),
        "the last of the equal ones, by path, is left out"
    );
}

/// The `www.` check looks three bytes back only from a character boundary: a `.` after a
/// multi-byte character is never sliced through, and `www.` after one is still escaped.
#[test]
fn a_dot_after_multi_byte_characters_is_escaped_only_after_www_and_never_splits_a_character() {
    for plain in ["a€b.", "éé.abc", "ü.", "€."] {
        assert_eq!(md_text(plain), plain, "{plain}");
    }
    assert_eq!(md_text("€www.example"), "€www\\.example");
}

/// A code span is one line of inert text: line breaks become spaces and every other control
/// character the replacement character, so nothing a machine wrote can end or bend the span.
#[test]
fn a_code_span_turns_line_breaks_into_spaces_and_other_control_characters_into_replacements() {
    assert_eq!(code_span("a\nb\rc"), "`a b c`");
    assert_eq!(code_span("bell\u{7}tab\tesc\u{1b}"), "`bell\u{FFFD}tab\u{FFFD}esc\u{FFFD}`");
}

/// A lineage entry says its prompt was dropped only where it was: `prompt_dropped` is absent
/// otherwise, and `prompt` always there (null without words).
#[test]
fn a_lineage_entry_marks_only_a_dropped_prompt() {
    let entry = long_lineage(1, |_| Status::Done).remove(0);
    let kept = serde_json::to_value(&entry).unwrap();
    assert_eq!(kept["prompt"], "turn 1's words");
    assert!(kept.get("prompt_dropped").is_none(), "{kept}");
    let dropped = serde_json::to_value(TurnEntry { prompt: None, prompt_dropped: true, ..entry }).unwrap();
    assert_eq!((&dropped["prompt"], &dropped["prompt_dropped"]), (&serde_json::Value::Null, &serde_json::json!(true)));
}
