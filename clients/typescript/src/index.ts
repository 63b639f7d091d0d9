// A typed client of the hand-off service. The request and answer types are generated from
// docs/openapi.yaml into schema.d.ts (never written by hand); this file is the thin layer on
// top, written once: one method per route, refusals as HandoffError, retries, watch() (every
// version over one WebSocket) and follow() (the watch, or /wait where it is not served).
//
// Retries: a request is tried again, after a jittered exponential backoff, only when it could
// not be delivered or answered (a network error) or when the API answered 429 or 503. Every
// other answer, and every other 4xx above all, is final. A change carries an Idempotency-Key
// that stays the same on every retry of one call, so a retry after a lost answer gets the
// first answer back instead of applying the change twice.
//
// Only web-platform APIs are used (fetch, Request, AbortSignal, crypto.randomUUID, WebSocket),
// so the client runs in a Worker, in Node 22 and in a browser alike.

import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
export type Handoff = Schemas["Handoff"];
export type ListRow = Schemas["ListRow"];
export type TurnEntry = Schemas["TurnEntry"];
export type ErrorCode = Schemas["ErrorCode"];
export type CreateInput = Schemas["CreateInput"];
export type OpenTurnInput = Schemas["OpenTurnInput"];
export type ReportInput = Schemas["ReportInput"];
export type CancelInput = Schemas["CancelInput"];
export type SteerInput = Schemas["SteerInput"];
export type Steer = Schemas["Steer"];
export type WorkInput = Schemas["WorkInput"];
export type DecisionInput = Schemas["DecisionInput"];
export type ArtifactInput = Schemas["ArtifactInput"];
export type BlockerInput = Schemas["BlockerInput"];
export type WorkspaceInput = Schemas["WorkspaceInput"];
export type PackageRequest = Schemas["PackageRequest"];
export type RejectInput = Schemas["RejectInput"];
export type PolicyInput = Schemas["PolicyInput"];
export type State = Schemas["State"];
export type QuestionInput = Schemas["QuestionInput"];
export type Question = Schemas["Question"];
export type AnswerInput = Schemas["AnswerInput"];
export type WebhookInput = Schemas["WebhookInput"];
export type PushSubscriptionInput = Schemas["PushSubscriptionInput"];
export type TurnPreview = Schemas["TurnPreview"];
export type WorkRecord = Schemas["WorkRecord"];
export type LatestPackage = Schemas["LatestPackage"];
export type ListPage = { handoffs: ListRow[]; cursor: string | null };
export type Device = Schemas["Device"];
export type DeviceAccess = Schemas["DeviceAccess"];
export type DeviceSignInInput = Schemas["DeviceSignInInput"];
export type TimelineEvent = Schemas["TimelineEvent"];
export type TimelineBatch = Schemas["TimelineBatch"];
export type TimelineTaken = Schemas["TimelineTaken"];
export type Timeline = Schemas["Timeline"];
export type SyncMode = Schemas["SyncMode"];
export type Enrolment = Schemas["Enrolment"];
export type Machine = Schemas["Machine"];

/** How many times a request is tried in all, at most (the first try and its retries). */
export const ATTEMPTS_MAX = 5;
/** The first retry waits up to this long; each next one up to twice as long. */
export const BACKOFF_MS_MIN = 100;
/** No retry waits longer than this, whatever a `Retry-After` says. */
export const BACKOFF_MS_MAX = 5_000;
/** Seconds a wait is held by the server before it answers the current record (at most 300). */
export const WAIT_TIMEOUT_S_DEFAULT = 30;
/** A watch acknowledges (`{"after": V}`) at least every this many records it reads: half the
 * service's `WATCH_UNACKED_FRAMES_MAX`, past which it closes the socket with 1013. */
export const WATCH_ACK_EVERY_FRAMES = 32;
/** …and at least every this many bytes: half the service's `WATCH_UNACKED_BYTES_MAX`. */
export const WATCH_ACK_EVERY_BYTES = 128 * 1024;
/** A watch quiet this long sends `ping` (answered `pong` by the runtime), so that proxies keep
 * the idle connection. */
