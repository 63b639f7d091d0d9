// The reference's briefing: core/src/briefing.rs in TypeScript, the package as plain text in
// at most `budget` UTF-8 bytes, whole sections given up in a fixed order until it fits, and
// the core parts shared out and marked [cut] when even they do not fit.
import type { Package, Truncation } from "./package";
import {
  BRIEFING_BUDGET_BYTES_MAX, BRIEFING_BUDGET_BYTES_MIN, PACKAGE_ARTIFACTS_MAX, PACKAGE_COMPLETED_TURNS_MAX,
  PACKAGE_DECISIONS_MAX, PACKAGE_FILES_MAX, clip, trimEnd, utf8Bytes,
} from "./rules";

export interface Latest {
  package_version: number;
  package_hash: string;
  package: Package;
}

/// The API at `baseUrl`, or a sandbox without network (null).
export type Reach = { baseUrl: string } | null;

type Section = "constraints" | "acceptance criteria" | "completed" | "decisions" | "artifacts" | "blockers" | "unresolved" | "relevant files";

const DISPLAY_ORDER: Section[] = ["constraints", "acceptance criteria", "completed", "decisions", "artifacts", "blockers", "unresolved", "relevant files"];
const DROP_ORDER: Section[] = ["relevant files", "completed", "artifacts", "decisions", "blockers", "unresolved", "constraints", "acceptance criteria"];
const HEADINGS: Record<Section, string> = {
  constraints: "## Constraints",
  "acceptance criteria": "## Acceptance criteria",
  completed: "## Completed",
  decisions: "## Decisions",
  artifacts: "## Artifacts",
  blockers: "## Blockers",
  unresolved: "## Unresolved",
  "relevant files": "## Relevant files",
};
const WORK_HEADING = "# Hand-off briefing";
const GOAL_HEADING = "## Goal";
const OBJECTIVE_HEADING = "## Next objective";
const LEFT_OUT_HEADING = "## Left out";
const CLOSING_HEADING = "## Before you stop";
const CUT_MARK = "[cut]";

type Block = [heading: string, body: string];

export function render(latest: Latest, budgetBytes: number, reach: Reach): string {
  const budget = Math.min(Math.max(budgetBytes, BRIEFING_BUDGET_BYTES_MIN), BRIEFING_BUDGET_BYTES_MAX);
  const p = latest.package;
  const core: Block[] = [
    [WORK_HEADING, workBody(latest)],
    [GOAL_HEADING, p.work.goal],
    [OBJECTIVE_HEADING, objectiveBody(p)],
    [CLOSING_HEADING, closing(p, reach)],
  ];
  const sections: [Section, string][] = [];
  for (const s of DISPLAY_ORDER) {
    const body = sectionBody(p, s);
    if (body !== null) sections.push([s, body]);
  }
  const dropOrder = DROP_ORDER.filter((s) => sections.some(([have]) => have === s));
  const leftOut: Section[] = [];
  for (;;) {
    const notes = leftOutNotes(p.truncation, leftOut, budget, latest.package_version, false);
    const kept: Block[] = sections.filter(([s]) => !leftOut.includes(s)).map(([s, b]) => [HEADINGS[s], b]);
    const text = assemble(core, notes, kept);
    if (utf8Bytes(text) <= budget) return text;
    if (leftOut.length === dropOrder.length) break;
    leftOut.push(dropOrder[leftOut.length]);
  }
  // Even the core does not fit: short notes, and the core bodies share what is left.
  const notes = leftOutNotes(p.truncation, leftOut, budget, latest.package_version, true);
  const fixed = utf8Bytes(assemble(core.map(([h]) => [h, ""]), notes, []));
  const caps = share(core.map(([, b]) => utf8Bytes(b)), Math.max(0, budget - fixed));
  const text = assemble(core.map(([h, b], i) => [h, fit(b, caps[i])]), notes, []);
  if (utf8Bytes(text) > budget) throw new Error("a briefing never exceeds its budget");
  return text;
}

/// Blocks in order, each "heading\nbody\n", a blank line between; the notes after the
/// objective, the sections before the closing instruction.
function assemble(core: Block[], notes: string | null, sections: Block[]): string {
  const blocks: Block[] = core.slice(0, 3);
  if (notes !== null) blocks.push([LEFT_OUT_HEADING, notes]);
  blocks.push(...sections, core[3]);
  let text = "";
  for (let i = 0; i < blocks.length; i++) {
    if (i > 0) text += "\n";
    text += `${blocks[i][0]}\n${blocks[i][1]}\n`;
  }
  return text;
}

/// Splits `total` bytes so that no text gets more than it needs and the rest share equally.
function share(lens: number[], total: number): number[] {
  const caps = lens.map(() => 0);
  let left = total;
  let open = lens.map((_, i) => i);
  while (open.length > 0) {
    const fair = Math.floor(left / open.length);
    const fits = open.filter((i) => lens[i] <= fair);
    if (fits.length === 0) {
      const extra = left % open.length;
      open.forEach((i, k) => (caps[i] = fair + (k < extra ? 1 : 0)));
      break;
    }
    for (const i of fits) {
      caps[i] = lens[i];
      left -= lens[i];
    }
    open = open.filter((i) => lens[i] > fair);
  }
  return caps;
}

/// `text` if it fits in `cap` bytes, else its longest prefix that leaves room for " [cut]".
function fit(text: string, cap: number): string {
  if (utf8Bytes(text) <= cap) return text;
  const prefix = trimEnd(clip(text, Math.max(0, cap - (CUT_MARK.length + 1))));
  return prefix === "" ? CUT_MARK : `${prefix} ${CUT_MARK}`;
}

