// The benchmark's TypeScript reference: the measured routes of the hand-off service as a
// Workers team would write them by default, with the same rules for what is measured, so that
// `handoff-bench` can put the Rust Worker beside it in one run.
//
// - `GET /v1/health`: `{"ok":true}`, no object.
// - `GET /v1/bench/floor`: reach a Durable Object and answer, no auth, no storage.
// - `POST /v1/handoffs` (owner): create the session's hand-off (SQLite), its row in the owner's
//   index, and a machine token.
// - `GET /v1/handoffs/:id` (owner or machine): the record.
// - `POST /v1/handoffs/:id/report` (machine): the turn rules of a report (the current turn,
//   not ended, a known status, a summary of at most 4 KiB, `unmet` on a final report), a
//   version move only on a real change, the record, a history event, the turn's lineage row
//   when its status changes and the work record when `unmet` does, in one transaction, and
//   the owner's index updated before the answer (read-your-writes), newer rows only.
// - `PUT …/work` (owner), `POST …/decisions` and `…/artifacts` (either), `POST …/workspace`
//   (machine): the work record's rules (`package.ts`), stored and indexed like a report.
// - `POST …/turns?dry_run=true&budget=&reach=` (owner), with `{"after", "handoff"}`: the open's
//   turn rules, then the package that open would compile (canonical JSON, SHA-256) and its
//   briefing (`briefing.ts`), writing nothing.
// - `POST …/events` (machine), `{"turn", "events"}`: a batch of 1 to 64 of one turn's events
//   (`timeline.ts`), each stored in its own row with the turn's count and bytes in one
//   transaction; repeats change nothing; no version move, no index row.
//
// Tokens are the service's: HS256 JWTs with `sub`, `role` (`owner` or `machine`), `hid` for a
// machine, `exp`, verified with WebCrypto (the key imported once per isolate).
//
// Both hops (Worker → hand-off object, hand-off object → owner index) are written both ways,
// chosen by the `HANDOFF_PEER_HOPS` binding: `fetch` sends a Request to the object's `fetch`
// handler, which answers the Response the Worker passes on untouched (and the index answers
// 204); anything else calls the same methods over RPC on the stubs, as Cloudflare recommends
// for new code, and the Worker builds the Response from the value answered. The rules,
// storage and answers are the same code either way. Bundled by esbuild; run on workerd from
// the configuration handoff-bench writes (the same bindings and class names as the Rust Worker).
import { DurableObject } from "cloudflare:workers";
import { render } from "./briefing";
import {
  type PackageRequest, type TurnEntry, type Work, addArtifact, compile, emptyWork, packageHash, parseWork, readArtifact,
  readDecision, readPackageRequest, readWork, readWorkspace, recordDecision, recordUnmet, reportWorkspace, setWork, workJson,
} from "./package";
import {
  ACCEPTANCE_CRITERIA_MAX, BODY_BYTES_MAX, BRIEFING_BUDGET_BYTES_DEFAULT, BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN,
  MACHINE_TOKEN_TTL_S, SUMMARY_BYTES_MAX, WORK_RECORD_BYTES_MAX, type Body, type Role, type Status, Refusal, hasEnded, invalid,
  list, object, only, tooLarge, u32, utf8Bytes,
} from "./rules";
import { type Batch, TIMELINE_BODY_BYTES_MAX, TimelineRefusal, type TurnFacts, readBatch, take } from "./timeline";

interface Env {
  HANDOFFS: DurableObjectNamespace<HandoffObject>;
  OWNER_INDEX: DurableObjectNamespace<OwnerIndex>;
  HANDOFF_SIGNING_KEY: string;
  /// `fetch`: both hops over fetch; anything else (or unset): both over RPC.
  HANDOFF_PEER_HOPS?: string;
}

const REPORTED: Status[] = ["running", "needs-you", "done", "failed"];

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
  role: Role;
  hid?: string;
  exp: number;
}

