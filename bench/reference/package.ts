// The reference's work record and package compiler: core/src/work.rs and core/src/package.rs
// in TypeScript, for the routes the bench drives (the work, decisions, artifacts, the
// workspace, and the package a dry-run open compiles), with the same canonical JSON (keys in
// code-point order, no whitespace, strings escaped as serde_json escapes them, which is what
// JSON.stringify does for well-formed strings) and its SHA-256 by WebCrypto.
import {
  ACCEPTANCE_CRITERIA_MAX, ARTIFACT_VERSIONS_PER_HANDOFF_MAX, CONSTRAINTS_MAX, CRITERION_BYTES_MAX, DECISIONS_PER_HANDOFF_MAX,
  EVIDENCE_PER_DECISION_MAX, FILES_PER_HANDOFF_MAX, FILES_PER_REPORT_MAX, GOAL_BYTES_MAX, ID_CHARS_MAX, LABEL_BYTES_MAX,
  NOTE_BYTES_MAX, OBJECTIVE_BYTES_MAX, PACKAGE_ARTIFACTS_MAX, PACKAGE_COMPLETED_TURNS_MAX, PACKAGE_DECISIONS_MAX,
  PACKAGE_FILES_MAX, PACKAGE_FORMAT, PATH_BYTES_MAX, PURPOSE_BYTES_MAX, RATIONALE_BYTES_MAX, RUNTIME_BYTES_MAX,
  STATEMENT_BYTES_MAX, TITLE_BYTES_MAX, type Body, type Role, type Status, Refusal, checkUri, hasEnded, invalid, list,
  multiLine, object, only, optional, singleLine, tooLarge, u32,
} from "./rules";

export interface WorkSpec {
  title: string;
  goal: string;
  task_type?: string;
  priority?: string;
  constraints: string[];
  acceptance_criteria: string[];
}

export interface DecisionInput {
  statement: string;
  rationale?: string;
  evidence: string[];
  supersedes?: string;
}

export interface ArtifactInput {
  type: string;
  title: string;
  uri: string;
  sha256?: string;
}

export interface FileInput {
  path: string;
  insertions: number;
  deletions: number;
}

export interface Decision {
  id: string;
  statement: string;
  rationale: string | null;
  evidence: string[];
  supersedes: string | null;
  superseded_by: string | null;
  recorded_at: number;
  by: Role;
}

export interface Artifact {
  id: string;
  type: string;
  title: string;
  version: number;
  uri: string;
  sha256: string | null;
  recorded_at: number;
  by: Role;
}

/// The work record of one hand-off. `files` maps a path to [insertions, deletions].
export interface Work {
  spec: WorkSpec | null;
  decisions: Decision[];
  artifacts: Artifact[];
  files: Map<string, [number, number]>;
  unmet: number[];
  counters: { decisions: number; artifacts: number };
}

export function emptyWork(): Work {
  return { spec: null, decisions: [], artifacts: [], files: new Map(), unmet: [], counters: { decisions: 0, artifacts: 0 } };
}

/// The work record as stored: one JSON text (the file map as [path, insertions, deletions] rows).
export function workJson(w: Work): string {
  const files = Array.from(w.files, ([path, [i, d]]) => [path, i, d]);
  return JSON.stringify({ ...w, files });
}

export function parseWork(text: string): Work {
  const w = JSON.parse(text);
  return { ...w, files: new Map(w.files.map(([path, i, d]: [string, number, number]) => [path, [i, d]])) };
}

// ---- request bodies, each read once by the Worker

export function readWork(b: Body): WorkSpec {
  only(b, ["title", "goal", "task_type", "priority", "constraints", "acceptance_criteria"]);
  const spec: WorkSpec = {
    title: singleLine("title", b.title, TITLE_BYTES_MAX),
    goal: multiLine("goal", b.goal, GOAL_BYTES_MAX),
    constraints: list(b.constraints, "constraints", CONSTRAINTS_MAX, (v, f) => multiLine(f, v, CRITERION_BYTES_MAX)),
    acceptance_criteria: list(b.acceptance_criteria, "acceptance_criteria", ACCEPTANCE_CRITERIA_MAX, (v, f) => multiLine(f, v, CRITERION_BYTES_MAX)),
  };
  const taskType = optional(b.task_type, (v) => singleLine("task_type", v, LABEL_BYTES_MAX));
  const priority = optional(b.priority, (v) => singleLine("priority", v, LABEL_BYTES_MAX));
  if (taskType !== undefined) spec.task_type = taskType;
  if (priority !== undefined) spec.priority = priority;
  return spec;
}

