//! The person's words travel with the turn: a `prompt` on a create and on every open turn,
//! against the real local Worker, in the contract's words.

use handoff_core::limits::{
    BODY_BYTES_MAX, PROMPT_BYTES_MAX, PROMPT_TURNS_KEPT_MAX, REPORT_BODY_BYTES_MAX, TIMELINE_BODY_BYTES_MAX,
    WORDS_BODY_BYTES_MAX,
};
use handoff_it::{owner, unique, Answer, Client};
use serde_json::{json, Value};

fn create_saying(c: &Client, alice: &str, session: &str, prompt: Option<&str>) -> Answer {
    let mut body = json!({"session": session, "machine": "m1", "size": "large"});
    if let Some(p) = prompt {
        body["prompt"] = json!(p);
    }
    c.post("/v1/handoffs", alice, body)
}

fn open_saying(c: &Client, id: &str, alice: &str, after: u64, prompt: Option<&str>) -> Answer {
    let mut body = json!({"after": after});
    if let Some(p) = prompt {
        body["prompt"] = json!(p);
    }
    c.post(&format!("/v1/handoffs/{id}/turns"), alice, body)
}

/// The newest page of the lineage, its entries oldest first.
/// A new hand-off with a work record set (a package can brief from it) and turn 1 done: the
/// owner's token, the id and the machine's token.
fn turn_one_done_with_work(c: &Client) -> (String, String, String) {
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let work = json!({"title": "Parser", "goal": "Parse the files", "constraints": [], "acceptance_criteria": []});
    assert_eq!(c.put(&format!("/v1/handoffs/{id}/work"), &alice, work).status, 200);
    c.report(&id, &machine, 1, "done", None);
    (alice, id, machine)
}

fn turns(c: &Client, id: &str, token: &str) -> Vec<Value> {
    let page = c.get(&format!("/v1/handoffs/{id}/turns?limit=1000"), token);
    assert_eq!(page.status, 200, "{}", page.text);
    page.body["turns"].as_array().unwrap().clone()
}

#[test]
fn a_prompt_on_create_and_on_a_turn_is_read_back_on_the_record_and_in_the_lineage_by_owner_and_machine() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let created = create_saying(&c, &alice, &unique("s"), Some("Add a CSV export.\n\tKeep the old one."));
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.handoff()["prompt"], "Add a CSV export.\n\tKeep the old one.");
    let id = created.handoff()["id"].as_str().unwrap().to_string();
    let machine = created.body["machine_token"].as_str().unwrap().to_string();
    assert_eq!(c.report(&id, &machine, 1, "done", Some("exported")).status, 200);
    let opened = open_saying(&c, &id, &alice, 1, Some("Now add a test for it."));
    assert_eq!(
        (opened.status, opened.handoff()["prompt"].as_str()),
        (200, Some("Now add a test for it.")),
        "{}",
        opened.text
    );
    for token in [&alice, &machine] {
        let got = c.get(&format!("/v1/handoffs/{id}"), token);
        assert_eq!(got.handoff()["prompt"], "Now add a test for it.");
        let lineage = turns(&c, &id, token);
        let prompts: Vec<&Value> = lineage.iter().map(|t| &t["prompt"]).collect();
        assert_eq!(prompts, [&json!("Add a CSV export.\n\tKeep the old one."), &json!("Now add a test for it.")]);
    }
    // A turn opened without words carries `prompt: null`, on the record and in the lineage.
    c.report(&id, &machine, 2, "done", None);
    let plain = open_saying(&c, &id, &alice, 2, None);
    assert!(plain.handoff()["prompt"].is_null(), "{}", plain.text);
    assert!(turns(&c, &id, &alice)[2]["prompt"].is_null());
    // The owner's list row does not carry it.
    let list = c.get("/v1/handoffs", &alice);
    let row = &list.body["handoffs"][0];
    assert_eq!(row["id"], id);
    assert!(row.get("prompt").is_none(), "{row}");
}

#[test]
fn a_repeat_with_the_same_prompt_is_the_same_turn_and_another_prompt_or_hand_off_is_a_turn_conflict_carrying_the_prompt_taken(
) {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let phone = open_saying(&c, &id, &alice, 1, Some("from the phone"));
    assert_eq!((phone.status, phone.version()), (200, 3));
    let again = open_saying(&c, &id, &alice, 1, Some("from the phone"));
    assert_eq!(
        (again.status, again.version(), again.handoff()["turn"].as_u64()),
        (200, 3, Some(2)),
        "the same turn, no version move"
    );
    let laptop = open_saying(&c, &id, &alice, 1, Some("from the laptop"));
    assert_eq!((laptop.status, laptop.code()), (409, "handoff.turn_conflict"), "{}", laptop.text);
    assert_eq!(laptop.handoff()["prompt"], "from the phone", "the other device learns what was taken");
    assert_eq!(laptop.handoff()["turn"], 2);
    let wordless = open_saying(&c, &id, &alice, 1, None);
    assert_eq!((wordless.status, wordless.code()), (409, "handoff.turn_conflict"));
    let handed = c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1, "prompt": "from the phone", "handoff": {"runtime": "codex", "objective": "o", "purpose": "p"}}));
    assert_eq!((handed.status, handed.code()), (409, "handoff.turn_conflict"), "another hand-off: {}", handed.text);
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 3, "nothing changed");
}