/// What a hand-off object answers a hop: the status and body the client gets.
interface Answer {
  status: number;
  body: unknown;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function refusal(status: number, code: string, message: string, handoff?: HandoffRecord): Answer {
  const body: Record<string, unknown> = { error: { code, message } };
  if (handoff) body.handoff = handoff;
  return { status, body };
}

const ok = (body: unknown): Answer => ({ status: 200, body });
const notFound = () => refusal(404, "handoff.not_found", "no such hand-off");
const byFetch = (env: Env) => env.HANDOFF_PEER_HOPS === "fetch";

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

async function readJson(request: Request, max = BODY_BYTES_MAX): Promise<Body> {
  const text = await request.text();
  if (text.length > max) throw new Refusal(413, "request.too_large", `the body is over ${max / 1024} KiB`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid("body: expected a JSON object");
  }
  return object(value, "body");
}

async function handoffId(owner: string, session: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(`${owner}\n${session}`)));
  return "ho_" + Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
}

/// The hand-off objects' methods a hop may call.
const HOPS = ["floor", "read", "report", "setWork", "decide", "addArtifact", "workspace", "preview", "events"] as const;
type Hop = (typeof HOPS)[number];
type Stub = DurableObjectStub<HandoffObject>;

/// One hop to a hand-off object: over fetch its Response is the answer; over RPC the Worker
/// builds it from the value.
async function hop(env: Env, stub: Stub, op: Hop, ...args: unknown[]): Promise<Response> {
  if (byFetch(env)) {
    return stub.fetch(`https://handoff/${op}`, args.length ? { method: "POST", body: JSON.stringify(args) } : undefined);
  }
  const call = stub[op] as unknown as (...a: unknown[]) => Promise<Answer>;
  const a = await call(...args);
  return json(a.body, a.status);
}

/// `?dry_run=true&budget=&reach=`: the preview's budget and reach, or null for a real open.
function previewQuery(params: URLSearchParams): { budget: number; reachApi: boolean } | null {
  let dryRun = false;
  let other = false;
  let budget = BRIEFING_BUDGET_BYTES_DEFAULT;
  let reachApi = true;
  for (const [key, value] of params) {
    if (key === "dry_run") {
      if (value !== "true" && value !== "false") throw invalid("dry_run: false or true");
      dryRun = value === "true";
    } else if (key === "budget") {
      const n = /^\+?[0-9]{1,20}$/.test(value) ? Number(value) : NaN;
      if (!(n >= BRIEFING_BUDGET_BYTES_MIN && n <= BRIEFING_BUDGET_BYTES_MAX)) {
        throw invalid(`budget: a whole number of bytes from ${BRIEFING_BUDGET_BYTES_MIN} to ${BRIEFING_BUDGET_BYTES_MAX}`);
      }
      budget = n;
      other = true;
    } else if (key === "reach") {
      if (value !== "api" && value !== "none") throw invalid("reach: api or none");
      reachApi = value === "api";
      other = true;
    } else throw invalid(`${key}: unknown query parameter`);
  }
  if (dryRun) return { budget, reachApi };
  if (other) throw invalid("budget and reach preview a hand-off: only with dry_run=true");
  return null;
}

function readReport(b: Body): [number, Status, string | null, number[] | null] {
  only(b, ["turn", "status", "summary", "unmet"]);
  if (!Number.isInteger(b.turn) || (b.turn as number) < 1) throw invalid("turn: a positive integer");
  const status = b.status as Status;
  if (!REPORTED.includes(status)) throw invalid("status: running, needs-you, done or failed");
  const summary = b.summary ?? null;
  if (summary !== null && (typeof summary !== "string" || !summary.isWellFormed() || utf8Bytes(summary) > SUMMARY_BYTES_MAX)) {
    throw invalid("summary: a string of at most 4096 bytes");
  }
  let unmet: number[] | null = null;
  if (b.unmet !== undefined && b.unmet !== null) {
    if (status !== "done" && status !== "failed") throw invalid("unmet: only a final report (done or failed) lists unmet criteria");
    unmet = list(b.unmet, "unmet", ACCEPTANCE_CRITERIA_MAX, u32);
  }
  return [b.turn as number, status, summary as string | null, unmet];
}

