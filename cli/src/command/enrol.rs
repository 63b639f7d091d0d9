//! `handoff machine enrol` and `handoff machine approve`: a machine enrolled by a short code
//! its owner approves, without copying a secret. The machine keeps a fresh 32-byte key and
//! sends only its SHA-256; it collects its credential by sending the key itself, and accepts
//! only the owner it expects (`--owner`, or the one the person at its terminal confirms). The
//! credential is written 0600 to the state folder.

use super::shared::{say, Failure, Out};
use crate::client::{Client, CollectAnswer};
use crate::machine::paths;
use crate::output::{self, EXIT_NO_ANSWER};
use handoff_core::enrolment::{public_key_of, read_code};
use handoff_core::limits::{ENROLMENT_CODE_TTL_MS, ENROLMENT_KEY_BYTES, HOST_NAME_BYTES_MAX};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How long `enrol` waits for the owner at most: the code's own life (10 minutes).
pub const ENROL_WAIT_S_MAX: u64 = (ENROLMENT_CODE_TTL_MS / 1000) as u64;
/// How often `enrol` asks how its enrolment stands.
pub const ENROL_POLL_MS: u64 = 1_000;

#[derive(clap::Subcommand, Debug)]
pub enum MachineCommand {
    /// Enrol this machine: prints `code: XXXX-XXXX` for its owner to approve, waits (at most
    /// 10 minutes), and keeps the machine credential in the state folder (0600).
    Enrol(EnrolArgs),
    /// (owner) Approve a machine's code: shows its name, host name and key fingerprint first;
    /// on a terminal, asks; without one, asks nothing.
    Approve(ApproveArgs),
}

#[derive(clap::Args, Debug)]
pub struct EnrolArgs {
    /// The machine's name, as creates will name it (`--machine`).
    #[arg(long)]
    pub name: String,
    /// The owner (token subject) this machine accepts; required without a terminal.
    #[arg(long, value_name = "SUBJECT")]
    pub owner: Option<String>,
    /// Seconds to wait for the approval (at most, and by default, 600).
    #[arg(long, value_name = "S", default_value_t = ENROL_WAIT_S_MAX)]
    pub wait: u64,
}

#[derive(clap::Args, Debug)]
pub struct ApproveArgs {
    /// The code the machine shows (`XXXX-XXXX`, any case).
    pub code: String,
}

/// How `enrol` learns the owner it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepting {
    /// Named up front: an approval by anyone else is refused by the service.
    Named(String),
    /// The person at the terminal is shown who approved and confirms.
    Confirmed,
}

/// `--owner`, else a terminal to confirm on; neither is a usage error (an approval by anyone
/// could otherwise take the machine).
pub fn accepting(owner: Option<&str>, terminal: bool) -> Result<Accepting, String> {
    match (owner, terminal) {
        (Some(owner), _) => Ok(Accepting::Named(owner.to_string())),
        (None, true) => Ok(Accepting::Confirmed),
        (None, false) => Err("enrol: without a terminal, --owner SUBJECT names the owner this machine accepts".into()),
    }
}

/// The host name as the service takes it: its characters of `[A-Za-z0-9._:-]`, within the limit.
pub fn host_name(raw: &str) -> String {
    let kept: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
        .take(HOST_NAME_BYTES_MAX)
        .collect();
    if kept.is_empty() {
        "unknown".into()
    } else {
        kept
    }
}

fn this_host() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_else(|_| std::env::var("HOSTNAME").unwrap_or_default());
    host_name(&raw)
}

/// What `enrol` writes to the state folder (0600).
#[derive(serde::Serialize)]
struct Stored<'a> {
    url: &'a str,
    name: &'a str,
    owner: &'a str,
    credential: &'a str,
}

