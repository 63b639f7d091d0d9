// One session: the record live over the watch, the turns as a conversation with a composer at
// its foot (conversation.ts), the suggestion, the work record, and the buttons of the record's
// actions. A new version (from the watch or from an answer) reads the lineage and the work
// record again, and the page is drawn once they are in, so that the record, its buttons and its
// blockers always show the same version.

import { api, HandoffError } from "./api.js";
import { actionButton, actionsOf, type CommandContext, eraseButton, SUGGESTION_PURPOSE } from "./commands.js";
import { Composer, composes, inputBlock, MACHINES_REPORT, Memory, type SteersView, turnItem } from "./conversation.js";
import { h, replaceKeepingFocus, safeLink, short, timeEl } from "./dom.js";
import { watch, type LiveState } from "./live.js";
import { syncModeFact, Timelines } from "./timeline.js";
import type { Action, Handoff, Question, TurnEntry, WorkRecord } from "./types.js";
import { coalesced, fail, Page } from "./ui.js";

interface Loaded {
  record: Handoff;
  turns: TurnEntry[] | null;
  olderTurns: boolean;
  work: WorkRecord | null;
}

export function renderSession(page: Page, main: HTMLElement, id: string, role: "owner" | "machine"): void {
  main.id = "session";
  main.dataset.id = id;
  const title = h("h1", null, "Session");
  const live = h("span", { id: "live", class: "live" }, "connecting");
  const sub = h("p", { class: "sub" });
  const facts = h("dl", { class: "facts" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const suggestion = h("div", { class: "suggestion-slot" });
  const lineage = h("ol", { id: "lineage", class: "conversation" });
  const lineageNote = h("p", { class: "muted", hidden: true }, "Older turns are not shown.");
  const composerSlot = h("div", { class: "composer-slot" });
  const work = h("section", { id: "work", "aria-labelledby": "work-heading" });
  main.replaceChildren(
    h("div", { class: "page-head" }, title, h("p", { class: "live-line" }, "Updates: ", live)),
    sub,
    h(
      "section",
      { id: "conversation", "aria-labelledby": "lineage-heading" },
      h("h2", { id: "lineage-heading", class: "visually-hidden" }, "Conversation"),
      lineageNote,
      lineage,
      suggestion,
      composerSlot,
    ),
    h("section", { id: "details", "aria-labelledby": "details-heading" }, h("h2", { id: "details-heading" }, "Session"), facts, actions),
    work,
  );

  let shown: Loaded | null = null;
  let newest: Handoff | null = null;
  let workServed = true;
  const memory = new Memory();
  const timelines = new Timelines(page, id);
  let turnDrawn = 0;

  const ctx: CommandContext = {
    role,
    apply: (record) => offer(record),
    refresh: () => void refresh(),
    turns: () => shown?.turns ?? null,
    newest: () => newest,
  };
  const composer = role === "owner" ? new Composer(ctx) : null;
  const steersView: SteersView = {
    outcome: (turn, steerId) => timelines.steer(turn, steerId),
    resend: (words) => composer?.resend(words),
  };
  // A steer's outcome moves no version: its turn's steers are drawn again when it arrives.
  timelines.onSteer = () => {
    if (shown) draw(shown);
  };

  /** A record from anywhere: a newer version than the page shows is read in full and drawn. */
  const offer = (record: Handoff): void => {
    if (!page.alive) return;
    memory.see(record);
    if (!newest || record.version > newest.version) newest = record;
    if (!shown || newest.version > shown.record.version) void refresh();
  };

  const readWork = async (): Promise<{ handoff?: Handoff; work: WorkRecord } | null> => {
    if (!workServed) return null;
    try {
      return await api.getWork(id);
    } catch (error) {
      // A Worker from before GET …/work answers 405 (only PUT is routed) or 404.
      if (error instanceof HandoffError && (error.status === 405 || error.code === "route.not_found")) {
        workServed = false;
        return null;
      }
      throw error;
    }
  };

  const once = async (): Promise<void> => {
    const [turnsAnswer, workAnswer, recordAnswer] = await Promise.all([
      api.turns(id),
      readWork(),
      newest ? Promise.resolve(null) : api.get(id).then((handoff) => ({ handoff })),
    ]);
    if (!page.alive) return;
    // The record drawn is the one read with the work record, so that its buttons (a blocker's
    // Resolve among them) and the work they act on are one version. A newer frame that came
    // meanwhile asks for one more read.
    const record = workAnswer?.handoff ?? turnsAnswer.handoff ?? recordAnswer?.handoff ?? newest;
    if (!record) return;
    if (!newest || record.version > newest.version) newest = record;
    memory.see(record);
    shown = { record, turns: turnsAnswer.turns, olderTurns: turnsAnswer.next_before !== null, work: workAnswer?.work ?? null };
    draw(shown);
    // A lineage read before the record drawn (a turn opened between the reads) is read again.
    const lineageBehind = turnsAnswer.handoff !== undefined && turnsAnswer.handoff.version < record.version;
    if (newest.version > record.version || lineageBehind) void refresh();
  };

  const refresh = coalesced(once, () => page.alive, fail);

  const setLive = (state: LiveState): void => {
    live.textContent = state;
    live.dataset.state = state;
  };

  const draw = ({ record, turns, olderTurns, work: w }: Loaded): void => {
    const allowed = actionsOf(record, role);
    main.dataset.version = String(record.version);
    main.dataset.state = record.state;
    main.dataset.status = record.status;
    title.textContent = `Session ${record.session}`;
    sub.replaceChildren(`Machine ${record.machine} (${record.size}) · created `, timeEl(record.created_at), ` · hand-off ${record.id}`);
    replaceKeepingFocus(facts, ...factsOf(record), ...syncModeFact(record, MACHINES_REPORT));
    replaceKeepingFocus(
      actions,
      // Open a turn, stop one and answer are the conversation's own buttons; a blocker's, its row's.
      ...allowed.filter((a) => !IN_PLACE.has(a)).map((a) => actionButton(a, record, ctx)),
      ...(role === "owner" ? [eraseButton(record)] : []),
    );
    replaceKeepingFocus(suggestion, ...suggestionOf(record, allowed, ctx));
    const entries = [...(turns ?? [])];
    if (!entries.some((t) => t.turn === record.turn)) entries.push(currentEntry(record));
    replaceKeepingFocus(
      lineage,
      ...entries.map((t) =>
        t.turn === record.turn
          ? turnItem(t, record, memory.of(t.turn), [...stepsOf(timelines, t, record), ...questionOf(record, allowed, ctx)], steersView)
          : turnItem(t, null, memory.of(t.turn), stepsOf(timelines, t, null), steersView),
      ),
    );
    lineageNote.hidden = !olderTurns;
    // A turn just sent from the composer is brought into view above it.
    const grew = turnDrawn > 0 && record.turn > turnDrawn;
    turnDrawn = record.turn;
    if (grew && composer && document.activeElement === composer.text) lineage.lastElementChild?.scrollIntoView({ block: "nearest" });
    if (composer && composes(record, role)) {
      composer.draw(record);
      if (!composer.form.isConnected) composerSlot.replaceChildren(composer.form);
    } else {
      composerSlot.replaceChildren();
    }
    drawWork(work, w, workServed, record, allowed, ctx);
    if (record.state === "closed") setLive("ended");
  };

  void (async () => {
    await refresh();
    const first = shown as Loaded | null;
    if (!page.alive || !first) return;
    toLatestTurn(lineage);
    if (first.record.state === "closed") {
      setLive("ended");
      return;
    }
    watch(page, id, { record: offer, state: setLive, timeline: (turn, events) => timelines.add(turn, events) });
  })();
}

/** The question the session waits on: its text, and one button per option when `actions` lists
 * `answer` (never otherwise); once answered, the answer. */
function questionOf(r: Handoff, allowed: Action[], ctx: CommandContext): Node[] {
  const q: Question | null | undefined = r.question;
  if (!q) return [];
  const parts: Node[] = [h("h3", { id: "question-heading" }, q.kind === "permission" ? "Permission asked" : "Question"), h("p", { class: "question-text" }, q.text)];
  if (q.input != null) {
    // The whole of what an Allow approves.
    parts.push(inputBlock(q.input, { id: "question-input", "aria-label": "What an answer approves, whole" }));
  }
  if (q.answer) {
    const label = q.options.find((o) => o.id === q.answer?.option)?.label ?? q.answer.option;
    parts.push(h("p", { class: "question-answer" }, "Answered ", h("strong", null, label), q.answer.note ? ` (${q.answer.note})` : "", " ", timeEl(q.answer.answered_at)));
  } else if (allowed.includes("answer")) {
    const buttons = q.options.map((o) =>
      actionButton("answer", r, ctx, o.label, { "data-option": o.id, "data-key": `answer:${q.id}:${o.id}` }),
    );
    // A redraw keeps what the owner typed for this question.
    const before = document.getElementById("answer-note");
    const note = h("textarea", { id: "answer-note", rows: 2, maxlength: 1024, "data-key": `answer-note:${q.id}` });
    if (before instanceof HTMLTextAreaElement && before.dataset.key === note.dataset.key) note.value = before.value;
    parts.push(
      h("label", { for: "answer-note" }, "Note for the agent (optional)"),
      note,
      h("div", { class: "actions", role: "group", "aria-label": "Answers" }, ...buttons),
    );
  }
  return [h("section", { id: "question", "data-question": q.id, "aria-labelledby": "question-heading" }, ...parts)];
}

/** A chat opens at its latest turn: unless the reader has scrolled already, the last turn is
 * brought into view above the composer (its top, when it is taller than the screen). */
function toLatestTurn(lineage: HTMLElement): void {
  const last = lineage.lastElementChild;
  if (!(last instanceof HTMLElement) || window.scrollY > 0) return;
  const box = last.getBoundingClientRect();
  if (box.bottom <= window.innerHeight) return;
  const roomPx = window.innerHeight * 0.75;
  last.scrollIntoView({ block: box.height > roomPx ? "start" : "end" });
}

/** A turn's timeline block, when it has one to show. */
function stepsOf(timelines: Timelines, t: TurnEntry, current: Handoff | null): Node[] {
  const block = timelines.block(t, current);
  return block ? [block] : [];
}

/** The actions drawn where they act rather than in the session's row of buttons. */
const IN_PLACE = new Set<Action>(["open_turn", "cancel", "answer", "resolve_blocker", "steer"]);

/** The current turn as a lineage entry, for a record newer than the lineage read with it. */
function currentEntry(r: Handoff): TurnEntry {
  return {
    turn: r.turn,
    status: r.status,
    runtime: r.runtime ?? null,
    package_version: r.package_version ?? null,
    package_hash: r.package_hash ?? null,
    permission_mode: r.permission_mode,
    continued_from: r.continued_from ?? null,
    opened_at: r.updated_at,
    ended_at: null,
    prompt: r.prompt ?? null,
    summary: r.summary ?? null,
    reply: r.reply ?? null,
    questions: r.question ? [r.question] : [],
  };
}

function fact(label: string, ...value: (Node | string)[]): Node[] {
  return [h("dt", null, label), h("dd", null, ...value)];
}

function factsOf(r: Handoff): Node[] {
  const pkg = r.package_version
    ? `v${r.package_version} (${short(r.package_hash, 12)})`
    : "none for this turn";
  return [
    ...fact("State", r.state === "closed" ? h("span", { class: "mark mark-closed" }, "closed") : "open"),
    ...fact("Turn", h("span", { id: "turn" }, String(r.turn)), r.continued_from ? ` (continued from turn ${r.continued_from.turn}${r.continued_from.runtime ? ` on ${r.continued_from.runtime}` : ""})` : ""),
    ...fact(
      "Runtime",
      h("span", { id: "runtime", class: "placeholder-none" }, r.runtime ?? ""),
      // The mode is the machine's own claim, which the service cannot check: labelled so.
      ...(r.permission_mode ? [" · permission mode ", h("span", { id: "permission-mode" }, r.permission_mode), MACHINES_REPORT] : []),
    ),
    ...fact("Package", pkg, " · ", h("a", { id: "package-link", href: `#/s/${r.id}/package`, "data-key": "package-link" }, "Package page")),
    ...fact("Version", `v${r.version} · updated `, timeEl(r.updated_at)),
  ];
}

function suggestionOf(r: Handoff, allowed: Action[], ctx: CommandContext): Node[] {
  const s = r.suggestion;
  if (!s) return [];
  const reason = SUGGESTION_PURPOSE[s.reason] ?? s.reason;
  if (!allowed.includes("open_turn")) {
    return [h("p", { class: "note" }, `Suggestion for turn ${s.turn}: ${reason}; could hand off to ${s.runtimes.join(", ")} once this turn ends.`)];
  }
  const button = actionButton("open_turn", r, ctx, "Hand off as suggested…", { id: "use-suggestion", "data-key": "use-suggestion" });
  return [
    h(
      "section",
      { id: "suggestion", class: "callout", "aria-labelledby": "suggestion-heading" },
      h("h2", { id: "suggestion-heading" }, "Suggestion"),
      h("p", null, `Turn ${s.turn}: ${reason} (${s.reason}).`),
      h("p", null, `Could hand off to: ${s.runtimes.join(", ")}.`),
      button,
    ),
  ];
}

function list(id: string, items: Node[], empty: string, tag: "ul" | "ol" = "ul", attrs: Record<string, string | number> = {}): HTMLElement {
  const el = h(tag, { id, ...attrs });
  if (items.length === 0) el.append(h("li", { class: "muted" }, empty));
  else el.append(...items);
  return el;
}

function drawWork(section: HTMLElement, w: WorkRecord | null, served: boolean, record: Handoff, allowed: Action[], ctx: CommandContext): void {
  const spec = w?.spec ?? null;
  const unmet = new Set(w?.unmet ?? []);
  const canResolve = allowed.includes("resolve_blocker");
  const heading = h("h2", { id: "work-heading" }, "Work record");
  const intro = !served
    ? h("p", { class: "note" }, "This service does not serve the work record yet.")
    : !spec
      ? h("p", { class: "muted" }, "No work set yet.")
      : h("p", { class: "work-title" }, spec.title, spec.task_type ? ` · ${spec.task_type}` : "", spec.priority ? ` · priority ${spec.priority}` : "");
  const decisions = (w?.decisions ?? []).map((d) => {
    const li = h("li", { class: d.superseded_by ? "decision superseded" : "decision", "data-id": d.id }, h("strong", null, d.statement));
    if (d.superseded_by) li.append(" ", h("span", { class: "mark" }, `superseded by ${d.superseded_by}`));
    if (d.rationale) li.append(h("p", { class: "rationale" }, `Why: ${d.rationale}`));
    if (d.evidence.length) li.append(h("p", { class: "evidence" }, "Evidence: ", ...d.evidence.flatMap((e, i) => (i ? [", ", safeLink(e)] : [safeLink(e)]))));
    li.append(h("p", { class: "meta" }, `${d.id} · by ${d.by} · `, timeEl(d.recorded_at), d.supersedes ? ` · supersedes ${d.supersedes}` : ""));
    return li;
  });
  const artifacts = [...(w?.artifacts ?? [])]
    .sort((a, b) => (a.title === b.title ? b.version - a.version : a.title < b.title ? -1 : 1))
    .map((a) =>
      h(
        "li",
        { class: "artifact", "data-id": a.id },
        h("strong", null, a.title),
        ` v${a.version} (${a.type}): `,
        safeLink(a.uri),
        a.sha256 ? ` · sha256 ${short(a.sha256, 12)}` : "",
        h("span", { class: "meta" }, ` · by ${a.by} · `, timeEl(a.recorded_at)),
      ),
    );
  const blockers = (w?.blockers ?? []).map((b) => {
    const li = h(
      "li",
      { class: `blocker blocker-${b.status}`, "data-id": b.id },
      h("span", { class: `badge severity-${b.severity}` }, b.severity),
      " ",
      h("span", { class: "blocker-title" }, b.title),
      " ",
      h("span", { class: "mark" }, b.status),
      h("span", { class: "meta" }, ` · ${b.id}`, b.resolved_at ? " · resolved " : "", b.resolved_at ? timeEl(b.resolved_at) : ""),
    );
    if (b.status === "open" && canResolve) {
      li.append(" ", actionButton("resolve_blocker", record, ctx, "Resolve", { "data-blocker": b.id, "data-key": `resolve:${b.id}`, "aria-label": `Resolve blocker: ${b.title}` }));
    }
    return li;
  });
  const files = (w?.files ?? []).map((f) =>
    h("li", null, h("code", null, f.path), " ", h("span", { class: "ins" }, `+${f.insertions}`), " ", h("span", { class: "del" }, `−${f.deletions}`)),
  );
  const part = (title: string, ...body: Node[]) => h("div", { class: "work-part" }, h("h3", null, title), ...body);
  replaceKeepingFocus(
    section,
    heading,
    intro,
    h(
      "div",
      { class: "work-grid" },
      part("Goal", h("p", { id: "goal" }, spec?.goal ?? "")),
      part("Constraints", list("constraints", (spec?.constraints ?? []).map((c) => h("li", null, c)), "None.")),
      part(
        "Acceptance criteria",
        list(
          "criteria",
          (spec?.acceptance_criteria ?? []).map((c, i) =>
            h("li", { class: unmet.has(i) ? "unmet" : null }, `[${i}] ${c} `, unmet.has(i) ? h("span", { class: "mark mark-unmet" }, "unmet") : ""),
          ),
          "None.",
        ),
      ),
      part("Blockers", list("blockers", blockers, "None.")),
      part("Decisions", list("decisions", decisions, "None yet.")),
      part("Artifacts", list("artifacts", artifacts, "None yet.")),
    ),
    part("Files touched", list("files", files, "None reported.", "ul", { class: "files" })),
  );
}
