// The Worker's entry, built by worker-build as its custom shim (CUSTOM_SHIM in scripts/build).
// It has no logic: the runtime offers RPC only to a class that extends DurableObject, which a
// wasm-bindgen export cannot, so each class here extends it and forwards every call to the Rust
// object in one line. A test (handoff-tools, entry_module) holds it to that.
import * as rs from "./index_bg.js";
import wasmModule from "./index.wasm";
import { DurableObject } from "cloudflare:workers";
$SNIPPET_JS_IMPORTS;

const instance = new WebAssembly.Instance(wasmModule, { "./index_bg.js": rs, $SNIPPET_WASM_IMPORTS });
rs.__wbg_set_wasm(instance.exports);
instance.exports.__wbindgen_start();

export default { fetch: rs.fetch };

export class HandoffObject extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.HandoffObject(ctx, env); }
  fetch(request) { return this.rs.fetch(request); }
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
