//! The production gate: which Durable Object migrations production may apply, and the
//! bindings that follow from them.
//!
//! `read_wrangler` turns `wrangler.toml` into plain data, `plan` applies the rules to that
//! data and the approvals, and `render` writes the plan back into the same text with
//! `toml_edit`, touching nothing outside `env.production`'s Durable Object bindings and
//! migrations. Reading and writing live in `promote/toml.rs`; every rule is in this file.
//!
//! **Architecture Invariant:** every rule lives in `plan`, which does no I/O; `read_wrangler`
//! and `render` know TOML but no rules, and the binary only reads files, prints and exits.
//!
//! The rules, in the words of the contract: production gets the bindings and migrations of
//! exactly the approved tags, in order; refused are a tag that has no reviewed entry, an entry
//! whose classes differ from the migration's, a gap in the tag order, and an edit to an
//! already applied tag. The reference migration for a tag is the top-level `[[migrations]]`
//! entry; every other environment that defines the tag must agree with it. And no deployable
//! environment may set a test or bench hook variable (`hooks`): production is not the only
//! environment that gets deployed.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;

use crate::hooks::{self, EnvVars, Exposure};

/// The environment this gate writes. Every other `[env.*]` is a reference, never written.
pub const PRODUCTION: &str = "production";
/// Keys a migration may have for prod-promote to carry it. Renames, deletes and transfers
/// move or destroy stored data; they need their own reviewed procedure, not this tool.
pub const MIGRATION_KEYS: [&str; 3] = ["tag", "new_classes", "new_sqlite_classes"];
/// Keys a Durable Object binding may have for prod-promote to copy it into production.
pub const BINDING_KEYS: [&str; 2] = ["name", "class_name"];
/// Approvals kept in one file; far above any real history, low enough to read in review.
pub const APPROVALS_MAX: usize = 256;
/// The scheme a review link must use.
pub const REVIEW_LINK_PREFIX: &str = "https://";

/// One `[[migrations]]` entry. `other_keys` holds what prod-promote does not carry (see
/// `MIGRATION_KEYS`), so that the refusal can name it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    pub tag: String,
    pub new_classes: Vec<String>,
    pub new_sqlite_classes: Vec<String>,
    pub other_keys: Vec<String>,
}

impl Migration {
    /// The classes this migration adds, sorted, for comparing with an approval.
    pub fn added_classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self.new_classes.iter().chain(&self.new_sqlite_classes).cloned().collect();
        classes.sort();
        classes
    }

    /// How the migration reads in wrangler.toml, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.new_classes.is_empty() {
            parts.push(format!("new_classes = {}", list(&self.new_classes)));
        }
        if !self.new_sqlite_classes.is_empty() {
            parts.push(format!("new_sqlite_classes = {}", list(&self.new_sqlite_classes)));
        }
        for key in &self.other_keys {
            parts.push(format!("{key} = …"));
        }
        if parts.is_empty() {
            parts.push("no classes".to_string());
        }
        parts.join(", ")
    }
}

/// One `[[durable_objects.bindings]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    pub name: String,
    pub class_name: String,
    pub other_keys: Vec<String>,
}

/// What prod-promote reads from wrangler.toml.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wrangler {
    /// Top-level `[[migrations]]`, in file order: the reference for every tag.
    pub migrations: Vec<Migration>,
    /// Top-level `[[durable_objects.bindings]]`: copied into production per approved class.
    pub bindings: Vec<Binding>,
    /// Every `[env.NAME]` other than production that defines migrations, in file order.
    pub envs: Vec<(String, Vec<Migration>)>,
    /// What `[env.production]` already applies and binds.
    pub production_migrations: Vec<Migration>,
    pub production_bindings: Vec<Binding>,
    /// The `vars` of every `[env.NAME]`, production included, in file order.
    pub env_vars: Vec<EnvVars>,
}

/// production-approvals.json.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Approvals {
    pub do_tags: Vec<Approval>,
}

/// One reviewed tag. The review fields default to empty so that a missing one is refused
/// as "no reviewed entry" by `plan` rather than as a parse error.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub tag: String,
    pub classes: Vec<String>,
    #[serde(default)]
    pub reviewed_by: String,
    #[serde(default)]
    pub reviewed_at: String,
    #[serde(default)]
    pub review: String,
}

