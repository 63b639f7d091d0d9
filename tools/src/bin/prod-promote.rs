//! prod-promote: writes production's Durable Object bindings and migrations into
//! wrangler.toml for exactly the tags production-approvals.json approves.
//!
//! Exit codes: 0 done (or, with --check, the plan printed); 1 refused, nothing written;
//! 2 bad arguments or an input that cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use handoff_tools::cli;
use handoff_tools::promote::{self, Plan};

const USAGE: &str = "\
usage: prod-promote [--check] [--config PATH] [--approvals PATH]

Writes [[env.production.durable_objects.bindings]] and [[env.production.migrations]] into
wrangler.toml for exactly the Durable Object migration tags that production-approvals.json
approves, in order, and nothing else in the file.

  --check            print what would change and write nothing (exit 0 unless refused)
  --config PATH      wrangler.toml to read and write (default: ./wrangler.toml)
  --approvals PATH   approvals to read (default: ./production-approvals.json)

exit: 0 done or nothing to change, 1 refused (each refusal is printed), 2 usage or unreadable input";

/// Inputs are small hand-written files; anything larger is not one of them.
const INPUT_BYTES_MAX: u64 = 1024 * 1024;

struct Args {
    check: bool,
    config: PathBuf,
    approvals: PathBuf,
}

fn main() -> ExitCode {
    let args = match cli::args_or_exit("prod-promote", USAGE, parse_args(std::env::args().skip(1))) {
        Ok(args) => args,
        Err(exit) => return exit,
    };
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("prod-promote: {message}");
            ExitCode::from(2)
        }
    }
}

fn parse_args(mut raw: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args {
        check: false,
        config: PathBuf::from("wrangler.toml"),
        approvals: PathBuf::from("production-approvals.json"),
    };
    while let Some(arg) = raw.next() {
        let (flag, inline) = cli::split_flag(&arg);
        let mut value =
            |name: &str| inline.clone().or_else(|| raw.next()).ok_or_else(|| format!("{name} needs a path"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--check" if inline.is_none() => args.check = true,
            "--config" => args.config = PathBuf::from(value("--config")?),
            "--approvals" => args.approvals = PathBuf::from(value("--approvals")?),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    Ok(Some(args))
}

fn run(args: &Args) -> Result<ExitCode, String> {
    let text = cli::read_bounded(&args.config, INPUT_BYTES_MAX)?;
    let approvals =
        promote::parse_approvals(&cli::read_bounded(&args.approvals, INPUT_BYTES_MAX)?).map_err(|e| e.to_string())?;
    let wrangler = promote::read_wrangler(&text).map_err(|e| e.to_string())?;
    let plan = match promote::plan(&wrangler, &approvals.do_tags) {
        Ok(plan) => plan,
        Err(refusals) => {
            for refusal in &refusals {
                eprintln!("prod-promote: refused: {refusal}");
            }
            eprintln!("prod-promote: wrote nothing to {}", args.config.display());
            return Ok(ExitCode::from(1));
        }
    };
    print_plan(&plan, args);
    if args.check || plan.changes.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let out = promote::render(&text, &plan).map_err(|e| e.to_string())?;
    // Write beside the file and rename, so that an interrupted run never leaves half a config.
    let temporary = args.config.with_extension("toml.prod-promote");
    std::fs::write(&temporary, &out).map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
    std::fs::rename(&temporary, &args.config).map_err(|e| format!("cannot replace {}: {e}", args.config.display()))?;
    println!("prod-promote: wrote {}", args.config.display());
    Ok(ExitCode::SUCCESS)
}

fn print_plan(plan: &Plan, args: &Args) {
    let tags: Vec<&str> = plan.migrations.iter().map(|m| m.tag.as_str()).collect();
    let approved = if tags.is_empty() { "none".to_string() } else { tags.join(", ") };
    println!("prod-promote: approved for production: {approved}");
    let verb = if args.check { "would" } else { "will" };
    for change in &plan.changes {
        println!("prod-promote: {verb} {change}");
    }
    if !plan.pending.is_empty() {
        println!("prod-promote: not approved, stays out of production: {}", plan.pending.join(", "));
    }
    if plan.changes.is_empty() {
        println!("prod-promote: nothing to change in {}", args.config.display());
    }
}
