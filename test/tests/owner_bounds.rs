//! What one owner can make the service hold, against the real Worker: the cap on open
//! hand-offs (decided by the owner's index before anything is stored), creations per minute
//! (the runtime's rate-limiting binding, as `wrangler dev` simulates it), retention (a closed
//! hand-off erased by its alarm once its time has passed), erasing now (`DELETE`), and the
//! owner's index staying bounded as an owner opens and closes past the cap.
//!
//! The cap tests start a Worker of their own whose cap is `TEST_OPEN_CAP`
//! (`HANDOFF_TEST_OPEN_HANDOFFS_MAX`, honoured only with test hooks in `local`), so that it is
//! reached in a few requests; the named cap (`OPEN_HANDOFFS_PER_OWNER_MAX`) is above what the
//! rate limit lets a test create in a minute.

use handoff_core::limits::{
    CREATES_PER_OWNER_PERIOD_S, CREATES_PER_OWNER_PER_MINUTE_MAX, HANDOFF_RETENTION_DAYS_DEFAULT,
    OPEN_HANDOFFS_PER_OWNER_MAX,
};
use handoff_it::workerd::databases_holding_data;
use handoff_it::{owner, temp_state, unique, Answer, Client, Server};
use serde_json::{json, Value};
use std::thread;
use std::time::{Duration, Instant};

/// The open cap of the Workers these tests start.
const TEST_OPEN_CAP: usize = 3;
/// The owner's index after many rounds of opening past the cap, closing and erasing: it holds
/// at most the cap's rows (and those closed within retention, here none), so a few SQLite pages.
const INDEX_BYTES_CEILING: u64 = 64 * 1024;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn create_session(c: &Client, token: &str, session: &str) -> Answer {
    c.post("/v1/handoffs", token, json!({"session": session, "machine": "m1", "size": "large"}))
}

fn close(c: &Client, token: &str, id: &str) -> Answer {
    c.post(&format!("/v1/handoffs/{id}/close"), token, json!({}))
}

fn erase(c: &Client, token: &str, id: &str) -> Answer {
    c.send("DELETE", &format!("/v1/handoffs/{id}"), Some(token), &[], None)
}

