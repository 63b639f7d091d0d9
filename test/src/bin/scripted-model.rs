//! The scripted model as a program, for `scripts/rehearse`: serves a script to the real
//! harnesses on 127.0.0.1 and writes down what it is sent.
//!
//!   scripted-model --script FILE --log FILE [--max-s N]
//!
//! FILE is `{"messages": [STEP…], "responses": [STEP…]}` (Claude Code's steps, Codex's), each
//! step as `Step::from_json` reads it. It prints its base address (`http://127.0.0.1:PORT`) on
//! a line of standard output, appends every request to the log as one JSON line
//! (`{"api", "agent", "text", "body"}`), and exits after `--max-s` seconds (default 900) so
//! that a run that forgets it leaves nothing behind.

use handoff_it::peers::scripted_model::{Api, ScriptedModel, Step};
use std::io::Write;
use std::time::{Duration, Instant};

/// The longest the model serves when `--max-s` does not say.
const MODEL_SERVE_S_DEFAULT: u64 = 900;

fn main() {
    if let Err(e) = run() {
        eprintln!("scripted-model: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let script = value("--script").ok_or("usage: scripted-model --script FILE --log FILE [--max-s N]")?;
    let log = value("--log").ok_or("--log FILE is required")?;
    let max_s = value("--max-s")
        .map(|s| s.parse::<u64>().map_err(|_| format!("--max-s {s}: whole seconds")))
        .transpose()?
        .unwrap_or(MODEL_SERVE_S_DEFAULT);
    let text = std::fs::read_to_string(&script).map_err(|e| format!("{script}: {e}"))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{script}: {e}"))?;
    let steps = |key: &str| -> Result<Vec<Step>, String> {
        doc[key].as_array().into_iter().flatten().map(Step::from_json).collect()
    };
    let model = ScriptedModel::start_per_api(steps("messages")?, steps("responses")?);
    println!("{}", model.anthropic_url());
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut out =
        std::fs::OpenOptions::new().create(true).append(true).open(&log).map_err(|e| format!("{log}: {e}"))?;
    let (started, mut written) = (Instant::now(), 0);
    while started.elapsed() < Duration::from_secs(max_s) {
        let requests = model.requests();
        for r in &requests[written..] {
            let api = match r.api {
                Api::Messages => "messages",
                Api::Responses => "responses",
                Api::Other => "other",
            };
            let line =
                serde_json::json!({"api": api, "agent": r.agent, "path": r.path, "text": r.text(), "body": r.body});
            writeln!(out, "{line}").map_err(|e| format!("{log}: {e}"))?;
        }
        written = requests.len();
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