export const WATCH_PING_MS = 30_000;

/** A refusal of the API: its code, its message, and the hand-off it carried, if any. */
export class HandoffError extends Error {
  readonly status: number;
  /** The API's code; `response.unexpected` for an answer that is not the API's, and
   * `network.unreachable` when no answer came after every try. */
  readonly code: ErrorCode | "response.unexpected" | "network.unreachable";
  readonly handoff: Handoff | undefined;
  /** On `package.stale`: the hash that is current. */
  readonly packageHash: string | undefined;

  constructor(status: number, code: HandoffError["code"], message: string, handoff?: Handoff, packageHash?: string) {
    super(`${code}: ${message}`);
    this.name = "HandoffError";
    this.status = status;
    this.code = code;
    this.handoff = handoff;
    this.packageHash = packageHash;
  }
}

export interface ClientOptions {
  /** Where the API is, e.g. `https://handoff.example.com` (no trailing `/v1`). */
  baseUrl: string;
  /** A bearer token (owner or machine), or a function that gives the current one. */
  token: string | (() => string);
  /** Tries per request, retries included (default {@link ATTEMPTS_MAX}). */
  attempts?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch;
  /** The WebSocket to watch with (default: the global one; without one, follow uses /wait). */
  WebSocket?: typeof globalThis.WebSocket;
}

/** Per-call options of a change. */
export interface ChangeOptions {
  /** The Idempotency-Key of this change; a fresh one is made when none is given. Give the
   * same key to a later call to make it a retry of this one. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface WatchOptions {
  /** The version already seen: the watch yields only versions above it (default 0). */
  after?: number;
  /** Ends the iteration, quietly, when aborted. */
  signal?: AbortSignal;
}

/** The watch is not served here (the upgrade was refused before the socket opened, or there
 * is no WebSocket): follow with /wait instead. */
export class WatchUnserved extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WatchUnserved";
  }
}

/** One socket's events, read in order. */
type SocketEvent = { kind: "open" } | { kind: "message"; data: unknown } | { kind: "close"; code: number } | { kind: "abort" };

function socketEvents(socket: WebSocket, signal?: AbortSignal): () => Promise<SocketEvent> {
  const queue: SocketEvent[] = [];
  let wake: (() => void) | undefined;
  const push = (e: SocketEvent) => {
    queue.push(e);
    wake?.();
  };
  socket.addEventListener("open", () => push({ kind: "open" }));
  socket.addEventListener("message", (e) => push({ kind: "message", data: e.data }));
  socket.addEventListener("close", (e) => push({ kind: "close", code: e.code }));
  signal?.addEventListener("abort", () => push({ kind: "abort" }), { once: true });
  if (signal?.aborted) push({ kind: "abort" });
  return async () => {
    while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    wake = undefined;
    return queue.shift() as SocketEvent;
  };
}

export interface FollowOptions {
  /** The version already seen: follow yields only versions above it (default 0). */
  after?: number;
  /** Seconds each wait is held (default {@link WAIT_TIMEOUT_S_DEFAULT}). */
  timeoutS?: number;
  /** Ends the iteration, quietly, when aborted. */
  signal?: AbortSignal;
}

const RETRIED_STATUSES = new Set([429, 503]);

function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }
    function aborted() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

/** Full jitter: a random wait up to `BACKOFF_MS_MIN · 2^retry`, capped; a server's
 * `Retry-After` (seconds) is honoured up to the cap. */
export function backoffMs(retry: number, retryAfter: string | null): number {
  const ceiling = Math.min(BACKOFF_MS_MAX, BACKOFF_MS_MIN * 2 ** retry);
  const asked = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 0;
  return Math.min(BACKOFF_MS_MAX, Math.max(asked, Math.random() * ceiling));
}

/** A fetch that retries network errors, 429 and 503, resending the same request (and so the
 * same Idempotency-Key) each time. */