/// Why prod-promote will not write. Each message starts with the contract's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Production applies a tag that production-approvals.json does not list.
    NoReviewedEntry {
        tag: String,
    },
    /// The entry exists but lacks a reviewer, a date or a review link.
    EntryNotReviewed {
        tag: String,
        problem: String,
    },
    ClassesDiffer {
        tag: String,
        approved: Vec<String>,
        migration: Vec<String>,
    },
    /// An approved tag comes after a top-level migration that is not approved.
    Gap {
        tag: String,
        missing: String,
    },
    /// Production applies a tag without the one before it.
    ProductionGap {
        tag: String,
        missing: String,
    },
    /// The approvals list the right tags in another order than the migrations.
    OutOfOrder {
        listed: String,
        expected: String,
    },
    /// A production migration differs from the top-level one with its tag.
    EditToAppliedTag {
        tag: String,
        applied: String,
        now: String,
    },
    /// Production applies a tag that the top level no longer defines.
    AppliedTagRemoved {
        tag: String,
    },
    UnknownTag {
        tag: String,
    },
    DuplicateEntry {
        tag: String,
    },
    DuplicateTag {
        tag: String,
        place: String,
    },
    EnvDiffers {
        tag: String,
        env: String,
        env_says: String,
        top_says: String,
    },
    UnsupportedMigration {
        tag: String,
        problem: String,
    },
    UnsupportedBinding {
        name: String,
        key: String,
    },
    MissingBinding {
        tag: String,
        class: String,
    },
    /// Production binds a class that no approved tag adds.
    UnreviewedBinding {
        name: String,
        class: String,
    },
    TooManyEntries {
        count: usize,
    },
    /// A deployable environment sets a hook variable or calls itself local.
    Hook(Exposure),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Refusal::*;
        match self {
            NoReviewedEntry { tag } => write!(
                f,
                "tag {tag} has no reviewed entry: env.production applies it, \
                 but production-approvals.json does not list it"
            ),
            EntryNotReviewed { tag, problem } => {
                write!(f, "tag {tag} has no reviewed entry: its {problem}")
            }
            ClassesDiffer { tag, approved, migration } => write!(
                f,
                "the entry for tag {tag} has classes that differ from the migration's: \
                 it approves {}, the migration adds {}",
                list(approved),
                list(migration)
            ),
            Gap { tag, missing } => {
                write!(f, "a gap in the tag order: {tag} is approved, but {missing}, which comes before it, is not")
            }
            ProductionGap { tag, missing } => write!(
                f,
                "a gap in the tag order: env.production applies {tag} without {missing}, which comes before it"
            ),
            OutOfOrder { listed, expected } => write!(
                f,
                "the tag order differs: production-approvals.json lists {listed} where the \
                 migrations have {expected}; list the approvals in migration order"
            ),
            EditToAppliedTag { tag, applied, now } => write!(
                f,
                "an edit to an already applied tag: env.production applied {tag} as ({applied}), \
                 the top level now says ({now}); add a new tag instead"
            ),
            AppliedTagRemoved { tag } => write!(
                f,
                "an edit to an already applied tag: env.production applies {tag}, \
                 but the top level no longer defines it"
            ),
            UnknownTag { tag } => {
                write!(f, "tag {tag} is approved, but no top-level [[migrations]] defines it")
            }
            DuplicateEntry { tag } => {
                write!(f, "tag {tag} has more than one entry in production-approvals.json")
            }
            DuplicateTag { tag, place } => write!(f, "tag {tag} is defined more than once in {place}"),
            EnvDiffers { tag, env, env_says, top_says } => {
                write!(f, "migration {tag} differs between env.{env} ({env_says}) and the top level ({top_says})")
            }
            UnsupportedMigration { tag, problem } => write!(
                f,
                "migration {tag} {problem}; prod-promote only carries migrations that add classes \
                 (new_classes, new_sqlite_classes)"
            ),
            UnsupportedBinding { name, key } => {
                write!(f, "binding {name} has {key}; prod-promote only copies name and class_name")
            }
            MissingBinding { tag, class } => {
                write!(f, "migration {tag} adds {class}, but no top-level [[durable_objects.bindings]] binds it")
            }
            UnreviewedBinding { name, class } => {
                write!(f, "env.production binds {name} to {class}, which no reviewed tag adds")
            }
            TooManyEntries { count } => {
                write!(f, "production-approvals.json has {count} entries, more than {APPROVALS_MAX}")
            }
            Hook(exposure) => exposure.fmt(f),
        }
    }
}

