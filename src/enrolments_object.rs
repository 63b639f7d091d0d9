//! `Enrolments`: the one Durable Object that holds every pending enrolment, across owners (a
//! code is looked up before anyone knows whose it is), and the tries on them
//! (`handoff_core::enrolment::Enrolments`, answered by `handoff_api::machines::answer_enrolment`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::json_state::{self, Held, Kept};
use handoff_api::machines::answer_enrolment;
use handoff_api::machines::Answer;
use handoff_api::protocol::Unreadable;
use handoff_core::enrolment::Enrolments;
use handoff_core::time::EpochMs;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

#[wasm_bindgen]
pub struct EnrolmentsObject {
    held: Held,
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl EnrolmentsObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, _env: Env) -> EnrolmentsObject {
        EnrolmentsObject { held: Held::new(State::from(state), json_state::read::<Enrolments>) }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        let answer = self.held.serve(req).await;
        answer.map(JsValue::from).map_err(JsValue::from)
    }
}

impl Kept for Enrolments {
    fn answer(&mut self, ask: &str, now: EpochMs) -> std::result::Result<Answer, Unreadable> {
        json_state::answer_by(self, ask, now, answer_enrolment)
    }

    fn text(&self) -> serde_json::Result<String> {
        json_state::text_of(self)
    }
}
