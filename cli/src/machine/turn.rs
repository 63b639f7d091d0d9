//! The start of a turn, one way for `handoff launch` and `handoff serve`: which turn is
//! briefed and from what ([`target`], [`prepare`]), then [`start_turn`]: find the program,
//! write the token file, set the environment, accept the package, read the briefing, add the
//! owner's words (the core's `briefing::with_words`) and the launcher's paragraph.
//! The caller spawns.

use super::env::{ENV_ID, ENV_STATE_DIR, ENV_TOKEN, ENV_TOKEN_FILE, ENV_URL};
use super::server::MCP_SERVER;
use super::Runtime;
use crate::client::{Client, Error, Handoff, OfferState, WorkRecord};
use handoff_core::limits::{BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN};
use handoff_core::text::clip;
use handoff_core::turn::{State, Status};
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a session without network writes its decisions, in the folder it was started in.
pub const NOTES_FILE: &str = "NOTES.md";

/// The turn a launch briefs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub runtime: Runtime,
    pub turn: u64,
    /// The turn was handed to this runtime with a package; otherwise the work record briefs it.
    pub from_package: bool,
}

/// Why a hand-off cannot be launched as asked; the API was asked nothing that changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Closed {
        id: String,
    },
    /// The token is an owner's, which the session must never be given.
    OwnerToken,
    TurnEnded {
        turn: u64,
        status: Status,
    },
    OtherRuntime {
        turn: u64,
        handed_to: String,
        asked: String,
    },
    NoRuntime {
        turn: u64,
    },
    UnknownRuntime {
        name: String,
    },
    NothingToBrief {
        turn: u64,
    },
    Budget {
        bytes: u32,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Closed { id } => write!(f, "{id} is closed: there is no turn to launch"),
            Refused::OwnerToken => write!(
                f,
                "that is an owner's token, and the session is given the token it launches with: launch with the \
                 hand-off's machine token"
            ),
            Refused::TurnEnded { turn, status } => {
                write!(f, "turn {turn} is {}: open the next turn (handoff turn) before launching it", status.as_str())
            }
            Refused::OtherRuntime { turn, handed_to, asked } => {
                write!(f, "turn {turn} was handed to {handed_to}, not {asked}: launch it with --runtime {handed_to}")
            }
            Refused::NoRuntime { turn } => {
                write!(
                    f,
                    "turn {turn} was handed to no runtime: say which with --runtime claude-code or --runtime codex"
                )
            }
            Refused::UnknownRuntime { name } => write!(f, "the launcher starts claude-code or codex, not {name}"),
            Refused::NothingToBrief { turn } => write!(
                f,
                "turn {turn} has no package and the work record has no title or goal: set it with `handoff work` first"
            ),
            Refused::Budget { bytes } => {
                write!(f, "--budget {bytes}: {BRIEFING_BUDGET_BYTES_MIN} to {BRIEFING_BUDGET_BYTES_MAX} bytes")
            }
        }
    }
}

impl std::error::Error for Refused {}

/// Which turn of `h` (as read with the token the launch gives the session) a launch of
/// `asked`, or of the runtime the turn was handed to, briefs.
pub fn target(h: &Handoff, asked: Option<&str>) -> Result<Target, Refused> {
    if h.state == State::Closed {
        return Err(Refused::Closed { id: h.id.clone() });
    }
    // Only the owner may close: a record that lists `close` was read with an owner's token.
    if h.actions.iter().any(|a| a == "close") {
        return Err(Refused::OwnerToken);
    }
    if h.status.has_ended() {
        return Err(Refused::TurnEnded { turn: h.turn, status: h.status });
    }
    let handed_to = h.briefed.runtime.as_deref();
    let name = asked.or(handed_to).ok_or(Refused::NoRuntime { turn: h.turn })?;
    let runtime = Runtime::parse(name).ok_or_else(|| Refused::UnknownRuntime { name: name.to_string() })?;
    if let Some(handed_to) = handed_to.filter(|r| *r != name) {
        return Err(Refused::OtherRuntime { turn: h.turn, handed_to: handed_to.to_string(), asked: name.to_string() });
    }
    Ok(Target { runtime, turn: h.turn, from_package: handed_to.is_some() && h.briefed.package_hash.is_some() })
}

/// The budget of a launch: `--budget`, else the runtime's.
pub fn budget_bytes(runtime: Runtime, asked: Option<u32>) -> Result<u32, Refused> {
    let bytes = asked.unwrap_or(runtime.budget_bytes_default());
    let allowed = BRIEFING_BUDGET_BYTES_MIN as u32..=BRIEFING_BUDGET_BYTES_MAX as u32;
    if allowed.contains(&bytes) {
        Ok(bytes)
    } else {
        Err(Refused::Budget { bytes })
    }
}

