use super::*;
use crate::package::tests::{check_golden, rich_package};
use crate::package::{
    package_hash, Latest, Next, OfferState, Package, PackageBlocker, PackageDecision, PackageState, PackageWork, Phase,
    Source, Truncation,
};
use crate::turn::{State, Status};
use crate::work::{BlockerStatus, HandedArtifact, Severity};
use proptest::prelude::*;

const BASE_URL: &str = "https://handoff.example.com";

fn latest(package: Package) -> Latest {
    Latest {
        package_version: 3,
        package_hash: package_hash(&package),
        state: OfferState::Offered,
        rejection: None,
        package,
        document: Default::default(),
    }
}

/// The body under `heading`, up to the next block, or `None` when the heading is absent.
fn block<'a>(text: &'a str, heading: &str) -> Option<&'a str> {
    let start = text.find(&format!("{heading}\n"))? + heading.len() + 1;
    let rest = &text[start..];
    let end = rest.find("\n\n#").map_or(rest.len() - 1, |e| e);
    Some(&rest[..end])
}

/// `shown` is `full`, or a prefix of it marked `[cut]`.
fn whole_or_cut(shown: &str, full: &str) -> bool {
    if shown == full {
        return true;
    }
    match shown.strip_suffix(CUT_MARK) {
        Some(prefix) => full.starts_with(prefix.trim_end()),
        None => false,
    }
}

#[test]
fn both_closing_wordings_match_their_fixtures() {
    let p = rich_package();
    check_golden("briefing/closing-api.txt", &(closing(&p, &Reach::api(BASE_URL)) + "\n"));
    check_golden("briefing/closing-none.txt", &(closing(&p, &Reach::None) + "\n"));
}

#[test]
fn the_api_closing_names_the_address_but_never_tells_the_model_to_send_the_token_and_the_none_closing_says_no_network()
{
    let p = rich_package();
    let api = closing(&p, &Reach::api(BASE_URL));
    assert!(api.contains(BASE_URL) && api.contains(URL_VAR) && api.contains("ho_0123456789abcdef0123456789abcdef"));
    assert!(
        !api.contains(TOKEN_VAR) && !api.contains("Bearer"),
        "the credential stays with the session's tools: {api}"
    );
    assert!(api.contains("never look for a token, print one or send one yourself"));
    let none = closing(&p, &Reach::None);
    assert!(none.contains("no network") && none.contains("raise no blocker"));
    assert!(none.contains("final report") && none.contains("files you leave"));
    assert!(!none.contains(TOKEN_VAR) && !none.contains("/v1/"));
}

#[test]
fn a_whole_briefing_at_the_default_budget_matches_its_fixture() {
    let b = render(&latest(rich_package()), BRIEFING_BUDGET_BYTES_DEFAULT, &Reach::api(BASE_URL));
    assert!(b.left_out.is_empty() && !b.clipped);
    assert!(!b.text.contains("This briefing was shortened"));
    check_golden("briefing/rich-8192-api.txt", &b.text);
}

#[test]
fn a_shortened_briefing_says_which_sections_it_left_out() {
    let full = render(&latest(rich_package()), BRIEFING_BUDGET_BYTES_MAX, &Reach::None).text.len();
    // One byte short: the relevant files go first, and the note that says so costs more
    // bytes than they did, so the next sections in the drop order follow.
    let b = render(&latest(rich_package()), full - 1, &Reach::None);
    assert_eq!(b.left_out, [Section::RelevantFiles, Section::Completed, Section::Artifacts]);
    assert!(!b.clipped);
    for gone in ["## Relevant files", "## Completed", "## Artifacts"] {
        assert!(!b.text.contains(gone), "{gone}");
    }
    assert!(b.text.contains("## Decisions"));
    assert!(b.text.contains(&format!(
        "This briefing was shortened to fit a {}-byte runtime budget: it leaves out the relevant files, completed \
         and artifacts sections, which package version 3 on the service still has whole.",
        full - 1
    )));
    check_golden("briefing/rich-1400-none.txt", &render(&latest(rich_package()), 1400, &Reach::None).text);
}

#[test]
fn the_two_notes_are_worded_so_neither_reads_as_the_other() {
    let mut p = rich_package();
    p.truncation =
        Truncation { decisions_omitted: 1, artifacts_omitted: 2, files_omitted: 3, completed_turns_omitted: 0 };
    let full = render(&latest(p.clone()), BRIEFING_BUDGET_BYTES_MAX, &Reach::api(BASE_URL)).text.len();
    let budget = full - 200;
    let b = render(&latest(p), budget, &Reach::api(BASE_URL));
    assert!(!b.clipped && !b.left_out.is_empty(), "{b:?}");
    let notes = block(&b.text, LEFT_OUT_HEADING).unwrap();
    let lines: Vec<&str> = notes.lines().collect();
    assert!(lines[0].starts_with("The package itself leaves out 1 older standing decision, 2 older artifact titles and 3 less-changed file paths"));
    assert!(lines[1].starts_with(&format!(
        "This briefing was shortened to fit a {budget}-byte runtime budget: it leaves out the "
    )));
    assert!(!lines[0].contains("briefing") && !lines[1].contains("package itself"));
}

