//! The harness of the command-line tests: the built `handoff` binary, run as separate
//! processes against the real local Worker whose address is in `HANDOFF_URL`.
//!
//! There is no fallback: without `HANDOFF_URL` every test fails, saying so. A test that
//! skipped itself would report a pass for a client nobody ran.
#![allow(dead_code)]

pub mod harness;
pub mod served;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a follower may take to print a version after the change that made it.
pub const FOLLOW_LINE_S_MAX: u64 = 30;
/// No request of these tests should wait longer for its answer.
pub const REQUEST_TIMEOUT_S: u64 = 60;

pub fn url() -> String {
    match std::env::var("HANDOFF_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "HANDOFF_URL is not set: the command-line tests run against a real local Worker \
             (scripts/test starts one and sets it; by hand: HANDOFF_URL=http://127.0.0.1:8787 cargo test -p handoff-cli)"
        ),
    }
}

pub fn signing_key() -> String {
    std::env::var("HANDOFF_SIGNING_KEY").unwrap_or_else(|_| handoff_api::token::DEV_SIGNING_KEY.to_string())
}

/// A unique name per call, so tests never share a session or an owner.
pub fn unique(prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// One run of the binary: its exit code and what it printed.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// The binary with the environment a user would give it, and nothing inherited that could
/// change what it does.
pub fn command(token: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_handoff"));
    cmd.args(args)
        .env("HANDOFF_URL", url())
        .env("HANDOFF_SIGNING_KEY", signing_key())
        .env_remove("HANDOFF_TOKEN")
        .env_remove("HANDOFF_TOKEN_FILE")
        .env_remove("HANDOFF_INSECURE_HTTP")
        .stdin(Stdio::null());
    if let Some(t) = token {
        cmd.env("HANDOFF_TOKEN", t);
    }
    cmd
}

pub fn run(token: Option<&str>, args: &[&str]) -> Run {
    run_in(None, token, args)
}

pub fn run_in(dir: Option<&Path>, token: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = command(token, args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("the handoff binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs and insists on success; answers stdout.
pub fn ok(token: Option<&str>, args: &[&str]) -> String {
    let r = run(token, args);
    assert_eq!(r.code, 0, "handoff {args:?} failed: {r:?}");
    r.stdout
}

/// A fresh owner, its token minted by `handoff token --owner`.
pub fn owner() -> String {
    ok(None, &["token", "--owner", &unique("owner")]).trim().to_string()
}

/// Creates a hand-off for a fresh session; answers (id, machine token).
pub fn create(owner: &str) -> (String, String) {
    create_saying(owner, &[])
}

/// [`create`] with turn 1's words.
pub fn create_with_prompt(owner: &str, prompt: &str) -> (String, String) {
    create_saying(owner, &["--prompt", prompt])
}

fn create_saying(owner: &str, more: &[&str]) -> (String, String) {
    let args = ["create", &unique("session"), "--machine", "m1", "--size", "large"];
    let out = ok(Some(owner), &[&args[..], more].concat());
    let mut lines = out.lines();
    let id = lines.next().expect("create prints the id").to_string();
    let machine = lines.next().expect("create prints the machine token").to_string();
    assert!(id.starts_with("ho_"), "{out}");
    (id, machine)
}

/// The owner sets the work record the hand-off tests brief from: a config parser, one criterion.
pub fn set_parser_work(owner: &str, id: &str) {
    let work = ["work", id, "--title", "Config parser", "--goal", "Parse the config file"];
    ok(Some(owner), &[&work[..], &["--criterion", "empty input parses"]].concat());
}

/// The record as `show --json` gives it.
pub fn record(token: &str, id: &str) -> Value {
    let r = run(Some(token), &["show", id, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["handoff"].clone()
}

pub fn version(token: &str, id: &str) -> u64 {
    record(token, id)["version"].as_u64().unwrap()
}

/// A `handoff wait ID --follow` running in its own process, its lines read as they come.
pub struct Follower {
    child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
}

impl Follower {
    pub fn start(token: &str, args: &[&str]) -> Follower {
        let mut child = command(Some(token), args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Follower { child, lines, seen: Vec::new() }
    }

    /// Waits for the next line that starts with `prefix`, and answers it; fails (with every
    /// line seen) if it does not come.
    pub fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(FOLLOW_LINE_S_MAX);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no line starting {prefix:?} within {FOLLOW_LINE_S_MAX} s; seen: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the follower ended before {prefix:?}; seen: {:#?}", self.seen)
                }
            }
        }
    }

    /// Waits for the follower to end by itself; answers its exit code and the lines left.
    pub fn finish(mut self) -> (i32, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(FOLLOW_LINE_S_MAX);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let rest: Vec<String> = self.lines.try_iter().collect();
                self.seen.extend(rest);
                return (status.code().unwrap_or(-1), std::mem::take(&mut self.seen));
            }
            assert!(Instant::now() < deadline, "the follower did not end; seen: {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A direct request to the API, bypassing the client, to compare `--json` with.
pub fn api_get(token: &str, path: &str) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
        .build()
        .into();
    let mut response = agent
        .get(format!("{}{path}", url()))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let text = response.body_mut().read_to_string().unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path} is not JSON ({e}): {text}"));
    (response.status().as_u16(), body)
}

/// A git repository with one commit and some changes against it.
pub fn git_repo_with_changes() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique("handoff-cli-git"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(dir.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    std::fs::write(dir.join("README.md"), "hello\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "start"]);
    std::fs::write(dir.join("src/lib.rs"), "fn a() {}\nfn c() {}\nfn d() {}\n").unwrap();
    std::fs::remove_file(dir.join("README.md")).unwrap();
    dir
}

/// `machine enrol` running in its own process and state folder; its code once printed, and
/// the rest of its standard output, read as it comes.
pub fn start_enrol(
    state: &std::path::Path,
    name: &str,
    owner: &str,
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    // The service takes at most 10 enrolments a minute from one address: a suite enrolling
    // more waits for the next minute rather than fail.
    let deadline = Instant::now() + Duration::from_secs(ENROL_RATE_WAIT_S_MAX);
    loop {
        let mut child = command(None, &["machine", "enrol", "--name", name, "--owner", owner, "--wait", "60"])
            .env("HANDOFF_STATE_DIR", state)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if line.is_empty() {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(stderr.contains("enrolment.too_many") && Instant::now() < deadline, "no code: {stderr}");
            std::thread::sleep(Duration::from_secs(5));
            continue;
        }
        let code = line.trim().strip_prefix("code: ").unwrap_or_else(|| panic!("a code line: {line:?}")).to_string();
        assert!(code.len() == 9 && code.as_bytes()[4] == b'-', "{code}");
        let rest = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
        return (child, code, rest);
    }
}

/// How long [`start_enrol`] waits for the service's per-minute bound on enrolments at most.
pub const ENROL_RATE_WAIT_S_MAX: u64 = 90;

/// Machine `name` enrolled for `subject` (whose token is `owner_token`), its credential in the
/// state folder `state`: `machine enrol --owner` approved with no terminal.
pub fn enrol(state: &Path, name: &str, subject: &str, owner_token: &str) {
    let (child, code, rest) = start_enrol(state, name, subject);
    let approved = run(Some(owner_token), &["machine", "approve", &code]);
    assert_eq!(approved.code, 0, "{approved:?}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    drop(rest.join());
}

/// `DELETE path` with `token`: the status.
pub fn api_delete(token: &str, path: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
        .build()
        .into();
    let response = agent
        .delete(format!("{}{path}", url()))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .unwrap_or_else(|e| panic!("DELETE {path}: {e}"));
    response.status().as_u16()
}

/// The value at percentile `p` of `sorted` (nearest rank).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One `bench-serve:` line: the count, p50, p99, min and max of `v`, in ms.
pub fn print_figures(what: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    eprintln!(
        "bench-serve: {what}: n={} p50={} ms p99={} ms min={} ms max={} ms",
        v.len(),
        percentile(&v, 50.0),
        percentile(&v, 99.0),
        v[0],
        v[v.len() - 1]
    );
}
