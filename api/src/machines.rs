//! The machine routes' contract: an enrolment (start, look up, approve, refuse, collect), a
//! machine credential's routes (presence, its hand-offs, a hand-off's machine token) and the
//! owner's machines (list, revoke). Their bodies, the asks the Worker sends the `Enrolments`
//! object (one, across owners) and an owner's `Machines` object, and how each object answers an
//! ask by the core's rules (`handoff_core::enrolment`, `handoff_core::machines`): the objects
//! load, call [`answer_enrolment`] or [`answer_machines`], store what changed and answer.

use crate::error::{ApiError, Code};
use crate::routes::EnrolmentRoute;
use handoff_core::enrolment::{self, Collected, Enrolments, Pending};
use handoff_core::ids::check_name;
use handoff_core::json::parse_json;
use handoff_core::limits::{
    ENROLMENT_CODE_TTL_MS, ENROLMENT_KEY_BYTES, HOST_NAME_BYTES_MAX, ID_CHARS_MAX, MACHINE_FOLLOW_TIMEOUT_S_MAX,
    MACHINE_HEARTBEAT_S, MACHINE_ONLINE_WITHIN_MS,
};
use handoff_core::machines::{follow_holds, MachineView, Machines, Presence};
use handoff_core::placement::Placement;
use handoff_core::time::{EpochMs, Timestamp};
use serde::{Deserialize, Serialize};

/// The name of the one `Enrolments` object.
pub const ENROLMENTS_OBJECT: &str = "enrolments";

/// What the `Enrolments` object is asked. Tuple variants, read by position: each costs the
/// `.wasm` less than named fields would (as `protocol::ToIndex`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnrolmentAsk {
    /// `POST /v1/enrolments`: a new pending enrolment (its code drawn by the Worker).
    Start(Pending),
    /// An owner's (the approver's) look-up, approval or refusal of a code.
    Decide(EnrolmentRoute, String, String),
    /// `POST /v1/enrolments/collect` (the machine, proving its key): the code, the key and the
    /// owner it accepts.
    Collect(String, String, Option<String>),
}

/// What an owner's `Machines` object is asked, by position as [`EnrolmentAsk`] is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachinesAsk {
    /// A collected enrolment (name, host, fingerprint): the machine enrolled (answers its
    /// `enrolled_at`).
    Enrol(String, String, String),
    /// A credential's heartbeat: its machine, when it was enrolled, the presence.
    Presence(String, EpochMs, Presence),
    /// A credential's hand-offs.
    Handoffs(String, EpochMs),
    /// A credential's follow of its hand-offs: the list once its version passes `after` (the
    /// third), held up to the fourth, in milliseconds.
    Follow(String, EpochMs, u64, u64),
    /// Whether a credential (machine, enrolled at) may get hand-off `id`'s machine token.
    MayToken(String, EpochMs, String),
    /// A create for a machine: the placement it runs with, or its refusal.
    Place(String, Placement),
    /// Hand-off `id` (the second) was created for the machine: listed for it, its follows woken.
    Listed(String, String),
    /// A hand-off turn's check (from its hand-off's object): the models a runtime (the second)
    /// reaches on the machine.
    Reach(String, String),
    /// `GET /v1/machines` (owner).
    List,
    /// `DELETE /v1/machines/{name}` (owner).
    Revoke(String),
}

/// An object's answer: its status and JSON body (none for 204), or a refusal; whether the
/// state changed (to be stored); and what it asks of the machines' held follows.
pub type Answer = (Result<(u16, Vec<u8>), ApiError>, bool, Option<Follow>);

/// What an answer asks of the `Machines` object's held follows, once its state is stored.
#[derive(Debug, PartialEq, Eq)]
pub enum Follow {
    /// Hold this follow of the machine up to this many milliseconds (within its machine's cap,
    /// `handoff_core::follows`); at its timeout, send the answer's body: the list, unchanged.
    Hold(String, u64),
    /// The machine's list changed: answer its held follows with this body, its list now (once
    /// the runtime confirms the change is stored).
    Wake(String, Vec<u8>),
    /// The machine was revoked or enrolled again: answer its held follows at once, each with the
    /// list it held; the credential's next call is 401 `auth.revoked`.
    End(String),
}

