// The TypeScript client against the real local Worker (HANDOFF_URL), with Node's test runner:
//   scripts/client test http://127.0.0.1:8787
// scripts/test starts the Worker and runs this after building the client (dist/).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";
import { readFileSync } from "node:fs";
import { HandoffClient, HandoffError, WatchUnserved } from "../dist/index.js";

const URL_ = process.env.HANDOFF_URL;
if (!URL_) throw new Error("HANDOFF_URL: the local Worker to test against");
const KEY = process.env.HANDOFF_SIGNING_KEY;
if (!KEY) throw new Error("HANDOFF_SIGNING_KEY: the key the Worker under test verifies tokens with");

const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
/** An owner token signed like the service's (HS256), valid for an hour. */
function ownerToken(owner, ttlS = 3600) {
  const head = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub: owner, role: "owner", exp: Math.floor(Date.now() / 1000) + ttlS })}`;
  return `${head}.${createHmac("sha256", KEY).update(head).digest("base64url")}`;
}

const owner = () => new HandoffClient({ baseUrl: URL_, token: ownerToken(`ts-${randomUUID().slice(0, 8)}`) });
const session = () => `chat-${randomUUID().slice(0, 12)}`;
const work = { title: "Parser", goal: "Parse the config file", constraints: [], acceptance_criteria: ["all tests pass"] };

/** A fetch that counts what it sends (and may answer some of it itself). */
function counting(answer) {
  const sent = [];
  const fetch = async (request) => {
    sent.push({ method: request.method, path: new URL(request.url).pathname, key: request.headers.get("Idempotency-Key") });
    const made = answer?.(sent.length, request);
    return made ?? globalThis.fetch(request);
  };
  return { sent, fetch };
}

test("a whole session through the client: create, report, hand the next turn off, accept, close", async () => {
  const me = owner();
  const { handoff, machineToken, created } = await me.create({ session: session(), machine: "m1", size: "large" });
  assert.equal(created, true);
  const again = await me.create({ session: handoff.session, machine: "m1", size: "large" });
  assert.equal(again.created, false, "the session's hand-off again");
  assert.equal(again.machineToken, undefined, "a repeated create mints no token and ends none");
  assert.equal((await new HandoffClient({ baseUrl: URL_, token: machineToken }).get(handoff.id)).id, handoff.id);
  // The owner's fresh machine token ends the one minted before it.
  const fresh = await me.machineToken(handoff.id);
  await assert.rejects(new HandoffClient({ baseUrl: URL_, token: machineToken }).get(handoff.id), (e) => e instanceof HandoffError && e.status === 401 && e.code === "auth.revoked");
  const machine = new HandoffClient({ baseUrl: URL_, token: fresh });
  let h = await machine.report(handoff.id, { turn: 1, status: "done", summary: "parsed half of it" });
  assert.equal(h.status, "done");
  await me.setWork(handoff.id, work);
  h = await me.openTurn(handoff.id, {
    after: 1,
    handoff: { runtime: "codex", objective: "Finish the parser", purpose: "the context window is nearly full" },
  });
  assert.equal(h.turn, 2);
  assert.equal(h.runtime, "codex");
  const latest = await machine.getPackage(handoff.id);
  assert.equal(latest.package_hash, h.package_hash);
  const accepted = await machine.acceptPackage(handoff.id, latest.package_hash);
  assert.equal(accepted.state, "accepted");
  assert.match(await machine.briefing(handoff.id, { budget: 4000 }), /Finish the parser/);
  await machine.report(handoff.id, { turn: 2, status: "done", summary: "parser finished" });
  h = await me.close(handoff.id);
  assert.equal(h.state, "closed");
  const page = await me.list({ state: "closed" });
  assert.deepEqual(page.handoffs.map((r) => r.id), [handoff.id], "the owner's list has it, closed");
  const lineage = await me.turns(handoff.id);
  assert.deepEqual(lineage.turns.map((t) => [t.turn, t.runtime]), [[1, null], [2, "codex"]]);
});

test("a prompt travels with create and openTurn, reads back on the record and in the lineage, and other words for the same turn are a turn_conflict carrying the words taken", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large", prompt: "Add a CSV export.\nKeep the old one.", workspace: "api", model: "opus" });
  assert.equal(handoff.prompt, "Add a CSV export.\nKeep the old one.");
  assert.deepEqual([handoff.workspace, handoff.model], ["api", "opus"], "where and how turn 1 runs, on the record");
  const again = await me.create({ session: handoff.session, machine: "m1", size: "large" });
  assert.equal(again.created, false, "no prompt: the hand-off as it is, and no token");
  // The first token lives on: a repeat ends none.
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  await machine.report(handoff.id, { turn: 1, status: "done" });
  const h = await me.openTurn(handoff.id, { after: 1, prompt: "Now the tests." });
  assert.equal(h.prompt, "Now the tests.");
  assert.equal((await machine.get(handoff.id)).prompt, "Now the tests.", "the machine reads it");
  const { turns } = await machine.turns(handoff.id);
  assert.deepEqual(turns.map((t) => t.prompt), ["Add a CSV export.\nKeep the old one.", "Now the tests."]);
  assert.equal((await me.openTurn(handoff.id, { after: 1, prompt: "Now the tests." })).version, h.version, "the same words: the same turn");
  const error = await me.openTurn(handoff.id, { after: 1, prompt: "Now the docs." }).then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.ok(error instanceof HandoffError, String(error));
  assert.equal(error.code, "handoff.turn_conflict");
  assert.equal(error.handoff?.prompt, "Now the tests.", "the words that were taken");
  const empty = await me.openTurn(handoff.id, { after: 1, prompt: "" }).then(() => assert.fail("answered"), (e) => e);
  assert.equal(empty.code, "request.invalid");
});

test("the machine asks, the owner answers with answer(), and the machine's follow sees the answer", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  const asked = await machine.report(handoff.id, {
    turn: 1,
    status: "needs-you",
    question: { kind: "permission", text: "Bash: npm test", options: [{ id: "allow", label: "Allow" }, { id: "deny", label: "Deny" }] },
  });
  const q = asked.question;
  assert.ok(q && q.answer === null && q.id.startsWith("q_"));
  assert.ok((await me.get(handoff.id)).actions.includes("answer"));
  const controller = new AbortController();
  const seen = (async () => {
    for await (const h of machine.follow(handoff.id, { after: asked.version, signal: controller.signal })) {
      if (h.question?.answer) return h.question.answer;
    }
  })();
  const answered = await me.answer(handoff.id, { question: q.id, option: "deny", note: "not now" });
  assert.equal(answered.status, "running");
  assert.deepEqual({ ...(await seen) , answered_at: undefined }, { option: "deny", note: "not now", answered_at: undefined });
  controller.abort();
  const again = await me.answer(handoff.id, { question: q.id, option: "deny" });
  assert.equal(again.version, answered.version, "the same option again moves nothing");
  await assert.rejects(me.answer(handoff.id, { question: q.id, option: "allow" }), (e) => e instanceof HandoffError && e.code === "question.answered" && e.handoff?.id === handoff.id);
});

test("a change whose first answer was lost is retried with the same key and moves the version once", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  // A proxy in front of the Worker that forwards the first report, waits for the Worker's
  // whole answer, and then cuts the client's connection instead of passing the answer on.
  const seen = [];
  const upstream = new URL(URL_);
  const proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      seen.push({ path: req.url, key: req.headers["idempotency-key"] });
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          const body = [];
          answer.on("data", (c) => body.push(c));
          answer.on("end", () => {
            if (req.url.endsWith("/report") && seen.filter((s) => s.path.endsWith("/report")).length === 1) {
              req.socket.destroy();
              return;
            }
            res.writeHead(answer.statusCode, answer.headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const via = new HandoffClient({ baseUrl: `http://127.0.0.1:${proxy.address().port}`, token: machineToken });
    const h = await via.report(handoff.id, { turn: 1, status: "needs-you", summary: "which database?" });
    assert.equal(h.version, handoff.version + 1, "the first answer, replayed");
    const reports = seen.filter((s) => s.path.endsWith("/report"));
    assert.equal(reports.length, 2, "sent twice: the answer of the first was lost");
    assert.ok(reports[0].key && reports[0].key === reports[1].key, "with the same Idempotency-Key");
    assert.equal((await me.get(handoff.id)).version, handoff.version + 1, "the version moved once");
  } finally {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  }
});

