// The session as a conversation: each turn, oldest first, shows the person's prompt and then
// what came back (the status, the summary, the questions and their answers, the package when
// the turn was handed on), and a composer at the bottom sends the next turn's prompt.
//
// The lineage (GET …/turns) carries each turn's prompt, status, summary, whole reply and its
// questions with their answers, so a reload, a second tab or another device shows every turn's
// outcome; the page also keeps what it saw of each turn on the records (the last summary, every
// question) while it is open, for a turn whose lineage entry it has not read again yet.

import { api, HandoffError } from "./api.js";
import { actionButton, actionsOf, type CommandContext } from "./commands.js";
import { h, replaceKeepingFocus, short, statusBadge, timeEl } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import type { SteerOutcome } from "./timeline.js";
import type { Handoff, Question, Steer, TurnEntry } from "./types.js";
import { busy, fail, say } from "./ui.js";

/** What the page saw of one turn on the records it was shown. */
interface Seen {
  /** The version of the newest record seen on this turn: an older one, read late, changes nothing. */
  version: number;
  summary: string | null;
  /** Every question the turn asked, by id, as last seen (with its answer once given). */
  questions: Map<string, Question>;
}

/** What the page remembers of each turn, from every record it hears of, in whatever order. */
export class Memory {
  private turns = new Map<number, Seen>();

  see(record: Handoff): void {
    const seen = this.turns.get(record.turn) ?? { version: 0, summary: null, questions: new Map() };
    this.turns.set(record.turn, seen);
    const q: Question | null | undefined = record.question;
    const known = q ? seen.questions.get(q.id) : undefined;
    // A question keeps its answer once seen answered, whatever the order records come in.
    if (q && !(known?.answer && !q.answer)) seen.questions.set(q.id, q);
    if (record.version < seen.version) return;
    seen.version = record.version;
    seen.summary = record.summary ?? null;
  }

  of(turn: number): Seen | undefined {
    return this.turns.get(turn);
  }
}

/** What follows a permission mode wherever it is shown: the machine reported it. */
export const MACHINES_REPORT = ", as the machine reports it";

/** What the conversation knows of the steers: what became of each (its turn's timeline), and
 * how an undelivered one is sent as the next turn. */
export interface SteersView {
  outcome(turn: number, id: string): SteerOutcome | undefined;
  resend(words: string): void;
}

/** One turn of the conversation. `current` is the record when this is its turn; `live` is the
 * open question's section (with its buttons), drawn by the session page. */
export function turnItem(t: TurnEntry, current: Handoff | null, seen: Seen | undefined, live: Node[], steersView?: SteersView): HTMLLIElement {
  const status = current?.status ?? t.status;
  const head = h("p", { class: "turn-head" }, h("strong", null, `Turn ${t.turn}`), " · ", shortTime(t.opened_at));
  if (t.package_version) {
    head.append(` · handed to ${t.runtime ?? "?"} with package v${t.package_version} (${short(t.package_hash)})`);
  } else if (t.runtime) {
    head.append(` · on ${t.runtime}`);
  }
  // The mode the turn runs in, as the machine named it (the record's, for the current turn): its
  // own claim, which the service cannot check, and labelled so.
  const mode = current ? current.permission_mode : t.permission_mode;
  if (mode) head.append(" · permission mode ", h("span", { class: "turn-mode" }, mode), MACHINES_REPORT);

  const words = t.prompt ?? current?.prompt ?? null;
  const prompt = words
    ? h("div", { class: "bubble prompt" }, h("p", { class: "who" }, "You"), h("p", { class: "prompt-text" }, words))
    : h("p", { class: "no-prompt" }, t.prompt_dropped ? "Its prompt is no longer kept (only the newest turns' are)" : "Opened without a prompt");
  const steers = (current ? current.steers : t.steers) ?? [];

  const outcome = h("div", { class: "bubble outcome", "data-status": status }, h("p", { class: "who" }, t.runtime ? `The agent, on ${t.runtime} · ` : "The agent · ", statusBadge(status, current ? "status" : undefined)));
  const summary = current ? current.summary ?? "" : seen?.summary ?? t.summary ?? "";
  if (current) outcome.append(h("p", { id: "summary", class: "turn-summary summary-text" }, summary));
  else if (summary) outcome.append(h("p", { class: "turn-summary" }, summary));
  // The reply whole, as Markdown through the package's sanitiser; then the questions asked.
  const reply = current ? current.reply ?? t.reply : t.reply;
  if (reply) outcome.append(h("div", { class: "turn-reply markdown" }, renderMarkdown(reply)));
  else if (t.reply_dropped) outcome.append(h("p", { class: "muted" }, "Its reply is no longer kept (only the newest turns' are)"));
  const open = current?.question?.id;
  for (const q of questionsOf(t, seen)) {
    if (q.id !== open) outcome.append(pastQuestion(q));
  }
  outcome.append(...live);
  if (t.ended_at) outcome.append(h("p", { class: "times" }, "ended ", shortTime(t.ended_at)));
  const bubbles = steers.map((s) => steerBubble(s, steersView?.outcome(t.turn, s.id), steersView));
  return h("li", { class: "turn", "data-turn": t.turn, "data-status": status }, head, prompt, ...bubbles, outcome);
}

