//! Work record, packages, briefings, lineage and idempotency (issue 4), against the real Worker.

use handoff_it::{owner, unique, Answer, Client};
use serde_json::{json, Value};

struct Session {
    c: Client,
    owner: String,
    machine: String,
    id: String,
}

impl Session {
    fn new() -> Session {
        let c = Client::shared();
        let owner = owner(&unique("alice"));
        let (id, machine, _) = c.create(&owner);
        Session { c, owner, machine, id }
    }
    fn path(&self, rest: &str) -> String {
        format!("/v1/handoffs/{}{rest}", self.id)
    }
    fn owner_post(&self, rest: &str, body: Value) -> Answer {
        self.c.post(&self.path(rest), &self.owner, body)
    }
    fn machine_post(&self, rest: &str, body: Value) -> Answer {
        self.c.post(&self.path(rest), &self.machine, body)
    }
    fn set_work(&self) -> Answer {
        self.c.put(
            &self.path("/work"),
            &self.owner,
            json!({"title": "Payments retry", "goal": "Retries never double-charge", "constraints": ["no schema change"],
                   "acceptance_criteria": ["idempotent retries", "docs updated"]}),
        )
    }
    fn version(&self) -> u64 {
        self.c.get(&self.path(""), &self.owner).version()
    }
    fn compile(&self, runtime: &str) -> Answer {
        self.owner_post(
            "/package",
            json!({"objective": "finish retries", "purpose": "context ran out", "runtime": runtime}),
        )
    }
}

#[test]
fn each_work_route_is_a_change_and_the_same_content_again_is_not() {
    let s = Session::new();
    let w = s.set_work();
    assert_eq!((w.status, w.version()), (200, 2), "{}", w.text);
    assert!(w.body["work"].is_object());
    assert_eq!(s.set_work().version(), 2, "the same work again changes nothing");
    let d = s.machine_post(
        "/decisions",
        json!({"statement": "use a ledger table", "evidence": ["https://example.test/adr/7"]}),
    );
    assert_eq!((d.status, d.version()), (200, 3), "{}", d.text);
    assert_eq!(d.body["decision"]["by"], "machine");
    let a =
        s.machine_post("/artifacts", json!({"type": "pr", "title": "retry PR", "uri": "https://example.test/pr/1"}));
    assert_eq!(a.body["artifact"]["version"], 1);
    let a2 =
        s.machine_post("/artifacts", json!({"type": "pr", "title": "retry PR", "uri": "https://example.test/pr/2"}));
    assert_eq!((a2.body["artifact"]["version"].as_u64(), a2.version()), (Some(2), 5));
    let same =
        s.machine_post("/artifacts", json!({"type": "pr", "title": "retry PR", "uri": "https://example.test/pr/2"}));
    assert_eq!(same.version(), 5, "same type, uri and sha256 as the latest: no change");
    let b = s.owner_post("/blockers", json!({"severity": "high", "title": "staging is down"}));
    let bid = b.body["blocker"]["id"].as_str().unwrap().to_string();
    let resolved = s.owner_post(&format!("/blockers/{bid}/resolve"), json!({}));
    assert_eq!((resolved.status, resolved.version()), (200, 7), "{}", resolved.text);
    let unknown = s.owner_post("/blockers/blk_999/resolve", json!({}));
    assert_eq!((unknown.status, unknown.code()), (404, "blocker.not_found"));
    let files =
        s.machine_post("/workspace", json!({"files": [{"path": "src/pay.rs", "insertions": 10, "deletions": 2}]}));
    assert_eq!((files.status, files.version()), (200, 8), "{}", files.text);
}

#[test]
fn the_workspace_route_refuses_anything_but_paths_and_counts() {
    let s = Session::new();
    for body in [
        json!({"files": [{"path": "a.rs", "insertions": 1, "deletions": 0, "hunk": "@@ -1 +1 @@"}]}),
        json!({"files": [{"path": "a.rs", "insertions": 1, "deletions": 0, "contents": "fn main() {}"}]}),
        json!({"files": [], "diff": "..."}),
    ] {
        let a = s.machine_post("/workspace", body.clone());
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{body}");
    }
    let by_owner = s.owner_post("/workspace", json!({"files": []}));
    assert_eq!(by_owner.status, 403);
    assert_eq!(s.version(), 1);
}

