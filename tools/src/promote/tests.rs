//! The production gate's rules, named after the contract's words.

use super::*;
use crate::hooks::{Exposure, Scope};

/// The shape of the checked-in wrangler.toml: the top level (no vars), development and staging
/// bind both objects; production binds neither.
const WRANGLER: &str = r#"# The hand-off service.
name = "handoff"
main = "build/worker/shim.mjs"
compatibility_date = "2025-11-01"

[[durable_objects.bindings]]
name = "HANDOFFS"
class_name = "HandoffObject"

[[durable_objects.bindings]]
name = "OWNER_INDEX"
class_name = "OwnerIndex"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["HandoffObject"]

[[migrations]]
tag = "v2"
new_sqlite_classes = ["OwnerIndex"]

[env.staging]
vars = { HANDOFF_ENV = "staging" }

[[env.staging.durable_objects.bindings]]
name = "HANDOFFS"
class_name = "HandoffObject"

[[env.staging.durable_objects.bindings]]
name = "OWNER_INDEX"
class_name = "OwnerIndex"

[[env.staging.migrations]]
tag = "v1"
new_sqlite_classes = ["HandoffObject"]

[[env.staging.migrations]]
tag = "v2"
new_sqlite_classes = ["OwnerIndex"]

[env.production]
vars = { HANDOFF_ENV = "production" }
# No Durable Object bindings or migrations here by hand: scripts/prod-promote writes them.
"#;

/// WRANGLER after promoting v1 and v2.
const PROMOTED: &str = r#"[env.production]
vars = { HANDOFF_ENV = "production" }
# No Durable Object bindings or migrations here by hand: scripts/prod-promote writes them.

[[env.production.durable_objects.bindings]]
name = "HANDOFFS"
class_name = "HandoffObject"

[[env.production.durable_objects.bindings]]
name = "OWNER_INDEX"
class_name = "OwnerIndex"

[[env.production.migrations]]
tag = "v1"
new_sqlite_classes = ["HandoffObject"]

[[env.production.migrations]]
tag = "v2"
new_sqlite_classes = ["OwnerIndex"]
"#;

const V3: &str = r#"
[[migrations]]
tag = "v3"
new_sqlite_classes = ["Audit"]

[[durable_objects.bindings]]
name = "AUDIT"
class_name = "Audit"
"#;

fn approval(tag: &str, classes: &[&str]) -> Approval {
    Approval {
        tag: tag.to_string(),
        classes: classes.iter().map(|c| c.to_string()).collect(),
        reviewed_by: "a reviewer".to_string(),
        reviewed_at: "2025-11-20".to_string(),
        review: "https://example.invalid/review/1".to_string(),
    }
}

fn v1() -> Approval {
    approval("v1", &["HandoffObject"])
}

fn v2() -> Approval {
    approval("v2", &["OwnerIndex"])
}

fn v3() -> Approval {
    approval("v3", &["Audit"])
}

/// WRANGLER with `extra` added at the top level (before the first env).
fn with_top_level(extra: &str) -> String {
    WRANGLER.replacen("[env.staging]", &format!("{extra}\n[env.staging]"), 1)
}

fn plan_for(text: &str, approvals: &[Approval]) -> Result<Plan, Vec<Refusal>> {
    plan(&read_wrangler(text).expect("fixture reads"), approvals)
}

fn promote(text: &str, approvals: &[Approval]) -> String {
    let plan = plan_for(text, approvals).expect("plan is allowed");
    render(text, &plan).expect("plan renders")
}

fn refusals(text: &str, approvals: &[Approval]) -> Vec<Refusal> {
    plan_for(text, approvals).expect_err("the gate refuses")
}

fn messages(refusals: &[Refusal]) -> Vec<String> {
    refusals.iter().map(ToString::to_string).collect()
}

#[test]
fn with_no_approvals_production_binds_neither_and_nothing_changes() {
    let plan = plan_for(WRANGLER, &[]).unwrap();
    assert!(plan.changes.is_empty());
    assert!(plan.migrations.is_empty() && plan.bindings.is_empty());
    assert_eq!(plan.pending, ["v1", "v2"]);
    assert_eq!(render(WRANGLER, &plan).unwrap(), WRANGLER);
}

#[test]
fn writes_the_bindings_and_migrations_of_exactly_the_approved_tags_in_order() {
    let out = promote(WRANGLER, &[v1(), v2()]);
    let head = &WRANGLER[..WRANGLER.find("[env.production]").unwrap()];
    assert_eq!(out, format!("{head}{PROMOTED}"), "the rest of the file stays byte for byte");
}

