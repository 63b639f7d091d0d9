//! What the command line prints and how it exits, as pure functions of the API's answers.
//! Nothing here does I/O, so every line is tested without a server.

use crate::client::*;
use crate::client::{Error, Refusal};
use handoff_api::error::Code;
use handoff_core::question::Question;
use handoff_core::turn::{State, Status};
use std::time::Duration;

/// Exit codes. 0 and 2 are the usual ones; 1 and 3 tell a script whether asking again could help:
/// a refusal will be refused again, a network or credential problem may not be.
pub const EXIT_OK: i32 = 0;
/// The API answered and refused (the line printed names the code).
pub const EXIT_REFUSED: i32 = 1;
/// The command line itself was wrong (clap uses 2 as well).
pub const EXIT_USAGE: i32 = 2;
/// No credential, a credential the API refused, or no answer at all.
pub const EXIT_AUTH_OR_NETWORK: i32 = 3;
/// `handoff ask`: no answer came in time (or the question was withdrawn first).
pub const EXIT_NO_ANSWER: i32 = 4;

/// Hash digits shown in human lines; `--json` and `package show` give the whole hash.
pub const HASH_DIGITS_SHOWN: usize = 8;

pub fn exit_code(error: &Error) -> i32 {
    match error {
        Error::Refused(r) if r.code.is_auth() => EXIT_AUTH_OR_NETWORK,
        Error::Refused(_) => EXIT_REFUSED,
        Error::Network { .. } | Error::Unexpected { .. } => EXIT_AUTH_OR_NETWORK,
    }
}

/// The one line an error prints: `code: what the hand-off says`.
pub fn error_line(error: &Error) -> String {
    match error {
        Error::Refused(r) => refusal_line(r),
        Error::Network { attempts, message } => {
            let tries = if *attempts == 1 { "1 try".to_string() } else { format!("{attempts} tries") };
            format!("network: no answer after {tries}: {message}")
        }
        Error::Unexpected { message, .. } => format!("network: {message}"),
    }
}

/// An error reads as the line the command line prints for it.
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&error_line(self))
    }
}

/// `handoff.stale: turn 2 is current (version 7)`: the code, then the state of the hand-off
/// that a turn or state refusal carries, which is what the caller needs to act on; for every
/// other refusal the API's own message (`package.stale: … the current one is version 2 …`).
pub fn refusal_line(r: &Refusal) -> String {
    let code = r.code.as_str();
    // Turn and state refusals are about the hand-off, so its state is the answer; a package,
    // idempotency or input refusal carries the hand-off too, but its message says more.
    let about_the_handoff = code.starts_with("handoff.");
    if let (true, Some(h)) = (about_the_handoff, &r.handoff) {
        return format!("{code}: {}", what_the_handoff_says(r, h));
    }
    if r.code.is(Code::PackageStale) {
        let current = r.body["package_hash"].as_str().or_else(|| r.body["error"]["package_hash"].as_str());
        if let Some(hash) = current {
            // The whole hash: it is what `package accept --hash` takes.
            let version = r.body["package_version"].as_u64().map(|v| format!("v{v} ")).unwrap_or_default();
            return format!("{code}: the current package is {version}{hash}");
        }
    }
    if r.message.is_empty() {
        code.to_string()
    } else {
        format!("{code}: {}", r.message)
    }
}

fn what_the_handoff_says(r: &Refusal, h: &Handoff) -> String {
    let version = h.version;
    let known = match &r.code {
        crate::ErrorCode::Known(c) => Some(*c),
        crate::ErrorCode::Unknown(_) => None,
    };
    match known {
        Some(Code::HandoffClosed) => format!("the hand-off is closed (version {version})"),
        Some(Code::HandoffConflict) => {
            format!("this session's hand-off runs on machine {}, size {} (version {version})", h.machine, h.size)
        }
        Some(Code::TurnRunning | Code::TurnFinished) => {
            format!("turn {} {} (version {version})", h.turn, status_phrase(h.status))
        }
        _ if h.state == State::Closed => format!("the hand-off is closed (version {version})"),
        _ => format!("turn {} is current (version {version})", h.turn),
    }
}

