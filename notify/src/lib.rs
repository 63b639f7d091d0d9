//! The hand-off service's notifications as plain functions: what a signed webhook delivery
//! and an encrypted Web Push message are, byte for byte, and which URLs may receive them.
//!
//! - [`webhook`]: Standard Webhooks secrets (`whsec_…`), message ids and signatures.
//! - [`ece`]: Web Push message encryption (RFC 8291, `aes128gcm` of RFC 8188).
//! - [`vapid`]: the application server's key pair and `Authorization: vapid` (RFC 8292).
//! - [`push`]: events, `Urgency`, `Topic`, one push request and what its answer means.
//! - [`endpoint`]: the rule shared by webhook URLs and push endpoints.
//! - [`limits`]: every bound, named once.
//!
//! Nothing here reads a clock, draws randomness or does I/O: the time (`now_ms`, milliseconds
//! since the epoch) and random bytes are passed in, so every result is reproducible under test.
//! It builds for the native targets and for `wasm32-unknown-unknown` alike, and never names
//! `worker`, `wasm-bindgen` or `serde_json::Value`.

mod b64;
pub mod ece;
pub mod endpoint;
pub mod limits;
pub mod push;
pub mod vapid;
pub mod webhook;

pub use ece::SubscriptionKeys;
#[cfg(feature = "software")]
pub use ece::{MessageEntropy, UserAgent};
pub use endpoint::{Endpoint, EndpointProblem, EndpointRefusal, Environment};
pub use push::{Event, PushOutcome, PushRequest, Sender, Subscription, Topic, Urgency};
pub use vapid::{VapidKey, VapidSubject, DEV_VAPID_PRIVATE_KEY, DEV_VAPID_PUBLIC_KEY};
pub use webhook::{MessageId, SignedHeaders, WebhookSecret};
