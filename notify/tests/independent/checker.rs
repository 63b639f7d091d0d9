//! The independent checker (`check.py`, Python's own cryptography libraries), run from Rust:
//! its venv made under target/ (remade when the requirements change) and one run on JSON cases.
//! Shared by `handoff-notify`'s tests and the Worker's notification tests.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../notify/tests/independent")
}

fn python() -> PathBuf {
    let requirements = here().join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).unwrap();
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/notify-independent-venv");
    let marker = venv.join("requirements.txt");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        let made = Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv).status();
        assert!(made.is_ok_and(|s| s.success()), "python3 -m venv failed: this test needs Python 3");
        let installed = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements)
            .status();
        assert!(installed.is_ok_and(|s| s.success()), "pip could not install {}", requirements.display());
        std::fs::write(&marker, wanted).unwrap();
    }
    venv.join("bin/python")
}

/// `check.py`'s answer to `cases`.
pub fn run_checker(cases: &Value) -> Value {
    let mut child = Command::new(python())
        .arg(here().join("check.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(cases.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "check.py failed");
    serde_json::from_slice(&out.stdout).unwrap()
}