test("follow yields each version once, in order, and ends with the close", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  // In lockstep (each change waits until follow has seen the one before): every version.
  const seen = [];
  let saw;
  let next = new Promise((resolve) => (saw = resolve));
  const following = (async () => {
    for await (const h of me.follow(handoff.id, { after: 0, timeoutS: 5 })) {
      seen.push(h.version);
      saw();
    }
  })();
  for (let i = 0; i < 10; i++) {
    await next;
    next = new Promise((resolve) => (saw = resolve));
    await machine.report(handoff.id, { turn: 1, status: i % 2 ? "running" : "needs-you", summary: `step ${i}` });
  }
  await next;
  await me.close(handoff.id);
  await following;
  const last = (await me.get(handoff.id)).version;
  assert.deepEqual(seen, Array.from({ length: last }, (_, i) => i + 1), "every version, once, in order");
});

/** The sockets watching a hand-off, by role (a test hook of the local Worker). */
async function watchers(token, id) {
  const answer = await fetch(`${URL_}/v1/test/handoffs/${id}/storage`, { headers: { Authorization: `Bearer ${token}` } });
  return (await answer.json()).watchers;
}

test("follow goes over the watch: one socket, the token as a subprotocol, every version once", async () => {
  const token = ownerToken(`ts-${randomUUID().slice(0, 8)}`);
  const me = new HandoffClient({ baseUrl: URL_, token });
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  const seen = [];
  let saw;
  let next = new Promise((resolve) => (saw = resolve));
  const following = (async () => {
    for await (const h of me.follow(handoff.id, { after: 0 })) {
      seen.push(h.version);
      saw();
    }
  })();
  await next;
  assert.deepEqual(await watchers(token, handoff.id), { owner: 1, machine: 0 }, "one socket, no held /wait");
  next = new Promise((resolve) => (saw = resolve));
  await machine.report(handoff.id, { turn: 1, status: "needs-you", summary: "over the watch" });
  await next;
  await me.close(handoff.id);
  await following;
  assert.deepEqual(seen, [1, 2, 3]);
});