#[test]
fn a_create_repeated_with_the_same_prompt_or_none_answers_the_hand_off_and_another_prompt_conflicts() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let session = unique("s");
    let first = create_saying(&c, &alice, &session, Some("fix the login bug"));
    assert_eq!(first.status, 201);
    for again in [Some("fix the login bug"), None] {
        let a = create_saying(&c, &alice, &session, again);
        assert_eq!((a.status, a.version()), (200, 1), "{again:?}: {}", a.text);
        assert!(a.body.get("machine_token").is_none(), "a repeat mints no machine token: {}", a.text);
    }
    let other = create_saying(&c, &alice, &session, Some("fix the logout bug"));
    assert_eq!((other.status, other.code()), (409, "handoff.conflict"));
    assert_eq!(other.handoff()["prompt"], "fix the login bug");
}

#[test]
fn an_empty_or_over_long_prompt_is_refused_naming_prompt_and_changes_nothing() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let longest = "é".repeat(PROMPT_BYTES_MAX / 2);
    for bad in [String::new(), " \n ".into(), format!("{longest}x"), "erase\u{1b}[2J".into()] {
        let open = open_saying(&c, &id, &alice, 1, Some(&bad));
        let create = create_saying(&c, &alice, &unique("s"), Some(&bad));
        for a in [open, create] {
            assert_eq!((a.status, a.code()), (400, "request.invalid"), "{}", a.text);
            assert!(a.body["error"]["message"].as_str().unwrap().starts_with("prompt:"), "{}", a.text);
        }
    }
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 2, "nothing changed");
    let list = c.get("/v1/handoffs", &alice);
    assert_eq!(list.body["handoffs"].as_array().unwrap().len(), 1, "no create was stored");
    // The longest prompt, with every character escaped by the client, fits the route's cap.
    let escaped = json!({"after": 1, "prompt": "\"".repeat(PROMPT_BYTES_MAX)}).to_string();
    assert!(escaped.len() > BODY_BYTES_MAX);
    let a = c.send("POST", &format!("/v1/handoffs/{id}/turns"), Some(&alice), &[], Some(escaped.as_bytes()));
    assert_eq!(
        (a.status, a.handoff()["prompt"].as_str().map(str::len)),
        (200, Some(PROMPT_BYTES_MAX)),
        "{}",
        &a.text[..a.text.len().min(300)]
    );
}

#[test]
fn a_body_past_its_routes_cap_is_too_large_64_kib_on_the_words_routes_and_16_kib_elsewhere() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let over_words = vec![b' '; WORDS_BODY_BYTES_MAX + 1];
    let over = vec![b' '; BODY_BYTES_MAX + 1];
    // The report carries a whole reply (192 KiB) and a batch of events its own cap (256 KiB).
    for (path, token, cap) in [
        ("/v1/handoffs".to_string(), &alice, WORDS_BODY_BYTES_MAX),
        (format!("/v1/handoffs/{id}/turns"), &alice, WORDS_BODY_BYTES_MAX),
        (format!("/v1/handoffs/{id}/report"), &machine, REPORT_BODY_BYTES_MAX),
        (format!("/v1/handoffs/{id}/events"), &machine, TIMELINE_BODY_BYTES_MAX),
    ] {
        let a = c.send("POST", &path, Some(token), &[], Some(&vec![b' '; cap + 1]));
        assert_eq!((a.status, a.code()), (413, "request.too_large"), "{path}");
        assert!(a.text.contains(&cap.to_string()), "{}", a.text);
        let a = c.send("POST", &path, Some(token), &[], Some(&over));
        assert_eq!((a.status, a.code()), (400, "request.invalid"), "{path}: 16 KiB + 1 is read on a words route");
    }
    let a = c.send("POST", &format!("/v1/handoffs/{id}/report"), Some(&machine), &[], Some(&over_words));
    assert_eq!((a.status, a.code()), (400, "request.invalid"), "64 KiB + 1 is read on the report route");
    for path in ["cancel", "close", "decisions", "answer"] {
        let a = c.send("POST", &format!("/v1/handoffs/{id}/{path}"), Some(&alice), &[], Some(&over));
        assert_eq!((a.status, a.code()), (413, "request.too_large"), "{path}");
    }
    let a = c.send("PUT", &format!("/v1/handoffs/{id}/work"), Some(&alice), &[], Some(&over));
    assert_eq!((a.status, a.code()), (413, "request.too_large"));
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).version(), 1, "nothing changed");
}

