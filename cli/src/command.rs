//! The `handoff` command line: its global flags and one variant per command ([`Command`]),
//! each with its own arguments and a method that runs it, in a file named for whom it serves:
//! arguments in, one client call (or two: a read first where a default comes from the record),
//! lines or the API's JSON out.
//! `main.rs` parses, hands each command what it needs, and turns a [`shared::Failure`] into
//! the exit code.
//!
//! - [`owner`]: a hand-off made, read, steered, answered and ended;
//! - [`machine`]: what the cloud machine reports, records, asks and runs;
//! - [`package`]: the package and briefing the next runtime is given;
//! - [`wait`]: waiting for versions;
//! - [`setup`]: tokens, and the hooks and MCP server in a harness's settings;
//! - [`enrol`]: a machine enrolled by a code its owner approves;
//! - `handoff serve` lives in [`crate::serve`].

pub mod enrol;
pub mod machine;
pub mod owner;
pub mod package;
pub mod setup;
pub mod shared;
pub mod wait;

use crate::client::URL_DEFAULT;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "handoff",
    version,
    about = "Hand-off sessions from the command line: create, watch, report, hand off."
)]
pub struct Cli {
    /// The API's base URL.
    #[arg(long, global = true, env = crate::machine::env::ENV_URL, default_value = URL_DEFAULT)]
    pub url: String,
    /// A bearer token: an owner's, or the machine token that `create` printed.
    #[arg(long, global = true, env = crate::machine::env::ENV_TOKEN, hide_env_values = true)]
    pub token: Option<String>,
    /// Print the API's JSON instead of short lines.
    #[arg(long, global = true)]
    pub json: bool,
    /// Send the token over plain http:// to a host other than this machine (loopback needs
    /// no flag). The hooks and the MCP server read HANDOFF_INSECURE_HTTP.
    #[arg(long, global = true, env = crate::machine::env::ENV_INSECURE_HTTP, value_parser = clap::builder::FalseyValueParser::new())]
    pub insecure_http: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Mint a development token from HANDOFF_SIGNING_KEY (an owner's, or with --machine a machine's).
    Token(setup::TokenArgs),
    /// Create the hand-off of a session (or find it); prints its id, then its machine token.
    Create(owner::CreateArgs),
    /// A fresh machine token for a hand-off, printed bare; it ends the ones minted before it.
    MachineToken(owner::MachineTokenArgs),
    /// List your hand-offs, newest first (every page).
    List(owner::ListArgs),
    /// Show one hand-off.
    Show(owner::ShowArgs),
    /// Open the next turn (after the current one unless --after), or hand it to another runtime.
    Turn(owner::TurnArgs),
    /// Stop the current turn (or only if it is turn N).
    Cancel(owner::CancelArgs),
    /// Send words to the running turn (-m TEXT or --prompt-file): the harness reads them while it works.
    Steer(owner::SteerArgs),
    /// Close the hand-off: a turn still going is cancelled.
    Close(owner::EndArgs),
    /// Erase the hand-off now: closed if open, then its record, storage and list row are gone.
    Erase(owner::EndArgs),
    /// Wait for the next version (after the current one unless --after); --follow until it closes.
    Wait(wait::WaitArgs),
    /// The lineage: every turn, its runtime, package and times.
    Turns(owner::TurnsArgs),
    /// (machine) Report the turn's status.
    Report(machine::ReportArgs),
    /// (machine) Send the files changed against HEAD, as paths with line counts only.
    Workspace(machine::WorkspaceArgs),
    /// Record a decision.
    Decide(machine::DecideArgs),
    /// Record an artifact (the same title again is its next version).
    Artifact(machine::ArtifactArgs),
    /// Record a blocker.
    Block(machine::BlockArgs),
    /// Resolve a blocker.
    Resolve(machine::ResolveArgs),
    /// (owner) Set the work: title, goal, constraints, acceptance criteria.
    Work(owner::WorkArgs),
    /// (owner) The runtimes you can hand off to and when to be told: nothing switches by itself.
    Policy(owner::PolicyArgs),
    /// (machine) Report the runtimes this machine can run: found with --detect, or named.
    Runtimes(machine::RuntimesArgs),
    /// (machine) The session's MCP server on standard input and output, for the harness to
    /// start: it records, asks and briefs for the hand-off HANDOFF_URL, HANDOFF_ID and
    /// HANDOFF_TOKEN name. `mcp install claude-code|codex` adds it to the harness's settings.
    Mcp(machine::McpArgs),
    /// (machine) The reporters an agent harness runs: `hook claude-code`, `hook codex`, and
    /// `hook install` to add them to the harness's settings.
    #[command(subcommand)]
    Hook(machine::HookCommand),
    /// Compile the package for the next runtime, or show, accept or reject it.
    Package(package::PackageArgs),
    /// (machine) Start the runtime a turn was handed to, briefed from its package (or from
    /// the work record), with the session's variables and `handoff` allowed.
    Launch(machine::LaunchArgs),
    /// (machine) Run every turn the owner opens, on this machine, for the life of the session:
    /// each turn's runtime started (or its harness session resumed) with the owner's words,
    /// its questions brought to the owner (each waits HANDOFF_SERVE_ANSWER_WAIT_S, default
    /// 900 s, then is denied with a note the model reads), a cancel or close stopping it.
    /// `--print-unit` prints a systemd unit that keeps it running.
    Serve(crate::serve::Args),
    /// The plain-text briefing a runtime reads, within a byte budget.
    Briefing(package::BriefingArgs),
    /// (machine) Ask the owner a question on turn N (a needs-you report) and wait for the
    /// answer: prints the chosen option's id and exits 0, or exits 4 with nothing printed when
    /// no answer came within --wait seconds (default HANDOFF_ANSWER_WAIT_S, else 120).
    Ask(machine::AskArgs),
    /// Enrol this machine by a code its owner approves (`machine enrol`), or approve a
    /// machine's code (`machine approve`, the owner's).
    #[command(subcommand)]
    Machine(enrol::MachineCommand),
    /// (owner) Answer the open question with one of its options. Without --question, on a
    /// terminal, the question is shown whole and answered only once you confirm.
    Answer(owner::AnswerArgs),
}