test("follow falls back to /wait where the watch is not served", async () => {
  // A WebSocket that is refused before it opens, as a proxy without WebSockets would.
  class Refused extends EventTarget {
    static OPEN = 1;
    static CONNECTING = 0;
    OPEN = 1;
    CONNECTING = 0;
    readyState = 3;
    constructor() {
      super();
      setTimeout(() => this.dispatchEvent(Object.assign(new Event("close"), { code: 1006 })), 10);
    }
    send() {}
    close() {}
  }
  const { sent, fetch } = counting();
  const me = new HandoffClient({ baseUrl: URL_, token: ownerToken(`ts-${randomUUID().slice(0, 8)}`), fetch, WebSocket: Refused });
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  await assert.rejects(async () => {
    for await (const _ of me.watch(handoff.id)) assert.fail("no record over a refused watch");
  }, WatchUnserved);
  const following = (async () => {
    const seen = [];
    for await (const h of me.follow(handoff.id, { after: handoff.version, timeoutS: 5 })) seen.push(h.state);
    return seen;
  })();
  await new Promise((resolve) => setTimeout(resolve, 300));
  await me.close(handoff.id);
  assert.deepEqual(await following, ["closed"]);
  assert.ok(sent.some((r) => r.path.endsWith("/wait")), "it followed with /wait");
});