/** One steer under its turn's prompt: the owner's words sent while the turn ran, and its state:
 * sent (the agent reads it after its current step), delivered (the harness took the words), or
 * not delivered with why, offering to send the words as the next turn. */
function steerBubble(s: Steer, outcome: SteerOutcome | undefined, view: SteersView | undefined): HTMLElement {
  const state = outcome?.state ?? "sent";
  const label = state === "undelivered" ? "not delivered" : state;
  const bubble = h(
    "div",
    { class: "bubble prompt steer", "data-steer": s.id, "data-state": state },
    h("p", { class: "who" }, "You, while it ran · ", h("span", { class: "steer-state" }, label), " · ", shortTime(s.sent_at)),
    h("p", { class: "prompt-text" }, s.prompt),
  );
  if (state === "sent") bubble.append(h("p", { class: "steer-note muted" }, "read after the current step"));
  if (state === "undelivered") {
    bubble.append(h("p", { class: "steer-why" }, outcome?.why ?? "the harness did not take the words"));
    if (view) {
      const resend = h("button", { type: "button", class: "small steer-resend", "data-key": `resend:${s.id}` }, "Send as next turn");
      resend.addEventListener("click", () => view.resend(s.prompt));
      bubble.append(resend);
    }
  }
  return bubble;
}

/** Every question a turn asked, in the order asked: the lineage's, with what the page saw
 * since (a question it saw answered keeps its answer, whichever was read first). */
function questionsOf(t: TurnEntry, seen: Seen | undefined): Question[] {
  const all = new Map<string, Question>();
  for (const q of t.questions ?? []) all.set(q.id, q);
  for (const q of seen?.questions.values() ?? []) {
    const kept = all.get(q.id);
    if (!kept || (q.answer && !kept.answer)) all.set(q.id, q);
  }
  return [...all.values()];
}

/** A question's input, whole, as text: one numbered block per line of it, so that a line the
 * screen wraps (indented under its number) is never mistaken for two (a newline in a command
 * runs a second one); nothing runs past the right edge, and a long input scrolls, taking the
 * keyboard focus to do so. Its text is exactly the input. */
export function inputBlock(input: string, attrs: Record<string, string>): HTMLPreElement {
  const lines = input.split("\n");
  const block = h("pre", { class: "question-input", tabindex: 0, ...attrs }, ...lines.map((line, i) => h("span", { class: "line" }, i < lines.length - 1 ? `${line}\n` : line)));
  // The numbers' gutter is as wide as the last number (set through the CSSOM, which the CSP allows).
  block.style.setProperty("--gutter", `${String(lines.length).length}ch`);
  return block;
}

/** A time as a conversation shows it: the time of day when it is today, else the date too;
 * the whole timestamp on hover. */
function shortTime(iso: string): Node {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return timeEl(iso);
  const today = d.toDateString() === new Date().toDateString();
  const text = today ? d.toLocaleTimeString(undefined, { timeStyle: "short" }) : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  return h("time", { datetime: iso, title: iso }, text);
}

