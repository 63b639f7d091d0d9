//! The route table and `docs/openapi.yaml` name the same routes: every documented operation is
//! a row of `handoff_api::routes::ROUTES`, and every row the Worker always serves is documented.
//! The test and bench routes (behind a switch) are the only ones the contract leaves out.

use handoff_api::routes::{Gate, ROUTES};
use std::collections::BTreeSet;

/// `(METHOD, /path/{param})` of every operation in the document, read from its `paths:` block.
fn documented() -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml"))
        .expect("docs/openapi.yaml");
    let mut found = BTreeSet::new();
    let mut in_paths = false;
    let mut path: Option<String> = None;
    for line in text.lines() {
        if line == "paths:" {
            in_paths = true;
            continue;
        }
        if in_paths && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent == 2 && trimmed.starts_with('/') && trimmed.ends_with(':') {
            path = Some(trimmed.trim_end_matches(':').to_string());
        } else if indent == 4 {
            let method = trimmed.trim_end_matches(':');
            if ["get", "post", "put", "delete", "patch"].contains(&method) {
                let path = path.clone().expect("a method under a path");
                found.insert((method.to_uppercase(), path));
            }
        }
    }
    found
}

/// The table's routes, with `{id}` and `{bid}` as the document writes them.
fn served(gate: Gate) -> BTreeSet<(String, String)> {
    ROUTES.iter().filter(|r| r.gate == gate).map(|r| (r.method.to_string(), r.path.to_string())).collect()
}

#[test]
fn every_documented_operation_is_a_route_and_every_route_always_served_is_documented() {
    let documented = documented();
    assert!(documented.len() >= 25, "the document's operations were not found: {documented:?}");
    let served = served(Gate::Always);
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(undocumented.is_empty(), "routes the contract does not document: {undocumented:?}");
    assert!(unserved.is_empty(), "documented operations with no route: {unserved:?}");
}

#[test]
fn the_switched_routes_are_under_test_and_bench_and_undocumented() {
    let documented = documented();
    for gate in [Gate::TestHooks, Gate::BenchFloor] {
        for (method, path) in served(gate) {
            assert!(
                path.starts_with("/v1/test/") || path.starts_with("/v1/bench/"),
                "{method} {path} is behind a switch"
            );
            assert!(
                !documented.contains(&(method.clone(), path.clone())),
                "{method} {path} is documented but switched"
            );
        }
    }
}