function workBody(latest: Latest): string {
  const p = latest.package;
  let body = `${p.work.title}\nHand-off ${p.work.id} (session ${p.work.session}), turn ${p.state.phase.turn}`;
  if (p.work.task_type !== null) body += `, task type ${p.work.task_type}`;
  if (p.work.priority !== null) body += `, priority ${p.work.priority}`;
  return `${body}.\nPackage version ${latest.package_version}, sha256 ${latest.package_hash}.`;
}

function objectiveBody(p: Package): string {
  const body = `${p.next.objective}\nPurpose: ${p.next.purpose}\nRuntime: ${p.next.runtime}`;
  return p.notes === null ? body : `${body}\nOperator's note: ${p.notes}`;
}

/// One list item per line, continuation lines indented under the first.
function items(lines: string[]): string | null {
  return lines.length === 0 ? null : lines.map((l) => l.replaceAll("\n", "\n  ")).join("\n");
}

function sectionBody(p: Package, s: Section): string | null {
  switch (s) {
    case "constraints":
      return items(p.constraints.map((c) => `- ${c}`));
    case "acceptance criteria":
      return items(p.acceptance_criteria.map((c, i) => `[${i}] ${c}`));
    case "completed":
      return items(p.state.completed.map((m) => `- ${m}`));
    case "decisions":
      return items(
        p.decisions.map((d) => {
          let line = `- ${d.id}: ${d.statement}`;
          if (d.rationale !== null) line += `\nWhy: ${d.rationale}`;
          if (d.evidence.length > 0) line += `\nEvidence: ${d.evidence.join(", ")}`;
          return line;
        }),
      );
    case "artifacts":
      return items(p.artifacts.map((a) => `- ${a.id} v${a.version} ${a.title} (${a.type}): ${a.uri}${a.sha256 === null ? "" : `\nsha256 ${a.sha256}`}`));
    case "blockers":
      return null; // the reference keeps no blockers
    case "unresolved":
      return items(p.state.unresolved.map((u) => `- ${u}`));
    case "relevant files":
      return items(p.relevant_files.map((f) => `- ${f}`));
  }
}

/// The "Left out" block: the compiler's bounds, then this rendering's.
function leftOutNotes(t: Truncation, leftOut: Section[], budget: number, version: number, short: boolean): string | null {
  const notes: string[] = [];
  const any = t.decisions_omitted > 0 || t.artifacts_omitted > 0 || t.files_omitted > 0 || (t.completed_turns_omitted ?? 0) > 0;
  if (any) notes.push(short ? "The package itself leaves out part of the record." : packageNote(t));
  if (short) {
    notes.push(`This briefing was shortened to fit a ${budget}-byte runtime budget.`);
  } else if (leftOut.length > 0) {
    notes.push(
      `This briefing was shortened to fit a ${budget}-byte runtime budget: it leaves out the ${joinAnd(leftOut)} ` +
        `${leftOut.length === 1 ? "section" : "sections"}, which package version ${version} on the service still has whole.`,
    );
  }
  return notes.length === 0 ? null : notes.join("\n");
}

function packageNote(t: Truncation): string {
  const parts: string[] = [];
  const plural = (n: number) => (n === 1 ? "" : "s");
  if (t.decisions_omitted > 0) parts.push(`${t.decisions_omitted} older standing decision${plural(t.decisions_omitted)}`);
  if (t.artifacts_omitted > 0) parts.push(`${t.artifacts_omitted} older artifact title${plural(t.artifacts_omitted)}`);
  if (t.files_omitted > 0) parts.push(`${t.files_omitted} less-changed file path${plural(t.files_omitted)}`);
  const turns = t.completed_turns_omitted ?? 0;
  if (turns > 0) parts.push(`the milestones of ${turns} older turn${plural(turns)}`);
  return (
    `The package itself leaves out ${joinAnd(parts)}: it keeps the newest ${PACKAGE_DECISIONS_MAX} standing decisions, ` +
    `the newest ${PACKAGE_ARTIFACTS_MAX} artifact titles, ${PACKAGE_FILES_MAX} file paths and the milestones ` +
    `of the newest ${PACKAGE_COMPLETED_TURNS_MAX} turns; the rest stay on the hand-off's record.`
  );
}

function joinAnd(items: string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

/// The closing instruction, from what the destination can reach.
function closing(p: Package, reach: Reach): string {
  const id = p.work.id;
  if (reach === null) {
    return (
      "You have no network here: do not try to reach the hand-off service, and raise no " +
      "blocker about it. Your record travels through your final report and the files you leave: in " +
      "that report, say what you decided and why, name each file or artifact you produced, name " +
      "anything that blocks you, give this turn's status (done or failed) and list by index the " +
      "acceptance criteria you did not meet."
    );
  }
  return (
    `Keep the hand-off record of ${id} as you work, through the hand-off tools this session was given ` +
    `(the handoff MCP server, which reaches the hand-off API at ${reach.baseUrl}, also in the environment ` +
    `variable HANDOFF_URL): they hold its credential, so never look for a token, print one or send one ` +
    `yourself. Record decisions, artifacts and blockers as you make, produce or meet them, and report ` +
    `running or needs-you while you work and done or failed when you finish; a final report adds ` +
    `unmet: the indices of the acceptance criteria you did not meet. get_handoff shows the current turn.`
  );
}
