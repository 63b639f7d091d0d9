use super::*;
use crate::error::{Code, Refusal};
use crate::fixtures::{self, turn};
use crate::handoff::{apply, Outcome};
use crate::package::{PackageRequest, RejectInput, RejectReason};
use crate::turn::{Record, ReportStatus};
use crate::work::{BlockerInput, Severity, WorkInput};
use proptest::prelude::*;

const ROLES: [Role; 2] = [Role::Owner, Role::Machine];
const NOW: i64 = 5_000;

fn fresh() -> Handoff {
    Handoff::create(Record::create("ho_1".into(), "alice".into(), "s1".into(), "m1".into(), "large".into(), 1_000))
}

fn compile() -> Change {
    let request = PackageRequest {
        objective: "finish".into(),
        purpose: "handover".into(),
        runtime: "codex".into(),
        note: None,
        model: None,
    };
    Change::Compile { request, dry_run: false }
}

fn set_work(goal: &str) -> Change {
    let input = WorkInput {
        title: "Ship it".into(),
        goal: goal.into(),
        task_type: None,
        priority: None,
        constraints: vec![],
        acceptance_criteria: vec!["tests green".into()],
    };
    Change::Work { command: work::Command::SetWork(input) }
}

fn reject(note: &str) -> Change {
    Change::Reject { input: RejectInput { reason: RejectReason::Other, note: note.into() } }
}

fn answer(question: &str, option: &str) -> Change {
    turn(TurnCommand::Answer { question: question.into(), option: option.into(), note: None })
}

fn ask(turn_: u64, text: &str) -> Change {
    fixtures::report(turn_, ReportStatus::NeedsYou).question(fixtures::permission(text)).change()
}

fn resolve(id: &str) -> Change {
    Change::Work { command: work::Command::ResolveBlocker { id: id.into() } }
}

/// Every command a button for `action` could send to `h`: the first one is the button's
/// (it changes the hand-off whenever the action is listed); the rest are the repeats and
/// variants that a stale page could send.
fn commands(action: Action, h: &Handoff) -> Vec<Change> {
    let r = &h.record;
    let current_hash = h.ledger.current.as_ref().map(|c| c.hash.clone());
    match action {
        Action::OpenTurn => vec![turn(TurnCommand::OpenTurn { after: r.turn, prompt: None })],
        Action::Cancel => {
            vec![turn(TurnCommand::Cancel { turn: None }), turn(TurnCommand::Cancel { turn: Some(r.turn) })]
        }
        Action::Close => vec![turn(TurnCommand::Close)],
        Action::Report => {
            // A summary unlike the current one, so that a report of any status is news (but a
            // needs-you while a question waits, which leaves it waiting: not the first).
            let fresh_summary = format!("{}+", r.summary.as_deref().unwrap_or(""));
            let mut all = Vec::new();
            for status in [ReportStatus::Running, ReportStatus::NeedsYou, ReportStatus::Done, ReportStatus::Failed] {
                for summary in [Some(fresh_summary.clone()), r.summary.clone()] {
                    all.push(fixtures::report(r.turn, status).summary(summary.as_deref()).change());
                }
            }
            all
        }
        Action::Compile => vec![compile()],
        Action::Accept => {
            let mut all: Vec<Change> =
                current_hash.into_iter().map(|package_hash| Change::Accept { package_hash }).collect();
            all.push(Change::Accept { package_hash: "0".repeat(64) });
            all
        }
        Action::Reject => {
            let fresh_note = format!(
                "{}+",
                h.ledger.current.as_ref().and_then(|c| c.rejection.as_ref()).map_or("", |x| x.note.as_str())
            );
            vec![reject(&fresh_note), reject("wrong runtime")]
        }
        Action::ResolveBlocker => {
            let open = h.work.blockers.iter().filter(|b| b.status == BlockerStatus::Open);
            let resolved = h.work.blockers.iter().filter(|b| b.status == BlockerStatus::Resolved);
            let mut all: Vec<Change> = open.chain(resolved).map(|b| resolve(&b.id)).collect();
            all.push(resolve("b_missing"));
            all
        }
        Action::SetWork => vec![set_work("another goal")],
        Action::RecordDecision => {
            let input = work::DecisionInput {
                statement: "Use SQLite".into(),
                rationale: None,
                evidence: vec![],
                supersedes: None,
            };
            vec![Change::Work { command: work::Command::RecordDecision(input) }]
        }
        Action::AddArtifact => {
            let input = work::ArtifactInput {
                kind: "doc".into(),
                title: "Notes".into(),
                uri: "https://example.com/n".into(),
                sha256: None,
            };
            vec![Change::Work { command: work::Command::AddArtifact(input) }]
        }
        Action::AddBlocker => {
            let input = BlockerInput { severity: Severity::Low, title: "a blocker".into() };
            vec![Change::Work { command: work::Command::AddBlocker(input) }]
        }
        Action::ReportWorkspace => {
            let files = vec![work::FileInput { path: "src/a.rs".into(), insertions: 1, deletions: 0 }];
            vec![Change::Work { command: work::Command::ReportWorkspace(work::WorkspaceInput { files }) }]
        }
        Action::SetPolicy => {
            let policy = crate::suggestion::Policy {
                runtimes: vec!["codex".into()],
                context_threshold_pct: 80,
                quota_threshold: None,
            };
            vec![Change::SetPolicy { policy }]
        }
        Action::SetRuntimes => {
            let input = crate::runtimes::RuntimesInput { runtimes: vec![], checked_at: None };
            vec![Change::SetRuntimes { input }]
        }
        Action::Answer => {
            // The open question's first option (the button), then its other option, an older
            // question's id and an option it does not offer.
            let id = r.question.as_ref().map_or("q_0", |q| q.id.as_str());
            vec![answer(id, "allow"), answer(id, "deny"), answer("q_0", "allow"), answer(id, "maybe")]
        }
        Action::Steer => {
            // The current turn (the button), then an older and a later one.
            let steer = |turn: u64| turn_steer(turn, "use SQLite instead");
            vec![steer(r.turn), steer(r.turn.saturating_sub(1)), steer(r.turn + 1)]
        }
    }
}

