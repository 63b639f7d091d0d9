//! `handoff ask` on the machine and `handoff answer` for the owner, each its own process,
//! against the real local Worker.

mod common;
use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Waits until the record shows an open question; answers its id.
fn open_question(owner: &str, id: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let q = record(owner, id)["question"].clone();
        if q["id"].is_string() && q["answer"].is_null() {
            return q["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no question was asked: {q}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ask_prints_the_option_the_owner_chose_and_exits_0() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let asking = command(Some(&machine), &["ask", &id, "--turn", "1", "--text", "Which database?", "--option", "pg=Postgres", "--option", "sqlite=SQLite", "--wait", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let q = open_question(&owner_token, &id);
    let row = record(&owner_token, &id);
    assert_eq!((row["status"].as_str(), row["question"]["kind"].as_str()), (Some("needs-you"), Some("choice")));
    let answered = ok(Some(&owner_token), &["answer", &id, "sqlite", "--note", "keep it small"]);
    assert!(answered.starts_with(&format!("answered {q}: sqlite, turn 1 running (v")), "{answered}");
    let out = asking.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "sqlite\n", "stdout is the chosen option alone");
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: keep it small"), "{out:?}");
}

#[test]
fn ask_exits_4_with_nothing_on_stdout_when_no_answer_comes_in_time() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let started = Instant::now();
    let r = run(Some(&machine), &["ask", &id, "--turn", "1", "--text", "Go on?", "--option", "yes=Yes", "--wait", "2"]);
    assert_eq!((r.code, r.stdout.as_str()), (4, ""), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "it waited {:?}", started.elapsed());
    assert!(r.stderr.contains("no answer within 2 s"), "{r:?}");
}

#[test]
fn ask_and_answer_speak_json_with_json() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let asking = command(Some(&machine), &["--json", "ask", &id, "--turn", "1", "--kind", "permission", "--text", "Bash: ls", "--option", "allow=Allow", "--option", "deny=Deny", "--wait", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let q = open_question(&owner_token, &id);
    let r = run(Some(&owner_token), &["--json", "answer", &id, "allow", "--question", &q]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["handoff"]["question"]["answer"]["option"], "allow");
    let out = asking.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((printed["handoff"]["question"]["id"].as_str(), printed["handoff"]["question"]["kind"].as_str()), (Some(q.as_str()), Some("permission")));
    // Answered already with allow: another option is refused, exit 1, naming the code.
    let again = run(Some(&owner_token), &["answer", &id, "deny"]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stderr.contains("question.answered"), "{again:?}");
}

#[test]
fn answer_with_no_question_open_is_refused_with_question_none() {
    let owner_token = owner();
    let (id, _) = create(&owner_token);
    let r = run(Some(&owner_token), &["answer", &id, "allow"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("question.none"), "{r:?}");
}