test("a watch whose token expires ends with auth.invalid (4401)", async () => {
  const name = `ts-${randomUUID().slice(0, 8)}`;
  const me = new HandoffClient({ baseUrl: URL_, token: ownerToken(name) });
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  // Accepted for three more seconds: its exp is 57 s ago, within the service's 60 s of skew.
  const short = new HandoffClient({ baseUrl: URL_, token: ownerToken(name, -57), attempts: 1 });
  const watching = (async () => {
    for await (const _ of short.watch(handoff.id, { after: handoff.version })) {
      // nothing is reported before the expiry
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 4000));
  await machine.report(handoff.id, { turn: 1, status: "needs-you", summary: "after the expiry" });
  await assert.rejects(watching, (e) => e instanceof HandoffError && e.code === "auth.invalid");
});

test("follow over a busy session never repeats or goes back, and reaches the close", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  const seen = [];
  const following = (async () => {
    for await (const h of me.follow(handoff.id, { timeoutS: 5 })) seen.push([h.version, h.state]);
  })();
  for (let i = 0; i < 30; i++) {
    await machine.report(handoff.id, { turn: 1, status: i % 2 ? "running" : "needs-you", summary: `busy ${i}` });
  }
  const closed = await me.close(handoff.id);
  await following;
  const versions = seen.map(([v]) => v);
  assert.ok(versions.every((v, i) => i === 0 || v > versions[i - 1]), `strictly rising: ${versions}`);
  assert.deepEqual(seen.at(-1), [closed.version, "closed"]);
});

test("follow does not repeat a version when a wait times out on an idle session", async () => {
  const me = owner();
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  const seen = [];
  const following = (async () => {
    for await (const h of me.follow(handoff.id, { after: handoff.version, timeoutS: 1 })) seen.push(h.version);
  })();
  await new Promise((resolve) => setTimeout(resolve, 2500)); // at least one wait answers unchanged
  const closed = await me.close(handoff.id);
  await following;
  assert.deepEqual(seen, [closed.version]);
});

test("follow ends quietly when its signal aborts", async () => {
  const me = owner();
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  const stop = new AbortController();
  const seen = [];
  setTimeout(() => stop.abort(), 300);
  for await (const h of me.follow(handoff.id, { after: handoff.version, timeoutS: 30, signal: stop.signal })) seen.push(h);
  assert.deepEqual(seen, []);
});

test("each refusal surfaces as a HandoffError with its code and the hand-off it carried, and a 4xx is sent once", async () => {
  const { sent, fetch } = counting();
  const token = ownerToken(`ts-${randomUUID().slice(0, 8)}`);
  const me = new HandoffClient({ baseUrl: URL_, token, fetch });
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken, fetch });
  const refused = async (call, status, code) => {
    const before = sent.length;
    const error = await call().then(
      () => assert.fail(`${code}: answered`),
      (e) => e,
    );
    assert.ok(error instanceof HandoffError, String(error));
    assert.equal(error.code, code);
    assert.equal(error.status, status);
    assert.equal(sent.length - before, 1, `${code} is final: sent once`);
    return error;
  };
  let e = await refused(() => machine.report(handoff.id, { turn: 2, status: "done" }), 409, "handoff.turn_out_of_order");
  assert.equal(e.handoff?.id, handoff.id, "the refusal carries the hand-off");
  e = await refused(() => me.create({ session: handoff.session, machine: "m2", size: "large" }), 409, "handoff.conflict");
  assert.equal(e.handoff?.machine, "m1");
  await refused(() => me.openTurn(handoff.id, { after: 1 }), 409, "handoff.turn_running");
  await refused(() => me.recordDecision(handoff.id, { statement: "s", evidence: [], supersedes: "dec_9" }), 404, "decision.not_found");
  await refused(() => me.resolveBlocker(handoff.id, "blk_9"), 404, "blocker.not_found");
  await machine.report(handoff.id, { turn: 1, status: "done" });
  await me.setWork(handoff.id, work);
  await me.openTurn(handoff.id, { after: 1 });
  e = await refused(() => machine.report(handoff.id, { turn: 1, status: "done" }), 409, "handoff.stale");
  assert.equal(e.handoff?.turn, 2);
  await refused(() => me.report(handoff.id, { turn: 2, status: "done" }), 403, "auth.forbidden");
  await refused(() => me.get("ho_00000000000000000000000000000000"), 404, "handoff.not_found");
  await refused(() => machine.report(handoff.id, { turn: 2, status: "exploded" }), 400, "request.invalid");
  await refused(() => machine.acceptPackage(handoff.id, "0".repeat(64)), 404, "package.not_found");
  await me.compilePackage(handoff.id, { runtime: "codex", objective: "o", purpose: "p" });
  e = await refused(() => machine.acceptPackage(handoff.id, "0".repeat(64)), 409, "package.stale");
  assert.match(e.packageHash ?? "", /^[0-9a-f]{64}$/, "a stale accept carries the current hash");
  await me.cancel(handoff.id, {}, { idempotencyKey: "same-key" });
  await refused(() => me.close(handoff.id, { idempotencyKey: "same-key" }), 422, "idempotency.mismatch");
  await me.close(handoff.id);
  e = await refused(() => me.cancel(handoff.id), 409, "handoff.closed");
  assert.equal(e.handoff?.state, "closed");
  const stranger = new HandoffClient({ baseUrl: URL_, token: "not.a.token", fetch });
  await refused(() => stranger.get(handoff.id), 401, "auth.invalid");
});