export function readDecision(b: Body): DecisionInput {
  only(b, ["statement", "rationale", "evidence", "supersedes"]);
  const d: DecisionInput = {
    statement: multiLine("statement", b.statement, STATEMENT_BYTES_MAX),
    evidence: list(b.evidence, "evidence", EVIDENCE_PER_DECISION_MAX, (v, f) => checkUri(f, v)),
  };
  const rationale = optional(b.rationale, (v) => multiLine("rationale", v, RATIONALE_BYTES_MAX));
  const supersedes = optional(b.supersedes, (v) => singleLine("supersedes", v, ID_CHARS_MAX));
  if (rationale !== undefined) d.rationale = rationale;
  if (supersedes !== undefined) d.supersedes = supersedes;
  return d;
}

export function readArtifact(b: Body): ArtifactInput {
  only(b, ["type", "title", "uri", "sha256"]);
  const a: ArtifactInput = {
    type: singleLine("type", b.type, LABEL_BYTES_MAX),
    title: singleLine("title", b.title, TITLE_BYTES_MAX),
    uri: checkUri("uri", b.uri),
  };
  const sha = optional(b.sha256, (v) => {
    if (typeof v !== "string" || !/^[0-9a-fA-F]{64}$/.test(v)) throw invalid("sha256: must be 64 hexadecimal digits");
    return v.toLowerCase();
  });
  if (sha !== undefined) a.sha256 = sha;
  return a;
}

export function readWorkspace(b: Body): FileInput[] {
  only(b, ["files"]);
  if (!Array.isArray(b.files)) throw invalid("files: expected a list");
  if (b.files.length > FILES_PER_REPORT_MAX) throw invalid(`files: more than ${FILES_PER_REPORT_MAX} in one report`);
  return b.files.map((v: unknown, i: number) => {
    const f = object(v, `files[${i}]`);
    only(f, ["path", "insertions", "deletions"], `files[${i}].`);
    return {
      path: singleLine(`files[${i}].path`, f.path, PATH_BYTES_MAX),
      insertions: u32(f.insertions, `files[${i}].insertions`),
      deletions: u32(f.deletions, `files[${i}].deletions`),
    };
  });
}

export interface PackageRequest {
  objective: string;
  purpose: string;
  runtime: string;
  note?: string;
}

export function readPackageRequest(value: unknown): PackageRequest {
  const b = object(value, "handoff");
  only(b, ["objective", "purpose", "runtime", "note"], "handoff.");
  const r: PackageRequest = {
    objective: multiLine("handoff.objective", b.objective, OBJECTIVE_BYTES_MAX),
    purpose: multiLine("handoff.purpose", b.purpose, PURPOSE_BYTES_MAX),
    runtime: singleLine("handoff.runtime", b.runtime, RUNTIME_BYTES_MAX),
  };
  const note = optional(b.note, (v) => multiLine("handoff.note", v, NOTE_BYTES_MAX));
  if (note !== undefined) r.note = note;
  return r;
}

// ---- the work record's changes: each answers the next record (or null when nothing moved)

const tooMany = (what: string, max: number) => tooLarge(`this hand-off already keeps ${max} ${what}, the most it keeps`);

export function setWork(w: Work, spec: WorkSpec): Work | null {
  if (w.spec && JSON.stringify(w.spec) === JSON.stringify(spec)) return null;
  const old = w.spec?.acceptance_criteria ?? [];
  // An unmet criterion stays unmet only while it is the same criterion at the same index.
  const unmet = w.unmet.filter((i) => i < old.length && old[i] === spec.acceptance_criteria[i]);
  return { ...w, spec, unmet };
}

export function recordDecision(w: Work, input: DecisionInput, by: Role, now: number): { next: Work; item: Decision } {
  if (w.decisions.length >= DECISIONS_PER_HANDOFF_MAX) throw tooMany("decisions", DECISIONS_PER_HANDOFF_MAX);
  const n = w.counters.decisions + 1;
  const id = `dec_${n}`;
  let decisions = w.decisions;
  if (input.supersedes !== undefined) {
    const target = decisions.findIndex((d) => d.id === input.supersedes);
    if (target < 0) throw new Refusal(404, "decision.not_found", `supersedes: this hand-off has no decision ${input.supersedes}`);
    const old = decisions[target];
    if (old.superseded_by !== null) {
      throw new Refusal(409, "handoff.conflict", `supersedes: ${old.id} was already superseded by ${old.superseded_by}; supersede ${old.superseded_by} instead`);
    }
    decisions = decisions.slice();
    decisions[target] = { ...old, superseded_by: id };
  }
  const item: Decision = {
    id,
    statement: input.statement,
    rationale: input.rationale ?? null,
    evidence: input.evidence,
    supersedes: input.supersedes ?? null,
    superseded_by: null,
    recorded_at: now,
    by,
  };
  return { next: { ...w, decisions: [...decisions, item], counters: { ...w.counters, decisions: n } }, item };
}

