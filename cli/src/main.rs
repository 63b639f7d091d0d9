//! `handoff`: the command line of the hand-off service, for owners at a terminal and for
//! machine reporters inside cloud machines. The rules stay in the API and the commands in
//! `handoff_cli::command`, which ask and print; this file parses, hands each command what it
//! needs, and turns how it ended into an exit code a script can act on.

use clap::Parser;
use handoff_cli::client::{self, Client, Error};
use handoff_cli::command::enrol::MachineCommand;
use handoff_cli::command::shared::{Failure, Out};
use handoff_cli::command::{Cli, Command};
use handoff_cli::output::{self, EXIT_AUTH_OR_NETWORK, EXIT_OK, EXIT_USAGE};

fn main() {
    let cli = Cli::parse();
    let json = cli.json;
    let code = match dispatch(cli) {
        Ok(()) => EXIT_OK,
        Err(failure) => exit_code(failure, json),
    };
    std::process::exit(code);
}

/// Says why a command failed, on standard error (a refusal's body on standard output with
/// `--json`), and answers the exit code.
fn exit_code(failure: Failure, json: bool) -> i32 {
    match failure {
        Failure::Api(error) => {
            if let (true, Error::Refused(r)) = (json, &error) {
                println!("{}", output::escape_json(&r.body.to_string()));
            }
            eprintln!("{}", output::escape(&output::error_line(&error), false));
            output::exit_code(&error)
        }
        Failure::Usage(message) => {
            eprintln!("usage: {}", output::escape(&message, false));
            EXIT_USAGE
        }
        Failure::Credential(message) => {
            eprintln!("auth: {}", output::escape(&message, false));
            EXIT_AUTH_OR_NETWORK
        }
        Failure::Exit(code) => code,
    }
}

/// Hands each command what it needs: `token` nothing; the hooks and the MCP server what they
/// read themselves; `serve` a checked URL; every other command a client with a token.
fn dispatch(cli: Cli) -> Result<(), Failure> {
    let out = Out { json: cli.json };
    let env = |k: &str| std::env::var(k).ok();
    let command = match cli.command {
        Command::Token(token) => return token.run(&out),
        Command::Hook(hook) => {
            // A hook never fails out loud: a token file it cannot read is no token, and it logs so.
            let token = cli.token.filter(|t| !t.is_empty()).or_else(|| client::token_from_env(&env).ok().flatten());
            return hook.run(&cli.url, token.as_deref());
        }
        Command::Mcp(mcp) => return mcp.run(),
        command => command,
    };
    client::check_url(&cli.url, cli.insecure_http).map_err(Failure::Usage)?;
    if cli.insecure_http {
        // The hooks and the MCP server a launched harness starts read the same permission.
        std::env::set_var(client::ENV_INSECURE_HTTP, "1");
    }
    if let Command::Serve(args) = &command {
        return Failure::unless_ok(handoff_cli::serve::run(
            &cli.url,
            cli.token.or_else(|| env(handoff_cli::machine::env::ENV_TOKEN)),
            args,
        ));
    }
    if let Command::Machine(MachineCommand::Enrol(args)) = command {
        // No token yet: the machine proves the key it enrolls with instead.
        let client = Client::new(&cli.url, None).with_insecure_http(cli.insecure_http);
        return args.run(&cli.url, &client);
    }
    let no_token = || {
        Failure::Credential(
            "no token: set HANDOFF_TOKEN or HANDOFF_TOKEN_FILE, or pass --token (see `handoff token`)".into(),
        )
    };
    let token = match cli.token.filter(|t| !t.is_empty()) {
        Some(token) => token,
        None => client::token_from_env(&env).map_err(Failure::Credential)?.ok_or_else(no_token)?,
    };
    let client = Client::new(&cli.url, Some(&token)).with_insecure_http(cli.insecure_http);
    match command {
        Command::Create(args) => args.run(&out, &client),
        Command::MachineToken(args) => args.run(&out, &client),
        Command::List(args) => args.run(&out, &client),
        Command::Show(args) => args.run(&out, &client),
        Command::Turn(args) => args.run(&out, &client),
        Command::Cancel(args) => args.run(&out, &client),
        Command::Steer(args) => args.run(&out, &client),
        Command::Close(args) => args.close(&out, &client),
        Command::Erase(args) => args.erase(&out, &client),
        Command::Wait(args) => args.run(&out, &client),
        Command::Turns(args) => args.run(&out, &client),
        Command::Report(args) => args.run(&out, &client),
        Command::Workspace(args) => args.run(&out, &client),
        Command::Decide(args) => args.run(&out, &client),
        Command::Artifact(args) => args.run(&out, &client),
        Command::Block(args) => args.run(&out, &client),
        Command::Resolve(args) => args.run(&out, &client),
        Command::Work(args) => args.run(&out, &client),
        Command::Policy(args) => args.run(&out, &client),
        Command::Runtimes(args) => args.run(&out, &client),
        Command::Package(args) => args.run(&out, &client),
        Command::Launch(args) => args.run(&out, &cli.url, &token),
        Command::Briefing(args) => args.run(&client),
        Command::Ask(args) => args.run(&out, &client),
        Command::Answer(args) => args.run(&out, &client),
        Command::Machine(MachineCommand::Approve(args)) => args.run(&out, &client),
        Command::Machine(MachineCommand::Enrol(_)) => unreachable!("answered above"),
        Command::Token(_) | Command::Hook(_) | Command::Mcp(_) | Command::Serve(_) => unreachable!("answered above"),
    }
}
