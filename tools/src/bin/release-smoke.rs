//! release-smoke: runs every route in release-smoke.json against a deployed (or local)
//! Worker and prints one line per route.
//!
//! Exit codes: 0 every check passed; 1 a check failed (a route, or the store that
//! /v1/health reports against --expect); 2 bad arguments or an unreadable routes file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use handoff_tools::cli;
use handoff_tools::smoke::{self, Answer, Route, Store, HEALTH_PATH};

const USAGE: &str = "\
usage: release-smoke <base-url> [--expect bound|unbound] [--routes PATH]

Runs every route in release-smoke.json against <base-url> (e.g. http://127.0.0.1:8787 or a
deployed https URL) and prints one line per route: pass or FAIL, name, request, expected, got.

  --expect bound|unbound   what the deployment must be; default: what GET /v1/health says
                           (when given, /v1/health must agree)
  --routes PATH            routes file (default: ./release-smoke.json)

exit: 0 all passed, 1 a check failed, 2 usage or unreadable routes file";

/// One request may take this long, connection included; a deployed Worker answers these
/// routes at once, and the wait route is refused before it holds.
const REQUEST_TIMEOUT_S: u64 = 15;
/// Largest answer body read; error bodies are a few hundred bytes.
const ANSWER_BYTES_MAX: u64 = 64 * 1024;
/// The routes file is small and hand-written.
const ROUTES_BYTES_MAX: u64 = 256 * 1024;

struct Args {
    base_url: String,
    expect: Option<Store>,
    routes: PathBuf,
}

fn main() -> ExitCode {
    let args = match cli::args_or_exit("release-smoke", USAGE, parse_args(std::env::args().skip(1))) {
        Ok(args) => args,
        Err(exit) => return exit,
    };
    let routes = match read_routes(&args.routes) {
        Ok(routes) => routes,
        Err(message) => {
            eprintln!("release-smoke: {message}");
            return ExitCode::from(2);
        }
    };
    if run(&args, &routes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn parse_args(mut raw: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut base_url = None;
    let mut expect = None;
    let mut routes = PathBuf::from("release-smoke.json");
    while let Some(arg) = raw.next() {
        let (flag, inline) = cli::split_flag(&arg);
        let mut value = |name: &str| inline.clone().or_else(|| raw.next()).ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--expect" => {
                let text = value("--expect")?;
                let store = Store::parse(&text).ok_or_else(|| format!("--expect is bound or unbound, not {text:?}"))?;
                expect = Some(store);
            }
            "--routes" => routes = PathBuf::from(value("--routes")?),
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
    Ok(Some(Args { base_url, expect, routes }))
}

fn read_routes(path: &Path) -> Result<smoke::Routes, String> {
    smoke::parse_routes(&cli::read_bounded(path, ROUTES_BYTES_MAX)?)
}

/// True when every check passed.
fn run(args: &Args, routes: &smoke::Routes) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        // The smoke judges statuses itself, and must see a redirect as what it is.
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(REQUEST_TIMEOUT_S)))
        .build()
        .into();

    println!("release-smoke: {} ({} routes)", args.base_url, routes.routes.len());
    let health = smoke::health_store(&send(&agent, &args.base_url, "GET", HEALTH_PATH, None, None));
    let (store, store_verdict) = smoke::judge_store(args.expect, &health);
    println!("{}", store_verdict.line);
    let Some(store) = store else {
        println!("release-smoke: 0 passed, 1 failed");
        return false;
    };

    let mut passed = usize::from(store_verdict.pass);
    let mut failed = usize::from(!store_verdict.pass);
    for route in &routes.routes {
        let answer = send(&agent, &args.base_url, &route.method, &route.path, Some(route), route.body.as_ref());
        let verdict = smoke::judge(route, store, &answer);
        println!("{}", verdict.line);
        if verdict.pass {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("release-smoke: {passed} passed, {failed} failed");
    failed == 0
}

fn send(
    agent: &ureq::Agent,
    base_url: &str,
    method: &str,
    path: &str,
    route: Option<&Route>,
    body: Option<&serde_json::Value>,
) -> Answer {
    let mut request = ureq::http::Request::builder().method(method).uri(format!("{base_url}{path}"));
    for (name, value) in route.map(|r| &r.headers).into_iter().flatten() {
        request = request.header(name, value);
    }
    let result = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(body.to_string())
            .map_err(|e| e.to_string())
            .and_then(|r| agent.run(r).map_err(|e| e.to_string())),
        None => request
            .body(())
            .map_err(|e| e.to_string())
            .and_then(|r| agent.run(r).map_err(|e| e.to_string())),
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
