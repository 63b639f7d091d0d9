//! A scripted model for the real agent harnesses: a local HTTP server that speaks enough of
//! Anthropic's Messages API (for Claude Code) and OpenAI's Responses API (for Codex) to replay
//! one test's script, and records every request, so a test can assert what the model was sent
//! (the briefing as the prompt, a tool's result, the owner's deny note).
//!
//! What each harness asked for was read off its requests (Claude Code 2.1.328, Codex 0.169.0):
//! - Claude Code posts `/v1/messages?beta=true` with `stream: true` and reads the streamed
//!   events `message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta` (with the
//!   `stop_reason`) and `message_stop`; it may count tokens at `/v1/messages/count_tokens` and
//!   send a `HEAD` to the base URL first.
//! - Codex posts `/v1/responses` with `stream: true` and reads `response.created`,
//!   `response.output_item.done` (a `message` or a `function_call`) and `response.completed`.
//!
//! A request moves the script on only when it is the agent's own loop: it offers the agent's
//! shell tool (`Bash` for Claude Code, `exec_command` for Codex). Side requests (a title, a
//! summary) are answered with [`SIDE_TEXT`] and leave the script where it was. With the script
//! spent, the agent's loop is answered [`DONE_TEXT`], so a harness always ends its turn.

use super::http::{Answer, Log, Received, Reply, Server};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most of one request the model reads: a harness's system prompt and tool schemas are
/// a few hundred KiB, and a long transcript more.
pub const MODEL_BODY_BYTES_MAX: usize = 16 * 1024 * 1024;
/// What a side request (no shell tool offered) is answered.
pub const SIDE_TEXT: &str = "Scripted side answer.";
/// What the agent's loop is answered once the script is spent.
pub const DONE_TEXT: &str = "Done: the scripted model has nothing more to do.";

/// One answer of the agent's loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A final text: the turn ends (`end_turn`, or Codex's message).
    Text(String),
    /// A call of tool `name` with `input`: Claude Code's `tool_use` block, Codex's
    /// `function_call`. Its id is `call_N`, N counting from 1 in the order sent.
    Call { name: String, input: Value },
    /// `step`, answered only `ms` milliseconds after its request came: meanwhile the model is
    /// still answering, so a test can act while the harness waits on it.
    Held { ms: u64, step: Box<Step> },
}

impl Step {
    pub fn text(t: &str) -> Step {
        Step::Text(t.to_string())
    }

    /// Claude Code's `Bash` tool running `command`.
    pub fn bash(command: &str) -> Step {
        Step::Call { name: "Bash".into(), input: json!({"command": command, "description": "Scripted command"}) }
    }

    /// Claude Code's `ToolSearch` loading the schemas of `tools`: Claude Code 2.1.328 defers
    /// MCP tools ("calling them directly will fail"), and a model loads them first.
    pub fn load_tools(tools: &[&str]) -> Step {
        Step::Call {
            name: "ToolSearch".into(),
            input: json!({"query": format!("select:{}", tools.join(",")), "max_results": tools.len().max(1)}),
        }
    }

    /// Codex's call of `tool` of the MCP server `server`, which it offers as a namespace.
    pub fn codex_mcp(server: &str, tool: &str, input: Value) -> Step {
        Step::Call { name: format!("mcp__{server}/{tool}"), input }
    }

    /// Codex's `exec_command` running `command`.
    pub fn exec(command: &str) -> Step {
        Step::Call { name: "exec_command".into(), input: json!({"cmd": command}) }
    }

    /// `step`, held `ms` milliseconds before it is answered.
    pub fn held(ms: u64, step: Step) -> Step {
        Step::Held { ms, step: Box::new(step) }
    }

    /// The step answered and how long it is held first.
    fn unheld(self) -> (Duration, Step) {
        match self {
            Step::Held { ms, step } => {
                let (more, step) = step.unheld();
                (Duration::from_millis(ms) + more, step)
            }
            step => (Duration::ZERO, step),
        }
    }

