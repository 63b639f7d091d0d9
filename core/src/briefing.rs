//! The briefing: a package rendered as plain text for the runtime that takes the next turn,
//! at most `budget` bytes of UTF-8.
//!
//! Layout, top to bottom: the work (title, hand-off, package version and hash), the goal,
//! the next objective (purpose, runtime, the operator's note), what is left out, then the
//! sections constraints, acceptance criteria, completed, decisions, artifacts, blockers,
//! unresolved, relevant files, and last the closing instruction, written from what the
//! destination can reach ([`Reach`]).
//!
//! Invariants, asserted in [`render`] and property-tested:
//! - the text is never longer than the budget and never ends in a broken character;
//! - when it does not fit, whole sections are left out in [`DROP_ORDER`], first to go first,
//!   and only as many as needed; an empty section is not rendered and not counted as left out;
//! - the work, the goal, the objective and the closing instruction are never left out; when
//!   even they do not fit they are clipped and marked `[cut]`;
//! - two notes that cannot be read as each other: "The package itself leaves out …" whenever
//!   the compiler's `truncation` counts anything, and "This briefing was shortened to fit a
//!   N-byte runtime budget …" whenever this rendering left out or clipped anything;
//! - the closing instruction names environment variables, never their values.

use crate::limits::*;
use crate::package::{Latest, Package, Truncation};
use crate::text::clip;
use std::fmt::Write as _;

/// The environment variable that holds the API's address, by default.
pub const URL_VAR: &str = "HANDOFF_URL";
/// The environment variable that holds the destination's bearer token, by default.
pub const TOKEN_VAR: &str = "HANDOFF_TOKEN";

/// What the destination can reach, which decides the closing instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// It can call the API at `base_url`; the variables hold the address and its token.
    Api { base_url: String, url_var: String, token_var: String },
    /// A sandbox without network.
    None,
}

impl Reach {
    /// The API at `base_url`, with the credential in [`URL_VAR`] and [`TOKEN_VAR`].
    pub fn api(base_url: impl Into<String>) -> Reach {
        Reach::Api { base_url: base_url.into(), url_var: URL_VAR.into(), token_var: TOKEN_VAR.into() }
    }
}

/// `?reach=` without the base URL, which the adapter knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReachKind {
    Api,
    None,
}

impl ReachKind {
    /// As `?reach=` writes it (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            ReachKind::Api => "api",
            ReachKind::None => "none",
        }
    }
}

/// A section that may be left out whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    Constraints,
    AcceptanceCriteria,
    Completed,
    Decisions,
    Artifacts,
    Blockers,
    Unresolved,
    RelevantFiles,
}

/// The order sections appear in.
pub const DISPLAY_ORDER: [Section; 8] = [
    Section::Constraints,
    Section::AcceptanceCriteria,
    Section::Completed,
    Section::Decisions,
    Section::Artifacts,
    Section::Blockers,
    Section::Unresolved,
    Section::RelevantFiles,
];

/// The order sections are given up in when the budget is short, first to go first.
pub const DROP_ORDER: [Section; 8] = [
    Section::RelevantFiles,
    Section::Completed,
    Section::Artifacts,
    Section::Decisions,
    Section::Blockers,
    Section::Unresolved,
    Section::Constraints,
    Section::AcceptanceCriteria,
];

impl Section {
    /// Its heading line in the briefing.
    pub fn heading(self) -> &'static str {
        match self {
            Section::Constraints => "## Constraints",
            Section::AcceptanceCriteria => "## Acceptance criteria",
            Section::Completed => "## Completed",
            Section::Decisions => "## Decisions",
            Section::Artifacts => "## Artifacts",
            Section::Blockers => "## Blockers",
            Section::Unresolved => "## Unresolved",
            Section::RelevantFiles => "## Relevant files",
        }
    }

    /// Its name within a sentence.
    fn name(self) -> &'static str {
        match self {
            Section::Constraints => "constraints",
            Section::AcceptanceCriteria => "acceptance criteria",
            Section::Completed => "completed",
            Section::Decisions => "decisions",
            Section::Artifacts => "artifacts",
            Section::Blockers => "blockers",
            Section::Unresolved => "unresolved",
            Section::RelevantFiles => "relevant files",
        }
    }
}

pub const WORK_HEADING: &str = "# Hand-off briefing";
pub const GOAL_HEADING: &str = "## Goal";
pub const OBJECTIVE_HEADING: &str = "## Next objective";
pub const LEFT_OUT_HEADING: &str = "## Left out";
pub const CLOSING_HEADING: &str = "## Before you stop";
/// Ends a clipped text.
pub const CUT_MARK: &str = "[cut]";