/// One step that writing the plan takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    AddBinding(Binding),
    RemoveBinding(Binding),
    AddMigration(Migration),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddBinding(b) => write!(
                f,
                "add [[env.production.durable_objects.bindings]] name = \"{}\", class_name = \"{}\"",
                b.name, b.class_name
            ),
            Change::RemoveBinding(b) => write!(
                f,
                "remove [[env.production.durable_objects.bindings]] name = \"{}\", class_name = \"{}\"",
                b.name, b.class_name
            ),
            Change::AddMigration(m) => {
                write!(f, "add [[env.production.migrations]] tag = \"{}\", {}", m.tag, m.describe())
            }
        }
    }
}

/// What production will apply and bind once the plan is written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub migrations: Vec<Migration>,
    pub bindings: Vec<Binding>,
    /// Empty when wrangler.toml already says what the approvals allow.
    pub changes: Vec<Change>,
    /// Top-level tags not approved: they stay out of production.
    pub pending: Vec<String>,
}

/// Applies the gate's rules. Returns every refusal found, not just the first, so that one
/// run shows everything a reviewer has to fix.
pub fn plan(wrangler: &Wrangler, approvals: &[Approval]) -> Result<Plan, Vec<Refusal>> {
    let mut refusals = Vec::new();
    if approvals.len() > APPROVALS_MAX {
        return Err(vec![Refusal::TooManyEntries { count: approvals.len() }]);
    }
    check_unique(&wrangler.migrations, "the top-level [[migrations]]", &mut refusals);
    check_unique(&wrangler.production_migrations, "env.production", &mut refusals);
    check_envs_agree(wrangler, &mut refusals);
    check_entries(wrangler, approvals, &mut refusals);
    check_tag_order(wrangler, approvals, &mut refusals);
    check_applied(wrangler, approvals, &mut refusals);
    refusals.extend(hooks::exposed(&wrangler.env_vars).into_iter().map(Refusal::Hook));

    let approved: BTreeSet<&str> = approvals.iter().map(|a| a.tag.as_str()).collect();
    // Approved tags that pass the order rule form a prefix of the top-level list.
    let migrations: Vec<Migration> =
        wrangler.migrations.iter().take_while(|m| approved.contains(m.tag.as_str())).cloned().collect();
    let bindings = target_bindings(wrangler, &migrations, &mut refusals);
    check_production_bindings(wrangler, &migrations, &mut refusals);

    if !refusals.is_empty() {
        return Err(refusals);
    }
    let changes = changes(wrangler, &migrations, &bindings);
    let pending =
        wrangler.migrations.iter().filter(|m| !approved.contains(m.tag.as_str())).map(|m| m.tag.clone()).collect();
    Ok(Plan { migrations, bindings, changes, pending })
}

fn check_unique(migrations: &[Migration], place: &str, refusals: &mut Vec<Refusal>) {
    let mut seen = BTreeSet::new();
    for m in migrations {
        if !seen.insert(m.tag.as_str()) {
            refusals.push(Refusal::DuplicateTag { tag: m.tag.clone(), place: place.to_string() });
        }
    }
}

fn check_envs_agree(wrangler: &Wrangler, refusals: &mut Vec<Refusal>) {
    for (env, migrations) in &wrangler.envs {
        for m in migrations {
            // A tag only in one env is that env's business; production takes the top level's.
            let Some(top) = reference(wrangler, &m.tag) else { continue };
            if top != m {
                refusals.push(Refusal::EnvDiffers {
                    tag: m.tag.clone(),
                    env: env.clone(),
                    env_says: m.describe(),
                    top_says: top.describe(),
                });
            }
        }
    }
}

