//! The hooks rule: no deployable part (the top level or an environment) sets a hook variable
//! or calls itself local.

use super::*;

const CHECKED_IN: &str = include_str!("../../../wrangler.toml");

fn exposed_in(text: &str) -> Vec<Exposure> {
    exposed(&read_env_vars(text).expect("fixture reads"))
}

fn hook(env: &str, var: &str) -> Exposure {
    Exposure::HookVar { env: env.into(), var: var.into() }
}

#[test]
fn the_checked_in_environments_set_no_hook_variable() {
    assert_eq!(exposed_in(CHECKED_IN), []);
    let envs: Vec<Scope> = read_env_vars(CHECKED_IN).unwrap().into_iter().map(|e| e.env).collect();
    assert_eq!(envs, [Scope::TopLevel, "development".into(), "staging".into(), "production".into()]);
}

#[test]
fn the_checked_in_top_level_sets_no_handoff_env_at_all() {
    // `wrangler deploy` with no --env deploys the top level: the Worker must read it as deployed.
    let parts = read_env_vars(CHECKED_IN).unwrap();
    assert_eq!(parts[0].env, Scope::TopLevel);
    assert!(!parts[0].vars.iter().any(|(var, _)| var == ENV_VAR), "{:?}", parts[0].vars);
}

#[test]
fn every_test_and_bench_variable_is_a_hook() {
    for var in ["HANDOFF_TEST_HOOKS", "HANDOFF_BENCH_FLOOR", "HANDOFF_TEST_WAITERS_MAX", "HANDOFF_BENCH_ANYTHING"] {
        assert!(is_hook_var(var), "{var}");
    }
    for var in ["HANDOFF_ENV", "HANDOFF_SIGNING_KEY", "HANDOFF_TESTS", "TEST_HOOKS", "handoff_test_hooks"] {
        assert!(!is_hook_var(var), "{var}");
    }
}

#[test]
fn a_hook_variable_in_an_inline_vars_table_is_named_with_its_environment() {
    let text = CHECKED_IN.replace(
        "vars = { HANDOFF_ENV = \"staging\" }",
        "vars = { HANDOFF_ENV = \"staging\", HANDOFF_TEST_HOOKS = \"1\" }",
    );
    let found = exposed_in(&text);
    assert_eq!(found, [hook("staging", "HANDOFF_TEST_HOOKS")]);
    assert!(found[0].to_string().starts_with("env.staging sets the hook variable HANDOFF_TEST_HOOKS in its vars"));
}

#[test]
fn a_hook_variable_in_a_vars_table_is_named_with_its_environment() {
    let text = CHECKED_IN.replace(
        "[env.production]\nvars = { HANDOFF_ENV = \"production\" }",
        "[env.production]\n\n[env.production.vars]\nHANDOFF_ENV = \"production\"\nHANDOFF_BENCH_FLOOR = \"1\"\n",
    );
    assert_eq!(exposed_in(&text), [hook("production", "HANDOFF_BENCH_FLOOR")]);
}

#[test]
fn a_hook_variable_as_a_dotted_key_is_named_too() {
    let text = CHECKED_IN.replace(
        "vars = { HANDOFF_ENV = \"development\" }",
        "vars.HANDOFF_ENV = \"development\"\nvars.HANDOFF_TEST_WAITERS_MAX = 3",
    );
    assert_eq!(exposed_in(&text), [hook("development", "HANDOFF_TEST_WAITERS_MAX")]);
}

#[test]
fn any_value_counts_even_zero() {
    // The Worker reads what it reads; the gate does not guess which values are harmless.
    let text = CHECKED_IN.replace(
        "vars = { HANDOFF_ENV = \"development\" }",
        "vars = { HANDOFF_ENV = \"development\", HANDOFF_TEST_HOOKS = \"0\", HANDOFF_BENCH_FLOOR = false }",
    );
    assert_eq!(
        exposed_in(&text),
        [hook("development", "HANDOFF_TEST_HOOKS"), hook("development", "HANDOFF_BENCH_FLOOR")]
    );
}

