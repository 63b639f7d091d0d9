//! The decider's answers as bytes: [`Json`] is the core's [`Wire`], so the status of each
//! answer and the shape of its body are decided here and nowhere else.

use crate::device::{DeviceAnswer, DeviceView};
use crate::error::status;
use crate::notifications::{
    Deliveries, PushSubscription, PushSubscriptions, SubscriptionCreated, Webhook, WebhookCreated, Webhooks,
};
use crate::view::{
    Beside, Changed, CompiledHead, Created, Handoff, ItemView, LatestHead, Preview, RecordAnswer, Timeline,
    TimelineTaken, Turns, WorkAnswer, WorkRecord,
};
use handoff_core::decider::{HandoffAnswer, Rendered, Wire, JSON};
use handoff_core::error::{Code, Refusal};
use handoff_core::handoff::Effect;
use handoff_core::hooks::Fault;
use handoff_core::limits::WATCH_EVENTS_FRAME_BYTES_MAX;
use handoff_core::owner::{self, receiver::Receiver};
use handoff_core::package::Document;
use handoff_core::rows::TooManyOpen;
use serde::Serialize;
use std::borrow::Cow;

/// A device's access token (201 as it signs in, 200 as it refreshes), never kept by a cache,
/// and on a sign-in the cookie that carries the device's credential.
fn access(
    status: u16,
    device: &handoff_core::owner::devices::Device,
    granted: &handoff_core::owner::devices::Granted,
) -> (Rendered, Vec<(&'static str, String)>) {
    let body = DeviceAnswer {
        device: Some(DeviceView::of(device, true)),
        access_token: Some(granted.access_token.clone()),
        expires_in: Some(granted.expires_in),
        ..DeviceAnswer::default()
    };
    let mut headers = vec![("Cache-Control", "no-store".to_string())];
    if let Some(cookie) = &granted.cookie {
        headers.push(("Set-Cookie", cookie.clone()));
    }
    (json(status, &body), headers)
}

/// The HTTP contract's rendering of every answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// `{"error": {"code", "message"}}`, with the record when the caller may see it, and the
/// current package's version and hash on `package.stale`.
#[derive(Serialize)]
struct ErrorAnswer<'a> {
    error: ErrorBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    handoff: Option<Handoff<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    package_hash: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    package_version: Option<u64>,
    /// `owner.too_many_open`: the open hand-offs the owner holds, and the cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    open: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cap: Option<u64>,
    /// A timeline's refusal: the turn, and the `seq` its next event takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<u64>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: handoff_core::error::Code,
    message: &'a str,
}

#[derive(Serialize)]
struct Armed {
    armed: Fault,
}

#[derive(Serialize)]
struct Ok_ {
    ok: bool,
}

fn json(status: u16, body: &impl Serialize) -> Rendered {
    let body = serde_json::to_string(body).expect("an answer is plain data: it always serialises");
    Rendered { status, content_type: JSON, body, replayed: false }
}

/// The error answer of `refusal`, alone.
pub fn refusal(refusal: &Refusal) -> Rendered {
    refused(refusal, None, None)
}

fn refused(refusal: &Refusal, handoff: Option<Handoff<'_>>, current_package: Option<(u64, &str)>) -> Rendered {
    let body = ErrorAnswer {
        error: ErrorBody { code: refusal.code, message: &refusal.message },
        handoff,
        package_hash: current_package.map(|(_, hash)| hash),
        package_version: current_package.map(|(version, _)| version),
        open: None,
        cap: None,
        turn: None,
        next: None,
    };
    json(status(refusal.code), &body)
}

/// The headers a refusal carries beside its body: `WWW-Authenticate: Bearer` on every 401
/// (RFC 6750 §3), and `Retry-After` with the rate limit's period on `owner.rate_limited`.
pub fn refusal_headers(code: Code) -> Vec<(&'static str, String)> {
    match code {
        _ if status(code) == 401 => vec![("WWW-Authenticate", "Bearer".to_string())],
        Code::OwnerRateLimited => vec![("Retry-After", handoff_core::limits::CREATES_PER_OWNER_PERIOD_S.to_string())],
        Code::DeviceRateLimited => {
            vec![("Retry-After", (handoff_core::limits::DEVICE_SIGN_INS_PERIOD_MS / 1000).to_string())]
        }
        _ => Vec::new(),
    }
}