export function addArtifact(w: Work, input: ArtifactInput, by: Role, now: number): { next: Work | null; item: Artifact } {
  const sha256 = input.sha256 ?? null;
  const latest = findLast(w.artifacts, (a) => a.title === input.title);
  if (latest && latest.type === input.type && latest.uri === input.uri && latest.sha256 === sha256) return { next: null, item: latest };
  if (w.artifacts.length >= ARTIFACT_VERSIONS_PER_HANDOFF_MAX) throw tooMany("artifact versions", ARTIFACT_VERSIONS_PER_HANDOFF_MAX);
  const counters = latest ? w.counters : { ...w.counters, artifacts: w.counters.artifacts + 1 };
  const item: Artifact = {
    id: latest ? latest.id : `art_${counters.artifacts}`,
    type: input.type,
    title: input.title,
    version: latest ? latest.version + 1 : 1,
    uri: input.uri,
    sha256,
    recorded_at: now,
    by,
  };
  return { next: { ...w, artifacts: [...w.artifacts, item], counters }, item };
}

export function reportWorkspace(w: Work, files: FileInput[]): { next: Work | null; files: FileInput[]; paths_kept: number } {
  const next = new Map(w.files);
  let moved = false;
  // In body order, so a path named twice keeps its later counts.
  for (const f of files) {
    const had = next.get(f.path);
    moved ||= !had || had[0] !== f.insertions || had[1] !== f.deletions;
    next.set(f.path, [f.insertions, f.deletions]);
  }
  if (next.size > FILES_PER_HANDOFF_MAX) throw tooMany("workspace paths", FILES_PER_HANDOFF_MAX);
  const reported = Array.from(new Set(files.map((f) => f.path))).sort(byCodePoint);
  const answer = reported.map((path) => {
    const [insertions, deletions] = next.get(path)!;
    return { path, insertions, deletions };
  });
  return { next: moved ? { ...w, files: next } : null, files: answer, paths_kept: next.size };
}

/// A final report's unmet criteria, checked against the work's criteria, ascending and once each.
export function recordUnmet(w: Work, indices: number[]): Work | null {
  const criteria = w.spec?.acceptance_criteria.length ?? 0;
  const bad = indices.find((i) => i >= criteria);
  if (bad !== undefined) throw invalid(`unmet: ${bad} is not the index of an acceptance criterion (this work has ${criteria})`);
  const unmet = Array.from(new Set(indices)).sort((a, b) => a - b);
  if (unmet.length === w.unmet.length && unmet.every((v, i) => v === w.unmet[i])) return null;
  return { ...w, unmet };
}

function findLast<T>(items: T[], pred: (t: T) => boolean): T | undefined {
  for (let i = items.length - 1; i >= 0; i--) if (pred(items[i])) return items[i];
  return undefined;
}

// ---- the package

/// What the compiler reads of the hand-off record.
export interface Phase {
  id: string;
  session: string;
  machine: string;
  turn: number;
  state: "open" | "closed";
  status: Status;
}

export interface TurnEntry {
  turn: number;
  status: Status;
  runtime: string | null;
}

export interface Truncation {
  decisions_omitted: number;
  artifacts_omitted: number;
  files_omitted: number;
  completed_turns_omitted?: number;
}

export interface Package {
  format: number;
  work: { id: string; session: string; title: string; goal: string; task_type: string | null; priority: string | null; state: string };
  constraints: string[];
  acceptance_criteria: string[];
  state: { phase: { state: string; turn: number; status: Status }; completed: string[]; unresolved: string[] };
  decisions: { id: string; statement: string; rationale: string | null; recorded_at: string; evidence: string[] }[];
  artifacts: { id: string; type: string; title: string; version: number; uri: string; sha256: string | null }[];
  blockers: never[];
  relevant_files: string[];
  next: { objective: string; purpose: string; runtime: string };
  source: { session: string; machine: string; runtime: string | null };
  evidence_links: string[];
  notes: string | null;
  generated_at: string;
  truncation: Truncation;
}

