//! `Enrolments`: the one Durable Object that holds every pending enrolment, across owners (a
//! code is looked up before anyone knows whose it is), and the tries on them
//! (`handoff_core::enrolment::Enrolments`, answered by `handoff_api::machines::answer_enrolment`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::json_state::Held;
use handoff_api::machines::{answer_enrolment, EnrolmentAsk};
use handoff_core::enrolment::Enrolments;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

#[wasm_bindgen]
pub struct EnrolmentsObject {
    held: Held<Enrolments>,
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl EnrolmentsObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, _env: Env) -> EnrolmentsObject {
        EnrolmentsObject { held: Held::new(State::from(state)) }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        let answer = self.held.serve::<EnrolmentAsk>(req, answer_enrolment).await;
        answer.map(JsValue::from).map_err(JsValue::from)
    }
}
