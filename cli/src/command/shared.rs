//! What every command shares: the flags [`Key`] and [`Prompt`], how it prints ([`Out`]) and
//! how it stops short ([`Failure`]).

use crate::client::{Client, Error, Reply};
use crate::output;
use serde_json::Value;

/// State-changing commands send an `Idempotency-Key`: this one, or a fresh one.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Key {
    /// Send this Idempotency-Key (reuse it to retry a command whose answer was lost).
    #[arg(long = "idempotency-key", value_name = "K")]
    pub idempotency_key: Option<String>,
}

impl Key {
    /// `client`, sending this key (or a fresh one) with its writes.
    pub fn on(&self, client: &Client) -> Client {
        client.clone().with_idempotency_key(self.idempotency_key.as_deref())
    }
}

/// The owner's words for the turn a command opens.
#[derive(clap::Args, Debug, Default)]
pub struct Prompt {
    /// The owner's words for the turn (at most 16 KiB; newlines and tabs allowed).
    #[arg(long, short = 'm', value_name = "TEXT", conflicts_with = "prompt_file")]
    pub prompt: Option<String>,
    /// Read the words from a file, or from standard input with `-` (one trailing newline is
    /// dropped).
    #[arg(long, value_name = "PATH")]
    pub prompt_file: Option<std::path::PathBuf>,
}

impl Prompt {
    /// The words given, read from their file or standard input where they are.
    pub fn words(self) -> Result<Option<String>, Failure> {
        let Some(path) = self.prompt_file else {
            return Ok(self.prompt);
        };
        let read = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
        } else {
            std::fs::read_to_string(&path)
        };
        let text = read.map_err(|e| Failure::Usage(format!("--prompt-file {}: {e}", path.display())))?;
        let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
        Ok(Some(text.to_string()))
    }
}

/// Reads a word the way the API spells it (`needs-you`, `missing_context`, `high`).
pub fn parse_serde<T: serde::de::DeserializeOwned>(word: &str) -> Result<T, String> {
    serde_json::from_value(Value::String(word.to_string())).map_err(|_| format!("not one of the API's values: {word}"))
}

/// Why a command stopped before it succeeded.
#[derive(Debug)]
pub enum Failure {
    Api(Error),
    /// A command line the API was never asked about (exit 2).
    Usage(String),
    /// No credential to send or mint with (exit 3).
    Credential(String),
    /// The command has said what it had to and ends with this code (a runtime's own, an
    /// answer that did not come).
    Exit(i32),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Api(e)
    }
}

impl Failure {
    /// A command that ends with `code`: done at [`output::EXIT_OK`], else this failure.
    pub fn unless_ok(code: i32) -> Result<(), Failure> {
        if code == output::EXIT_OK {
            Ok(())
        } else {
            Err(Failure::Exit(code))
        }
    }
}

/// Prints the API's JSON with `--json`, the human lines otherwise.
pub struct Out {
    pub json: bool,
}

impl Out {
    pub fn emit<T>(&self, reply: &Reply<T>, lines: impl IntoIterator<Item = String>) {
        if self.json {
            println!("{}", output::escape_json(&reply.body.to_string()));
        } else {
            say(lines);
        }
    }
}

/// Prints human lines, each escaped (nothing from the service reaches the terminal raw).
pub fn say(lines: impl IntoIterator<Item = String>) {
    for line in lines {
        println!("{}", output::escape(&line, false));
    }
}

/// Prints a multi-line text from the service (a briefing, a package), escaped as a block.
pub fn say_block(text: &str) {
    let text = output::escape(text, true);
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
}