/// Each entry: listed once, reviewed (who, when, a link), and naming the classes its
/// migration adds.
fn check_entries(wrangler: &Wrangler, approvals: &[Approval], refusals: &mut Vec<Refusal>) {
    let mut seen = BTreeSet::new();
    for entry in approvals {
        if !seen.insert(entry.tag.as_str()) {
            refusals.push(Refusal::DuplicateEntry { tag: entry.tag.clone() });
            continue;
        }
        if let Some(problem) = review_problem(entry) {
            refusals.push(Refusal::EntryNotReviewed { tag: entry.tag.clone(), problem });
        }
        let Some(migration) = reference(wrangler, &entry.tag) else {
            refusals.push(Refusal::UnknownTag { tag: entry.tag.clone() });
            continue;
        };
        let mut approved = entry.classes.clone();
        approved.sort();
        let added = migration.added_classes();
        if approved != added {
            refusals.push(Refusal::ClassesDiffer { tag: entry.tag.clone(), approved, migration: added });
        }
        if let Some(key) = migration.other_keys.first() {
            let problem = format!("has {key}");
            refusals.push(Refusal::UnsupportedMigration { tag: entry.tag.clone(), problem });
        } else if migration.added_classes().is_empty() {
            let problem = "adds no class".to_string();
            refusals.push(Refusal::UnsupportedMigration { tag: entry.tag.clone(), problem });
        }
    }
}

/// None when the entry names a reviewer, a date and a review link.
pub fn review_problem(entry: &Approval) -> Option<String> {
    if entry.reviewed_by.trim().is_empty() {
        return Some("reviewed_by is empty".to_string());
    }
    if !starts_with_date(&entry.reviewed_at) {
        return Some(format!("reviewed_at {:?} is not a date (YYYY-MM-DD)", entry.reviewed_at));
    }
    let link = entry.review.trim();
    let has_host = link.len() > REVIEW_LINK_PREFIX.len();
    if !link.starts_with(REVIEW_LINK_PREFIX) || !has_host {
        return Some(format!("review {:?} is not an {REVIEW_LINK_PREFIX} link", entry.review));
    }
    None
}

/// `YYYY-MM-DD`, optionally followed by a time (`T…`), with a plausible month and day.
fn starts_with_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < 10 {
        return false;
    }
    let digits_at = |range: std::ops::Range<usize>| bytes[range].iter().all(u8::is_ascii_digit);
    let shaped = digits_at(0..4) && bytes[4] == b'-' && digits_at(5..7) && bytes[7] == b'-' && digits_at(8..10);
    if !shaped {
        return false;
    }
    let month: u32 = text[5..7].parse().unwrap_or(0);
    let day: u32 = text[8..10].parse().unwrap_or(0);
    let rest_ok = bytes.len() == 10 || bytes[10] == b'T' || bytes[10] == b' ';
    (1..=12).contains(&month) && (1..=31).contains(&day) && rest_ok
}

/// The approved tags must be the first N top-level migrations, listed in that order:
/// production can only ever apply migrations in sequence.
fn check_tag_order(wrangler: &Wrangler, approvals: &[Approval], refusals: &mut Vec<Refusal>) {
    let approved: BTreeSet<&str> = approvals.iter().map(|a| a.tag.as_str()).collect();
    let last_approved = wrangler.migrations.iter().rposition(|m| approved.contains(m.tag.as_str()));
    let Some(last_approved) = last_approved else { return };
    let mut gap = false;
    for (index, m) in wrangler.migrations[..last_approved].iter().enumerate() {
        if approved.contains(m.tag.as_str()) {
            continue;
        }
        gap = true;
        // Name the first approved tag after the hole: that is the one that would skip it.
        let after = wrangler.migrations[index + 1..=last_approved]
            .iter()
            .find(|later| approved.contains(later.tag.as_str()))
            .expect("last_approved is approved");
        refusals.push(Refusal::Gap { tag: after.tag.clone(), missing: m.tag.clone() });
    }
    if gap {
        return;
    }
    let mut seen = BTreeSet::new();
    let known: Vec<&Approval> =
        approvals.iter().filter(|a| reference(wrangler, &a.tag).is_some() && seen.insert(a.tag.as_str())).collect();
    for (entry, m) in known.iter().zip(&wrangler.migrations) {
        if entry.tag != m.tag {
            refusals.push(Refusal::OutOfOrder { listed: entry.tag.clone(), expected: m.tag.clone() });
            return;
        }
    }
}