    /// A step written as JSON: `{"text": T}`, `{"bash": COMMAND}`, `{"exec": COMMAND}` or
    /// `{"call": NAME, "input": {…}}`, with `"hold_ms": N` to hold it N ms ([`Step::Held`]).
    pub fn from_json(v: &Value) -> Result<Step, String> {
        let step = Step::unheld_from_json(v)?;
        match &v["hold_ms"] {
            Value::Null => Ok(step),
            ms => ms.as_u64().map(|ms| Step::held(ms, step)).ok_or_else(|| format!("hold_ms: whole milliseconds: {v}")),
        }
    }

    fn unheld_from_json(v: &Value) -> Result<Step, String> {
        if let Some(t) = v["text"].as_str() {
            return Ok(Step::text(t));
        }
        if let Some(c) = v["bash"].as_str() {
            return Ok(Step::bash(c));
        }
        if let Some(c) = v["exec"].as_str() {
            return Ok(Step::exec(c));
        }
        match (v["call"].as_str(), v.get("input")) {
            (Some(name), Some(input)) => Ok(Step::Call { name: name.into(), input: input.clone() }),
            _ => Err(format!("not a step: {v}")),
        }
    }
}

/// Which API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    Responses,
    Other,
}

/// One request as the model received it.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub method: String,
    pub path: String,
    pub api: Api,
    /// The body as JSON (`Null` when it is not).
    pub body: Value,
    /// It offered the shell tool: the agent's own loop.
    pub agent: bool,
}

impl ModelRequest {
    /// Every text the request carries in its messages (the prompt, tool results, notes), joined.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        collect_text(self.body.get("messages").or_else(|| self.body.get("input")).unwrap_or(&Value::Null), &mut out);
        out.join("\n")
    }
}

fn collect_text(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "type" | "id" | "role" | "cache_control"))
            .for_each(|(_, v)| collect_text(v, out)),
        _ => {}
    }
}

/// The steps still to send, one queue per API, so that one model can serve a chain of
/// harnesses (Codex's turn, then Claude Code's).
#[derive(Debug, Default)]
struct Script {
    messages: VecDeque<Step>,
    responses: VecDeque<Step>,
}

pub struct ScriptedModel {
    server: Server,
    requests: Arc<Log<ModelRequest>>,
    script: Arc<Mutex<Script>>,
}

impl ScriptedModel {
    /// Starts a model that answers the agent's loop with `steps`, in order, over whichever API
    /// the harness speaks.
    pub fn start(steps: Vec<Step>) -> ScriptedModel {
        ScriptedModel::start_per_api(steps.clone(), steps)
    }

    /// Starts a model that answers Claude Code's loop (the Messages API) with `messages` and
    /// Codex's (the Responses API) with `responses`.
    pub fn start_per_api(messages: Vec<Step>, responses: Vec<Step>) -> ScriptedModel {
        let requests = Arc::new(Log::new());
        let script = Arc::new(Mutex::new(Script { messages: messages.into(), responses: responses.into() }));
        let calls = Arc::new(Mutex::new(0u64));
        let (log, steps) = (Arc::clone(&requests), Arc::clone(&script));
        let server =
            Server::start_with_bodies(MODEL_BODY_BYTES_MAX, move |r: Received| answer(r, &log, &steps, &calls));
        ScriptedModel { server, requests, script }
    }

