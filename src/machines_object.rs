//! `Machines`: one Durable Object per owner, holding the owner's enrolled machines, their
//! presence and the hand-offs created for each (`handoff_core::machines::Machines`, answered by
//! `handoff_api::machines::answer_machines`).
#![deny(clippy::unwrap_used, clippy::expect_used)]

use crate::json_state::Held;
use handoff_api::machines::{answer_machines, MachinesAsk};
use handoff_core::machines::Machines;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::*;

#[wasm_bindgen]
pub struct MachinesObject {
    held: Held<Machines>,
}

#[wasm_bindgen(wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
impl MachinesObject {
    #[wasm_bindgen(constructor)]
    pub fn new(state: worker_sys::DurableObjectState, _env: Env) -> MachinesObject {
        MachinesObject { held: Held::new(State::from(state)) }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        let answer = self.held.serve::<MachinesAsk>(req, answer_machines).await;
        answer.map(JsValue::from).map_err(JsValue::from)
    }
}