async function route(request: Request, env: Env): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname.split("/").filter(Boolean);
  if (path.length === 2 && path[0] === "v1" && path[1] === "health") return json({ ok: true });
  if (path.length === 3 && path[0] === "v1" && path[1] === "bench" && path[2] === "floor") {
    return hop(env, env.HANDOFFS.get(env.HANDOFFS.idFromName("floor")), "floor");
  }
  if (path[0] !== "v1" || path[1] !== "handoffs" || path.length > 4) throw new Refusal(404, "route.not_found", "no such route");
  const claims = await verify(request, env.HANDOFF_SIGNING_KEY);
  const method = request.method;
  if (path.length === 2 && method === "POST") {
    if (claims.role !== "owner") throw new Refusal(403, "auth.forbidden", "owners create hand-offs");
    const body = await readJson(request);
    const id = await handoffId(claims.sub, String(body.session));
    const stub = env.HANDOFFS.get(env.HANDOFFS.idFromName(id));
    const args = [id, claims.sub, String(body.session), String(body.machine), String(body.size)] as const;
    const { record, created } = byFetch(env)
      ? ((await (await stub.fetch("https://handoff/create", { method: "POST", body: JSON.stringify(args) })).json()) as Created)
      : await stub.create(...args);
    const machine_token = await sign({ sub: claims.sub, role: "machine", hid: id, exp: Math.floor(Date.now() / 1000) + MACHINE_TOKEN_TTL_S }, env.HANDOFF_SIGNING_KEY);
    return json({ handoff: record, machine_token }, created ? 201 : 200);
  }
  if (path.length < 3) throw new Refusal(404, "route.not_found", "no such route");
  const id = path[2];
  if (claims.role === "machine" && claims.hid !== id) throw new Refusal(404, "handoff.not_found", "no such hand-off");
  const stub = env.HANDOFFS.get(env.HANDOFFS.idFromName(id));
  const mustBe = (role: Role, message: string) => {
    if (claims.role !== role) throw new Refusal(403, "auth.forbidden", message);
  };
  const leaf = path[3] ?? "";
  if (leaf === "" && method === "GET") return hop(env, stub, "read", claims.sub);
  if (leaf === "report" && method === "POST") {
    mustBe("machine", "the machine reports");
    return hop(env, stub, "report", claims.sub, ...readReport(await readJson(request)));
  }
  if (leaf === "events" && method === "POST") {
    mustBe("machine", "only the machine writes a turn's timeline");
    return hop(env, stub, "events", claims.sub, readBatch(await readJson(request, TIMELINE_BODY_BYTES_MAX)));
  }
  if (leaf === "work" && method === "PUT") {
    mustBe("owner", "the owner sets the work");
    return hop(env, stub, "setWork", claims.sub, readWork(await readJson(request)));
  }
  if (leaf === "decisions" && method === "POST") return hop(env, stub, "decide", claims.sub, claims.role, readDecision(await readJson(request)));
  if (leaf === "artifacts" && method === "POST") return hop(env, stub, "addArtifact", claims.sub, claims.role, readArtifact(await readJson(request)));
  if (leaf === "workspace" && method === "POST") {
    mustBe("machine", "the machine reports its workspace");
    return hop(env, stub, "workspace", claims.sub, readWorkspace(await readJson(request)));
  }
  if (leaf === "turns" && method === "POST") {
    mustBe("owner", "the owner opens a turn");
    const preview = previewQuery(url.searchParams);
    if (!preview) throw new Refusal(404, "route.not_found", "the reference answers only a dry-run open (dry_run=true)");
    const body = await readJson(request);
    only(body, ["after", "handoff"]);
    if (!Number.isSafeInteger(body.after) || (body.after as number) < 0) throw invalid("after: a non-negative integer");
    if (body.handoff === undefined || body.handoff === null) throw invalid("handoff: a dry run previews a hand-off, and this open has none");
    const handoff = readPackageRequest(body.handoff);
    return hop(env, stub, "preview", claims.sub, body.after, handoff, preview.budget, preview.reachApi ? url.origin : null);
  }
  throw new Refusal(404, "route.not_found", "no such route");
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    try {
      return await route(request, env);
    } catch (e) {
      if (e instanceof Refusal) return json({ error: { code: e.code, message: e.message } }, e.status);
      return json({ error: { code: "store.unavailable", message: "the store is unavailable" } }, 503);
    }
  },
} satisfies ExportedHandler<Env>;

// ---- one hand-off

interface Created {
  record: HandoffRecord;
  created: boolean;
}

