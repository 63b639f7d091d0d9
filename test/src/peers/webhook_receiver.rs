//! A chat app's webhook receiver: records every delivery and verifies its Standard Webhooks
//! signature with the secret. By default it answers 204; [`WebhookReceiver::fail_next`] makes
//! the next deliveries answer another status or hang, as a flaky or dead receiver would.
//!
//! The signature check is written here from the specification, apart from `handoff-notify`'s
//! signer, so that a mistake in one is not repeated in the other: the secret is `whsec_` and
//! standard base64; the signed content `{webhook-id}.{webhook-timestamp}.{body}`; the header a
//! space-separated list of `v1,<base64 HMAC-SHA256>`, any of which may match.

use super::http::{Log, Received, Reply, Script, Server};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path deliveries are posted to.
pub const WEBHOOK_PATH: &str = "/hooks/handoff";

/// One delivery as received.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    /// `webhook-id`: the same on every attempt of one event.
    pub id: Option<String>,
    pub timestamp: Option<String>,
    pub signature: Option<String>,
    pub body: Vec<u8>,
    /// The three headers are there and one signature matches the secret.
    pub verified: bool,
    /// How this attempt was answered.
    pub reply: Reply,
    /// When it arrived: the gaps between attempts are the sender's backoff.
    pub at: Instant,
}

impl Delivery {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

pub struct WebhookReceiver {
    server: Server,
    deliveries: Arc<Log<Delivery>>,
    script: Arc<Mutex<Script>>,
    secret: Arc<Mutex<(String, Vec<u8>)>>,
}

impl WebhookReceiver {
    /// Starts a receiver that verifies with `secret` (`whsec_…`, as the Worker showed it).
    pub fn start(secret: &str) -> WebhookReceiver {
        let key = secret_key(secret).unwrap_or_else(|| panic!("not a whsec_ secret: {secret}"));
        let deliveries = Arc::new(Log::new());
        let script = Arc::new(Mutex::new(Script::default()));
        let secret = Arc::new(Mutex::new((secret.to_string(), key)));
        let (log, answers, keys) = (Arc::clone(&deliveries), Arc::clone(&script), Arc::clone(&secret));
        let server = Server::start(move |received: Received| {
            let reply = answers.lock().unwrap().next_or(Reply::Status(204));
            let verified = verify(&keys.lock().unwrap().1, &received);
            log.add(Delivery {
                method: received.method.clone(),
                path: received.path.clone(),
                content_type: received.header("content-type").map(str::to_string),
                id: received.header("webhook-id").map(str::to_string),
                timestamp: received.header("webhook-timestamp").map(str::to_string),
                signature: received.header("webhook-signature").map(str::to_string),
                body: received.body,
                verified,
                reply,
                at: received.at,
            });
            (reply, Vec::new())
        });
        WebhookReceiver { server, deliveries, script, secret }
    }

    /// Verifies with `secret` from now on: a receiver's URL (its port) is known only once it
    /// runs, and the secret only once that URL is registered.
    pub fn set_secret(&self, secret: &str) {
        let key = secret_key(secret).unwrap_or_else(|| panic!("not a whsec_ secret: {secret}"));
        *self.secret.lock().unwrap() = (secret.to_string(), key);
    }

    /// The secret it verifies with.
    pub fn secret(&self) -> String {
        self.secret.lock().unwrap().0.clone()
    }

    /// The URL to register: `http://127.0.0.1:PORT/hooks/handoff`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{WEBHOOK_PATH}", self.server.port)
    }

    /// The next `times` deliveries are answered `reply` (then 204 again).
    pub fn fail_next(&self, times: usize, reply: Reply) {
        self.script.lock().unwrap().push(reply, times);
    }

    /// Every delivery so far, in the order received.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.all()
    }

    /// The deliveries once there are at least `n`, or those there are after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Delivery> {
        self.deliveries.wait_for(n, timeout)
    }
}

fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix("whsec_")?).ok()
}

