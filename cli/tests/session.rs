//! A whole session driven only through the `handoff` binary, the owner and the machine as
//! separate processes, with a third process following every version.

mod common;
use common::*;

#[test]
fn a_whole_session_through_the_binary_with_the_next_turn_handed_to_another_runtime() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let owner = Some(owner_token.as_str());
    let machine = Some(machine.as_str());

    // Someone watches from the start: the current version first, then each change.
    let mut watch = Follower::start(&owner_token, &["wait", &id, "--follow"]);
    assert_eq!(watch.expect("v1 "), "v1 turn 1 running");
    // It follows over the watch (one socket), not by asking /wait again and again.
    let storage = format!("/v1/test/handoffs/{id}/storage");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while api_get(&owner_token, &storage).1["watchers"]["owner"] != 1 {
        assert!(std::time::Instant::now() < deadline, "no watch: {}", api_get(&owner_token, &storage).1);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // The machine reports turn 1: it needs the owner, then it is done.
    let line = ok(machine, &["report", &id, "--turn", "1", "--status", "needs-you", "--summary", "Which database?"]);
    assert_eq!(line.trim(), "reported: v2 turn 1 needs-you: Which database?");
    assert_eq!(watch.expect("v2 "), "v2 turn 1 needs-you: Which database?");
    ok(machine, &["report", &id, "--turn", "1", "--status", "done", "--summary", "Schema drafted on Postgres"]);
    assert_eq!(watch.expect("v3 "), "v3 turn 1 done: Schema drafted on Postgres");

    // The record the next runtime will read: the work, a decision, the files touched.
    let work = ok(
        owner,
        &[
            "work",
            &id,
            "--title",
            "Billing schema",
            "--goal",
            "Invoices survive a restart",
            "--constraint",
            "Postgres only",
            "--criterion",
            "Migrations apply cleanly",
        ],
    );
    assert!(work.starts_with("work"), "{work}");
    watch.expect("v4 ");
    let decided = ok(
        machine,
        &["decide", &id, "Use Postgres", "--rationale", "the team knows it", "--evidence", "https://example.com/adr/1"],
    );
    assert!(decided.starts_with("decision "), "{decided}");
    watch.expect("v5 ");
    let repo = git_repo_with_changes();
    let r = run_in(Some(&repo), machine, &["workspace", &id, "--git"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("2 files sent; workspace recorded (v6)"), "{r:?}");
    watch.expect("v6 ");

    // The owner previews the package (nothing written), then hands turn 2 to another runtime.
    let preview = ok(
        owner,
        &[
            "package",
            &id,
            "--objective",
            "Write the migrations",
            "--purpose",
            "Ship billing",
            "--runtime",
            "codex",
            "--dry-run",
        ],
    );
    assert!(preview.contains("dry run, nothing written"), "{preview}");
    assert_eq!(version(&owner_token, &id), 6, "a dry run moves no version");
    let opened =
        ok(owner, &["turn", &id, "--to", "codex", "--objective", "Write the migrations", "--purpose", "Ship billing"]);
    assert!(opened.starts_with("opened turn 2 on codex (v7), package v1 ("), "{opened}");
    assert_eq!(watch.expect("v7 "), "v7 turn 2 running on codex");

    // The destination reads and accepts that exact package.
    let shown = ok(machine, &["package", "show", &id]);
    assert!(shown.starts_with("package v1 offered "), "{shown}");
    let accepted = run(machine, &["package", "accept", &id]);
    assert_eq!(accepted.code, 0, "{accepted:?}");
    assert!(accepted.stdout.lines().last().unwrap().starts_with("package accepted (v1, "), "{accepted:?}");
    watch.expect("v8 ");
    let briefing = ok(machine, &["briefing", &id, "--budget", "2048"]);
    assert!(briefing.contains("Write the migrations") && briefing.len() <= 2048 + 1, "{briefing}");

    // The lineage: turn 1 on no named runtime, turn 2 on codex briefed by package v1.
    let lineage = ok(owner, &["turns", &id]);
    let lines: Vec<&str> = lineage.lines().collect();
    assert_eq!(lines.len(), 2, "{lineage}");
    assert!(lines[0].starts_with("turn 1 done, "), "{lineage}");
    assert!(lines[1].starts_with("turn 2 running on codex, package v1 ("), "{lineage}");
    assert!(lines[1].contains("from turn 1"), "{lineage}");

    // Turn 2 ends, the owner closes, and the follower stops by itself.
    ok(machine, &["report", &id, "--turn", "2", "--status", "done", "--summary", "Migrations written"]);
    assert_eq!(watch.expect("v9 "), "v9 turn 2 done on codex: Migrations written");
    let closed = ok(owner, &["close", &id]);
    assert_eq!(closed.trim(), format!("closed {id} at turn 2 done (v10)"));
    assert_eq!(watch.expect("v10 "), "v10 turn 2 done on codex, closed: Migrations written");
    let (code, seen) = watch.finish();
    assert_eq!(code, 0, "{seen:#?}");

    // It saw every version, once, in order; in a pipe it writes plain lines only.
    let versions: Vec<u64> = seen.iter().map(|l| l.split(' ').next().unwrap()[1..].parse().unwrap()).collect();
    assert_eq!(versions, (1..=10).collect::<Vec<u64>>(), "{seen:#?}");
    assert!(seen.iter().all(|l| !l.contains('\r') && !l.contains("waiting")), "{seen:#?}");
}

#[test]
fn a_second_create_for_the_session_answers_the_same_hand_off_and_another_machine_is_refused() {
    let owner = owner();
    let session = unique("session");
    let first = ok(Some(&owner), &["create", &session, "--machine", "m1", "--size", "large"]);
    let again = ok(Some(&owner), &["create", &session, "--machine", "m1", "--size", "large"]);
    assert_eq!(first.lines().next(), again.lines().next());
    let other = run(Some(&owner), &["create", &session, "--machine", "m2", "--size", "large"]);
    assert_eq!(other.code, 1, "{other:?}");
    assert_eq!(
        other.stderr.trim(),
        "handoff.conflict: this session's hand-off runs on machine m1, size large (version 1)"
    );
}

#[test]
fn the_machine_cannot_open_a_turn_and_credentials_problems_exit_3() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let r = run(Some(&machine), &["turn", &id, "--after", "1"]);
    assert_eq!((r.code, r.stderr.split(':').next()), (3, Some("auth.forbidden")), "{r:?}");
    let r = run(None, &["show", &id]);
    assert_eq!(r.code, 3, "{r:?}");
    let r = run(Some("not-a-token"), &["show", &id]);
    assert_eq!((r.code, r.stderr.split(':').next()), (3, Some("auth.invalid")), "{r:?}");
    let unreachable = run(Some(&owner), &["--url", "http://127.0.0.1:9", "show", &id]);
    assert_eq!(unreachable.code, 3, "{unreachable:?}");
    assert!(unreachable.stderr.starts_with("network: "), "{unreachable:?}");
    let mut no_key = command(None, &["token", "--owner", "alice"]);
    let out = no_key.env_remove("HANDOFF_SIGNING_KEY").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "token refuses without HANDOFF_SIGNING_KEY");
    assert!(out.stdout.is_empty());
}

