//! The owner's list (issue 3): one row per session on its own Durable Object, fed by each
//! hand-off's outbox.

use handoff_it::{owner, temp_state, unique, Client, Server};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn rows(c: &Client, token: &str, query: &str) -> Vec<Value> {
    let a = c.get(&format!("/v1/handoffs{query}"), token);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["handoffs"].as_array().unwrap().clone()
}

fn row_of(c: &Client, token: &str, id: &str) -> Option<Value> {
    rows(c, token, "?limit=200").into_iter().find(|r| r["id"] == id)
}

#[test]
fn the_list_shows_one_row_per_session_with_its_turn_state_and_version() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let (other, _, _) = c.create(&alice);
    assert_eq!(row_of(&c, &alice, &id).unwrap()["version"], 1, "read your writes: the create is listed");
    c.report(&id, &machine, 1, "done", Some("first"));
    c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1}));
    let row = row_of(&c, &alice, &id).unwrap();
    assert_eq!(
        (row["turn"].as_u64(), row["status"].as_str(), row["version"].as_u64()),
        (Some(2), Some("running"), Some(3))
    );
    c.post(&format!("/v1/handoffs/{id}/close"), &alice, json!({}));
    let all = rows(&c, &alice, "");
    assert_eq!(all.len(), 2, "one row per session");
    assert_eq!(all[0]["id"], id, "newest updated_at first");
    assert_eq!(
        (all[0]["state"].as_str(), all[0]["status"].as_str(), all[0]["version"].as_u64()),
        (Some("closed"), Some("cancelled"), Some(4))
    );
    for key in ["id", "session", "machine", "size", "turn", "state", "status", "summary", "version", "updated_at"] {
        assert!(all[0].get(key).is_some(), "a row carries {key}");
    }
    let open: Vec<_> = rows(&c, &alice, "?state=open").iter().map(|r| r["id"].clone()).collect();
    assert_eq!(open, vec![Value::from(other.clone())]);
    let closed: Vec<_> = rows(&c, &alice, "?state=closed").iter().map(|r| r["id"].clone()).collect();
    assert_eq!(closed, vec![Value::from(id)]);
}

#[test]
fn a_no_op_report_leaves_the_row_and_its_updated_at_untouched() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "needs-you", Some("?"));
    let before = row_of(&c, &alice, &id).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("?")).version(), 2);
    assert_eq!(row_of(&c, &alice, &id).unwrap(), before);
}

#[test]
fn two_owners_never_see_each_others_rows() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let bob = owner(&unique("bob"));
    let (a, _, _) = c.create(&alice);
    let (b, _, _) = c.create(&bob);
    let alice_ids: Vec<_> = rows(&c, &alice, "").iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    let bob_ids: Vec<_> = rows(&c, &bob, "").iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert_eq!((alice_ids, bob_ids), (vec![a], vec![b]));
}

#[test]
fn paging_returns_every_row_exactly_once() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let made: HashSet<String> = (0..7).map(|_| c.create(&alice).0).collect();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(cur) => format!("?limit=3&cursor={cur}"),
            None => "?limit=3".into(),
        };
        let page = c.get(&format!("/v1/handoffs{query}"), &alice);
        let rows = page.body["handoffs"].as_array().unwrap();
        assert!(rows.len() <= 3);
        seen.extend(rows.iter().map(|r| r["id"].as_str().unwrap().to_string()));
        match page.body["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7, "no row twice");
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), made);
    for bad in ["?limit=0", "?limit=201", "?cursor=forged", "?state=archived"] {
        let a = c.get(&format!("/v1/handoffs{bad}"), &alice);
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{bad}");
    }
}

