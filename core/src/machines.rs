//! One owner's enrolled machines: what each enrolled with, its latest presence (workspaces,
//! runtimes and the models each reaches, the sessions it runs), and the hand-offs created for
//! it since it was enrolled. One `Machines` value is what the `Machines` object holds for one
//! owner (`src/machines_object.rs`); every rule is here: the credential's liveness, the
//! `online` rule, a create's placement on a machine that reported, and the revoke.

use crate::error::{Code, Refusal};
use crate::ids::check_name;
use crate::limits::{
    ID_CHARS_MAX, MACHINES_PER_OWNER_MAX, MACHINE_HANDOFFS_KEPT, MACHINE_MODELS_PER_RUNTIME_MAX,
    MACHINE_ONLINE_WITHIN_MS, MACHINE_RUNTIMES_MAX, MACHINE_SESSIONS_MAX, MACHINE_WORKSPACES_MAX, MODEL_BYTES_MAX,
    RUNTIME_BYTES_MAX, WORKSPACE_BYTES_MAX,
};
use crate::placement::Placement;
use crate::time::{EpochMs, Timestamp};
use serde::{Deserialize, Serialize};

/// A runtime installed on a machine and the models it reaches there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeModels {
    pub name: String,
    #[serde(default)]
    pub models: Vec<String>,
}

/// A machine's presence, as its heartbeat reports it (`POST /v1/machine/presence`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Presence {
    /// Workspace names, the default first.
    #[serde(default)]
    pub workspaces: Vec<String>,
    #[serde(default)]
    pub runtimes: Vec<RuntimeModels>,
    /// The hand-offs it is running now (their ids).
    #[serde(default)]
    pub sessions: Vec<String>,
}

impl Presence {
    /// Within its bounds, each name a name: else 400 naming the field.
    pub fn check(&self) -> Result<(), Refusal> {
        let too_many = |field: &str, max: usize| Refusal::invalid(format!("{field}: at most {max}"));
        if self.workspaces.len() > MACHINE_WORKSPACES_MAX {
            return Err(too_many("workspaces", MACHINE_WORKSPACES_MAX));
        }
        if self.runtimes.len() > MACHINE_RUNTIMES_MAX {
            return Err(too_many("runtimes", MACHINE_RUNTIMES_MAX));
        }
        if self.sessions.len() > MACHINE_SESSIONS_MAX {
            return Err(too_many("sessions", MACHINE_SESSIONS_MAX));
        }
        for w in &self.workspaces {
            check_name("workspaces", w, WORKSPACE_BYTES_MAX)?;
        }
        for r in &self.runtimes {
            check_name("runtimes.name", &r.name, RUNTIME_BYTES_MAX)?;
            if r.models.len() > MACHINE_MODELS_PER_RUNTIME_MAX {
                return Err(too_many("runtimes.models", MACHINE_MODELS_PER_RUNTIME_MAX));
            }
            for m in &r.models {
                check_name("runtimes.models", m, MODEL_BYTES_MAX)?;
            }
        }
        for s in &self.sessions {
            check_name("sessions", s, ID_CHARS_MAX)?;
        }
        Ok(())
    }
}

/// One enrolled machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    pub name: String,
    pub host: String,
    pub fingerprint: String,
    /// When it was enrolled: its credential's `inc`. Enrolling the name again ends the
    /// credential before.
    pub enrolled_at: EpochMs,
    #[serde(default)]
    pub last_seen_at: Option<EpochMs>,
    #[serde(default)]
    pub presence: Option<Presence>,
    /// The hand-offs created for it since it was enrolled, oldest first, the newest
    /// [`MACHINE_HANDOFFS_KEPT`] kept.
    #[serde(default)]
    pub handoffs: Vec<String>,
    /// The list's version: it rises by one each time a hand-off is listed, and by one when the
    /// name is enrolled again, so that a follow never waits on a version it has seen.
    #[serde(default)]
    pub version: u64,
}

impl Machine {
    /// The `online` rule: its last presence is at most [`MACHINE_ONLINE_WITHIN_MS`] old.
    pub fn online(&self, now: EpochMs) -> bool {
        self.last_seen_at.is_some_and(|seen| now - seen <= MACHINE_ONLINE_WITHIN_MS)
    }
}