/// What production already applies must be approved, unchanged, and in sequence.
fn check_applied(wrangler: &Wrangler, approvals: &[Approval], refusals: &mut Vec<Refusal>) {
    for (index, applied) in wrangler.production_migrations.iter().enumerate() {
        if !approvals.iter().any(|a| a.tag == applied.tag) {
            refusals.push(Refusal::NoReviewedEntry { tag: applied.tag.clone() });
        }
        let Some(top) = reference(wrangler, &applied.tag) else {
            refusals.push(Refusal::AppliedTagRemoved { tag: applied.tag.clone() });
            continue;
        };
        if top != applied {
            refusals.push(Refusal::EditToAppliedTag {
                tag: applied.tag.clone(),
                applied: applied.describe(),
                now: top.describe(),
            });
        }
        let expected = &wrangler.migrations.get(index);
        if let Some(expected) = expected {
            if expected.tag != applied.tag {
                refusals.push(Refusal::ProductionGap { tag: applied.tag.clone(), missing: expected.tag.clone() });
            }
        }
    }
}

/// Production's bindings: the top-level bindings of every class an applied migration adds,
/// in migration order.
fn target_bindings(wrangler: &Wrangler, migrations: &[Migration], refusals: &mut Vec<Refusal>) -> Vec<Binding> {
    let mut bindings = Vec::new();
    for m in migrations {
        for class in m.new_classes.iter().chain(&m.new_sqlite_classes) {
            let of_class: Vec<&Binding> = wrangler.bindings.iter().filter(|b| &b.class_name == class).collect();
            if of_class.is_empty() {
                refusals.push(Refusal::MissingBinding { tag: m.tag.clone(), class: class.clone() });
            }
            for binding in of_class {
                if let Some(key) = binding.other_keys.first() {
                    let name = binding.name.clone();
                    refusals.push(Refusal::UnsupportedBinding { name, key: key.clone() });
                }
                bindings.push(binding.clone());
            }
        }
    }
    bindings
}

/// A production binding must be for a class that an approved or an applied migration adds;
/// an applied but unapproved migration is already refused as such, so its bindings are not
/// named twice.
fn check_production_bindings(wrangler: &Wrangler, migrations: &[Migration], refusals: &mut Vec<Refusal>) {
    let classes: BTreeSet<String> =
        migrations.iter().chain(&wrangler.production_migrations).flat_map(Migration::added_classes).collect();
    for b in &wrangler.production_bindings {
        if !classes.contains(&b.class_name) {
            refusals.push(Refusal::UnreviewedBinding { name: b.name.clone(), class: b.class_name.clone() });
        }
    }
}

fn changes(wrangler: &Wrangler, migrations: &[Migration], bindings: &[Binding]) -> Vec<Change> {
    let mut changes = Vec::new();
    for b in bindings {
        if !wrangler.production_bindings.contains(b) {
            changes.push(Change::AddBinding(b.clone()));
        }
    }
    for b in &wrangler.production_bindings {
        if !bindings.contains(b) {
            changes.push(Change::RemoveBinding(b.clone()));
        }
    }
    // check_applied made production's migrations a prefix of `migrations`.
    assert!(wrangler.production_migrations.len() <= migrations.len());
    for m in &migrations[wrangler.production_migrations.len()..] {
        changes.push(Change::AddMigration(m.clone()));
    }
    changes
}

fn reference<'a>(wrangler: &'a Wrangler, tag: &str) -> Option<&'a Migration> {
    wrangler.migrations.iter().find(|m| m.tag == tag)
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

mod toml;
pub use toml::{parse_approvals, read_wrangler, render, ConfigError};

#[cfg(test)]
mod tests;