/// A rendered briefing and what the rendering gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Briefing {
    pub text: String,
    /// Sections left out to fit, in the order given up (a prefix of [`DROP_ORDER`] less the
    /// sections the package has nothing for).
    pub left_out: Vec<Section>,
    /// Whether the work, goal, objective or closing instruction had to be clipped.
    pub clipped: bool,
}

/// Heads the owner's words, after the briefing.
pub const WORDS_HEADING: &str = "## The owner's words for this turn";

/// The owner's words a briefing of `latest` ends with: the current turn's prompt, when the
/// current turn was handed off with that package (a package compiled on its own briefs no
/// turn's words).
pub fn owners_words<'a>(record: &'a crate::turn::Record, latest: &Latest) -> Option<&'a str> {
    let briefs_current = record.briefed.package_version == Some(latest.package_version);
    record.prompt.as_deref().filter(|_| briefs_current)
}

/// The briefing of `latest` followed by the owner's `words`, whole, under [`WORDS_HEADING`].
///
/// The words count against the budget first and are never cut: the package's part fits what
/// they leave, but never less than [`BRIEFING_BUDGET_BYTES_MIN`], so the text is at most
/// `max(budget, BRIEFING_BUDGET_BYTES_MIN + the words' block)` bytes; it passes the budget only
/// when the owner's words alone leave the package less than that minimum. Without words it is
/// [`render`].
pub fn render_with(latest: &Latest, words: Option<&str>, budget_bytes: usize, reach: &Reach) -> Briefing {
    let Some(words) = words else {
        return render(latest, budget_bytes, reach);
    };
    let block = words_block(words);
    let budget = budget_bytes.clamp(BRIEFING_BUDGET_BYTES_MIN, BRIEFING_BUDGET_BYTES_MAX);
    let left = budget.saturating_sub(block.len()).max(BRIEFING_BUDGET_BYTES_MIN);
    let mut briefing = render(latest, left, reach);
    briefing.text.push_str(&block);
    assert!(
        briefing.text.len() <= budget.max(BRIEFING_BUDGET_BYTES_MIN + block.len()),
        "the owner's words pass the budget only by themselves"
    );
    briefing
}

/// The owner's words as they follow a briefing: a blank line, the heading, the words whole.
pub fn words_block(words: &str) -> String {
    format!("\n{WORDS_HEADING}\n{words}\n")
}

/// A briefing rendered elsewhere (the work record's, which has no package to render with)
/// followed by the owner's `words` as [`render_with`] places them: whole, under
/// [`WORDS_HEADING`], after one blank line. Without words, the briefing as it is.
pub fn with_words(briefing: &str, words: Option<&str>) -> String {
    match words {
        Some(words) => format!("{}\n{}", briefing.trim_end(), words_block(words)),
        None => briefing.to_string(),
    }
}

/// Renders the briefing of `latest` for `reach` in at most `budget_bytes` (clamped to
/// [`BRIEFING_BUDGET_BYTES_MIN`]..=[`BRIEFING_BUDGET_BYTES_MAX`]).
pub fn render(latest: &Latest, budget_bytes: usize, reach: &Reach) -> Briefing {
    let budget = budget_bytes.clamp(BRIEFING_BUDGET_BYTES_MIN, BRIEFING_BUDGET_BYTES_MAX);
    let p = &latest.package;
    let core = [
        (WORK_HEADING, work_body(latest)),
        (GOAL_HEADING, p.work.goal.clone()),
        (OBJECTIVE_HEADING, objective_body(p)),
        (CLOSING_HEADING, closing(p, reach)),
    ];
    let sections: Vec<(Section, String)> =
        DISPLAY_ORDER.iter().filter_map(|&s| section_body(p, s).map(|body| (s, body))).collect();

    // Give up whole sections, in the fixed order, until the text fits.
    let mut left_out: Vec<Section> = Vec::new();
    let mut drop_order = DROP_ORDER.iter().filter(|s| sections.iter().any(|(have, _)| have == *s));
    loop {
        let notes = left_out_notes(&p.truncation, &left_out, budget, latest.package_version, false);
        let kept: Vec<(&str, &str)> =
            sections.iter().filter(|(s, _)| !left_out.contains(s)).map(|(s, b)| (s.heading(), b.as_str())).collect();
        let text = assemble(&core, notes.as_deref(), &kept);
        if text.len() <= budget {
            return finish(text, left_out, false, budget);
        }
        match drop_order.next() {
            Some(&next) => left_out.push(next),
            None => break,
        }
    }

    // Even the core does not fit: short notes, and the core bodies share what is left.
    let notes = left_out_notes(&p.truncation, &left_out, budget, latest.package_version, true)
        .expect("a shortened briefing always has a note");
    let fixed = assemble(&core.clone().map(|(h, _)| (h, String::new())), Some(&notes), &[]).len();
    let lens = core.clone().map(|(_, body)| body.len());
    let caps = share(&lens, budget.saturating_sub(fixed));
    let mut clipped = false;
    let mut fitted = core;
    for ((_, body), cap) in fitted.iter_mut().zip(caps) {
        let out = fit(body, cap);
        clipped |= out != *body;
        *body = out;
    }
    let text = assemble(&fitted, Some(&notes), &[]);
    finish(text, left_out, clipped, budget)
}

