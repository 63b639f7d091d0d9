//! What a Claude Code transcript says at a `Stop`: the last assistant message, the context
//! its last API call used, and whether the turn ended on an API error such as a usage limit.
//!
//! The transcript is JSON lines. Assistant lines carry `message.content` (blocks, the text
//! ones with `text`), `message.model` and `message.usage` (`input_tokens`,
//! `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`). One API message
//! may span several lines that repeat its usage, so the last line's usage is the one that
//! counts, never a sum. An API error is a synthetic assistant line with `isApiErrorMessage:
//! true`. Only the tail of the file is read ([`TRANSCRIPT_TAIL_BYTES_MAX`]): a long session's
//! transcript grows without bound, and the end is all a stop needs.

use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The most of a transcript's end that a hook reads.
pub const TRANSCRIPT_TAIL_BYTES_MAX: u64 = 1024 * 1024;
/// A model's context window unless its id says otherwise (Claude Code's documented default).
pub const CONTEXT_WINDOW_TOKENS_DEFAULT: u64 = 200_000;
/// The window of a model whose id ends in `[1m]` (Claude Code's extended context).
pub const CONTEXT_WINDOW_TOKENS_EXTENDED: u64 = 1_000_000;

/// The end of a session, as its transcript tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    /// The text of the last assistant message that had any (its text blocks joined).
    pub last_text: Option<String>,
    /// Tokens in the context at the last API call: input, cache reads and cache writes.
    pub context_used: Option<u64>,
    /// The model of that call.
    pub model: Option<String>,
    /// The last line was an API error: its text.
    pub api_error: Option<String>,
}

/// Reads the end of the transcript at `path`; an unreadable file is an empty tail.
pub fn read(path: &Path) -> std::io::Result<Tail> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TRANSCRIPT_TAIL_BYTES_MAX);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(TRANSCRIPT_TAIL_BYTES_MAX).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    // A read that starts mid-file starts mid-line: that first piece is not a line.
    let text = if start > 0 { text.split_once('\n').map_or("", |(_, rest)| rest) } else { &text };
    Ok(tail_of(text))
}

/// The tail of a transcript's text.
pub fn tail_of(text: &str) -> Tail {
    let mut tail = Tail::default();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
        if entry["type"] != "assistant" || entry["isSidechain"] == true {
            continue;
        }
        let message = &entry["message"];
        let text = text_of(message);
        if entry["isApiErrorMessage"] == true {
            tail.api_error = Some(text.unwrap_or_else(|| "API error".into()));
            continue;
        }
        tail.api_error = None;
        if let Some(text) = text {
            tail.last_text = Some(text);
        }
        if let Some(used) = context_used(&message["usage"]) {
            tail.context_used = Some(used);
            tail.model = message["model"].as_str().map(str::to_string);
        }
    }
    tail
}

fn text_of(message: &Value) -> Option<String> {
    let blocks = message["content"].as_array()?;
    let texts: Vec<&str> = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect();
    let joined = texts.join("\n");
    let trimmed = joined.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

fn context_used(usage: &Value) -> Option<u64> {
    let input = usage["input_tokens"].as_u64()?;
    let cache_read = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
    let cache_write = usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
    Some(input + cache_read + cache_write)
}

/// The context window of `model`; `configured` (the `HANDOFF_CONTEXT_WINDOW` setting) wins.
pub fn context_window(model: Option<&str>, configured: Option<u64>) -> u64 {
    match (configured, model) {
        (Some(tokens), _) if tokens > 0 => tokens,
        (_, Some(m)) if m.ends_with("[1m]") => CONTEXT_WINDOW_TOKENS_EXTENDED,
        _ => CONTEXT_WINDOW_TOKENS_DEFAULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(id: &str, text: Option<&str>, input: u64, cache_read: u64) -> String {
        let content = match text {
            Some(t) => serde_json::json!([{"type": "text", "text": t}]),
            None => serde_json::json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]),
        };
        serde_json::json!({
            "type": "assistant",
            "message": {"id": id, "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
                "usage": {"input_tokens": input, "cache_creation_input_tokens": 100, "cache_read_input_tokens": cache_read, "output_tokens": 50}},
        })
        .to_string()
    }

    #[test]
    fn the_last_text_and_the_last_calls_context_are_read_not_summed() {
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"fix the parser"}}"#.to_string(),
            assistant("m1", Some("Looking at it."), 10, 1_000),
            assistant("m2", Some("Fixed: the parser handles empty input."), 20, 5_000),
            assistant("m2", None, 20, 5_000),
            "not json".to_string(),
        ];
        let tail = tail_of(&lines.join("\n"));
        assert_eq!(tail.last_text.as_deref(), Some("Fixed: the parser handles empty input."));
        assert_eq!(tail.context_used, Some(20 + 100 + 5_000), "the last line's usage, output excluded");
        assert_eq!(tail.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(tail.api_error, None);
    }

    #[test]
    fn a_session_that_ends_on_an_api_error_says_so_and_a_later_answer_clears_it() {
        let error = r#"{"type":"assistant","isApiErrorMessage":true,"error":"rate_limit","message":{"model":"<synthetic>","content":[{"type":"text","text":"You've hit your session limit · resets 3:45pm"}]}}"#;
        let tail = tail_of(&[assistant("m1", Some("Working."), 10, 10), error.to_string()].join("\n"));
        assert_eq!(tail.api_error.as_deref(), Some("You've hit your session limit · resets 3:45pm"));
        assert_eq!(tail.last_text.as_deref(), Some("Working."), "an error is not the assistant's message");
        let later = tail_of(&[error.to_string(), assistant("m2", Some("Back."), 10, 10)].join("\n"));
        assert_eq!(later.api_error, None);
    }

    #[test]
    fn subagent_lines_are_not_the_sessions() {
        let side = r#"{"type":"assistant","isSidechain":true,"message":{"content":[{"type":"text","text":"subagent"}],"usage":{"input_tokens":999999}}}"#;
        let tail = tail_of(&[assistant("m1", Some("main"), 10, 0), side.to_string()].join("\n"));
        assert_eq!((tail.last_text.as_deref(), tail.context_used), (Some("main"), Some(110)));
    }

    #[test]
    fn only_the_end_of_a_long_transcript_is_read_and_its_first_partial_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("handoff-transcript-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let filler = assistant("old", Some(&"x".repeat(1000)), 1, 1);
        let mut text = String::new();
        while (text.len() as u64) < TRANSCRIPT_TAIL_BYTES_MAX + 10_000 {
            text.push_str(&filler);
            text.push('\n');
        }
        text.push_str(&assistant("new", Some("the end"), 7, 0));
        std::fs::write(&path, &text).unwrap();
        let tail = read(&path).unwrap();
        assert_eq!((tail.last_text.as_deref(), tail.context_used), (Some("the end"), Some(107)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_window_is_the_settings_then_the_models_then_the_default() {
        assert_eq!(context_window(Some("claude-sonnet-4-5"), None), CONTEXT_WINDOW_TOKENS_DEFAULT);
        assert_eq!(context_window(Some("claude-opus-4-8[1m]"), None), CONTEXT_WINDOW_TOKENS_EXTENDED);
        assert_eq!(context_window(Some("claude-opus-4-8[1m]"), Some(400_000)), 400_000);
        assert_eq!(context_window(None, Some(0)), CONTEXT_WINDOW_TOKENS_DEFAULT);
    }
}