/// 405 `request.method_not_allowed`, naming in `Allow` the methods the route does take (RFC 9110 §15.5.6).
pub fn method_not_allowed(method: &str, allowed: &[&str]) -> (Rendered, Vec<(&'static str, String)>) {
    let allow = allowed.join(", ");
    let error = Refusal::new(Code::MethodNotAllowed, format!("{method} is not allowed here; allowed: {allow}"));
    (refusal(&error), vec![("Allow", allow)])
}

/// 429 `owner.too_many_open`, carrying the count and the cap.
pub fn too_many_open(crowded: TooManyOpen) -> Rendered {
    let message =
        format!("this owner holds {} open hand-offs, the cap is {}: close one first", crowded.open, crowded.cap);
    let body = ErrorAnswer {
        error: ErrorBody { code: Code::OwnerTooManyOpen, message: &message },
        handoff: None,
        package_hash: None,
        package_version: None,
        open: Some(crowded.open),
        cap: Some(crowded.cap),
        turn: None,
        next: None,
    };
    json(status(Code::OwnerTooManyOpen), &body)
}

fn beside<'a>(id: &'a str, effect: &'a Effect) -> Beside<'a> {
    match effect {
        Effect::Nothing => Beside::Nothing {},
        Effect::Item(item) => Beside::Item(ItemView::of(id, item)),
        Effect::Policy(policy) => Beside::Policy { policy },
        Effect::Compiled(c) => Beside::Compiled(CompiledHead::of(c)),
        Effect::Package(l) => Beside::Package(LatestHead::of(l)),
    }
}

/// The package member that ends an answer which carries one: the canonical document, as the
/// compile wrote it (or as it is written now, for a package loaded from storage).
fn package_member(document: &Document) -> String {
    format!(",\"package\":{}}}", document.json())
}

/// `head` (an object) with the package member after its last.
fn json_with_package(status: u16, head: &impl Serialize, document: &Document) -> Rendered {
    let mut body = serde_json::to_string(head).expect("an answer is plain data: it always serialises");
    body.pop();
    body.push_str(&package_member(document));
    Rendered { status, content_type: JSON, body, replayed: false }
}

fn document_of(answer: &HandoffAnswer<'_>) -> Option<Document> {
    match answer {
        HandoffAnswer::Changed { effect: Effect::Compiled(c), .. } => Some(c.document.of(&c.package)),
        HandoffAnswer::Changed { effect: Effect::Package(l), .. } => Some(l.document.of(&l.package)),
        HandoffAnswer::Preview { latest, .. } => Some(latest.document.of(&latest.package)),
        _ => None,
    }
}

#[derive(Serialize)]
struct Refusing {
    refusing: bool,
}

#[derive(Serialize)]
struct Holding {
    holding: bool,
}

#[derive(Serialize)]
struct Bytes {
    bytes: u64,
}

/// The owner index's answer: 201 for what it created, 204 for what it removed, 200 for the
/// rest, a refusal with its code's status, and a page with its `ETag` and `Cache-Control`,
/// 304 with no body when the client holds it already. A receiver is shown by its view: a
/// webhook never with its secret but when it is created, a subscription by its origin alone.
pub fn index(answer: &owner::IndexAnswer) -> (Rendered, Vec<(&'static str, String)>) {
    let rendered = match answer {
        owner::IndexAnswer::Page { page, if_none_match } => {
            let answer = crate::conditional::answer(json(200, page).body.into_bytes(), if_none_match.as_deref());
            let body = String::from_utf8(answer.body).unwrap_or_default();
            return (
                Rendered { status: answer.status, content_type: JSON, body, replayed: false },
                answer.headers.to_vec(),
            );
        }
        owner::IndexAnswer::Refused(r) => return (refusal(r), refusal_headers(r.code)),
        owner::IndexAnswer::Unavailable(_) => return (refusal(&Refusal::unavailable()), Vec::new()),
        owner::IndexAnswer::Done => json(200, &Ok_ { ok: true }),
        owner::IndexAnswer::Admission(admission) => json(200, admission),
        owner::IndexAnswer::Created(entry) => match &entry.address {
            owner::Address::Webhook { secret, .. } => {
                json(201, &WebhookCreated { webhook: Webhook::of(entry), secret: secret.clone() })
            }
            owner::Address::Push { .. } => {
                json(201, &SubscriptionCreated { subscription: PushSubscription::of(entry) })
            }
        },
        owner::IndexAnswer::Receivers { of: Receiver::Webhook, entries } => {
            json(200, &Webhooks { webhooks: entries.iter().map(Webhook::of).collect() })
        }
        owner::IndexAnswer::Receivers { of: Receiver::Push, entries } => {
            json(200, &PushSubscriptions { subscriptions: entries.iter().map(PushSubscription::of).collect() })
        }
        owner::IndexAnswer::Deliveries { deliveries, dropped } => {
            json(200, &Deliveries { deliveries: deliveries.clone(), dropped: *dropped })
        }
        owner::IndexAnswer::Removed => {
            Rendered { status: 204, content_type: JSON, body: String::new(), replayed: false }
        }
        owner::IndexAnswer::Refusing(refusing) => json(200, &Refusing { refusing: *refusing }),
        owner::IndexAnswer::SignedIn { device, granted } => return access(201, device, granted),
        owner::IndexAnswer::Refreshed { device, granted } => return access(200, device, granted),
        owner::IndexAnswer::Devices { devices, current } => {
            let current = |d: &handoff_core::owner::devices::Device| current.as_deref() == Some(d.id.as_str());
            let devices = devices.iter().map(|d| DeviceView::of(d, current(d))).collect();
            json(200, &DeviceAnswer { devices: Some(devices), ..DeviceAnswer::default() })
        }
        owner::IndexAnswer::Device { device, current } => {
            json(200, &DeviceAnswer { device: Some(DeviceView::of(device, *current)), ..DeviceAnswer::default() })
        }
        owner::IndexAnswer::RevokedAll(revoked) => {
            json(200, &DeviceAnswer { revoked: Some(*revoked), ..DeviceAnswer::default() })
        }
        owner::IndexAnswer::Holding(holding) => json(200, &Holding { holding: *holding }),
        owner::IndexAnswer::StorageBytes(bytes) => json(200, &Bytes { bytes: *bytes }),
        owner::IndexAnswer::StorageOf(facts) => json(200, facts),
    };
    (rendered, Vec::new())
}

/// A `handoff.v2` watch's frames of `turn`'s `events`, in order, each
/// `{"timeline": {"turn", "events"}}` of at most [`WATCH_EVENTS_FRAME_BYTES_MAX`] bytes, with the
/// last `seq` it carries.
pub fn timeline_frames(turn: u64, events: &[handoff_core::timeline::Event]) -> Vec<(u64, String)> {
    let head = format!("{{\"timeline\":{{\"turn\":{turn},\"events\":[");
    let mut frames = Vec::new();
    let mut frame = head.clone();
    let mut last = None;
    for event in events {
        let json = serde_json::to_string(event).expect("an event is plain data: it always serialises");
        if let Some(seq) = last.filter(|_| frame.len() + json.len() + 3 > WATCH_EVENTS_FRAME_BYTES_MAX) {
            frame.push_str("]}}");
            frames.push((seq, std::mem::replace(&mut frame, head.clone())));
            last = None;
        }
        if last.is_some() {
            frame.push(',');
        }
        frame.push_str(&json);
        last = Some(event.seq);
    }
    if let Some(seq) = last {
        frame.push_str("]}}");
        frames.push((seq, frame));
    }
    frames
}

impl Wire for Json {
    fn render(&self, answer: HandoffAnswer<'_>) -> Rendered {
        match answer {
            HandoffAnswer::Record { h, role } => json(200, &RecordAnswer { handoff: Handoff::of(h, role) }),
            HandoffAnswer::Created { h, role, machine_token, new } => json(
                if new { 201 } else { 200 },
                &Created { handoff: Handoff::of(h, role), machine_token: machine_token.map(Cow::Borrowed) },
            ),
            HandoffAnswer::Changed { h, role, effect } => {
                let head = Changed { handoff: Handoff::of(h, role), beside: beside(&h.record.id, effect) };
                match document_of(&answer) {
                    Some(document) => json_with_package(200, &head, &document),
                    None => json(200, &head),
                }
            }
            HandoffAnswer::Preview { h, role, turn, latest, briefing } => {
                let head = Preview { handoff: Handoff::of(h, role), turn, briefing, latest: LatestHead::of(latest) };
                json_with_package(200, &head, &latest.document.of(&latest.package))
            }
            HandoffAnswer::Turns { h, role, turns, next_before } => {
                json(200, &Turns { turns: Cow::Borrowed(turns), next_before, handoff: Handoff::of(h, role) })
            }
            HandoffAnswer::Work { h, role } => {
                json(200, &WorkAnswer { handoff: Handoff::of(h, role), work: WorkRecord::of(&h.record.id, &h.work) })
            }
            HandoffAnswer::Markdown(text) => Rendered {
                status: 200,
                content_type: "text/markdown; charset=utf-8",
                body: text.to_string(),
                replayed: false,
            },
            HandoffAnswer::Text(text) => Rendered {
                status: 200,
                content_type: "text/plain; charset=utf-8",
                body: text.to_string(),
                replayed: false,
            },
            HandoffAnswer::Refused { refusal, handoff, current_package } => {
                refused(refusal, handoff.map(|(h, role)| Handoff::of(h, role)), current_package)
            }
            HandoffAnswer::Floor => json(200, &Ok_ { ok: true }),
            HandoffAnswer::Armed(fault) => json(200, &Armed { armed: fault }),
            HandoffAnswer::Storage(facts) => json(200, facts),
            HandoffAnswer::Erased => Rendered { status: 204, content_type: JSON, body: String::new(), replayed: false },
            HandoffAnswer::TooManyOpen(crowded) => too_many_open(crowded),
            HandoffAnswer::TimelineTaken { turn, next } => json(200, &TimelineTaken { turn, next }),
            HandoffAnswer::TimelineRefused { refusal, turn, next } => {
                let body = ErrorAnswer {
                    error: ErrorBody { code: refusal.code, message: &refusal.message },
                    handoff: None,
                    package_hash: None,
                    package_version: None,
                    open: None,
                    cap: None,
                    turn: Some(turn),
                    next,
                };
                json(status(refusal.code), &body)
            }
            HandoffAnswer::Timeline { turn, events, next, dropped } => {
                json(200, &Timeline { turn, events: Cow::Borrowed(events), next, dropped })
            }
        }
    }

    fn without_package(&self, answer: HandoffAnswer<'_>) -> Option<String> {
        let document = document_of(&answer)?;
        let whole = self.render(answer).body;
        let head = whole.strip_suffix(&package_member(&document))?;
        Some(format!("{head}}}"))
    }

    fn with_package(&self, slim: &str, document: &Document) -> Option<String> {
        let head = slim.strip_suffix('}')?;
        Some(format!("{head}{}", package_member(document)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::handoff::{self as core_handoff, apply, Change};
    use handoff_core::package::PackageRequest;
    use handoff_core::role::Role;
    use handoff_core::rows::{Admission, Page};
    use handoff_core::turn::Record;
    use handoff_core::work::{self, WorkInput};

    #[test]
    fn every_401_asks_for_a_bearer_token_a_rate_limit_says_when_to_retry_and_nothing_else_carries_either() {
        for code in [Code::AuthRequired, Code::AuthInvalid] {
            assert_eq!(refusal_headers(code), [("WWW-Authenticate", "Bearer".to_string())], "{code:?}");
        }
        assert_eq!(
            refusal_headers(Code::OwnerRateLimited),
            [("Retry-After", handoff_core::limits::CREATES_PER_OWNER_PERIOD_S.to_string())]
        );
        for code in [Code::AuthForbidden, Code::StoreUnavailable, Code::RequestInvalid, Code::OwnerTooManyOpen] {
            assert!(refusal_headers(code).is_empty(), "{code:?}");
        }
    }

    #[test]
    fn a_405_names_the_methods_the_route_takes() {
        let (rendered, headers) = method_not_allowed("PUT", &["GET", "POST"]);
        assert_eq!(rendered.status, 405);
        assert!(
            rendered.body.contains("request.method_not_allowed") && rendered.body.contains("PUT"),
            "{}",
            rendered.body
        );
        assert_eq!(headers, [("Allow", "GET, POST".to_string())]);
    }

    #[test]
    fn the_index_answers_201_for_what_it_creates_204_for_what_it_removes_a_refusal_its_status_and_200_for_the_rest() {
        let address = owner::Address::Push {
            endpoint: "https://push.example/x".into(),
            origin: "https://push.example".into(),
            p256dh: "k".into(),
            auth: "a".into(),
            console: "c".into(),
            device: None,
        };
        let entry = owner::StoredReceiver {
            id: "ps_1".into(),
            events: vec![handoff_core::notice::Notice::Done],
            created_at: 0,
            dropped: 3,
            address,
        };
        let hook = owner::StoredReceiver {
            address: owner::Address::Webhook { url: "https://h.example/".into(), secret: "whsec_x".into() },
            id: "wh_1".into(),
            dropped: 0,
            ..entry.clone()
        };
        let page = Page { handoffs: vec![], cursor: None };
        let listed_push = r#"{"id":"ps_1","origin":"https://push.example","events":["done"],"created_at":"1970-01-01T00:00:00.000Z","dropped":3,"device":null}"#;
        let listed_hook =
            r#"{"id":"wh_1","url":"https://h.example/","events":["done"],"created_at":"1970-01-01T00:00:00.000Z"}"#;
        let unavailable = refusal(&Refusal::unavailable()).body;
        for (answer, status, body) in [
            (owner::IndexAnswer::Done, 200, r#"{"ok":true}"#.to_string()),
            (
                owner::IndexAnswer::Page { page: page.clone(), if_none_match: None },
                200,
                r#"{"handoffs":[],"cursor":null}"#.to_string(),
            ),
            (
                owner::IndexAnswer::Page { page: page.clone(), if_none_match: Some("\"other\"".into()) },
                200,
                r#"{"handoffs":[],"cursor":null}"#.to_string(),
            ),
            (owner::IndexAnswer::Admission(Admission::Yes), 200, r#"{"admitted":"yes"}"#.to_string()),
            (
                owner::IndexAnswer::Created(entry.clone()),
                201,
                format!(r#"{{"subscription":{}}}"#, listed_push.replace(r#""dropped":3"#, r#""dropped":3"#)),
            ),
            (
                owner::IndexAnswer::Created(hook.clone()),
                201,
                format!(r#"{{"webhook":{listed_hook},"secret":"whsec_x"}}"#),
            ),
            (
                owner::IndexAnswer::Receivers { of: Receiver::Push, entries: vec![entry.clone()] },
                200,
                format!(r#"{{"subscriptions":[{listed_push}]}}"#),
            ),
            (
                owner::IndexAnswer::Receivers { of: Receiver::Webhook, entries: vec![hook.clone()] },
                200,
                format!(r#"{{"webhooks":[{listed_hook}]}}"#),
            ),
            (
                owner::IndexAnswer::Deliveries { deliveries: vec![], dropped: 2 },
                200,
                r#"{"deliveries":[],"dropped":2}"#.to_string(),
            ),
            (owner::IndexAnswer::Removed, 204, String::new()),
            (
                owner::IndexAnswer::Refused(Refusal::new(Code::WebhookNotFound, "no such webhook")),
                404,
                r#"{"error":{"code":"webhook.not_found","message":"no such webhook"}}"#.to_string(),
            ),
            (owner::IndexAnswer::Unavailable("a row: eof".into()), 503, unavailable),
            (owner::IndexAnswer::Refusing(true), 200, r#"{"refusing":true}"#.to_string()),
            (owner::IndexAnswer::Holding(false), 200, r#"{"holding":false}"#.to_string()),
            (owner::IndexAnswer::StorageBytes(4096), 200, r#"{"bytes":4096}"#.to_string()),
        ] {
            let (r, headers) = index(&answer);
            assert_eq!((r.status, r.body.as_str()), (status, body.as_str()), "{answer:?}");
            let paged = matches!(answer, owner::IndexAnswer::Page { .. });
            assert_eq!(headers.iter().any(|(name, _)| *name == "ETag"), paged, "{answer:?}");
            assert!(!r.body.contains("a row: eof"), "the cause of a 503 is the log's, not the client's");
        }
    }

    #[test]
    fn a_device_signing_in_gets_its_cookie_and_token_uncached_a_refresh_no_cookie_and_the_list_marks_the_current_one() {
        use handoff_core::owner::devices::{Device, Granted};
        let device = Device { id: "dv_1".into(), name: "phone".into(), created_at: 0, last_seen_at: 5 };
        let granted = Granted { access_token: "t".into(), expires_in: 300, cookie: Some("handoff_device=x".into()) };
        let (r, headers) = index(&owner::IndexAnswer::SignedIn { device: device.clone(), granted: granted.clone() });
        assert_eq!(r.status, 201);
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!((body["access_token"].as_str(), body["expires_in"].as_i64()), (Some("t"), Some(300)));
        assert_eq!(body["device"]["current"], true);
        assert!(headers.contains(&("Set-Cookie", "handoff_device=x".to_string())), "{headers:?}");
        assert!(headers.contains(&("Cache-Control", "no-store".to_string())), "{headers:?}");
        let refreshed = Granted { cookie: None, ..granted };
        let (r, headers) = index(&owner::IndexAnswer::Refreshed { device: device.clone(), granted: refreshed });
        assert_eq!(r.status, 200);
        assert!(!headers.iter().any(|(name, _)| *name == "Set-Cookie"), "a refresh sets no cookie");
        let other = Device { id: "dv_2".into(), ..device.clone() };
        let (r, _) = index(&owner::IndexAnswer::Devices { devices: vec![device, other], current: Some("dv_2".into()) });
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let current: Vec<bool> = body["devices"].as_array().unwrap().iter().map(|d| d["current"] == true).collect();
        assert_eq!(current, [false, true]);
        assert_eq!(body["devices"][0]["last_seen_at"], "1970-01-01T00:00:00.005Z");
        let (r, headers) = index(&owner::IndexAnswer::Refused(Refusal::new(Code::DeviceRateLimited, "later")));
        assert_eq!((r.status, headers), (429, vec![("Retry-After", "60".to_string())]));
    }

    #[test]
    fn a_page_the_client_holds_is_304_with_no_body_and_its_etag_and_every_page_asks_caches_to_check() {
        let page = Page { handoffs: vec![], cursor: None };
        let (fresh, headers) = index(&owner::IndexAnswer::Page { page: page.clone(), if_none_match: None });
        let tag = headers.iter().find(|(name, _)| *name == "ETag").map(|(_, v)| v.clone()).unwrap();
        assert_eq!(tag, crate::conditional::etag(fresh.body.as_bytes()));
        assert!(headers.contains(&("Cache-Control", "private, no-cache".to_string())), "{headers:?}");
        let (held, again) = index(&owner::IndexAnswer::Page { page, if_none_match: Some(tag.clone()) });
        assert_eq!((held.status, held.body.as_str()), (304, ""));
        assert_eq!(again, headers);
    }

    #[test]
    fn the_one_503_says_to_try_again_and_names_nothing_inside() {
        let r = refusal(&Refusal::unavailable());
        assert_eq!(r.status, 503);
        assert_eq!(
            r.body,
            r#"{"error":{"code":"store.unavailable","message":"the hand-off store is unavailable; try again"}}"#
        );
    }

    fn compiled() -> (core_handoff::Handoff, Effect) {
        let h = core_handoff::Handoff::create(Record::create(
            "ho_1".into(),
            "alice".into(),
            "s1".into(),
            "m1".into(),
            "large".into(),
            0,
        ));
        let work = WorkInput {
            title: "t".into(),
            goal: "g".into(),
            task_type: None,
            priority: None,
            constraints: vec![],
            acceptance_criteria: vec![],
        };
        let h = apply(&h, &Change::Work { command: work::Command::SetWork(work) }, Role::Owner, 1).unwrap().next;
        let request = PackageRequest {
            objective: "o".into(),
            purpose: "p".into(),
            runtime: "codex".into(),
            note: None,
            model: None,
        };
        let out = apply(&h, &Change::Compile { request, dry_run: false }, Role::Owner, 2).unwrap();
        (out.next, out.effect)
    }

    #[test]
    fn an_answer_kept_without_its_package_is_the_whole_answer_once_the_package_is_put_back() {
        let (h, effect) = compiled();
        let answer = HandoffAnswer::Changed { h: &h, role: Role::Owner, effect: &effect };
        let whole = Json.render(answer).body;
        let slim = Json.without_package(answer).expect("a compile answer has a package");
        let slim_value: serde_json::Value = serde_json::from_str(&slim).unwrap();
        assert!(slim_value.get("package").is_none() && slim_value["package_hash"].is_string(), "{slim}");
        let Effect::Compiled(c) = &effect else { panic!("{effect:?}") };
        // Put back as a loaded package's is: its document written again, the same bytes.
        let loaded = handoff_core::package::Document::of(&c.package);
        assert_eq!(Json.with_package(&slim, &loaded).as_deref(), Some(whole.as_str()), "byte for byte the first");
        assert_eq!(
            Json.without_package(HandoffAnswer::Record { h: &h, role: Role::Owner }),
            None,
            "a record answer has no package"
        );
    }

    /// A turn's answer carries its prompt, so the remembered answers of maximal prompts are
    /// the largest a key keeps (no package to leave out): the 2 MiB of remembered answers still
    /// hold dozens of them (62 of 33,350 bytes with every byte of the longest prompt escaped as two).
    #[test]
    fn the_largest_turn_answer_leaves_room_for_dozens_of_remembered_answers() {
        use handoff_core::limits::{IDEMPOTENCY_BYTES_PER_HANDOFF_MAX, PROMPT_BYTES_MAX};
        let (h, _) = compiled();
        let h = apply(&h, &report_done(), Role::Machine, 3).unwrap().next;
        let open = Change::Turn {
            command: handoff_core::turn::Command::OpenTurn { after: 1, prompt: Some("\"".repeat(PROMPT_BYTES_MAX)) },
            unmet: None,
            usage: None,
            package: None,
        };
        let out = apply(&h, &open, Role::Owner, 4).unwrap();
        let answer = HandoffAnswer::Changed { h: &out.next, role: Role::Owner, effect: &out.effect };
        let r = handoff_core::idempotency::remember(&"f".repeat(64), 200, &Json.render(answer).body, || {
            Json.without_package(answer)
        });
        assert!(r.body.len() > 2 * PROMPT_BYTES_MAX, "the whole prompt, escaped, is kept: {}", r.body.len());
        let kept = IDEMPOTENCY_BYTES_PER_HANDOFF_MAX / r.bytes();
        assert!(
            (32..=64).contains(&kept),
            "{kept} maximal turn answers fit the remembered bytes ({} bytes each)",
            r.bytes()
        );
    }

    fn report_done() -> Change {
        let command = handoff_core::turn::Command::Report {
            turn: 1,
            status: handoff_core::turn::ReportStatus::Done,
            summary: None,
            question: None,
            runtime: None,
            permission_mode: None,
            reply: None,
            sync_mode: None,
        };
        Change::Turn { command, unmet: None, usage: None, package: None }
    }

    #[test]
    fn a_stale_refusal_carries_the_current_package_and_a_plain_one_only_its_error() {
        let (h, _) = compiled();
        let offer = h.ledger.current.as_ref().unwrap();
        let stale = Refusal::new(handoff_core::error::Code::PackageStale, "no longer current");
        let r = Json.render(HandoffAnswer::Refused {
            refusal: &stale,
            handoff: Some((&h, Role::Machine)),
            current_package: Some((offer.version, &offer.hash)),
        });
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            (r.status, body["package_hash"].as_str(), body["package_version"].as_u64()),
            (409, Some(offer.hash.as_str()), Some(1))
        );
        assert_eq!(body["handoff"]["actions"], serde_json::json!(["report", "accept", "reject"]));
        let plain = refusal(&Refusal::new(handoff_core::error::Code::HandoffNotFound, "no such hand-off"));
        assert_eq!(
            (plain.status, plain.body.as_str()),
            (404, r#"{"error":{"code":"handoff.not_found","message":"no such hand-off"}}"#)
        );
    }

    #[test]
    fn a_timeline_frame_is_the_turn_and_its_events_in_order_within_its_cap() {
        use handoff_core::timeline::{Event, Kind};
        let event = |seq: u64, n: usize| Event {
            text: Some("x".repeat(n)),
            at: Some(handoff_core::time::Timestamp::from_ms(0)),
            ..Event::of(seq, Kind::Message)
        };
        let frames = timeline_frames(2, &[event(1, 3), event(2, 3)]);
        assert_eq!(frames.len(), 1);
        let v: serde_json::Value = serde_json::from_str(&frames[0].1).unwrap();
        assert_eq!(
            (frames[0].0, &v["timeline"]["turn"], v["timeline"]["events"].as_array().unwrap().len()),
            (2, &serde_json::json!(2), 2)
        );
        let big: Vec<Event> = (1..=9).map(|seq| event(seq, 16 * 1024)).collect();
        let frames = timeline_frames(2, &big);
        assert!(frames.len() > 1 && frames.iter().all(|(_, f)| f.len() <= WATCH_EVENTS_FRAME_BYTES_MAX));
        assert_eq!(frames.last().unwrap().0, 9, "every event, the last frame ending at the last");
        assert!(timeline_frames(2, &[]).is_empty());
    }
}