#[test]
fn compiling_twice_answers_the_same_version_and_hash_and_writes_nothing() {
    let s = Session::new();
    s.set_work();
    let first = s.compile("codex");
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!((first.body["package_version"].as_u64(), first.body["changed"].as_bool()), (Some(1), Some(true)));
    let hash = first.body["package_hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64);
    let v = s.version();
    let again = s.compile("codex");
    assert_eq!((again.body["package_version"].as_u64(), again.body["changed"].as_bool()), (Some(1), Some(false)));
    assert_eq!(again.body["package_hash"], hash.as_str());
    assert_eq!(s.version(), v, "no version move, nobody woken");
    let dry = s.c.post(
        &s.path("/package?dry_run=true"),
        &s.owner,
        json!({"objective": "other", "purpose": "p", "runtime": "codex"}),
    );
    assert_eq!((dry.body["package_version"].as_u64(), dry.body["changed"].as_bool()), (Some(2), Some(true)));
    assert_eq!(s.version(), v, "a dry run writes nothing");
    s.machine_post("/decisions", json!({"statement": "amend", "evidence": []}));
    let amended = s.compile("codex");
    assert_eq!(amended.body["package_version"], 2, "an amendment is the next version");
    let latest = s.c.get(&s.path("/package"), &s.owner);
    assert_eq!((latest.body["package_version"].as_u64(), latest.body["state"].as_str()), (Some(2), Some("offered")));
    let md = s.c.get(&s.path("/package?format=markdown"), &s.owner);
    assert!(md.content_type.unwrap_or_default().starts_with("text/markdown"));
    assert!(md.text.contains(latest.body["package_hash"].as_str().unwrap()), "the whole hash is at the end");
}

#[test]
fn no_package_yet_is_404_and_accepting_a_stale_hash_is_409_with_the_current_one() {
    let s = Session::new();
    let none = s.c.get(&s.path("/package"), &s.owner);
    assert_eq!((none.status, none.code()), (404, "package.not_found"));
    s.set_work();
    let v1 = s.compile("codex");
    let old = v1.body["package_hash"].as_str().unwrap().to_string();
    s.machine_post("/decisions", json!({"statement": "amend", "evidence": []}));
    let v2 = s.compile("codex");
    let current = v2.body["package_hash"].as_str().unwrap().to_string();
    let stale = s.machine_post("/package/accept", json!({"package_hash": old}));
    assert_eq!((stale.status, stale.code()), (409, "package.stale"));
    assert!(stale.text.contains(&current), "the refusal carries the current hash");
    let accepted = s.machine_post("/package/accept", json!({"package_hash": current}));
    assert_eq!((accepted.status, accepted.body["state"].as_str()), (200, Some("accepted")), "{}", accepted.text);
    let twice = s.machine_post("/package/accept", json!({"package_hash": current}));
    assert_eq!((twice.status, twice.code()), (409, "package.accepted"));
    let recompile = s.compile("codex");
    assert_eq!(
        (recompile.status, recompile.code()),
        (409, "package.accepted"),
        "the session works from that exact document"
    );
}

#[test]
fn a_rejection_then_two_recompiles_gives_two_versions_and_is_stable_from_there() {
    let s = Session::new();
    s.set_work();
    s.compile("codex");
    let rejected = s.machine_post("/package/reject", json!({"reason": "missing_context", "note": "no logs attached"}));
    assert_eq!((rejected.status, rejected.body["state"].as_str()), (200, Some("rejected")), "{}", rejected.text);
    let v2 = s.compile("codex");
    assert_eq!(v2.body["package_version"], 2);
    let unresolved = v2.body["package"]["state"]["unresolved"].to_string();
    assert!(unresolved.contains("handoff rejected (missing_context)"), "{unresolved}");
    let v3 = s.compile("codex");
    assert_eq!(v3.body["package_version"], 3);
    assert!(!v3.body["package"]["state"]["unresolved"].to_string().contains("handoff rejected"));
    assert_eq!(s.compile("codex").body["package_version"], 3, "stable from there");
}

#[test]
fn a_turn_handed_to_a_runtime_carries_its_package_and_its_lineage() {
    let s = Session::new();
    s.set_work();
    s.c.report(&s.id, &s.machine, 1, "done", Some("turn 1"));
    let opened = s.owner_post(
        "/turns",
        json!({"after": 1, "handoff": {"runtime": "codex", "objective": "finish", "purpose": "context ran out"}}),
    );
    assert_eq!(opened.status, 200, "{}", opened.text);
    let h = opened.handoff();
    assert_eq!(
        (h["turn"].as_u64(), h["runtime"].as_str(), h["package_version"].as_u64()),
        (Some(2), Some("codex"), Some(1))
    );
    assert_eq!(h["continued_from"], json!({"turn": 1, "runtime": null}));
    let hash = h["package_hash"].as_str().unwrap().to_string();
    let accepted = s.machine_post("/package/accept", json!({"package_hash": hash}));
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    s.c.report(&s.id, &s.machine, 2, "done", None);
    s.owner_post("/turns", json!({"after": 2}));
    let lineage = s.c.get(&s.path("/turns"), &s.machine);
    let turns = lineage.body["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!((turns[0]["status"].as_str(), turns[0]["runtime"].as_str()), (Some("done"), None));
    assert_eq!((turns[1]["runtime"].as_str(), turns[1]["package_hash"].as_str()), (Some("codex"), Some(hash.as_str())));
    assert_eq!(turns[2]["continued_from"], json!({"turn": 2, "runtime": "codex"}));
    assert!(turns[1]["ended_at"].is_string() && turns[2]["ended_at"].is_null());
}

#[test]
fn a_final_report_lists_unmet_criteria_as_unresolved() {
    let s = Session::new();
    s.set_work();
    let r = s.machine_post("/report", json!({"turn": 1, "status": "failed", "unmet": [1]}));
    assert_eq!(r.status, 200, "{}", r.text);
    let p = s.compile("codex");
    assert!(p.body["package"]["state"]["unresolved"].to_string().contains("docs updated"));
}

#[test]
fn the_briefing_is_plain_text_within_its_budget() {
    let s = Session::new();
    s.set_work();
    let none = s.c.get(&s.path("/briefing"), &s.owner);
    assert_eq!((none.status, none.code()), (404, "package.not_found"));
    s.compile("codex");
    for budget in [256usize, 1024, 8192, 65536] {
        let b = s.c.get(&s.path(&format!("/briefing?budget={budget}")), &s.machine);
        assert_eq!(b.status, 200);
        assert_eq!(b.content_type.as_deref(), Some("text/plain; charset=utf-8"));
        assert!(b.text.len() <= budget, "{} > {budget}", b.text.len());
    }
    let api = s.c.get(&s.path("/briefing"), &s.machine).text;
    assert!(api.contains("HANDOFF_URL") && api.contains(&s.c.base), "api reach names the API and its variable");
    assert!(!api.contains("HANDOFF_TOKEN") && !api.contains("Bearer"), "and never tells the model to send the token");
    let none = s.c.get(&s.path("/briefing?reach=none"), &s.machine).text;
    assert!(!none.contains("HANDOFF_TOKEN"));
    for bad in ["?budget=255", "?budget=65537", "?reach=web", "?colour=red"] {
        let a = s.c.get(&s.path(&format!("/briefing{bad}")), &s.owner);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{bad}");
    }
}

#[test]
fn an_idempotency_key_answers_the_first_answer_again_and_refuses_another_body() {
    let s = Session::new();
    s.set_work();
    s.compile("codex");
    let hash = s.c.get(&s.path("/package"), &s.owner).body["package_hash"].as_str().unwrap().to_string();
    let body = json!({"package_hash": hash}).to_string();
    let send = |key: &str, body: &str| {
        s.c.send(
            "POST",
            &s.path("/package/accept"),
            Some(&s.machine),
            &[("Idempotency-Key", key)],
            Some(body.as_bytes()),
        )
    };
    let first = send("accept-1", &body);
    assert_eq!(first.status, 200, "{}", first.text);
    let lost_answer_retry = send("accept-1", &body);
    assert_eq!(
        (lost_answer_retry.status, &lost_answer_retry.body),
        (200, &first.body),
        "the first answer, not a useless 409"
    );
    let without_key = s.machine_post("/package/accept", json!({"package_hash": hash}));
    assert_eq!(without_key.code(), "package.accepted");
    let mismatch = send("accept-1", &json!({"package_hash": "0".repeat(64)}).to_string());
    assert_eq!((mismatch.status, mismatch.code()), (422, "idempotency.mismatch"));
    // Turn routes honour it too: the repeat of a report answers its first answer.
    let report = json!({"turn": 1, "status": "needs-you", "summary": "?"}).to_string();
    let send_report = |key: &str| {
        s.c.send("POST", &s.path("/report"), Some(&s.machine), &[("Idempotency-Key", key)], Some(report.as_bytes()))
    };
    let r1 = send_report("r-1");
    let r2 = send_report("r-1");
    assert_eq!((r1.status, r2.body.clone()), (200, r1.body.clone()));
    let bad_key = s.c.send(
        "POST",
        &s.path("/report"),
        Some(&s.machine),
        &[("Idempotency-Key", "has space")],
        Some(report.as_bytes()),
    );
    assert_eq!(bad_key.status, 400);
}

#[test]
fn a_change_that_would_grow_the_work_record_past_its_limit_is_413_and_changes_nothing() {
    // Each decision carries about 13 KiB (a long rationale and six long evidence links), so the
    // 1 MiB work record (limits::WORK_RECORD_BYTES_MAX) fills within about 80 of them. Each
    // such ask is longer than protocol::ASK_HEADER_BYTES_MAX, so it reaches the object as the
    // request's body, not in the ask header: this test is also the body path's.
    let s = Session::new();
    let link = |i: usize, j: usize| format!("https://example.test/{i}/{j}/{}", "e".repeat(1_900));
    let mut refused = None;
    for i in 0..200 {
        let evidence: Vec<String> = (0..6).map(|j| link(i, j)).collect();
        let body = json!({"statement": format!("decision {i}"), "rationale": "r".repeat(2_000), "evidence": evidence});
        let a = s.machine_post("/decisions", body);
        if a.status != 200 {
            refused = Some((i, a));
            break;
        }
    }
    let (i, a) = refused.expect("the work record reached its limit");
    assert_eq!((a.status, a.code()), (413, "request.too_large"), "{}", a.text);
    assert!(a.text.contains("work record"), "{}", a.text);
    assert!(i > 40, "refused only once the record is near 1 MiB (after {i} decisions)");
    assert_eq!(s.version(), 1 + i as u64, "the refused decision changed nothing");
}

/// `POST …/turns?dry_run=true`: the package and briefing the open would give the next runtime,
/// exactly what the open then compiles; nothing is stored, and the refusals are the open's.
#[test]
fn a_dry_run_open_previews_the_package_and_its_briefing_and_stores_nothing() {
    let s = Session::new();
    assert_eq!(s.set_work().status, 200);
    assert_eq!(s.c.report(&s.id, &s.machine, 1, "done", Some("first part")).status, 200);
    let before = s.version();
    let body =
        json!({"after": 1, "handoff": {"runtime": "codex", "objective": "Write the migrations", "purpose": "test"}});
    let preview = s.owner_post("/turns?dry_run=true&budget=2048", body.clone());
    assert_eq!(preview.status, 200, "{}", preview.text);
    assert_eq!((preview.body["turn"].as_u64(), preview.body["state"].as_str()), (Some(2), Some("offered")));
    let briefing = preview.body["briefing"].as_str().unwrap();
    assert!(briefing.len() <= 2048 && briefing.contains("Write the migrations"), "{briefing}");
    assert_eq!(s.version(), before, "a dry run stores nothing");
    assert_eq!(preview.handoff()["version"].as_u64(), Some(before));
    let opened = s.owner_post("/turns", body.clone());
    assert_eq!(opened.status, 200, "{}", opened.text);
    assert_eq!(
        opened.handoff()["package_hash"],
        preview.body["package_hash"],
        "the open compiles what the preview showed"
    );
    // The open's refusals: a machine may not, and a caller that saw an older turn conflicts.
    assert_eq!(s.machine_post("/turns?dry_run=true", body.clone()).status, 403);
    let mut stale_body = body;
    stale_body["after"] = json!(0);
    let stale = s.owner_post("/turns?dry_run=true", stale_body);
    assert_eq!((stale.status, stale.code()), (409, "handoff.turn_conflict"));
    // A preview needs a hand-off, and a budget needs a dry run.
    assert_eq!(s.owner_post("/turns?dry_run=true", json!({"after": 2})).code(), "request.invalid");
    assert_eq!(s.owner_post("/turns?budget=2048", json!({"after": 2})).code(), "request.invalid");
}

/// `GET …/work`: the whole work record, to the owner and to the machine alike.
#[test]
fn the_work_record_reads_whole_for_the_owner_and_the_machine() {
    let s = Session::new();
    assert_eq!(s.set_work().status, 200);
    assert_eq!(
        s.machine_post(
            "/decisions",
            json!({"statement": "Use Postgres", "rationale": "it is there", "evidence": ["https://example.com/a"]})
        )
        .status,
        200
    );
    let blocker = s.owner_post("/blockers", json!({"severity": "high", "title": "no staging db"}));
    assert_eq!(blocker.status, 200, "{}", blocker.text);
    for token in [&s.owner, &s.machine] {
        let read = s.c.get(&s.path("/work"), token);
        assert_eq!(read.status, 200, "{}", read.text);
        let w = &read.body["work"];
        assert_eq!(w["spec"]["goal"], "Retries never double-charge");
        assert_eq!(w["decisions"][0]["statement"], "Use Postgres");
        assert_eq!(w["blockers"][0]["title"], "no staging db");
        assert!(read.handoff()["actions"].as_array().unwrap().contains(&json!("resolve_blocker")));
    }
    assert_eq!(s.c.get(&s.path("/work?x=1"), &s.owner).code(), "request.invalid");
}

/// An independent writing of canonical JSON: keys in `BTreeMap` order, no whitespace.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let sorted: std::collections::BTreeMap<&String, &Value> = map.iter().collect();
            let members: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), canonical(v)))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The Worker hashes with the runtime's SHA-256 and writes the document once: every answer that
