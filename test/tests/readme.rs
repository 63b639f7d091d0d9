//! The README's curl session works as written: this runs its block against the real Worker.

use handoff_it::{repo_top, Client};
use std::process::Command;

const MARKER: &str = "<!-- readme-session:";

fn session_block() -> String {
    let readme = std::fs::read_to_string(repo_top().join("README.md")).unwrap();
    let after = &readme[readme.find(MARKER).expect("the README marks its session")..];
    let start = after.find("```sh\n").unwrap() + "```sh\n".len();
    let end = after[start..].find("```").unwrap();
    after[start..start + end].to_string()
}

#[test]
fn the_readme_curl_session_works_as_written() {
    let api = Client::shared().base;
    let dir = std::env::temp_dir().join(handoff_it::unique("readme"));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!("set -euo pipefail\ncd {:?}\n{}", repo_top(), session_block());
    let out = Command::new("bash").arg("-c").arg(&script).env("API", &api).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the session failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().any(|l| l.trim() == "needs-you"), "the wait woke on the report:\n{stdout}");
    assert!(stdout.contains("\"handoff.stale\""), "the late report was refused:\n{stdout}");
    assert!(stdout.contains("\"state\":\"closed\""), "the session closed:\n{stdout}");
    assert!(!repo_top().join("created.json").exists(), "the session cleans up after itself");
}