fn finish(text: String, left_out: Vec<Section>, clipped: bool, budget: usize) -> Briefing {
    assert!(text.len() <= budget, "a briefing never exceeds its budget");
    Briefing { text, left_out, clipped }
}

/// Blocks in order, each "heading\nbody\n", separated by a blank line; the notes come after
/// the objective, the sections before the closing instruction.
fn assemble(core: &[(&str, String); 4], notes: Option<&str>, sections: &[(&str, &str)]) -> String {
    let mut blocks: Vec<(&str, &str)> = core[..3].iter().map(|(h, b)| (*h, b.as_str())).collect();
    if let Some(notes) = notes {
        blocks.push((LEFT_OUT_HEADING, notes));
    }
    blocks.extend_from_slice(sections);
    blocks.push((core[3].0, core[3].1.as_str()));
    let mut text = String::new();
    for (i, (heading, body)) in blocks.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let _ = write!(text, "{heading}\n{body}\n");
    }
    text
}

/// Splits `total` bytes among texts of `lens` so that no text gets more than it needs and
/// the rest share equally (water-filling). Every text gets at least [`CUT_MARK`]'s length
/// when `total` allows it, which [`BRIEFING_BUDGET_BYTES_MIN`] guarantees.
fn share(lens: &[usize; 4], total: usize) -> [usize; 4] {
    let mut caps = [0; 4];
    let mut left = total;
    let mut open: Vec<usize> = (0..lens.len()).collect();
    while !open.is_empty() {
        let fair = left / open.len();
        let (fits, rest): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| lens[i] <= fair);
        if fits.is_empty() {
            let extra = left % open.len();
            for (k, &i) in open.iter().enumerate() {
                caps[i] = fair + usize::from(k < extra);
            }
            break;
        }
        for i in fits {
            caps[i] = lens[i];
            left -= lens[i];
        }
        open = rest;
    }
    caps
}

/// `text` itself if it fits in `cap` bytes; else its longest prefix that leaves room for
/// " [cut]", cut at a character boundary.
fn fit(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let room = cap.saturating_sub(CUT_MARK.len() + 1);
    let prefix = clip(text, room).trim_end();
    if prefix.is_empty() {
        CUT_MARK.to_string()
    } else {
        format!("{prefix} {CUT_MARK}")
    }
}

fn work_body(latest: &Latest) -> String {
    let p = &latest.package;
    let mut body =
        format!("{}\nHand-off {} (session {}), turn {}", p.work.title, p.work.id, p.work.session, p.state.phase.turn);
    if let Some(t) = &p.work.task_type {
        let _ = write!(body, ", task type {t}");
    }
    if let Some(pr) = &p.work.priority {
        let _ = write!(body, ", priority {pr}");
    }
    let _ = write!(body, ".\nPackage version {}, sha256 {}.", latest.package_version, latest.package_hash);
    body
}

fn objective_body(p: &Package) -> String {
    let mut body = format!("{}\nPurpose: {}\nRuntime: {}", p.next.objective, p.next.purpose, p.next.runtime);
    if let Some(note) = &p.notes {
        let _ = write!(body, "\nOperator's note: {note}");
    }
    body
}

/// A list item: continuation lines indented under the first.
fn item(out: &mut String, first: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&first.replace('\n', "\n  "));
}