#[test]
fn approving_only_v1_binds_only_its_class_and_leaves_v2_pending() {
    let plan = plan_for(WRANGLER, &[v1()]).unwrap();
    assert_eq!(plan.pending, ["v2"]);
    let out = render(WRANGLER, &plan).unwrap();
    let production = read_wrangler(&out).unwrap();
    let tags: Vec<&str> = production.production_migrations.iter().map(|m| m.tag.as_str()).collect();
    let names: Vec<&str> = production.production_bindings.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(tags, ["v1"]);
    assert_eq!(names, ["HANDOFFS"]);
}

#[test]
fn promoting_again_changes_nothing() {
    let once = promote(WRANGLER, &[v1(), v2()]);
    let again = plan_for(&once, &[v1(), v2()]).unwrap();
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    assert_eq!(render(&once, &again).unwrap(), once);
}

#[test]
fn a_later_approval_appends_after_what_production_already_applies() {
    let v1_only = promote(WRANGLER, &[v1()]);
    let both = promote(&v1_only, &[v1(), v2()]);
    assert_eq!(both, promote(WRANGLER, &[v1(), v2()]));
    let plan = plan_for(&v1_only, &[v1(), v2()]).unwrap();
    assert_eq!(
        plan.changes,
        [
            Change::AddBinding(Binding {
                name: "OWNER_INDEX".into(),
                class_name: "OwnerIndex".into(),
                other_keys: vec![]
            }),
            Change::AddMigration(reference(&read_wrangler(WRANGLER).unwrap(), "v2").unwrap().clone()),
        ]
    );
}

#[test]
fn a_new_tag_with_its_approval_reaches_production_after_the_others() {
    let text = with_top_level(V3);
    let promoted = promote(&text, &[v1(), v2()]);
    let out = promote(&promoted, &[v1(), v2(), v3()]);
    let production = read_wrangler(&out).unwrap();
    let tags: Vec<&str> = production.production_migrations.iter().map(|m| m.tag.as_str()).collect();
    assert_eq!(tags, ["v1", "v2", "v3"]);
    assert!(out.ends_with("[[env.production.migrations]]\ntag = \"v3\"\nnew_sqlite_classes = [\"Audit\"]\n"));
}

#[test]
fn a_production_env_followed_by_another_keeps_every_line_of_both() {
    // Only a comment that ends the file moves up under [env.production]; one that toml_edit
    // reads as the next table's preamble stays there, above that table.
    let preview = "[env.preview]\nvars = { HANDOFF_ENV = \"preview\" }\n";
    let text = format!("{WRANGLER}\n{preview}");
    let out = promote(&text, &[v1(), v2()]);
    let comment = "# No Durable Object bindings or migrations here by hand: scripts/prod-promote writes them.\n";
    let tables = PROMOTED.replacen(comment, "", 1);
    assert!(out.contains(tables.trim_end()), "{out}");
    assert!(out.ends_with(&format!("{comment}\n{preview}")), "{out}");
}

#[test]
fn refuses_a_tag_that_has_no_reviewed_entry() {
    let promoted = promote(WRANGLER, &[v1(), v2()]);
    let found = refusals(&promoted, &[v1()]);
    assert_eq!(found, [Refusal::NoReviewedEntry { tag: "v2".into() }]);
    assert!(found[0].to_string().starts_with("tag v2 has no reviewed entry"));
}

