//! Asking the owner a question from the machine and waiting, for a bounded time, for the
//! answer: `handoff ask` and the permission hooks. The question rides on a needs-you report;
//! the answer comes back as any other version does, through `/wait`.

use crate::client::{Client, Handoff, Retry};
use handoff_core::limits::{
    QUESTION_INPUT_BYTES_MAX, QUESTION_LABEL_BYTES_MAX, QUESTION_OPTIONS_MAX, QUESTION_TEXT_BYTES_MAX,
};
use handoff_core::question::{Choice, Kind, Pick, QuestionInput};
use handoff_core::turn::State;
use std::time::{Duration, Instant};

/// How long a hook (and `handoff ask` without `--wait`) waits for the owner's answer unless
/// `HANDOFF_ANSWER_WAIT_S` says: long enough to answer from a phone, short enough that the
/// person at the terminal is not kept from the harness's own prompt for long.
pub const ANSWER_WAIT_S_DEFAULT: u64 = 120;
/// The longest `HANDOFF_ANSWER_WAIT_S` (or `--wait`) is taken to be.
pub const ANSWER_WAIT_S_MAX: u64 = 3_600;
/// A wait that failed (the network) is tried again after this, while time is left.
const RETRY_PAUSE_MS: u64 = 250;

/// `HANDOFF_ANSWER_WAIT_S` read from `env`: whole seconds, at most [`ANSWER_WAIT_S_MAX`]; the
/// default when unset or unreadable.
pub fn answer_wait_s(env: &dyn Fn(&str) -> Option<String>) -> u64 {
    env(crate::machine::env::ENV_ANSWER_WAIT_S)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(ANSWER_WAIT_S_DEFAULT, |s| s.min(ANSWER_WAIT_S_MAX))
}

/// A permission question: its title (the tool and a line of its input) and the whole input,
/// `allow` or `deny`. An input over [`QUESTION_INPUT_BYTES_MAX`] cannot be shown, so it cannot
/// be allowed: the question says so, with its size and SHA-256, and offers `deny` alone.
pub fn permission_question(text: &str, input: Option<&str>) -> QuestionInput {
    let allow = Choice { id: "allow".into(), label: "Allow".into() };
    let deny = Choice { id: "deny".into(), label: "Deny".into() };
    match input {
        Some(whole) if whole.len() > QUESTION_INPUT_BYTES_MAX => {
            use sha2::{Digest, Sha256};
            let text = format!(
                "{text} (its input is {} bytes, SHA-256 {}, over the {QUESTION_INPUT_BYTES_MAX} bytes a question can show: it can only be denied here; allow it at the terminal)",
                whole.len(),
                hex::encode(Sha256::digest(whole.as_bytes()))
            );
            QuestionInput { kind: Kind::Permission, text, input: None, options: vec![deny] }
        }
        _ => QuestionInput {
            kind: Kind::Permission,
            text: text.to_string(),
            input: input.map(str::to_string),
            options: vec![allow, deny],
        },
    }
}

/// Why a harness's question cannot be put to the owner. The owner's form carries one question
/// at a time, a single choice of 1 to [`QUESTION_OPTIONS_MAX`] options, each held whole, and
/// never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unaskable {
    /// Several questions at once (or none).
    Several(usize),
    /// Several answers to pick.
    MultiSelect,
    /// A secret (a password, a key), which the service must never hold.
    Secret,
    /// No options to pick from.
    NoOptions,
    /// More options than the form shows.
    TooManyOptions(usize),
    /// A question or an option empty, or longer than the service holds whole.
    DoesNotFit,
}

impl Unaskable {
    /// Why, in a line.
    pub fn reason(&self) -> String {
        match self {
            Unaskable::Several(n) => format!("it asks {n} questions at once"),
            Unaskable::MultiSelect => "it asks for several answers to be picked".into(),
            Unaskable::Secret => "it asks for a secret".into(),
            Unaskable::NoOptions => "it offers no options to pick from".into(),
            Unaskable::TooManyOptions(n) => format!("it offers {n} options, more than the {QUESTION_OPTIONS_MAX} the form shows"),
            Unaskable::DoesNotFit => format!("its question or an option is empty or too long (a question holds {QUESTION_TEXT_BYTES_MAX} bytes, an option {QUESTION_LABEL_BYTES_MAX})"),
        }
    }

