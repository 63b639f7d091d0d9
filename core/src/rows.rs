//! The owner's list: one row per hand-off, derived from its record, and the paging rules.
//! Pure; the `OwnerIndex` Durable Object stores the rows and the hand-off object sends them.

use crate::question::Question;
use crate::suggestion::Suggestion;
use crate::time::{EpochMs, Timestamp};
use crate::turn::{Briefed, Listed, Record, State, Status};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// One session in its owner's list: stored as it is sent, and served as it is stored. Made by
/// [`Row::of`] from its record's [`Listed`] and [`Briefed`] parts, flattened, so the row's JSON
/// keeps its own field order (its suggestion comes before the briefing, the record's after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RowFields")]
pub struct Row {
    pub id: String,
    /// The record's, but for the summary: an unanswered question's text wins.
    #[serde(flatten)]
    pub listed: Listed,
    pub updated_at: Timestamp,
    /// A hand-off the owner may choose to make, shown in the list too.
    #[serde(default)]
    pub suggestion: Option<Suggestion>,
    #[serde(flatten)]
    pub briefed: Briefed,
    /// The question the session waits on, as the record shows it (its text is the summary
    /// while it is unanswered).
    #[serde(default)]
    pub question: Option<Box<Question>>,
}

impl Row {
    pub fn of(record: &Record) -> Row {
        let mut listed = record.listed.clone();
        if let Some(open) = record.question.as_ref().filter(|q| q.is_open()) {
            listed.summary = Some(open.text.clone());
        }
        Row {
            id: record.id.clone(),
            listed,
            updated_at: record.updated_at,
            suggestion: record.suggestion.clone(),
            briefed: record.briefed.clone(),
            question: record.question.clone().map(Box::new),
        }
    }
}

/// A [`Row`] as it is read: its parts' fields in place, as [`Record`]'s are (no buffer of
/// every field, no second reader of each part).
#[derive(Deserialize)]
struct RowFields {
    id: String,
    session: String,
    machine: String,
    size: String,
    turn: u64,
    state: State,
    status: Status,
    summary: Option<String>,
    version: u64,
    updated_at: Timestamp,
    #[serde(default)]
    suggestion: Option<Suggestion>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    package_version: Option<u64>,
    #[serde(default)]
    package_hash: Option<String>,
    #[serde(default)]
    question: Option<Box<Question>>,
}

impl From<RowFields> for Row {
    fn from(r: RowFields) -> Row {
        let (session, machine, size, turn, state, status, summary, version) =
            (r.session, r.machine, r.size, r.turn, r.state, r.status, r.summary, r.version);
        let (runtime, package_version, package_hash) = (r.runtime, r.package_version, r.package_hash);
        Row {
            id: r.id,
            listed: Listed { session, machine, size, turn, state, status, summary, version },
            updated_at: r.updated_at,
            suggestion: r.suggestion,
            briefed: Briefed { runtime, package_version, package_hash },
            question: r.question,
        }
    }
}

/// `row.status` and the like read the [`Listed`] part; a row is derived from its record, so is
/// not written through it.
impl std::ops::Deref for Row {
    type Target = Listed;
    fn deref(&self) -> &Listed {
        &self.listed
    }
}

/// Where the next page starts: just after this row in newest-first order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub updated_at: EpochMs,
    pub id: String,
}

impl Cursor {
    pub fn after(row: &Row) -> Cursor {
        Cursor { updated_at: row.updated_at.ms(), id: row.id.clone() }
    }

    /// Opaque to clients: they pass it back as it is.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}.{}", self.updated_at, self.id))
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(text).ok()?).ok()?;
        let (at, id) = raw.split_once('.')?;
        let valid_id = crate::ids::is_handoff_id(id);
        valid_id.then(|| Some(Cursor { updated_at: at.parse().ok()?, id: id.to_string() })).flatten()
    }
}

/// `?state=open|closed&limit=N&cursor=C`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    pub state: Option<State>,
    pub limit: u32,
    pub cursor: Option<Cursor>,
}

/// `GET /v1/handoffs`: a page of rows, newest first, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub handoffs: Vec<Row>,
    #[serde(default)]
    pub cursor: Option<String>,
}

impl Page {
    /// The page of `query.limit` rows from `rows`, which hold one more row than the page when
    /// a next page exists (the store reads `limit + 1`).
    pub fn of(mut rows: Vec<Row>, query: &ListQuery) -> Page {
        let limit = query.limit as usize;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let cursor = if more { rows.last().map(|r| Cursor::after(r).encode()) } else { None };
        Page { handoffs: rows, cursor }
    }
}

/// The owner's cap on open hand-offs, as the index applies it when a create adds its row:
/// `open` is how many open rows the index holds besides the one being added. Past the cap the
/// create is refused with both numbers, and nothing is stored anywhere.
pub fn admit_open(open: u64, cap: usize) -> Result<(), TooManyOpen> {
    if open >= cap as u64 {
        return Err(TooManyOpen { open, cap: cap as u64 });
    }
    Ok(())
}