/// The package a launch briefs from, as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRef {
    pub version: u64,
    pub hash: String,
}

/// What the launcher logs and prints: `briefed from package v3 (9f2c1a8b…)`, or
/// `briefed from the work record`.
pub fn briefed_line(package: Option<&PackageRef>) -> String {
    match package {
        Some(p) => format!("briefed from package v{} ({})", p.version, crate::output::short_hash(&p.hash)),
        None => "briefed from the work record".to_string(),
    }
}

/// The marker a clipped work-record briefing ends with, as the package briefing marks its own.
const CUT_MARK: &str = "\n[cut]";

/// The briefing of a turn that has no package: the work record alone (goal, constraints,
/// acceptance criteria), its title standing in for an objective, within `budget_bytes`.
pub fn work_briefing(h: &Handoff, work: &WorkRecord, budget_bytes: u32) -> Result<String, Refused> {
    let spec = work.spec.as_ref().filter(|s| !s.title.trim().is_empty() || !s.goal.trim().is_empty());
    let Some(spec) = spec else {
        return Err(Refused::NothingToBrief { turn: h.turn });
    };
    let mut text = String::from("# Hand-off briefing\n");
    text.push_str(&format!("{}\n", spec.title));
    let mut facts = format!("Hand-off {} (session {}), turn {}", h.id, h.session, h.turn);
    if let Some(t) = spec.task_type.as_deref().filter(|t| !t.is_empty()) {
        facts.push_str(&format!(", task type {t}"));
    }
    if let Some(p) = spec.priority.as_deref().filter(|p| !p.is_empty()) {
        facts.push_str(&format!(", priority {p}"));
    }
    text.push_str(&format!(
        "{facts}.\nNo package was compiled for this turn: this briefing is the work record alone.\n"
    ));
    text.push_str(&format!("\n## Goal\n{}\n", spec.goal));
    text.push_str(&format!("\n## Next objective\n{}\n", spec.title));
    if !spec.constraints.is_empty() {
        text.push_str("\n## Constraints\n");
        spec.constraints.iter().for_each(|c| text.push_str(&format!("- {c}\n")));
    }
    if !spec.acceptance_criteria.is_empty() {
        text.push_str("\n## Acceptance criteria\n");
        spec.acceptance_criteria.iter().enumerate().for_each(|(i, c)| text.push_str(&format!("[{i}] {c}\n")));
    }
    let budget = (budget_bytes as usize).clamp(BRIEFING_BUDGET_BYTES_MIN, BRIEFING_BUDGET_BYTES_MAX);
    if text.len() > budget {
        let kept = clip(&text, budget - CUT_MARK.len()).to_string();
        text = kept + CUT_MARK;
    }
    assert!(text.len() <= budget, "a briefing never exceeds its budget");
    Ok(text)
}

/// The tools of `handoff mcp` a session records with, as the paragraph lists them.
const TOOL_LINES: &str = "\x20 record_decision: what you decided, and why\n\
     \x20 add_artifact: a file, report or pull request you produced\n\
     \x20 raise_blocker: something you cannot get past by yourself\n\
     \x20 ask_owner: a question for the owner with the answers they may pick; it waits for the answer\n\
     \x20 report: done or failed before you stop (unmet: the indices of the acceptance criteria you did not meet)\n";

/// The launcher's paragraph after the briefing: how this session records its turn, through the
/// `handoff` MCP server the launcher starts it with. Codex's adds what to leave for the launcher
/// when the server cannot start. The two wordings are `test/fixtures/launch/access-api.txt` and
/// `access-none.txt`.
pub fn access_paragraph(runtime: Runtime, id: &str, turn: u64) -> String {
    let server = format!(
        "The MCP server `{MCP_SERVER}` this session was started with records on hand-off {id} for you: it reads \
         {ENV_URL}, {ENV_ID} and the token in {ENV_TOKEN_FILE} itself, so never read, print or pass them anywhere. Record with its \
         tools as you work, not only at the end:\n{TOOL_LINES}\
         get_briefing and get_handoff read the briefing and the hand-off again. A session that stops without a report \
         leaves turn {turn} open.\n"
    );
    if runtime.has_network() {
        format!("## Recording this turn\n{server}")
    } else {
        format!(
            "## Recording this turn\n\
             This sandbox has no network: do not try to reach the hand-off service, and raise no blocker about that. \
             {server}\
             Only if the {MCP_SERVER} tools are not there, the launcher that started you records turn {turn} after you \
             stop, from what you leave:\n\
             \x20 in {NOTES_FILE}, one line for each decision: Decision: WHAT YOU DECIDED\n\
             \x20 in {NOTES_FILE} or your final message, one line for each file you produced: Artifact: PATH\n\
             \x20 and one for each thing that blocks you: Blocker (low|medium|high): WHAT BLOCKS YOU\n\
             \x20 in your final message, what you did, then a line Status: done or Status: failed, and a line \
             Unmet: 0,2 naming by index the acceptance criteria you did not meet.\n"
        )
    }
}

