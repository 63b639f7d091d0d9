// The turn's timeline in the conversation: the running turn's commentary, live over
// the watch's `handoff.v2` frames (the model's words, each tool call as one line that opens to
// its input and output, the machine's notes), a line saying how long it has worked and how many
// steps it took, and one saying when the machine has gone quiet; an ended turn's steps folded
// behind "N steps", read (GET …/events?turn=N) when opened.
//
// Each turn's block is one element made once per page and kept across redraws (the session page
// redraws the conversation on every version, and events never move the version), so an open
// tool line stays open and a new event only adds or changes its own line.

import { api } from "./api.js";
import { inputBlock } from "./conversation.js";
import { h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import type { Handoff, TimelineEvent, TurnEntry } from "./types.js";
import { fail, type Page } from "./ui.js";

/** After this long without an event, a running turn says the machine has gone quiet. */
export const STALL_MS = 120_000;
/** Test-only: a localStorage value (milliseconds) that replaces STALL_MS, so that a browser test
 * need not wait two minutes. Nothing but the console's tests sets it. */
export const STALL_MS_TEST_KEY = "handoff.test.stall-ms";
/** How often the running line is brought up to date. */
const TICK_MS = 1_000;
/** A turn holds at most 2,000 events (TIMELINE_EVENTS_PER_TURN_MAX): one read takes them all. */
const READ_LIMIT = 2_000;
/** The words a tool line shows of its input: its first line, up to this many characters. */
const GIST_CHARS = 120;

function stallMs(): number {
  try {
    const v = Number(localStorage.getItem(STALL_MS_TEST_KEY));
    if (Number.isFinite(v) && v > 0) return v;
  } catch {
    // no storage: the real threshold
  }
  return STALL_MS;
}

/** "45 s", "2 min", "1 h 5 min". */
export function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  return `${Math.floor(min / 60)} h ${min % 60} min`;
}

function steps(n: number): string {
  return n === 1 ? "1 step" : `${n} steps`;
}

/** One line of the commentary: a message, a note, or a tool call (its events merged by id). */
interface Step {
  key: string;
  kind: "message" | "note" | "tool";
  text?: string;
  name?: string;
  state?: string;
  input?: string;
  output?: string;
  outputBytes?: number;
  durationMs?: number;
}

function stepsOf(events: Iterable<TimelineEvent>): Step[] {
  const out: Step[] = [];
  const tools = new Map<string, Step>();
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    if (e.kind === "tool") {
      const id = e.id ?? `seq${e.seq}`;
      let step = tools.get(id);
      if (!step) {
        step = { key: `t:${id}`, kind: "tool", name: e.name };
        tools.set(id, step);
        out.push(step);
      }
      step.name = e.name ?? step.name;
      step.state = e.state ?? step.state;
      step.input = e.input ?? step.input;
      step.output = e.output ?? step.output;
      step.outputBytes = e.output_bytes ?? step.outputBytes;
      step.durationMs = e.duration_ms ?? step.durationMs;
    } else if (e.kind === "message" || e.kind === "note") {
      out.push({ key: `m:${e.seq}`, kind: e.kind, text: e.text ?? "" });
    }
  }
  return out;
}

/** What became of one of the owner's steers, as its turn's timeline says (a `steer` event). */
export interface SteerOutcome {
  state: "delivered" | "undelivered";
  why?: string;
}

/** What the page holds of one turn's timeline, and its block on the page. */
class TurnTimeline {
  readonly events = new Map<number, TimelineEvent>();
  /** Each steer's outcome by its id: the newest `steer` event naming it. */
  readonly steers = new Map<string, SteerOutcome & { seq: number }>();
  /** "live": the watch sent its events; "loaded": read whole; else not read yet. */
  source: "none" | "live" | "loading" | "loaded" = "none";
  dropped = false;
  lastEventMs = 0;
  readonly el: HTMLElement;
  private readonly status = h("p", { class: "timeline-status", "aria-live": "polite" });
  private readonly stalled = h("p", { class: "timeline-stalled", role: "status", hidden: true });
  private readonly note = h("p", { class: "timeline-note muted", hidden: true });
  private readonly list = h("ol", { class: "steps" });
  private readonly fold: HTMLDetailsElement;
  private readonly foldLabel = h("span", { class: "steps-count" }, "Steps");
  private readonly lines = new Map<string, HTMLElement>();
  private readonly sigs = new Map<string, string>();
  private running = false;
  private startedMs = 0;
  private mode: string | null = null;

