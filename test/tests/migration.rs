//! A hand-off stored by an earlier build keeps serving after a deploy: the object brings a
//! database of schema 1, 2, 3 or 4 up to this build's (5) the first time it loads it, in one
//! transaction, and answers from what was stored. The earlier schema is made from this build's
//! by taking away what each later schema added, in the object's own SQLite file, while workerd
//! is stopped.

use handoff_it::peers::{PushService, WebhookReceiver};
use handoff_it::workerd::object_databases;
use handoff_it::{owner, temp_state, unique, Client, Server};
use handoff_notify::{DEV_VAPID_PRIVATE_KEY, DEV_VAPID_PUBLIC_KEY};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What schema 5 added to schema 4, taken away again; and the lineage entries as the build of
/// schema 4 wrote them, without the outcomes this build keeps (summary, reply, questions).
const BACK_TO_4: &[&str] = &[
    "DROP TABLE timeline",
    "DROP TABLE timeline_turns",
    "UPDATE turns SET entry = json_remove(entry, '$.sync_mode', '$.summary', '$.reply', '$.questions')",
    "UPDATE meta SET schema = 4",
];
/// What schema 4 added to schema 3, taken away again (after [`BACK_TO_4`]).
const BACK_TO_3: &[&str] = &["DROP TABLE tokens", "UPDATE meta SET schema = 3"];
/// What schema 3 added to schema 2, taken away again (after [`BACK_TO_3`]).
const BACK_TO_2: &[&str] =
    &["DROP TABLE passed", "ALTER TABLE handoff DROP COLUMN entered", "UPDATE meta SET schema = 2"];
/// What schema 2 added to schema 1, taken away again (after [`BACK_TO_2`]).
const BACK_TO_1: &[&str] = &[
    "DROP TABLE meta",
    "ALTER TABLE idempotency DROP COLUMN bytes",
    "ALTER TABLE idempotency DROP COLUMN slim",
    "ALTER TABLE idempotency DROP COLUMN digest",
];

/// Every Durable Object database under `dir` that holds a hand-off.
fn handoff_databases(dir: &Path) -> Vec<PathBuf> {
    object_databases(dir).into_iter().filter(|db| has_table(db, "handoff")).collect()
}

fn has_table(db: &Path, table: &str) -> bool {
    let db = Connection::open(db).unwrap();
    db.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap()
        == 1
}

fn has_column(db: &Path, table: &str, column: &str) -> bool {
    let db = Connection::open(db).unwrap();
    let mut statement = db.prepare(&format!("SELECT name FROM pragma_table_info('{table}')")).unwrap();
    let names: Vec<String> = statement.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    names.iter().any(|n| n == column)
}