#[test]
fn at_the_smallest_budget_huge_core_texts_are_clipped_and_marked() {
    let mut p = rich_package();
    p.work.goal = "検索".repeat(2_000);
    p.next.objective = "o".repeat(3_000);
    p.truncation.files_omitted = 9;
    let b = render(&latest(p.clone()), BRIEFING_BUDGET_BYTES_MIN, &Reach::api(BASE_URL));
    assert!(b.text.len() <= BRIEFING_BUDGET_BYTES_MIN, "{}", b.text.len());
    assert!(b.clipped);
    assert_eq!(b.left_out.len(), 8);
    for heading in [WORK_HEADING, GOAL_HEADING, OBJECTIVE_HEADING, CLOSING_HEADING] {
        assert!(block(&b.text, heading).unwrap().ends_with(CUT_MARK), "{heading}:\n{}", b.text);
    }
    assert!(b.text.contains("This briefing was shortened to fit a 256-byte runtime budget."));
    assert!(b.text.contains("The package itself leaves out"));
}

#[test]
fn water_filling_gives_short_texts_what_they_need_and_shares_the_rest() {
    assert_eq!(share(&[10, 100, 100, 5], 95), [10, 40, 40, 5]);
    assert_eq!(share(&[1, 1, 1, 1], 100), [1, 1, 1, 1]);
    assert_eq!(share(&[50, 50, 50, 50], 22), [6, 6, 5, 5]);
}

#[test]
fn clipping_never_breaks_a_character() {
    assert_eq!(fit("ééé", 6), "ééé");
    assert_eq!(fit("éééééé", 9), "é [cut]");
    assert_eq!(fit("éééééé", 8), "é [cut]");
    assert_eq!(fit("éééééé", 7), "[cut]");
}

// ---- Property: any package, any budget ----

fn text_strategy(max_chars: usize) -> impl Strategy<Value = String> {
    // Letters, spaces, newlines and multi-byte characters; no '#', so no text forges a heading.
    proptest::string::string_regex(&format!("[a-zé検🦀 \n]{{1,{max_chars}}}")).unwrap()
}

fn texts(max_items: usize, max_chars: usize) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(text_strategy(max_chars), 0..=max_items)
}