/// carries a package ends with it in canonical form, and its hash is an independent SHA-256 of
/// that form without `generated_at`.
#[test]
fn every_package_answer_ends_with_its_canonical_document_whose_hash_is_an_independent_sha256() {
    use sha2::{Digest, Sha256};
    let s = Session::new();
    assert_eq!(s.set_work().status, 200);
    let statement = "quote \" backslash \\ slash / é 漢字 😀 <b>&amp;";
    assert_eq!(s.machine_post("/decisions", json!({"statement": statement, "evidence": []})).status, 200);
    let body = json!({"after": 1, "handoff": {"runtime": "codex", "objective": "Ship", "purpose": "test"}});
    let answers = [
        ("a compile", s.compile("codex")),
        ("a compile that changed nothing", s.compile("codex")),
        ("a read of the package", s.c.get(&s.path("/package"), &s.owner)),
        ("a preview", {
            assert_eq!(s.machine_post("/report", json!({"turn": 1, "status": "done"})).status, 200);
            s.owner_post("/turns?dry_run=true", body)
        }),
    ];
    for (what, answer) in answers {
        assert_eq!(answer.status, 200, "{what}: {}", answer.text);
        let package = &answer.body["package"];
        assert!(package["decisions"].to_string().contains("漢字"), "{what}: {package}");
        assert!(answer.text.ends_with(&format!(",\"package\":{}}}", canonical(package))), "{what}: {}", answer.text);
        let mut hashed = package.clone();
        hashed.as_object_mut().unwrap().remove("generated_at");
        let independent: String =
            Sha256::digest(canonical(&hashed).as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(answer.body["package_hash"], independent.as_str(), "{what}");
    }
}