fn json(status: u16, body: &impl Serialize) -> Result<(u16, Vec<u8>), ApiError> {
    serde_json::to_vec(body).map(|b| (status, b)).map_err(|_| ApiError::unavailable())
}

/// `POST /v1/enrolments`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartInput {
    pub name: String,
    pub host: String,
    /// SHA-256 of the machine's secret key, in hex (`enrolment::public_key_of`).
    pub public_key: String,
}

pub fn parse_start(body: &[u8]) -> Result<StartInput, ApiError> {
    let input: StartInput = parse_json(body)?;
    check_name("name", &input.name, ID_CHARS_MAX)?;
    check_name("host", &input.host, HOST_NAME_BYTES_MAX)?;
    if !enrolment::is_public_key(&input.public_key) {
        return Err(ApiError::invalid("public_key: the SHA-256 of the machine's key, 64 lowercase hex digits"));
    }
    Ok(input)
}

/// `POST /v1/enrolments/collect`'s body: the code, the key itself (hex), and the owner the
/// machine accepts (without it, the answer only says who approved).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectInput {
    pub code: String,
    pub key: String,
    #[serde(default)]
    pub owner: Option<String>,
}

pub fn parse_collect(body: &[u8]) -> Result<EnrolmentAsk, ApiError> {
    let input: CollectInput = parse_json(body)?;
    let code = enrolment::read_code(&input.code).ok_or_else(|| ApiError::invalid("code: XXXX-XXXX"))?;
    let key_ok = hex::decode(&input.key).is_ok_and(|k| k.len() == ENROLMENT_KEY_BYTES);
    if !key_ok {
        return Err(ApiError::invalid(format!("key: {ENROLMENT_KEY_BYTES} bytes in hex")));
    }
    if let Some(owner) = &input.owner {
        check_name("owner", owner, ID_CHARS_MAX)?;
    }
    Ok(EnrolmentAsk::Collect(code, input.key, input.owner))
}

/// A `{code}` of the path: a code as typed, or no such enrolment.
pub fn path_code(code: &str) -> Result<String, ApiError> {
    enrolment::read_code(code).ok_or_else(|| enrolment::Refused::UnknownCode.refusal())
}

/// `POST /v1/machine/presence`'s body.
pub fn parse_presence(body: &[u8]) -> Result<Presence, ApiError> {
    let presence: Presence = parse_json(body)?;
    presence.check()?;
    Ok(presence)
}

/// The new pending enrolment `POST /v1/enrolments` asks for.
pub fn pending(input: StartInput, random: [u8; enrolment::CODE_RANDOM_BYTES], address: &str, now: EpochMs) -> Pending {
    Pending {
        code: enrolment::code_of(random),
        fingerprint: enrolment::fingerprint(input.public_key.as_bytes()),
        name: input.name,
        host: input.host,
        public_key: input.public_key,
        address: address.to_string(),
        started_ms: now,
        approved_by: None,
        refused: false,
    }
}

/// An enrolment as the owner sees it before Approve, and the machine when it starts.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EnrolmentView {
    pub code: String,
    pub name: String,
    pub host: String,
    pub fingerprint: String,
    pub expires_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
}

impl EnrolmentView {
    fn of(p: &Pending) -> EnrolmentView {
        EnrolmentView {
            code: p.code.clone(),
            name: p.name.clone(),
            host: p.host.clone(),
            fingerprint: p.fingerprint.clone(),
            expires_at: Timestamp::from_ms(p.started_ms + ENROLMENT_CODE_TTL_MS),
            approved_by: p.approved_by.clone(),
        }
    }
}

#[derive(Serialize, Deserialize)]
pub struct EnrolmentAnswer {
    pub enrolment: EnrolmentView,
}

/// What a collect answers: `waiting`, `approved` (by whom), `accepted` (the enrolment over;
/// the object's answer names the machine, the Worker's the credential too).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CollectAnswer {
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