test("steer() sends words to the running turn, once per key, and is refused once the turn ends", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  const refused = async (call, status, code) => {
    const e = await refusalOf(call);
    assert.deepEqual([e.status, e.code], [status, code]);
    return e;
  };
  assert.ok(handoff.actions.includes("steer"), "steer is offered while the turn runs");
  const steered = await me.steer(handoff.id, { turn: 1, prompt: "Use SQLite instead." }, { idempotencyKey: "steer-key" });
  assert.equal(steered.version, handoff.version + 1);
  assert.deepEqual(steered.steers?.map((s) => s.prompt), ["Use SQLite instead."]);
  const again = await me.steer(handoff.id, { turn: 1, prompt: "Use SQLite instead." }, { idempotencyKey: "steer-key" });
  assert.equal(again.version, steered.version, "the same key is the same steer");
  await refused(() => me.steer(handoff.id, { turn: 1, prompt: "Postgres." }, { idempotencyKey: "steer-key" }), 422, "idempotency.mismatch");
  await refused(() => machine.steer(handoff.id, { turn: 1, prompt: "x" }), 403, "auth.forbidden");
  await machine.report(handoff.id, { turn: 1, status: "done" });
  const e = await refused(() => me.steer(handoff.id, { turn: 1, prompt: "too late" }), 409, "handoff.turn_finished");
  assert.equal(e.handoff?.status, "done");
});

test("429, 503 and network errors are retried with the same key, and give up after the last attempt", async () => {
  const me = owner();
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  const busy = (status) => new Response(JSON.stringify({ error: { code: status === 429 ? "wait.too_many" : "store.unavailable", message: "busy" } }), { status, headers: { "Retry-After": "0" } });
  const { sent, fetch } = counting((n) => (n === 1 ? busy(503) : n === 2 ? busy(429) : n === 3 ? Promise.reject(new TypeError("network")) : undefined));
  const flaky = new HandoffClient({ baseUrl: URL_, token: ownerToken(handoff.owner), fetch });
  const h = await flaky.cancel(handoff.id);
  assert.equal(h.status, "cancelled");
  assert.equal(sent.length, 4);
  assert.ok(sent.every((s) => s.key === sent[0].key && s.key), "one Idempotency-Key on every attempt");
  const { sent: tries, fetch: down } = counting(() => busy(503));
  const e = await new HandoffClient({ baseUrl: URL_, token: "t", fetch: down, attempts: 3 }).get(handoff.id).catch((x) => x);
  assert.equal(e.code, "store.unavailable");
  assert.equal(tries.length, 3, "three attempts, then the refusal");
});