    /// The base URL Claude Code takes (`ANTHROPIC_BASE_URL`).
    pub fn anthropic_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.server.port)
    }

    /// The base URL of Codex's provider (`base_url`).
    pub fn openai_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.server.port)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.all()
    }

    /// The agent's requests so far.
    pub fn agent_requests(&self) -> Vec<ModelRequest> {
        self.requests().into_iter().filter(|r| r.agent).collect()
    }

    /// The steps not yet sent, of both APIs.
    pub fn left(&self) -> usize {
        let script = self.script.lock().unwrap();
        script.messages.len() + script.responses.len()
    }

    /// The result the harness sent back for call `call_id` (Claude Code's `tool_result`
    /// content, Codex's `function_call_output` output), as the model saw it first; waits up to
    /// `timeout` for it.
    pub fn result_of(&self, call_id: &str, timeout: Duration) -> Option<Value> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let found = self.requests().iter().find_map(|r| find_result(&r.body, call_id));
            if found.is_some() || std::time::Instant::now() >= deadline {
                return found;
            }
            self.requests.wait_for(
                self.requests().len() + 1,
                deadline.saturating_duration_since(std::time::Instant::now()).min(Duration::from_millis(500)),
            );
        }
    }
}

/// A tool's result for `call_id` in a request body: the block's `content` or the item's `output`.
pub fn find_result(body: &Value, call_id: &str) -> Option<Value> {
    let messages = body["messages"].as_array().into_iter().flatten();
    let blocks = messages.filter_map(|m| m["content"].as_array()).flatten();
    let claude = blocks
        .filter(|b| b["type"] == "tool_result" && b["tool_use_id"] == call_id)
        .map(|b| b["content"].clone())
        .next();
    claude.or_else(|| {
        body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
            .map(|i| i["output"].clone())
    })
}

fn answer(r: Received, log: &Log<ModelRequest>, script: &Mutex<Script>, calls: &Mutex<u64>) -> Answer {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    let path = r.path.split('?').next().unwrap_or("").to_string();
    let api = match (r.method.as_str(), path.as_str()) {
        ("POST", "/v1/messages") => Api::Messages,
        ("POST", "/v1/responses") => Api::Responses,
        _ => Api::Other,
    };
    let offers = |name: &str| body["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == name));
    let agent = match api {
        Api::Messages => offers("Bash"),
        Api::Responses => offers("exec_command"),
        Api::Other => false,
    };
    log.add(ModelRequest { method: r.method.clone(), path: r.path.clone(), api, body: body.clone(), agent });
    let json_answer = |status: u16, v: Value| {
        (Reply::Status(status), vec![("content-type", "application/json".to_string())], v.to_string().into_bytes())
    };
    match api {
        Api::Other if r.method == "HEAD" => (Reply::Status(200), Vec::new(), Vec::new()),
        Api::Other if path == "/v1/messages/count_tokens" => {
            json_answer(200, json!({"input_tokens": body.to_string().len() / 4}))
        }
        Api::Other => json_answer(
            404,
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("the scripted model serves no {} {}", r.method, r.path)}}),
        ),
        Api::Messages | Api::Responses => {
            let next = |script: &mut Script| {
                if api == Api::Messages {
                    script.messages.pop_front()
                } else {
                    script.responses.pop_front()
                }
            };
            let step = if agent {
                next(&mut script.lock().unwrap()).unwrap_or_else(|| Step::text(DONE_TEXT))
            } else {
                Step::text(SIDE_TEXT)
            };
            // Each request has a thread of its own: a held answer holds up no other request.
            let (hold, step) = step.unheld();
            std::thread::sleep(hold);
            let id = match &step {
                Step::Call { .. } => {
                    let mut n = calls.lock().unwrap();
                    *n += 1;
                    format!("call_{n}")
                }
                Step::Text(_) | Step::Held { .. } => String::new(),
            };
            let model = body["model"].as_str().unwrap_or("scripted").to_string();
            let events =
                if api == Api::Messages { messages_events(&step, &id, &model) } else { responses_events(&step, &id) };
            if body["stream"] == true {
                let sse: String =
                    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
                (Reply::Status(200), vec![("content-type", "text/event-stream".to_string())], sse.into_bytes())
            } else {
                json_answer(200, whole_message(&step, &id, &model))
            }
        }
    }
}