fn turn_steer(turn_number: u64, words: &str) -> Change {
    turn(TurnCommand::Steer { turn: turn_number, prompt: words.into() })
}

/// Whether an outcome is what a listed action's button must get: accepted, and a change
/// (a compile may answer that its package is unchanged).
fn takes(action: Action, outcome: &Result<Outcome, Refusal>) -> bool {
    match outcome {
        Ok(out) => out.moved || action == Action::Compile,
        Err(_) => false,
    }
}

/// The property, for one hand-off: listed actions are taken, unlisted ones refused or
/// repeats that change nothing.
fn check(h: &Handoff) -> Result<(), TestCaseError> {
    for role in ROLES {
        let listed = actions(h, role);
        for action in Action::ALL.into_iter().filter(|a| a.listed()) {
            let all = commands(action, h);
            if listed.contains(&action) {
                let out = apply(h, &all[0], role, NOW);
                prop_assert!(
                    takes(action, &out),
                    "{} listed for the {} but not taken: {:?}\n{:?}",
                    action.as_str(),
                    role.as_str(),
                    out.err(),
                    h.record
                );
            } else {
                for change in &all {
                    let out = apply(h, change, role, NOW);
                    let changed = out.as_ref().is_ok_and(|o| o.moved);
                    prop_assert!(
                        !changed,
                        "{} unlisted for the {} but {:?} changed the hand-off\n{:?}",
                        action.as_str(),
                        role.as_str(),
                        change,
                        h.record
                    );
                }
            }
        }
    }
    Ok(())
}

/// One step of a random history, sent by the role it belongs to; a refused step is skipped.
#[derive(Debug, Clone)]
enum Step {
    Open,
    Report(ReportStatus, u8),
    Cancel,
    Close,
    Compile,
    Accept,
    Reject(u8),
    Block,
    Resolve(usize),
    SetWork(u8),
    Ask(u8),
    Answer(bool),
    Steer,
}

fn step() -> impl Strategy<Value = Step> {
    let status = prop_oneof![
        Just(ReportStatus::Running),
        Just(ReportStatus::NeedsYou),
        Just(ReportStatus::Done),
        Just(ReportStatus::Failed)
    ];
    prop_oneof![
        3 => Just(Step::Open),
        4 => (status, 0..3u8).prop_map(|(s, n)| Step::Report(s, n)),
        1 => Just(Step::Cancel),
        1 => Just(Step::Close),
        2 => Just(Step::Compile),
        2 => Just(Step::Accept),
        2 => (0..2u8).prop_map(Step::Reject),
        2 => Just(Step::Block),
        2 => (0..4usize).prop_map(Step::Resolve),
        2 => (0..2u8).prop_map(Step::SetWork),
        3 => (0..2u8).prop_map(Step::Ask),
        3 => any::<bool>().prop_map(Step::Answer),
        3 => Just(Step::Steer),
    ]
}