#[cfg(test)]
mod tests {
    use super::package::PackageAction;
    use super::*;
    use crate::client::RejectReason;
    use crate::output::{EXIT_OK, EXIT_USAGE};
    use clap::CommandFactory;
    use handoff_core::turn::ReportStatus;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("handoff").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn package_takes_an_id_and_flags_or_a_subcommand() {
        let p = |args: &[&str]| match parse(args).unwrap().command {
            Command::Package(p) => p,
            other => panic!("{other:?}"),
        };
        let compile = p(&["package", "ho_1", "--objective", "o", "--purpose", "p", "--runtime", "codex", "--dry-run"]);
        assert!(compile.action.is_none() && compile.dry_run);
        assert!(matches!(
            p(&["package", "show", "ho_1", "--markdown"]).action,
            Some(PackageAction::Show { markdown: true, .. })
        ));
        assert!(matches!(p(&["package", "accept", "ho_1"]).action, Some(PackageAction::Accept { hash: None, .. })));
        let reject = p(&["package", "reject", "ho_1", "--reason", "missing_context", "--note", "n"]).action;
        assert!(matches!(reject, Some(PackageAction::Reject { reason: RejectReason::MissingContext, .. })));
        assert!(parse(&["package", "ho_1", "--objective", "o"]).is_err(), "purpose and runtime are required");
    }

    #[test]
    fn usage_errors_exit_2_and_help_exits_0() {
        for bad in [
            &["report", "ho_1", "--turn", "1", "--status", "sleeping"][..],
            &["turn", "ho_1", "--to", "codex"],
            &["turn", "ho_1", "--objective", "o"],
            &["policy", "ho_1", "--runtime", "codex", "--context-threshold-pct", "100"],
            &["frobnicate"],
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), EXIT_USAGE, "{bad:?}");
        }
        assert_eq!(parse(&["--help"]).unwrap_err().exit_code(), EXIT_OK);
    }

    #[test]
    fn report_reads_statuses_as_the_api_spells_them_and_unmet_as_a_list() {
        let cli =
            parse(&["report", "ho_1", "--turn", "2", "--status", "needs-you", "--unmet", "0,2", "--json"]).unwrap();
        assert!(cli.json);
        let Command::Report(report) = cli.command else { panic!() };
        assert_eq!(report.status, ReportStatus::NeedsYou);
        assert_eq!(report.unmet, Some(vec![0, 2]));
    }

    #[test]
    fn serve_takes_an_id_or_machine_and_the_daemons_flags_only_with_machine() {
        let Command::Serve(d) =
            parse(&["serve", "--machine", "--workspace", "a=/x", "--workspace", "b=y", "--worktree"]).unwrap().command
        else {
            panic!()
        };
        assert!(d.daemon.machine && d.daemon.worktree && d.id.is_none());
        assert_eq!(d.daemon.workspaces, ["a=/x", "b=y"]);
        assert_eq!(d.daemon.max_sessions, crate::daemon::MAX_SESSIONS_DEFAULT);
        assert!(parse(&["serve", "ho_1"]).is_ok());
        assert_eq!(parse(&["serve"]).unwrap_err().exit_code(), EXIT_USAGE, "an id or --machine");
        assert!(parse(&["serve", "ho_1", "--worktree"]).is_err(), "the daemon's flags need --machine");
    }

    #[test]
    fn global_flags_go_anywhere_and_the_key_is_optional() {
        let cli = parse(&["close", "ho_1", "--url", "http://x", "--token", "t", "--idempotency-key", "k1"]).unwrap();
        assert_eq!((cli.url.as_str(), cli.token.as_deref()), ("http://x", Some("t")));
        let Command::Close(close) = cli.command else { panic!() };
        assert_eq!(close.key.idempotency_key.as_deref(), Some("k1"));
    }
}