    /// The note the model reads when a served turn denies the question: why, and how to ask
    /// one the owner can answer.
    pub fn note(&self) -> String {
        let how = match self {
            Unaskable::Secret => "A secret never goes through the owner's form: go on without it, or end the turn saying what is needed.".to_string(),
            _ => format!("Ask one question at a time, with 1 to {QUESTION_OPTIONS_MAX} short options to pick one from, or go on without it."),
        };
        format!("This question was not put to the owner: {}. The owner answers from afar, one question at a time, picking one option; nobody is at this machine's terminal. {how}", self.reason())
    }
}

/// Whether one single-choice question with these options fits the owner's form whole.
pub fn choice_fits(text: &str, labels: &[String]) -> Result<(), Unaskable> {
    if labels.is_empty() {
        return Err(Unaskable::NoOptions);
    }
    if labels.len() > QUESTION_OPTIONS_MAX {
        return Err(Unaskable::TooManyOptions(labels.len()));
    }
    let fits = |s: &str, max: usize| !s.trim().is_empty() && s.len() <= max;
    if !fits(text, QUESTION_TEXT_BYTES_MAX) || !labels.iter().all(|l| fits(l, QUESTION_LABEL_BYTES_MAX)) {
        return Err(Unaskable::DoesNotFit);
    }
    Ok(())
}

/// The decision a served turn's harness gets for a question its owner's form cannot carry:
/// denied, with the note its model reads.
pub fn unaskable_decision(why: &Unaskable) -> String {
    deny_decision(why.note())
}

/// A `PermissionRequest` decision that denies, with the note the model reads: for what is
/// decided on the machine, no owner's pick.
pub fn deny_decision(note: String) -> String {
    permission_decision(&Pick {
        option: "deny".into(),
        note: Some(note),
        answered_at: handoff_core::time::Timestamp::from_ms(0),
    })
}

/// What a harness's `PermissionRequest` asks the owner.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// May the tool run? The question's title (the tool and a line of its input) and the
    /// tool's whole input as a person reads it.
    Permission { text: String, input: Option<String> },
    /// Claude Code's `AskUserQuestion` with one question: its text, its options' labels, and
    /// the tool's input, given back with the answer in it.
    Choice { text: String, labels: Vec<String>, input: serde_json::Value },
}

impl Prompt {
    pub fn text(&self) -> &str {
        match self {
            Prompt::Permission { text, .. } | Prompt::Choice { text, .. } => text,
        }
    }

    /// The question the needs-you carries: allow/deny, or the options as `1`, `2`, … with
    /// their labels.
    pub fn question(&self) -> QuestionInput {
        match self {
            Prompt::Permission { text, input } => permission_question(text, input.as_deref()),
            Prompt::Choice { text, labels, .. } => {
                let options = labels
                    .iter()
                    .enumerate()
                    .map(|(i, label)| Choice { id: (i + 1).to_string(), label: label.clone() })
                    .collect();
                QuestionInput { kind: Kind::Choice, text: text.clone(), input: None, options }
            }
        }
    }

    /// The decision document for the owner's `answer`: for a permission, allow or deny; for a
    /// choice, allow with the tool's input carrying `answers` (the question's text to the
    /// chosen label), the form Claude Code's `AskUserQuestion` takes its answers in.
    pub fn decision(&self, answer: &Pick) -> String {
        match self {
            Prompt::Permission { .. } => permission_decision(answer),
            Prompt::Choice { text, labels, input } => {
                let label = answer
                    .option
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| labels.get(n.wrapping_sub(1)))
                    .cloned()
                    .unwrap_or_default();
                // The owner's note travels with the label, as a person's own words would.
                let chosen = match &answer.note {
                    Some(note) if !note.trim().is_empty() => format!("{label} (note: {note})"),
                    _ => label,
                };
                let mut updated = input.clone();
                if let Some(map) = updated.as_object_mut() {
                    map.insert("answers".into(), serde_json::json!({ text.as_str(): chosen }));
                }
                let document = serde_json::json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow", "updatedInput": updated}}});
                document.to_string()
            }
        }
    }
}