fn list_ids(c: &Client, token: &str) -> Vec<String> {
    let page = c.get("/v1/handoffs?limit=200", token);
    assert_eq!(page.status, 200, "{}", page.text);
    page.body["handoffs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
}

/// Moves the hand-off's clock ahead by `ms` and rings its alarm now (a test hook).
fn advance(c: &Client, token: &str, id: &str, ms: i64) {
    let a = c.post(&format!("/v1/test/handoffs/{id}/clock"), token, json!({"advance_ms": ms}));
    assert_eq!(a.status, 204, "{}", a.text);
}

/// Polls until `GET` of the hand-off answers `status`, or fails after `within`.
fn until_status(c: &Client, token: &str, id: &str, status: u16, within: Duration) -> Answer {
    let deadline = Instant::now() + within;
    loop {
        let a = c.get(&format!("/v1/handoffs/{id}"), token);
        if a.status == status || Instant::now() > deadline {
            assert_eq!(a.status, status, "{}", a.text);
            return a;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

fn index_bytes(c: &Client, token: &str) -> u64 {
    let a = c.get("/v1/test/index-storage", token);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["bytes"].as_u64().unwrap()
}

/// A local Worker whose open cap is [`TEST_OPEN_CAP`]: on workerd itself, since wrangler's
/// dev runtime writes a database for every object it merely names (and one per request for
/// its traces), which would hide whether a refused create stored anything.
fn capped_server(name: &str) -> Server {
    let state = temp_state(name);
    Server::start_workerd(&state, &[("HANDOFF_TEST_OPEN_HANDOFFS_MAX", &TEST_OPEN_CAP.to_string())])
}

#[test]
fn a_create_past_the_open_cap_is_429_with_the_count_and_the_cap_and_creates_no_object_storage() {
    let server = capped_server("open-cap");
    let c = server.client();
    let name = unique("alice");
    let alice = owner(&name);
    let mut ids = Vec::new();
    for n in 0..TEST_OPEN_CAP {
        let a = create_session(&c, &alice, &format!("s{n}"));
        assert_eq!(a.status, 201, "{}", a.text);
        ids.push(a.handoff()["id"].as_str().unwrap().to_string());
    }
    thread::sleep(Duration::from_millis(500));
    let objects = server.state_dir.clone();
    let before = databases_holding_data(&objects);
    assert!(before >= TEST_OPEN_CAP, "the hand-offs hold data under {}", objects.display());
    let refused = create_session(&c, &alice, "one-too-many");
    assert_eq!((refused.status, refused.code()), (429, "owner.too_many_open"), "{}", refused.text);
    assert_eq!(
        (refused.body["open"].as_u64(), refused.body["cap"].as_u64()),
        (Some(TEST_OPEN_CAP as u64), Some(TEST_OPEN_CAP as u64))
    );
    let refused_id = handoff_api::input::handoff_id(&name, "one-too-many");
    assert_eq!(c.get(&format!("/v1/handoffs/{refused_id}"), &alice).status, 404, "nothing was created");
    assert!(!list_ids(&c, &alice).contains(&refused_id), "and nothing listed");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(databases_holding_data(&objects), before, "the refused create stored nothing in any object");
    // A session that already has its hand-off is answered it at the cap: nothing new is held.
    assert_eq!(create_session(&c, &alice, "s0").status, 200);
    // Another owner has a cap of its own.
    assert_eq!(create_session(&c, &owner(&unique("bob")), "s0").status, 201);
    // A closed hand-off holds no place: the next create is admitted.
    assert_eq!(close(&c, &alice, &ids[0]).status, 200);
    let admitted = create_session(&c, &alice, "one-too-many");
    assert_eq!(admitted.status, 201, "{}", admitted.text);
    assert_eq!(create_session(&c, &alice, "and-another").code(), "owner.too_many_open");
}

#[test]
fn creations_past_the_per_minute_limit_are_429_rate_limited_with_retry_after() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let limit = CREATES_PER_OWNER_PER_MINUTE_MAX as usize;
    assert!(limit < OPEN_HANDOFFS_PER_OWNER_MAX, "the open cap is not what refuses here");
    // The binding counts in windows of a minute; a window may end during the run, so the
    // first refusal comes after at least `limit` creates and at most two windows' worth.
    let mut created = 0;
    let refused = loop {
        let a = create_session(&c, &alice, &unique("s"));
        if a.status != 201 {
            break a;
        }
        created += 1;
        assert!(created <= 2 * limit, "{created} creates in a row were never limited");
    };
    assert_eq!((refused.status, refused.code()), (429, "owner.rate_limited"), "{}", refused.text);
    assert!(created >= limit, "refused after only {created} creates");
    assert_eq!(refused.retry_after.as_deref(), Some(CREATES_PER_OWNER_PERIOD_S.to_string().as_str()));
    // Another owner is counted apart.
    assert_eq!(create_session(&c, &owner(&unique("bob")), "s").status, 201);
}

#[test]
fn a_closed_hand_off_is_erased_its_retention_after_its_close_and_a_new_create_starts_a_new_life_at_version_1() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let first = create_session(&c, &alice, &session);
    assert_eq!(first.status, 201);
    let id = first.handoff()["id"].as_str().unwrap().to_string();
    let old_machine = first.body["machine_token"].as_str().unwrap().to_string();
    let old_life = first.handoff()["incarnation"].as_u64().unwrap();
    assert_eq!(c.report(&id, &old_machine, 1, "done", Some("first life")).status, 200);
    let closed = close(&c, &alice, &id);
    assert_eq!(closed.version(), 3);
    let retention_ms = i64::from(HANDOFF_RETENTION_DAYS_DEFAULT) * DAY_MS;
    // An hour before its retention has passed it answers as before.
    advance(&c, &alice, &id, retention_ms - 60 * 60 * 1000);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 3);
    assert!(list_ids(&c, &alice).contains(&id));
    // Past it, the alarm erases it and its row.
    advance(&c, &alice, &id, 2 * 60 * 60 * 1000);
    let gone = until_status(&c, &alice, &id, 404, Duration::from_secs(10));
    assert_eq!(gone.code(), "handoff.not_found");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &old_machine).status, 404);
    assert!(!list_ids(&c, &alice).contains(&id), "the owner's index dropped its row");
    let storage = c.get(&format!("/v1/test/handoffs/{id}/storage"), &alice);
    assert_eq!(storage.status, 404, "nothing is left to show: {}", storage.text);
    // The same session again: a new life at version 1, which the earlier life's token cannot reach.
    let again = create_session(&c, &alice, &session);
    assert_eq!((again.status, again.version()), (201, 1), "{}", again.text);
    assert_eq!(again.handoff()["id"], id.as_str(), "the same id");
    assert!(again.handoff()["incarnation"].as_u64().unwrap() > old_life, "a later life");
    let old = c.get(&format!("/v1/handoffs/{id}/wait?after=0&timeout=0"), &old_machine);
    assert_eq!(
        (old.status, old.code()),
        (404, "handoff.not_found"),
        "a waiter of the earlier life is told nothing of this one"
    );
    let new_machine = again.body["machine_token"].as_str().unwrap();
    assert_eq!(c.get(&format!("/v1/handoffs/{id}/wait?after=0&timeout=0"), new_machine).version(), 1);
    assert_eq!(list_ids(&c, &alice), vec![id.clone()]);
    let row = &c.get("/v1/handoffs", &alice).body["handoffs"][0];
    assert_eq!(
        (row["version"].as_u64(), row["state"].as_str()),
        (Some(1), Some("open")),
        "the list shows the new life"
    );
}

