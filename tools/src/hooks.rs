//! The test and bench hooks: variables that open routes (`/v1/test/*`, `/v1/bench/floor`) and
//! switches (`HANDOFF_TEST_WAITERS_MAX`) that only a local Worker may have. The Worker opens
//! them only where `HANDOFF_ENV` is `local` and the variable is set; this module is the deploy
//! gate's half of that rule: no deployable part of wrangler.toml (the top level, which
//! `wrangler deploy` with no `--env` deploys, and every `[env.NAME]`) may set a hook variable
//! in its `vars`, nor call itself `local`. Local runs set both on the command line (`--var`).
//! prod-promote refuses such a file and the release smoke fails on it.
//!
//! **Architecture Invariant:** `exposed` is the rule and does no I/O; `read_env_vars` knows
//! TOML and no rule.

use std::fmt;

use toml_edit::{DocumentMut, TableLike};

/// A variable whose name starts with one of these is a hook: the scripts set them on
/// `wrangler dev`'s command line (`--var`), never in a deployed environment.
pub const HOOK_VAR_PREFIXES: [&str; 2] = ["HANDOFF_TEST_", "HANDOFF_BENCH_"];
/// The variable that names the environment to the Worker.
pub const ENV_VAR: &str = "HANDOFF_ENV";
/// The only `HANDOFF_ENV` under which the Worker opens its hooks and takes the development key.
pub const LOCAL: &str = "local";

pub fn is_hook_var(name: &str) -> bool {
    HOOK_VAR_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// A deployable part of wrangler.toml: the top level (`wrangler deploy` with no `--env`) or
/// one `[env.NAME]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    TopLevel,
    Env(String),
}

impl From<&str> for Scope {
    fn from(name: &str) -> Scope {
        Scope::Env(name.to_string())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::TopLevel => f.write_str("the top level"),
            Scope::Env(name) => write!(f, "env.{name}"),
        }
    }
}

/// One deployable part and the variables its `vars` set: the name, and the value when it is a
/// string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvVars {
    pub env: Scope,
    pub vars: Vec<(String, Option<String>)>,
}

/// What a deployable environment must not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// The top level or `[env.NAME]` sets a hook variable in its `vars`.
    HookVar { env: Scope, var: String },
    /// The top level or `[env.NAME]` sets `HANDOFF_ENV = "local"`, which would open the hooks
    /// and the development key wherever it is deployed.
    ClaimsLocal { env: Scope },
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exposure::HookVar { env, var } => write!(
                f,
                "{env} sets the hook variable {var} in its vars: test and bench hooks are for \
                 local Workers only (wrangler dev --var), never a deployed environment"
            ),
            Exposure::ClaimsLocal { env } => write!(
                f,
                "{env} sets {ENV_VAR} = \"{LOCAL}\": a local Worker opens its hooks and takes the \
                 development key, so only local runs ask for it (--var {ENV_VAR}:{LOCAL}), never \
                 a configuration that can be deployed"
            ),
        }
    }
}

/// Every hook variable and every claim to be local in the deployable parts, the top level
/// first, then the environments in file order.
pub fn exposed(envs: &[EnvVars]) -> Vec<Exposure> {
    let mut found = Vec::new();
    for env in envs {
        for (var, value) in &env.vars {
            if is_hook_var(var) {
                found.push(Exposure::HookVar { env: env.env.clone(), var: var.clone() });
            }
            if var == ENV_VAR && value.as_deref() == Some(LOCAL) {
                found.push(Exposure::ClaimsLocal { env: env.env.clone() });
            }
        }
    }
    found
}

/// The `vars` of the top level and of every `[env.NAME]` in the wrangler.toml `text`, whether
/// written inline (`vars = { … }`), as a table (`[vars]`, `[env.NAME.vars]`) or as dotted keys.
pub fn read_env_vars(text: &str) -> Result<Vec<EnvVars>, String> {
    let doc: DocumentMut = text.parse().map_err(|e| format!("wrangler.toml is not TOML: {e}"))?;
    env_vars(doc.as_table())
}

/// As `read_env_vars`, from a parsed document's root table.
pub fn env_vars(root: &dyn TableLike) -> Result<Vec<EnvVars>, String> {
    let mut all = vec![EnvVars { env: Scope::TopLevel, vars: vars_of(root, "vars")? }];
    let Some(envs) = root.get("env") else { return Ok(all) };
    let envs = envs.as_table_like().ok_or("wrangler.toml: env is not a table")?;
    for (name, item) in envs.iter() {
        let env = item.as_table_like().ok_or_else(|| format!("wrangler.toml: env.{name} is not a table"))?;
        all.push(EnvVars { env: Scope::from(name), vars: vars_of(env, &format!("env.{name}.vars"))? });
    }
    Ok(all)
}

/// The `vars` of one part (`table`), named `what` in an error.
fn vars_of(table: &dyn TableLike, what: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let Some(vars) = table.get("vars") else { return Ok(Vec::new()) };
    let vars = vars.as_table_like().ok_or_else(|| format!("wrangler.toml: {what} is not a table"))?;
    Ok(vars.iter().map(|(var, value)| (var.to_string(), value.as_str().map(str::to_string))).collect())
}

#[cfg(test)]
mod tests;
