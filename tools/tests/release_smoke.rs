//! release-smoke end to end against a stand-in Worker on 127.0.0.1 that answers as the
//! contract says: health everywhere (naming the store and `"auth": "ok"`), the store check
//! before auth on every /v1/handoffs route, route.not_found for unknown routes, the closed
//! test and bench hooks, and 405 for a wrong method. The real Worker is smoked by
//! scripts/test; this pins the CLI's lines and exit codes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::thread;

#[derive(Clone, Copy, PartialEq)]
enum Fake {
    Bound,
    Unbound,
    /// Bound, but the report route throws: what the smoke exists to catch.
    BrokenReport,
    /// Bound, and deployed with the public development key by a Worker that does not
    /// refuse it: a token anyone can sign lists the owner's hand-offs.
    DevKeyTrusted,
    /// Bound, deployed with the development key, and refusing it as the contract says:
    /// health says so and every authenticated route answers 503 auth.misconfigured.
    Misconfigured,
    /// Bound, with the test and bench hooks switched on.
    HooksOpen,
}

/// Serves `fake` on a free loopback port until the test process ends; returns the base URL.
fn serve(fake: Fake) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().unwrap());
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            answer(stream, fake);
        }
    });
    base
}

fn answer(stream: TcpStream, fake: Fake) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut authorized = false;
    let mut dev_key_token = false;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        authorized |= lower.starts_with("authorization:");
        if let Some(value) = lower.strip_prefix("authorization:") {
            // Tokens are case-sensitive: cut the original line where the lowercase one matched.
            let original = &line[line.len() - value.len()..];
            if let Some(token) = original.trim().strip_prefix("Bearer ") {
                let key = handoff_api::token::DEV_SIGNING_KEY.as_bytes();
                dev_key_token |= handoff_api::token::verify(token, key, now_s()).is_ok();
            }
        }
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);

    let path = target.split('?').next().unwrap_or("");
    let store = if fake == Fake::Unbound { "unbound" } else { "bound" };
    let error = |code: &str| format!(r#"{{"error": {{"code": "{code}", "message": "stand-in"}}}}"#);
    let auth = if fake == Fake::Misconfigured { "misconfigured" } else { "ok" };
    let hook = path.starts_with("/v1/test/") || path.starts_with("/v1/bench/");
    let (status, body) = if path == "/v1/health" {
        match method.as_str() {
            "GET" => (200, format!(r#"{{"ok": true, "store": "{store}", "auth": "{auth}"}}"#)),
            _ => (405, error("method.not_allowed")),
        }
    } else if hook && fake == Fake::HooksOpen {
        if path == "/v1/bench/floor" {
            (200, r#"{"floor": true}"#.to_string())
        } else {
            (401, error("auth.required"))
        }
    } else if path == "/v1/handoffs" || path.starts_with("/v1/handoffs/") {
        if fake == Fake::Unbound {
            (404, error("store.unbound"))
        } else if fake == Fake::BrokenReport && path.ends_with("/report") {
            (500, "worker threw".to_string())
        } else if fake == Fake::Misconfigured && authorized {
            (503, error("auth.misconfigured"))
        } else if fake == Fake::DevKeyTrusted && dev_key_token {
            (200, r#"{"cursor": null, "handoffs": []}"#.to_string())
        } else if authorized {
            (401, error("auth.invalid"))
        } else {
            (401, error("auth.required"))
        }
    } else {
        (404, error("route.not_found"))
    };
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // Whatever the client still sends (a chunked empty body's last chunk) is read before the
    // socket closes: closing with unread bytes would reset the connection under the answer.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(500)));
    let _ = std::io::copy(&mut stream, &mut std::io::sink());
}

fn now_s() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    since.as_secs() as i64
}

fn smoke(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_release-smoke"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("release-smoke runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn route_count() -> usize {
    let text = include_str!("../../release-smoke.json");
    handoff_tools::smoke::parse_routes(text).unwrap().routes.len()
}

#[test]
fn the_smoke_passes_where_the_store_is_bound() {
    let base = serve(Fake::Bound);
    let output = smoke(&[&base, "--expect", "bound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    // A header, the config, store and auth lines, one line per route, the count.
    let checks = route_count() + 3;
    assert_eq!(out.lines().filter(|l| l.starts_with("pass  ")).count(), checks, "{out}");
    assert!(out.lines().any(|l| l.starts_with("pass  config") && l.ends_with("got none")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("pass  auth") && l.ends_with("got auth ok")), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("pass  list-unsigned")
            && l.ends_with("expected 401 auth.required  got 401 auth.required")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("pass  list-development-key") && l.ends_with("got 401 auth.invalid")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("pass  bench-floor-closed") && l.ends_with("got 404 route.not_found")),
        "{out}"
    );
    assert!(out.ends_with(&format!("release-smoke: {checks} passed, 0 failed\n")), "{out}");
}

#[test]
fn the_smoke_passes_where_the_store_is_unbound() {
    let base = serve(Fake::Unbound);
    let output = smoke(&[&base, "--expect=unbound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("pass  report-unsigned") && l.ends_with("got 404 store.unbound")),
        "{out}"
    );
}

#[test]
fn expect_defaults_to_what_health_says() {
    for (fake, store) in [(Fake::Bound, "bound"), (Fake::Unbound, "unbound")] {
        let base = serve(fake);
        let output = smoke(&[&format!("{base}/")]);
        let out = stdout(&output);
        assert_eq!(output.status.code(), Some(0), "{out}");
        assert!(out.contains(&format!("got store {store} (used as --expect)")), "{out}");
    }
}

#[test]
fn a_production_that_became_bound_fails_the_smoke() {
    let base = serve(Fake::Bound);
    let output = smoke(&[&base, "--expect", "unbound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAIL  store") && l.contains("expected store unbound (--expect)  got store bound")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("FAIL  list-unsigned")), "{out}");
}

#[test]
fn a_500_on_an_unsigned_report_fails_the_smoke_and_names_the_route() {
    let base = serve(Fake::BrokenReport);
    let output = smoke(&[&base, "--expect", "bound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failed.len(), 1, "{out}");
    assert!(failed[0].starts_with("FAIL  report-unsigned"), "{out}");
    assert!(failed[0].ends_with("expected 401 auth.required  got 500 (worker threw)"), "{out}");
}

/// The FAIL lines of a run that must exit 1.
fn failures(fake: Fake, args: &[&str]) -> Vec<String> {
    let base = serve(fake);
    let output = smoke(&[&[base.as_str()][..], args].concat());
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    out.lines().filter(|l| l.starts_with("FAIL")).map(str::to_string).collect()
}

#[test]
fn a_deployment_that_trusts_the_development_key_fails_the_smoke() {
    let failed = failures(Fake::DevKeyTrusted, &["--expect", "bound"]);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with("FAIL  list-development-key"), "{failed:?}");
    assert!(failed[0].contains("expected 401 auth.invalid or 503 auth.misconfigured  got 200"), "{failed:?}");
}

#[test]
fn a_deployment_that_refuses_its_development_key_fails_the_auth_line() {
    let base = serve(Fake::Misconfigured);
    let output = smoke(&[&base, "--expect", "bound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.lines().any(|l| l.starts_with("FAIL  auth") && l.ends_with("got auth misconfigured")), "{out}");
    // The development key is refused as it should be; the routes that carry a token show
    // what the misconfigured key breaks.
    assert!(
        out.lines().any(|l| l.starts_with("pass  list-development-key") && l.ends_with("got 503 auth.misconfigured")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("FAIL  list-expired-token")), "{out}");
}

#[test]
fn open_test_and_bench_hooks_fail_the_smoke_route_by_route() {
    let failed = failures(Fake::HooksOpen, &["--expect", "bound"]);
    let names: Vec<&str> = failed.iter().map(|l| l.split_whitespace().nth(1).unwrap()).collect();
    assert_eq!(names, ["bench-floor-closed", "test-refuse-index-closed", "test-storage-closed"], "{failed:?}");
    assert!(failed[0].ends_with("expected 404 route.not_found  got 200 ({\"floor\": true})"), "{failed:?}");
}

#[test]
fn a_hook_variable_in_a_deployable_environment_fails_the_smoke_by_name() {
    let checked_in = include_str!("../../wrangler.toml");
    let config = std::env::temp_dir().join(format!("release-smoke-{}-wrangler.toml", std::process::id()));
    let spoiled = checked_in.replacen(
        "[env.production]\nvars = { HANDOFF_ENV = \"production\" }",
        "[env.production]\n\n[env.production.vars]\nHANDOFF_ENV = \"production\"\nHANDOFF_TEST_HOOKS = \"1\"",
        1,
    );
    assert_ne!(spoiled, checked_in);
    std::fs::write(&config, spoiled).unwrap();
    // The Worker itself answers as it should; the configuration alone fails the run.
    let failed = failures(Fake::Unbound, &["--expect", "unbound", "--config", config.to_str().unwrap()]);
    std::fs::remove_file(&config).unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with("FAIL  config"), "{failed:?}");
    assert!(failed[0].contains("env.production sets the hook variable HANDOFF_TEST_HOOKS"), "{failed:?}");
}

#[test]
fn a_top_level_that_calls_itself_local_fails_the_smoke() {
    // What `wrangler deploy` with no --env deploys must not be local, however well the Worker answers.
    let checked_in = include_str!("../../wrangler.toml");
    assert!(!checked_in.contains("\n[vars]"), "the checked-in top level has no [vars]");
    let config = std::env::temp_dir().join(format!("release-smoke-{}-top-level-wrangler.toml", std::process::id()));
    let spoiled = checked_in.replacen(
        "[[durable_objects.bindings]]",
        "[vars]\nHANDOFF_ENV = \"local\"\n\n[[durable_objects.bindings]]",
        1,
    );
    assert_ne!(spoiled, checked_in);
    std::fs::write(&config, spoiled).unwrap();
    let failed = failures(Fake::Bound, &["--expect", "bound", "--config", config.to_str().unwrap()]);
    std::fs::remove_file(&config).unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with("FAIL  config"), "{failed:?}");
    assert!(failed[0].contains("the top level sets HANDOFF_ENV = \"local\""), "{failed:?}");
}

#[test]
fn a_worker_that_is_not_there_fails_the_smoke() {
    // Bind a port and drop it, so that nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let output = smoke(&[&base]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let output = smoke(&[&base, "--expect", "bound"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.lines().filter(|l| l.starts_with("FAIL")).count() > route_count(), "{out}");
}

#[test]
fn bad_arguments_and_bad_routes_files_exit_2() {
    for args in [
        &[][..],
        &["127.0.0.1:8787"],
        &["http://127.0.0.1:1", "--expect", "maybe"],
        &["http://127.0.0.1:1", "http://127.0.0.1:2"],
        &["http://127.0.0.1:1", "--frobnicate"],
        &["http://127.0.0.1:1", "--routes", "/nonexistent/release-smoke.json"],
        &["http://127.0.0.1:1", "--routes", "Cargo.toml"],
        &["http://127.0.0.1:1", "--config", "/nonexistent/wrangler.toml"],
        &["http://127.0.0.1:1", "--config", "release-smoke.json"],
    ] {
        let output = smoke(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

#[cfg(not(feature = "tls"))]
#[test]
fn an_https_url_without_the_tls_feature_says_how_to_get_it() {
    let output = smoke(&["https://handoff.example.invalid"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs the tls feature"));
}