/// What `GET /v1/machines` shows of one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineView {
    pub name: String,
    pub host: String,
    pub fingerprint: String,
    pub enrolled_at: Timestamp,
    pub online: bool,
    pub last_seen_at: Option<Timestamp>,
    pub runtimes: Vec<RuntimeModels>,
    pub workspaces: Vec<String>,
    /// The hand-offs it runs, as its last presence named them.
    pub sessions: Vec<String>,
}

/// One owner's machines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machines {
    pub machines: Vec<Machine>,
}

fn revoked() -> Refusal {
    Refusal::new(Code::AuthRevoked, "this machine was revoked by its owner, or enrolled again: enrol it again")
}

fn unavailable(code: Code, message: String) -> Refusal {
    Refusal::new(code, message)
}

impl Machines {
    /// Enrols `name` at `now` (its credential's `inc`), within [`MACHINES_PER_OWNER_MAX`]; a
    /// name enrolled already is enrolled anew, which ends its credential before.
    pub fn enrol(&mut self, name: &str, host: &str, fingerprint: &str, now: EpochMs) -> Result<EpochMs, Refusal> {
        let held = self.machines.iter().position(|m| m.name == name);
        if held.is_none() && self.machines.len() >= MACHINES_PER_OWNER_MAX {
            return Err(Refusal::new(
                Code::MachineTooMany,
                format!("this owner has {MACHINES_PER_OWNER_MAX} machines enrolled (MACHINES_PER_OWNER_MAX): revoke one first"),
            ));
        }
        // Strictly after the one it replaces, so that the credential before never matches.
        let enrolled_at = held.map_or(now, |i| now.max(self.machines[i].enrolled_at + 1));
        let version = held.map_or(0, |i| self.machines[i].version + 1);
        let machine = Machine {
            name: name.to_string(),
            host: host.to_string(),
            fingerprint: fingerprint.to_string(),
            enrolled_at,
            last_seen_at: None,
            presence: None,
            handoffs: Vec::new(),
            version,
        };
        match held {
            Some(i) => self.machines[i] = machine,
            None => self.machines.push(machine),
        }
        Ok(enrolled_at)
    }

    /// The machine a credential (`name`, `enrolled_at`) names, while it lasts.
    fn live(&self, name: &str, enrolled_at: EpochMs) -> Result<usize, Refusal> {
        self.machines.iter().position(|m| m.name == name && m.enrolled_at == enrolled_at).ok_or_else(revoked)
    }

    /// The credential's heartbeat: its presence, seen at `now`.
    pub fn presence(
        &mut self,
        name: &str,
        enrolled_at: EpochMs,
        presence: Presence,
        now: EpochMs,
    ) -> Result<(), Refusal> {
        let i = self.live(name, enrolled_at)?;
        let machine = &mut self.machines[i];
        machine.last_seen_at = Some(now);
        machine.presence = Some(presence);
        Ok(())
    }

    /// A create for `machine`: on a machine not enrolled, `None` (created as asked). On an
    /// enrolled one, the placement it runs with: a machine that reported gets no workspace,
    /// runtime or model it did not report (409 naming the field), and a create naming no
    /// workspace goes to its first. Nothing is listed yet: [`Machines::list`] lists the
    /// hand-off once it is created, so a machine never sees one that is not there.
    pub fn place(&self, machine: &str, asked: &Placement) -> Result<Option<Placement>, Refusal> {
        let Some(m) = self.machines.iter().find(|m| m.name == machine) else {
            return Ok(None);
        };
        match &m.presence {
            Some(presence) => fit(machine, presence, asked).map(Some),
            None => Ok(Some(asked.clone())),
        }
    }

    /// Hand-off `id`, created for `machine`, is listed for it (when it is enrolled): the
    /// list's version rises by one. Whether the list changed (listed already: it did not).
    pub fn list(&mut self, machine: &str, id: &str) -> bool {
        let Some(m) = self.machines.iter_mut().find(|m| m.name == machine) else {
            return false;
        };
        if m.handoffs.iter().any(|h| h == id) {
            return false;
        }
        m.handoffs.push(id.to_string());
        let over = m.handoffs.len().saturating_sub(MACHINE_HANDOFFS_KEPT);
        m.handoffs.drain(..over);
        m.version += 1;
        true
    }

