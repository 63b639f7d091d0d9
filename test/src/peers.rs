//! The peers of the integration tests: a webhook receiver standing in for the chat app's
//! backend ([`WebhookReceiver`]), a push service standing in for a browser vendor's
//! ([`PushService`]), and a model that the real agent harnesses talk to ([`ScriptedModel`]).
//! Each is an HTTP/1.1 server on 127.0.0.1 (a free port) that records what it is sent, checks
//! it as the real peer would, and answers as the test tells it to. Each stops when dropped.

mod http;
pub mod push_service;
pub mod scripted_model;
pub mod webhook_receiver;

pub use http::Reply;
pub use push_service::{PushMessage, PushService, TestSubscription};
pub use scripted_model::{ScriptedModel, Step};
pub use webhook_receiver::{Delivery, WebhookReceiver};