/// The question a report asked, found in the record that answered that report (never in any
/// other record): its id and the version that asked it, when that record holds it open on the
/// report's turn with every field as asked (kind, text, input and options). A record whose
/// question differs in any of them, labels swapped included, is someone else's question.
pub fn own_question(asked: &QuestionInput, turn: u64, answer_to_own_report: &Handoff) -> Option<(String, u64)> {
    let q = answer_to_own_report.question.as_ref()?;
    (q.turn == turn && q.is_same_open(asked)).then(|| (q.id.clone(), answer_to_own_report.version))
}

/// How a wait for an answer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The owner answered: the answer, and the record that carried it.
    Answered(Pick, Box<Handoff>),
    /// The question was withdrawn (a later report, a cancel, a close) before an answer.
    Withdrawn,
    /// No answer before the deadline.
    TimedOut,
}

/// What `record` says of question `id`: answered, withdrawn, or still open (`None`).
pub fn answer_of(record: &Handoff, id: &str) -> Option<Waited> {
    match &record.question {
        Some(q) if q.id == id => q.answer.clone().map(|a| Waited::Answered(a, Box::new(record.clone()))),
        _ => Some(Waited::Withdrawn),
    }
    .or_else(|| (record.state == State::Closed).then_some(Waited::Withdrawn))
}

/// Waits until `deadline` for the answer to question `id` on hand-off `hid`, from version
/// `after` on. Each wait is cut at the deadline, so this returns within it (and a request's
/// own connect time); a failed wait is tried again while time is left.
pub fn wait_for_answer(client: &Client, hid: &str, id: &str, after: u64, deadline: Instant) -> Waited {
    let mut after = after;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(100) {
            // Too little left for another request: wait it out, so the wait is never cut short.
            std::thread::sleep(left);
            return Waited::TimedOut;
        }
        let cut = client.clone().with_retry(Retry::none()).with_request_timeout(left);
        match cut.wait(hid, after, left.as_secs().max(1)) {
            Ok(reply) => {
                if let Some(done) = answer_of(&reply.value, id) {
                    return done;
                }
                after = after.max(reply.value.version);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS).min(left)),
        }
    }
}