#[test]
fn erasing_a_hand_off_closes_it_wakes_every_waiter_and_watcher_erases_it_and_refuses_its_machine_token() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let mut watch =
        handoff_it::watch::Watch::open(&c.base, &id, &alice, 1, handoff_it::watch::Auth::Header).expect("a watch");
    let waiter = {
        let (c, id, machine) = (c.clone(), id.clone(), machine.clone());
        thread::spawn(move || c.get(&format!("/v1/handoffs/{id}/wait?after=1&timeout=30"), &machine))
    };
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        c.send("DELETE", &format!("/v1/handoffs/{id}"), Some(&machine), &[], None).status,
        403,
        "the owner's alone"
    );
    let erased = erase(&c, &alice, &id);
    assert_eq!((erased.status, erased.text.as_str()), (204, ""));
    let woken = waiter.join().unwrap();
    assert_eq!(
        (woken.status, woken.handoff()["state"].as_str(), woken.version()),
        (200, Some("closed"), 2),
        "{}",
        woken.text
    );
    let frame = watch.next(Duration::from_secs(5));
    assert_eq!(frame.version(), Some(2), "the watcher is told the close: {frame:?}");
    assert_eq!(frame_value(&frame)["handoff"]["state"], "closed");
    assert_eq!(until_status(&c, &alice, &id, 404, Duration::from_secs(2)).code(), "handoff.not_found");
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &machine).status, 404, "its machine token is refused");
    assert_eq!(c.report(&id, &machine, 1, "running", Some("after")).status, 404);
    assert!(!list_ids(&c, &alice).contains(&id), "its row is gone");
    assert_eq!(c.get(&format!("/v1/test/handoffs/{id}/storage"), &alice).status, 404);
    assert_eq!(
        erase(&c, &alice, &id).code(),
        "handoff.not_found",
        "erasing again finds it gone (404, as for any id not there)"
    );
    // A closed hand-off is erased as it is.
    let (closed, _, _) = c.create(&alice);
    assert_eq!(close(&c, &alice, &closed).status, 200);
    assert_eq!(erase(&c, &alice, &closed).status, 204);
    assert_eq!(c.get(&format!("/v1/handoffs/{closed}"), &alice).status, 404);
    // Another owner cannot erase it.
    let (kept, _, _) = c.create(&alice);
    assert_eq!(erase(&c, &owner(&unique("mallory")), &kept).status, 404);
    assert_eq!(c.get(&format!("/v1/handoffs/{kept}"), &alice).status, 200);
}

fn frame_value(frame: &handoff_it::watch::Frame) -> Value {
    match frame {
        handoff_it::watch::Frame::Record(v) => v.clone(),
        other => panic!("expected a record, got {other:?}"),
    }
}

#[test]
fn the_owners_index_stays_under_its_ceiling_as_an_owner_opens_and_closes_past_the_cap() {
    let server = capped_server("index-bound");
    let c = server.client();
    let alice = owner(&unique("alice"));
    const ROUNDS: usize = 8;
    let mut largest = 0;
    for round in 0..ROUNDS {
        let mut ids = Vec::new();
        for n in 0..TEST_OPEN_CAP {
            let a = create_session(&c, &alice, &format!("r{round}-{n}"));
            assert_eq!(a.status, 201, "round {round}: {}", a.text);
            ids.push(a.handoff()["id"].as_str().unwrap().to_string());
        }
        assert_eq!(create_session(&c, &alice, &format!("r{round}-over")).code(), "owner.too_many_open");
        assert!(list_ids(&c, &alice).len() <= 2 * TEST_OPEN_CAP, "open rows and the last round's closed ones");
        for id in &ids {
            assert_eq!(close(&c, &alice, id).status, 200);
        }
        // The previous round's closed hand-offs pass their retention and are erased.
        for id in &ids {
            advance(&c, &alice, id, i64::from(HANDOFF_RETENTION_DAYS_DEFAULT) * DAY_MS + 1);
        }
        for id in &ids {
            until_status(&c, &alice, id, 404, Duration::from_secs(10));
        }
        assert!(list_ids(&c, &alice).is_empty(), "round {round}: every row went with its hand-off");
        let bytes = index_bytes(&c, &alice);
        largest = largest.max(bytes);
        assert!(bytes <= INDEX_BYTES_CEILING, "round {round}: the index holds {bytes} bytes");
    }
    eprintln!("the owner's index after {} hand-offs in {ROUNDS} rounds: at most {largest} bytes (ceiling {INDEX_BYTES_CEILING})", ROUNDS * TEST_OPEN_CAP);
}