/// The row of `id` once the index holds `version`, polled until `within` has passed.
fn row_reaching(c: &Client, token: &str, id: &str, version: u64, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let row = row_of(c, token, id).unwrap();
        if row["version"] == version {
            return row;
        }
        assert!(Instant::now() < deadline, "the outbox delivered version {version} within {within:?}: {row}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_row_whose_delivery_failed_arrives_once_delivery_works_again() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let refuse = |on: bool| {
        let a = c.post("/v1/test/refuse-index", &alice, json!({"on": on}));
        assert_eq!(a.status, 200, "{}", a.text);
    };
    refuse(true);
    let reported = c.report(&id, &machine, 1, "done", Some("while the index refused"));
    assert_eq!(reported.status, 200, "the change is acknowledged even when the index is unreachable");
    assert_eq!(row_of(&c, &alice, &id).unwrap()["version"], 1, "the index does not have it yet");
    refuse(false);
    // The hand-off's alarm retries with backoff (OUTBOX_RETRY_MS_MIN doubling).
    let row = row_reaching(&c, &alice, &id, 2, Duration::from_secs(30));
    assert_eq!(row["summary"], "while the index refused");
    // The retry did not duplicate the row.
    assert_eq!(rows(&c, &alice, "").len(), 1);
}

#[test]
fn under_concurrent_changes_every_answered_change_is_already_in_the_list() {
    // Deliveries to the index are coalesced while one is on its way; an answer must still wait
    // until the index has its version (read your writes).
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let (c, alice, machine, id) = (c.clone(), alice.clone(), machine.clone(), id.clone());
            std::thread::spawn(move || {
                for j in 0..5 {
                    let answered = c.report(&id, &machine, 1, "running", Some(&format!("step {i}.{j}")));
                    assert_eq!(answered.status, 200, "{}", answered.text);
                    let listed = row_of(&c, &alice, &id).unwrap()["version"].as_u64().unwrap();
                    assert!(listed >= answered.version(), "listed v{listed} after an answered v{}", answered.version());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(row_of(&c, &alice, &id).unwrap()["version"], 81, "80 reports and the create, none lost");
}

/// The outbox across a crash: changes acknowledged while the index refuses them (the first
/// one schedules the hand-off's alarm, the later ones find it pending and schedule none), then
/// SIGKILL. After the restart nothing touches the hand-off: only its stored alarm can bring
/// the newest row to the index.
#[test]
fn rows_owed_when_the_worker_is_killed_reach_the_index_after_the_restart_by_the_stored_alarm() {
    let state = temp_state("outbox-crash");
    let mut server = Server::start(&state, None);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.post("/v1/test/refuse-index", &alice, json!({"on": true})).status, 200);
    for (i, status) in ["running", "needs-you", "running"].iter().enumerate() {
        let r = c.report(&id, &machine, 1, status, Some(&format!("owed {i}")));
        assert_eq!((r.status, r.version()), (200, 2 + i as u64), "{}", r.text);
    }
    assert_eq!(row_of(&c, &alice, &id).unwrap()["version"], 1, "the index has none of them yet");

    server.kill(libc::SIGKILL);
    server.restart();
    let c = server.client();
    let row = row_reaching(&c, &alice, &id, 4, Duration::from_secs(OUTBOX_AFTER_RESTART_S_MAX));
    assert_eq!(row["summary"], "owed 2");
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// The safety alarm's delay (limits::OUTBOX_SAFETY_ALARM_MS) plus the retry backoff a few
/// refused deliveries reach, with room for a restart.
const OUTBOX_AFTER_RESTART_S_MAX: u64 = 40;

/// Issue 16: the index keeps a row only for a higher version, so an outbox that delivers an
/// older row after a newer one, or the same row twice, never takes the list back.
#[test]
fn an_older_row_delivered_after_a_newer_one_and_the_same_row_twice_leave_the_newer_row() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let id = format!("ho_{:032x}", Instant::now().elapsed().as_nanos() ^ 0x5eed);
    let row = |version: u64, summary: &str| {
        json!({"id": id, "session": "s", "machine": "m1", "size": "large", "turn": 1, "state": "open",
               "status": "needs-you", "summary": summary, "version": version, "updated_at": 1_000 + version})
    };
    let put = |body: Value| {
        let a = c.post("/v1/test/index-rows", &alice, body);
        assert_eq!(a.status, 200, "{}", a.text);
    };
    put(row(5, "newer"));
    put(row(3, "older, delivered late"));
    let kept = row_of(&c, &alice, &id).expect("the row is listed");
    assert_eq!((kept["version"].as_u64(), kept["summary"].as_str()), (Some(5), Some("newer")), "{kept}");
    put(row(5, "the same version again, other text"));
    put(row(5, "and again"));
    let kept = row_of(&c, &alice, &id).unwrap();
    assert_eq!(kept["summary"], "newer", "a replay of the held version changes nothing: {kept}");
    put(row(6, "next"));
    assert_eq!(row_of(&c, &alice, &id).unwrap()["summary"], "next");
    assert_eq!(
        rows(&c, &alice, "?limit=200").iter().filter(|r| r["id"] == id.as_str()).count(),
        1,
        "one row per hand-off"
    );
}

/// A console polls the list: the page's `ETag` sent back is answered 304 with no body until
/// a row on that page moves, and then 200 with the new row and another tag.
#[test]
fn the_list_answers_304_to_its_own_etag_until_a_row_moves() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let first = c.get("/v1/handoffs", &alice);
    let tag = first.etag.clone().expect("a page carries an ETag");
    let again = c.send("GET", "/v1/handoffs", Some(&alice), &[("If-None-Match", &tag)], None);
    assert_eq!((again.status, again.text.as_str(), again.etag.as_deref()), (304, "", Some(tag.as_str())));
    let other = c.send("GET", "/v1/handoffs", Some(&alice), &[("If-None-Match", "\"another\"")], None);
    assert_eq!((other.status, other.body["handoffs"].clone()), (200, first.body["handoffs"].clone()));
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("which one?")).status, 200);
    let moved = c.send("GET", "/v1/handoffs", Some(&alice), &[("If-None-Match", &tag)], None);
    assert_eq!(moved.status, 200, "the row moved: {}", moved.text);
    assert_eq!(moved.body["handoffs"][0]["status"], "needs-you");
    assert_ne!(moved.etag, Some(tag));
}