function retrying(base: typeof globalThis.fetch, attempts: number) {
  return async (request: Request): Promise<Response> => {
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= attempts;
      let response: Response;
      try {
        response = await base(request.clone());
      } catch (error) {
        if (request.signal.aborted) throw error;
        if (last) throw new HandoffError(0, "network.unreachable", "the service did not answer; check the connection");
        await sleep(backoffMs(attempt - 1, null), request.signal);
        continue;
      }
      if (!RETRIED_STATUSES.has(response.status) || last) return response;
      // `owner.too_many_open` lasts until the owner closes a hand-off: no retry can succeed.
      if (response.status === 429 && (await response.clone().text()).includes('"owner.too_many_open"')) return response;
      const retryAfter = response.headers.get("Retry-After");
      await response.body?.cancel();
      await sleep(backoffMs(attempt - 1, retryAfter), request.signal);
    }
  };
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

function refusal(response: Response, error: unknown): HandoffError {
  const body = (typeof error === "object" && error !== null ? error : {}) as {
    error?: { code?: string; message?: string };
    handoff?: Handoff;
    package_hash?: string;
  };
  const code = body.error?.code;
  if (typeof code !== "string") {
    const text = typeof error === "string" ? error : JSON.stringify(error ?? null);
    return new HandoffError(response.status, "response.unexpected", `HTTP ${response.status}: ${text.slice(0, 200)}`);
  }
  return new HandoffError(response.status, code as ErrorCode, body.error?.message ?? "", body.handoff, body.package_hash);
}

/** An answer with no body (204), or its refusal. */
function done(answer: { error?: unknown; response: Response }): void {
  if (answer.error !== undefined || !answer.response.ok) throw refusal(answer.response, answer.error);
}

function take<T>(answer: Answer<T>): T {
  if (answer.error !== undefined || !answer.response.ok || answer.data === undefined) {
    throw refusal(answer.response, answer.error);
  }
  return answer.data;
}

export class HandoffClient {
  readonly #api;
  readonly #token: () => string;

  readonly #baseUrl: string;
  readonly #attempts: number;
  readonly #WebSocket: typeof globalThis.WebSocket | undefined;