impl EnrolArgs {
    pub fn run(self, url: &str, client: &Client) -> Result<(), Failure> {
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        let accepting = accepting(self.owner.as_deref(), terminal).map_err(Failure::Usage)?;
        let mut key = [0u8; ENROLMENT_KEY_BYTES];
        getrandom::getrandom(&mut key).map_err(|e| Failure::Usage(format!("enrol: no randomness: {e}")))?;
        let key_hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let started = client.start_enrolment(&self.name, &this_host(), &public_key_of(&key))?.value.enrolment;
        println!("code: {}", started.code);
        let _ = std::io::stdout().flush();
        eprintln!(
            "approve it in the console's Machines page at {}/ or with: handoff machine approve {}",
            url.trim_end_matches('/'),
            started.code
        );
        eprintln!("key fingerprint: {}", started.fingerprint);
        let deadline = Instant::now() + Duration::from_secs(self.wait.min(ENROL_WAIT_S_MAX));
        let mut expected = match &accepting {
            Accepting::Named(owner) => Some(owner.clone()),
            Accepting::Confirmed => None,
        };
        loop {
            let answer: CollectAnswer = client.collect_enrolment(&started.code, &key_hex, expected.as_deref())?.value;
            match (answer.status.as_str(), answer.approved_by, answer.credential) {
                ("accepted", Some(owner), Some(credential)) => {
                    let path = paths::credential_file(&paths::state_dir(&|k| std::env::var(k).ok()));
                    let stored = Stored { url, name: &self.name, owner: &owner, credential: &credential };
                    write_private(&path, &serde_json::to_vec(&stored).unwrap_or_default())?;
                    say([format!("enrolled: {} for {owner}; credential in {}", self.name, path.display())]);
                    return Ok(());
                }
                ("approved", Some(by), _) if expected.is_none() => {
                    if !confirm(&by)? {
                        return Err(Failure::Usage(format!("enrol: not confirmed; {by}'s approval is not accepted")));
                    }
                    expected = Some(by);
                    continue;
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                eprintln!("enrol: no approval came in time; the code expires unapproved");
                return Err(Failure::Exit(EXIT_NO_ANSWER));
            }
            std::thread::sleep(Duration::from_millis(ENROL_POLL_MS));
        }
    }
}

/// On a terminal: who approved, and a yes to accept them as this machine's owner.
fn confirm(by: &str) -> Result<bool, Failure> {
    eprint!("{}", output::escape(&format!("approved by {by}: accept {by} as this machine's owner? [y/N] "), false));
    let _ = std::io::stderr().flush();
    let mut reply = String::new();
    std::io::stdin().read_line(&mut reply).map_err(|e| Failure::Usage(format!("enrol: {e}")))?;
    Ok(output::is_yes(&reply))
}

/// Writes `bytes` to `path`, readable by this user only (0600), through a file made so.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| Failure::Usage(format!("enrol: writing {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(failed)?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}

impl ApproveArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        let code = read_code(&self.code).ok_or_else(|| Failure::Usage("approve: a code is XXXX-XXXX".into()))?;
        let shown = client.look_up_enrolment(&code)?.value.enrolment;
        let lines = [
            format!("machine: {}", shown.name),
            format!("host: {}", shown.host),
            format!("key fingerprint: {}", shown.fingerprint),
        ];
        for line in &lines {
            eprintln!("{}", output::escape(line, false));
        }
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            eprint!("approve this machine? [y/N] ");
            let _ = std::io::stderr().flush();
            let mut reply = String::new();
            std::io::stdin().read_line(&mut reply).map_err(|e| Failure::Usage(format!("approve: {e}")))?;
            if !output::is_yes(&reply) {
                return Err(Failure::Usage(format!("approve: not confirmed; {code} is not approved")));
            }
        }
        let reply = client.approve_enrolment(&code)?;
        out.emit(&reply, [format!("approved: {} ({})", shown.name, shown.fingerprint)]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_terminal_the_expected_owner_is_required_and_with_one_it_is_confirmed() {
        assert_eq!(accepting(Some("alice"), false), Ok(Accepting::Named("alice".into())));
        assert_eq!(accepting(Some("alice"), true), Ok(Accepting::Named("alice".into())));
        assert_eq!(accepting(None, true), Ok(Accepting::Confirmed));
        assert!(accepting(None, false).unwrap_err().contains("--owner"));
    }

    #[test]
    fn the_wait_is_at_most_ten_minutes_and_a_host_name_keeps_only_what_the_service_takes() {
        assert!(ENROL_WAIT_S_MAX <= 600);
        assert_eq!(host_name(" vm-7.internal\n"), "vm-7.internal");
        assert_eq!(host_name("weird host/名"), "weirdhost");
        assert_eq!(host_name("\n"), "unknown");
        assert_eq!(host_name(&"h".repeat(300)).len(), HOST_NAME_BYTES_MAX);
    }
}
