//! The Worker on workerd itself, from a generated configuration, with no wrangler and no
//! Miniflare in front of it: what the benchmark measures, and what the tests use where
//! wrangler's dev proxy would hide the runtime's behaviour (it keeps a client's connection to the
//! Worker open after the client has gone, so a disconnect never reaches the Worker).
//!
//! The configuration is a local run of wrangler.toml's top level: the modules worker-build
//! writes and our entry (`build/worker/entry.mjs`, `build/index.js`, `build/index_bg.wasm`), both Durable
//! Object classes SQLite-backed on a disk folder, `HANDOFF_ENV=local` (which the top level
//! leaves out, since a deploy with no `--env` deploys it), and the Worker's variables.

use handoff_core::limits::OUTBOX_SAFETY_ALARM_MS;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// workerd evicts an idle object this long after its last event ends (`server.c++`, fixed).
pub const IDLE_EVICTION: Duration = Duration::from_secs(10);
/// How long after its last change an object with nothing else to do is evicted: the change's
/// outbox safety alarm, `OUTBOX_SAFETY_ALARM_MS` after it, is an event too (about 20 s).
pub const EVICTED_AFTER_CHANGE: Duration =
    Duration::from_millis(OUTBOX_SAFETY_ALARM_MS as u64).saturating_add(IDLE_EVICTION);

/// The variable that names the environment to the Worker, and the one value that makes it
/// local (test and bench hooks, the development key). wrangler.toml's top level does not set
/// it; every local run does, and so does this configuration.
pub const ENV_VAR: &str = "HANDOFF_ENV";
pub const LOCAL: &str = "local";

/// The files of the built Worker, as the configuration names them (relative to `build/`): our
/// entry (`src/entry.mjs`, copied by scripts/build), worker-build's module and the `.wasm`.
pub const MODULES: [(&str, &str); 3] =
    [("worker/entry.mjs", "esModule"), ("index.js", "esModule"), ("index_bg.wasm", "wasm")];

/// The files of a build made before `src/entry.mjs` (worker-build's shim was the entry), which
/// the benchmark's A/B runs still start.
pub const EARLIER_MODULES: [(&str, &str); 3] =
    [("worker/shim.mjs", "esModule"), ("index.js", "esModule"), ("index_bg.wasm", "wasm")];

/// The files of the build in `build`: this layout, or the earlier one where that is what it holds.
pub fn modules(build: &Path) -> &'static [(&'static str, &'static str)] {
    match build.join(MODULES[0].0).exists() || !build.join(EARLIER_MODULES[0].0).exists() {
        true => &MODULES,
        false => &EARLIER_MODULES,
    }
}

/// The workerd binary itself, from the npm platform package, so that the process started (and
/// whose memory is read) is workerd and not a launcher; `.bin/workerd` where that is absent.
pub fn binary(repo: &Path) -> PathBuf {
    let platform = match std::env::consts::ARCH {
        "aarch64" => "workerd-linux-arm64",
        _ => "workerd-linux-64",
    };
    let binary = repo.join("node_modules/@cloudflare").join(platform).join("bin/workerd");
    if binary.exists() {
        binary
    } else {
        repo.join("node_modules/.bin/workerd")
    }
}

/// Copies the build into `dir` (so that a rebuild meanwhile does not change what runs) and
/// writes `dir/config.capnp`, whose objects keep their state in `dir/do`.
pub fn lay_out(repo: &Path, build: &Path, dir: &Path, port: u16, vars: &[(&str, &str)]) -> Result<(), String> {
    lay_out_modules(repo, build, dir, port, vars, modules(build))
}

/// [`lay_out`] for another Worker with the same bindings and classes (the benchmark's
/// TypeScript peer): `modules` are its files under `build`, the first one its entry.
pub fn lay_out_modules(
    repo: &Path,
    build: &Path,
    dir: &Path,
    port: u16,
    vars: &[(&str, &str)],
    modules: &[(&str, &str)],
) -> Result<(), String> {
    fs::create_dir_all(dir.join("worker")).map_err(|e| format!("{}: {e}", dir.display()))?;
    fs::create_dir_all(dir.join("do")).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, _) in modules {
        let from = build.join(name);
        fs::copy(&from, dir.join(name)).map_err(|e| format!("{}: {e} (has the Worker been built?)", from.display()))?;
    }
    let compatibility_date = compatibility_date(&repo.join("wrangler.toml"))?;
    let flags = compatibility_flags(&repo.join("wrangler.toml"))?;
    let config = config_with_modules(&compatibility_date, &flags, port, &dir.join("do"), vars, modules);
    fs::write(dir.join("config.capnp"), config).map_err(|e| e.to_string())
}

