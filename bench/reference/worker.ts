// The benchmark's peer (issue 12): the measured routes of the hand-off service as a Workers
// team would write them by default in TypeScript, with the same rules for what is measured,
// so that `handoff-bench` can put the Rust Worker beside it in one run.
//
// - `GET /v1/health`: `{"ok":true}`, no object.
// - `GET /v1/bench/floor`: reach a Durable Object and answer, no auth, no storage.
// - `POST /v1/handoffs` (owner): create the session's hand-off (SQLite), its row in the owner's
//   index, and a machine token.
// - `GET /v1/handoffs/:id` (owner or machine): the record.
// - `POST /v1/handoffs/:id/report` (machine): the turn rules of a report (the current turn,
//   not ended, a known status, a summary of at most 4 KiB), a version move only on a real
//   change, the record and a history event written in one transaction, and the owner's index
//   updated before the answer (read-your-writes), newer rows only.
//
// Tokens are the service's: HS256 JWTs with `sub`, `role` (`owner` or `machine`), `hid` for a
// machine, `exp`, verified with WebCrypto (the key imported once per isolate). The objects talk
// over RPC, as Cloudflare recommends for new code. Bundled by esbuild; run on workerd from the
// configuration handoff-bench writes (the same bindings and class names as the Rust Worker).
import { DurableObject } from "cloudflare:workers";

interface Env {
  HANDOFFS: DurableObjectNamespace<HandoffObject>;
  OWNER_INDEX: DurableObjectNamespace<OwnerIndex>;
  HANDOFF_SIGNING_KEY: string;
}

type Status = "running" | "needs-you" | "done" | "failed" | "cancelled";
const REPORTED: Status[] = ["running", "needs-you", "done", "failed"];
const SUMMARY_BYTES_MAX = 4096;
const BODY_BYTES_MAX = 16 * 1024;
const MACHINE_TOKEN_TTL_S = 24 * 60 * 60;

interface HandoffRecord {
  id: string;
  owner: string;
  session: string;
  machine: string;
  size: string;
  turn: number;
  state: "open" | "closed";
  status: Status;
  summary: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

interface Claims {
  sub: string;
  role: "owner" | "machine";
  hid?: string;
  exp: number;
}

class Refusal extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly handoff?: HandoffRecord) {
    super(message);
  }
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function refused(e: Refusal): Response {
  const body: Record<string, unknown> = { error: { code: e.code, message: e.message } };
  if (e.handoff) body.handoff = e.handoff;
  return json(body, e.status);
}

// ---- tokens

const encoder = new TextEncoder();
let keyPromise: Promise<CryptoKey> | undefined;
let keyOf: string | undefined;

function hmacKey(secret: string): Promise<CryptoKey> {
  if (!keyPromise || keyOf !== secret) {
    keyOf = secret;
    keyPromise = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
  }
  return keyPromise;
}

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

async function sign(claims: Claims, secret: string): Promise<string> {
  const head = base64url(encoder.encode(JSON.stringify({ alg: "HS256", typ: "JWT" })));
  const body = base64url(encoder.encode(JSON.stringify(claims)));
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(`${head}.${body}`));
  return `${head}.${body}.${base64url(new Uint8Array(mac))}`;
}

async function verify(request: Request, secret: string): Promise<Claims> {
  const header = request.headers.get("authorization") ?? "";
  if (!header.startsWith("Bearer ")) throw new Refusal(401, "auth.required", "a bearer token is required");
  const parts = header.slice(7).split(".");
  if (parts.length !== 3) throw new Refusal(401, "auth.invalid", "not a JWT");
  let claims: Claims;
  try {
    const head = JSON.parse(new TextDecoder().decode(fromBase64url(parts[0])));
    if (head.alg !== "HS256") throw new Error("alg");
    const ok = await crypto.subtle.verify("HMAC", await hmacKey(secret), fromBase64url(parts[2]), encoder.encode(`${parts[0]}.${parts[1]}`));
    if (!ok) throw new Error("signature");
    claims = JSON.parse(new TextDecoder().decode(fromBase64url(parts[1])));
  } catch {
    throw new Refusal(401, "auth.invalid", "the token does not verify");
  }
  if (typeof claims.exp !== "number" || claims.exp + 60 < Date.now() / 1000) throw new Refusal(401, "auth.invalid", "the token has expired");
  if (claims.role !== "owner" && claims.role !== "machine") throw new Refusal(401, "auth.invalid", "unknown role");
  return claims;
}