  constructor(
    readonly turn: number,
    private readonly load: (t: TurnTimeline) => void,
  ) {
    this.fold = h("details", { class: "steps-fold" }, h("summary", null, this.foldLabel));
    this.fold.addEventListener("toggle", () => {
      if (this.fold.open && this.source === "none") this.load(this);
    });
    this.el = h("section", { class: "timeline", "data-turn": turn, "aria-label": `Turn ${turn}'s steps` });
  }

  /** Answers whether a steer's outcome changed. */
  add(events: TimelineEvent[]): boolean {
    let steered = false;
    for (const e of events) {
      this.events.set(e.seq, e);
      const known = e.id ? this.steers.get(e.id) : undefined;
      if (e.kind === "steer" && e.id && (e.state === "delivered" || e.state === "undelivered") && (!known || known.seq < e.seq)) {
        this.steers.set(e.id, { state: e.state, why: e.why, seq: e.seq });
        steered = true;
      }
      const at = e.at ? Date.parse(e.at) : NaN;
      this.lastEventMs = Math.max(this.lastEventMs, Number.isNaN(at) ? Date.now() : at);
    }
    this.render();
    return steered;
  }

  /** The turn as the conversation now shows it: running (the commentary open) or ended (folded). */
  show(entry: TurnEntry, current: Handoff | null): HTMLElement | null {
    const status = current?.status ?? entry.status;
    this.running = current !== null && (status === "running" || status === "needs-you");
    this.startedMs = Date.parse(entry.opened_at) || this.startedMs;
    this.mode = (current ? current.sync_mode : entry.sync_mode) ?? null;
    this.el.dataset.state = this.running ? "running" : "ended";
    this.el.dataset.status = status;
    this.render();
    // A turn watched to its end with nothing on its timeline has no steps to fold.
    if (!this.running && this.source === "live" && this.events.size === 0) return null;
    return this.el;
  }

  render(): void {
    const all = stepsOf(this.events.values());
    this.el.dataset.steps = String(all.length);
    const known = this.source === "live" || this.source === "loaded";
    const wanted: HTMLElement[] = [];
    for (const step of all) {
      let line = this.lines.get(step.key);
      if (!line) {
        line = h("li", { class: `step step-${step.kind}`, "data-step": step.key });
        this.lines.set(step.key, line);
      }
      // A line is drawn again only when its step changed (a tool's end, its output).
      const sig = JSON.stringify(step);
      if (this.sigs.get(step.key) !== sig) {
        this.sigs.set(step.key, sig);
        drawStep(line, step);
      }
      wanted.push(line);
    }
    this.list.replaceChildren(...wanted);
    if (this.dropped) {
      this.note.textContent = "Its steps are no longer kept (only the newest 4 turns' are).";
      this.note.hidden = false;
    } else if (this.source === "loading") {
      this.note.textContent = "Loading its steps…";
      this.note.hidden = false;
    } else if (known && all.length === 0) {
      this.note.textContent = "No steps recorded.";
      this.note.hidden = false;
    } else if (this.mode === "metadata") {
      this.note.textContent = "The machine sends tool names only (sync mode metadata).";
      this.note.hidden = false;
    } else {
      this.note.hidden = true;
    }
    if (this.running) {
      this.fold.remove();
      if (this.list.parentElement !== this.el) this.el.replaceChildren(this.status, this.stalled, this.list, this.note);
      this.tick();
    } else {
      this.foldLabel.textContent = this.dropped ? "Steps (no longer kept)" : known ? steps(all.length) : "Steps";
      if (this.list.parentElement !== this.fold) this.fold.replaceChildren(this.fold.firstElementChild as HTMLElement, this.list, this.note);
      if (this.fold.parentElement !== this.el) this.el.replaceChildren(this.fold);
    }
  }

  /** The running line and the stalled line, as of now. */
  tick(): void {
    if (!this.running) return;
    const now = Date.now();
    const n = this.el.dataset.steps ?? "0";
    const waiting = this.el.dataset.status === "needs-you";
    this.status.textContent = `${waiting ? "waiting for you" : `working for ${span(now - this.startedMs)}`} · ${steps(Number(n))}`;
    const quiet = now - Math.max(this.lastEventMs, this.startedMs);
    const stalled = !waiting && quiet >= stallMs();
    this.stalled.hidden = !stalled;
    if (stalled) this.stalled.textContent = `no word from the machine for ${span(quiet)}`;
  }
}

/** A line's content: a message as Markdown, a note as text, a tool call as its name and gist,
 * opening to its whole input and its output when the machine sent them. */
