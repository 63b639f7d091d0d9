//! The owner's words through the `handoff` binary: `create` and `turn` take a prompt (`-m`,
//! `--prompt`, `--prompt-file PATH` or `-` for standard input); `show` and `turns` print them,
//! and `--json` carries them.

mod common;
use common::*;
use std::io::Write as _;
use std::process::Stdio;

#[test]
fn create_and_turn_take_a_prompt_and_show_and_turns_print_it() {
    let owner_token = owner();
    let owner = Some(owner_token.as_str());
    let out = ok(
        owner,
        &[
            "create",
            &unique("session"),
            "--machine",
            "m1",
            "--size",
            "large",
            "-m",
            "Add a CSV export.\nKeep the old one.",
        ],
    );
    let mut lines = out.lines();
    let id = lines.next().unwrap().to_string();
    let machine_token = lines.next().unwrap().to_string();
    let machine = Some(machine_token.as_str());
    assert_eq!(record(&owner_token, &id)["prompt"], "Add a CSV export.\nKeep the old one.", "--json carries it");
    let shown = ok(machine, &["show", &id]);
    assert!(shown.contains("\n  > Add a CSV export.\n  > Keep the old one.\n"), "the machine reads it too: {shown}");

    // Turn 2's words from a file (one trailing newline dropped), turn 3's from standard input.
    ok(machine, &["report", &id, "--turn", "1", "--status", "done"]);
    let file = std::env::temp_dir().join(format!("{}.txt", unique("prompt")));
    std::fs::write(&file, "Now the tests.\n\tSmall ones.\n").unwrap();
    let opened = ok(owner, &["turn", &id, "--prompt-file", file.to_str().unwrap()]);
    assert!(opened.starts_with("opened turn 2"), "{opened}");
    std::fs::remove_file(&file).ok();
    assert_eq!(record(&owner_token, &id)["prompt"], "Now the tests.\n\tSmall ones.");
    ok(machine, &["report", &id, "--turn", "2", "--status", "done"]);
    let mut child = command(owner, &["turn", &id, "--prompt-file", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all("- and the docs, from stdin\n".as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(record(&owner_token, &id)["prompt"], "- and the docs, from stdin");

    let turns = ok(owner, &["turns", &id]);
    let want = [
        "  > Add a CSV export.",
        "  > Keep the old one.",
        "  > Now the tests.",
        "  > \tSmall ones.",
        "  > - and the docs, from stdin",
    ];
    let printed: Vec<&str> = turns.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(printed, want, "{turns}");
    let json = run(owner, &["turns", &id, "--json"]).json();
    let prompts: Vec<&str> = json["turns"].as_array().unwrap().iter().map(|t| t["prompt"].as_str().unwrap()).collect();
    assert_eq!(
        prompts,
        ["Add a CSV export.\nKeep the old one.", "Now the tests.\n\tSmall ones.", "- and the docs, from stdin"]
    );
}

#[test]
fn a_turn_repeated_with_other_words_is_a_turn_conflict_and_the_words_taken_are_kept() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let owner = Some(owner_token.as_str());
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done"]);
    ok(owner, &["turn", &id, "--after", "1", "--prompt", "from the phone"]);
    let same = ok(owner, &["turn", &id, "--after", "1", "--prompt", "from the phone"]);
    assert!(same.starts_with("opened turn 2 (v3)"), "the same turn again: {same}");
    let other = run(owner, &["turn", &id, "--after", "1", "-m", "from the laptop"]);
    assert_ne!(other.code, 0, "{other:?}");
    assert!(other.stderr.contains("handoff.turn_conflict"), "{other:?}");
    assert_eq!(record(&owner_token, &id)["prompt"], "from the phone");
}

#[test]
fn a_prompt_is_given_once_and_a_bad_one_is_refused_by_the_service() {
    let owner_token = owner();
    let (id, _) = create(&owner_token);
    let both = run(Some(&owner_token), &["turn", &id, "-m", "a", "--prompt-file", "-"]);
    assert_eq!(both.code, 2, "{both:?}");
    let missing = run(Some(&owner_token), &["turn", &id, "--prompt-file", "/nonexistent/prompt.txt"]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("--prompt-file"), "{missing:?}");
    let empty =
        run(Some(&owner_token), &["create", &unique("session"), "--machine", "m1", "--size", "large", "-m", ""]);
    assert_ne!(empty.code, 0);
    assert!(empty.stderr.contains("request.invalid") && empty.stderr.contains("prompt"), "{empty:?}");
}