/// A webhook of `owner`'s whose receiver holds the secret the service gave it: the receiver and
/// the webhook's id.
fn webhook_of(c: &Client, owner: &str) -> (WebhookReceiver, String) {
    let hook = WebhookReceiver::start("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let created = c.post("/v1/webhooks", owner, json!({"url": hook.url()}));
    assert_eq!(created.status, 201, "{}", created.text);
    hook.set_secret(created.body["secret"].as_str().unwrap());
    (hook, created.body["webhook"]["id"].as_str().unwrap().to_string())
}

/// The one owner's index stored under `state`, with `statements` run on it in order (workerd
/// stopped).
fn owners_index_rewritten(state: &Path, statements: &[&str]) -> PathBuf {
    let index: Vec<_> = object_databases(state).into_iter().filter(|db| has_table(db, "deliveries")).collect();
    assert_eq!(index.len(), 1, "one owner's index: {index:?}");
    let db = Connection::open(&index[0]).unwrap();
    for statement in statements {
        db.execute(statement, []).unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    index[0].clone()
}

fn stored_by_schema(schema: i64) {
    let state = temp_state(&format!("schema-{schema}"));
    let mut server = Server::start_workerd(&state, &[]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let asked = c.report(&id, &machine, 1, "needs-you", Some("which branch?"));
    assert_eq!(asked.status, 200, "{}", asked.text);
    server.stop();

    let databases = handoff_databases(&state);
    assert_eq!(databases.len(), 1, "one hand-off's database: {databases:?}");
    let db = &databases[0];
    let earlier = Connection::open(db).unwrap();
    let back: Vec<&str> = BACK_TO_4
        .iter()
        .chain(if schema <= 3 { BACK_TO_3 } else { &[] })
        .chain(if schema <= 2 { BACK_TO_2 } else { &[] })
        .chain(if schema == 1 { BACK_TO_1 } else { &[] })
        .copied()
        .collect();
    for statement in back {
        earlier.execute(statement, []).unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    drop(earlier);
    assert!(!has_table(db, "timeline"), "the database is of schema {schema} now");
    assert!(schema == 4 || !has_table(db, "tokens"), "the database is of schema {schema} now");
    assert!(
        schema >= 3 || (!has_table(db, "passed") && !has_column(db, "handoff", "entered")),
        "the database is of schema {schema} now"
    );

    server.restart();
    let c = server.client();
    let read = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(read.status, 200, "{}", read.text);
    assert_eq!(
        (read.version(), read.handoff()["summary"].as_str()),
        (asked.version(), Some("which branch?")),
        "what was stored"
    );
    // The lineage entry the earlier build wrote reads with no reply and no questions.
    let turns = c.get(&format!("/v1/handoffs/{id}/turns"), &alice);
    assert_eq!(turns.status, 200, "{}", turns.text);
    let entry = &turns.body["turns"][0];
    assert!(entry["reply"].is_null() && entry["questions"] == json!([]), "{entry}");
    // The timeline is there for the turn at once.
    let events = json!({"turn": 1, "events": [{"seq": 1, "kind": "note", "text": "resumed"}]});
    let taken = c.post(&format!("/v1/handoffs/{id}/events"), &machine, events);
    assert_eq!((taken.status, taken.body["next"].as_u64()), (200, Some(2)), "{}", taken.text);
    let done = c.report(&id, &machine, 1, "done", Some("merged"));
    assert_eq!(
        (done.status, done.version()),
        (200, asked.version() + 1),
        "the machine token minted before still works: {}",
        done.text
    );
    let listed = c.get("/v1/handoffs", &alice);
    let row = listed.body["handoffs"].as_array().unwrap().iter().find(|h| h["id"] == id.as_str()).cloned();
    assert_eq!(row.map(|r| r["status"].clone()), Some("done".into()), "{}", listed.text);
    server.stop();

    assert!(
        has_table(db, "passed")
            && has_column(db, "handoff", "entered")
            && has_table(db, "meta")
            && has_table(db, "tokens")
            && has_table(db, "timeline")
            && has_table(db, "timeline_turns"),
        "brought up to schema 5"
    );
    let schema_now: i64 = Connection::open(db).unwrap().query_row("SELECT schema FROM meta", [], |r| r.get(0)).unwrap();
    assert_eq!(schema_now, 5);
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn a_hand_off_stored_by_schema_4_is_brought_up_to_5_its_lineage_read_with_no_reply_and_keeps_serving() {
    stored_by_schema(4);
}

#[test]
fn a_hand_off_stored_by_schema_3_is_brought_up_to_5_and_keeps_serving() {
    stored_by_schema(3);
}

#[test]
fn a_hand_off_stored_by_schema_2_is_brought_up_to_5_and_keeps_serving() {
    stored_by_schema(2);
}

#[test]
fn a_hand_off_stored_by_schema_1_is_brought_up_to_5_and_keeps_serving() {
    stored_by_schema(1);
}

/// An owner's notification tables as the build before one deliveries table wrote them: a
/// deliveries table per kind, and push subscriptions counting no drops.
const NOTIFICATIONS_BACK: &[&str] = &[
    "CREATE TABLE webhook_deliveries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, webhook TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, last_attempt_at INTEGER, next_attempt_at INTEGER, created_at INTEGER NOT NULL)",
    "INSERT INTO webhook_deliveries SELECT seq, id, receiver, type, handoff, version, body, state, attempts, last_status, last_attempt_at, next_attempt_at, created_at FROM deliveries WHERE kind = 'webhook'",
    "CREATE TABLE push_deliveries (seq INTEGER PRIMARY KEY, subscription TEXT NOT NULL, type TEXT NOT NULL, handoff TEXT NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, created_at INTEGER NOT NULL, UNIQUE (subscription, handoff, version, type))",
    "INSERT INTO push_deliveries SELECT seq, receiver, type, handoff, version, body, attempts, next_attempt_at, created_at FROM deliveries WHERE kind = 'push'",
    "DROP TABLE deliveries",
    "ALTER TABLE push_subscriptions DROP COLUMN dropped",
    "ALTER TABLE push_subscriptions DROP COLUMN device",
];

#[test]
fn an_owners_pending_notifications_stored_by_the_earlier_build_move_to_one_table_and_are_sent() {
    let state = temp_state("notifications-earlier");
    let mut server = Server::start_with_vars(&state, None, &[("HANDOFF_VAPID_PRIVATE_KEY", DEV_VAPID_PRIVATE_KEY)]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (hook, webhook) = webhook_of(&c, &alice);
    let service = PushService::start(DEV_VAPID_PUBLIC_KEY);
    assert_eq!(c.post("/v1/push/subscriptions", &alice, service.subscribe().json()).status, 201);
    assert_eq!(c.post("/v1/test/hold-webhooks", &alice, json!({"on": true})).status, 200);
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("which branch?")).status, 200);
    let pending = c.get(&format!("/v1/webhooks/{webhook}/deliveries"), &alice);
    assert_eq!(pending.body["deliveries"][0]["state"], "pending", "{}", pending.text);
    server.stop();

    let index = owners_index_rewritten(&state, NOTIFICATIONS_BACK);

    server.restart();
    let c = server.client();
    let listed = c.get("/v1/push/subscriptions", &alice);
    assert_eq!(listed.body["subscriptions"][0]["dropped"], 0, "{}", listed.text);
    let got = hook.wait_for(1, Duration::from_secs(60));
    assert_eq!(got[0].id.as_deref(), pending.body["deliveries"][0]["id"].as_str(), "the stored delivery, under its id");
    assert_eq!(got[0].json()["data"]["id"], json!(id));
    let pushed = service.wait_for(1, Duration::from_secs(60));
    assert_eq!(pushed[0].json()["handoff"]["id"], json!(id));
    server.stop();
    assert!(
        has_table(&index, "deliveries")
            && !has_table(&index, "webhook_deliveries")
            && !has_table(&index, "push_deliveries")
    );
    assert!(has_column(&index, "push_subscriptions", "dropped"));
    assert!(has_column(&index, "push_subscriptions", "device"));
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// An owner's index as the build before devices wrote it: push subscriptions that name no device.
const DEVICES_BACK: &[&str] = &[
    "DROP TABLE IF EXISTS devices",
    "DROP TABLE IF EXISTS device_sign_ins",
    "ALTER TABLE push_subscriptions DROP COLUMN device",
];

#[test]
fn push_subscriptions_stored_before_devices_belong_to_no_device_and_stay_when_every_device_is_revoked() {
    let state = temp_state("devices-earlier");
    let mut server = Server::start_with_vars(&state, None, &[("HANDOFF_VAPID_PRIVATE_KEY", DEV_VAPID_PRIVATE_KEY)]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let service = PushService::start(DEV_VAPID_PUBLIC_KEY);
    let earlier = c.post("/v1/push/subscriptions", &alice, service.subscribe().json());
    assert_eq!(earlier.status, 201, "{}", earlier.text);
    let earlier_id = earlier.body["subscription"]["id"].clone();
    server.stop();

    let index = owners_index_rewritten(&state, DEVICES_BACK);
    assert!(!has_column(&index, "push_subscriptions", "device"), "the index is of the build before devices now");

    server.restart();
    let c = server.client();
    let listed = c.get("/v1/push/subscriptions", &alice);
    assert_eq!(listed.body["subscriptions"][0]["id"], earlier_id, "{}", listed.text);
    assert_eq!(listed.body["subscriptions"][0]["device"], serde_json::Value::Null, "it belongs to no device");
    let signed = c.post("/v1/devices", &alice, json!({"name": "phone"}));
    assert_eq!(signed.status, 201, "{}", signed.text);
    let access = signed.body["access_token"].as_str().unwrap().to_string();
    assert_eq!(c.post("/v1/push/subscriptions", &access, service.subscribe().json()).status, 201);
    let revoked = c.post("/v1/devices/revoke-all", &alice, json!({"keep_current": false}));
    assert_eq!(revoked.body["revoked"], 1, "{}", revoked.text);
    let left = c.get("/v1/push/subscriptions", &alice);
    let ids: Vec<&serde_json::Value> =
        left.body["subscriptions"].as_array().unwrap().iter().map(|s| &s["id"]).collect();
    assert_eq!(ids, [&earlier_id], "the device's subscription went with it, the earlier one stays: {}", left.text);
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("which branch?")).status, 200);
    let pushed = service.wait_for(1, Duration::from_secs(60));
    assert_eq!(pushed[0].json()["handoff"]["id"], json!(id), "the earlier subscription is still sent to");
    server.stop();
    assert!(has_column(&index, "push_subscriptions", "device") && has_table(&index, "devices"));
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}

/// A later build's rows in an owner's deliveries table (a deploy rolled back): two pending
/// deliveries of a kind this build does not know behind a webhook's one not due for long, over
/// a cap of one, and a finished delivery in a state this build does not know; and an event
/// this build does not know among the webhook's.
const LATER_BUILD: &[&str] = &[
    "UPDATE deliveries SET next_attempt_at = 9000000000000",
    "INSERT INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, next_attempt_at, created_at)
     SELECT d.id || '-later-' || n.value, 'email', 'em_1', d.type, d.handoff, d.version, d.body, 'pending', 0, 0, d.created_at FROM deliveries AS d, json_each('[1, 2]') AS n",
    "INSERT INTO deliveries (id, kind, receiver, type, handoff, version, body, state, attempts, created_at)
     SELECT id || '-expired', kind, receiver, type, handoff, version, '', 'expired', 1, created_at FROM deliveries WHERE kind = 'webhook'",
    "UPDATE webhooks SET events = events || ',later-event'",
];

#[test]
fn deliveries_a_later_build_stored_count_against_the_cap_and_one_in_an_unknown_state_makes_the_list_unavailable_not_failed(
) {
    let state = temp_state("notifications-later");
    let mut server = Server::start_with_vars(&state, None, &[("HANDOFF_TEST_WEBHOOK_PENDING_MAX", "1")]);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (hook, webhook) = webhook_of(&c, &alice);
    assert_eq!(c.post("/v1/test/hold-webhooks", &alice, json!({"on": true})).status, 200);
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("which branch?")).status, 200);
    server.stop();

    owners_index_rewritten(&state, LATER_BUILD);

    server.restart();
    let c = server.client();
    let listed = c.get("/v1/webhooks", &alice);
    assert_eq!(
        listed.body["webhooks"][0]["events"],
        json!(["needs-you", "done", "failed", "closed"]),
        "the events it knows: {}",
        listed.text
    );
    // Four pending over a cap of one: the three oldest go, the two of the unknown kind among
    // them, and the new delivery is written and sent.
    assert_eq!(c.report(&id, &machine, 1, "done", Some("merged")).status, 200);
    let got = hook.wait_for(1, Duration::from_secs(60));
    assert_eq!(got[0].json()["type"], "handoff.done", "{got:?}");
    let stored = c.get(&format!("/v1/test/index-storage/{id}"), &alice);
    let states: Vec<&str> =
        stored.body["deliveries"].as_array().unwrap().iter().map(|d| d["state"].as_str().unwrap()).collect();
    assert_eq!(states.len(), 2, "the expired one, and the new one: {}", stored.text);
    assert_eq!(states[0], "expired", "a state this build does not know is left as it is: {}", stored.text);
    let deliveries = c.get(&format!("/v1/webhooks/{webhook}/deliveries"), &alice);
    assert_eq!(
        (deliveries.status, deliveries.body["error"]["code"].as_str()),
        (503, Some("store.unavailable")),
        "never shown as failed: {}",
        deliveries.text
    );
    server.stop();
    drop(server);
    let _ = std::fs::remove_dir_all(&state);
}