/// The `Enrolments` object's answer to `ask` at `now`.
pub fn answer_enrolment(state: &mut Enrolments, ask: EnrolmentAsk, now: EpochMs) -> Answer {
    let refused = |r: enrolment::Refused| r.refusal();
    match ask {
        EnrolmentAsk::Start(pending) => {
            let view = EnrolmentView::of(&pending);
            match state.start(pending, now) {
                Ok(()) => (json(201, &EnrolmentAnswer { enrolment: view }), true, None),
                Err(r) => (Err(refused(r)), false, None),
            }
        }
        EnrolmentAsk::Decide(EnrolmentRoute::LookUp, approver, code) => {
            let found =
                state.look_up(&approver, &code, now).map(|p| EnrolmentAnswer { enrolment: EnrolmentView::of(p) });
            (found.map_err(refused).and_then(|a| json(200, &a)), true, None)
        }
        EnrolmentAsk::Decide(EnrolmentRoute::Approve, approver, code) => {
            let done =
                state.approve(&approver, &code, now).map(|p| EnrolmentAnswer { enrolment: EnrolmentView::of(p) });
            (done.map_err(refused).and_then(|a| json(200, &a)), true, None)
        }
        EnrolmentAsk::Decide(EnrolmentRoute::Refuse, approver, code) => {
            (state.refuse(&approver, &code, now).map_err(refused).map(|()| (204, Vec::new())), true, None)
        }
        EnrolmentAsk::Collect(code, key, owner) => {
            let key = hex::decode(&key).unwrap_or_default();
            let before = state.pending.len();
            let collected = state.collect(&code, &key, owner.as_deref(), now);
            let changed = state.pending.len() != before;
            let status = |s: &str| CollectAnswer {
                status: s.to_string(),
                approved_by: None,
                machine: None,
                host: None,
                fingerprint: None,
                credential: None,
            };
            let answer = match collected {
                Ok(Collected::Waiting) => json(200, &status("waiting")),
                Ok(Collected::Approved { by }) => {
                    json(200, &CollectAnswer { approved_by: Some(by), ..status("approved") })
                }
                Ok(Collected::Accepted { pending, by }) => json(
                    200,
                    &CollectAnswer {
                        approved_by: Some(by),
                        machine: Some(pending.name),
                        host: Some(pending.host),
                        fingerprint: Some(pending.fingerprint),
                        ..status("accepted")
                    },
                ),
                Err(r) => Err(refused(r)),
            };
            (answer, changed, None)
        }
    }
}

/// `{"enrolled_at"}`: a machine enrolled.
#[derive(Serialize, Deserialize)]
pub struct Enrolled {
    pub enrolled_at: EpochMs,
}

/// A presence taken: how often to report, and the `online` rule.
#[derive(Serialize, Deserialize)]
pub struct PresenceAnswer {
    pub heartbeat_s: i64,
    pub online_within_s: i64,
}

/// One hand-off created for the credential's machine.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
pub struct MachineHandoff {
    pub id: String,
}

/// `GET /v1/machine/handoffs`: the list, newest first, and its version.
#[derive(Serialize, Deserialize)]
pub struct MachineHandoffs {
    pub handoffs: Vec<MachineHandoff>,
    pub version: u64,
}

impl MachineHandoffs {
    fn of(ids: &[String], version: u64) -> MachineHandoffs {
        MachineHandoffs { handoffs: ids.iter().rev().map(|id| MachineHandoff { id: id.clone() }).collect(), version }
    }
}

/// `?after=V&timeout=S` of `GET /v1/machine/handoffs`: none, the list at once; with `after`, a
/// follow held until the list's version passes V, for `timeout` seconds (at most and by
/// default [`MACHINE_FOLLOW_TIMEOUT_S_MAX`]). Anything else is 400 `request.invalid` naming it.
pub fn parse_follow_query(query: &str) -> Result<Option<(u64, u64)>, ApiError> {
    let (mut after, mut timeout_s) = (None, MACHINE_FOLLOW_TIMEOUT_S_MAX);
    for (key, value) in crate::input::query_pairs(query) {
        match key {
            "after" => after = Some(crate::input::parse_u64("after", value)?),
            "timeout" => timeout_s = crate::input::parse_u64("timeout", value)?,
            other => return Err(ApiError::invalid(format!("{other}: unknown query parameter"))),
        }
    }
    if timeout_s > MACHINE_FOLLOW_TIMEOUT_S_MAX {
        return Err(ApiError::invalid(format!(
            "timeout: at most {MACHINE_FOLLOW_TIMEOUT_S_MAX} seconds (MACHINE_FOLLOW_TIMEOUT_S_MAX)"
        )));
    }
    match after {
        Some(after) => Ok(Some((after, timeout_s))),
        None if !query.is_empty() => Err(ApiError::invalid("after: a follow names the version it has seen")),
        None => Ok(None),
    }
}