    /// The models `runtime` reaches on `machine`, as it last reported: `None` for a machine not
    /// enrolled or not reported yet (nothing to check against); none for a runtime it did not
    /// report.
    pub fn reach(&self, machine: &str, runtime: &str) -> Option<Vec<String>> {
        let presence = self.machines.iter().find(|m| m.name == machine)?.presence.as_ref()?;
        Some(presence.runtimes.iter().find(|r| r.name == runtime).map(|r| r.models.clone()).unwrap_or_default())
    }

    /// The hand-offs created for the credential's machine since it was enrolled.
    pub fn handoffs(&self, name: &str, enrolled_at: EpochMs) -> Result<&[String], Refusal> {
        Ok(&self.machines[self.live(name, enrolled_at)?].handoffs)
    }

    /// The version of the credential's machine's list.
    pub fn version(&self, name: &str, enrolled_at: EpochMs) -> Result<u64, Refusal> {
        Ok(self.machines[self.live(name, enrolled_at)?].version)
    }

    /// Whether the credential may get hand-off `id`'s machine token: one created for it.
    pub fn may_token(&self, name: &str, enrolled_at: EpochMs, id: &str) -> Result<(), Refusal> {
        if self.handoffs(name, enrolled_at)?.iter().any(|h| h == id) {
            return Ok(());
        }
        Err(Refusal::new(Code::HandoffNotFound, "no such hand-off for this machine"))
    }

    /// `DELETE /v1/machines/{name}`: its credential stops working, and it is listed no more.
    pub fn revoke(&mut self, name: &str) -> Result<(), Refusal> {
        let Some(i) = self.machines.iter().position(|m| m.name == name) else {
            return Err(Refusal::new(Code::MachineNotFound, "no machine of this owner has that name"));
        };
        self.machines.remove(i);
        Ok(())
    }

    /// `GET /v1/machines`: online ones first, then by name.
    pub fn view(&self, now: EpochMs) -> Vec<MachineView> {
        let mut views: Vec<MachineView> = self
            .machines
            .iter()
            .map(|m| {
                let presence = m.presence.clone().unwrap_or_default();
                MachineView {
                    name: m.name.clone(),
                    host: m.host.clone(),
                    fingerprint: m.fingerprint.clone(),
                    enrolled_at: Timestamp::from_ms(m.enrolled_at),
                    online: m.online(now),
                    last_seen_at: m.last_seen_at.map(Timestamp::from_ms),
                    runtimes: presence.runtimes,
                    workspaces: presence.workspaces,
                    sessions: presence.sessions,
                }
            })
            .collect();
        crate::order::sort_by(&mut views, |a, b| b.online.cmp(&a.online).then_with(|| a.name.cmp(&b.name)));
        views
    }
}

/// Whether a follow that has seen version `after` of a list now at `version` is held: only
/// while it has seen this very version. One above it (a list started anew: revoked, then
/// enrolled again) answers at once, as one below does, so a follow never waits on a version
/// the list may never reach.
pub fn follow_holds(version: u64, after: u64) -> bool {
    after == version
}