test("the guide's From TypeScript example runs as written", async () => {
  const guide = readFileSync(new URL("../../../docs/console.md", import.meta.url), "utf8");
  const at = guide.indexOf("## From TypeScript");
  assert.ok(at >= 0, "docs/console.md has its From TypeScript section");
  const code = guide.slice(at).match(/```js\n([\s\S]*?)```/)?.[1]?.replace(/^import .*$/gm, "");
  assert.ok(code, "docs/console.md has a js example under From TypeScript");
  const run = new Function("HandoffClient", "HANDOFF_URL", "OWNER_TOKEN", `return (async () => {\n${code}\nreturn log;\n})();`);
  const log = await run(HandoffClient, URL_, ownerToken(`ts-readme-${randomUUID().slice(0, 8)}`));
  assert.deepEqual(log.at(-1), "closed");
});

/** The HandoffError a call is refused with. */
async function refusalOf(call) {
  const error = await call().then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.ok(error instanceof HandoffError, String(error));
  return error;
}

test("listIfChanged answers null while the page has not moved, and the page with its new ETag once it has", async () => {
  const me = owner();
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  const first = await me.listIfChanged({ limit: 10 });
  assert.ok(first && first.etag, "the first read has an ETag");
  assert.deepEqual(first.page.handoffs.map((r) => r.id), [handoff.id]);
  assert.equal(await me.listIfChanged({ limit: 10 }, first.etag), null, "304: the page held is current");
  await me.close(handoff.id);
  const moved = await me.listIfChanged({ limit: 10 }, first.etag);
  assert.ok(moved && moved.etag && moved.etag !== first.etag, "a page that moved comes back with another ETag");
  assert.equal(moved.page.handoffs[0].state, "closed");
});

test("getWork reads the whole work record beside the hand-off record of the same version", async () => {
  const me = owner();
  const { handoff } = await me.create({ session: session(), machine: "m1", size: "large" });
  await me.setWork(handoff.id, work);
  const { handoff: blocked } = await me.raiseBlocker(handoff.id, { title: "needs the schema", severity: "high" });
  const read = await me.getWork(handoff.id);
  assert.equal(read.handoff.version, blocked.version);
  assert.equal(read.work.spec?.title, "Parser");
  assert.deepEqual(read.work.blockers.map((b) => b.title), ["needs the schema"]);
  assert.equal((await refusalOf(() => me.getWork("ho_00000000000000000000000000000000"))).code, "handoff.not_found");
});

test("previewTurn answers what the turn would compile and its briefing within the budget, and writes nothing", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  await me.setWork(handoff.id, work);
  await new HandoffClient({ baseUrl: URL_, token: machineToken }).report(handoff.id, { turn: 1, status: "done", summary: "parsed half of it" });
  const before = await me.get(handoff.id);
  const request = { runtime: "codex", objective: "Finish the parser", purpose: "the context window is nearly full" };
  const preview = await me.previewTurn(handoff.id, { after: 1, handoff: request }, { budget: 600, reach: "none" });
  assert.equal(preview.turn, 2);
  assert.match(preview.package_hash, /^[0-9a-f]{64}$/);
  assert.match(preview.briefing, /Finish the parser/);
  assert.ok(new TextEncoder().encode(preview.briefing).length <= 600, "the briefing keeps the budget");
  const after = await me.get(handoff.id);
  assert.equal(after.version, before.version, "a dry run writes nothing");
  assert.equal(after.turn, 1);
  assert.equal((await refusalOf(() => me.previewTurn(handoff.id, { after: 7, handoff: request }))).status, 409, "a stale `after` is refused, dry run or not");
});