/** A question the turn asked that is no longer open: its words, its input and its answer. */
function pastQuestion(q: Question): HTMLElement {
  const label = q.answer ? (q.options.find((o) => o.id === q.answer?.option)?.label ?? q.answer.option) : null;
  return h(
    "div",
    { class: "past-question", "data-question": q.id },
    h("p", { class: "question-text" }, q.kind === "permission" ? "Asked permission: " : "Asked: ", q.text),
    q.input != null ? inputBlock(q.input, { "aria-label": `What ${q.id} asked to approve, whole` }) : null,
    label
      ? h("p", { class: "question-answer" }, "Answered ", h("strong", null, label), q.answer?.note ? ` (${q.answer.note})` : "")
      : h("p", { class: "question-answer" }, "Not answered."),
  );
}

/** The composer: the next turn's prompt, or words for the running turn. It is made once per
 * page, so what the person types and the keyboard focus survive every redraw; `draw` offers
 * Send exactly when `actions` holds `open_turn`, Stop exactly when it holds `cancel`, and
 * Steer (the main button) with Stop and send while it holds `steer`. Enter sends or steers,
 * Shift+Enter starts a line. */
export class Composer {
  readonly form: HTMLFormElement;
  readonly text: HTMLTextAreaElement;
  private readonly bar: HTMLElement;
  private readonly hint: HTMLElement;
  private readonly conflict: HTMLElement;
  private record: Handoff | null = null;
  private sending = false;

