// The API's shapes as the console reads them (docs/openapi.yaml, plus the console contract's
// additions: `actions`, `policy`, GET …/work and the list's runtime and package fields). Every
// field the console does not need is left out; the newer ones are optional so that an older
// Worker still renders.

export type Action =
  | "open_turn"
  | "cancel"
  | "close"
  | "report"
  | "compile"
  | "accept"
  | "reject"
  | "resolve_blocker";

export type Status = "running" | "needs-you" | "done" | "failed" | "cancelled";

export interface Suggestion {
  reason: string;
  turn: number;
  runtimes: string[];
  command: string;
}

export interface Policy {
  runtimes: string[];
  context_threshold_pct: number;
  quota_threshold?: number | null;
}

export interface MachineRuntime {
  name: string;
  version?: string | null;
  signed_in?: boolean | null;
}

export interface Handoff {
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
  runtime?: string | null;
  package_version?: number | null;
  package_hash?: string | null;
  continued_from?: { turn: number; runtime: string | null } | null;
  suggestion?: Suggestion | null;
  machine_runtimes?: { runtimes: MachineRuntime[]; reported_at: string };
  actions?: Action[];
  policy?: Policy | null;
}

export interface ListRow {
  id: string;
  session: string;
  machine: string;
  size: string;
  turn: number;
  state: "open" | "closed";
  status: Status;
  summary: string | null;
  version: number;
  updated_at: string;
  suggestion?: Suggestion | null;
  runtime?: string | null;
  package_version?: number | null;
  package_hash?: string | null;
}

export interface TurnEntry {
  turn: number;
  status: Status;
  runtime: string | null;
  package_version: number | null;
  package_hash: string | null;
  continued_from: { turn: number; runtime: string | null } | null;
  opened_at: string;
  ended_at: string | null;
}

export interface Decision {
  id: string;
  statement: string;
  rationale?: string | null;
  evidence: string[];
  supersedes?: string | null;
  superseded_by?: string | null;
  recorded_at: string;
  by: string;
}

export interface Artifact {
  id: string;
  type: string;
  title: string;
  version: number;
  uri: string;
  sha256?: string | null;
  recorded_at: string;
  by: string;
}

export interface Blocker {
  id: string;
  severity: "low" | "medium" | "high";
  title: string;
  status: "open" | "resolved";
  raised_at?: string;
  resolved_at?: string | null;
  by?: string;
}

export interface WorkSpec {
  id: string;
  title: string;
  goal: string;
  task_type?: string | null;
  priority?: string | null;
  constraints: string[];
  acceptance_criteria: string[];
}

export interface WorkRecord {
  spec: WorkSpec | null;
  decisions: Decision[];
  artifacts: Artifact[];
  blockers: Blocker[];
  files: { path: string; insertions: number; deletions: number }[];
  unmet: number[];
}

export interface PackageDoc {
  format: number;
  work: { id: string; session: string; title: string; goal: string };
  constraints: string[];
  acceptance_criteria: string[];
  state: { phase: { state: string; turn: number; status: string }; completed: string[]; unresolved: string[] };
  decisions: unknown[];
  artifacts: unknown[];
  blockers: unknown[];
  relevant_files: string[];
  next: { objective: string; purpose: string; runtime: string };
  source: { session: string; machine: string; runtime: string | null };
  notes: string | null;
  generated_at: string;
  truncation: Record<string, number>;
  [key: string]: unknown;
}

export type RejectReason = "missing_context" | "wrong_runtime" | "superseded" | "other";

export interface Rejection {
  reason: RejectReason;
  note: string;
  rejected_at?: string;
  by?: string;
}

export interface LatestPackage {
  package_version: number;
  package_hash: string;
  state: "offered" | "rejected" | "accepted";
  rejection?: Rejection | null;
  package: PackageDoc;
}

export interface CompileAnswer {
  package_version: number;
  package_hash: string;
  changed: boolean;
  package: PackageDoc;
}
