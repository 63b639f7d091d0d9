// Calls to the API (same origin, under /v1): the bearer token on every request, an
// Idempotency-Key on every change, and every refusal as an ApiError "code: message".

import { getToken } from "./auth.js";
import type { Handoff } from "./types.js";

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly handoff: Handoff | undefined;

  constructor(status: number, code: string, detail: string, handoff?: Handoff) {
    super(`${code}: ${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.handoff = handoff;
  }
}

export interface CallOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | null | undefined>;
  headers?: Record<string, string>;
  /** Read the answer as text (Markdown, briefings) rather than JSON. */
  text?: boolean;
  signal?: AbortSignal;
}

export interface Answer<T> {
  status: number;
  data: T | null;
  headers: Headers;
}

export function url(path: string, query?: CallOptions["query"]): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== null && v !== undefined && v !== "") params.set(k, String(v));
  }
  const q = params.toString();
  return `/v1${path}${q ? `?${q}` : ""}`;
}

export function handoffPath(id: string, rest = ""): string {
  return `/handoffs/${encodeURIComponent(id)}${rest}`;
}

/** One request. A 304 answers `data: null`; any other status above 299 throws ApiError. */
export async function call<T>(method: string, path: string, options: CallOptions = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...options.headers };
  const token = getToken();
  if (token) headers["Authorization"] = `Bearer ${token}`;
  if (method !== "GET") {
    headers["Idempotency-Key"] = crypto.randomUUID();
    headers["Content-Type"] = "application/json";
  }
  let response: Response;
  try {
    response = await fetch(url(path, options.query), {
      method,
      headers,
      body: method === "GET" ? undefined : JSON.stringify(options.body ?? {}),
      cache: "no-store",
      credentials: "omit",
      signal: options.signal,
    });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw new ApiError(0, "network.unreachable", "the service did not answer; check the connection");
  }
  if (response.status === 304) return { status: 304, data: null, headers: response.headers };
  const raw = await response.text().catch(() => "");
  if (!response.ok) {
    let code = "response.unexpected";
    let message = `HTTP ${response.status}`;
    let handoff: Handoff | undefined;
    try {
      const body = JSON.parse(raw) as { error?: { code?: unknown; message?: unknown }; handoff?: Handoff };
      if (typeof body.error?.code === "string") code = body.error.code;
      if (typeof body.error?.message === "string") message = body.error.message;
      handoff = body.handoff;
    } catch {
      // not the API's JSON: keep the status
    }
    throw new ApiError(response.status, code, message, handoff);
  }
  if (response.status === 204) return { status: 204, data: null, headers: response.headers };
  if (options.text) return { status: response.status, data: raw as T, headers: response.headers };
  try {
    return { status: response.status, data: JSON.parse(raw) as T, headers: response.headers };
  } catch {
    throw new ApiError(response.status, "response.unexpected", "the answer was not JSON");
  }
}

export async function get<T>(path: string, options?: CallOptions): Promise<T> {
  return (await call<T>("GET", path, options)).data as T;
}

export async function post<T>(path: string, body?: unknown, query?: CallOptions["query"]): Promise<T> {
  return (await call<T>("POST", path, { body, query })).data as T;
}