/// The decision document a harness's `PermissionRequest` hook prints for `answer`: `allow`, or
/// `deny` with the owner's note as its `message`. Written by hand so that its keys come in the
/// documented order, whatever a JSON library sorts.
pub fn permission_decision(answer: &Pick) -> String {
    let behavior = if answer.option == "allow" { "allow" } else { "deny" };
    let message = match (&answer.note, behavior) {
        (Some(note), "deny") => format!(r#","message":{}"#, serde_json::Value::String(note.clone())),
        _ => String::new(),
    };
    format!(
        r#"{{"hookSpecificOutput":{{"hookEventName":"PermissionRequest","decision":{{"behavior":"{behavior}"{message}}}}}}}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::time::Timestamp;

    fn answer(option: &str, note: Option<&str>) -> Pick {
        Pick { option: option.into(), note: note.map(str::to_string), answered_at: Timestamp::from_ms(0) }
    }

    #[test]
    fn a_question_the_owners_form_cannot_carry_is_denied_with_a_note_saying_why_and_how_to_ask() {
        let labels = |n: usize| (1..=n).map(|i| format!("option {i}")).collect::<Vec<_>>();
        assert_eq!(choice_fits("Which?", &labels(1)), Ok(()));
        assert_eq!(choice_fits("Which?", &labels(QUESTION_OPTIONS_MAX)), Ok(()));
        assert_eq!(choice_fits("Which?", &[]), Err(Unaskable::NoOptions));
        assert_eq!(
            choice_fits("Which?", &labels(QUESTION_OPTIONS_MAX + 1)),
            Err(Unaskable::TooManyOptions(QUESTION_OPTIONS_MAX + 1))
        );
        assert_eq!(choice_fits(" ", &labels(2)), Err(Unaskable::DoesNotFit));
        assert_eq!(choice_fits(&"q".repeat(QUESTION_TEXT_BYTES_MAX), &labels(2)), Ok(()));
        assert_eq!(choice_fits(&"q".repeat(QUESTION_TEXT_BYTES_MAX + 1), &labels(2)), Err(Unaskable::DoesNotFit));
        assert_eq!(choice_fits("Which?", &["x".repeat(QUESTION_LABEL_BYTES_MAX)]), Ok(()));
        assert_eq!(choice_fits("Which?", &["x".repeat(QUESTION_LABEL_BYTES_MAX + 1)]), Err(Unaskable::DoesNotFit));
        assert_eq!(choice_fits("Which?", &["A".into(), "".into()]), Err(Unaskable::DoesNotFit));

        let decision: serde_json::Value = serde_json::from_str(&unaskable_decision(&Unaskable::Several(2))).unwrap();
        assert_eq!(decision["hookSpecificOutput"]["decision"]["behavior"], "deny");
        let note = decision["hookSpecificOutput"]["decision"]["message"].as_str().unwrap();
        assert!(
            note.contains("not put to the owner: it asks 2 questions at once")
                && note.contains("Ask one question at a time"),
            "{note}"
        );
        for why in [Unaskable::MultiSelect, Unaskable::NoOptions, Unaskable::TooManyOptions(7), Unaskable::DoesNotFit] {
            assert!(why.note().contains(&why.reason()) && why.note().contains("1 to 6 short options"), "{why:?}");
        }
        let secret = Unaskable::Secret.note();
        assert!(
            secret.contains("it asks for a secret")
                && secret.contains("never goes through the owner's form")
                && !secret.contains("Ask one question"),
            "{secret}"
        );
    }

    #[test]
    fn the_decision_is_allow_or_deny_with_the_owners_note_as_its_message() {
        assert_eq!(
            permission_decision(&answer("allow", None)),
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
        );
        assert_eq!(
            permission_decision(&answer("allow", Some("sure"))),
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
        );
        let deny = permission_decision(&answer("deny", Some("not on \"main\"")));
        assert_eq!(
            deny,
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"not on \"main\""}}}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&deny).unwrap();
        assert_eq!(parsed["hookSpecificOutput"]["decision"]["message"], "not on \"main\"");
        assert_eq!(
            permission_decision(&answer("deny", None)),
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny"}}}"#
        );
    }

    #[test]
    fn a_choice_is_asked_with_its_labels_and_answered_in_the_tools_own_input() {
        let input = serde_json::json!({"questions": [{"question": "Which database?", "header": "DB", "multiSelect": false, "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "a file"}]}]});
        let prompt = Prompt::Choice {
            text: "Which database?".into(),
            labels: vec!["Postgres".into(), "SQLite".into()],
            input: input.clone(),
        };
        let q = prompt.question();
        assert_eq!((q.kind, q.text.as_str()), (Kind::Choice, "Which database?"));
        let options: Vec<(&str, &str)> = q.options.iter().map(|o| (o.id.as_str(), o.label.as_str())).collect();
        assert_eq!(options, [("1", "Postgres"), ("2", "SQLite")]);
        let decided: serde_json::Value = serde_json::from_str(&prompt.decision(&answer("2", None))).unwrap();
        let decision = &decided["hookSpecificOutput"]["decision"];
        assert_eq!(decision["behavior"], "allow");
        assert_eq!(decision["updatedInput"]["answers"], serde_json::json!({"Which database?": "SQLite"}));
        assert_eq!(
            decision["updatedInput"]["questions"], input["questions"],
            "the tool's own input goes back with the answer"
        );
        assert_eq!(
            Prompt::Permission { text: "Bash: ls".into(), input: None }.decision(&answer("deny", None)),
            permission_decision(&answer("deny", None))
        );
        let noted: serde_json::Value =
            serde_json::from_str(&prompt.decision(&answer("1", Some("it is there already")))).unwrap();
        assert_eq!(
            noted["hookSpecificOutput"]["decision"]["updatedInput"]["answers"],
            serde_json::json!({"Which database?": "Postgres (note: it is there already)"})
        );
    }

    #[test]
    fn an_input_over_the_limit_is_said_with_its_size_and_sha256_and_offers_no_allow() {
        let fits = "x".repeat(QUESTION_INPUT_BYTES_MAX);
        let q = permission_question("Bash: x…", Some(&fits));
        assert_eq!((q.input.as_deref(), q.options.len()), (Some(fits.as_str()), 2));
        assert_eq!(q.options[0].id, "allow");
        let over = "x".repeat(QUESTION_INPUT_BYTES_MAX + 1);
        let q = permission_question("Bash: x…", Some(&over));
        let ids: Vec<&str> = q.options.iter().map(|o| o.id.as_str()).collect();
        assert_eq!((q.input.as_deref(), ids), (None, vec!["deny"]), "no Allow for what cannot be shown");
        use sha2::{Digest, Sha256};
        let sha = hex::encode(Sha256::digest(over.as_bytes()));
        assert!(
            q.text.starts_with("Bash: x…")
                && q.text.contains(&format!("{} bytes", over.len()))
                && q.text.contains(&sha),
            "{}",
            q.text
        );
        assert!(q.text.len() <= handoff_core::limits::QUESTION_TEXT_BYTES_MAX);
        let two = permission_question("Bash: a", Some("a; b"));
        assert_ne!(
            two.input,
            permission_question("Bash: a", Some("a; c")).input,
            "two inputs under one title are two questions"
        );
        assert!(permission_question("ExitPlanMode", None).input.is_none());
    }

    #[test]
    fn the_hook_takes_a_question_as_its_own_only_when_every_field_matches() {
        let asked = permission_question("Bash: rm -rf build", Some("rm -rf build"));
        let record = |question: serde_json::Value| -> Handoff {
            serde_json::from_value(serde_json::json!({
                "id": "ho_0123456789abcdef0123456789abcdef", "owner": "o", "session": "s", "machine": "m",
                "size": "large", "turn": 1, "state": "open", "status": "needs-you", "summary": null,
                "version": 7, "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",
                "question": question,
            }))
            .unwrap()
        };
        let question = |kind: &str, options: serde_json::Value, turn: u64| {
            serde_json::json!({"id": "q_7", "turn": turn, "kind": kind, "text": "Bash: rm -rf build", "input": "rm -rf build",
                "options": options, "asked_at": "2025-01-01T00:00:00Z", "answer": null})
        };
        let options = serde_json::json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]);
        assert_eq!(
            own_question(&asked, 1, &record(question("permission", options.clone(), 1))),
            Some(("q_7".into(), 7))
        );
        let swapped = serde_json::json!([{"id": "allow", "label": "Deny"}, {"id": "deny", "label": "Allow"}]);
        assert_eq!(own_question(&asked, 1, &record(question("permission", swapped, 1))), None, "labels swapped");
        assert_eq!(own_question(&asked, 1, &record(question("choice", options.clone(), 1))), None, "another kind");
        assert_eq!(own_question(&asked, 2, &record(question("permission", options.clone(), 1))), None, "another turn");
        let only_deny = serde_json::json!([{"id": "deny", "label": "Deny"}]);
        assert_eq!(own_question(&asked, 1, &record(question("permission", only_deny, 1))), None, "other options");
        let mut answered = question("permission", options, 1);
        answered["answer"] =
            serde_json::json!({"option": "allow", "note": null, "answered_at": "2025-01-01T00:00:01Z"});
        assert_eq!(own_question(&asked, 1, &record(answered)), None, "answered already");
        assert_eq!(own_question(&asked, 1, &record(serde_json::Value::Null)), None);
    }

    #[test]
    fn the_answer_wait_is_the_setting_within_its_cap_or_the_default() {
        let env = |v: &'static str| move |k: &str| (k == "HANDOFF_ANSWER_WAIT_S").then(|| v.to_string());
        assert_eq!(answer_wait_s(&env("30")), 30);
        assert_eq!(answer_wait_s(&env("999999")), ANSWER_WAIT_S_MAX);
        assert_eq!(answer_wait_s(&env("soon")), ANSWER_WAIT_S_DEFAULT);
        assert_eq!(answer_wait_s(&|_| None), ANSWER_WAIT_S_DEFAULT);
    }
}
