//! prod-promote end to end on copies of the checked-in files: what it prints, what it
//! writes, and its exit codes. The rules themselves are tested in src/promote/tests.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

const APPROVE_BOTH: &str = r#"{"do_tags": [
  {"tag": "v1", "classes": ["HandoffObject"], "reviewed_by": "a reviewer",
   "reviewed_at": "2025-11-20", "review": "https://example.invalid/review/1"},
  {"tag": "v2", "classes": ["OwnerIndex"], "reviewed_by": "a reviewer",
   "reviewed_at": "2025-11-21", "review": "https://example.invalid/review/2"}
]}"#;

/// A scratch folder holding a copy of the checked-in wrangler.toml and `approvals`.
fn scratch(name: &str, approvals: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("prod-promote-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::copy(Path::new(TOP).join("wrangler.toml"), dir.join("wrangler.toml")).unwrap();
    fs::write(dir.join("production-approvals.json"), approvals).unwrap();
    dir
}

fn promote(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_prod-promote")).args(args).current_dir(dir).output().expect("prod-promote runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_checked_in_production_binds_exactly_what_is_approved() {
    let output = promote(Path::new(TOP), &["--check"]);
    let out = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{out}{}", text(&output.stderr));
    assert!(out.contains("prod-promote: nothing to change in wrangler.toml"), "{out}");
}

#[test]
fn check_only_reports_what_it_would_change() {
    let dir = scratch("check", APPROVE_BOTH);
    let before = fs::read(dir.join("wrangler.toml")).unwrap();
    let output = promote(&dir, &["--check"]);
    let out = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("prod-promote: approved for production: v1, v2"), "{out}");
    assert!(
        out.contains("would add [[env.production.migrations]] tag = \"v1\", new_sqlite_classes = [\"HandoffObject\"]"),
        "{out}"
    );
    assert!(out.contains("would add [[env.production.durable_objects.bindings]] name = \"OWNER_INDEX\""), "{out}");
    assert_eq!(fs::read(dir.join("wrangler.toml")).unwrap(), before, "--check writes nothing");
}

#[test]
fn writes_the_approved_tags_then_has_nothing_left_to_change() {
    let dir = scratch("write", APPROVE_BOTH);
    let output = promote(&dir, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("prod-promote: wrote wrangler.toml"));
    let written = fs::read_to_string(dir.join("wrangler.toml")).unwrap();
    let production = handoff_tools::promote::read_wrangler(&written).unwrap();
    let tags: Vec<&str> = production.production_migrations.iter().map(|m| m.tag.as_str()).collect();
    assert_eq!(tags, ["v1", "v2"]);
    assert!(!dir.join("wrangler.toml.prod-promote").exists(), "no temporary file is left");

    let again = promote(&dir, &[]);
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again.stdout).contains("nothing to change"));
    assert_eq!(fs::read_to_string(dir.join("wrangler.toml")).unwrap(), written);
}

#[test]
fn a_refusal_exits_1_names_the_tag_and_writes_nothing() {
    let gap = APPROVE_BOTH.replacen("\"v1\", \"classes\": [\"HandoffObject\"]", "\"v0\", \"classes\": [\"Ghost\"]", 1);
    let dir = scratch("refuse", &gap);
    let before = fs::read(dir.join("wrangler.toml")).unwrap();
    for args in [&[][..], &["--check"]] {
        let output = promote(&dir, args);
        let err = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert!(
            err.contains("prod-promote: refused: tag v0 is approved, but no top-level [[migrations]] defines it"),
            "{err}"
        );
        assert!(err.contains("prod-promote: refused: a gap in the tag order: v2 is approved, but v1"), "{err}");
        assert!(err.contains("wrote nothing"), "{err}");
    }
    assert_eq!(fs::read(dir.join("wrangler.toml")).unwrap(), before);
}

#[test]
fn a_hook_variable_in_a_deployable_environment_is_refused_even_by_check() {
    let dir = scratch("hook", APPROVE_BOTH);
    let config = dir.join("wrangler.toml");
    let spoiled = fs::read_to_string(&config).unwrap().replacen(
        "vars = { HANDOFF_ENV = \"development\" }",
        "vars = { HANDOFF_ENV = \"development\", HANDOFF_TEST_HOOKS = \"1\" }",
        1,
    );
    fs::write(&config, &spoiled).unwrap();
    for args in [&["--check"][..], &[]] {
        let output = promote(&dir, args);
        let err = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("prod-promote: refused: env.development sets the hook variable HANDOFF_TEST_HOOKS"),
            "{err}"
        );
    }
    assert_eq!(fs::read_to_string(&config).unwrap(), spoiled, "nothing is written");
    let _ = fs::remove_dir_all(&dir);
}

/// The checked-in wrangler.toml with its top level calling itself local, as it once did.
fn top_level_local(text: &str) -> String {
    assert!(!text.contains("\n[vars]"), "the checked-in top level has no [vars]");
    let spoiled = text.replacen(
        "[[durable_objects.bindings]]",
        "[vars]\nHANDOFF_ENV = \"local\"\n\n[[durable_objects.bindings]]",
        1,
    );
    assert_ne!(spoiled, text);
    spoiled
}

#[test]
fn a_top_level_that_calls_itself_local_is_refused_even_by_check() {
    // `wrangler deploy` with no --env deploys the top level: local there is local in production.
    let dir = scratch("top-level-local", APPROVE_BOTH);
    let config = dir.join("wrangler.toml");
    let spoiled = top_level_local(&fs::read_to_string(&config).unwrap());
    fs::write(&config, &spoiled).unwrap();
    for args in [&["--check"][..], &[]] {
        let output = promote(&dir, args);
        let err = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("prod-promote: refused: the top level sets HANDOFF_ENV = \"local\""), "{err}");
    }
    assert_eq!(fs::read_to_string(&config).unwrap(), spoiled, "nothing is written");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn paths_can_be_given_and_bad_input_exits_2() {
    let dir = scratch("paths", APPROVE_BOTH);
    let config = dir.join("wrangler.toml");
    let approvals = dir.join("production-approvals.json");
    let elsewhere = std::env::temp_dir();
    let output = promote(
        &elsewhere,
        &["--check", "--config", config.to_str().unwrap(), &format!("--approvals={}", approvals.display())],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));

    fs::write(dir.join("broken.json"), "{\"do_tags\": [{\"tag\": 1}]}").unwrap();
    let cases: [&[&str]; 4] = [
        &["--frobnicate"],
        &["--config"],
        &["--config", "/nonexistent/wrangler.toml"],
        &["--approvals", "broken.json"],
    ];
    for args in cases {
        let output = promote(&dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output.stderr));
    }
    let _ = fs::remove_dir_all(&dir);
}