fn status_phrase(status: Status) -> &'static str {
    match status {
        Status::Running => "is still running",
        Status::NeedsYou => "is waiting for you",
        Status::Done => "is done",
        Status::Failed => "failed",
        Status::Cancelled => "was cancelled",
    }
}

pub fn short_hash(hash: &str) -> String {
    if hash.len() > HASH_DIGITS_SHOWN {
        format!("{}…", &hash[..HASH_DIGITS_SHOWN])
    } else {
        hash.to_string()
    }
}

/// `v5 turn 2 needs-you on codex, closed: Which database?` — one version of a hand-off.
pub fn version_line(h: &Handoff) -> String {
    let mut line = format!("v{} turn {} {}", h.version, h.turn, h.status.as_str());
    if let Some(runtime) = &h.briefed.runtime {
        line.push_str(&format!(" on {runtime}"));
    }
    if h.state == State::Closed {
        line.push_str(", closed");
    }
    if let Some(summary) = h.summary.as_deref().filter(|s| !s.is_empty()) {
        line.push_str(&format!(": {}", one_line(summary)));
    }
    line
}

/// Every line of `show`: the id and session, the version line, the package, the suggestion.
pub fn show_lines(h: &Handoff) -> Vec<String> {
    let mut lines = vec![format!("{} session {} on {} ({})", h.id, h.session, h.machine, h.size), version_line(h)];
    lines.extend(prompt_lines(h.prompt.as_deref(), false));
    if let (Some(v), Some(hash)) = (h.briefed.package_version, &h.briefed.package_hash) {
        lines.push(format!("briefed by package v{v} ({})", short_hash(hash)));
    }
    if let Some(from) = &h.continued_from {
        let runtime = from.runtime.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
        lines.push(format!("continued from turn {}{runtime}", from.turn));
    }
    if let Some(s) = &h.suggestion {
        lines.extend(suggestion_lines(s));
    }
    if h.machine_runtimes.is_some() {
        lines.extend(runtimes_lines(h).into_iter().skip(1));
    }
    if let Some(q) = &h.question {
        lines.extend(question_lines(&h.id, q));
    }
    lines
}

/// Lines of a question's input `show` prints before saying where the rest is.
pub const QUESTION_HEAD_LINES: usize = 12;
/// Bytes of a question's input `show` prints at most, on a character boundary.
pub const QUESTION_HEAD_BYTES: usize = 1024;

/// A question: its id, turn, text and options; the head of its input, each line marked `| `,
/// and where to read the rest; its answer.
pub fn question_lines(id: &str, q: &Question) -> Vec<String> {
    let options: Vec<String> = q.options.iter().map(|o| format!("{}={}", o.id, o.label)).collect();
    let mut lines =
        vec![format!("question {} (turn {}): {}; options: {}", q.id, q.turn, one_line(&q.text), options.join(", "))];
    if let Some(input) = &q.input {
        let head = handoff_core::text::clip(input, QUESTION_HEAD_BYTES);
        let shown: Vec<&str> = head.lines().take(QUESTION_HEAD_LINES).collect();
        // Where the last line shown ends in the input (the lines are slices of it).
        let shown_end = shown.last().map_or(0, |l| l.as_ptr() as usize - input.as_ptr() as usize + l.len());
        let rest = input[shown_end..].strip_prefix('\n').unwrap_or(&input[shown_end..]).len();
        lines.extend(shown.iter().map(|l| format!("  | {l}")));
        if rest > 0 {
            lines.push(format!(
                "  … {rest} more bytes of {} ({} lines in all): `handoff show {id} --question` prints it whole",
                input.len(),
                input.lines().count()
            ));
        }
    }
    if let Some(a) = &q.answer {
        let note = a.note.as_deref().map(|n| format!(" ({})", one_line(n))).unwrap_or_default();
        lines.push(format!("answered {}{note} at {}", a.option, a.answered_at));
    }
    lines
}