fn verify(key: &[u8], received: &Received) -> bool {
    let (Some(id), Some(timestamp), Some(signatures)) =
        (received.header("webhook-id"), received.header("webhook-timestamp"), received.header("webhook-signature"))
    else {
        return false;
    };
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(&received.body);
    signatures.split(' ').filter_map(|s| s.strip_prefix("v1,")).filter_map(|s| STANDARD.decode(s).ok()).any(|tag| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(&content);
        mac.verify_slice(&tag).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_notify::{webhook, MessageId, WebhookSecret};

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(500)))
            .build()
            .into()
    }

    /// Posts one delivery signed with `secret` as the Worker will; answers the status (or the error).
    fn deliver(url: &str, secret: &WebhookSecret, id: &MessageId, body: &str) -> Result<u16, String> {
        let signed = webhook::sign(secret, id, 1_796_041_234_567, body.as_bytes());
        let mut request =
            ureq::http::Request::builder().method("POST").uri(url).header("content-type", "application/json");
        for (name, value) in signed.pairs() {
            request = request.header(name, value);
        }
        agent()
            .run(request.body(body.as_bytes().to_vec()).unwrap())
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string())
    }

    fn secret(byte: u8) -> WebhookSecret {
        WebhookSecret::from_random(&[byte; 32]).unwrap()
    }

    #[test]
    fn records_each_delivery_and_verifies_its_signature_with_the_secret() {
        let receiver = WebhookReceiver::start(&secret(1).reveal());
        let id = MessageId::from_random([7; 16]);
        assert_eq!(deliver(&receiver.url(), &secret(1), &id, r#"{"type":"handoff.done"}"#), Ok(204));
        assert_eq!(deliver(&receiver.url(), &secret(2), &id, r#"{"type":"handoff.done"}"#), Ok(204));
        let got = receiver.wait_for(2, Duration::from_secs(5));
        assert_eq!(got.len(), 2);
        assert!(got[0].verified, "signed with the receiver's secret");
        assert!(!got[1].verified, "signed with another secret");
        assert_eq!(got[0].id.as_deref(), Some(id.as_str()));
        assert_eq!(got[0].method, "POST");
        assert_eq!(got[0].path, WEBHOOK_PATH);
        assert_eq!(got[0].content_type.as_deref(), Some("application/json"));
        assert_eq!(got[0].json()["type"], "handoff.done");
        assert_eq!(got[0].reply, Reply::Status(204));
    }

    #[test]
    fn a_delivery_without_the_headers_or_with_a_changed_body_is_not_verified() {
        let receiver = WebhookReceiver::start(&secret(1).reveal());
        let plain = agent().post(receiver.url()).send("{}").unwrap();
        assert_eq!(plain.status().as_u16(), 204);
        let signed = webhook::sign(&secret(1), &MessageId::from_random([1; 16]), 0, b"{}");
        let mut changed = agent().post(receiver.url());
        for (name, value) in signed.pairs() {
            changed = changed.header(name, value);
        }
        changed.send("{ }").unwrap();
        let got = receiver.wait_for(2, Duration::from_secs(5));
        assert!(got.iter().all(|d| !d.verified), "{got:?}");
    }

    #[test]
    fn answers_the_scripted_status_for_the_next_deliveries_then_2xx_again() {
        let receiver = WebhookReceiver::start(&secret(1).reveal());
        receiver.fail_next(2, Reply::Status(503));
        let id = MessageId::from_random([3; 16]);
        let statuses: Vec<_> = (0..3).map(|_| deliver(&receiver.url(), &secret(1), &id, "{}").unwrap()).collect();
        assert_eq!(statuses, [503, 503, 204]);
        let replies: Vec<_> = receiver.deliveries().iter().map(|d| d.reply).collect();
        assert_eq!(replies, [Reply::Status(503), Reply::Status(503), Reply::Status(204)]);
    }

    #[test]
    fn a_hung_answer_outlasts_the_senders_timeout_and_delays_no_other_delivery() {
        let receiver = WebhookReceiver::start(&secret(1).reveal());
        receiver.fail_next(1, Reply::Hang(Duration::from_secs(30)));
        let id = MessageId::from_random([4; 16]);
        let started = Instant::now();
        let hung = deliver(&receiver.url(), &secret(1), &id, "{}");
        assert!(hung.is_err(), "the 500 ms client timed out: {hung:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(deliver(&receiver.url(), &secret(1), &id, "{}"), Ok(204), "the next is answered at once");
        let got = receiver.wait_for(2, Duration::from_secs(5));
        assert_eq!(got[0].reply, Reply::Hang(Duration::from_secs(30)));
        assert!(got.iter().all(|d| d.verified));
    }

    #[test]
    fn the_verifier_written_from_the_specification_accepts_the_reference_vector() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let received = |signature: &str| Received {
            method: "POST".into(),
            path: "/".into(),
            headers: vec![
                ("webhook-id".into(), "msg_p5jXN8AQM9LWM0D4loKWxJek".into()),
                ("webhook-timestamp".into(), "1614265330".into()),
                ("webhook-signature".into(), signature.into()),
            ],
            body: br#"{"test": 2432232314}"#.to_vec(),
            at: Instant::now(),
        };
        assert!(verify(&key, &received("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")));
        assert!(verify(&key, &received("v1,AAAA v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")));
        assert!(!verify(&key, &received("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=")));
        assert!(!verify(&key, &received("v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")));
    }
}
