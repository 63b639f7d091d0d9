//! A browser vendor's push service: hands out subscriptions (an endpoint on this server and
//! the keys a browser would make), and for each push message checks its VAPID token against
//! the application server's public key and decrypts its body with the subscription's private
//! key and auth secret. By default it answers 201 Created, as RFC 8030 does; 403 to a token
//! that does not verify, 400 without `TTL`, 404 to an unknown subscription; and
//! [`PushService::answer_next`] scripts 404, 410 or 5xx as an expired subscription or an
//! outage would.

use super::http::{Log, Received, Reply, Script, Server};
use crate::rng::Rng;
use handoff_notify::ece::DecryptError;
use handoff_notify::vapid::{self, VapidClaims, VapidRejection};
use handoff_notify::UserAgent;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where subscriptions' endpoints live on this server: `/push/<n>`.
pub const PUSH_PATH_PREFIX: &str = "/push/";

/// What a browser's `PushSubscription.toJSON()` gives the console, for one subscription here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSubscription {
    pub endpoint: String,
    pub p256dh: String,
    pub auth: String,
}

impl TestSubscription {
    /// The JSON a console posts to `POST /v1/push/subscriptions`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}})
    }
}

/// One push message as received, and what the service made of it.
#[derive(Debug, Clone)]
pub struct PushMessage {
    pub path: String,
    pub ttl: Option<String>,
    pub urgency: Option<String>,
    pub topic: Option<String>,
    pub content_encoding: Option<String>,
    /// The token's claims, or why it was refused.
    pub vapid: Result<VapidClaims, VapidRejection>,
    /// The decrypted body, or why it did not decrypt (`None`: no such subscription).
    pub plaintext: Option<Result<Vec<u8>, DecryptError>>,
    pub status: u16,
    /// When it arrived.
    pub at: Instant,
}

impl PushMessage {
    /// The decrypted body as JSON (`Null` when it did not decrypt or is not JSON).
    pub fn json(&self) -> serde_json::Value {
        match &self.plaintext {
            Some(Ok(bytes)) => serde_json::from_slice(bytes).unwrap_or(serde_json::Value::Null),
            _ => serde_json::Value::Null,
        }
    }
}

struct State {
    browsers: HashMap<String, UserAgent>,
    script: Script,
    rng: Rng,
}

pub struct PushService {
    server: Server,
    messages: Arc<Log<PushMessage>>,
    state: Arc<Mutex<State>>,
}

impl PushService {
    /// Starts a push service that accepts tokens verified by `vapid_public_key` (the Worker's
    /// `GET /v1/push/key`).
    pub fn start(vapid_public_key: &str) -> PushService {
        let key = vapid_public_key.to_string();
        let messages = Arc::new(Log::new());
        let state = Arc::new(Mutex::new(State {
            browsers: HashMap::new(),
            script: Script::default(),
            rng: Rng::new(Rng::fresh_seed()),
        }));
        let (log, shared) = (Arc::clone(&messages), Arc::clone(&state));
        let port = Arc::new(Mutex::new(0u16));
        let origin_port = Arc::clone(&port);
        let server = Server::start(move |received: Received| {
            let origin = format!("http://127.0.0.1:{}", *origin_port.lock().unwrap());
            let message = receive(&received, &key, &origin, &mut shared.lock().unwrap());
            let status = message.status;
            log.add(message);
            (Reply::Status(status), vec![("location", format!("{}/message", received.path))])
        });
        *port.lock().unwrap() = server.port;
        PushService { server, messages, state }
    }

    /// A new subscription, as a browser would make it: fresh keys, an endpoint on this server.
    pub fn subscribe(&self) -> TestSubscription {
        let mut state = self.state.lock().unwrap();
        let browser = loop {
            let mut key = [0u8; 32];
            let mut auth = [0u8; 16];
            key.iter_mut().chain(auth.iter_mut()).for_each(|b| *b = state.rng.below(256) as u8);
            if let Ok(browser) = UserAgent::from_bytes(&key, auth) {
                break browser;
            }
        };
        let path = format!("{PUSH_PATH_PREFIX}{}", state.browsers.len() + 1);
        let keys = browser.subscription_keys();
        state.browsers.insert(path.clone(), browser);
        TestSubscription {
            endpoint: format!("http://127.0.0.1:{}{path}", self.server.port),
            p256dh: keys.p256dh(),
            auth: keys.auth(),
        }
    }

    /// The next `times` messages that would be accepted are answered `status` instead (404 or
    /// 410: the subscription is gone; 5xx: an outage).
    pub fn answer_next(&self, times: usize, status: u16) {
        self.state.lock().unwrap().script.push(Reply::Status(status), times);
    }

    /// Every message so far, in the order received.
    pub fn messages(&self) -> Vec<PushMessage> {
        self.messages.all()
    }

    /// The messages once there are at least `n`, or those there are after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<PushMessage> {
        self.messages.wait_for(n, timeout)
    }
}