#[test]
fn list_shows_every_page_and_a_refused_turn_says_what_is_current() {
    let owner = owner();
    let ids: Vec<String> = (0..3).map(|_| create(&owner).0).collect();
    let listed = ok(Some(&owner), &["list", "--state", "open"]);
    for id in &ids {
        assert_eq!(listed.lines().filter(|l| l.starts_with(id.as_str())).count(), 1, "{listed}");
    }
    let r = run(Some(&owner), &["turn", &ids[0]]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.stderr.trim(), "handoff.turn_running: turn 1 is still running (version 1)");
    ok(Some(&owner), &["cancel", &ids[0], "--turn", "1"]);
    assert_eq!(ok(Some(&owner), &["turn", &ids[0]]).trim(), "opened turn 2 (v3)");
    let usage = run(Some(&owner), &["workspace", &ids[0]]);
    assert_eq!(usage.code, 2, "workspace without --git is a usage error: {usage:?}");
}

#[test]
fn on_a_terminal_wait_follow_shows_the_time_it_has_waited() {
    let owner = owner();
    let (id, _) = create(&owner);
    // `script` gives the follower a pseudo-terminal for its stdout.
    let follow = format!("{} wait {id} --follow", env!("CARGO_BIN_EXE_handoff"));
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qefc", &follow, "/dev/null"])
        .env("HANDOFF_URL", url())
        .env("HANDOFF_TOKEN", &owner)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let child = cmd.spawn().expect("`script` (util-linux) runs the follower on a pseudo-terminal");
    std::thread::sleep(std::time::Duration::from_millis(2300));
    ok(Some(&owner), &["close", &id]);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text:?}");
    assert!(text.starts_with("v1 turn 1 running"), "{text:?}");
    assert!(text.contains("\r\x1b[2Kwaiting for a change after v1… 1s"), "{text:?}");
    assert!(text.contains("\r\x1b[2Kv2 turn 1 cancelled, closed"), "{text:?}");
}