prop_compose! {
    fn package_strategy()(
        title in text_strategy(200),
        goal in text_strategy(4000),
        objective in text_strategy(2000),
        note in proptest::option::of(text_strategy(2000)),
        constraints in texts(10, 300),
        criteria in texts(10, 300),
        completed in texts(12, 30),
        unresolved in texts(10, 200),
        decisions in texts(20, 500),
        artifacts in texts(20, 100),
        blockers in texts(8, 100),
        files in texts(100, 80),
        omitted in (0u64..3, 0u64..3, 0u64..3),
    ) -> Package {
        let mut p = rich_package();
        p.work = PackageWork { id: "ho_x".into(), session: "s".into(), title, goal, task_type: None, priority: None, state: State::Open };
        p.constraints = constraints;
        p.acceptance_criteria = criteria;
        p.state = PackageState { phase: Phase { state: State::Open, turn: 4, status: Status::Running }, completed, unresolved };
        p.decisions = decisions.into_iter().enumerate().map(|(i, s)| PackageDecision {
            id: format!("dec_{i}"), statement: s, rationale: None, recorded_at: crate::time::parse_rfc3339("2026-01-01T00:00:00.000Z").unwrap().into(), evidence: vec![],
        }).collect();
        p.artifacts = artifacts.into_iter().enumerate().map(|(i, t)| HandedArtifact {
            id: format!("art_{i}"), kind: "doc".into(), title: t, version: 1, uri: "https://a.example".into(), sha256: None,
        }).collect();
        p.blockers = blockers.into_iter().enumerate().map(|(i, t)| PackageBlocker {
            id: format!("blk_{i}"), severity: Severity::Low, title: t, status: BlockerStatus::Open,
        }).collect();
        p.relevant_files = files;
        p.next = Next { objective, purpose: "p".into(), runtime: "r".into() };
        p.source = Source { session: "s".into(), machine: "m".into(), runtime: None };
        p.notes = note;
        p.truncation = Truncation { decisions_omitted: omitted.0, artifacts_omitted: omitted.1, files_omitted: omitted.2, completed_turns_omitted: 0 };
        p
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn any_briefing_fits_its_budget_keeps_the_core_and_drops_sections_only_in_the_stated_order(
        package in package_strategy(),
        budget in BRIEFING_BUDGET_BYTES_MIN..=BRIEFING_BUDGET_BYTES_MAX,
        reach_api in any::<bool>(),
    ) {
        let reach = if reach_api { Reach::api(BASE_URL) } else { Reach::None };
        let latest = latest(package);
        let whole = render(&latest, BRIEFING_BUDGET_BYTES_MAX, &reach);
        let b = render(&latest, budget, &reach);

        // Never over budget, always valid UTF-8.
        prop_assert!(b.text.len() <= budget);
        prop_assert!(std::str::from_utf8(b.text.as_bytes()).is_ok());

        // The work, goal, objective and instruction: present, whole or marked [cut].
        for heading in [WORK_HEADING, GOAL_HEADING, OBJECTIVE_HEADING, CLOSING_HEADING] {
            let full = block(&whole.text, heading).unwrap();
            let shown = block(&b.text, heading);
            prop_assert!(shown.is_some(), "{} missing", heading);
            prop_assert!(whole_or_cut(shown.unwrap(), full), "{} neither whole nor marked", heading);
        }

        // Sections left out: a prefix of the drop order (less the empty ones), none other.
        let present: Vec<Section> = DROP_ORDER.iter().copied().filter(|&s| section_body(&latest.package, s).is_some()).collect();
        prop_assert_eq!(&b.left_out[..], &present[..b.left_out.len()]);
        for s in &present {
            let shown = b.text.contains(&format!("\n{}\n", s.heading()));
            prop_assert_eq!(shown, !b.left_out.contains(s), "{:?}", s);
        }
        prop_assert!(!b.clipped || b.left_out.len() == present.len(), "the core is clipped only after every section went");

        // The two notes, each exactly when it applies.
        let shortened = format!("This briefing was shortened to fit a {budget}-byte runtime budget");
        prop_assert_eq!(b.text.contains(&shortened), !b.left_out.is_empty() || b.clipped);
        prop_assert_eq!(b.text.contains("The package itself leaves out"), latest.package.truncation.any());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The owner's words follow the briefing whole, under their heading, and count against the
    /// budget first: the text fits the budget unless the words alone leave the package less
    /// than the smallest budget, and then it passes the budget by no more than the words.
    #[test]
    fn the_owners_words_follow_the_briefing_whole_and_count_against_the_budget_first(
        package in package_strategy(),
        budget in BRIEFING_BUDGET_BYTES_MIN..=BRIEFING_BUDGET_BYTES_MAX,
        words in "[a-zé \n\t]{1,400}",
        repeat in 1usize..60,
    ) {
        let words = words.repeat(repeat).chars().take(PROMPT_BYTES_MAX / 2).collect::<String>();
        let latest = latest(package);
        let reach = Reach::api(BASE_URL);
        let b = render_with(&latest, Some(&words), budget, &reach);
        let block = words_block(&words);
        prop_assert_eq!(&block, &format!("\n{WORDS_HEADING}\n{words}\n"));
        prop_assert!(b.text.ends_with(&block), "the words, whole, last");
        let room = budget.saturating_sub(block.len());
        if room >= BRIEFING_BUDGET_BYTES_MIN {
            prop_assert!(b.text.len() <= budget);
            prop_assert_eq!(&b.text[..b.text.len() - block.len()], render(&latest, room, &reach).text);
        } else {
            prop_assert!(b.text.len() <= BRIEFING_BUDGET_BYTES_MIN + block.len());
        }
        prop_assert_eq!(render_with(&latest, None, budget, &reach), render(&latest, budget, &reach), "no words: the briefing alone");
    }
}

#[test]
fn the_words_are_the_current_turns_only_when_the_package_briefs_it() {
    let latest = latest(rich_package());
    let mut r = crate::turn::Record::create("ho_1".into(), "alice".into(), "s".into(), "m".into(), "l".into(), 0);
    r.prompt = Some("now add the tests".into());
    assert_eq!(owners_words(&r, &latest), None, "a package compiled on its own briefs no turn's words");
    r.briefed.package_version = Some(latest.package_version);
    assert_eq!(owners_words(&r, &latest), Some("now add the tests"));
    r.briefed.package_version = Some(latest.package_version + 1);
    assert_eq!(owners_words(&r, &latest), None, "another package's turn");
}

#[test]
fn the_owners_words_follow_a_briefing_rendered_elsewhere_under_their_heading_after_one_blank_line() {
    let briefing = "# Hand-off briefing\nConfig parser\n\n## Goal\nParse it\n\n";
    assert_eq!(
        with_words(briefing, Some("--help me\nwith it")),
        format!("# Hand-off briefing\nConfig parser\n\n## Goal\nParse it\n\n{WORDS_HEADING}\n--help me\nwith it\n")
    );
    assert_eq!(with_words(briefing, None), briefing, "no words, nothing added");
}
