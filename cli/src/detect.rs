//! `handoff runtimes ID --detect`: the agent runtimes installed on this machine, and whether
//! each has a usable credential, found by running their own commands, never guessed.
//!
//! | runtime | found as | version | signed in |
//! |---|---|---|---|
//! | `claude-code` | `claude` on `PATH` | `claude --version` | `claude auth status`: exit 0 yes, exit 1 no (Claude Code 2.1.41 and later; an older one cannot be asked, so `null`) |
//! | `codex` | `codex` on `PATH` | `codex --version` | `codex login status`: exit 0 yes; exit 1 saying "Not logged in" no, unless Codex has a credential it does not see ([`codex_credential_elsewhere`]); anything else `null` |
//!
//! Each command runs with [`DETECT_COMMAND_MS`] to answer, all of them at once; one that does
//! not answer in time is killed and counts as "could not check".

use crate::client::Runtime;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one version or credential command may take.
pub const DETECT_COMMAND_MS: u64 = 3_000;
/// The most of a command's output read.
const OUTPUT_BYTES_MAX: u64 = 64 * 1024;
/// The first Claude Code with `claude auth status`.
const CLAUDE_AUTH_STATUS_SINCE: (u64, u64, u64) = (2, 1, 41);

/// What a command did: its exit code (`None` when killed or not started) and its output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Every known runtime found on `path_var` (a `PATH` value), in a fixed order.
pub fn detect(path_var: Option<&str>) -> Vec<Runtime> {
    let claude = find("claude", path_var);
    let codex = find("codex", path_var);
    let claude = claude.map(|p| std::thread::spawn(move || claude_code(&p)));
    let codex = codex.map(|p| std::thread::spawn(move || codex_runtime(&p)));
    [claude, codex].into_iter().flatten().filter_map(|t| t.join().ok()).collect()
}

fn claude_code(program: &Path) -> Runtime {
    let version = version_line(&run(program, &["--version"]));
    let signed_in = match version.as_deref().and_then(semver) {
        Some(v) if v >= CLAUDE_AUTH_STATUS_SINCE => claude_signed_in(&run(program, &["auth", "status"])),
        // An older `claude` would read `auth status` as a prompt: not asked.
        _ => None,
    };
    Runtime { name: "claude-code".into(), version, signed_in }
}

fn codex_runtime(program: &Path) -> Runtime {
    let version = version_line(&run(program, &["--version"]));
    let env = |k: &str| std::env::var(k).ok();
    let signed_in = match codex_signed_in(&run(program, &["login", "status"])) {
        Some(true) => Some(true),
        _ if codex_credential_elsewhere(read_codex_config(&env).as_deref(), &env) => Some(true),
        said => said,
    };
    Runtime { name: "codex".into(), version, signed_in }
}