export class HandoffObject extends DurableObject<Env> {
  private record: HandoffRecord | null | undefined;
  private work: Work | undefined;
  /// The newest turns, oldest first (the compiler reads the newest 20 and the current one).
  private lineage: TurnEntry[] | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS handoff (k INTEGER PRIMARY KEY CHECK (k = 0), record TEXT NOT NULL)");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS events (version INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL)");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS work (k INTEGER PRIMARY KEY CHECK (k = 0), work TEXT NOT NULL)");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS turns (turn INTEGER PRIMARY KEY, status TEXT NOT NULL, runtime TEXT, opened_at INTEGER NOT NULL, ended_at INTEGER)");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS timeline (turn INTEGER NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (turn, seq))");
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS timeline_turns (turn INTEGER PRIMARY KEY, events INTEGER NOT NULL, bytes INTEGER NOT NULL)");
    });
  }

  /// The hops over fetch: `POST /<method>` with the arguments as a JSON array.
  async fetch(request: Request): Promise<Response> {
    try {
      const op = new URL(request.url).pathname.slice(1);
      const args = (request.method === "POST" ? await request.json() : []) as unknown[];
      if (op === "create") return json(await this.create(...(args as [string, string, string, string, string])));
      if (!(HOPS as readonly string[]).includes(op)) return json({ error: { code: "route.not_found", message: "no such method" } }, 404);
      const call = this[op as Hop] as (...a: unknown[]) => Answer | Promise<Answer>;
      const a = await call.apply(this, args);
      return json(a.body, a.status);
    } catch {
      return json({ error: { code: "store.unavailable", message: "the store is unavailable" } }, 503);
    }
  }

  floor(): Answer {
    return ok({ ok: true });
  }

  private load(): HandoffRecord | null {
    if (this.record === undefined) {
      const row = this.ctx.storage.sql.exec<{ record: string }>("SELECT record FROM handoff WHERE k = 0").toArray()[0];
      this.record = row ? (JSON.parse(row.record) as HandoffRecord) : null;
    }
    return this.record;
  }

  private loadWork(): Work {
    if (this.work === undefined) {
      const row = this.ctx.storage.sql.exec<{ work: string }>("SELECT work FROM work WHERE k = 0").toArray()[0];
      this.work = row ? parseWork(row.work) : emptyWork();
    }
    return this.work;
  }

  private loadLineage(): TurnEntry[] {
    if (this.lineage === undefined) {
      const rows = this.ctx.storage.sql.exec<{ turn: number; status: Status; runtime: string | null }>(
        "SELECT turn, status, runtime FROM turns ORDER BY turn DESC LIMIT 64",
      );
      this.lineage = rows.toArray().reverse();
    }
    return this.lineage;
  }

  /// The record (and whatever else `also` writes) and its event, in one transaction.
  private store(next: HandoffRecord, kind: string, actor: string, also?: () => void): void {
    this.ctx.storage.transactionSync(() => {
      this.ctx.storage.sql.exec("INSERT INTO handoff (k, record) VALUES (0, ?) ON CONFLICT (k) DO UPDATE SET record = excluded.record", JSON.stringify(next));
      this.ctx.storage.sql.exec("INSERT INTO events (version, at, kind, actor) VALUES (?, ?, ?, ?)", next.version, Date.now(), kind, actor);
      also?.();
    });
    this.record = next;
  }

  private writeWork(text: string): void {
    this.ctx.storage.sql.exec("INSERT INTO work (k, work) VALUES (0, ?) ON CONFLICT (k) DO UPDATE SET work = excluded.work", text);
  }

  /// The owner's index gets the row before the change answers (read-your-writes).
  private async index(r: HandoffRecord): Promise<void> {
    const owners = this.env.OWNER_INDEX;
    const stub = owners.get(owners.idFromName(r.owner));
    if (byFetch(this.env)) {
      const answer = await stub.fetch("https://index/put", { method: "POST", body: JSON.stringify(r) });
      if (answer.status !== 204) throw new Error(`the owner's index answered ${answer.status}`);
    } else {
      await stub.put(r);
    }
  }

  /// Runs `change`, answering a refusal it throws as the client's answer.
  private async guard(change: () => Answer | Promise<Answer>): Promise<Answer> {
    try {
      return await change();
    } catch (e) {
      if (e instanceof Refusal) return refusal(e.status, e.code, e.message, this.record ?? undefined);
      throw e;
    }
  }

  async create(id: string, owner: string, session: string, machine: string, size: string): Promise<Created> {
    const existing = this.load();
    if (existing) return { record: existing, created: false };
    const at = Date.now();
    const now = new Date(at).toISOString();
    const record: HandoffRecord = { id, owner, session, machine, size, turn: 1, state: "open", status: "running", summary: null, version: 1, created_at: now, updated_at: now };
    this.store(record, "created", "owner", () => {
      this.ctx.storage.sql.exec("INSERT INTO turns (turn, status, runtime, opened_at, ended_at) VALUES (1, 'running', NULL, ?, NULL)", at);
    });
    this.lineage = undefined;
    await this.index(record);
    return { record, created: true };
  }

  read(owner: string): Answer {
    const r = this.load();
    if (!r || r.owner !== owner) return notFound();
    return ok({ handoff: r });
  }

  report(owner: string, turn: number, status: Status, summary: string | null, unmet: number[] | null): Promise<Answer> {
    return this.guard(async () => {
      const r = this.load();
      if (!r || r.owner !== owner) return notFound();
      const conflict = (code: string, message: string) => refusal(409, code, message, r);
      if (r.state === "closed") return conflict("handoff.closed", "the hand-off is closed");
      if (turn < r.turn) return conflict("handoff.stale", `turn ${r.turn} is current`);
      if (turn > r.turn) return conflict("handoff.turn_out_of_order", `turn ${r.turn} is current`);
      const same = r.status === status && r.summary === summary;
      if (hasEnded(r.status) && !same) return conflict("handoff.turn_finished", `turn ${r.turn} has ended`);
      if (same) return ok({ handoff: r });
      const at = Date.now();
      const next: HandoffRecord = { ...r, status, summary, version: r.version + 1, updated_at: new Date(at).toISOString() };
      const final = status === "done" || status === "failed";
      const work = final ? recordUnmet(this.loadWork(), unmet ?? []) : null;
      this.store(next, "report", "machine", () => {
        if (status !== r.status) {
          this.ctx.storage.sql.exec("UPDATE turns SET status = ?, ended_at = ? WHERE turn = ?", status, final ? at : null, turn);
        }
        if (work) this.writeWork(workJson(work));
      });
      if (status !== r.status) this.lineage = undefined;
      if (work) this.work = work;
      await this.index(next);
      return ok({ handoff: next });
    });
  }

  /// A batch of one turn's events, taken whole or refused; the record and its version stay.
  events(owner: string, batch: Batch): Answer {
    const r = this.load();
    if (!r || r.owner !== owner) return notFound();
    const sql = this.ctx.storage.sql;
    const row = sql.exec<{ events: number; bytes: number }>("SELECT events, bytes FROM timeline_turns WHERE turn = ?", batch.turn).toArray()[0];
    const facts: TurnFacts = row ? { events: row.events, bytes: row.bytes } : { events: 0, bytes: 0 };
    const stored = new Map<number, string>();
    const first = batch.events[0].seq;
    if (first <= facts.events) {
      const rows = sql.exec<{ seq: number; json: string }>("SELECT seq, json FROM timeline WHERE turn = ? AND seq >= ? AND seq < ?", batch.turn, first, first + batch.events.length);
      for (const { seq, json } of rows) stored.set(seq, json);
    }
    let taken;
    try {
      taken = take(batch, r.turn, facts, stored);
    } catch (e) {
      if (!(e instanceof TimelineRefusal)) throw e;
      return { status: e.status, body: { error: { code: e.code, message: e.message }, turn: e.turn, next: e.next } };
    }
    if (taken.added.length > 0) {
      const at = Date.now();
      this.ctx.storage.transactionSync(() => {
        for (const [seq, json] of taken.added) {
          sql.exec("INSERT INTO timeline (turn, seq, at, json) VALUES (?, ?, ?, ?)", batch.turn, seq, at, json);
        }
        sql.exec("INSERT OR REPLACE INTO timeline_turns (turn, events, bytes) VALUES (?, ?, ?)", batch.turn, taken.facts.events, taken.facts.bytes);
      });
    }
    return ok({ turn: batch.turn, next: taken.facts.events + 1 });
  }

  /// A change of the work record: the next record (null when nothing moved) and what to answer.
  private changeWork(owner: string, kind: string, actor: Role, change: (w: Work, now: number) => { next: Work | null; answer: Record<string, unknown> }): Promise<Answer> {
    return this.guard(async () => {
      const r = this.load();
      if (!r || r.owner !== owner) return notFound();
      if (r.state === "closed") return refusal(409, "handoff.closed", "the hand-off is closed", r);
      const at = Date.now();
      const { next, answer } = change(this.loadWork(), at);
      if (!next) return ok({ handoff: r, ...answer });
      const text = workJson(next);
      if (utf8Bytes(text) > WORK_RECORD_BYTES_MAX) throw tooLarge(`the work record would pass ${WORK_RECORD_BYTES_MAX} bytes`);
      const record: HandoffRecord = { ...r, version: r.version + 1, updated_at: new Date(at).toISOString() };
      this.store(record, kind, actor, () => this.writeWork(text));
      this.work = next;
      await this.index(record);
      return ok({ handoff: record, ...answer });
    });
  }

  setWork(owner: string, spec: Work["spec"] & object): Promise<Answer> {
    return this.changeWork(owner, "work", "owner", (w) => ({ next: setWork(w, spec), answer: { work: spec } }));
  }

  decide(owner: string, by: Role, input: Parameters<typeof recordDecision>[1]): Promise<Answer> {
    return this.changeWork(owner, "decision", by, (w, now) => {
      const { next, item } = recordDecision(w, input, by, now);
      return { next, answer: { decision: item } };
    });
  }

  addArtifact(owner: string, by: Role, input: Parameters<typeof addArtifact>[1]): Promise<Answer> {
    return this.changeWork(owner, "artifact", by, (w, now) => {
      const { next, item } = addArtifact(w, input, by, now);
      return { next, answer: { artifact: item } };
    });
  }

  workspace(owner: string, files: Parameters<typeof reportWorkspace>[1]): Promise<Answer> {
    return this.changeWork(owner, "workspace", "machine", (w) => {
      const { next, files: reported, paths_kept } = reportWorkspace(w, files);
      return { next, answer: { workspace: { files: reported, paths_kept } } };
    });
  }

  /// A dry run of opening turn `after + 1` with a hand-off: the open's rules, then the package
  /// it would compile and its briefing; nothing is written.
  preview(owner: string, after: number, request: PackageRequest, budget: number, baseUrl: string | null): Promise<Answer> {
    return this.guard(async () => {
      const r = this.load();
      if (!r || r.owner !== owner) return notFound();
      const current = `turn ${r.turn} is current (${r.status}, version ${r.version})`;
      if (r.state === "closed") return refusal(409, "handoff.closed", `the hand-off is closed (version ${r.version})`, r);
      // The same open again compiles nothing, and the reference keeps no package to answer.
      if (after + 1 === r.turn) return refusal(404, "package.not_found", "this hand-off has no package yet", r);
      if (after !== r.turn) return refusal(409, "handoff.turn_conflict", `the request names another turn than the current one: ${current}`, r);
      if (!hasEnded(r.status)) return refusal(409, "handoff.turn_running", `a turn is still going; steer it or cancel it first: ${current}`, r);
      const turn = r.turn + 1;
      const lineage: TurnEntry[] = [...this.loadLineage(), { turn, status: "running", runtime: request.runtime }];
      const phase = { id: r.id, session: r.session, machine: r.machine, turn, state: r.state, status: "running" as Status };
      const pkg = compile(phase, this.loadWork(), lineage, request, Date.now());
      const package_hash = await packageHash(pkg);
      const briefing = render({ package_version: 1, package_hash, package: pkg }, budget, baseUrl === null ? null : { baseUrl });
      return ok({ turn, package_version: 1, package_hash, state: "offered", package: pkg, briefing, handoff: r });
    });
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

  /// The hop over fetch: `POST /put` with the record.
  async fetch(request: Request): Promise<Response> {
    this.put((await request.json()) as HandoffRecord);
    return new Response(null, { status: 204 });
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
