// The Worker's entry (wrangler.toml's main, copied by scripts/build). It decides nothing: fetch
// hands each request to Rust in one call (src/router.rs, Edge.route) and carries out the step it
// gets back, by its first element: 0 an answer [status, headers, body]; 1 an ask of an object over
// RPC (with the request's body), its answer value the response; 2 a request to an object, its
// answer passed on as it is; 3 a promise of the next step; 4 read the body and route again with
// it; 5 read the body and make 1's ask with it. An object's answer that never comes is the one 503
// (Edge.unavailable), an unreadable body a 400 (Edge.unreadable). RPC reaches only a class that
// extends DurableObject, which a wasm-bindgen export cannot, so each class here does and forwards
// every call in one line (putRow: the index's row send); ../index.js restarts after a trap.
import { DurableObject } from "cloudflare:workers";
import { createHash } from "node:crypto";
import * as rs from "../index.js";

const respond = (answer) => new Response(answer[2], { status: answer[0], headers: answer[1] });
const unavailable = (cause) => respond(rs.Edge.unavailable(cause));
const unreadable = (cause) => respond(rs.Edge.unreadable(cause));
const ask = (step, env, body) => env[step[1]].getByName(step[2]).handle(step[3], body).then(respond, unavailable);
const read = (request, then) => request.arrayBuffer().then((body) => then(new Uint8Array(body)), unreadable);
const steps = [
  (step) => respond(step[1]),
  (step, request, env) => ask(step, env, step[4]),
  (step, request, env) => env[step[1]].getByName(step[2]).fetch(step[3], { method: step[4], headers: step[5], body: step[6] }).catch(unavailable),
  (step, request, env, h) => step[1].then((next) => run(next, request, env, h)),
  (step, request, env, h) => read(request, (body) => run(route(request, env, h, body), request, env, h)),
  (step, request, env) => read(request, (body) => ask(step, env, body)),
];
const run = (step, request, env, h) => steps[step[0]](step, request, env, h);
const route = (request, env, h, body) => rs.Edge.route(request, env, request.method, request.url, h.get("authorization"), h.get("content-length"), h.get("idempotency-key"), h.get("if-none-match"), h.get("upgrade"), h.get("sec-websocket-protocol"), h.get("cookie"), h.get("origin"), h.get("handoff-refresh"), body);

export default {
  fetch(request, env) { return run(route(request, env, request.headers), request, env, request.headers); },
};

export class HandoffObject extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.HandoffObject(ctx, env, createHash); }
  fetch(request) { return this.rs.fetch(request); }
  handle(ask, body) { return this.rs.handle(ask, body); }
  alarm() { return this.rs.alarm(); }
  webSocketMessage(ws, message) { return this.rs.webSocketMessage(ws, message); }
  webSocketClose(ws, code, reason, clean) { return this.rs.webSocketClose(ws, code, reason, clean); }
  webSocketError(ws, error) { return this.rs.webSocketError(ws, error); }
}

export class OwnerIndex extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.OwnerIndex(ctx, env); }
  fetch(request) { return this.rs.fetch(request); }
  putRow(wire) { return this.rs.putRow(wire); }
  alarm() { return this.rs.alarm(); }
}

export class Enrolments extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.EnrolmentsObject(ctx, env); }
  fetch(request) { return this.rs.fetch(request); }
}

export class Machines extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.rs = new rs.MachinesObject(ctx, env); }
  fetch(request) { return this.rs.fetch(request); }
}