#[test]
fn refuses_an_entry_that_names_no_reviewer_date_or_review_link() {
    type Spoil = fn(&mut Approval);
    let cases: [(Spoil, &str); 5] = [
        (|a| a.reviewed_by = " ".into(), "reviewed_by is empty"),
        (|a| a.reviewed_at = String::new(), "reviewed_at \"\" is not a date"),
        (|a| a.reviewed_at = "20 Nov 2025".into(), "is not a date"),
        (|a| a.reviewed_at = "2025-13-01".into(), "is not a date"),
        (|a| a.review = "http://example.invalid/1".into(), "is not an https:// link"),
    ];
    for (spoil, words) in cases {
        let mut entry = v1();
        spoil(&mut entry);
        let found = messages(&refusals(WRANGLER, &[entry]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("tag v1 has no reviewed entry: its "), "{found:?}");
        assert!(found[0].contains(words), "{found:?} lacks {words}");
    }
}

#[test]
fn accepts_a_review_date_with_a_time() {
    let mut entry = v1();
    entry.reviewed_at = "2025-11-20T14:03:00Z".into();
    assert!(plan_for(WRANGLER, &[entry]).is_ok());
}

#[test]
fn refuses_an_entry_whose_classes_differ_from_the_migrations() {
    for classes in [&["OwnerIndex"][..], &[], &["HandoffObject", "OwnerIndex"]] {
        let found = refusals(WRANGLER, &[approval("v1", classes)]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(&found[0], Refusal::ClassesDiffer { tag, .. } if tag == "v1"));
        assert!(found[0].to_string().contains("has classes that differ from the migration's"));
    }
}

#[test]
fn classes_are_compared_as_a_set() {
    let text = with_top_level(
        "[[migrations]]\ntag = \"v3\"\nnew_sqlite_classes = [\"B\", \"A\"]\n\n\
         [[durable_objects.bindings]]\nname = \"A\"\nclass_name = \"A\"\n\n\
         [[durable_objects.bindings]]\nname = \"B\"\nclass_name = \"B\"\n",
    );
    assert!(plan_for(&text, &[v1(), v2(), approval("v3", &["A", "B"])]).is_ok());
}

#[test]
fn refuses_a_gap_in_the_tag_order() {
    let text = with_top_level(V3);
    let found = refusals(&text, &[v1(), v3()]);
    assert_eq!(found, [Refusal::Gap { tag: "v3".into(), missing: "v2".into() }]);
    assert!(found[0].to_string().starts_with("a gap in the tag order: v3 is approved, but v2"));

    let found = refusals(WRANGLER, &[v2()]);
    assert_eq!(found, [Refusal::Gap { tag: "v2".into(), missing: "v1".into() }]);
}

#[test]
fn refuses_a_gap_in_the_tag_order_that_production_already_has() {
    let hand_edited = WRANGLER.replace(
        "# No Durable Object",
        "[[env.production.migrations]]\ntag = \"v2\"\nnew_sqlite_classes = [\"OwnerIndex\"]\n# No Durable Object",
    );
    let found = refusals(&hand_edited, &[v1(), v2()]);
    assert!(found.contains(&Refusal::ProductionGap { tag: "v2".into(), missing: "v1".into() }), "{found:?}");
    assert!(messages(&found).iter().any(|m| m.starts_with("a gap in the tag order: env.production applies v2")));
}

#[test]
fn refuses_approvals_listed_out_of_migration_order() {
    let found = refusals(WRANGLER, &[v2(), v1()]);
    assert_eq!(found, [Refusal::OutOfOrder { listed: "v2".into(), expected: "v1".into() }]);
}

#[test]
fn refuses_an_edit_to_an_already_applied_tag() {
    let promoted = promote(WRANGLER, &[v1(), v2()]);
    // Someone turns the applied v1 from a SQLite class into a key-value one at the top level.
    let edited = promoted.replacen(
        "tag = \"v1\"\nnew_sqlite_classes = [\"HandoffObject\"]",
        "tag = \"v1\"\nnew_classes = [\"HandoffObject\"]",
        1,
    );
    let found = refusals(&edited, &[v1(), v2()]);
    let edit = found.iter().find(|r| matches!(r, Refusal::EditToAppliedTag { .. })).expect("edit refused");
    assert!(edit.to_string().starts_with("an edit to an already applied tag: env.production applied v1"));
    // The top-level edit also makes staging disagree; both are named.
    assert!(found.iter().any(|r| matches!(r, Refusal::EnvDiffers { env, .. } if env == "staging")));
}

#[test]
fn refuses_an_edit_to_an_already_applied_tag_made_in_production_itself() {
    let promoted = promote(WRANGLER, &[v1(), v2()]);
    let at = promoted.find("[[env.production.migrations]]").unwrap();
    let (head, tail) = promoted.split_at(at);
    let edited = format!("{head}{}", tail.replacen("[\"HandoffObject\"]", "[\"HandoffObject\", \"Extra\"]", 1));
    let found = refusals(&edited, &[v1(), v2()]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(matches!(&found[0], Refusal::EditToAppliedTag { tag, .. } if tag == "v1"));
}

#[test]
fn refuses_an_applied_tag_that_the_top_level_no_longer_defines() {
    let promoted = promote(WRANGLER, &[v1(), v2()]);
    let top_v2 = "[[migrations]]\ntag = \"v2\"\nnew_sqlite_classes = [\"OwnerIndex\"]\n\n";
    let removed = promoted.replacen(top_v2, "", 1);
    let found = refusals(&removed, &[v1(), v2()]);
    assert!(found.contains(&Refusal::AppliedTagRemoved { tag: "v2".into() }), "{found:?}");
    assert!(found.contains(&Refusal::UnknownTag { tag: "v2".into() }), "{found:?}");
}

#[test]
fn refuses_an_approval_for_a_tag_no_migration_defines() {
    let found = refusals(WRANGLER, &[v1(), v2(), approval("v9", &["Ghost"])]);
    assert_eq!(found, [Refusal::UnknownTag { tag: "v9".into() }]);
}

#[test]
fn refuses_a_tag_approved_twice() {
    let found = refusals(WRANGLER, &[v1(), v1()]);
    assert_eq!(found, [Refusal::DuplicateEntry { tag: "v1".into() }]);
}

#[test]
fn refuses_a_tag_defined_twice_at_the_top_level() {
    let text = with_top_level("[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"HandoffObject\"]\n");
    let found = refusals(&text, &[v1()]);
    assert!(found.contains(&Refusal::DuplicateTag { tag: "v1".into(), place: "the top-level [[migrations]]".into() }));
}

#[test]
fn refuses_an_env_whose_migration_differs_from_the_top_level() {
    let text = WRANGLER.replacen(
        "[[env.staging.migrations]]\ntag = \"v2\"\nnew_sqlite_classes = [\"OwnerIndex\"]",
        "[[env.staging.migrations]]\ntag = \"v2\"\nnew_sqlite_classes = [\"OwnerIndex2\"]",
        1,
    );
    let found = refusals(&text, &[v1()]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().starts_with("migration v2 differs between env.staging"));
}

#[test]
fn refuses_a_migration_that_does_more_than_add_classes() {
    let text = with_top_level("[[migrations]]\ntag = \"v3\"\ndeleted_classes = [\"OwnerIndex\"]\n");
    let found = refusals(&text, &[v1(), v2(), approval("v3", &[])]);
    assert_eq!(found, [Refusal::UnsupportedMigration { tag: "v3".into(), problem: "has deleted_classes".into() }]);
}

#[test]
fn refuses_an_approved_class_that_nothing_binds() {
    let text = with_top_level("[[migrations]]\ntag = \"v3\"\nnew_sqlite_classes = [\"Audit\"]\n");
    let found = refusals(&text, &[v1(), v2(), v3()]);
    assert_eq!(found, [Refusal::MissingBinding { tag: "v3".into(), class: "Audit".into() }]);
}

#[test]
fn refuses_a_production_binding_that_no_reviewed_tag_adds() {
    let hand_edited = WRANGLER.replace(
        "# No Durable Object",
        "[[env.production.durable_objects.bindings]]\nname = \"OWNER_INDEX\"\nclass_name = \"OwnerIndex\"\n# No Durable Object",
    );
    let found = refusals(&hand_edited, &[v1()]);
    assert_eq!(found, [Refusal::UnreviewedBinding { name: "OWNER_INDEX".into(), class: "OwnerIndex".into() }]);
}

#[test]
fn a_renamed_top_level_binding_is_renamed_in_production() {
    let promoted = promote(WRANGLER, &[v1(), v2()]);
    let renamed = promoted.replacen("name = \"OWNER_INDEX\"", "name = \"OWNERS\"", 1);
    let plan = plan_for(&renamed, &[v1(), v2()]).unwrap();
    assert_eq!(plan.changes.len(), 2, "{:?}", plan.changes);
    let out = render(&renamed, &plan).unwrap();
    let names: Vec<String> = read_wrangler(&out).unwrap().production_bindings.into_iter().map(|b| b.name).collect();
    assert_eq!(names, ["HANDOFFS", "OWNERS"]);
}

#[test]
fn reports_every_refusal_at_once() {
    let text = with_top_level(V3);
    let mut unreviewed = v1();
    unreviewed.reviewed_by.clear();
    let found = refusals(&text, &[unreviewed, approval("v3", &["Wrong"])]);
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn refuses_an_environment_that_sets_a_hook_variable_in_inline_vars() {
    let text = WRANGLER.replace(
        "vars = { HANDOFF_ENV = \"staging\" }",
        "vars = { HANDOFF_ENV = \"staging\", HANDOFF_TEST_HOOKS = \"1\" }",
    );
    let found = refusals(&text, &[v1(), v2()]);
    let hook = Exposure::HookVar { env: "staging".into(), var: "HANDOFF_TEST_HOOKS".into() };
    assert_eq!(found, [Refusal::Hook(hook)]);
    assert!(found[0].to_string().starts_with("env.staging sets the hook variable HANDOFF_TEST_HOOKS"));
}

#[test]
fn refuses_a_production_that_sets_a_hook_variable_in_a_vars_table() {
    let text = WRANGLER.replace(
        "[env.production]\nvars = { HANDOFF_ENV = \"production\" }\n",
        "[env.production]\n\n[env.production.vars]\nHANDOFF_ENV = \"production\"\nHANDOFF_BENCH_FLOOR = \"1\"\n",
    );
    // Refused whatever the approvals say, and before anything would be written.
    for approvals in [&[][..], &[v1(), v2()]] {
        let found = refusals(&text, approvals);
        let hook = Exposure::HookVar { env: "production".into(), var: "HANDOFF_BENCH_FLOOR".into() };
        assert_eq!(found, [Refusal::Hook(hook)]);
    }
}

#[test]
fn refuses_every_hook_variable_of_every_environment_at_once() {
    let text = WRANGLER
        .replace("HANDOFF_ENV = \"staging\" }", "HANDOFF_ENV = \"staging\", HANDOFF_TEST_WAITERS_MAX = \"2\" }")
        .replace("HANDOFF_ENV = \"production\" }", "HANDOFF_ENV = \"production\", HANDOFF_TEST_HOOKS = \"1\" }");
    let found = messages(&refusals(&text, &[v1()]));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("env.staging sets the hook variable HANDOFF_TEST_WAITERS_MAX"), "{found:?}");
    assert!(found[1].starts_with("env.production sets the hook variable HANDOFF_TEST_HOOKS"), "{found:?}");
}

#[test]
fn refuses_an_environment_that_calls_itself_local() {
    let text = WRANGLER.replace("HANDOFF_ENV = \"production\"", "HANDOFF_ENV = \"local\"");
    let found = refusals(&text, &[]);
    assert_eq!(found, [Refusal::Hook(Exposure::ClaimsLocal { env: "production".into() })]);
}

#[test]
fn refuses_a_top_level_that_calls_itself_local_or_sets_a_hook() {
    // `wrangler deploy` with no --env deploys the top level; local runs ask for local with --var.
    let text = WRANGLER.replace(
        "compatibility_date = \"2025-11-01\"\n",
        "compatibility_date = \"2025-11-01\"\n\n[vars]\nHANDOFF_ENV = \"local\"\nHANDOFF_TEST_HOOKS = \"1\"\n",
    );
    assert_ne!(text, WRANGLER);
    let found = refusals(&text, &[v1(), v2()]);
    assert_eq!(
        found,
        [
            Refusal::Hook(Exposure::ClaimsLocal { env: Scope::TopLevel }),
            Refusal::Hook(Exposure::HookVar { env: Scope::TopLevel, var: "HANDOFF_TEST_HOOKS".into() }),
        ]
    );
    assert!(found[0].to_string().starts_with("the top level sets HANDOFF_ENV = \"local\""), "{}", found[0]);
}

#[test]
fn a_top_level_without_handoff_env_passes_the_gate() {
    assert!(!WRANGLER.contains("[vars]"));
    assert!(plan_for(WRANGLER, &[v1(), v2()]).is_ok());
}

#[test]
fn approvals_parse_strictly() {
    let good = r#"{"do_tags": [{"tag": "v1", "classes": ["HandoffObject"], "reviewed_by": "r",
        "reviewed_at": "2025-11-20", "review": "https://example.invalid/1"}]}"#;
    assert_eq!(
        parse_approvals(good).unwrap().do_tags,
        [approval("v1", &["HandoffObject"])].map(|mut a| {
            a.reviewed_by = "r".into();
            a.review = "https://example.invalid/1".into();
            a
        })
    );
    assert!(parse_approvals(r#"{"do_tags": [{"tag": "v1", "classes": [], "reviewd_by": "r"}]}"#).is_err());
    assert!(parse_approvals(r#"{"tags": []}"#).is_err());
    // A missing review field is the gate's refusal, not a parse error.
    let bare = parse_approvals(r#"{"do_tags": [{"tag": "v1", "classes": ["HandoffObject"]}]}"#).unwrap();
    assert!(matches!(&refusals(WRANGLER, &bare.do_tags)[0], Refusal::EntryNotReviewed { .. }));
}

#[test]
fn a_config_without_a_production_env_is_an_error_not_a_plan() {
    let text = &WRANGLER[..WRANGLER.find("[env.production]").unwrap()];
    assert!(read_wrangler(text).is_err());
}