/// A create's placement on its machine: `None` for a machine not enrolled.
#[derive(Serialize, Deserialize)]
pub struct Placed {
    pub placement: Option<Placement>,
}

/// What a runtime reaches on a machine: `None` where nothing was reported to check against.
#[derive(Serialize, Deserialize)]
pub struct Reached {
    pub models: Option<Vec<String>>,
}

#[derive(Serialize)]
pub struct MachinesList {
    pub machines: Vec<MachineView>,
}

/// An owner's `Machines` object's answer to `ask` at `now`.
pub fn answer_machines(state: &mut Machines, ask: MachinesAsk, now: EpochMs) -> Answer {
    match ask {
        // Enrolling a name again ends the follows of the credential before.
        MachinesAsk::Enrol(name, host, fingerprint) => match state.enrol(&name, &host, &fingerprint, now) {
            Ok(enrolled_at) => (json(200, &Enrolled { enrolled_at }), true, Some(Follow::End(name))),
            Err(r) => (Err(r), false, None),
        },
        MachinesAsk::Presence(name, enrolled_at, presence) => match state.presence(&name, enrolled_at, presence, now) {
            Ok(()) => {
                let answer = PresenceAnswer {
                    heartbeat_s: MACHINE_HEARTBEAT_S,
                    online_within_s: MACHINE_ONLINE_WITHIN_MS / 1000,
                };
                (json(200, &answer), true, None)
            }
            Err(r) => (Err(r), false, None),
        },
        MachinesAsk::Handoffs(name, enrolled_at) => {
            (listed(state, &name, enrolled_at).map(|(_, body)| body), false, None)
        }
        MachinesAsk::Follow(name, enrolled_at, after, timeout_ms) => match listed(state, &name, enrolled_at) {
            Ok((version, body)) => {
                let hold = (timeout_ms > 0 && follow_holds(version, after)).then_some(Follow::Hold(name, timeout_ms));
                (Ok(body), false, hold)
            }
            Err(r) => (Err(r), false, None),
        },
        MachinesAsk::MayToken(name, enrolled_at, id) => {
            (state.may_token(&name, enrolled_at, &id).map(|()| (204, Vec::new())), false, None)
        }
        MachinesAsk::Place(machine, placement) => match state.place(&machine, &placement) {
            Ok(placement) => (json(200, &Placed { placement }), false, None),
            Err(r) => (Err(r), false, None),
        },
        MachinesAsk::Listed(machine, id) => {
            if !state.list(&machine, &id) {
                return (Ok((204, Vec::new())), false, None);
            }
            let now_listed = state.machines.iter().find(|m| m.name == machine).map(|m| {
                json(200, &MachineHandoffs::of(&m.handoffs, m.version)).map(|(_, body)| Follow::Wake(machine, body))
            });
            match now_listed {
                Some(Ok(wake)) => (Ok((204, Vec::new())), true, Some(wake)),
                Some(Err(e)) => (Err(e), false, None),
                None => (Ok((204, Vec::new())), true, None),
            }
        }
        MachinesAsk::Reach(machine, runtime) => {
            (json(200, &Reached { models: state.reach(&machine, &runtime) }), false, None)
        }
        MachinesAsk::List => (json(200, &MachinesList { machines: state.view(now) }), false, None),
        MachinesAsk::Revoke(name) => match state.revoke(&name) {
            Ok(()) => (Ok((204, Vec::new())), true, Some(Follow::End(name))),
            Err(r) => (Err(r), false, None),
        },
    }
}