fn receive(received: &Received, key: &str, origin: &str, state: &mut State) -> PushMessage {
    let vapid = match received.header("authorization") {
        Some(header) => vapid::verify(header, Some(key), origin, crate::now_s() * 1000),
        None => Err(VapidRejection::Header),
    };
    let browser = state.browsers.get(&received.path);
    let plaintext = browser.map(|browser| browser.decrypt(&received.body));
    let status = if received.method != "POST" {
        405
    } else if browser.is_none() {
        404
    } else if vapid.is_err() {
        403
    } else if received.header("ttl").is_none_or(|ttl| ttl.parse::<u32>().is_err()) {
        400
    } else {
        match state.script.next_or(Reply::Status(201)) {
            Reply::Status(status) => status,
            Reply::Hang(_) => 201,
        }
    };
    PushMessage {
        path: received.path.clone(),
        ttl: received.header("ttl").map(str::to_string),
        urgency: received.header("urgency").map(str::to_string),
        topic: received.header("topic").map(str::to_string),
        content_encoding: received.header("content-encoding").map(str::to_string),
        vapid,
        plaintext,
        status,
        at: received.at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_notify::push::{self, Event, Sender, Subscription};
    use handoff_notify::{Endpoint, Environment, MessageEntropy, SubscriptionKeys, VapidKey, VapidSubject};

    fn sender(byte: u8) -> Sender {
        Sender {
            key: VapidKey::from_bytes(&[byte; 32]).unwrap(),
            subject: VapidSubject::parse("mailto:ops@example.com").unwrap(),
        }
    }

    /// Sends one push as the Worker will; answers the status.
    fn send(to: &TestSubscription, from: &Sender, plaintext: &[u8], entropy_byte: u8) -> u16 {
        let subscription = Subscription {
            endpoint: Endpoint::parse("endpoint", &to.endpoint, Environment::Local).unwrap(),
            keys: SubscriptionKeys::parse(&to.p256dh, &to.auth).unwrap(),
        };
        let entropy = MessageEntropy::from_bytes(&[entropy_byte; MessageEntropy::BYTES]).unwrap();
        let message =
            push::request(&subscription, from, Event::NeedsYou, "ho_1", plaintext, &entropy, crate::now_s() * 1000)
                .unwrap();
        post(&message.endpoint, &message.headers, message.body)
    }

    fn post(url: &str, headers: &[(&str, String)], body: Vec<u8>) -> u16 {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = ureq::http::Request::builder().method("POST").uri(url);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        agent.run(request.body(body).unwrap()).unwrap().status().as_u16()
    }

    #[test]
    fn decrypts_each_message_and_checks_its_vapid_token() {
        let from = sender(1);
        let service = PushService::start(from.key.public_key());
        let (first, second) = (service.subscribe(), service.subscribe());
        assert_ne!(first.endpoint, second.endpoint);
        assert_eq!(send(&first, &from, br#"{"type":"handoff.needs_you"}"#, 3), 201);
        assert_eq!(send(&second, &from, b"{}", 4), 201);
        let got = service.wait_for(2, Duration::from_secs(5));
        assert_eq!(got[0].json()["type"], "handoff.needs_you");
        assert_eq!(got[1].plaintext, Some(Ok(b"{}".to_vec())));
        let claims = got[0].vapid.as_ref().unwrap();
        assert_eq!(claims.aud, format!("http://127.0.0.1:{}", service.server.port));
        assert_eq!(claims.sub.as_deref(), Some("mailto:ops@example.com"));
        assert_eq!(got[0].urgency.as_deref(), Some("high"));
        assert_eq!(got[0].content_encoding.as_deref(), Some("aes128gcm"));
        assert_eq!(got[0].topic.as_deref().map(str::len), Some(32));
        assert!(got[0].ttl.is_some());
    }

    #[test]
    fn refuses_a_token_of_another_key_with_403() {
        let service = PushService::start(sender(1).key.public_key());
        let to = service.subscribe();
        assert_eq!(send(&to, &sender(2), b"{}", 3), 403);
        let got = service.wait_for(1, Duration::from_secs(5));
        assert_eq!(got[0].vapid, Err(VapidRejection::Key));
        assert_eq!(got[0].plaintext, Some(Ok(b"{}".to_vec())), "the body is still for this subscription");
    }

    #[test]
    fn a_body_for_other_keys_does_not_decrypt_and_an_unknown_endpoint_is_404() {
        let from = sender(1);
        let service = PushService::start(from.key.public_key());
        let mut to = service.subscribe();
        let other = service.subscribe();
        to.p256dh = other.p256dh;
        to.auth = other.auth;
        assert_eq!(send(&to, &from, b"{}", 3), 201);
        let mut unknown = service.subscribe();
        unknown.endpoint = unknown.endpoint.replace("/push/", "/push/9");
        assert_eq!(send(&unknown, &from, b"{}", 4), 404);
        let got = service.wait_for(2, Duration::from_secs(5));
        assert_eq!(got[0].plaintext, Some(Err(DecryptError::Tag)));
        assert_eq!(got[1].plaintext, None);
    }

    #[test]
    fn answers_the_scripted_status_then_201_again() {
        let from = sender(1);
        let service = PushService::start(from.key.public_key());
        let to = service.subscribe();
        service.answer_next(1, 410);
        service.answer_next(1, 503);
        let statuses: Vec<_> = (0..3).map(|i| send(&to, &from, b"{}", 3 + i)).collect();
        assert_eq!(statuses, [410, 503, 201]);
    }

    #[test]
    fn a_message_without_ttl_is_refused_with_400() {
        let from = sender(1);
        let service = PushService::start(from.key.public_key());
        let to = service.subscribe();
        let endpoint = Endpoint::parse("endpoint", &to.endpoint, Environment::Local).unwrap();
        let authorization = from.key.authorization(&endpoint, &from.subject, crate::now_s() * 1000);
        assert_eq!(post(&to.endpoint, &[("authorization", authorization)], Vec::new()), 400);
    }
}