  constructor(private readonly ctx: CommandContext) {
    this.text = h("textarea", { id: "prompt", rows: 2, spellcheck: "true", "aria-describedby": "composer-hint", placeholder: "The next turn's prompt" });
    this.hint = h("p", { id: "composer-hint", class: "hint" });
    this.conflict = h("div", { id: "composer-conflict", class: "conflict", role: "alert", hidden: true });
    this.bar = h("div", { class: "composer-buttons", role: "group", "aria-label": "Send or stop" });
    this.form = h(
      "form",
      { id: "composer", class: "composer", novalidate: true, "aria-label": "Next prompt" },
      this.conflict,
      h("label", { for: "prompt", class: "visually-hidden" }, "Next prompt"),
      h("div", { class: "composer-row" }, this.text, this.bar),
      this.hint,
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.text.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) return;
      event.preventDefault();
      this.send();
    });
  }

  /** The buttons and the hint for `record`. */
  draw(record: Handoff): void {
    this.record = record;
    const allowed = actionsOf(record, this.ctx.role);
    const canSend = allowed.includes("open_turn");
    const buttons: HTMLButtonElement[] = [];
    if (canSend) buttons.push(actionButton("open_turn", record, this.ctx, "Hand off…", { id: "hand-off-next", "data-key": "hand-off-next", class: "" }));
    if (allowed.includes("cancel")) buttons.push(actionButton("cancel", record, this.ctx, "Stop", { id: "stop", "data-key": "stop" }));
    if (canSend) {
      const send = h("button", { type: "submit", id: "send", class: "primary", "data-action": "open_turn", "data-key": "send" }, "Send");
      buttons.push(send);
    }
    const canSteer = !canSend && allowed.includes("steer");
    if (canSteer) {
      const stopAndSend = h("button", { type: "button", id: "stop-and-send", "data-key": "stop-and-send" }, "Stop and send");
      stopAndSend.addEventListener("click", busy(stopAndSend, () => this.stopAndSend()));
      if (allowed.includes("cancel")) buttons.push(stopAndSend);
      buttons.push(h("button", { type: "submit", id: "steer", class: "primary", "data-action": "steer", "data-key": "steer" }, "Steer"));
    }
    replaceKeepingFocus(this.bar, ...buttons);
    this.text.placeholder = canSteer ? `Words for turn ${record.turn} while it runs` : "The next turn's prompt";
    this.hint.textContent = canSend
      ? "Enter sends, Shift+Enter starts a new line."
      : canSteer
        ? `Turn ${record.turn} is ${record.status}: Enter steers it (the agent reads your words after its current step). Stop and send starts the next turn with them instead.`
        : allowed.includes("cancel")
          ? `Turn ${record.turn} is ${record.status}: Send comes back when it ends.`
          : `Turn ${record.turn} is ${record.status}.`;
  }

  /** An undelivered steer's "Send as next turn": its words open the next turn when the record
   * allows one; while the turn still goes they wait in the composer for Send or Stop and send. */
  resend(words: string): void {
    const record = this.record;
    if (!record) return;
    if (!actionsOf(record, this.ctx.role).includes("open_turn")) {
      this.text.value = words;
      this.text.focus();
      say(`the words are in the composer: Send opens the next turn with them once turn ${record.turn} ends, or Stop and send now`);
      return;
    }
    if (this.sending) return;
    this.sending = true;
    void this.open(record, words)
      .catch(fail)
      .finally(() => {
        this.sending = false;
      });
  }

  /** Steer: the typed words go to the running turn, which keeps going. */
  private async steer(record: Handoff, prompt: string): Promise<void> {
    const steered = await api.steer(record.id, { turn: record.turn, prompt });
    if (this.text.value.trim() === prompt) this.text.value = "";
    say(`steered turn ${steered.turn}: the agent reads it after its current step`);
    this.ctx.apply(steered);
  }

  /** Stop and send: the running turn is cancelled and the next opened with the typed words,
   * without typing them again. */
  private async stopAndSend(): Promise<void> {
    const record = this.record;
    const prompt = this.text.value.trim();
    if (!record) return;
    if (!prompt) {
      say("write the words first: Stop and send opens the next turn with them");
      this.text.focus();
      return;
    }
    const cancelled = await api.cancel(record.id, { turn: record.turn });
    this.ctx.apply(cancelled);
    await this.open(cancelled, prompt);
  }

  private send(): void {
    const record = this.record;
    if (!record) return;
    const allowed = actionsOf(record, this.ctx.role);
    const steering = !allowed.includes("open_turn") && allowed.includes("steer");
    if (!allowed.includes("open_turn") && !steering) return;
    const prompt = this.text.value.trim();
    if (!prompt) {
      say(steering ? "write the words first: Steer sends them to the running turn" : "write the prompt first: Send opens the next turn with it");
      this.text.focus();
      return;
    }
    const button = this.bar.querySelector<HTMLButtonElement>(steering ? "#steer" : "#send");
    if (!button || this.sending) return;
    this.sending = true;
    busy(button, async () => {
      try {
        await (steering ? this.steer(record, prompt) : this.open(record, prompt));
      } finally {
        this.sending = false;
      }
    })();
  }

  private async open(record: Handoff, prompt: string): Promise<void> {
    const after = record.turn;
    this.conflict.hidden = true;
    try {
      const opened = await api.openTurn(record.id, { after, prompt });
      // Only what was sent is cleared: the person may have typed on meanwhile.
      if (this.text.value.trim() === prompt) this.text.value = "";
      say(`sent: turn ${opened.turn} opened`);
      this.ctx.apply(opened);
    } catch (error) {
      if (error instanceof HandoffError && error.code === "handoff.turn_conflict") {
        await this.showConflict(record.id, after, error);
        return;
      }
      throw error;
    }
  }

  /** Another device opened the turn first: its prompt is shown, the text typed here is kept,
   * and the page moves to the turn it opened. */
  private async showConflict(id: string, after: number, error: HandoffError): Promise<void> {
    const record = error.handoff;
    let theirs: string | null | undefined = record && record.turn === after + 1 ? record.prompt : undefined;
    if (theirs === undefined) {
      try {
        const page = await api.turns(id, { before: after + 2, limit: 1 });
        theirs = page.turns.find((t) => t.turn === after + 1)?.prompt ?? null;
      } catch (readError) {
        fail(readError);
        theirs = null;
      }
    }
    const dismiss = h("button", { type: "button", id: "conflict-dismiss", class: "small" }, "Dismiss");
    dismiss.addEventListener("click", () => {
      this.conflict.hidden = true;
      this.text.focus();
    });
    const heading = h("p", null, h("strong", null, `Another device spoke first: turn ${after + 1} opened`), theirs ? " with its prompt:" : " without a prompt.");
    replaceKeepingFocus(
      this.conflict,
      heading,
      theirs ? h("blockquote", { class: "their-prompt" }, theirs) : null,
      h("p", null, "Your text is kept below: send it as the next turn when Send is offered again."),
      dismiss,
    );
    this.conflict.hidden = false;
    fail(error);
    if (record) this.ctx.apply(record);
    else this.ctx.refresh();
  }
}

/** Whether the composer belongs on the page: an owner's open hand-off. */
export function composes(record: Handoff, role: "owner" | "machine"): boolean {
  return role === "owner" && record.state !== "closed";
}