  constructor(options: ClientOptions) {
    const token = options.token;
    this.#token = typeof token === "function" ? token : () => token;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#attempts = options.attempts ?? ATTEMPTS_MAX;
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    const base = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#api = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      fetch: retrying(base, options.attempts ?? ATTEMPTS_MAX),
    });
  }

  #headers(key?: string): Record<string, string> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.#token()}` };
    if (key !== undefined) headers["Idempotency-Key"] = key;
    return headers;
  }

  #key(options?: ChangeOptions): string {
    return options?.idempotencyKey ?? crypto.randomUUID();
  }

  /** The headers and signal of a change: its bearer token and its Idempotency-Key. */
  #change(options?: ChangeOptions) {
    return { headers: this.#headers(this.#key(options)), signal: options?.signal };
  }

  #id(id: string) {
    return { path: { id } };
  }

  // ------------------------------------------------------------------ the hand-off and its turns

  /** `POST /v1/handoffs` (owner): the session's hand-off, made or found (`created` says which),
   * and, when made, the machine token for it (a repeat mints none and ends none:
   * `machineToken` is then undefined). `input.prompt` is turn 1's words, and `workspace`,
   * `runtime`, `model`, `requested_permission_mode` where and how it runs: found again with the
   * same values or none, it answers the hand-off as it is; others are `handoff.conflict`. */
  async create(input: CreateInput, options?: ChangeOptions) {
    const answer = await this.#api.POST("/v1/handoffs", { body: input, ...this.#change(options) });
    const data = take(answer);
    return { handoff: data.handoff, machineToken: data.machine_token, created: answer.response.status === 201 };
  }

  /** `POST …/machine-token` (owner): a fresh machine token for an open hand-off, which ends the
   * ones minted before it. */
  async machineToken(id: string, options?: ChangeOptions): Promise<string> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/machine-token", { params: this.#id(id), ...this.#change(options) });
    const token = take(answer).machine_token;
    if (token === undefined) throw new Error("the machine-token answer carries no machine_token");
    return token;
  }

  /** `GET /v1/handoffs` (owner): one page of the owner's list, newest first. */
  async list(query: { state?: State; limit?: number; cursor?: string } = {}, signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/handoffs", { params: { query }, headers: this.#headers(), signal }));
  }

  /** `GET /v1/handoffs` again, with the `ETag` of the page held (`If-None-Match`): `null` when
   * that page has not moved (304, no body), otherwise the page and its `ETag`. */
  async listIfChanged(
    query: { state?: State; limit?: number; cursor?: string } = {},
    etag: string | null = null,
    signal?: AbortSignal,
  ): Promise<{ page: ListPage; etag: string | null } | null> {
    const headers = this.#headers();
    if (etag !== null) headers["If-None-Match"] = etag;
    const answer = await this.#api.GET("/v1/handoffs", { params: { query }, headers, signal });
    if (answer.response.status === 304) return null;
    return { page: take(answer), etag: answer.response.headers.get("ETag") };
  }

  async get(id: string, signal?: AbortSignal): Promise<Handoff> {
    return take(await this.#api.GET("/v1/handoffs/{id}", { params: this.#id(id), headers: this.#headers(), signal })).handoff;
  }

  /** `POST …/turns` (owner): opens the next turn after `after` with the owner's words
   * (`input.prompt`), optionally handing it to a runtime. Sent again for the same `after`, it
   * answers the same turn only with the same words and hand-off; otherwise it throws
   * `handoff.turn_conflict`, whose `handoff.prompt` is the words that were taken. */
  async openTurn(id: string, input: OpenTurnInput, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/turns", { params: this.#id(id), body: input, ...this.#change(options) });
    return take(answer).handoff;
  }

  /** `POST …/turns?dry_run=true` (owner): what opening the turn would compile now, and its
   * briefing within `budget` bytes for `reach`; writes nothing (and needs no key). */
  async previewTurn(
    id: string,
    input: OpenTurnInput,
    query: { budget?: number; reach?: "api" | "none" } = {},
    signal?: AbortSignal,
  ): Promise<TurnPreview> {
    const params = { path: { id }, query: { dry_run: "true" as const, ...query } };
    const answer = await this.#api.POST("/v1/handoffs/{id}/turns", { params, body: input, headers: this.#headers(), signal });
    const data = take(answer);
    if (!("briefing" in data)) throw new HandoffError(answer.response.status, "response.unexpected", "the dry run answered no preview");
    return data;
  }

  /** `GET …/turns`: a page of the lineage. */
  async turns(id: string, query: { before?: number; limit?: number } = {}, signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/handoffs/{id}/turns", { params: { path: { id }, query }, headers: this.#headers(), signal }));
  }

  /** `POST …/report` (machine): the current turn's status. */
  async report(id: string, input: ReportInput, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/report", { params: this.#id(id), body: input, ...this.#change(options) });
    return take(answer).handoff;
  }

  async cancel(id: string, input: CancelInput = {}, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/cancel", { params: this.#id(id), body: input, ...this.#change(options) });
    return take(answer).handoff;
  }

  /** `POST …/steer` (owner): words for the running turn `input.turn`, which the machine hands
   * its harness; the record's `steers` shows them. One key per call (and per retry of it), so a
   * retried steer is one steer; the same words in another call are another. */
  async steer(id: string, input: SteerInput, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/steer", { params: this.#id(id), body: input, ...this.#change(options) });
    return take(answer).handoff;
  }

  async close(id: string, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/close", { params: this.#id(id), body: {}, ...this.#change(options) });
    return take(answer).handoff;
  }

  /** `POST …/answer` (owner): answers the open question (`handoff.question.id`) with one of its
   * options; the same option again answers 200 and moves nothing. */
  async answer(id: string, input: AnswerInput, options?: ChangeOptions): Promise<Handoff> {
    const answer = await this.#api.POST("/v1/handoffs/{id}/answer", { params: this.#id(id), body: input, ...this.#change(options) });
    return take(answer).handoff;
  }

  /** `DELETE /v1/handoffs/:id` (owner): closes it if open, then erases it and its list row;
   * its machine tokens are refused from then on. The API answers one already gone 404
   * `handoff.not_found`, as it answers every id that is not the caller's: gone either way, so
   * erasing again (a retry whose first answer was lost) resolves the same. */
  async erase(id: string, options?: ChangeOptions): Promise<void> {
    const answer = await this.#api.DELETE("/v1/handoffs/{id}", { params: this.#id(id), ...this.#change(options) });
    if (answer.response.status === 404 && (answer.error as { error?: { code?: string } } | undefined)?.error?.code === "handoff.not_found") return;
    done(answer);
  }

  /** `GET …/wait`: the record once its version is above `after` (or it is closed), or the
   * current record when `timeoutS` passes first. */
  async wait(id: string, query: { after?: number; timeoutS?: number } = {}, signal?: AbortSignal): Promise<Handoff> {
    const params = { path: { id }, query: { after: query.after ?? 0, timeout: query.timeoutS ?? WAIT_TIMEOUT_S_DEFAULT } };
    return take(await this.#api.GET("/v1/handoffs/{id}/wait", { params, headers: this.#headers(), signal })).handoff;
  }

  /** `GET …/watch`: every record above `after` over one WebSocket, each version once, in
   * order, until the hand-off is closed (its closed record is the last) or `signal` aborts.
   * The token goes as the subprotocol `bearer.<token>` next to `handoff.v1`, as a browser
   * must send it. It acknowledges as the service asks, pings when idle, and reconnects from
   * the last version it saw after a 1013 or a lost connection. Throws {@link WatchUnserved}
   * when the first socket closes before it opens (follow then uses /wait), and a
   * {@link HandoffError} `auth.invalid` when the token expires during the watch (4401). */
  async *watch(id: string, options: WatchOptions = {}): AsyncGenerator<Handoff, void, undefined> {
    const WS = this.#WebSocket;
    if (WS === undefined) throw new WatchUnserved("no WebSocket in this runtime");
    let after = options.after ?? 0;
    let everOpened = false;
    for (let failures = 0; ; ) {
      const url = `${this.#baseUrl.replace(/^http/, "ws")}/v1/handoffs/${encodeURIComponent(id)}/watch?after=${after}`;
      const socket = new WS(url, ["handoff.v1", `bearer.${this.#token()}`]);
      const next = socketEvents(socket, options.signal);
      let frames = 0;
      let bytes = 0;
      let ping: ReturnType<typeof setInterval> | undefined;
      let ended: number | undefined;
      try {
        for (;;) {
          const e = await next();
          if (e.kind === "abort") return;
          if (e.kind === "open") {
            everOpened = true;
            ping = setInterval(() => socket.send("ping"), WATCH_PING_MS);
            continue;
          }
          if (e.kind === "close") {
            ended = e.code;
            break;
          }
          if (typeof e.data !== "string" || e.data === "pong") continue;
          const h = (JSON.parse(e.data) as { handoff: Handoff }).handoff;
          failures = 0;
          frames += 1;
          bytes += e.data.length;
          if (h.version > after) {
            after = h.version;
            yield h;
          }
          if (h.state === "closed") return;
          if (frames >= WATCH_ACK_EVERY_FRAMES || bytes >= WATCH_ACK_EVERY_BYTES) {
            socket.send(JSON.stringify({ after }));
            frames = 0;
            bytes = 0;
          }
        }
      } finally {
        clearInterval(ping);
        if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(1000);
      }
      if (!everOpened) throw new WatchUnserved(`the watch was refused (close ${ended})`);
      if (ended === 4401) throw new HandoffError(401, "auth.invalid", "the token expired during the watch");
      if (ended === 1003) throw new HandoffError(0, "response.unexpected", "the watch refused a message of this client");
      failures += 1;
      if (failures >= this.#attempts) throw new HandoffError(0, "response.unexpected", `the watch kept closing (${ended})`);
      try {
        await sleep(backoffMs(failures - 1, null), options.signal);
      } catch {
        return; // aborted
      }
    }
  }

  /** Every record above `after`, in order, each version at most once, until the hand-off is
   * closed (its closed record is the last) or `signal` aborts: over the watch where it is
   * served, otherwise with /wait asked again and again. A record is state, not a log: over
   * /wait, versions that a later one replaced before a wait answered are not seen. */
  async *follow(id: string, options: FollowOptions = {}): AsyncGenerator<Handoff, void, undefined> {
    let after = options.after ?? 0;
    try {
      for await (const h of this.watch(id, { after, signal: options.signal })) {
        after = h.version;
        yield h;
      }
      return;
    } catch (error) {
      if (!(error instanceof WatchUnserved)) throw error;
    }
    yield* this.followWaiting(id, { ...options, after });
  }

  /** {@link follow} with /wait only. */
  async *followWaiting(id: string, options: FollowOptions = {}): AsyncGenerator<Handoff, void, undefined> {
    let after = options.after ?? 0;
    for (;;) {
      let h: Handoff;
      try {
        h = await this.wait(id, { after, timeoutS: options.timeoutS }, options.signal);
      } catch (error) {
        if (options.signal?.aborted) return;
        throw error;
      }
      if (h.version > after) {
        after = h.version;
        yield h;
      }
      if (h.state === "closed") return;
    }
  }

  // ------------------------------------------------------------------ the work record

  /** `GET …/work`: the whole work record, beside the hand-off record read with it. */
  async getWork(id: string, signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/handoffs/{id}/work", { params: this.#id(id), headers: this.#headers(), signal }));
  }

  async setWork(id: string, input: WorkInput, options?: ChangeOptions) {
    return take(await this.#api.PUT("/v1/handoffs/{id}/work", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  async recordDecision(id: string, input: DecisionInput, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/decisions", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  async recordArtifact(id: string, input: ArtifactInput, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/artifacts", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  async raiseBlocker(id: string, input: BlockerInput, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/blockers", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  async resolveBlocker(id: string, blockerId: string, options?: ChangeOptions) {
    const params = { path: { id, bid: blockerId } };
    return take(await this.#api.POST("/v1/handoffs/{id}/blockers/{bid}/resolve", { params, ...this.#change(options) }));
  }

  async reportWorkspace(id: string, input: WorkspaceInput, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/workspace", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  async setPolicy(id: string, input: PolicyInput, options?: ChangeOptions) {
    return take(await this.#api.PUT("/v1/handoffs/{id}/policy", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  // ------------------------------------------------------------------ packages and briefings

  /** `POST …/package` (owner); with `dryRun` a preview that writes nothing (and needs no key). */
  async compilePackage(id: string, input: PackageRequest, options?: ChangeOptions & { dryRun?: boolean }) {
    const dryRun = options?.dryRun ?? false;
    const headers = dryRun ? this.#headers() : this.#headers(this.#key(options));
    const params = { path: { id }, query: dryRun ? { dry_run: true } : {} };
    return take(await this.#api.POST("/v1/handoffs/{id}/package", { params, body: input, headers, signal: options?.signal }));
  }

  /** `GET …/package`: the latest package and what its destination said of it. */
  async getPackage(id: string, signal?: AbortSignal): Promise<LatestPackage> {
    // Asked without `format`, the answer is the JSON one of the two the contract lists.
    return take(await this.#api.GET("/v1/handoffs/{id}/package", { params: this.#id(id), headers: this.#headers(), signal })) as LatestPackage;
  }

  /** `GET …/package?format=markdown`: the package for a person to read. */
  async getPackageMarkdown(id: string, signal?: AbortSignal): Promise<string> {
    const params = { path: { id }, query: { format: "markdown" as const } };
    const answer = await this.#api.GET("/v1/handoffs/{id}/package", { params, headers: this.#headers(), signal, parseAs: "text" });
    return take(answer as Answer<string>);
  }

  /** `POST …/package/accept` (machine): accepts exactly the document with this hash. */
  async acceptPackage(id: string, packageHash: string, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/package/accept", { params: this.#id(id), body: { package_hash: packageHash }, ...this.#change(options) }));
  }

  async rejectPackage(id: string, input: RejectInput, options?: ChangeOptions) {
    return take(await this.#api.POST("/v1/handoffs/{id}/package/reject", { params: this.#id(id), body: input, ...this.#change(options) }));
  }

  /** `GET …/briefing`: the package as plain text within `budget` bytes. */
  async briefing(id: string, query: { budget?: number; reach?: "api" | "none" } = {}, signal?: AbortSignal): Promise<string> {
    const answer = await this.#api.GET("/v1/handoffs/{id}/briefing", { params: { path: { id }, query }, headers: this.#headers(), signal, parseAs: "text" });
    return take(answer as Answer<string>);
  }

  // ------------------------------------------------------------------ notifications (owner)

  /** `POST /v1/webhooks`: registers a webhook; its `secret` is in this answer only. */
  async createWebhook(input: WebhookInput, signal?: AbortSignal) {
    return take(await this.#api.POST("/v1/webhooks", { body: input, headers: this.#headers(), signal }));
  }

  /** `GET /v1/webhooks`: the owner's webhooks, without their secrets. */
  async webhooks(signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/webhooks", { headers: this.#headers(), signal })).webhooks;
  }

  /** `DELETE /v1/webhooks/:id`. */
  async deleteWebhook(id: string, signal?: AbortSignal): Promise<void> {
    done(await this.#api.DELETE("/v1/webhooks/{id}", { params: { path: { id } }, headers: this.#headers(), signal }));
  }

  /** `GET /v1/webhooks/:id/deliveries`: its newest deliveries first. */
  async webhookDeliveries(id: string, signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/webhooks/{id}/deliveries", { params: { path: { id } }, headers: this.#headers(), signal }));
  }

  /** `GET /v1/push/key`: the VAPID public key, a browser's `applicationServerKey` (base64url). */
  async pushKey(signal?: AbortSignal): Promise<string> {
    return take(await this.#api.GET("/v1/push/key", { headers: this.#headers(), signal })).public_key;
  }

  /** `POST /v1/push/subscriptions`: a browser's `PushSubscription.toJSON()`, plus `events`. */
  async subscribePush(input: PushSubscriptionInput, signal?: AbortSignal) {
    return take(await this.#api.POST("/v1/push/subscriptions", { body: input, headers: this.#headers(), signal })).subscription;
  }

  /** `GET /v1/push/subscriptions`: by id and the endpoint's origin only. */
  async pushSubscriptions(signal?: AbortSignal) {
    return take(await this.#api.GET("/v1/push/subscriptions", { headers: this.#headers(), signal })).subscriptions;
  }

  /** `DELETE /v1/push/subscriptions/:id`. */
  async deletePushSubscription(id: string, signal?: AbortSignal): Promise<void> {
    done(await this.#api.DELETE("/v1/push/subscriptions/{id}", { params: { path: { id } }, headers: this.#headers(), signal }));
  }

  // ------------------------------------------------------------------ machines (issue 58)

  /** `GET /v1/enrolments/:code`: the machine's name, host name and key fingerprint, before Approve. */
  async lookUpEnrolment(code: string, signal?: AbortSignal): Promise<Enrolment> {
    return take(await this.#api.GET("/v1/enrolments/{code}", { params: { path: { code } }, headers: this.#headers(), signal })).enrolment;
  }

  /** `POST /v1/enrolments/:code/approve`. */
  async approveEnrolment(code: string, signal?: AbortSignal): Promise<Enrolment> {
    return take(await this.#api.POST("/v1/enrolments/{code}/approve", { params: { path: { code } }, headers: this.#headers(), signal })).enrolment;
  }

  /** `POST /v1/enrolments/:code/refuse`. */
  async refuseEnrolment(code: string, signal?: AbortSignal): Promise<void> {
    done(await this.#api.POST("/v1/enrolments/{code}/refuse", { params: { path: { code } }, headers: this.#headers(), signal }));
  }

  /** `GET /v1/machines`: the owner's enrolled machines, online first. */
  async machines(signal?: AbortSignal): Promise<Machine[]> {
    return take(await this.#api.GET("/v1/machines", { headers: this.#headers(), signal })).machines;
  }

  /** `DELETE /v1/machines/:name`: its credential stops working. */
  async revokeMachine(name: string, signal?: AbortSignal): Promise<void> {
    done(await this.#api.DELETE("/v1/machines/{name}", { params: { path: { name } }, headers: this.#headers(), signal }));
  }

  // ------------------------------------------------------------------ devices (a browser's sign-in)

  /** `POST /v1/devices`: signs this browser in as a device with `ownerToken` (an identity
   * provider's owner token, never a device's access token). The service sets the device's
   * credential as an HttpOnly cookie; the answer carries a short-lived access token. */
  async signInDevice(ownerToken: string, input: DeviceSignInInput = {}, signal?: AbortSignal): Promise<DeviceAccess> {
    const headers = { Authorization: `Bearer ${ownerToken}` };
    return take(await this.#api.POST("/v1/devices", { body: input, headers, signal }));
  }

  /** `POST /v1/devices/refresh`: a fresh access token for this browser's device, by its cookie
   * (the fetch must send cookies for this path), with the header its CSRF defence asks for. */
  async refreshDevice(signal?: AbortSignal): Promise<DeviceAccess> {
    const headers = { "Handoff-Refresh": "1" } as const;
    return take(await this.#api.POST("/v1/devices/refresh", { params: { header: headers }, headers, signal }));
  }

  /** `GET /v1/devices`: the owner's signed-in devices, the caller's own marked `current`. */
  async devices(signal?: AbortSignal): Promise<Device[]> {
    return take(await this.#api.GET("/v1/devices", { headers: this.#headers(), signal })).devices;
  }

  /** `PATCH /v1/devices/:id`. */
  async renameDevice(id: string, name: string, signal?: AbortSignal): Promise<Device> {
    return take(await this.#api.PATCH("/v1/devices/{id}", { params: { path: { id } }, body: { name }, headers: this.#headers(), signal })).device;
  }

  /** `DELETE /v1/devices/:id`: signs the device out, with its push subscriptions. */
  async revokeDevice(id: string, signal?: AbortSignal): Promise<void> {
    done(await this.#api.DELETE("/v1/devices/{id}", { params: { path: { id } }, headers: this.#headers(), signal }));
  }

  /** `POST /v1/devices/revoke-all`: every device, or every one but the caller's own. */
  async revokeAllDevices(keepCurrent: boolean, signal?: AbortSignal): Promise<number> {
    return take(await this.#api.POST("/v1/devices/revoke-all", { body: { keep_current: keepCurrent }, headers: this.#headers(), signal })).revoked;
  }

  // ---- The turn's timeline. ----

  /** `POST …/events` (machine): a batch of one turn's events, taken whole or refused
   * (`timeline.conflict`, `timeline.gap`, `timeline.full`, `timeline.dropped`). Sent without an
   * Idempotency-Key: a batch repeats by its `seq`s, so a retry is safe. */
  async postEvents(id: string, batch: TimelineBatch, signal?: AbortSignal): Promise<TimelineTaken> {
    return take(await this.#api.POST("/v1/handoffs/{id}/events", { params: this.#id(id), body: batch, headers: this.#headers(), signal }));
  }

  /** `GET …/events`: a turn's events after seq `after` (the current turn's without `turn`);
   * with `timeoutS`, held until one arrives or the time passes. */
  async events(
    id: string,
    query: { turn?: number; after?: number; limit?: number; timeoutS?: number } = {},
    signal?: AbortSignal,
  ): Promise<Timeline> {
    const { timeoutS, ...rest } = query;
    const params = { path: { id }, query: { ...rest, ...(timeoutS ? { timeout: timeoutS } : {}) } };
    return take(await this.#api.GET("/v1/handoffs/{id}/events", { params, headers: this.#headers(), signal }));
  }
}