function drawStep(line: HTMLElement, step: Step): void {
  if (step.kind === "message") {
    if (!line.firstChild) line.append(h("div", { class: "step-text markdown" }, renderMarkdown(step.text ?? "")));
    return;
  }
  if (step.kind === "note") {
    if (!line.firstChild) line.append(h("p", { class: "note-text" }, step.text ?? ""));
    return;
  }
  line.dataset.state = step.state ?? "started";
  const gist = (step.input ?? "").split("\n")[0]?.trim() ?? "";
  const head: (Node | string)[] = [h("span", { class: "tool-name" }, step.name ?? "tool")];
  if (gist) head.push(" ", h("code", { class: "tool-gist" }, gist.length > GIST_CHARS ? `${gist.slice(0, GIST_CHARS)}…` : gist));
  const state = step.state === "failed" ? "failed" : step.state === "done" ? null : "running";
  if (state) head.push(" ", h("span", { class: `tool-state tool-${state}` }, state));
  if (step.durationMs != null) head.push(h("span", { class: "tool-time muted" }, ` · ${step.durationMs < 1000 ? `${step.durationMs} ms` : span(step.durationMs)}`));
  const body: Node[] = [];
  if (step.input) body.push(inputBlock(step.input, { class: "question-input tool-input", "aria-label": `${step.name ?? "tool"}'s input, whole` }));
  if (step.output != null) {
    body.push(h("pre", { class: "tool-output", tabindex: 0, "aria-label": `${step.name ?? "tool"}'s output` }, step.output));
    if (step.outputBytes != null && step.outputBytes > new TextEncoder().encode(step.output).length) {
      body.push(h("p", { class: "muted tool-clipped" }, `clipped: ${step.outputBytes} bytes in all`));
    }
  }
  if (body.length === 0) {
    line.replaceChildren(h("p", { class: "tool-line" }, ...head));
    return;
  }
  let fold = line.firstElementChild;
  if (!(fold instanceof HTMLDetailsElement)) {
    fold = h("details", { class: "tool-fold" });
    line.replaceChildren(fold);
  }
  (fold as HTMLDetailsElement).replaceChildren(h("summary", { class: "tool-line" }, ...head), ...body);
}

/** Every turn's timeline the page holds: events from the watch, a turn's whole read on opening
 * its fold, and each turn's block for the conversation. */
export class Timelines {
  private turns = new Map<number, TurnTimeline>();
  /** Called when a steer's outcome arrives: the conversation draws its steers again. */
  onSteer: () => void = () => {};

  constructor(
    private readonly page: Page,
    private readonly id: string,
  ) {
    const timer = setInterval(() => {
      for (const t of this.turns.values()) t.tick();
    }, TICK_MS);
    page.onDispose(() => clearInterval(timer));
  }

  private of(turn: number): TurnTimeline {
    let t = this.turns.get(turn);
    if (!t) {
      t = new TurnTimeline(turn, (x) => void this.read(x));
      this.turns.set(turn, t);
    }
    return t;
  }

  /** A watch frame: `turn`'s events, each once and in order. */
  add(turn: number, events: TimelineEvent[]): void {
    const t = this.of(turn);
    if (t.source === "none") t.source = "live";
    if (t.add(events)) this.onSteer();
  }

  /** What became of steer `id` of `turn`, once its timeline says. */
  steer(turn: number, id: string): SteerOutcome | undefined {
    return this.turns.get(turn)?.steers.get(id);
  }

  /** The block of `entry`'s turn (`current` is the record when it is the record's turn). A turn
   * with steers has its timeline read, for what became of them. */
  block(entry: TurnEntry, current: Handoff | null): HTMLElement | null {
    const t = this.of(entry.turn);
    const steered = ((current ? current.steers : entry.steers) ?? []).length > 0;
    if (steered && t.source === "none") void this.read(t);
    return t.show(entry, current);
  }

  private async read(t: TurnTimeline): Promise<void> {
    t.source = "loading";
    t.render();
    try {
      const answer = await api.events(this.id, { turn: t.turn, limit: READ_LIMIT });
      if (!this.page.alive) return;
      t.dropped = answer.dropped === true;
      t.source = "loaded";
      if (t.add(answer.events)) this.onSteer();
    } catch (error) {
      t.source = "none";
      t.render();
      fail(error);
    }
  }
}

/** The machine's sync mode, as a fact of the session: its own claim, labelled so. */
export function syncModeFact(r: Handoff, label: string): Node[] {
  if (!r.sync_mode) return [];
  return [h("dt", null, "Sync mode"), h("dd", null, h("span", { id: "sync-mode" }, r.sync_mode), label)];
}