#[test]
fn every_environment_is_checked_whatever_its_name() {
    let text =
        format!("{CHECKED_IN}\n[env.preview]\nvars = {{ HANDOFF_ENV = \"preview\", HANDOFF_TEST_HOOKS = \"1\" }}\n");
    assert_eq!(exposed_in(&text), [hook("preview", "HANDOFF_TEST_HOOKS")]);
}

/// The checked-in file with `vars` written at its top level, before any table.
fn with_top_level_vars(vars: &str) -> String {
    let text = format!("{vars}\n{CHECKED_IN}");
    assert_ne!(text, CHECKED_IN);
    text
}

#[test]
fn a_top_level_that_calls_itself_local_is_refused() {
    for vars in
        ["vars = { HANDOFF_ENV = \"local\" }", "[vars]\nHANDOFF_ENV = \"local\"\n", "vars.HANDOFF_ENV = \"local\""]
    {
        let text = if vars.starts_with('[') { format!("{CHECKED_IN}\n{vars}") } else { with_top_level_vars(vars) };
        let found = exposed_in(&text);
        assert_eq!(found, [Exposure::ClaimsLocal { env: Scope::TopLevel }], "{vars}");
        assert!(found[0].to_string().starts_with("the top level sets HANDOFF_ENV = \"local\""), "{}", found[0]);
    }
}

#[test]
fn a_top_level_that_names_a_deployed_environment_passes() {
    let text = with_top_level_vars("vars = { HANDOFF_ENV = \"development\" }");
    assert_eq!(exposed_in(&text), []);
}

#[test]
fn a_hook_variable_in_the_top_level_vars_is_refused_too() {
    // The top level is deployable, so it is held to the environments' rule.
    let text = with_top_level_vars("vars = { HANDOFF_TEST_HOOKS = \"1\" }");
    let found = exposed_in(&text);
    assert_eq!(found, [Exposure::HookVar { env: Scope::TopLevel, var: "HANDOFF_TEST_HOOKS".into() }]);
    assert!(found[0].to_string().starts_with("the top level sets the hook variable HANDOFF_TEST_HOOKS"));
}

#[test]
fn the_top_level_is_named_first_then_the_environments() {
    let text = with_top_level_vars("vars = { HANDOFF_ENV = \"local\" }")
        .replace("HANDOFF_ENV = \"staging\"", "HANDOFF_ENV = \"local\"");
    assert_eq!(
        exposed_in(&text),
        [Exposure::ClaimsLocal { env: Scope::TopLevel }, Exposure::ClaimsLocal { env: "staging".into() }]
    );
}

#[test]
fn an_environment_that_calls_itself_local_is_refused() {
    let text = CHECKED_IN.replace("HANDOFF_ENV = \"staging\"", "HANDOFF_ENV = \"local\"");
    let found = exposed_in(&text);
    assert_eq!(found, [Exposure::ClaimsLocal { env: "staging".into() }]);
    assert!(found[0].to_string().starts_with("env.staging sets HANDOFF_ENV = \"local\""));
}

#[test]
fn vars_that_are_not_a_table_are_an_error() {
    let text = CHECKED_IN.replace("vars = { HANDOFF_ENV = \"staging\" }", "vars = \"HANDOFF_TEST_HOOKS=1\"");
    assert_eq!(read_env_vars(&text).unwrap_err(), "wrangler.toml: env.staging.vars is not a table");
    assert!(read_env_vars("env = 1").is_err());
    assert!(read_env_vars("[env").is_err());
    assert!(read_env_vars("vars = 1").is_err());
    assert_eq!(read_env_vars("name = \"x\"").unwrap(), [EnvVars { env: Scope::TopLevel, vars: vec![] }]);
}