/// The first prompt: the briefing, then the launcher's paragraph.
pub fn prompt(briefing: &str, paragraph: &str) -> String {
    format!("{}\n\n{paragraph}", briefing.trim_end())
}

/// Why a turn did not start (or, for a launch, what it left could not be recorded).
#[derive(Debug)]
pub enum TurnError {
    /// The API refused, or could not be reached.
    Api(Error),
    /// The hand-off cannot be launched as asked.
    Refused(Refused),
    /// This machine is not ready: the program is missing, the hooks could not be installed.
    Setup(String),
    /// The API refused (or did not take) the acceptance of package version `.0`.
    Accept(u64, Error),
}

impl From<Error> for TurnError {
    fn from(e: Error) -> Self {
        TurnError::Api(e)
    }
}

impl From<Refused> for TurnError {
    fn from(r: Refused) -> Self {
        TurnError::Refused(r)
    }
}

/// What briefs the turn, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Package { package: PackageRef, accepted: bool },
    Work(Box<WorkRecord>),
}

/// Everything read before anything is accepted or started.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub handoff: Handoff,
    pub target: Target,
    pub budget_bytes: u32,
    pub source: Source,
}

impl Prepared {
    pub fn package(&self) -> Option<&PackageRef> {
        match &self.source {
            Source::Package { package, .. } => Some(package),
            Source::Work(_) => None,
        }
    }
}

/// Reads the hand-off, decides which turn is launched, and reads what briefs it: the latest
/// package (its version, hash and whether it is accepted) or the work record.
pub fn prepare(client: &Client, id: &str, runtime: Option<&str>, budget: Option<u32>) -> Result<Prepared, TurnError> {
    let handoff = client.get(id)?.value;
    let target = target(&handoff, runtime)?;
    let budget_bytes = budget_bytes(target.runtime, budget)?;
    let source = if target.from_package {
        let latest = client.package_latest(id)?.value;
        let package = PackageRef { version: latest.package_version, hash: latest.package_hash };
        Source::Package { package, accepted: latest.state == OfferState::Accepted }
    } else {
        Source::Work(Box::new(client.work(id)?.value))
    };
    Ok(Prepared { handoff, target, budget_bytes, source })
}

