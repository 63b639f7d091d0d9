// The reference's shared rules: the service's limits (core/src/limits.rs), its refusal, and
// the text rules every input goes through (core/src/work.rs), with lengths in UTF-8 bytes.

export const SUMMARY_BYTES_MAX = 4096;
export const BODY_BYTES_MAX = 16 * 1024;
export const MACHINE_TOKEN_TTL_S = 24 * 60 * 60;
export const TITLE_BYTES_MAX = 200;
export const GOAL_BYTES_MAX = 4 * 1024;
export const LABEL_BYTES_MAX = 64;
export const CRITERION_BYTES_MAX = 1024;
export const CONSTRAINTS_MAX = 50;
export const ACCEPTANCE_CRITERIA_MAX = 50;
export const STATEMENT_BYTES_MAX = 1024;
export const RATIONALE_BYTES_MAX = 2 * 1024;
export const EVIDENCE_PER_DECISION_MAX = 10;
export const URI_BYTES_MAX = 2 * 1024;
export const PATH_BYTES_MAX = 1024;
export const FILES_PER_REPORT_MAX = 500;
export const DECISIONS_PER_HANDOFF_MAX = 500;
export const ARTIFACT_VERSIONS_PER_HANDOFF_MAX = 500;
export const FILES_PER_HANDOFF_MAX = 5_000;
export const WORK_RECORD_BYTES_MAX = 1024 * 1024;
export const ID_CHARS_MAX = 128;
export const PACKAGE_FORMAT = 1;
export const PACKAGE_DECISIONS_MAX = 20;
export const PACKAGE_ARTIFACTS_MAX = 20;
export const PACKAGE_FILES_MAX = 100;
export const PACKAGE_COMPLETED_TURNS_MAX = 20;
export const OBJECTIVE_BYTES_MAX = 2 * 1024;
export const PURPOSE_BYTES_MAX = 1024;
export const RUNTIME_BYTES_MAX = 64;
export const NOTE_BYTES_MAX = 4 * 1024;
export const BRIEFING_BUDGET_BYTES_DEFAULT = 8 * 1024;
export const BRIEFING_BUDGET_BYTES_MIN = 256;
export const BRIEFING_BUDGET_BYTES_MAX = 64 * 1024;

export type Status = "running" | "needs-you" | "done" | "failed" | "cancelled";
export type Role = "owner" | "machine";

export function hasEnded(status: Status): boolean {
  return status === "done" || status === "failed" || status === "cancelled";
}

export class Refusal extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

export const invalid = (message: string) => new Refusal(400, "request.invalid", message);
export const tooLarge = (message: string) => new Refusal(413, "request.too_large", message);

/// UTF-8 length of a string, counted without encoding it (a lone surrogate is U+FFFD: 3 bytes).
export function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1))) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/// The longest prefix of `s` of at most `maxBytes` UTF-8 bytes that ends on a character boundary.
export function clip(s: string, maxBytes: number): string {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const pair = c >= 0xd800 && c <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1));
    const size = c < 0x80 ? 1 : c < 0x800 ? 2 : pair ? 4 : 3;
    if (n + size > maxBytes) return s.slice(0, i);
    n += size;
    if (pair) i++;
  }
  return s;
}

// Rust's `char::is_whitespace` (Unicode White_Space) and `char::is_control` (category Cc):
// JavaScript's `\s` and `trim` differ from them (U+0085, U+FEFF).
const WHITESPACE = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const TRAILING_WHITESPACE = new RegExp(`[${WHITESPACE}]+$`);
const ONLY_WHITESPACE = new RegExp(`^[${WHITESPACE}]*$`);
const ANY_WHITESPACE_OR_BACKSLASH = new RegExp(`[${WHITESPACE}\\\\]`);
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROL_BUT_LINES = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

export function trimEnd(s: string): string {
  return s.replace(TRAILING_WHITESPACE, "");
}

function text(field: string, value: unknown, maxBytes: number): string {
  // A lone surrogate is not text: serde_json refuses it in the Rust Worker's bodies.
  if (typeof value !== "string" || !value.isWellFormed()) throw invalid(`${field}: expected a string`);
  if (ONLY_WHITESPACE.test(value)) throw invalid(`${field}: must not be empty`);
  if (utf8Bytes(value) > maxBytes) throw invalid(`${field}: longer than ${maxBytes} bytes`);
  return value;
}

/// A required one-line text: not blank, no control characters, at most `maxBytes`.
export function singleLine(field: string, value: unknown, maxBytes: number): string {
  const s = text(field, value, maxBytes);
  if (CONTROL.test(s)) throw invalid(`${field}: must be one line without control characters`);
  return s;
}

/// A required text that may span lines: no control characters but newlines and tabs.
export function multiLine(field: string, value: unknown, maxBytes: number): string {
  const s = text(field, value, maxBytes);
  if (CONTROL_BUT_LINES.test(s)) throw invalid(`${field}: control characters other than newlines and tabs`);
  return s;
}

export type UriKind = "web" | "relative" | "other";

/// `http(s)://host…`, a relative reference (no scheme, not `//host`), or anything else.
export function uriKind(uri: string): UriKind {
  const headEnd = firstOf(uri, 0);
  const colon = uri.slice(0, headEnd).indexOf(":");
  if (colon < 0) return uri.startsWith("//") ? "other" : "relative";
  const scheme = uri.slice(0, colon).replace(/[A-Z]/g, (c) => c.toLowerCase());
  const rest = uri.slice(colon + 1);
  if (!rest.startsWith("//")) return "other";
  const authorityEnd = firstOf(rest, 2);
  const accepted = scheme === "http" || scheme === "https";
  return accepted && authorityEnd > 2 ? "web" : "other";
}

/// The index of the first `/`, `?` or `#` at or after `from`, else the length.
function firstOf(s: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    const c = s[i];
    if (c === "/" || c === "?" || c === "#") return i;
  }
  return s.length;
}

export function checkUri(field: string, uri: unknown): string {
  const s = singleLine(field, uri, URI_BYTES_MAX);
  if (ANY_WHITESPACE_OR_BACKSLASH.test(s)) throw invalid(`${field}: a URI has no whitespace and no backslash`);
  if (uriKind(s) === "other") throw invalid(`${field}: only http, https or relative URIs are accepted`);
  return s;
}

// ---- reading bodies: every field typed, no field unknown (serde's deny_unknown_fields)

export type Body = Record<string, unknown>;

export function only(body: Body, allowed: readonly string[], prefix = ""): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) throw invalid(`${prefix}${key}: unknown field`);
  }
}

export function object(value: unknown, field: string): Body {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid(`${field}: expected an object`);
  return value as Body;
}

export function optional<T>(value: unknown, read: (v: unknown) => T): T | undefined {
  return value === undefined || value === null ? undefined : read(value);
}

export function list<T>(value: unknown, field: string, max: number, read: (v: unknown, field: string) => T): T[] {
  if (!Array.isArray(value)) throw invalid(`${field}: expected a list`);
  if (value.length > max) throw invalid(`${field}: more than ${max} items`);
  return value.map((v, i) => read(v, `${field}[${i}]`));
}

export function u32(value: unknown, field: string): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 0xffffffff) {
    throw invalid(`${field}: expected an integer from 0 to 4294967295`);
  }
  return value as number;
}
