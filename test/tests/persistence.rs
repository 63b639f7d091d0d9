//! Persistence (issue 2): stop the local server, start it again on the same state, and the
//! record and its version are intact.

use handoff_it::{owner, temp_state, unique, Server};
use serde_json::json;

#[test]
fn a_restarted_worker_has_every_record_and_version_it_acknowledged() {
    let state = temp_state("persist");
    let mut server = Server::start(&state, None);
    let c = server.client();
    let alice = owner(&unique("alice"));
    let (id, machine, _) = c.create(&alice);
    c.report(&id, &machine, 1, "done", Some("persisted"));
    c.post(&format!("/v1/handoffs/{id}/turns"), &alice, json!({"after": 1}));
    let before = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(before.version(), 3);

    server.restart();
    let c = server.client();
    let after = c.get(&format!("/v1/handoffs/{id}"), &alice);
    assert_eq!(after.handoff(), before.handoff(), "the record survives a restart whole");
    let next = c.report(&id, &machine, 2, "needs-you", None);
    assert_eq!(next.version(), 4, "the version goes on from where it was");
    let listed = c.get("/v1/handoffs", &alice);
    assert_eq!(listed.body["handoffs"][0]["version"], 4);
}