// ---- the Worker

async function readJson(request: Request): Promise<any> {
  const text = await request.text();
  if (text.length > BODY_BYTES_MAX) throw new Refusal(413, "request.too_large", "the body is over 16 KiB");
  try {
    const value = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error();
    return value;
  } catch {
    throw new Refusal(400, "request.invalid", "body: expected a JSON object");
  }
}

async function handoffId(owner: string, session: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(`${owner}\n${session}`)));
  return "ho_" + Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function route(request: Request, env: Env): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname.split("/").filter(Boolean);
  if (path.length === 2 && path[0] === "v1" && path[1] === "health") return json({ ok: true });
  if (path.length === 3 && path[0] === "v1" && path[1] === "bench" && path[2] === "floor") {
    return json(await env.HANDOFFS.get(env.HANDOFFS.idFromName("floor")).floor());
  }
  if (path[0] !== "v1" || path[1] !== "handoffs") throw new Refusal(404, "route.not_found", "no such route");
  const claims = await verify(request, env.HANDOFF_SIGNING_KEY);
  if (path.length === 2 && request.method === "POST") {
    if (claims.role !== "owner") throw new Refusal(403, "auth.forbidden", "owners create hand-offs");
    const body = await readJson(request);
    const id = await handoffId(claims.sub, String(body.session));
    const stub = env.HANDOFFS.get(env.HANDOFFS.idFromName(id));
    const { record, created } = await stub.create(id, claims.sub, String(body.session), String(body.machine), String(body.size));
    const machine_token = await sign({ sub: claims.sub, role: "machine", hid: id, exp: Math.floor(Date.now() / 1000) + MACHINE_TOKEN_TTL_S }, env.HANDOFF_SIGNING_KEY);
    return json({ handoff: record, machine_token }, created ? 201 : 200);
  }
  const id = path[2];
  if (claims.role === "machine" && claims.hid !== id) throw new Refusal(404, "handoff.not_found", "no such hand-off");
  const stub = env.HANDOFFS.get(env.HANDOFFS.idFromName(id));
  const answer = (r: { handoff?: HandoffRecord; refusal?: { status: number; code: string; message: string } }) =>
    r.refusal ? refused(new Refusal(r.refusal.status, r.refusal.code, r.refusal.message, r.handoff)) : json({ handoff: r.handoff });
  if (path.length === 3 && request.method === "GET") return answer(await stub.read(claims.sub));
  if (path.length === 4 && path[3] === "report" && request.method === "POST") {
    if (claims.role !== "machine") throw new Refusal(403, "auth.forbidden", "the machine reports");
    const body = await readJson(request);
    if (!Number.isInteger(body.turn) || body.turn < 1) throw new Refusal(400, "request.invalid", "turn: a positive integer");
    if (!REPORTED.includes(body.status)) throw new Refusal(400, "request.invalid", "status: running, needs-you, done or failed");
    if (body.summary != null && (typeof body.summary !== "string" || encoder.encode(body.summary).length > SUMMARY_BYTES_MAX)) {
      throw new Refusal(400, "request.invalid", "summary: a string of at most 4096 bytes");
    }
    return answer(await stub.report(claims.sub, body.turn, body.status, body.summary ?? null));
  }
  throw new Refusal(404, "route.not_found", "no such route");
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    try {
      return await route(request, env);
    } catch (e) {
      if (e instanceof Refusal) return refused(e);
      return json({ error: { code: "store.unavailable", message: "the store is unavailable" } }, 503);
    }
  },
} satisfies ExportedHandler<Env>;

