// The Worker's entry (wrangler.toml's main; scripts/build copies it to build/worker/). It has
// no logic: the runtime offers RPC only to a class that extends DurableObject, which a
// wasm-bindgen export cannot, so each class here extends it and forwards every call to the
// Rust object in one line. worker-build's module (../index.js) keeps its guard: after a trap
// it starts a fresh instance and each object is made again from storage. A test
// (handoff-tools, entry_module) holds this file to that. The hand-off object is handed
// node:crypto's createHash for the package hash (src/digest.rs).
import { DurableObject } from "cloudflare:workers";
import { createHash } from "node:crypto";
import * as rs from "../index.js";

export { default } from "../index.js";

export class HandoffObject extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.HandoffObject(ctx, env, createHash); }
  fetch(request) { return this.rs.fetch(request); }
  handle(ask) { return this.rs.handle(ask); }
  alarm() { return this.rs.alarm(); }
  webSocketMessage(ws, message) { return this.rs.webSocketMessage(ws, message); }
  webSocketClose(ws, code, reason, clean) { return this.rs.webSocketClose(ws, code, reason, clean); }
  webSocketError(ws, error) { return this.rs.webSocketError(ws, error); }
}

export class OwnerIndex extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.OwnerIndex(ctx, env); }
  fetch(request) { return this.rs.fetch(request); }
  alarm() { return this.rs.alarm(); }
}