/// Compiles the package of `h`'s work for `request` at `now`: core/src/package.rs `compile`.
/// The reference keeps no blockers and no package ledger, so it lists none and no rejection.
export function compile(h: Phase, w: Work, lineage: TurnEntry[], request: PackageRequest, now: number): Package {
  const spec = w.spec;
  if (!spec) throw invalid("this hand-off has no work yet: PUT /v1/handoffs/:id/work first");
  const standing: Decision[] = [];
  for (let i = w.decisions.length - 1; i >= 0; i--) if (w.decisions[i].superseded_by === null) standing.push(w.decisions[i]);
  const decisions = standing.slice(0, PACKAGE_DECISIONS_MAX).map((d) => ({
    id: d.id,
    statement: d.statement,
    rationale: d.rationale,
    recorded_at: new Date(d.recorded_at).toISOString(),
    evidence: d.evidence,
  }));
  const seen = new Set<string>();
  const latest: Artifact[] = [];
  for (let i = w.artifacts.length - 1; i >= 0; i--) {
    const a = w.artifacts[i];
    if (!seen.has(a.title)) {
      seen.add(a.title);
      latest.push(a);
    }
  }
  const artifacts = latest.slice(0, PACKAGE_ARTIFACTS_MAX).map((a) => ({ id: a.id, type: a.type, title: a.title, version: a.version, uri: a.uri, sha256: a.sha256 }));
  const relevant_files = relevantFiles(w.files);
  const links = new Set<string>();
  for (const d of decisions) for (const e of d.evidence) links.add(e);
  for (const a of artifacts) links.add(a.uri);
  const unresolved: string[] = [];
  for (const i of w.unmet) {
    if (i < spec.acceptance_criteria.length) unresolved.push(`acceptance criterion ${i} not met: ${spec.acceptance_criteria[i]}`);
  }
  const { completed, omitted } = milestones(h, lineage);
  const truncation: Truncation = {
    decisions_omitted: standing.length - decisions.length,
    artifacts_omitted: latest.length - artifacts.length,
    files_omitted: w.files.size - relevant_files.length,
  };
  // Written only when not zero, as the Rust compiler does.
  if (omitted > 0) truncation.completed_turns_omitted = omitted;
  return {
    format: PACKAGE_FORMAT,
    work: { id: h.id, session: h.session, title: spec.title, goal: spec.goal, task_type: spec.task_type ?? null, priority: spec.priority ?? null, state: h.state },
    constraints: spec.constraints,
    acceptance_criteria: spec.acceptance_criteria,
    state: { phase: { state: h.state, turn: h.turn, status: h.status }, completed, unresolved },
    decisions,
    artifacts,
    blockers: [],
    relevant_files,
    next: { objective: request.objective, purpose: request.purpose, runtime: request.runtime },
    source: { session: h.session, machine: h.machine, runtime: lineage.find((t) => t.turn === h.turn)?.runtime ?? null },
    evidence_links: Array.from(links).sort(byCodePoint),
    notes: request.note ?? null,
    generated_at: new Date(now).toISOString(),
    truncation,
  };
}

/// The paths most changed (insertions + deletions, ties by path), at most PACKAGE_FILES_MAX,
/// then in code-point order.
function relevantFiles(files: Map<string, [number, number]>): string[] {
  const byChurn = Array.from(files, ([path, [i, d]]) => ({ path, churn: i + d }));
  byChurn.sort((a, b) => b.churn - a.churn || byCodePoint(a.path, b.path));
  return byChurn.slice(0, PACKAGE_FILES_MAX).map((f) => f.path).sort(byCodePoint);
}

/// "turn N opened" and, once it ended, "turn N finished (status)", for the newest turns.
function milestones(h: Phase, lineage: TurnEntry[]): { completed: string[]; omitted: number } {
  const omitted = Math.max(0, h.turn - PACKAGE_COMPLETED_TURNS_MAX);
  const turns = new Map<number, Status>();
  for (const t of lineage) if (t.turn > omitted && t.turn <= h.turn) turns.set(t.turn, t.status);
  turns.set(h.turn, h.status);
  const completed: string[] = [];
  for (const turn of Array.from(turns.keys()).sort((a, b) => a - b)) {
    const status = turns.get(turn)!;
    completed.push(`turn ${turn} opened`);
    if (hasEnded(status)) completed.push(`turn ${turn} finished (${status})`);
  }
  return { completed, omitted };
}

/// Code-point order (Rust's `str` order). UTF-16 order agrees with it except where a surrogate
/// (a character above U+FFFF) meets a unit in U+E000..U+FFFF.
export function byCodePoint(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      const sx = x >= 0xd800 && x <= 0xdfff;
      const sy = y >= 0xd800 && y <= 0xdfff;
      if (sx !== sy) return sx ? 1 : -1;
      return x - y;
    }
  }
  return a.length - b.length;
}

/// Canonical JSON: object keys in code-point order, no whitespace, integers only.
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isSafeInteger(value)) throw new Error("the package holds integers only");
      return String(value);
    case "string":
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const o = value as Record<string, unknown>;
      const keys = Object.keys(o).sort(byCodePoint);
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
    }
    default:
      throw new Error(`no canonical JSON for a ${typeof value}`);
  }
}

const encoder = new TextEncoder();

/// Lowercase hex SHA-256 of the canonical JSON of the package without `generated_at`.
export async function packageHash(p: Package): Promise<string> {
  const { generated_at: _, ...hashed } = p;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(canonicalJson(hashed))));
  let hex = "";
  for (const b of digest) hex += (b < 16 ? "0" : "") + b.toString(16);
  return hex;
}
