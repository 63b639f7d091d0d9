//! The sender: one attempt of a delivery, to a webhook (signed, Standard Webhooks) or to a push
//! subscription (encrypted, RFC 8291, with a VAPID token, RFC 8292: the runtime's WebCrypto makes
//! the ECDH, seals and signs; `handoff-notify` derives the keys and frames the record), and the
//! `POST` both make with the runtime's own `fetch`: the status, or a [`PostFailure`] when no
//! answer came within `WEBHOOK_TIMEOUT_MS` or the request could not be made. A redirect is an
//! answer, not another place to send the body. What is sent and when is the core's
//! (`handoff_core::owner`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::store::Due;
use crate::clock::now_ms;
use handoff_api::error::ApiError;
use handoff_api::notifications::StoredSubscription;
use handoff_core::limits::WEBHOOK_TIMEOUT_MS;
use handoff_core::owner::receiver::Receiver;
use handoff_notify::limits::VAPID_TOKEN_TTL_S;
use handoff_notify::push::{self, Event, Sender, Subscription};
use handoff_notify::webhook::{self, MessageId, WebhookSecret};
use handoff_notify::{ece, vapid, Endpoint, Environment, SubscriptionKeys};
use js_sys::Reflect;
use std::cell::Cell;
use std::time::Duration;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::{wasm_bindgen_futures, web_sys, Delay};

thread_local! {
    /// Set where test hooks are on: a test or a fuzzer may register any `https` host, and a
    /// test run sends nothing beyond this machine.
    static LOOPBACK_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Sends notifications to `127.0.0.1` only, from now on in this isolate (a test Worker's).
pub fn loopback_only(on: bool) {
    LOOPBACK_ONLY.with(|c| c.set(on));
}

/// `http(s)://127.0.0.1[:port]/…`.
fn is_loopback(url: &str) -> bool {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or_default();
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    host == "127.0.0.1" || host.starts_with("127.0.0.1:")
}

/// Why a notification's `POST` has no status; each is retried as a missing answer is.
#[derive(Debug)]
pub enum PostFailure {
    /// A test Worker sends to 127.0.0.1 only.
    NotLoopback,
    /// The request could not be built or `fetch` not called (its reason).
    Request(String),
    /// `fetch` was refused: no connection, a TLS failure (its reason).
    Refused(String),
    /// No answer within `WEBHOOK_TIMEOUT_MS`.
    TimedOut,
}

impl std::fmt::Display for PostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostFailure::NotLoopback => write!(f, "not sent: a test Worker sends to 127.0.0.1 only"),
            PostFailure::Request(why) => write!(f, "the request could not be made: {why}"),
            PostFailure::Refused(why) => write!(f, "the POST failed: {why}"),
            PostFailure::TimedOut => write!(f, "no answer within {WEBHOOK_TIMEOUT_MS} ms"),
        }
    }
}

/// Why a notification got no status: something stored this build cannot use, a step of its
/// encryption or signature the runtime refused, or its `POST`.
#[derive(Debug)]
pub enum NotSent {
    Unreadable(&'static str),
    Refused(&'static str, String),
    Post(PostFailure),
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSent::Unreadable(what) => write!(f, "its stored {what} is unreadable"),
            NotSent::Refused(step, why) => write!(f, "{step} was refused: {why}"),
            NotSent::Post(failure) => failure.fmt(f),
        }
    }
}

impl From<PostFailure> for NotSent {
    fn from(failure: PostFailure) -> NotSent {
        NotSent::Post(failure)
    }
}

/// `what`'s cause, as a `NotSent`.
pub fn refused(step: &'static str) -> impl FnOnce(JsValue) -> NotSent {
    move |e| NotSent::Refused(step, reason(&e))
}

fn reason(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())))
        .unwrap_or_else(|| format!("{e:?}"))
}

pub async fn post(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, PostFailure> {
    if LOOPBACK_ONLY.with(Cell::get) && !is_loopback(url) {
        return Err(PostFailure::NotLoopback);
    }
    let request = request(url, headers, body).map_err(|e| PostFailure::Request(reason(&e)))?;
    let fetch: js_sys::Function = Reflect::get(&js_sys::global(), &JsValue::from_str("fetch"))
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| PostFailure::Request("no global fetch".into()))?;
    let answer: js_sys::Promise = fetch
        .call1(&JsValue::UNDEFINED, &request)
        .map_err(|e| PostFailure::Request(reason(&e)))?
        .dyn_into()
        .map_err(|_| PostFailure::Request("fetch returned no promise".into()))?;
    let answer = Box::pin(JsFuture::from(answer));
    let timeout = Box::pin(Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS as u64)));
    match futures::future::select(answer, timeout).await {
        futures::future::Either::Left((Ok(response), _)) => response
            .dyn_into::<web_sys::Response>()
            .map(|r| r.status())
            .map_err(|_| PostFailure::Refused("fetch answered no Response".into())),
        futures::future::Either::Left((Err(e), _)) => Err(PostFailure::Refused(reason(&e))),
        futures::future::Either::Right(_) => Err(PostFailure::TimedOut),
    }
}