/// Accepts exactly the package that was read, unless it was accepted already; answers whether
/// it accepted now. A package that moved since is refused by the API with `package.stale`.
/// Once accepted, the package of this turn cannot move (a compile is refused).
pub fn accept(client: &Client, prepared: &Prepared) -> Result<bool, Error> {
    match &prepared.source {
        Source::Package { package, accepted: false } => {
            client.accept(&prepared.handoff.id, &package.hash)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The briefing at the launch's budget: the API's rendering of the package for what the
/// runtime can reach, or the work record's.
pub fn briefing(client: &Client, prepared: &Prepared) -> Result<String, TurnError> {
    match &prepared.source {
        Source::Package { .. } => {
            let reach = prepared.target.runtime.reach();
            Ok(client.briefing(&prepared.handoff.id, Some(prepared.budget_bytes), Some(reach))?.value)
        }
        Source::Work(work) => Ok(work_briefing(&prepared.handoff, work, prepared.budget_bytes)?),
    }
}

/// Where the turn runs and with what: the hand-off and its turn on this machine.
pub struct Setup<'a> {
    pub url: &'a str,
    pub id: &'a str,
    /// The machine token, written to the token file; never put in the environment.
    pub token: &'a str,
    pub state_dir: &'a Path,
    pub runtime: Runtime,
    pub turn: u64,
    /// What the caller readies on the machine before a package is accepted (a launch's hooks),
    /// or why it could not.
    pub before_accept: &'a dyn Fn() -> Result<(), String>,
}

/// What a new harness session reads first.
pub enum First<'a> {
    /// A new session, briefed from what was prepared; the record's words follow a work
    /// record's briefing (a package's briefing carries them already).
    Briefed(&'a Prepared),
    /// A new session briefed by the owner's words alone.
    Words(&'a str),
    /// A resumed session: the owner's words are the new message (`None`: opened without).
    Resumed(Option<&'a str>),
}

/// A turn ready to spawn: the program, its first message (the harness reads it), and the
/// session's variables (the token is in the file they name, never among them).
#[derive(Debug, Clone)]
pub struct Ready {
    pub program: PathBuf,
    pub prompt: String,
    pub vars: Vec<(&'static str, String)>,
    /// A package was accepted now.
    pub accepted: bool,
}

/// The variables every harness is started without: the token itself.
pub const REMOVED_VARS: [&str; 1] = [ENV_TOKEN];

/// Starts a turn up to the spawn, in one order for `launch` and `serve`: what briefs from the
/// work record is read before anything is written (a refusal writes nothing), then the program
/// is found, the token file written, the package accepted, the briefing read, the owner's
/// words and the paragraph added.
pub fn start_turn(client: &Client, setup: &Setup<'_>, first: &First<'_>) -> Result<Ready, TurnError> {
    let from_work = match first {
        First::Briefed(p @ Prepared { source: Source::Work(_), .. }) => Some(first_briefing(client, p)?),
        _ => None,
    };
    let program = find_program(setup.runtime)?;
    let token_path = super::paths::token_file(setup.state_dir, setup.id);
    crate::client::write_token_file(&token_path, setup.token)
        .map_err(|e| TurnError::Setup(format!("could not write the token file {}: {e}", token_path.display())))?;
    let vars = session_vars(setup, &token_path);
    let paragraph = access_paragraph(setup.runtime, setup.id, setup.turn);
    let (prompt, accepted) = match first {
        First::Briefed(prepared) => {
            (setup.before_accept)().map_err(TurnError::Setup)?;
            let accepted = accept(client, prepared).map_err(|e| match prepared.package() {
                Some(p) => TurnError::Accept(p.version, e),
                None => TurnError::Api(e),
            })?;
            let text = match from_work {
                Some(text) => text,
                None => first_briefing(client, prepared)?,
            };
            (prompt(&text, &paragraph), accepted)
        }
        First::Words(words) => (prompt(words, &paragraph), false),
        First::Resumed(words) => (resumed_message(*words, setup.turn), false),
    };
    Ok(Ready { program, prompt, vars, accepted })
}

/// The briefing a new session reads first: the package's (the API's rendering carries the
/// owner's words), or the work record's followed by the owner's words
/// ([`handoff_core::briefing::with_words`]).
pub fn first_briefing(client: &Client, prepared: &Prepared) -> Result<String, TurnError> {
    let text = briefing(client, prepared)?;
    Ok(match prepared.source {
        Source::Work(_) => handoff_core::briefing::with_words(&text, prepared.handoff.prompt.as_deref()),
        Source::Package { .. } => text,
    })
}

/// The new message of a resumed session: the owner's words, or a line saying there were none.
pub fn resumed_message(words: Option<&str>, turn: u64) -> String {
    words.map_or_else(|| format!("The owner opened turn {turn} without words: go on with the work."), str::to_string)
}

/// The runtime's program on `PATH`, or why the turn cannot start.
pub fn find_program(runtime: Runtime) -> Result<PathBuf, TurnError> {
    crate::detect::find(runtime.program(), std::env::var("PATH").ok().as_deref()).ok_or_else(|| {
        TurnError::Setup(format!(
            "{} is not on PATH on the machine: install {} there",
            runtime.program(),
            runtime.name()
        ))
    })
}

/// The session's variables: the API, the hand-off, the token's file, the state folder, and
/// `PATH` with this program's folder first (so that `handoff` in the session is this one).
fn session_vars(setup: &Setup<'_>, token_path: &Path) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        (ENV_URL, setup.url.to_string()),
        (ENV_ID, setup.id.to_string()),
        (ENV_TOKEN_FILE, token_path.display().to_string()),
        (ENV_STATE_DIR, setup.state_dir.display().to_string()),
    ];
    if let Some(path) = path_with_this_program() {
        vars.push(("PATH", path));
    }
    vars
}

/// `PATH` with this program's folder first, and only absolute entries after it: an empty or
/// relative entry would find a program the model planted in the workspace.
fn path_with_this_program() -> Option<String> {
    crate::workspace::harness_path(std::env::current_exe().ok()?.parent(), std::env::var("PATH").ok().as_deref())
}

impl fmt::Display for TurnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TurnError::Api(e) => write!(f, "{e}"),
            TurnError::Refused(r) => write!(f, "{r}"),
            TurnError::Setup(s) => f.write_str(s),
            TurnError::Accept(version, e) => write!(f, "could not accept package v{version}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests;