/// The credential's list as `GET /v1/machine/handoffs` answers it, and its version.
fn listed(state: &Machines, name: &str, enrolled_at: EpochMs) -> Result<(u64, (u16, Vec<u8>)), ApiError> {
    let ids = state.handoffs(name, enrolled_at)?;
    let version = state.version(name, enrolled_at)?;
    Ok((version, json(200, &MachineHandoffs::of(ids, version))?))
}

/// A machine credential's claims that the machine routes read: its owner, machine and when it
/// was enrolled.
pub fn credential_of(claims: &crate::token::Claims) -> Result<(String, EpochMs), ApiError> {
    match (&claims.mch, claims.inc) {
        (Some(name), Some(inc)) => Ok((name.clone(), inc as EpochMs)),
        _ => Err(ApiError::new(Code::AuthInvalid, "a machine credential must name its machine and enrolment")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(state: &mut Enrolments, key: &[u8]) -> String {
        let input =
            StartInput { name: "vm-7".into(), host: "vm-7.internal".into(), public_key: enrolment::public_key_of(key) };
        let p = pending(input, [1, 2, 3, 4, 5], "10.0.0.1", 0);
        let code = p.code.clone();
        let (answer, changed, _) = answer_enrolment(state, EnrolmentAsk::Start(p), 0);
        assert_eq!((answer.unwrap().0, changed), (201, true));
        code
    }

    #[test]
    fn an_enrolment_started_approved_and_collected_answers_each_step_and_refuses_a_wrong_code() {
        let mut state = Enrolments::default();
        let code = started(&mut state, b"k");
        let look = |state: &mut Enrolments, code: &str| {
            answer_enrolment(state, EnrolmentAsk::Decide(EnrolmentRoute::LookUp, "alice".into(), code.into()), 1).0
        };
        assert_eq!(look(&mut state, "AAAA-AAAA").unwrap_err().code, Code::EnrolmentNotFound);
        let (status, body) = look(&mut state, &code.to_lowercase()).unwrap();
        let view: EnrolmentAnswer = serde_json::from_slice(&body).unwrap();
        assert_eq!((status, view.enrolment.name.as_str()), (200, "vm-7"));
        assert!(view.enrolment.fingerprint.starts_with("SHA256:"));
        let collect = |state: &mut Enrolments, owner: Option<&str>| {
            let ask = EnrolmentAsk::Collect(code.clone(), hex::encode(b"k"), owner.map(Into::into));
            let (answer, _, _) = answer_enrolment(state, ask, 2);
            answer.map(|(_, body)| serde_json::from_slice::<CollectAnswer>(&body).unwrap().status)
        };
        assert_eq!(collect(&mut state, Some("alice")).unwrap(), "waiting");
        answer_enrolment(&mut state, EnrolmentAsk::Decide(EnrolmentRoute::Approve, "alice".into(), code.clone()), 2)
            .0
            .unwrap();
        assert_eq!(collect(&mut state, None).unwrap(), "approved");
        assert_eq!(collect(&mut state, Some("alice")).unwrap(), "accepted");
        assert_eq!(collect(&mut state, Some("alice")).unwrap_err().code, Code::EnrolmentNotFound);
    }

    #[test]
    fn a_follow_query_names_after_and_at_most_the_longest_hold_and_anything_else_is_refused_by_name() {
        assert_eq!(parse_follow_query(""), Ok(None), "no query: the list at once");
        assert_eq!(parse_follow_query("after=3"), Ok(Some((3, MACHINE_FOLLOW_TIMEOUT_S_MAX))));
        assert_eq!(parse_follow_query("after=0&timeout=5"), Ok(Some((0, 5))));
        for (bad, field) in [
            ("after=-1", "after:"),
            ("after=x", "after:"),
            ("after=", "after:"),
            ("timeout=5", "after:"),
            ("after=1&timeout=31", "timeout:"),
            ("after=1&since=2", "since:"),
        ] {
            let e = parse_follow_query(bad).unwrap_err();
            assert_eq!(e.code, Code::RequestInvalid, "{bad}");
            assert!(e.message.starts_with(field), "{bad}: {}", e.message);
        }
    }

    fn machine_with_follow(version_after: u64) -> (Machines, EpochMs) {
        let mut state = Machines::default();
        let at = state.enrol("vm-7", "h", "f", 0).unwrap();
        for i in 0..version_after {
            state.list("vm-7", &format!("ho_{i}"));
        }
        (state, at)
    }

    #[test]
    fn a_follow_that_has_seen_the_lists_version_is_held_and_one_behind_it_answers_at_once_with_the_version() {
        let (mut state, at) = machine_with_follow(2);
        let (answer, changed, follow) =
            answer_machines(&mut state, MachinesAsk::Follow("vm-7".into(), at, 2, 30_000), 1);
        let list: serde_json::Value = serde_json::from_slice(&answer.unwrap().1).unwrap();
        assert_eq!(list, serde_json::json!({"handoffs": [{"id": "ho_1"}, {"id": "ho_0"}], "version": 2}));
        assert_eq!(
            (changed, follow),
            (false, Some(Follow::Hold("vm-7".into(), 30_000))),
            "held, its timeout answering this list"
        );
        let (_, _, follow) = answer_machines(&mut state, MachinesAsk::Follow("vm-7".into(), at, 1, 30_000), 1);
        assert_eq!(follow, None, "a version it has not seen answers at once");
        let (_, _, follow) = answer_machines(&mut state, MachinesAsk::Follow("vm-7".into(), at, 2, 0), 1);
        assert_eq!(follow, None, "timeout=0 answers at once");
        let revoked = answer_machines(&mut state, MachinesAsk::Follow("vm-7".into(), at + 1, 2, 30_000), 1);
        assert_eq!(revoked.0.unwrap_err().code, Code::AuthRevoked);
    }

    #[test]
    fn a_hand_off_listed_wakes_its_machines_follows_with_the_new_list_and_a_revoke_or_an_enrolment_ends_them() {
        let (mut state, _) = machine_with_follow(1);
        let (answer, changed, follow) =
            answer_machines(&mut state, MachinesAsk::Listed("vm-7".into(), "ho_9".into()), 1);
        assert_eq!((answer.unwrap().0, changed), (204, true));
        let Some(Follow::Wake(machine, list)) = follow else { panic!("a listing wakes the follows: {follow:?}") };
        let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(
            (machine.as_str(), &list["version"], &list["handoffs"][0]["id"]),
            ("vm-7", &2.into(), &"ho_9".into())
        );
        let again = answer_machines(&mut state, MachinesAsk::Listed("vm-7".into(), "ho_9".into()), 1);
        assert_eq!((again.1, again.2), (false, None), "listed already: nothing changes, nobody wakes");
        let elsewhere = answer_machines(&mut state, MachinesAsk::Listed("vm-9".into(), "ho_8".into()), 1);
        assert_eq!((elsewhere.0.unwrap().0, elsewhere.2), (204, None), "a machine not enrolled lists nothing");
        let enrolled = answer_machines(&mut state, MachinesAsk::Enrol("vm-7".into(), "h".into(), "f".into()), 2);
        assert_eq!(enrolled.2, Some(Follow::End("vm-7".into())));
        let revoked = answer_machines(&mut state, MachinesAsk::Revoke("vm-7".into()), 3);
        assert_eq!(revoked.2, Some(Follow::End("vm-7".into())));
    }

    #[test]
    fn a_collect_and_a_start_read_their_bodies_naming_the_bad_field() {
        assert!(parse_collect(br#"{"code":"abcd-efgh","key":"00"}"#).unwrap_err().message.starts_with("key:"));
        assert!(parse_collect(br#"{"code":"abc","key":"00"}"#).unwrap_err().message.starts_with("code:"));
        let start = br#"{"name":"vm 7","host":"h","public_key":"00"}"#;
        assert!(parse_start(start).unwrap_err().message.starts_with("name:"));
        let start = br#"{"name":"vm-7","host":"h","public_key":"00"}"#;
        assert!(parse_start(start).unwrap_err().message.starts_with("public_key:"));
    }
}
