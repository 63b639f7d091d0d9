//! What the command line prints from the service never drives the terminal, and the token
//! goes in the clear only to this machine: against the real local Worker.

mod common;
use common::*;

/// Bidi overrides and isolates are not controls, so the service keeps them in a summary; they
/// reorder what a person reads ("txt.exe" shown as "exe.txt").
const HOSTILE: &str = "all green \u{202e}exe.txt\u{202c} \u{2066}done\u{2069}";

fn assert_escaped(what: &str, out: &str) {
    for c in ['\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{1b}'] {
        assert!(!out.contains(c), "{what} printed U+{:04X} raw: {out:?}", c as u32);
    }
}

#[test]
fn show_list_wait_and_turns_print_a_summarys_bidi_overrides_escaped() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", HOSTILE]);
    assert_eq!(record(&owner_token, &id)["summary"], HOSTILE, "the service kept it as sent");
    let shown = ok(Some(&owner_token), &["show", &id]);
    assert_escaped("show", &shown);
    assert!(shown.contains("all green \\u{202e}exe.txt\\u{202c} \\u{2066}done\\u{2069}"), "{shown}");
    let listed = ok(Some(&owner_token), &["list"]);
    assert_escaped("list", &listed);
    assert!(listed.contains("\\u{202e}exe.txt"), "{listed}");
    let waited = ok(Some(&owner_token), &["wait", &id, "--after", "1", "--timeout", "1"]);
    assert_escaped("wait", &waited);
    assert_escaped("turns", &ok(Some(&owner_token), &["turns", &id]));
    let json = ok(Some(&owner_token), &["--json", "show", &id]);
    assert_escaped("show --json", &json);
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let summary = if parsed["handoff"].is_object() { &parsed["handoff"]["summary"] } else { &parsed["summary"] };
    assert_eq!(summary, HOSTILE, "--json is the same document, its escapes JSON's own");
}

#[test]
fn plain_http_to_a_host_off_this_machine_is_refused_unless_insecure_http_is_given() {
    let owner_token = owner();
    // Not loopback by address, yet nothing listens: a try fails at once.
    let far = "http://0.0.0.0:9";
    let r = run(Some(&owner_token), &["show", "ho_0123456789abcdef0123456789abcdef", "--url", far]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("refusing to send the token over plain http to 0.0.0.0")
            && r.stderr.contains("--insecure-http"),
        "{r:?}"
    );
    let mut cmd = command(Some(&owner_token), &["show", "ho_0123456789abcdef0123456789abcdef", "--url", far]);
    let out = cmd.env("HANDOFF_INSECURE_HTTP", "1").env("HANDOFF_URL", far).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "the flag's variable lets it try (and the network fails): {out:?}");
    let loopback = run(Some(&owner_token), &["list", "--url", &url()]);
    assert_eq!(loopback.code, 0, "loopback needs no flag: {loopback:?}");
}
