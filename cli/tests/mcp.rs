//! `handoff mcp` over its standard input and output, as an MCP client speaks to it, against the
//! real local Worker: the lifecycle, every tool's success and refusal, the resources,
//! cancellation, and a malformed message.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// The longest one answer of the server may take in these tests.
const ANSWER_S_MAX: u64 = 30;

/// A running `handoff mcp` and the lines it wrote.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    /// Messages read while waiting for another.
    held: Vec<Value>,
}

impl Server {
    fn start(id: &str, token: &str) -> Server {
        let mut child = command(Some(token), &["mcp"])
            .env("HANDOFF_ID", id)
            .env("HANDOFF_STATE_DIR", std::env::temp_dir().join(unique("handoff-mcp-state")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parsed = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {line}"));
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        let mut s = Server { child, stdin, lines, held: Vec::new() };
        let init = s.request(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "handoff-test", "version": "1"}}));
        assert_eq!(init["result"]["serverInfo"]["name"], "handoff", "{init}");
        s.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message matching `wanted` within `timeout`; `None` if none came.
    fn next_matching(&mut self, timeout: Duration, wanted: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(i) = self.held.iter().position(&wanted) {
            return Some(self.held.remove(i));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.lines.recv_timeout(left).ok()?;
            if wanted(&message) {
                return Some(message);
            }
            self.held.push(message);
        }
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        self.next_matching(Duration::from_secs(ANSWER_S_MAX), |m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {method} ({id})"))
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": arguments}))["result"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A hand-off with its work set, and its machine token.
fn session() -> (String, String, String) {
    let owner = owner();
    let (id, machine) = create(&owner);
    set_parser_work(&owner, &id);
    (owner, id, machine)
}

#[test]
fn without_its_variables_the_server_does_not_start_and_names_what_is_missing() {
    let out = command(None, &["mcp"]).env_remove("HANDOFF_URL").env_remove("HANDOFF_ID").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("HANDOFF_URL, HANDOFF_ID, HANDOFF_TOKEN not set"), "{stderr}");
}

#[test]
fn it_lists_seven_typed_tools_and_the_read_only_ones_say_so() {
    let (_, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    let tools = s.request(1, "tools/list", json!({}))["result"]["tools"].as_array().unwrap().clone();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["add_artifact", "ask_owner", "get_briefing", "get_handoff", "raise_blocker", "record_decision", "report"]
    );
    for t in &tools {
        let read_only = t["annotations"]["readOnlyHint"] == true;
        assert_eq!(read_only, matches!(t["name"].as_str(), Some("get_handoff" | "get_briefing")), "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    let report = tools.iter().find(|t| t["name"] == "report").unwrap();
    assert_eq!(report["inputSchema"]["required"], json!(["status"]), "{report}");
}

#[test]
fn each_tool_records_on_the_hand_off_and_answers_text_and_structured_content() {
    let (owner, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    let got = s.call(1, "get_handoff", json!({}));
    assert_eq!(
        (got["isError"].as_bool(), got["structuredContent"]["handoff"]["id"].as_str()),
        (Some(false), Some(id.as_str())),
        "{got}"
    );
    assert!(got["content"][0]["text"].as_str().unwrap().contains("turn 1 running"), "{got}");
    let briefing = s.call(2, "get_briefing", json!({"budget_bytes": 4096}));
    assert!(briefing["content"][0]["text"].as_str().unwrap().contains("Parse the config file"), "{briefing}");
    let decided = s.call(3, "record_decision", json!({"statement": "Parse line by line", "rationale": "small files"}));
    assert_eq!(decided["structuredContent"]["decision"]["id"], "dec_1", "{decided}");
    let artifact = s.call(4, "add_artifact", json!({"type": "file", "title": "parser.rs", "uri": "src/parser.rs"}));
    assert_eq!(artifact["structuredContent"]["artifact"]["id"], "art_1", "{artifact}");
    let blocker = s.call(5, "raise_blocker", json!({"severity": "low", "title": "no sample config"}));
    assert_eq!(blocker["structuredContent"]["blocker"]["severity"], "low", "{blocker}");
    let done = s.call(6, "report", json!({"status": "done", "summary": "Parser written", "unmet": [0]}));
    assert_eq!(done["structuredContent"]["handoff"]["status"], "done", "{done}");
    let (_, work) = api_get(&owner, &format!("/v1/handoffs/{id}/work"));
    let work = &work["work"];
    assert_eq!(
        (
            work["decisions"].as_array().unwrap().len(),
            work["artifacts"].as_array().unwrap().len(),
            work["blockers"].as_array().unwrap().len()
        ),
        (1, 1, 1),
        "{work}"
    );
    let r = record(&owner, &id);
    assert_eq!((r["status"].as_str(), r["summary"].as_str()), (Some("done"), Some("Parser written")), "{r}");
}

#[test]
fn an_api_refusal_is_a_tool_error_naming_its_code_and_the_server_serves_on() {
    let (_, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    assert_eq!(s.call(1, "report", json!({"status": "done", "summary": "first"}))["isError"], false);
    let late = s.call(2, "report", json!({"status": "failed", "summary": "second"}));
    assert_eq!(
        (late["isError"].as_bool(), late["structuredContent"]["code"].as_str()),
        (Some(true), Some("handoff.turn_finished")),
        "{late}"
    );
    assert!(late["content"][0]["text"].as_str().unwrap().starts_with("refused: handoff.turn_finished"), "{late}");
    // Another hand-off's token: every tool is refused with the API's code, none crashes.
    let (_, other, _) = session();
    let mut wrong = Server::start(&other, &machine);
    let calls = [
        ("get_handoff", json!({})),
        ("get_briefing", json!({})),
        ("record_decision", json!({"statement": "x"})),
        ("add_artifact", json!({"type": "file", "title": "t", "uri": "u"})),
        ("raise_blocker", json!({"severity": "high", "title": "t"})),
        ("report", json!({"status": "running"})),
        ("ask_owner", json!({"question": "q?", "options": ["a"], "wait_s": 1})),
    ];
    for (n, (tool, args)) in calls.into_iter().enumerate() {
        let refused = wrong.call(10 + n as u64, tool, args);
        assert_eq!(refused["isError"], true, "{tool}: {refused}");
        assert!(
            refused["structuredContent"]["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("auth.") || c == "handoff.not_found"),
            "{tool}: {refused}"
        );
    }
    // Arguments of the wrong shape are the tool's error too.
    let bad = s.call(3, "report", json!({"status": "finished"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(s.request(4, "ping", json!({}))["result"].is_object(), "the server serves on");
}

#[test]
fn ask_owner_answers_the_owners_choice_or_that_no_answer_came() {
    let (owner, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    s.send_line(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask_owner", "arguments": {"question": "Postgres or SQLite?", "options": ["Postgres", "SQLite"], "wait_s": 30}}}).to_string());
    let asked = {
        let deadline = Instant::now() + Duration::from_secs(ANSWER_S_MAX);
        loop {
            let r = record(&owner, &id);
            if r["question"]["kind"] == "choice" {
                break r;
            }
            assert!(Instant::now() < deadline, "the question was not asked: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let options: Vec<&str> =
        asked["question"]["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(options, ["Postgres", "SQLite"]);
    ok(Some(&owner), &["answer", &id, "1", "--question", asked["question"]["id"].as_str().unwrap()]);
    let answered =
        s.next_matching(Duration::from_secs(ANSWER_S_MAX), |m| m["id"] == 1).expect("the answer")["result"].clone();
    assert_eq!(
        answered["structuredContent"],
        json!({"answered": true, "option": "1", "label": "Postgres", "note": null}),
        "{answered}"
    );
    assert_eq!(answered["content"][0]["text"], "The owner answered: Postgres");
    let unanswered = s.call(2, "ask_owner", json!({"question": "Anything else?", "options": ["no"], "wait_s": 1}));
    assert_eq!(
        (unanswered["isError"].as_bool(), unanswered["structuredContent"]["answered"].as_bool()),
        (Some(false), Some(false)),
        "{unanswered}"
    );
    assert!(
        unanswered["content"][0]["text"].as_str().unwrap().contains("Go on or stop as you see fit"),
        "{unanswered}"
    );
}

#[test]
fn a_cancelled_ask_gets_no_answer_and_takes_its_question_back() {
    let (owner, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    s.send_line(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_owner", "arguments": {"question": "Go on?", "options": ["yes", "no"], "wait_s": 60}}}).to_string());
    let deadline = Instant::now() + Duration::from_secs(ANSWER_S_MAX);
    while record(&owner, &id)["question"].is_null() {
        assert!(Instant::now() < deadline, "the question was not asked");
        std::thread::sleep(Duration::from_millis(100));
    }
    s.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "the user moved on"}}).to_string());
    let withdrawn = {
        let deadline = Instant::now() + Duration::from_secs(ANSWER_S_MAX);
        loop {
            let r = record(&owner, &id);
            if r["question"].is_null() {
                break r;
            }
            assert!(Instant::now() < deadline, "the question stayed: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(withdrawn["status"], "running", "{withdrawn}");
    assert!(s.next_matching(Duration::from_secs(2), |m| m["id"] == 7).is_none(), "a cancelled request is not answered");
    assert!(s.request(8, "ping", json!({}))["result"].is_object(), "the server serves on");
}

#[test]
fn a_malformed_message_is_answered_with_a_parse_error_and_the_server_serves_on() {
    let (_, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    s.send_line("{not json");
    let error =
        s.next_matching(Duration::from_secs(ANSWER_S_MAX), |m| m["error"]["code"] == -32700).expect("a parse error");
    assert!(error["id"].is_null(), "{error}");
    let unknown = s.request(1, "tools/call", json!({"name": "no_such_tool", "arguments": {}}));
    assert!(unknown["error"].is_object() || unknown["result"]["isError"] == true, "{unknown}");
    assert!(s.request(2, "ping", json!({}))["result"].is_object(), "the server serves on");
}

#[test]
fn the_briefing_and_the_package_are_resources_of_the_current_turn() {
    let (owner, id, machine) = session();
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "set up"]);
    ok(Some(&owner), &["turn", &id, "--to", "codex", "--objective", "Write the parser", "--purpose", "start the work"]);
    let mut s = Server::start(&id, &machine);
    let listed = s.request(1, "resources/list", json!({}));
    let uris: Vec<&str> =
        listed["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, ["handoff://briefing", "handoff://package.md", "handoff://package.json"]);
    let package = s.request(2, "resources/read", json!({"uri": "handoff://package.json"}));
    let text = package["result"]["contents"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap()["package"]["next"]["objective"],
        "Write the parser",
        "{text}"
    );
    let markdown = s.request(3, "resources/read", json!({"uri": "handoff://package.md"}));
    assert_eq!(markdown["result"]["contents"][0]["mimeType"], "text/markdown");
    let briefing = s.request(4, "resources/read", json!({"uri": "handoff://briefing"}));
    assert!(briefing["result"]["contents"][0]["text"].as_str().unwrap().contains("Write the parser"), "{briefing}");
    let missing = s.request(5, "resources/read", json!({"uri": "handoff://nothing"}));
    assert!(missing["error"].is_object(), "{missing}");
}

#[test]
fn a_report_for_a_turn_that_moved_on_is_refused_stale_and_lands_on_no_other_turn() {
    // The server reports on the turn its session was started for, never on a later one (which
    // may have been handed to another runtime).
    let (owner, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    assert_eq!(s.call(1, "get_handoff", json!({}))["isError"], false);
    ok(Some(&machine), &["report", &id, "--turn", "1", "--status", "done", "--summary", "by hand"]);
    ok(Some(&owner), &["turn", &id]);
    let late = s.call(2, "report", json!({"status": "done", "summary": "late"}));
    assert_eq!(
        (late["isError"].as_bool(), late["structuredContent"]["code"].as_str()),
        (Some(true), Some("handoff.stale")),
        "{late}"
    );
    let asked = s.call(3, "ask_owner", json!({"question": "q?", "options": ["a"], "wait_s": 1}));
    assert_eq!(asked["structuredContent"]["code"], "handoff.stale", "{asked}");
    let r = record(&owner, &id);
    assert_eq!(
        (r["turn"].as_u64(), r["status"].as_str(), r["question"].is_null()),
        (Some(2), Some("running"), true),
        "{r}"
    );
}

#[test]
fn ask_owner_never_cuts_a_long_question_the_owner_reads_it_whole_as_its_input() {
    let (owner, id, machine) = session();
    let mut s = Server::start(&id, &machine);
    let question = format!(
        "Which migration should run first?\r\n{}\nThe last line decides it.",
        "Some context on the tables. ".repeat(60)
    );
    s.send_line(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask_owner", "arguments": {"question": question, "options": ["users", "orders"], "wait_s": 30}}}).to_string());
    let deadline = Instant::now() + Duration::from_secs(ANSWER_S_MAX);
    let asked = loop {
        let r = record(&owner, &id);
        if r["question"]["kind"] == "choice" {
            break r;
        }
        assert!(Instant::now() < deadline, "the question was not asked: {r}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = asked["question"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Which migration should run first?…")
            && text.len() <= handoff_core::limits::QUESTION_TEXT_BYTES_MAX,
        "{text}"
    );
    assert_eq!(asked["question"]["input"], question.replace("\r\n", "\n"), "the whole question, CRLF as LF");
    let shown = ok(Some(&owner), &["show", &id, "--question"]);
    assert!(shown.ends_with("The last line decides it.\n"), "{shown}");
    ok(Some(&owner), &["answer", &id, "2", "--question", asked["question"]["id"].as_str().unwrap()]);
    let answered =
        s.next_matching(Duration::from_secs(ANSWER_S_MAX), |m| m["id"] == 1).expect("the answer")["result"].clone();
    assert_eq!(answered["structuredContent"]["label"], "orders", "{answered}");
    let huge = s.call(2, "ask_owner", json!({"question": "x".repeat(handoff_core::limits::QUESTION_INPUT_BYTES_MAX + 1), "options": ["yes"], "wait_s": 1}));
    assert_eq!(huge["isError"], true, "{huge}");
    assert!(huge["structuredContent"]["message"].as_str().unwrap().contains("bytes"), "the model is told why: {huge}");
}

#[test]
fn the_server_reads_its_token_from_the_file_handoff_token_file_names() {
    let (owner, id, machine) = session();
    let file = std::env::temp_dir().join(unique("handoff-mcp-token")).join("ho.token");
    handoff_cli::client::write_token_file(&file, &machine).unwrap();
    let mut child = command(None, &["mcp"])
        .env("HANDOFF_ID", &id)
        .env("HANDOFF_TOKEN_FILE", &file)
        .env("HANDOFF_STATE_DIR", std::env::temp_dir().join(unique("handoff-mcp-state")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "report", "arguments": {"status": "done", "summary": "through the file"}}});
    writeln!(stdin, "{init}\n{}\n{call}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    let deadline = Instant::now() + Duration::from_secs(ANSWER_S_MAX);
    while record(&owner, &id)["summary"] != "through the file" {
        assert!(Instant::now() < deadline, "the server did not report with the file's token: {}", record(&owner, &id));
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stdin);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