/// What `answer` without `--question` shows on a terminal before it answers: the open
/// question whole (every line of its input), then the ask; nothing is answered unless the
/// person says yes ([`is_yes`]).
pub fn confirm_answer_lines(q: &Question, option: &str) -> Vec<String> {
    let options: Vec<String> = q.options.iter().map(|o| format!("{}={}", o.id, o.label)).collect();
    let mut lines =
        vec![format!("question {} (turn {}): {}; options: {}", q.id, q.turn, one_line(&q.text), options.join(", "))];
    if let Some(input) = &q.input {
        lines.extend(input.lines().map(|l| format!("  | {l}")));
    }
    lines.push(format!("answer {} with {option}? [y/N] ", q.id));
    lines
}

/// Whether a person's reply to [`confirm_answer_lines`] says yes: `y` or `yes`, any case.
pub fn is_yes(reply: &str) -> bool {
    matches!(reply.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Why `answer` without `--question` and with no terminal to confirm on answers nothing.
pub fn answer_needs_question(id: &str) -> String {
    format!("answer: no --question and no terminal to confirm on: pass --question with the id of the question you read (`handoff show {id}`)")
}

/// What `show --question` prints: the open or last question's whole input (its text when it
/// has none), as a block.
pub fn question_whole(h: &Handoff) -> Option<String> {
    let q = h.question.as_ref()?;
    Some(q.input.clone().unwrap_or_else(|| q.text.clone()))
}

/// What `runtimes` prints: the version line, then one line per runtime the machine reported.
pub fn runtimes_lines(h: &Handoff) -> Vec<String> {
    let mut lines = vec![version_line(h)];
    let Some(m) = &h.machine_runtimes else { return lines };
    if m.runtimes.is_empty() {
        lines.push(format!("no runtimes on this machine (reported {})", m.reported_at));
    }
    for r in &m.runtimes {
        let signed_in = match r.signed_in {
            Some(true) => "signed in",
            Some(false) => "signed out",
            None => "sign-in not checked",
        };
        let version = r.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        lines.push(format!("runtime {}{version}: {signed_in} (reported {})", r.name, m.reported_at));
    }
    lines
}

/// The lines a version prints in `wait` and `wait --follow`: the version line and its suggestion.
pub fn follow_lines(h: &Handoff) -> Vec<String> {
    let mut lines = vec![version_line(h)];
    if let Some(s) = &h.suggestion {
        lines.extend(suggestion_lines(s));
    }
    lines
}

/// A suggestion is advice to the owner, printed with the command that would act on it.
pub fn suggestion_lines(s: &Suggestion) -> Vec<String> {
    let why = match s.reason.as_str() {
        "context-threshold" => "the context crossed its threshold",
        "provider-limit" => "the turn ended on a provider's limit",
        "quota-threshold" => "the quota is at or below its threshold",
        other => other,
    };
    vec![
        format!("suggestion ({}): turn {}: {why}; could hand off to {}", s.reason, s.turn, s.runtimes.join(", ")),
        format!("  {}", s.command),
    ]
}

/// One row of `list`: id, session and the version line's facts.
pub fn row_lines(r: &Row) -> Vec<String> {
    let mut line = format!("{} {} v{} turn {} {}", r.id, r.session, r.version, r.turn, r.status.as_str());
    if r.state == State::Closed {
        line.push_str(", closed");
    }
    if let Some(summary) = r.summary.as_deref().filter(|s| !s.is_empty()) {
        line.push_str(&format!(": {}", one_line(summary)));
    }
    let mut lines = vec![line];
    if let Some(s) = &r.suggestion {
        lines.extend(suggestion_lines(s).into_iter().map(|l| format!("  {l}")));
    }
    lines
}

/// `create`: the id on the first line, the machine token on the second, bare, so that a
/// script reads them with two `read`s. The token is a credential: it goes to stdout only. A
/// repeated create answers no token: the id alone.
pub fn created_lines(c: &Created) -> Vec<String> {
    let mut lines = vec![c.handoff.id.clone()];
    lines.extend(c.machine_token.as_deref().map(str::to_string));
    lines
}

pub fn opened_line(h: &Handoff) -> String {
    let mut line = format!("opened turn {} (v{})", h.turn, h.version);
    if let Some(runtime) = &h.briefed.runtime {
        line = format!("opened turn {} on {runtime} (v{})", h.turn, h.version);
    }
    if let (Some(v), Some(hash)) = (h.briefed.package_version, &h.briefed.package_hash) {
        line.push_str(&format!(", package v{v} ({})", short_hash(hash)));
    }
    line
}

/// `report`: what the hand-off is now, and a suggestion the report raised.
pub fn reported_lines(h: &Handoff) -> Vec<String> {
    let mut lines = vec![format!("reported: {}", version_line(h))];
    if let Some(s) = &h.suggestion {
        lines.extend(suggestion_lines(s));
    }
    lines
}

pub fn cancelled_line(h: &Handoff) -> String {
    format!("turn {} {} (v{})", h.turn, h.status.as_str(), h.version)
}

/// `steered turn 2 with st_5_1796040000000 (v5)`: the steer just taken, the newest.
pub fn steered_line(h: &Handoff) -> String {
    let id = h.steers.last().map_or("(none)", |s| s.id.as_str());
    format!("steered turn {} with {id} (v{})", h.turn, h.version)
}

/// `answered q_3: deny, turn 1 running (v4)`.
pub fn answered_line(h: &Handoff) -> String {
    let (id, option) = match &h.question {
        Some(q) => (q.id.as_str(), q.answer.as_ref().map_or("(none)", |a| a.option.as_str())),
        None => ("(none)", "(none)"),
    };
    format!("answered {id}: {option}, turn {} {} (v{})", h.turn, h.status.as_str(), h.version)
}

pub fn closed_line(h: &Handoff) -> String {
    format!("closed {} at turn {} {} (v{})", h.id, h.turn, h.status.as_str(), h.version)
}

/// `decision dec_1 recorded (v4)`, `artifact art_2 "Schema" version 2 (v5)`, …
pub fn item_line(item: &Item) -> String {
    let v = item.handoff.version;
    let id = item.id().map(|i| format!(" {i}")).unwrap_or_default();
    match item.kind {
        "artifact" => {
            let title = item.item["title"].as_str().unwrap_or_default();
            let version = item.item["version"].as_u64().map(|n| format!(" version {n}")).unwrap_or_default();
            format!("artifact{id} \"{title}\"{version} (v{v})")
        }
        "blocker" => {
            let severity = item.item["severity"].as_str().unwrap_or_default();
            let status = item.item["status"].as_str().unwrap_or("open");
            let title = item.item["title"].as_str().unwrap_or_default();
            format!("blocker{id} {severity} {status}: {title} (v{v})")
        }
        "workspace" => format!("workspace recorded (v{v})"),
        "policy" => format!("policy set (v{v})"),
        "work" => format!("work set: {} (v{v})", item.item["title"].as_str().unwrap_or_default()),
        kind => format!("{kind}{id} recorded (v{v})"),
    }
}

/// `package unchanged (v3, 9f2c1a8b…)` or `package recompiled (v4, 1d07e2c4…)`; a dry run says
/// what would happen and that nothing was written.
pub fn compiled_line(c: &Compiled, dry_run: bool) -> String {
    let facts = format!("v{}, {}", c.package_version, short_hash(&c.package_hash));
    match (c.changed, dry_run) {
        (false, false) => format!("package unchanged ({facts})"),
        (true, false) => format!("package recompiled ({facts})"),
        (false, true) => format!("package unchanged ({facts}); dry run, nothing written"),
        (true, true) => format!("package would be recompiled ({facts}); dry run, nothing written"),
    }
}

/// `package show`: the version, state and whole hash, then what the package asks for.
pub fn latest_lines(l: &Latest) -> Vec<String> {
    let state = offer_state(l.state);
    let mut lines = vec![format!("package v{} {state} {}", l.package_version, l.package_hash)];
    let next = &l.package["next"];
    if let Some(runtime) = next["runtime"].as_str() {
        lines.push(format!("next: {runtime}: {}", one_line(next["objective"].as_str().unwrap_or_default())));
    }
    if let Some(purpose) = next["purpose"].as_str() {
        lines.push(format!("purpose: {}", one_line(purpose)));
    }
    if let Some(r) = &l.rejection {
        lines.push(format!("rejected ({}): {}", r.reason.as_str(), one_line(&r.note)));
    }
    lines
}

pub fn offer_state(state: OfferState) -> &'static str {
    match state {
        OfferState::Offered => "offered",
        OfferState::Rejected => "rejected",
        OfferState::Accepted => "accepted",
    }
}

pub fn accepted_line(version: u64, hash: &str) -> String {
    format!("package accepted (v{version}, {})", short_hash(hash))
}

pub fn rejected_line(version: u64, hash: &str, reason: RejectReason) -> String {
    format!("package rejected ({}): v{version}, {}", reason.as_str(), short_hash(hash))
}

/// The owner's words for a turn, each line under `> ` so that they read apart from ours;
/// `(prompt dropped)` where the service no longer keeps them, nothing where there were none.
pub fn prompt_lines(prompt: Option<&str>, dropped: bool) -> Vec<String> {
    match prompt {
        Some(words) => words.lines().map(|line| format!("  > {line}").trim_end().to_string()).collect(),
        None if dropped => vec!["  (prompt dropped)".to_string()],
        None => Vec::new(),
    }
}

/// What `turns` prints for one turn: its [`lineage_line`], then its prompt's lines.
pub fn lineage_lines(t: &Turn) -> Vec<String> {
    let mut lines = vec![lineage_line(t)];
    lines.extend(prompt_lines(t.prompt.as_deref(), t.prompt_dropped));
    lines
}

/// `turn 2 running on codex, package v1 (1d07e2c4…), from turn 1 (claude-code), opened …`
pub fn lineage_line(t: &Turn) -> String {
    let mut line = format!("turn {} {}", t.turn, t.status.as_str());
    if let Some(runtime) = &t.runtime {
        line.push_str(&format!(" on {runtime}"));
    }
    if let (Some(v), Some(hash)) = (t.package_version, &t.package_hash) {
        line.push_str(&format!(", package v{v} ({})", short_hash(hash)));
    }
    if let Some(from) = &t.continued_from {
        let runtime = from.runtime.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
        line.push_str(&format!(", from turn {}{runtime}", from.turn));
    }
    line.push_str(&format!(", opened {}", t.opened_at));
    if let Some(ended) = &t.ended_at {
        line.push_str(&format!(", ended {ended}"));
    }
    line
}

/// `4s`, `2m05s`, `1h03m`: how long a wait has been held.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The waiting line a terminal shows while `wait --follow` holds a wait.
pub fn waiting_line(version: u64, waited: Duration) -> String {
    format!("waiting for a change after v{version}… {}", elapsed(waited))
}

/// Summaries may hold newlines; a human line must not.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `c` must never reach a terminal as it is: a C0 control, DEL, a C1 control (CSI
/// and OSC among them), or a bidi mark, embedding, override or isolate, which reorder what a
/// person reads. `\t` is kept, `\n` only in a block.
pub fn is_unprintable(c: char, block: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => !block,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// Text from the service as a terminal may show it: every character [`is_unprintable`] is
/// written as `\u{…}`, visibly, and `\r\n` as `\n` in a block. The one function every
/// human line the command prints goes through (a line with `block` false; a multi-line text,
/// a briefing or a question's input, with `block` true).
pub fn escape(s: &str, block: bool) -> String {
    let s = if block { s.replace("\r\n", "\n") } else { s.to_string() };
    if !s.chars().any(|c| is_unprintable(c, block)) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unprintable(c, block) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The API's JSON as `--json` prints it: the same document, with DEL, C1 controls and bidi
/// marks written as `\uXXXX` (JSON writers escape only C0). Those characters can stand only
/// inside strings, where the escape means the same character.
pub fn escape_json(text: &str) -> String {
    if !text.chars().any(|c| c != '\n' && is_unprintable(c, false)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c != '\n' && c != '\r' && is_unprintable(c, false) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