/// A row shows the runtime the current turn was handed to and its package, as the record does.
#[test]
fn a_row_shows_the_runtime_and_package_of_its_current_turn() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let work = json!({"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": ["green"]});
    assert_eq!(c.put(&format!("/v1/handoffs/{id}/work"), &alice, work).status, 200);
    assert_eq!(c.report(&id, &machine, 1, "done", None).status, 200);
    let handoff = json!({"runtime": "codex", "objective": "go on", "purpose": "test"});
    let opened = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1, "handoff": handoff}));
    assert_eq!(opened.status, 200, "{}", opened.text);
    let row = row_of(&c, &alice, &id).unwrap();
    let record = opened.handoff();
    assert_eq!(
        (&row["runtime"], &row["package_version"], &row["package_hash"]),
        (&record["runtime"], &record["package_version"], &record["package_hash"])
    );
    assert_eq!(row["runtime"], "codex");
}

/// A stored row no build can read is never dropped from a page unread: the list answers 503
/// `store.unavailable` (the cause goes to the log), as every storage failure does.
#[test]
fn a_stored_row_that_cannot_be_read_makes_the_list_unavailable_rather_than_shorter() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, _, _) = c.create(&alice);
    assert_eq!(rows(&c, &alice, "").len(), 1);
    let hook = c.post("/v1/test/index-rows/unreadable", &alice, json!({"id": id}));
    assert_eq!(hook.status, 200, "{}", hook.text);
    let list = c.get("/v1/handoffs", &alice);
    assert_eq!((list.status, list.code()), (503, "store.unavailable"), "{}", list.text);
    assert_eq!(list.body["error"]["message"], "the hand-off store is unavailable; try again");
}