/// 429 `owner.too_many_open`: the open hand-offs the owner holds, and the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TooManyOpen {
    pub open: u64,
    pub cap: u64,
}

/// The owner index's answer to a create's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "admitted", rename_all = "snake_case")]
pub enum Admission {
    Yes,
    No(TooManyOpen),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::Status;

    #[test]
    fn a_cursor_round_trips_and_a_forged_one_is_refused() {
        let c = Cursor { updated_at: 1_700_000_000_123, id: crate::ids::handoff_id("a", "s") };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in ["", "x", "!!!", &URL_SAFE_NO_PAD.encode("12.ho_../etc")] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }

    fn record() -> Record {
        let mut record = Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 0);
        record.summary = Some("built it".into());
        record.updated_at = Timestamp::from_ms(1_700_000_000_123);
        record
    }

    #[test]
    fn a_row_is_derived_from_its_record_and_pages_after_itself() {
        let row = Row::of(&record());
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            serde_json::json!({
                "id": "ho_1", "session": "s1", "machine": "m1", "size": "large", "turn": 1,
                "state": "open", "status": "running", "summary": "built it", "version": 1,
                "updated_at": "2023-11-14T22:13:20.123Z", "suggestion": null,
                "runtime": null, "package_version": null, "package_hash": null, "question": null,
            })
        );
        assert_eq!(Cursor::after(&row), Cursor { updated_at: 1_700_000_000_123, id: "ho_1".into() });
    }

    #[test]
    fn the_list_row_shows_an_unanswered_questions_text_as_its_summary() {
        use crate::question::{Choice, Kind, Pick, Question, QuestionInput};
        let mut r = record();
        let input = QuestionInput {
            kind: Kind::Choice,
            text: "Which database?".into(),
            input: None,
            options: vec![Choice { id: "pg".into(), label: "Postgres".into() }],
        };
        r.question = Some(Question::asked(&input, 1, 2, 0, Timestamp::from_ms(5)));
        let row = Row::of(&r);
        assert_eq!(
            (row.summary.as_deref(), row.question.as_ref().map(|q| q.id.as_str())),
            (Some("Which database?"), Some("q_2_0"))
        );
        r.question.as_mut().unwrap().answer =
            Some(Pick { option: "pg".into(), note: None, answered_at: Timestamp::from_ms(6) });
        assert_eq!(Row::of(&r).summary.as_deref(), Some("built it"), "answered: the report's summary again");
    }

    /// A record with every optional field set, and its question still open.
    fn full_record() -> Record {
        use crate::question::{Choice, Kind, Question, QuestionInput};
        use crate::runtimes::MachineRuntimes;
        use crate::suggestion::{Reason, Suggestion};
        use crate::turn::ContinuedFrom;
        let mut r = record();
        (r.turn, r.version, r.status) = (2, 7, Status::NeedsYou);
        r.briefed =
            Briefed { runtime: Some("codex".into()), package_version: Some(3), package_hash: Some("ab".repeat(32)) };
        r.continued_from = Some(ContinuedFrom { turn: 1, runtime: Some("claude-code".into()) });
        r.suggestion = Some(Suggestion {
            reason: Reason::ContextThreshold,
            turn: 2,
            runtimes: vec!["codex".into()],
            command: "handoff open".into(),
        });
        r.machine_runtimes = Some(MachineRuntimes { runtimes: vec![], reported_at: Timestamp::from_ms(3) });
        let input = QuestionInput {
            kind: Kind::Choice,
            text: "Which?".into(),
            input: None,
            options: vec![Choice { id: "a".into(), label: "A".into() }],
        };
        r.question = Some(Question::asked(&input, 2, 7, 9, Timestamp::from_ms(4)));
        r.incarnation = 9;
        r.prompt = Some("now the tests".into());
        r
    }

    /// The stored and served bytes of a record and of its row, field order and nulls included:
    /// a change to how either type is declared must leave these strings as they are.
    #[test]
    fn a_record_and_its_row_serialise_to_exactly_these_bytes() {
        let bare = record();
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            r#"{"id":"ho_1","owner":"alice","session":"s1","machine":"m1","size":"large","turn":1,"state":"open","status":"running","summary":"built it","version":1,"created_at":"1970-01-01T00:00:00.000Z","updated_at":"2023-11-14T22:13:20.123Z","runtime":null,"package_version":null,"package_hash":null,"prompt":null,"continued_from":null,"suggestion":null,"question":null}"#
        );
        assert_eq!(
            serde_json::to_string(&Row::of(&bare)).unwrap(),
            r#"{"id":"ho_1","session":"s1","machine":"m1","size":"large","turn":1,"state":"open","status":"running","summary":"built it","version":1,"updated_at":"2023-11-14T22:13:20.123Z","suggestion":null,"runtime":null,"package_version":null,"package_hash":null,"question":null}"#
        );
        let full = full_record();
        let hash = "ab".repeat(32);
        let question = r#"{"id":"q_7_9","turn":2,"kind":"choice","text":"Which?","options":[{"id":"a","label":"A"}],"asked_at":"1970-01-01T00:00:00.004Z","answer":null}"#;
        let suggestion = r#"{"reason":"context-threshold","turn":2,"runtimes":["codex"],"command":"handoff open"}"#;
        assert_eq!(
            serde_json::to_string(&full).unwrap(),
            format!(
                r#"{{"id":"ho_1","owner":"alice","session":"s1","machine":"m1","size":"large","turn":2,"state":"open","status":"needs-you","summary":"built it","version":7,"created_at":"1970-01-01T00:00:00.000Z","updated_at":"2023-11-14T22:13:20.123Z","runtime":"codex","package_version":3,"package_hash":"{hash}","prompt":"now the tests","continued_from":{{"turn":1,"runtime":"claude-code"}},"suggestion":{suggestion},"machine_runtimes":{{"runtimes":[],"reported_at":"1970-01-01T00:00:00.003Z"}},"question":{question},"incarnation":9}}"#
            ),
            "machine_runtimes and incarnation written only when set"
        );
        assert_eq!(
            serde_json::to_string(&Row::of(&full)).unwrap(),
            format!(
                r#"{{"id":"ho_1","session":"s1","machine":"m1","size":"large","turn":2,"state":"open","status":"needs-you","summary":"Which?","version":7,"updated_at":"2023-11-14T22:13:20.123Z","suggestion":{suggestion},"runtime":"codex","package_version":3,"package_hash":"{hash}","question":{question}}}"#
            )
        );
        for text in [serde_json::to_string(&bare).unwrap(), serde_json::to_string(&full).unwrap()] {
            let back: Record = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), text, "a record reads back as itself");
        }
        let row = Row::of(&full);
        assert_eq!(serde_json::from_str::<Row>(&serde_json::to_string(&row).unwrap()).unwrap(), row);
        // The flattened parts are read through serde's buffer: numbers past i64 still read back.
        let mut big = row;
        (big.listed.turn, big.listed.version, big.briefed.package_version) = (u64::MAX, u64::MAX, Some(u64::MAX));
        assert_eq!(serde_json::from_str::<Row>(&serde_json::to_string(&big).unwrap()).unwrap(), big);
    }

    /// Rows and records stored by earlier builds, before their later fields existed, still read:
    /// those fields read as unset.
    #[test]
    fn a_row_and_a_record_stored_before_their_later_fields_read_with_them_unset() {
        let old_row = r#"{"id":"ho_1","session":"s1","machine":"m1","size":"large","turn":1,"state":"open","status":"running","summary":null,"version":1,"updated_at":1700000000123}"#;
        let row: Row = serde_json::from_str(old_row).unwrap();
        let mut expected = Row::of(&record());
        expected.listed.summary = None;
        assert_eq!(row, expected);
        let old_record = r#"{"id":"ho_1","owner":"alice","session":"s1","machine":"m1","size":"large","turn":1,"state":"open","status":"running","summary":"built it","version":1,"created_at":0,"updated_at":1700000000123}"#;
        let read: Record = serde_json::from_str(old_record).unwrap();
        assert_eq!(read, Record { incarnation: 0, ..record() });
        // A field every build wrote is still required.
        assert!(serde_json::from_str::<Row>(&old_row.replace(r#""turn":1,"#, "")).is_err());
        assert!(serde_json::from_str::<Record>(&old_record.replace(r#""session":"s1","#, "")).is_err());
    }

    #[test]
    fn a_page_cuts_at_its_limit_and_names_the_next_page_only_when_there_is_one() {
        let query = ListQuery { state: None, limit: 2, cursor: None };
        let rows: Vec<Row> = (0..3)
            .map(|i| {
                let mut row = Row::of(&record());
                row.listed.version = i;
                row
            })
            .collect();
        let full = Page::of(rows.clone(), &query);
        assert_eq!(full.handoffs.len(), 2);
        assert_eq!(full.cursor, Some(Cursor::after(&rows[1]).encode()));
        let last = Page::of(rows[..2].to_vec(), &query);
        assert_eq!((last.handoffs.len(), last.cursor), (2, None));
    }

    #[test]
    fn a_create_is_admitted_below_the_open_cap_and_refused_at_it_with_the_count_and_the_cap() {
        assert_eq!(admit_open(0, 3), Ok(()));
        assert_eq!(admit_open(2, 3), Ok(()));
        assert_eq!(admit_open(3, 3), Err(TooManyOpen { open: 3, cap: 3 }));
        assert_eq!(admit_open(7, 3), Err(TooManyOpen { open: 7, cap: 3 }));
        assert!(admit_open(0, 0).is_err(), "a cap of zero admits nothing");
        let limit = crate::limits::OPEN_HANDOFFS_PER_OWNER_MAX;
        assert!(admit_open(limit as u64 - 1, limit).is_ok() && admit_open(limit as u64, limit).is_err());
    }
}
