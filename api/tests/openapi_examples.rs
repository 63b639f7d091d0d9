//! Every example in `docs/openapi.yaml` is read by the type the service reads or answers it
//! with, and written back equal: the contract's examples and the code cannot drift apart.
//! A request example goes through the Worker's own parser (so it is also a valid request);
//! an answer's example is deserialised into its `handoff_api::view` type.
//!
//! The examples are one-line JSON (`example: {…}`), which is YAML too; the test finds each by
//! the operation or schema it sits under, and fails on an example it has no type for.

use handoff_api::input::{self, CancelInput, CreateInput, OpenTurnInput, ReportInput, SteerInput};
use handoff_api::view;
use handoff_core::package::{PackageRequest, RejectInput};
use handoff_core::runtimes::RuntimesInput;
use handoff_core::suggestion::Policy;
use handoff_core::work::{ArtifactInput, BlockerInput, DecisionInput, WorkInput, WorkspaceInput};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Where an example sits: the request body of an operation, or a component schema.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    Request(String),
    Schema(String),
}

fn examples() -> Vec<(Place, usize, Value)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml"))
        .expect("docs/openapi.yaml");
    let mut found = Vec::new();
    let (mut operation, mut schema, mut in_schemas) = (None::<String>, None::<String>, false);
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if line == "  schemas:" {
            in_schemas = true;
        } else if indent <= 2 && !trimmed.is_empty() && line != "  schemas:" {
            in_schemas = false;
        }
        if let Some(id) = trimmed.strip_prefix("operationId: ") {
            operation = Some(id.trim().to_string());
        }
        if in_schemas && indent == 4 && trimmed.ends_with(':') {
            schema = Some(trimmed.trim_end_matches(':').to_string());
        }
        let Some(json) = trimmed.strip_prefix("example: ") else {
            assert!(
                !trimmed.starts_with("example") && !trimmed.starts_with("examples"),
                "line {n}: write an example as `example: <one-line JSON>`"
            );
            continue;
        };
        let value: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("line {n}: the example is not one-line JSON: {e}"));
        let place = if in_schemas {
            Place::Schema(schema.clone().expect("a schema"))
        } else {
            Place::Request(operation.clone().unwrap_or_else(|| panic!("line {n}: an example outside an operation")))
        };
        found.push((place, n, value));
    }
    found
}

/// Read by the service's own parser, then written back.
fn request<T: Serialize>(example: &Value, parse: impl Fn(&[u8]) -> Result<T, handoff_api::error::ApiError>) -> Value {
    let bytes = serde_json::to_vec(example).unwrap();
    let parsed = parse(&bytes).unwrap_or_else(|e| panic!("refused: {} {}", e.code.as_str(), e.message));
    serde_json::to_value(parsed).unwrap()
}

fn checked<T: Serialize + DeserializeOwned + handoff_core::json::Checked>(example: &Value) -> Value {
    request(example, input::parse_body::<T>)
}

/// Read as the answer's type (as the CLI reads it), then written back (as the Worker writes it).
fn answer<T: Serialize + DeserializeOwned>(example: &Value) -> Value {
    let read: T = serde_json::from_value(example.clone()).unwrap_or_else(|e| panic!("not read: {e}"));
    serde_json::to_value(read).unwrap()
}

fn round_trip(place: &Place, example: &Value) -> Option<Value> {
    let v = match place {
        Place::Request(op) => match op.as_str() {
            "createHandoff" => request::<CreateInput>(example, input::parse_create),
            "openTurn" => request::<OpenTurnInput>(example, input::parse_open_turn),
            "report" => request::<ReportInput>(example, input::parse_report),
            "cancelTurn" => request::<CancelInput>(example, input::parse_cancel),
            "steerTurn" => request::<SteerInput>(example, input::parse_steer),
            "setWork" => checked::<WorkInput>(example),
            "recordDecision" => checked::<DecisionInput>(example),
            "recordArtifact" => checked::<ArtifactInput>(example),
            "raiseBlocker" => checked::<BlockerInput>(example),
            "reportWorkspace" => checked::<WorkspaceInput>(example),
            "compilePackage" => checked::<PackageRequest>(example),
            "rejectPackage" => checked::<RejectInput>(example),
            "setPolicy" => checked::<Policy>(example),
            "setRuntimes" => checked::<RuntimesInput>(example),
            "answer" => checked::<handoff_core::question::AnswerInput>(example),
            "postEvents" => checked::<handoff_core::timeline::Batch>(example),
            "createWebhook" => request(example, |body| {
                let read =
                    handoff_api::notifications::parse_webhook_create(body, handoff_notify::Environment::Deployed)?;
                Ok(
                    serde_json::json!({"url": read.url, "events": handoff_api::notifications::event_names(&read.events)}),
                )
            }),
            _ => return None,
        },
        Place::Schema(name) => match name.as_str() {
            "Handoff" => answer::<view::Handoff>(example),
            "Suggestion" => answer::<view::Suggestion>(example),
            "MachineRuntimes" => answer::<view::MachineRuntimes>(example),
            "CreateAnswer" => answer::<view::Created>(example),
            "ListRow" => answer::<view::Row>(example),
            "TurnEntry" => answer::<view::Turn>(example),
            "Work" => answer::<view::Work>(example),
            "Decision" => answer::<view::Decision>(example),
            "Artifact" => answer::<view::Artifact>(example),
            "Blocker" => answer::<view::Blocker>(example),
            "Steer" => answer::<handoff_core::turn::Steer>(example),
            "MachineHandoffs" => answer::<handoff_api::machines::MachineHandoffs>(example),
            _ => return None,
        },
    };
    Some(v)
}

#[test]
fn every_example_in_the_contract_reads_into_its_type_and_writes_back_equal() {
    let examples = examples();
    assert!(examples.len() >= 23, "the examples were not found: {}", examples.len());
    for (place, line, example) in &examples {
        let back = round_trip(place, example)
            .unwrap_or_else(|| panic!("line {line}: no type is named for the example of {place:?}"));
        assert_eq!(&back, example, "line {line} ({place:?}) changed in a round trip");
    }
    let requests = examples.iter().filter(|(p, _, _)| matches!(p, Place::Request(_))).count();
    assert_eq!(requests, 17, "one request example per operation that takes a body");
}