/// The Messages API's stream of one answer.
fn messages_events(step: &Step, id: &str, model: &str) -> Vec<(&'static str, Value)> {
    let usage = json!({"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let start = json!({"type": "message_start", "message": {"id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}});
    let (block, delta, stop) = match step {
        Step::Held { step, .. } => return messages_events(step, id, model),
        Step::Text(text) => {
            (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": text}), "end_turn")
        }
        Step::Call { name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
    };
    vec![
        ("message_start", start),
        ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": block})),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": delta})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 10}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A Messages API answer, not streamed.
fn whole_message(step: &Step, id: &str, model: &str) -> Value {
    let (content, stop) = match step {
        Step::Held { step, .. } => return whole_message(step, id, model),
        Step::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Step::Call { name, input } => {
            (json!([{"type": "tool_use", "id": id, "name": name, "input": input}]), "tool_use")
        }
    };
    json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": model, "content": content, "stop_reason": stop, "usage": {"input_tokens": 100, "output_tokens": 10}})
}

/// The Responses API's stream of one answer.
fn responses_events(step: &Step, id: &str) -> Vec<(&'static str, Value)> {
    let item = match step {
        Step::Held { step, .. } => return responses_events(step, id),
        Step::Text(text) => {
            json!({"type": "message", "role": "assistant", "id": "msg_scripted", "content": [{"type": "output_text", "text": text}]})
        }
        // A tool of a namespace (Codex offers an MCP server's tools as the namespace
        // `mcp__<server>`), written `namespace/tool`.
        Step::Call { name, input } => match name.split_once('/') {
            Some((namespace, tool)) => {
                json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "namespace": namespace, "name": tool, "arguments": input.to_string()})
            }
            None => {
                json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name, "arguments": input.to_string()})
            }
        },
    };
    let usage = json!({"input_tokens": 100, "input_tokens_details": null, "output_tokens": 10, "output_tokens_details": null, "total_tokens": 110});
    vec![
        ("response.created", json!({"type": "response.created", "response": {"id": "resp_scripted"}})),
        ("response.output_item.done", json!({"type": "response.output_item.done", "item": item})),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_scripted", "usage": usage}}),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_is_found_in_either_api() {
        let claude = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "ran"}]}]});
        assert_eq!(find_result(&claude, "call_1"), Some(json!("ran")));
        assert_eq!(find_result(&claude, "call_2"), None);
        let codex = json!({"input": [{"type": "function_call_output", "call_id": "call_3", "output": "exit 0"}]});
        assert_eq!(find_result(&codex, "call_3"), Some(json!("exit 0")));
    }

    #[test]
    fn a_held_step_is_answered_as_its_step_after_its_hold_and_reads_from_json() {
        let held = Step::held(5, Step::held(7, Step::bash("ls")));
        assert_eq!(held.clone().unheld(), (Duration::from_millis(12), Step::bash("ls")));
        assert_eq!(Step::from_json(&json!({"text": "hi", "hold_ms": 9})), Ok(Step::held(9, Step::text("hi"))));
        assert!(Step::from_json(&json!({"text": "hi", "hold_ms": "soon"})).is_err());
        assert_eq!(messages_events(&held, "call_1", "m"), messages_events(&Step::bash("ls"), "call_1", "m"));
    }

    #[test]
    fn a_call_streams_as_a_tool_use_that_stops_for_its_result() {
        let events = messages_events(&Step::bash("ls"), "call_1", "m");
        assert_eq!(events[1].1["content_block"]["id"], "call_1");
        assert_eq!(
            serde_json::from_str::<Value>(events[2].1["delta"]["partial_json"].as_str().unwrap()).unwrap()["command"],
            "ls"
        );
        assert_eq!(events[4].1["delta"]["stop_reason"], "tool_use");
        let codex = responses_events(&Step::exec("ls"), "call_2");
        assert_eq!(
            (codex[1].1["item"]["type"].as_str(), codex[1].1["item"]["call_id"].as_str()),
            (Some("function_call"), Some("call_2"))
        );
    }
}