// ---- one hand-off

export class HandoffObject extends DurableObject<Env> {
  private record: HandoffRecord | null | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL)");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL)");
    });
  }

  floor(): { ok: true } {
    return { ok: true };
  }

  private load(): HandoffRecord | null {
    if (this.record === undefined) {
      const row = this.ctx.storage.sql.exec<{ record: string }>("SELECT record FROM handoff WHERE k = 0").toArray()[0];
      this.record = row ? (JSON.parse(row.record) as HandoffRecord) : null;
    }
    return this.record;
  }

  private store(next: HandoffRecord, kind: string, actor: string): void {
    this.ctx.storage.transactionSync(() => {
      this.ctx.storage.sql.exec("INSERT INTO handoff (k, record) VALUES (0, ?) ON CONFLICT (k) DO UPDATE SET record = excluded.record", JSON.stringify(next));
      this.ctx.storage.sql.exec("INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)", next.version, Date.now(), kind, actor);
    });
    this.record = next;
  }

  private async index(r: HandoffRecord): Promise<void> {
    const owners = this.env.OWNER_INDEX;
    await owners.get(owners.idFromName(r.owner)).put(r);
  }

  async create(id: string, owner: string, session: string, machine: string, size: string): Promise<{ record: HandoffRecord; created: boolean }> {
    const existing = this.load();
    if (existing) return { record: existing, created: false };
    const now = new Date().toISOString();
    const record: HandoffRecord = { id, owner, session, machine, size, turn: 1, state: "open", status: "running", summary: null, version: 1, created_at: now, updated_at: now };
    this.store(record, "created", "owner");
    await this.index(record);
    return { record, created: true };
  }

  read(owner: string): { handoff?: HandoffRecord; refusal?: { status: number; code: string; message: string } } {
    const r = this.load();
    if (!r || r.owner !== owner) return { refusal: { status: 404, code: "handoff.not_found", message: "no such hand-off" } };
    return { handoff: r };
  }

  async report(owner: string, turn: number, status: Status, summary: string | null) {
    const r = this.load();
    if (!r || r.owner !== owner) return { refusal: { status: 404, code: "handoff.not_found", message: "no such hand-off" } };
    const conflict = (code: string, message: string) => ({ handoff: r, refusal: { status: 409, code, message } });
    if (r.state === "closed") return conflict("handoff.closed", "the hand-off is closed");
    if (turn < r.turn) return conflict("handoff.stale", `turn ${r.turn} is current`);
    if (turn > r.turn) return conflict("handoff.turn_out_of_order", `turn ${r.turn} is current`);
    const ended = r.status === "done" || r.status === "failed" || r.status === "cancelled";
    if (ended) {
      if (r.status === status && r.summary === summary) return { handoff: r };
      return conflict("handoff.turn_finished", `turn ${r.turn} has ended`);
    }
    if (r.status === status && r.summary === summary) return { handoff: r };
    const next: HandoffRecord = { ...r, status, summary, version: r.version + 1, updated_at: new Date().toISOString() };
    this.store(next, "report", "machine");
    await this.index(next);
    return { handoff: next };
  }
}

// ---- one owner's list

export class OwnerIndex extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS rows (id TEXT PRIMARY KEY, session TEXT NOT NULL, machine TEXT NOT NULL, size TEXT NOT NULL, turn INTEGER NOT NULL, state TEXT NOT NULL, status TEXT NOT NULL, summary TEXT, version INTEGER NOT NULL, updated_at TEXT NOT NULL)",
    );
  }

  put(r: HandoffRecord): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO rows (id, session, machine, size, turn, state, status, summary, version, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET turn = excluded.turn, state = excluded.state, status = excluded.status, summary = excluded.summary,
         version = excluded.version, updated_at = excluded.updated_at WHERE excluded.version > rows.version`,
      r.id, r.session, r.machine, r.size, r.turn, r.state, r.status, r.summary, r.version, r.updated_at,
    );
  }
}