/// The body of `section`, or `None` when the package has nothing for it.
fn section_body(p: &Package, section: Section) -> Option<String> {
    let mut out = String::new();
    match section {
        Section::Constraints => p.constraints.iter().for_each(|c| item(&mut out, &format!("- {c}"))),
        Section::AcceptanceCriteria => {
            p.acceptance_criteria.iter().enumerate().for_each(|(i, c)| item(&mut out, &format!("[{i}] {c}")))
        }
        Section::Completed => p.state.completed.iter().for_each(|m| item(&mut out, &format!("- {m}"))),
        Section::Decisions => {
            for d in &p.decisions {
                let mut line = format!("- {}: {}", d.id, d.statement);
                if let Some(r) = &d.rationale {
                    let _ = write!(line, "\nWhy: {r}");
                }
                if !d.evidence.is_empty() {
                    let _ = write!(line, "\nEvidence: {}", d.evidence.join(", "));
                }
                item(&mut out, &line);
            }
        }
        Section::Artifacts => {
            for a in &p.artifacts {
                let mut line = format!("- {} v{} {} ({}): {}", a.id, a.version, a.title, a.kind, a.uri);
                if let Some(sha) = &a.sha256 {
                    let _ = write!(line, "\nsha256 {sha}");
                }
                item(&mut out, &line);
            }
        }
        Section::Blockers => p
            .blockers
            .iter()
            .for_each(|b| item(&mut out, &format!("- {} ({}): {}", b.id, b.severity.as_str(), b.title))),
        Section::Unresolved => p.state.unresolved.iter().for_each(|u| item(&mut out, &format!("- {u}"))),
        Section::RelevantFiles => p.relevant_files.iter().for_each(|f| item(&mut out, &format!("- {f}"))),
    }
    (!out.is_empty()).then_some(out)
}

/// The "Left out" block: the compiler's bounds, then this rendering's. `short` is the form
/// used when even the core had to share the budget.
fn left_out_notes(t: &Truncation, left_out: &[Section], budget: usize, version: u64, short: bool) -> Option<String> {
    let mut notes = Vec::new();
    if t.any() {
        notes.push(if short {
            "The package itself leaves out part of the record.".to_string()
        } else {
            package_note(t)
        });
    }
    if short {
        notes.push(format!("This briefing was shortened to fit a {budget}-byte runtime budget."));
    } else if !left_out.is_empty() {
        let names: Vec<&str> = left_out.iter().map(|s| s.name()).collect();
        let sections = if names.len() == 1 { "section" } else { "sections" };
        notes.push(format!(
            "This briefing was shortened to fit a {budget}-byte runtime budget: it leaves out the {} {sections}, \
             which package version {version} on the service still has whole.",
            join_and(&names)
        ));
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

fn package_note(t: &Truncation) -> String {
    let mut parts = Vec::new();
    if t.decisions_omitted > 0 {
        parts.push(format!("{} older standing decision{}", t.decisions_omitted, plural(t.decisions_omitted)));
    }
    if t.artifacts_omitted > 0 {
        parts.push(format!("{} older artifact title{}", t.artifacts_omitted, plural(t.artifacts_omitted)));
    }
    if t.files_omitted > 0 {
        parts.push(format!("{} less-changed file path{}", t.files_omitted, plural(t.files_omitted)));
    }
    if t.completed_turns_omitted > 0 {
        parts.push(format!(
            "the milestones of {} older turn{}",
            t.completed_turns_omitted,
            plural(t.completed_turns_omitted)
        ));
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    format!(
        "The package itself leaves out {}: it keeps the newest {PACKAGE_DECISIONS_MAX} standing decisions, \
         the newest {PACKAGE_ARTIFACTS_MAX} artifact titles, {PACKAGE_FILES_MAX} file paths and the milestones \
         of the newest {PACKAGE_COMPLETED_TURNS_MAX} turns; the rest stay on the hand-off's record.",
        join_and(&parts)
    )
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The closing instruction, written from what the destination can reach.
pub fn closing(p: &Package, reach: &Reach) -> String {
    let id = &p.work.id;
    match reach {
        // The credential stays with the tools the session was started with (the `handoff` MCP
        // server and the hooks): the model is never told to read or send a token.
        Reach::Api { base_url, url_var, .. } => format!(
            "Keep the hand-off record of {id} as you work, through the hand-off tools this session was given \
             (the handoff MCP server, which reaches the hand-off API at {base_url}, also in the environment \
             variable {url_var}): they hold its credential, so never look for a token, print one or send one \
             yourself. Record decisions, artifacts and blockers as you make, produce or meet them, and report \
             running or needs-you while you work and done or failed when you finish; a final report adds \
             unmet: the indices of the acceptance criteria you did not meet. get_handoff shows the current turn."
        ),
        Reach::None => "You have no network here: do not try to reach the hand-off service, and raise no \
             blocker about it. Your record travels through your final report and the files you leave: in \
             that report, say what you decided and why, name each file or artifact you produced, name \
             anything that blocks you, give this turn's status (done or failed) and list by index the \
             acceptance criteria you did not meet."
            .to_string(),
    }
}

#[cfg(test)]
mod tests;