fn change_of(step: &Step, h: &Handoff) -> (Change, Role) {
    let r = &h.record;
    match step {
        Step::Open => (turn(TurnCommand::OpenTurn { after: r.turn, prompt: None }), Role::Owner),
        Step::Report(status, n) => {
            let summary = (*n > 0).then(|| format!("summary {n}"));
            (fixtures::report(r.turn, *status).summary(summary.as_deref()).change(), Role::Machine)
        }
        Step::Cancel => (turn(TurnCommand::Cancel { turn: None }), Role::Owner),
        Step::Close => (turn(TurnCommand::Close), Role::Owner),
        Step::Compile => (compile(), Role::Owner),
        Step::Accept => {
            let package_hash = h.ledger.current.as_ref().map_or_else(|| "0".repeat(64), |c| c.hash.clone());
            (Change::Accept { package_hash }, Role::Machine)
        }
        Step::Reject(n) => (reject(&format!("note {n}")), Role::Machine),
        Step::Block => {
            let input = BlockerInput { severity: Severity::High, title: format!("blocker {}", h.work.blockers.len()) };
            (Change::Work { command: work::Command::AddBlocker(input) }, Role::Owner)
        }
        Step::Resolve(i) => {
            let id = h.work.blockers.get(*i).map_or_else(|| "b_missing".to_string(), |b| b.id.clone());
            (resolve(&id), Role::Machine)
        }
        Step::SetWork(n) => (set_work(&format!("goal {n}")), Role::Owner),
        Step::Ask(n) => (ask(r.turn, &format!("Bash: step {n}")), Role::Machine),
        Step::Answer(allow) => {
            let id = r.question.as_ref().map_or("q_0", |q| q.id.as_str());
            (answer(id, if *allow { "allow" } else { "deny" }), Role::Owner)
        }
        Step::Steer => (turn_steer(r.turn, "also the tests"), Role::Owner),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The contract of `actions`, at every hand-off a random history reaches.
    #[test]
    fn every_listed_action_is_taken_and_every_unlisted_one_refused_or_a_no_op(steps in prop::collection::vec(step(), 0..24)) {
        let mut h = fresh();
        check(&h)?;
        for s in &steps {
            let (change, by) = change_of(s, &h);
            if let Ok(out) = apply(&h, &change, by, NOW) {
                h = out.next;
                check(&h)?;
            }
        }
    }
}

#[test]
fn a_new_hand_off_offers_the_owner_cancel_close_and_steer_and_the_machine_its_report() {
    let h = fresh();
    assert_eq!(actions(&h, Role::Owner), [Action::Cancel, Action::Close, Action::Steer]);
    assert_eq!(actions(&h, Role::Machine), [Action::Report]);
    let worked = apply(&h, &set_work("goal"), Role::Owner, NOW).unwrap().next;
    assert_eq!(actions(&worked, Role::Owner), [Action::Cancel, Action::Close, Action::Compile, Action::Steer]);
}

/// `steer` is listed while the turn goes and has room for one more, and not once it ends.
#[test]
fn steer_is_listed_while_the_turn_goes_until_the_bound_and_not_once_it_ends() {
    use crate::limits::STEERS_PER_TURN_MAX;
    let mut h = fresh();
    for _ in 0..STEERS_PER_TURN_MAX {
        assert!(actions(&h, Role::Owner).contains(&Action::Steer));
        h = apply(&h, &turn_steer(1, "and the tests"), Role::Owner, NOW).unwrap().next;
    }
    assert!(!actions(&h, Role::Owner).contains(&Action::Steer), "the bound reached");
    let refused = apply(&h, &turn_steer(1, "one more"), Role::Owner, NOW).unwrap_err();
    assert_eq!(refused.code, crate::error::Code::SteerTooMany);
    let done = report_change(1, ReportStatus::Done);
    let ended = apply(&fresh(), &done, Role::Machine, NOW).unwrap().next;
    assert!(!actions(&ended, Role::Owner).contains(&Action::Steer));
}

fn report_change(turn_number: u64, status: ReportStatus) -> Change {
    fixtures::report(turn_number, status).change()
}

#[test]
fn a_closed_hand_off_offers_nothing_to_anyone() {
    let h = apply(&fresh(), &turn(TurnCommand::Close), Role::Owner, NOW).unwrap().next;
    for role in ROLES {
        assert!(actions(&h, role).is_empty());
    }
}

/// Every change has one sender rule, and `apply` is where it is enforced: for each action
/// with a sender, every command of it from the other role is 403 before anything else.
#[test]
fn apply_refuses_each_action_from_the_role_that_may_not_send_it() {
    let h = fresh();
    for action in Action::ALL {
        let Some(sender) = action.sender() else { continue };
        let other = if sender == Role::Owner { Role::Machine } else { Role::Owner };
        for change in commands(action, &h) {
            let refused = apply(&h, &change, other, NOW).err().map(|e| e.code);
            assert_eq!(refused, Some(Code::AuthForbidden), "{} from the {}", action.as_str(), other.as_str());
        }
    }
}

#[test]
fn each_action_names_the_change_it_is_and_only_the_buttons_are_listed() {
    let h = fresh();
    for action in Action::ALL {
        for change in commands(action, &h) {
            assert_eq!(Action::of(&change), action, "{change:?}");
        }
    }
    let listed: Vec<&str> = Action::ALL.into_iter().filter(|a| a.listed()).map(Action::as_str).collect();
    assert_eq!(
        listed,
        ["open_turn", "cancel", "close", "report", "compile", "accept", "reject", "resolve_blocker", "answer", "steer"]
    );
}

#[test]
fn an_action_is_written_the_same_by_as_str_and_by_serde() {
    for action in Action::ALL {
        assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
    }
}