test("a service that never answers is a HandoffError network.unreachable after the last attempt", async () => {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  const gone = new HandoffClient({ baseUrl: `http://127.0.0.1:${port}`, token: "t", attempts: 2 });
  const e = await gone.get("ho_00000000000000000000000000000000").catch((x) => x);
  assert.ok(e instanceof HandoffError, `a HandoffError, not ${e}`);
  assert.equal(e.code, "network.unreachable");
  assert.equal(e.status, 0);
});

test("erase closes and erases the hand-off; its machine token is refused and erasing again answers the same", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  await me.erase(handoff.id);
  await assert.rejects(me.get(handoff.id), (e) => e instanceof HandoffError && e.code === "handoff.not_found");
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  await assert.rejects(machine.get(handoff.id), (e) => e instanceof HandoffError && e.code === "handoff.not_found");
  await me.erase(handoff.id);
  assert.deepEqual((await me.list()).handoffs, [], "its row is gone");
});


test("a device signs in with an owner token, its access token lists it as current and never signs a device in, and a revoke ends it", async () => {
  const token = ownerToken(`ts-${randomUUID().slice(0, 8)}`);
  const anyone = new HandoffClient({ baseUrl: URL_, token: "" });
  const access = await anyone.signInDevice(token, { name: "node test" });
  assert.equal(access.device.name, "node test");
  assert.ok(access.expires_in > 0 && access.expires_in <= 600, `${access.expires_in}`);
  const device = new HandoffClient({ baseUrl: URL_, token: access.access_token });
  const listed = await device.devices();
  assert.deepEqual(listed.map((d) => [d.id, d.current]), [[access.device.id, true]]);
  assert.equal((await device.renameDevice(access.device.id, "renamed")).name, "renamed");
  await assert.rejects(anyone.signInDevice(access.access_token), (e) => e instanceof HandoffError && e.status === 403 && e.code === "auth.forbidden");
  await assert.rejects(anyone.refreshDevice(), (e) => e instanceof HandoffError && e.status === 403, "no Origin from Node: the CSRF defence refuses");
  await device.revokeDevice(access.device.id);
  assert.deepEqual(await device.devices(), [], "its access token lasts its life; the device is gone");
  assert.equal(await new HandoffClient({ baseUrl: URL_, token }).revokeAllDevices(false), 0);
});

// ---- The turn's timeline. ----

test("the machine posts a turn's events and either role reads them; a repeat changes nothing and a gap is timeline.gap", async () => {
  const me = owner();
  const { handoff, machineToken } = await me.create({ session: session(), machine: "m1", size: "large" });
  const machine = new HandoffClient({ baseUrl: URL_, token: machineToken });
  const batch = { turn: 1, events: [{ seq: 1, kind: "message", text: "Reading the repo." }, { seq: 2, kind: "tool", id: "t1", name: "Bash", state: "started", input: "ls" }] };
  assert.deepEqual(await machine.postEvents(handoff.id, batch), { turn: 1, next: 3 });
  assert.deepEqual(await machine.postEvents(handoff.id, batch), { turn: 1, next: 3 }, "a repeat changes nothing");
  await assert.rejects(machine.postEvents(handoff.id, { turn: 1, events: [{ seq: 5, kind: "note", text: "late" }] }), (e) => e instanceof HandoffError && e.status === 409 && e.code === "timeline.gap");
  await assert.rejects(me.postEvents(handoff.id, batch), (e) => e instanceof HandoffError && e.status === 403);
  const read = await me.events(handoff.id, { after: 1 });
  assert.deepEqual([read.turn, read.next, read.events.map((e) => e.seq)], [1, 3, [2]]);
  assert.equal(read.events[0].input, "ls");
  const held = me.events(handoff.id, { after: 2, timeoutS: 20 });
  await new Promise((r) => setTimeout(r, 300));
  await machine.postEvents(handoff.id, { turn: 1, events: [{ seq: 3, kind: "note", text: "resumed" }] });
  assert.deepEqual((await held).events.map((e) => e.text), ["resumed"], "a held read wakes with the event");
  assert.equal((await me.get(handoff.id)).version, 1, "events move no version");
});
