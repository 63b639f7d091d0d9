//! `Machines`: one Durable Object per owner, holding the owner's enrolled machines, their
//! presence and the hand-offs created for each (`handoff_core::machines::Machines`, answered by
//! `handoff_api::machines::answer_machines`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::json_state::{self, Held, Kept};
use handoff_api::machines::answer_machines;
use handoff_api::machines::Answer;
use handoff_api::protocol::Unreadable;
use handoff_core::machines::Machines;
use handoff_core::time::EpochMs;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

#[wasm_bindgen]
pub struct MachinesObject {
    held: Held,
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl MachinesObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, _env: Env) -> MachinesObject {
        MachinesObject { held: Held::new(State::from(state), json_state::read::<Machines>) }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        let answer = self.held.serve(req).await;
        answer.map(JsValue::from).map_err(JsValue::from)
    }
}

impl Kept for Machines {
    fn answer(&mut self, ask: &str, now: EpochMs) -> std::result::Result<Answer, Unreadable> {
        json_state::answer_by(self, ask, now, answer_machines)
    }

    fn text(&self) -> serde_json::Result<String> {
        json_state::text_of(self)
    }
}