/// The `compatibility_date` of wrangler.toml, so that workerd runs the Worker as `wrangler dev` would.
pub fn compatibility_date(wrangler_toml: &Path) -> Result<String, String> {
    let text = fs::read_to_string(wrangler_toml).map_err(|e| format!("{}: {e}", wrangler_toml.display()))?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("compatibility_date"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .ok_or_else(|| format!("{}: no compatibility_date", wrangler_toml.display()))
}

/// The top level's `compatibility_flags` of wrangler.toml (none where it names none).
pub fn compatibility_flags(wrangler_toml: &Path) -> Result<Vec<String>, String> {
    let text = fs::read_to_string(wrangler_toml).map_err(|e| format!("{}: {e}", wrangler_toml.display()))?;
    let line = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .find_map(|l| l.trim().strip_prefix("compatibility_flags"));
    let Some(rest) = line else { return Ok(Vec::new()) };
    let list = rest
        .trim()
        .strip_prefix('=')
        .map(str::trim)
        .and_then(|v| v.strip_prefix('['))
        .and_then(|v| v.strip_suffix(']'));
    let list =
        list.ok_or_else(|| format!("{}: compatibility_flags is not a one-line list", wrangler_toml.display()))?;
    Ok(list.split(',').map(|f| f.trim().trim_matches('"').to_string()).filter(|f| !f.is_empty()).collect())
}

/// The workerd configuration (Cap'n Proto text): both objects bound and SQLite-backed on
/// `storage`, `HANDOFF_ENV=local`, and `vars` as text bindings. Module paths are relative to
/// the folder the configuration is written in.
pub fn config(compatibility_date: &str, flags: &[String], port: u16, storage: &Path, vars: &[(&str, &str)]) -> String {
    config_with_modules(compatibility_date, flags, port, storage, vars, &MODULES)
}

pub fn config_with_modules(
    compatibility_date: &str,
    flags: &[String],
    port: u16,
    storage: &Path,
    vars: &[(&str, &str)],
    modules: &[(&str, &str)],
) -> String {
    let modules: Vec<String> =
        modules.iter().map(|(name, kind)| format!("    (name = \"{name}\", {kind} = embed \"{name}\"),")).collect();
    let mut bindings = vec![
        "    (name = \"HANDOFFS\", durableObjectNamespace = \"HandoffObject\"),".to_string(),
        "    (name = \"OWNER_INDEX\", durableObjectNamespace = \"OwnerIndex\"),".to_string(),
        "    (name = \"ENROLMENTS\", durableObjectNamespace = \"Enrolments\"),".to_string(),
        "    (name = \"MACHINES\", durableObjectNamespace = \"Machines\"),".to_string(),
        format!("    (name = {}, text = {}),", capnp_string(ENV_VAR), capnp_string(LOCAL)),
    ];
    bindings.extend(
        vars.iter()
            .map(|(name, value)| format!("    (name = {}, text = {}),", capnp_string(name), capnp_string(value))),
    );
    format!(
        r#"# Generated by handoff-it: the Worker on workerd, without wrangler's dev proxy.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .handoff),
    (name = "do-storage", disk = (path = {storage}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:{port}", http = (), service = "main")],
);

const handoff :Workerd.Worker = (
  modules = [
{modules}
  ],
  compatibilityDate = "{compatibility_date}",
  compatibilityFlags = [{flags}],
  bindings = [
{bindings}
  ],
  durableObjectNamespaces = [
    (className = "HandoffObject", uniqueKey = "handoff-HandoffObject", enableSql = true),
    (className = "OwnerIndex", uniqueKey = "handoff-OwnerIndex", enableSql = true),
    (className = "Enrolments", uniqueKey = "handoff-Enrolments", enableSql = true),
    (className = "Machines", uniqueKey = "handoff-Machines", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-storage"),
);
"#,
        storage = capnp_string(&storage.display().to_string()),
        modules = modules.join("\n"),
        flags = flags.iter().map(|f| capnp_string(f)).collect::<Vec<_>>().join(", "),
        bindings = bindings.join("\n"),
    )
}

/// `config` with V8's command-line flags (`Config.v8Flags`, which workerd hands V8 before it
/// starts): for profiling how V8 compiles the Worker; none leaves the configuration as it was.
pub fn with_v8_flags(config: &str, flags: &[String]) -> String {
    if flags.is_empty() {
        return config.to_string();
    }
    let list = flags.iter().map(|f| capnp_string(f)).collect::<Vec<_>>().join(", ");
    config.replacen("  sockets = [", &format!("  v8Flags = [{list}],\n  sockets = ["), 1)
}

/// A Cap'n Proto text string literal.
fn capnp_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// SQLite's page size in workerd's databases: a database of one page holds no table.
pub const EMPTY_DATABASE_BYTES: u64 = 4096;

/// Every Durable Object's database under `dir` (workerd's `metadata.sqlite` is not one).
pub fn object_databases(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            found.extend(object_databases(&path));
        } else if path.extension().is_some_and(|x| x == "sqlite") && !path.ends_with("metadata.sqlite") {
            found.push(path);
        }
    }
    found
}

/// The Durable Object databases under `dir` that hold anything: more than their first page, or
/// pages still in their write-ahead log. workerd opens an empty database for every object it
/// instantiates, even one that never touches storage (the bench floor's shows it); what the
/// service must not do is write into it.
pub fn databases_holding_data(dir: &Path) -> usize {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    object_databases(dir)
        .iter()
        .filter(|db| size(db) > EMPTY_DATABASE_BYTES || size(&db.with_extension("sqlite-wal")) > 0)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_binds_both_objects_sqlite_backed_with_the_variables_quoted() {
        let c = config(
            "2025-11-01",
            &["nodejs_compat".into()],
            8802,
            Path::new("/tmp/x/do"),
            &[("HANDOFF_SIGNING_KEY", "k\"ey"), ("HANDOFF_BENCH_FLOOR", "1")],
        );
        assert!(c.contains(r#"compatibilityFlags = ["nodejs_compat"],"#));
        assert!(c.contains(r#"(name = "HANDOFFS", durableObjectNamespace = "HandoffObject")"#));
        assert!(c.contains(r#"(className = "OwnerIndex", uniqueKey = "handoff-OwnerIndex", enableSql = true)"#));
        assert!(c.contains(r#"(name = "HANDOFF_BENCH_FLOOR", text = "1")"#));
        assert!(c.contains(r#"(name = "HANDOFF_ENV", text = "local")"#), "the generated configuration is a local run");
        assert!(c.contains(r#"(name = "HANDOFF_SIGNING_KEY", text = "k\"ey")"#));
        assert!(c.contains(r#"esModule = embed "worker/entry.mjs""#));
        assert!(c.contains(r#"wasm = embed "index_bg.wasm""#));
        assert!(c.contains(r#"address = "127.0.0.1:8802""#));
        assert!(c.contains(r#"path = "/tmp/x/do""#));
    }

    #[test]
    fn v8_flags_go_into_the_config_struct_quoted_and_none_change_nothing() {
        let c = config("2025-11-01", &[], 8802, Path::new("/tmp/x/do"), &[]);
        assert_eq!(with_v8_flags(&c, &[]), c);
        let flagged = with_v8_flags(&c, &["--no-liftoff".into(), "--wasm-tiering-budget=1".into()]);
        assert!(
            flagged.contains("  v8Flags = [\"--no-liftoff\", \"--wasm-tiering-budget=1\"],\n  sockets = ["),
            "{flagged}"
        );
        assert_eq!(flagged.matches("v8Flags").count(), 1);
        let config_struct = flagged.find("const config :Workerd.Config").unwrap();
        assert!(
            flagged.find("v8Flags").unwrap() > config_struct
                && flagged.find("v8Flags").unwrap() < flagged.find("const handoff").unwrap()
        );
    }

    #[test]
    fn the_flags_are_wrangler_tomls_top_level_ones_as_wrangler_dev_runs_them() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert_eq!(
            compatibility_flags(&repo.join("wrangler.toml")).unwrap(),
            ["nodejs_compat"],
            "src/entry.mjs imports node:crypto"
        );
    }

    #[test]
    fn a_build_is_laid_out_as_what_it_holds_and_a_missing_one_as_this_layout() {
        let dir = std::env::temp_dir().join(format!("handoff-it-layout-{}", std::process::id()));
        fs::create_dir_all(dir.join("worker")).unwrap();
        assert_eq!(modules(&dir), &MODULES, "nothing built yet: the error names this layout's files");
        fs::write(dir.join("worker/shim.mjs"), b"").unwrap();
        assert_eq!(modules(&dir), &EARLIER_MODULES);
        fs::write(dir.join("worker/entry.mjs"), b"").unwrap();
        assert_eq!(modules(&dir), &MODULES);
        fs::remove_dir_all(&dir).unwrap();
    }
}