fn request(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<web_sys::Request, JsValue> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    let set = web_sys::Headers::new()?;
    for (name, value) in headers {
        set.set(name, value)?;
    }
    init.set_headers(&set);
    init.set_body(&js_sys::Uint8Array::from(body));
    Reflect::set(&init, &JsValue::from_str("redirect"), &JsValue::from_str("manual"))?;
    web_sys::Request::new_with_str_and_init(url, &init)
}

/// The message retry window is the TTL the push service is told.
const _: () = assert!(handoff_core::limits::PUSH_RETRY_WINDOW_MS == handoff_notify::limits::PUSH_TTL_S as i64 * 1000);

/// One attempt of `d`, a delivery of `kind` (`sender`: who push messages are from, where push
/// is configured): the receiver's status, or why there is none.
pub async fn attempt(d: &Due, kind: Receiver, sender: Option<&Sender>) -> Result<u16, NotSent> {
    match (kind, sender) {
        (Receiver::Webhook, _) => to_webhook(d).await,
        (Receiver::Push, Some(sender)) => to_push(d, sender).await,
        (Receiver::Push, None) => Err(NotSent::Unreadable("push configuration")),
    }
}

/// One signed attempt: the receiver's status, or why there is none.
async fn to_webhook(d: &Due) -> Result<u16, NotSent> {
    let (Some(url), Some(secret)) = (&d.url, &d.secret) else {
        return Err(NotSent::Unreadable("the webhook's address"));
    };
    let secret = WebhookSecret::parse(secret).map_err(|_| NotSent::Unreadable("webhook secret"))?;
    let id = MessageId::parse(&d.id).ok_or(NotSent::Unreadable("message id"))?;
    let signed = webhook::sign(&secret, &id, now_ms(), d.body.as_bytes());
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(signed.pairs());
    Ok(post(url, &headers, d.body.as_bytes()).await?)
}

/// The curve check of a subscription's key, which the api's reader leaves to the runtime: a
/// point off P-256 is refused as the reader refuses any other key (400 `request.invalid`).
pub async fn check_curve(s: &StoredSubscription) -> Result<(), ApiError> {
    let keys = SubscriptionKeys::parse(&s.p256dh, &s.auth).map_err(handoff_api::notifications::refuse_keys)?;
    if crate::webcrypto::is_p256_point(&keys.p256dh_point()).await {
        Ok(())
    } else {
        Err(handoff_api::notifications::refuse_keys(SubscriptionKeys::not_on_curve()))
    }
}

/// One push: the push service's status, or why there is none.
async fn to_push(d: &Due, sender: &Sender) -> Result<u16, NotSent> {
    let (Some(endpoint), Some(p256dh), Some(auth)) = (&d.endpoint, &d.p256dh, &d.auth) else {
        return Err(NotSent::Unreadable("the subscription's address"));
    };
    // Checked when it was registered, under this environment's rule; `Local` admits both forms.
    let endpoint =
        Endpoint::parse("endpoint", endpoint, Environment::Local).map_err(|_| NotSent::Unreadable("endpoint"))?;
    let keys = SubscriptionKeys::parse(p256dh, auth).map_err(|_| NotSent::Unreadable("subscription keys"))?;
    let event =
        Event::ALL.into_iter().find(|e| e.message_type() == d.message_type).ok_or(NotSent::Unreadable("event type"))?;
    let to = Subscription { endpoint, keys };
    // Everything of RFC 8291 and 8292 but the ECDH, the AES-128-GCM and the ECDSA, which the runtime does.
    let (as_public, secret) =
        crate::webcrypto::ecdh_p256(&to.keys.p256dh_point()).await.map_err(refused("the message's ECDH"))?;
    let salt = crate::webcrypto::bytes::<{ ece::SALT_BYTES }>().map_err(refused("drawing the message's salt"))?;
    let exchanged = ece::Exchanged { as_public, secret, salt };
    let unsealed = ece::prepare_with(d.body.as_bytes(), 0, &to.keys, &exchanged)
        .map_err(|e| NotSent::Refused("deriving the message's keys", e.to_string()))?;
    let sealed = crate::webcrypto::seal_aes128gcm(unsealed.cek(), unsealed.nonce(), unsealed.record())
        .await
        .map_err(refused("sealing the message"))?;
    let body = unsealed.finish(&sealed);
    let url = to.endpoint.url();
    let input = vapid::signing_input(&to.endpoint, &sender.subject, now_ms(), VAPID_TOKEN_TTL_S);
    let (key, public_key) =
        crate::webcrypto::vapid_key(&sender.key.pkcs8()).await.map_err(refused("importing the VAPID key"))?;
    let signature =
        crate::webcrypto::sign_es256(&key, input.as_bytes()).await.map_err(refused("signing the VAPID token"))?;
    let request_headers =
        push::headers_signed(vapid::authorization_signed(&input, &signature, &public_key), event, &d.handoff);
    let headers: Vec<(&str, &str)> = request_headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    Ok(post(&url, &headers, &body).await?)
}
