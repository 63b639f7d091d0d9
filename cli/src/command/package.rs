//! What the next runtime is given: its package (compiled, shown, accepted or rejected) and the
//! briefing it reads.

use super::shared::{parse_serde, say, say_block, Failure, Key, Out};
use crate::client::{Client, PackageRequest, Reach, RejectReason};
use crate::output;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PackageArgs {
    #[command(subcommand)]
    pub action: Option<PackageAction>,
    #[arg(required = true)]
    pub id: Option<String>,
    #[arg(long, required = true)]
    pub objective: Option<String>,
    #[arg(long, required = true)]
    pub purpose: Option<String>,
    #[arg(long, required = true)]
    pub runtime: Option<String>,
    #[arg(long)]
    pub note: Option<String>,
    /// Preview: answer the same, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub key: Key,
}

#[derive(clap::Subcommand, Debug)]
pub enum PackageAction {
    /// The latest package, its state and whole hash.
    Show {
        id: String,
        /// The package rendered for a person to read.
        #[arg(long)]
        markdown: bool,
    },
    /// Accept the package (the current hash unless --hash, shown first).
    Accept {
        id: String,
        #[arg(long, value_name = "H")]
        hash: Option<String>,
        #[command(flatten)]
        key: Key,
    },
    /// Reject the package: a statement about the package, not the work.
    Reject {
        id: String,
        #[arg(long, value_parser = parse_serde::<RejectReason>)]
        reason: RejectReason,
        #[arg(long)]
        note: String,
        #[command(flatten)]
        key: Key,
    },
}

impl PackageArgs {
    pub fn run(self, out: &Out, client: &Client) -> Result<(), Failure> {
        match self.action {
            None => {
                // clap has checked these are present: they are required unless a subcommand is given.
                let missing = || Failure::Usage("package needs ID --objective --purpose --runtime".into());
                let id = self.id.ok_or_else(missing)?;
                let request = PackageRequest {
                    objective: self.objective.ok_or_else(missing)?,
                    purpose: self.purpose.ok_or_else(missing)?,
                    runtime: self.runtime.ok_or_else(missing)?,
                    note: self.note,
                    model: None,
                };
                let reply = self.key.on(client).package(&id, &request, self.dry_run)?;
                out.emit(&reply, [output::compiled_line(&reply.value, self.dry_run)]);
            }
            Some(PackageAction::Show { id, markdown: true }) => {
                let reply = client.package_markdown(&id)?;
                say_block(&reply.value);
            }
            Some(PackageAction::Show { id, markdown: false }) => {
                let reply = client.package_latest(&id)?;
                out.emit(&reply, output::latest_lines(&reply.value));
            }
            Some(PackageAction::Accept { id, hash, key }) => {
                let (version, hash) = match hash {
                    Some(h) => (None, h),
                    None => {
                        // Accept what the person saw: show the current package first, then accept
                        // exactly that hash (a newer one in between is refused as package.stale).
                        let latest = client.package_latest(&id)?;
                        if !out.json {
                            say(output::latest_lines(&latest.value));
                        }
                        (Some(latest.value.package_version), latest.value.package_hash)
                    }
                };
                let reply = key.on(client).accept(&id, &hash)?;
                let version = reply.body["package_version"].as_u64().or(version).unwrap_or_default();
                out.emit(&reply, [output::accepted_line(version, &hash)]);
            }
            Some(PackageAction::Reject { id, reason, note, key }) => {
                let reply = key.on(client).reject(&id, reason, &note)?;
                let version = reply.body["package_version"].as_u64().unwrap_or_default();
                let hash = reply.body["package_hash"].as_str().unwrap_or_default().to_string();
                out.emit(&reply, [output::rejected_line(version, &hash, reason)]);
            }
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct BriefingArgs {
    pub id: String,
    #[arg(long, value_name = "BYTES")]
    pub budget: Option<u32>,
    #[arg(long, value_parser = parse_serde::<Reach>)]
    pub reach: Option<Reach>,
}

impl BriefingArgs {
    pub fn run(self, client: &Client) -> Result<(), Failure> {
        let reply = client.briefing(&self.id, self.budget, self.reach)?;
        // Plain text is what the API sends; --json has no JSON to print and prints it as is.
        say_block(&reply.value);
        Ok(())
    }
}
