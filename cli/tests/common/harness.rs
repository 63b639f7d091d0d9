//! The real agent harnesses as the tests run them: Claude Code and Codex from the repository's
//! npm lockfile (`scripts/install`), on a machine of their own (a home for their settings, the
//! hooks' state, a workspace), talking to a [`ScriptedModel`] and to the real local Worker.
//! Nothing leaves this machine: the model is on 127.0.0.1, and the harnesses' telemetry, error
//! reports and update checks are off by their own settings.
//!
//! An interactive session runs under tmux, on a tmux server of its own ([`Tmux`]), killed with
//! every process in it when the test ends, however it ends.
#![allow(dead_code)]

use super::{command, unique, Run};
// Re-exported for the harness tests; the other tests that share `common` use neither.
#[allow(unused_imports)]
pub use handoff_it::peers::scripted_model::{ModelRequest, ScriptedModel, Step};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The API key the harnesses are given: any value does for the scripted model.
pub const MODEL_KEY: &str = "sk-scripted-model-key-0123456789";
/// The longest one harness run of these tests may take before the test fails, naming it.
pub const HARNESS_RUN_S_MAX: u64 = 120;

/// The harness's program as `scripts/install` put it, at the version of the lockfile.
pub fn harness_bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: scripts/install installs the pinned harnesses from package-lock.json",
        path.display()
    );
    path
}

/// A hand-off whose turn 1 was done by hand, with the work set: (owner, id, machine token).
pub fn started() -> (String, String, String) {
    let owner = super::owner();
    let (id, machine) = super::create(&owner);
    let work = [
        "work",
        &id,
        "--title",
        "Config parser",
        "--goal",
        "Parse the config file, empty input included",
        "--constraint",
        "no new dependencies",
        "--criterion",
        "empty input parses",
    ];
    super::ok(Some(&owner), &work);
    super::ok(
        Some(&machine),
        &["report", &id, "--turn", "1", "--status", "done", "--summary", "set up the repository"],
    );
    (owner, id, machine)
}

/// One cloud machine: its folders, the session it serves and the model it talks to.
pub struct Machine {
    pub root: PathBuf,
    pub id: String,
    pub token: String,
    pub model_anthropic: String,
    pub model_openai: String,
    /// With the harnesses on `PATH` (false: a machine where neither is installed).
    pub harnesses: bool,
}

impl Machine {
    pub fn new(id: &str, token: &str, model: &ScriptedModel) -> Machine {
        let root = std::env::temp_dir().join(unique("handoff-harness"));
        for dir in ["home", "state", "work", "codex"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        let m = Machine {
            root,
            id: id.into(),
            token: token.into(),
            model_anthropic: model.anthropic_url(),
            model_openai: model.openai_url(),
            harnesses: true,
        };
        // A repository, as a session's workspace is (Codex's exec refuses a folder outside Git).
        let git = Command::new("git").args(["init", "-q"]).current_dir(m.work()).output().expect("git runs");
        assert!(git.status.success(), "git init: {}", String::from_utf8_lossy(&git.stderr));
        m.onboard_claude_code();
        m.configure_codex();
        m
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    pub fn codex_home(&self) -> PathBuf {
        self.root.join("codex")
    }

    /// The same machine with neither harness installed.
    pub fn bare(mut self) -> Machine {
        self.harnesses = false;
        self
    }

    /// `PATH`: the harnesses, then `handoff` itself (the session's own commands), then the system.
    pub fn path(&self) -> String {
        let handoff_dir = Path::new(env!("CARGO_BIN_EXE_handoff")).parent().unwrap().to_path_buf();
        let system = format!("{}:/usr/local/bin:/usr/bin:/bin", handoff_dir.display());
        if !self.harnesses {
            return system;
        }
        format!("{}:{system}", harness_bin("claude").parent().unwrap().display())
    }

    /// A file of the workspace ("" when there is none).
    pub fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.work().join(name)).unwrap_or_default()
    }

    /// [`Machine::run`], insisting on exit 0 and on the token printed nowhere.
    pub fn ok(&self, what: &str, args: &[&str]) -> Run {
        let r = self.run(what, args, &[]);
        assert_eq!(r.code, 0, "{what} failed: {r:?}\nlog:\n{}", self.log());
        assert!(!r.stdout.contains(&self.token) && !r.stderr.contains(&self.token), "{what} printed the token: {r:?}");
        r
    }