/// Codex's `config.toml`: in `CODEX_HOME`, else `~/.codex`.
fn read_codex_config(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let home = env("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".codex")))?;
    std::fs::read_to_string(home.join("config.toml")).ok()
}

/// The variables Codex reads a key from besides its login (`auth.json`).
pub const CODEX_KEY_VARIABLES: [&str; 2] = ["OPENAI_API_KEY", "CODEX_API_KEY"];

/// Whether Codex has a credential that `codex login status` does not count (0.169.0 says "Not
/// logged in" whatever the environment holds): a key in one of [`CODEX_KEY_VARIABLES`], or a
/// model provider other than OpenAI's chosen in `config.toml` whose `env_key` is set (or that
/// names none: it needs no key).
pub fn codex_credential_elsewhere(config_toml: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    if CODEX_KEY_VARIABLES.iter().any(|name| set(name)) {
        return true;
    }
    let Some(doc) = config_toml.and_then(|t| t.parse::<toml_edit::DocumentMut>().ok()) else { return false };
    let Some(provider) = doc.get("model_provider").and_then(|p| p.as_str()).filter(|p| *p != "openai") else {
        return false;
    };
    let Some(table) = doc.get("model_providers").and_then(|all| all.get(provider)) else { return false };
    match table.get("env_key").and_then(|k| k.as_str()) {
        Some(name) => set(name),
        None => true,
    }
}

/// `claude auth status`: exit 0 when signed in, 1 when not.
pub fn claude_signed_in(ran: &Ran) -> Option<bool> {
    match ran.code {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}

/// `codex login status` (it writes to standard error): exit 0 when signed in; exit 1 with
/// "Not logged in" when not; anything else could not be checked.
pub fn codex_signed_in(ran: &Ran) -> Option<bool> {
    let said = format!("{}\n{}", ran.stdout, ran.stderr).to_lowercase();
    match ran.code {
        Some(0) => Some(true),
        Some(1) if said.contains("not logged in") => Some(false),
        _ => None,
    }
}

/// The first line a version command printed, as the service accepts it (at most 64 bytes,
/// no control characters), or `None` when it failed or printed nothing.
pub fn version_line(ran: &Ran) -> Option<String> {
    if ran.code != Some(0) {
        return None;
    }
    let line = ran.stdout.lines().map(str::trim).find(|l| !l.is_empty())?;
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    let v = handoff_core::text::clip(&clean, handoff_core::limits::RUNTIME_VERSION_BYTES_MAX).trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// The first `x.y.z` in a version line.
fn semver(line: &str) -> Option<(u64, u64, u64)> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|word| {
        let mut parts = word.split('.').map(|p| p.parse::<u64>().ok());
        Some((parts.next()??, parts.next()??, parts.next()??))
    })
}

/// `name` as an executable file in one of `path_var`'s absolute directories. An empty or
/// relative entry would be read from the current folder, the workspace, where a model can plant
/// a program of the same name: it is never looked in.
pub fn find(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    absolute_dirs(path_var?).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

/// The absolute directories of a `PATH` value, in order; an empty or relative entry is left out.
pub fn absolute_dirs(path_var: &str) -> impl Iterator<Item = PathBuf> + '_ {
    std::env::split_paths(path_var).filter(|dir| dir.is_absolute())
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// Runs `program args` with no input, for at most [`DETECT_COMMAND_MS`].
pub fn run(program: &Path, args: &[&str]) -> Ran {
    let child =
        Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let Ok(mut child) = child else { return Ran::default() };
    let out = child.stdout.take().map(|s| std::thread::spawn(move || read_bounded(s)));
    let err = child.stderr.take().map(|s| std::thread::spawn(move || read_bounded(s)));
    let deadline = Instant::now() + Duration::from_millis(DETECT_COMMAND_MS);
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = |t: Option<std::thread::JoinHandle<String>>| t.and_then(|t| t.join().ok()).unwrap_or_default();
    Ran { code, stdout: text(out), stderr: text(err) }
}

fn read_bounded(stream: impl Read) -> String {
    let mut bytes = Vec::new();
    let _ = stream.take(OUTPUT_BYTES_MAX).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(code: Option<i32>, stdout: &str, stderr: &str) -> Ran {
        Ran { code, stdout: stdout.into(), stderr: stderr.into() }
    }

    #[test]
    fn signed_in_is_what_each_runtime_says_and_null_when_it_cannot_say() {
        assert_eq!(claude_signed_in(&ran(Some(0), "{\"loggedIn\":true}", "")), Some(true));
        assert_eq!(claude_signed_in(&ran(Some(1), "{\"loggedIn\":false}", "")), Some(false));
        assert_eq!(claude_signed_in(&ran(None, "", "")), None, "killed or not started");
        assert_eq!(claude_signed_in(&ran(Some(2), "", "unknown command")), None);
        assert_eq!(codex_signed_in(&ran(Some(0), "", "Logged in using ChatGPT")), Some(true));
        assert_eq!(codex_signed_in(&ran(Some(1), "", "Not logged in")), Some(false));
        assert_eq!(codex_signed_in(&ran(Some(1), "", "Error reading auth.json")), None, "a failure is not a no");
        assert_eq!(codex_signed_in(&ran(None, "", "")), None);
    }

    #[test]
    fn a_key_in_the_environment_or_a_configured_provider_with_its_key_counts_as_signed_in_for_codex() {
        let none = |_: &str| None;
        assert!(!codex_credential_elsewhere(None, &none));
        for name in CODEX_KEY_VARIABLES {
            assert!(codex_credential_elsewhere(None, &|k: &str| (k == name).then(|| "sk-1".to_string())), "{name}");
        }
        assert!(
            !codex_credential_elsewhere(None, &|k: &str| (k == "OPENAI_API_KEY").then(|| " ".to_string())),
            "an empty key is none"
        );
        let scripted = "model_provider = \"scripted\"\n[model_providers.scripted]\nbase_url = \"http://127.0.0.1:1\"\nenv_key = \"SCRIPTED_MODEL_KEY\"\n";
        assert!(
            codex_credential_elsewhere(Some(scripted), &|k: &str| (k == "SCRIPTED_MODEL_KEY").then(|| "k".to_string()))
        );
        assert!(!codex_credential_elsewhere(Some(scripted), &none), "the provider's key is not set");
        let keyless = "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:1\"\n";
        assert!(codex_credential_elsewhere(Some(keyless), &none), "a provider that names no key needs none");
        assert!(
            !codex_credential_elsewhere(Some("model_provider = \"openai\"\n"), &none),
            "OpenAI's own needs the login or a key"
        );
        assert!(
            !codex_credential_elsewhere(Some("model_provider = \"elsewhere\"\n"), &none),
            "a provider not configured here says nothing"
        );
        assert!(!codex_credential_elsewhere(Some("not toml ["), &none));
    }

    #[test]
    fn a_version_is_the_first_line_clipped_and_clean() {
        assert_eq!(
            version_line(&ran(Some(0), "\n2.1.269 (Claude Code)\nmore", "")).as_deref(),
            Some("2.1.269 (Claude Code)")
        );
        assert_eq!(version_line(&ran(Some(1), "2.1.0", "")), None);
        assert_eq!(version_line(&ran(Some(0), "  ", "")), None);
        let long = format!("codex-cli {}\u{7}", "é".repeat(40));
        let v = version_line(&ran(Some(0), &long, "")).unwrap();
        assert!(v.len() <= handoff_core::limits::RUNTIME_VERSION_BYTES_MAX && !v.contains('\u{7}'), "{v}");
    }

    #[test]
    fn a_program_is_looked_for_only_in_absolute_path_entries_never_in_the_current_folder() {
        let dirs: Vec<PathBuf> = absolute_dirs("/a::b:./c:.:/d").collect();
        assert_eq!(dirs, [PathBuf::from("/a"), PathBuf::from("/d")], "empty and relative entries are left out");
        let sh = find("sh", Some("::bin:/bin:/usr/bin"));
        assert!(sh.as_ref().is_some_and(|p| p.is_absolute()), "{sh:?}");
        assert_eq!(find("sh", Some(":.:bin")), None, "no absolute entry, nothing found");
    }

    #[test]
    fn claude_auth_status_is_asked_only_of_versions_that_have_it() {
        assert_eq!(semver("2.1.41 (Claude Code)"), Some((2, 1, 41)));
        assert_eq!(semver("codex-cli 0.50.0"), Some((0, 50, 0)));
        assert_eq!(semver("version unknown"), None);
        assert!(semver("2.1.40 (Claude Code)").unwrap() < CLAUDE_AUTH_STATUS_SINCE);
        assert!(semver("2.2.0 (Claude Code)").unwrap() >= CLAUDE_AUTH_STATUS_SINCE);
    }
}