#[test]
fn the_prompt_is_covered_by_the_idempotency_key_and_the_same_key_with_another_prompt_is_422() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", None);
    let key = unique("k");
    let send = |prompt: &str| {
        let body = json!({"after": 1, "prompt": prompt}).to_string();
        c.send(
            "POST",
            &format!("/v1/handoffs/{id}/turns"),
            Some(&alice),
            &[("Idempotency-Key", &key)],
            Some(body.as_bytes()),
        )
    };
    let first = send("run the migrations");
    assert_eq!(first.status, 200);
    let replay = send("run the migrations");
    assert_eq!((replay.status, &replay.text), (200, &first.text), "the first answer again");
    let other = send("drop the database");
    assert_eq!((other.status, other.code()), (422, "idempotency.mismatch"));
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).handoff()["prompt"], "run the migrations");
}

#[test]
fn a_hand_off_turns_prompt_follows_its_briefing_as_the_owners_words() {
    let c = Client::shared();
    let (alice, id, machine) = turn_one_done_with_work(&c);
    let handoff = json!({"runtime": "codex", "objective": "Finish the parser", "purpose": "context is full"});
    let preview = c.post(
        &format!("/v1/handoffs/{id}/turns?dry_run=true"),
        &alice,
        json!({"after": 1, "prompt": "Keep the old API.", "handoff": handoff}),
    );
    assert_eq!(preview.status, 200, "{}", preview.text);
    let words = "\n## The owner's words for this turn\nKeep the old API.\n";
    assert!(preview.body["briefing"].as_str().unwrap().ends_with(words), "{}", preview.body["briefing"]);
    let opened = c.post(
        &format!("/v1/handoffs/{id}/turns"),
        &alice,
        json!({"after": 1, "prompt": "Keep the old API.", "handoff": handoff}),
    );
    assert_eq!(opened.status, 200, "{}", opened.text);
    let briefing = c.send("GET", &format!("/v1/handoffs/{id}/briefing"), Some(&machine), &[], None);
    assert_eq!(briefing.status, 200);
    assert!(briefing.text.ends_with(words), "{}", briefing.text);
    assert_eq!(briefing.text, preview.body["briefing"].as_str().unwrap(), "the preview is the briefing the turn gets");
    // A repeat of that hand-off with its words is the same turn.
    let again = c.post(
        &format!("/v1/handoffs/{id}/turns"),
        &alice,
        json!({"after": 1, "prompt": "Keep the old API.", "handoff": handoff}),
    );
    assert_eq!((again.status, again.version()), (200, opened.version()));
}

#[test]
fn old_prompts_are_dropped_past_the_newest_turns_kept_and_their_entries_say_so() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    let last = PROMPT_TURNS_KEPT_MAX + 3;
    for turn in 1..last {
        c.report(&id, &machine, turn, "done", None);
        let a = open_saying(&c, &id, &alice, turn, Some(&format!("turn {}", turn + 1)));
        assert_eq!(a.status, 200, "{}", a.text);
    }
    let lineage = turns(&c, &id, &alice);
    assert_eq!(lineage.len() as u64, last);
    for t in &lineage {
        let turn = t["turn"].as_u64().unwrap();
        if turn == 1 {
            assert!(t["prompt"].is_null() && t.get("prompt_dropped").is_none(), "turn 1 had no words: {t}");
        } else if turn + PROMPT_TURNS_KEPT_MAX > last {
            assert_eq!(t["prompt"], format!("turn {turn}"));
            assert!(t.get("prompt_dropped").is_none());
        } else {
            assert_eq!((&t["prompt"], &t["prompt_dropped"]), (&Value::Null, &json!(true)), "{t}");
        }
    }
}

#[test]
fn the_largest_open_turn_every_byte_escaped_fits_its_routes_cap_and_is_taken() {
    use handoff_core::limits::{NOTE_BYTES_MAX, OBJECTIVE_BYTES_MAX, PURPOSE_BYTES_MAX};
    let c = Client::shared();
    let (alice, id, _) = turn_one_done_with_work(&c);
    let escaped = |n: usize| "\"".repeat(n);
    let handoff = json!({"runtime": "codex", "objective": escaped(OBJECTIVE_BYTES_MAX), "purpose": escaped(PURPOSE_BYTES_MAX), "note": escaped(NOTE_BYTES_MAX)});
    let body = json!({"after": 1, "prompt": escaped(PROMPT_BYTES_MAX), "handoff": handoff}).to_string();
    assert!(body.len() > 2 * BODY_BYTES_MAX && body.len() <= WORDS_BODY_BYTES_MAX, "{} bytes", body.len());
    let a = c.send("POST", &format!("/v1/handoffs/{id}/turns"), Some(&alice), &[], Some(body.as_bytes()));
    assert_eq!((a.status, a.handoff()["turn"].as_u64()), (200, Some(2)), "{}", &a.text[..a.text.len().min(300)]);
    assert_eq!(a.handoff()["prompt"].as_str().map(str::len), Some(PROMPT_BYTES_MAX));
}
