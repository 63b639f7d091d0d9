//! release-smoke: checks that wrangler.toml keeps the hooks and `HANDOFF_ENV = "local"` out
//! of every deployable part (the top level and each environment), then runs every route in release-smoke.json against a deployed (or local)
//! Worker and prints one line per check.
//!
//! Exit codes: 0 every check passed; 1 a check failed (the config, a route, or what
//! /v1/health reports: the store against --expect, the signing key); 2 bad arguments or an
//! unreadable routes file or config.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use handoff_tools::smoke::{self, Answer, Store, Verdict, HEALTH_PATH};
use handoff_tools::{cli, hooks};

const USAGE: &str = "\
usage: release-smoke <base-url> [--expect bound|unbound] [--routes PATH] [--config PATH]

Checks that neither the top level nor any [env.*] of wrangler.toml sets a test or bench
hook variable or HANDOFF_ENV = \"local\", that GET /v1/health names the store and a usable
signing key, then runs every route in release-smoke.json against <base-url>
(e.g. http://127.0.0.1:8787 or a deployed https URL).
Prints one line per check: pass or FAIL, name, request, expected, got.

  --expect bound|unbound   what the deployment must be; default: what GET /v1/health says
                           (when given, /v1/health must agree)
  --routes PATH            routes file (default: ./release-smoke.json)
  --config PATH            the deployed configuration (default: ./wrangler.toml)

exit: 0 all passed, 1 a check failed, 2 usage or unreadable routes file or config";

/// One request may take this long, connection included; a deployed Worker answers these
/// routes at once, and the wait route is refused before it holds.
const REQUEST_TIMEOUT_S: u64 = 15;
/// Largest answer body read; error bodies are a few hundred bytes.
const ANSWER_BYTES_MAX: u64 = 64 * 1024;
/// The routes file is small and hand-written.
const ROUTES_BYTES_MAX: u64 = 256 * 1024;
/// wrangler.toml likewise (prod-promote reads it with the same bound).
const CONFIG_BYTES_MAX: u64 = 1024 * 1024;

struct Args {
    base_url: String,
    expect: Option<Store>,
    routes: PathBuf,
    config: PathBuf,
}

fn main() -> ExitCode {
    let args = match cli::args_or_exit("release-smoke", USAGE, parse_args(std::env::args().skip(1))) {
        Ok(args) => args,
        Err(exit) => return exit,
    };
    let inputs = read_routes(&args.routes).and_then(|routes| Ok((routes, read_config(&args.config)?)));
    let (routes, exposed) = match inputs {
        Ok(inputs) => inputs,
        Err(message) => {
            eprintln!("release-smoke: {message}");
            return ExitCode::from(2);
        }
    };
    let config = args.config.display().to_string();
    if run(&args, &routes, smoke::judge_config(&config, &exposed)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn parse_args(mut raw: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut base_url = None;
    let mut expect = None;
    let mut routes = PathBuf::from("release-smoke.json");
    let mut config = PathBuf::from("wrangler.toml");
    while let Some(arg) = raw.next() {
        let (flag, inline) = cli::split_flag(&arg);
        let mut value =
            |name: &str| inline.clone().or_else(|| raw.next()).ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--expect" => {
                let text = value("--expect")?;
                let store = Store::parse(&text).ok_or_else(|| format!("--expect is bound or unbound, not {text:?}"))?;
                expect = Some(store);
            }
            "--routes" => routes = PathBuf::from(value("--routes")?),
            "--config" => config = PathBuf::from(value("--config")?),
            _ if arg.starts_with('-') => return Err(format!("unknown argument {arg:?}")),
            _ if base_url.is_some() => return Err(format!("one base URL only, not also {arg:?}")),
            _ => base_url = Some(arg),
        }
    }
    let base_url = base_url.ok_or("a base URL is needed")?;
    let is_http = base_url.starts_with("http://") || base_url.starts_with("https://");
    if !is_http {
        return Err(format!("the base URL starts with http:// or https://, not {base_url:?}"));
    }
    if base_url.starts_with("https://") && !cfg!(feature = "tls") {
        return Err("an https URL needs the tls feature: scripts/release-smoke turns it on for \
                    https URLs (cargo run -p handoff-tools --features tls --bin release-smoke)"
            .to_string());
    }
    let base_url = base_url.trim_end_matches('/').to_string();
    Ok(Some(Args { base_url, expect, routes, config }))
}

fn read_routes(path: &Path) -> Result<smoke::Routes, String> {
    smoke::parse_routes(&cli::read_bounded(path, ROUTES_BYTES_MAX)?)
}

/// What the deployable parts of `path` (the top level and each environment) expose.
fn read_config(path: &Path) -> Result<Vec<hooks::Exposure>, String> {
    let envs = hooks::read_env_vars(&cli::read_bounded(path, CONFIG_BYTES_MAX)?)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(hooks::exposed(&envs))
}

/// True when every check passed.
fn run(args: &Args, routes: &smoke::Routes, config: Vec<Verdict>) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        // The smoke judges statuses itself, and must see a redirect as what it is.
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
        .build()
        .into();

    println!("release-smoke: {} ({} routes)", args.base_url, routes.routes.len());
    let mut tally = Tally::default();
    for verdict in config {
        tally.record(verdict);
    }
    let health = smoke::health(&send(&agent, &args.base_url, "GET", HEALTH_PATH, &BTreeMap::new(), None));
    let (store, store_verdict) =
        smoke::judge_store(args.expect, &health.as_ref().map(|h| h.store).map_err(Clone::clone));
    tally.record(store_verdict);
    tally.record(smoke::judge_auth(&health));
    let Some(store) = store else {
        return tally.finish();
    };

    for route in &routes.routes {
        let headers = route.request_headers(now_s());
        let answer = send(&agent, &args.base_url, &route.method, &route.path, &headers, route.body.as_ref());
        tally.record(smoke::judge(route, store, &answer));
    }
    tally.finish()
}

/// Prints each verdict as it comes and counts them.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    fn record(&mut self, verdict: Verdict) {
        println!("{}", verdict.line);
        if verdict.pass {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Prints the count; true when nothing failed.
    fn finish(self) -> bool {
        println!("release-smoke: {} passed, {} failed", self.passed, self.failed);
        self.failed == 0
    }
}

/// Seconds since the epoch, for the tokens the smoke signs; a clock before 1970 is 0.
fn now_s() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

fn send(
    agent: &ureq::Agent,
    base_url: &str,
    method: &str,
    path: &str,
    headers: &BTreeMap<String, String>,
    body: Option<&serde_json::Value>,
) -> Answer {
    let mut request = ureq::http::Request::builder().method(method).uri(format!("{base_url}{path}"));
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let result = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(body.to_string())
            .map_err(|e| e.to_string())
            .and_then(|r| agent.run(r).map_err(|e| e.to_string())),
        None => request.body(()).map_err(|e| e.to_string()).and_then(|r| agent.run(r).map_err(|e| e.to_string())),
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => return Answer::Transport(error),
    };
    let status = response.status().as_u16();
    let body = match response.body_mut().with_config().limit(ANSWER_BYTES_MAX).read_to_string() {
        Ok(body) => body,
        Err(error) => format!("(unreadable body: {error})"),
    };
    Answer::Http { status, body }
}