    /// Every variable a harness on this machine runs with, the session's included.
    pub fn vars(&self) -> Vec<(String, String)> {
        let pairs = [
            ("HOME", self.home().display().to_string()),
            ("PATH", self.path()),
            ("HANDOFF_URL", super::url()),
            ("HANDOFF_ID", self.id.clone()),
            ("HANDOFF_TOKEN", self.token.clone()),
            ("HANDOFF_STATE_DIR", self.root.join("state").display().to_string()),
            ("ANTHROPIC_BASE_URL", self.model_anthropic.clone()),
            ("ANTHROPIC_API_KEY", MODEL_KEY.into()),
            ("SCRIPTED_MODEL_KEY", MODEL_KEY.into()),
            ("CODEX_HOME", self.codex_home().display().to_string()),
            // Claude Code's own switches: no telemetry, error reports, update checks or other
            // traffic than the model's.
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_ERROR_REPORTING", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("TERM", "xterm-256color".into()),
        ];
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// A `handoff` command on this machine, with the machine token and these variables.
    pub fn handoff(&self, args: &[&str]) -> Command {
        let mut cmd = command(Some(&self.token), args);
        cmd.env_clear().envs(self.vars()).current_dir(self.work());
        cmd
    }

    /// Runs `handoff ARGS` to its end within [`HARNESS_RUN_S_MAX`].
    pub fn run(&self, what: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Run {
        let mut cmd = self.handoff(args);
        cmd.envs(extra_env.iter().copied());
        run_bounded(what, cmd, HARNESS_RUN_S_MAX)
    }

    /// What the hooks and the launcher logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("state/hook.log")).unwrap_or_default()
    }

    /// What a provisioned machine has done once: Claude Code's first-run screens passed, the
    /// workspace trusted and the API key approved (`~/.claude.json`); a first run stops at
    /// each of them otherwise.
    fn onboard_claude_code(&self) {
        let key_tail = &MODEL_KEY[MODEL_KEY.len() - 20..];
        let mut projects = serde_json::Map::new();
        projects.insert(
            self.work().display().to_string(),
            serde_json::json!({"hasTrustDialogAccepted": true, "allowedTools": []}),
        );
        let state = serde_json::json!({
            "hasCompletedOnboarding": true,
            "lastOnboardingVersion": "2.1.328",
            "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
            "projects": projects,
        });
        std::fs::write(self.home().join(".claude.json"), state.to_string()).unwrap();
    }

    /// Codex's provider: the scripted model over the Responses API, and no update check.
    fn configure_codex(&self) {
        let config = format!(
            "model = \"gpt-scripted\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
             [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_MODEL_KEY\"\n\n\
             [analytics]\nenabled = false\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            self.model_openai,
            self.work().display()
        );
        std::fs::write(self.codex_home().join("config.toml"), config).unwrap();
    }
}

impl Machine {
    /// The processes still running of this machine: every one whose command line or
    /// environment names its folder (all its programs inherit `HOME` and `HANDOFF_STATE_DIR`
    /// from it, Codex's MCP server and background server included), as their command lines.
    pub fn processes(&self) -> Vec<String> {
        let root = self.root.display().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            if pid == std::process::id() {
                continue;
            }
            let read = |name: &str| {
                String::from_utf8_lossy(&std::fs::read(entry.path().join(name)).unwrap_or_default()).replace('\0', " ")
            };
            let cmdline = read("cmdline");
            if cmdline.contains(&root) || read("environ").contains(&root) {
                found.push(format!("{pid} {}", cmdline.trim()));
            }
        }
        found
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // Whatever a harness left running from here ends with its machine.
        for p in self.processes() {
            if let Some(pid) = p.split(' ').next().and_then(|p| p.parse::<i32>().ok()) {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Runs `cmd` to its end within `limit_s`, killing it (and failing, naming `what`) if it does
/// not end.
pub fn run_bounded(what: &str, mut cmd: Command, limit_s: u64) -> Run {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    // A group of its own: on a timeout the whole group goes, so that nothing it started keeps
    // the pipes open and the readers below end.
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).process_group(0).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(limit_s);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            // SAFETY: a signal to the process group this function just started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "{what} did not end within {limit_s} s: stdout {:?}, stderr {:?}",
                out.join().unwrap(),
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run { code: status.code().unwrap_or(-1), stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// Waits up to `timeout` for `check` to answer something; fails with `what` and the last
/// `context` otherwise.
pub fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {} s\n{}", timeout.as_secs(), context());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An interactive session: one program in a tmux pane, on a tmux server of its own.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `argv` in `dir` with exactly `vars`, in a 200×50 pane. The variables go through
    /// a file that only the pane's shell reads, so that no value (the token) is on a command line.
    pub fn start(dir: &Path, vars: &[(String, String)], argv: &[String]) -> Tmux {
        let tmux = Tmux { socket: unique("handoff-tmux") };
        let env_file = std::env::temp_dir().join(format!("{}.env", tmux.socket));
        let quote = |v: &str| format!("'{}'", v.replace('\'', "'\\''"));
        let exports: String = vars.iter().map(|(k, v)| format!("export {k}={}\n", quote(v))).collect();
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&env_file).unwrap();
            f.write_all(exports.as_bytes()).unwrap();
        }
        let script = format!(
            ". {}; rm -f {}; exec \"$@\"",
            quote(&env_file.display().to_string()),
            quote(&env_file.display().to_string())
        );
        let mut cmd = tmux.tmux();
        cmd.args(["new-session", "-d", "-x", "200", "-y", "50", "-c"])
            .arg(dir)
            .arg("--")
            .arg("env")
            .arg("-i")
            .arg("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("sh");
        cmd.args(argv);
        let out = cmd.output().expect("tmux runs (scripts/install installs it)");
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        tmux
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", "/dev/null"]).stdin(Stdio::null());
        cmd
    }

    /// What the pane shows now ("" once the program has ended and the pane is gone).
    pub fn screen(&self) -> String {
        let out = self.tmux().args(["capture-pane", "-p", "-t", "0"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` (tmux key names: `Enter`, `Escape`, or literal text).
    pub fn keys(&self, keys: &[&str]) {
        let out = self.tmux().args(["send-keys", "-t", "0"]).args(keys).output().unwrap();
        assert!(out.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Waits until the screen shows `text`; fails with the screen otherwise.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        eventually(
            &format!("the screen shows {text:?}"),
            timeout,
            || Some(self.screen()).filter(|s| s.contains(text)),
            || self.screen(),
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
    }
}