/// The placement a create asks for, fitted to what `machine` reported: its default workspace
/// where none is named; else the first field it did not report, refused by name.
fn fit(machine: &str, presence: &Presence, asked: &Placement) -> Result<Placement, Refusal> {
    let mut placed = asked.clone();
    match &asked.workspace {
        Some(w) if !presence.workspaces.contains(w) => {
            return Err(unavailable(
                Code::WorkspaceUnavailable,
                format!("workspace: {machine} reported no workspace {w:?}"),
            ));
        }
        Some(_) => {}
        None => placed.workspace = presence.workspaces.first().cloned(),
    }
    let runtimes: Vec<&RuntimeModels> = match &asked.runtime {
        Some(r) => {
            let Some(found) = presence.runtimes.iter().find(|x| x.name == *r) else {
                return Err(unavailable(
                    Code::RuntimeUnavailable,
                    format!("runtime: {machine} reported no runtime {r:?}"),
                ));
            };
            vec![found]
        }
        None => presence.runtimes.iter().collect(),
    };
    if let Some(model) = &asked.model {
        if !runtimes.iter().any(|r| r.models.contains(model)) {
            let on = asked.runtime.as_deref().map_or_else(|| "any runtime".to_string(), |r| r.to_string());
            return Err(unavailable(
                Code::ModelUnavailable,
                format!("model: {on} on {machine} does not reach model {model:?}"),
            ));
        }
    }
    Ok(placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported() -> Presence {
        Presence {
            workspaces: vec!["api".into(), "web".into()],
            runtimes: vec![
                RuntimeModels { name: "claude-code".into(), models: vec!["opus".into(), "sonnet".into()] },
                RuntimeModels { name: "codex".into(), models: vec!["gpt-5-codex".into()] },
            ],
            sessions: vec![],
        }
    }

    fn enrolled() -> (Machines, EpochMs) {
        let mut m = Machines::default();
        let at = m.enrol("vm-7", "vm-7.internal", "SHA256:00", 1_000).unwrap();
        (m, at)
    }

    fn asked(workspace: Option<&str>, runtime: Option<&str>, model: Option<&str>) -> Placement {
        Placement {
            workspace: workspace.map(Into::into),
            runtime: runtime.map(Into::into),
            model: model.map(Into::into),
            requested_permission_mode: None,
        }
    }

    #[test]
    fn a_create_for_a_machine_that_reported_is_refused_a_workspace_runtime_or_model_it_did_not_report_naming_the_field()
    {
        let (mut m, at) = enrolled();
        m.presence("vm-7", at, reported(), 2_000).unwrap();
        let refused = |m: &mut Machines, p: Placement| m.place("vm-7", &p).unwrap_err();
        let r = refused(&mut m, asked(Some("docs"), None, None));
        assert_eq!((r.code, r.message.starts_with("workspace:")), (Code::WorkspaceUnavailable, true));
        let r = refused(&mut m, asked(None, Some("aider"), None));
        assert_eq!((r.code, r.message.starts_with("runtime:")), (Code::RuntimeUnavailable, true));
        let r = refused(&mut m, asked(None, Some("codex"), Some("opus")));
        assert_eq!((r.code, r.message.starts_with("model:")), (Code::ModelUnavailable, true), "{}", r.message);
        assert!(m.machines[0].handoffs.is_empty(), "nothing refused is listed for the machine");
        let placed = m.place("vm-7", &asked(None, Some("claude-code"), Some("opus"))).unwrap().unwrap();
        assert_eq!(placed.workspace.as_deref(), Some("api"), "no workspace: the machine's first");
        assert!(m.handoffs("vm-7", at).unwrap().is_empty(), "listed only once created");
        assert!(m.list("vm-7", "ho_1"));
        assert_eq!(m.handoffs("vm-7", at).unwrap(), ["ho_1"]);
    }

    #[test]
    fn a_create_for_a_machine_not_enrolled_or_not_reported_is_taken_as_asked() {
        let (mut m, _) = enrolled();
        assert_eq!(m.place("vm-9", &asked(Some("x"), None, None)), Ok(None));
        assert!(!m.list("vm-9", "ho_1"), "a machine not enrolled lists nothing");
        let placed = m.place("vm-7", &asked(Some("x"), None, Some("y"))).unwrap();
        assert_eq!(placed, Some(asked(Some("x"), None, Some("y"))), "nothing reported yet: nothing to check against");
    }

    #[test]
    fn a_credential_works_until_its_machine_is_revoked_or_enrolled_again() {
        let (mut m, at) = enrolled();
        m.list("vm-7", "ho_1");
        assert!(m.may_token("vm-7", at, "ho_1").is_ok());
        assert_eq!(m.may_token("vm-7", at, "ho_2").unwrap_err().code, Code::HandoffNotFound);
        let again = m.enrol("vm-7", "h", "f", at).unwrap();
        assert!(again > at);
        assert_eq!(m.handoffs("vm-7", at).unwrap_err().code, Code::AuthRevoked, "the credential before ends");
        assert!(m.handoffs("vm-7", again).unwrap().is_empty(), "hand-offs before the new enrolment are not its");
        m.revoke("vm-7").unwrap();
        assert_eq!(m.presence("vm-7", again, reported(), 5).unwrap_err().code, Code::AuthRevoked);
        assert_eq!(m.revoke("vm-7").unwrap_err().code, Code::MachineNotFound);
        assert_eq!(m.place("vm-7", &Placement::default()), Ok(None), "a revoked machine takes no new session");
        assert!(!m.list("vm-7", "ho_3"));
    }

    #[test]
    fn machines_per_owner_are_bounded_and_a_machine_is_online_within_three_heartbeats() {
        let mut m = Machines::default();
        for i in 0..MACHINES_PER_OWNER_MAX {
            m.enrol(&format!("m{i}"), "h", "f", 0).unwrap();
        }
        assert_eq!(m.enrol("one-more", "h", "f", 0).unwrap_err().code, Code::MachineTooMany);
        assert!(m.enrol("m0", "h", "f", 1).is_ok(), "enrolling a name again takes no new place");
        let at = m.machines.iter().find(|x| x.name == "m3").unwrap().enrolled_at;
        m.presence("m3", at, reported(), 100).unwrap();
        let view = m.view(100 + MACHINE_ONLINE_WITHIN_MS);
        assert_eq!((view[0].name.as_str(), view[0].online), ("m3", true), "online first");
        assert!(!m.view(101 + MACHINE_ONLINE_WITHIN_MS)[0].online);
    }

    #[test]
    fn a_presence_is_bounded_and_names_its_bad_field() {
        let mut p = reported();
        assert!(p.check().is_ok());
        p.workspaces.push("a b".into());
        assert!(p.check().unwrap_err().message.starts_with("workspaces:"));
        let many = Presence { sessions: vec!["s".into(); MACHINE_SESSIONS_MAX + 1], ..reported() };
        assert!(many.check().unwrap_err().message.starts_with("sessions:"));
    }

    #[test]
    fn the_hand_offs_a_machine_lists_are_bounded_the_newest_kept() {
        let (mut m, at) = enrolled();
        for i in 0..MACHINE_HANDOFFS_KEPT + 3 {
            m.list("vm-7", &format!("ho_{i}"));
        }
        let listed = m.handoffs("vm-7", at).unwrap();
        assert_eq!(listed.len(), MACHINE_HANDOFFS_KEPT);
        assert_eq!(listed[0], "ho_3");
    }

    #[test]
    fn the_lists_version_rises_by_one_per_hand_off_listed_and_on_enrolling_again_and_never_on_a_repeat() {
        let (mut m, at) = enrolled();
        assert_eq!(m.version("vm-7", at), Ok(0));
        assert!(m.list("vm-7", "ho_1"));
        assert!(!m.list("vm-7", "ho_1"), "listed already: no change");
        assert!(m.list("vm-7", "ho_2"));
        assert_eq!(m.version("vm-7", at), Ok(2));
        m.presence("vm-7", at, reported(), 5).unwrap();
        assert_eq!(m.version("vm-7", at), Ok(2), "a presence is no change of the list");
        let again = m.enrol("vm-7", "h", "f", at).unwrap();
        assert_eq!(m.version("vm-7", again), Ok(3), "a list started anew is never a version seen before");
        assert_eq!(m.version("vm-7", at).unwrap_err().code, Code::AuthRevoked);
    }

    #[test]
    fn what_a_runtime_reaches_is_what_its_machine_reported_and_nothing_before_it_reported() {
        let (mut m, at) = enrolled();
        assert_eq!(m.reach("vm-7", "codex"), None, "not reported yet");
        assert_eq!(m.reach("vm-9", "codex"), None, "not enrolled");
        m.presence("vm-7", at, reported(), 2).unwrap();
        assert_eq!(m.reach("vm-7", "codex"), Some(vec!["gpt-5-codex".to_string()]));
        assert_eq!(m.reach("vm-7", "aider"), Some(vec![]), "a runtime it did not report reaches nothing");
    }

    #[test]
    fn a_follow_is_held_only_while_it_has_seen_the_lists_very_version() {
        assert!(follow_holds(4, 4));
        assert!(!follow_holds(5, 4), "a newer list answers at once");
        assert!(
            !follow_holds(0, 4),
            "a list started anew answers at once rather than wait for a version it may never reach"
        );
    }
}