#[test]
fn a_package_is_rejected_recompiled_and_only_its_current_hash_is_accepted() {
    let owner = owner();
    let (id, machine) = create(&owner);
    let (owner, machine) = (Some(owner.as_str()), Some(machine.as_str()));
    ok(owner, &["work", &id, "--title", "Billing", "--goal", "Invoices"]);
    let compile = ["package", &id, "--objective", "Migrate", "--purpose", "Ship", "--runtime", "codex"];
    assert!(ok(owner, &compile).starts_with("package recompiled (v1, "));
    assert!(ok(owner, &compile).starts_with("package unchanged (v1, "), "compiling an unmoved record changes nothing");
    let first = run(owner, &["package", "show", &id, "--json"]).json()["package_hash"].as_str().unwrap().to_string();
    let rejected = ok(machine, &["package", "reject", &id, "--reason", "missing_context", "--note", "no schema"]);
    assert!(rejected.starts_with("package rejected (missing_context): v1, "), "{rejected}");
    assert!(ok(owner, &compile).starts_with("package recompiled (v2, "));
    let current = run(owner, &["package", "show", &id, "--json"]).json()["package_hash"].as_str().unwrap().to_string();

    let stale = run(machine, &["package", "accept", &id, "--hash", &first]);
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(stale.stderr.starts_with("package.stale: ") && stale.stderr.contains(&current), "{stale:?}");
    let accepted = ok(machine, &["package", "accept", &id]);
    assert!(accepted.ends_with(&format!("package accepted (v2, {}…)\n", &current[..8])), "{accepted}");
    let again = run(machine, &["package", "accept", &id]);
    assert_eq!((again.code, again.stderr.split(':').next()), (1, Some("package.accepted")), "{again:?}");
    let markdown = ok(owner, &["package", "show", &id, "--markdown"]);
    assert!(markdown.contains(&current), "the Markdown carries the whole hash");
}

#[test]
fn erase_removes_the_hand_off_and_its_machine_token_is_refused_after() {
    let owner_token = owner();
    let (id, machine) = create(&owner_token);
    let owner = Some(owner_token.as_str());
    assert_eq!(ok(owner, &["erase", &id]).trim(), format!("erased {id}"));
    let r = run(Some(machine.as_str()), &["show", &id]);
    assert_eq!(r.code, 1, "the machine token is refused: {r:?}");
    assert!(r.stderr.contains("handoff.not_found"), "{r:?}");
    let again = format!("nothing to erase: {id} is not there (erased already, or not yours)");
    assert_eq!(ok(owner, &["erase", &id]).trim(), again, "erasing again succeeds with nothing left");
    let r = run(Some(machine.as_str()), &["erase", &id]);
    assert!(r.code != 0 && r.stderr.contains("auth.forbidden"), "the owner's alone: {r:?}");
}
