// The buttons that send commands. They come only from the record's `actions` (the commands the
// rules take from this caller now), so none of them can lead to a 409. Each carries
// `data-action`; cancel and close ask first, in dialog#confirm. Erase is the owner's always
// (it is no action of the record), and asks first too.

import { api, HandoffError } from "./api.js";
import { compiledMessage, confirmDialog, openCompileDialog, openHandoffDialog, openRejectDialog, openReportDialog, type HandoffPrefill } from "./dialogs.js";
import { h, short } from "./dom.js";
import type { Action, Handoff, LatestPackage, TurnEntry } from "./types.js";
import { busy, say } from "./ui.js";

export const LABELS: Record<Action, string> = {
  open_turn: "Hand off next turn…",
  cancel: "Stop",
  close: "Close session",
  report: "Report…",
  compile: "Recompile package",
  accept: "Accept package",
  reject: "Reject package…",
  resolve_blocker: "Resolve",
  answer: "Answer",
  steer: "Steer",
};

export interface CommandContext {
  role: "owner" | "machine";
  /** A record an answer carried: shown at once, before the watch brings it. */
  apply(record: Handoff): void;
  /** Reads everything again (after a package command, whose answer carries no record). */
  refresh(): void;
  /** The package the page shows (the package page): null when it found none. */
  shownPackage?: () => LatestPackage | null;
  /** The lineage the page shows, if it shows one (the session page). */
  turns?: () => TurnEntry[] | null;
  /** The newest record the page has heard of (a watch frame may be newer than the page). */
  newest: () => Handoff | null;
}

/** After a confirmation, whether the action is still one the newest record allows: the record
 * may have moved while the dialog was open (the machine finished the turn, say), and then the
 * command would be refused. */
function stillAllowed(action: Action, ctx: CommandContext): boolean {
  const newest = ctx.newest();
  if (!newest || actionsOf(newest, ctx.role).includes(action)) return true;
  say(`not sent: the session moved meanwhile (v${newest.version}, turn ${newest.turn} ${newest.status}) and no longer allows ${action.replace("_", " ")}`);
  return false;
}

/** Whether the hand-off may have a package, from what the record and the lineage say, so
 * that the console does not ask for one that is not there (a 404 is a console error in every
 * browser). Only when the hand-off is open, could compile, has nothing to accept or reject and
 * no turn was ever handed to a runtime is there surely none (one compiled apart from a turn
 * and then accepted on an earlier turn is the case this misses). */
export function mayHavePackage(record: Handoff, role: "owner" | "machine", turns: TurnEntry[] | null): boolean {
  if (!record.actions || record.state === "closed") return true;
  const acts = actionsOf(record, role);
  if (record.package_version != null || acts.includes("accept") || acts.includes("reject")) return true;
  if (role === "owner" && !acts.includes("compile")) return true;
  if (turns === null) return true;
  return turns.some((t) => t.package_version != null);
}

/** The record's actions; for a Worker older than `actions`, what its rules allow, as far as
 * the record tells (the package commands need the package's state, so they are left out). */
export function actionsOf(record: Handoff, role: "owner" | "machine"): Action[] {
  if (record.actions) return record.actions;
  if (record.state === "closed") return [];
  const ended = ["done", "failed", "cancelled"].includes(record.status);
  const list: Action[] = [];
  if (role === "owner" && ended) list.push("open_turn");
  if (role === "owner" && !ended) list.push("cancel");
  if (role === "owner") list.push("close");
  if (role === "machine" && !ended) list.push("report");
  return list;
}

export function actionButton(action: Action, record: Handoff, ctx: CommandContext, label = LABELS[action], extra: Record<string, string> = {}): HTMLButtonElement {
  const danger = action === "close" || action === "cancel" || action === "reject";
  const button = h("button", { type: "button", "data-action": action, "data-key": extra["data-key"] ?? `action:${action}`, class: danger ? "danger" : action === "open_turn" || action === "accept" ? "primary" : null, ...extra }, label);
  button.addEventListener("click", busy(button, () => run(action, record, ctx, button)));
  return button;
}

async function latestPackage(id: string): Promise<LatestPackage | null> {
  try {
    return await api.getPackage(id);
  } catch (error) {
    if (error instanceof HandoffError && error.code === "package.not_found") return null;
    throw error;
  }
}

export async function handoffPrefill(record: Handoff, suggested: boolean): Promise<HandoffPrefill> {
  const prefill: HandoffPrefill = { runtime: record.runtime };
  if (suggested && record.suggestion) {
    prefill.runtime = record.suggestion.runtimes[0];
    prefill.purpose = SUGGESTION_PURPOSE[record.suggestion.reason] ?? record.suggestion.reason;
    if (record.package_hash) {
      const latest = await latestPackage(record.id);
      if (latest) prefill.objective = latest.package.next.objective;
    }
  }
  return prefill;
}

export const SUGGESTION_PURPOSE: Record<string, string> = {
  "context-threshold": "the context window crossed its threshold",
  "provider-limit": "the turn ended on the provider's limit",
  "quota-threshold": "the provider's quota is running low",
};

async function run(action: Action, record: Handoff, ctx: CommandContext, button: HTMLButtonElement): Promise<void> {
  const id = record.id;
  switch (action) {
    case "open_turn": {
      const prefill = await handoffPrefill(record, button.id === "use-suggestion");
      // What the composer holds goes with the hand-off, as the turn's prompt.
      const typed = document.getElementById("prompt");
      if (typed instanceof HTMLTextAreaElement) prefill.prompt = typed.value.trim();
      openHandoffDialog(record, prefill, ctx.apply);
      return;
    }
    case "cancel": {
      const yes = await confirmDialog(
        `Stop turn ${record.turn}?`,
        `Turn ${record.turn} (${record.status}) stops and is marked cancelled; the machine's later reports on it are refused. The session stays open, and you can send the next prompt.`,
        "Stop the turn",
      );
      if (!yes || !stillAllowed(action, ctx)) return;
      const cancelled = await api.cancel(id, { turn: record.turn });
      say(`cancelled turn ${cancelled.turn} (v${cancelled.version})`);
      ctx.apply(cancelled);
      return;
    }
    case "close": {
      const yes = await confirmDialog(
        `Close ${record.session}?`,
        "Closing is final: the session cannot be reopened, no turn can be opened on it again, and a turn still going is cancelled. Its record stays readable.",
        "Close for good",
      );
      if (!yes || !stillAllowed(action, ctx)) return;
      const closed = await api.close(id);
      say(`closed ${closed.session} at turn ${closed.turn} ${closed.status} (v${closed.version})`);
      ctx.apply(closed);
      return;
    }
    case "report":
      openReportDialog(record, ctx.apply);
      return;
    case "compile": {
      const latest = ctx.shownPackage ? ctx.shownPackage() : (mayHavePackage(record, ctx.role, ctx.turns?.() ?? null) ? await latestPackage(id) : null);
      if (!latest) {
        openCompileDialog(record, () => ctx.refresh());
        return;
      }
      const next = latest.package.next;
      const answer = await api.compilePackage(id, {
        runtime: next.runtime,
        objective: next.objective,
        purpose: next.purpose,
        note: latest.package.notes ?? null,
      });
      say(compiledMessage(answer));
      ctx.refresh();
      return;
    }
    case "accept": {
      const latest = ctx.shownPackage ? ctx.shownPackage() : await latestPackage(id);
      if (!latest) throw new HandoffError(404, "package.not_found", "this hand-off has no package to accept");
      if (!ctx.shownPackage) {
        // The session page does not show the document: say which one this accepts, by its hash.
        const yes = await confirmDialog(
          `Accept package v${latest.package_version}?`,
          `This accepts exactly the package whose hash is ${latest.package_hash}, for turn ${record.turn}. Its document is on the package page.`,
          "Accept it",
        );
        if (!yes || !stillAllowed(action, ctx)) return;
      }
      const answer = await api.acceptPackage(id, latest.package_hash);
      say(`package accepted (v${answer.package_version}, ${short(answer.package_hash)})`);
      ctx.refresh();
      return;
    }
    case "reject":
      openRejectDialog(id, () => ctx.refresh());
      return;
    case "resolve_blocker": {
      const blocker = button.dataset.blocker;
      if (!blocker) return;
      const answer = await api.resolveBlocker(id, blocker);
      say(`blocker ${answer.blocker.id} resolved (v${answer.handoff.version})`);
      ctx.apply(answer.handoff);
      return;
    }
    case "answer": {
      // One button per option of the open question; the note field beside them is optional.
      const option = button.dataset.option;
      const question = record.question;
      if (!option || !question) return;
      const field = document.getElementById("answer-note");
      const note = field instanceof HTMLTextAreaElement ? field.value.trim() : "";
      const answered = await api.answer(id, { question: question.id, option, ...(note ? { note } : {}) });
      const label = question.options.find((o) => o.id === option)?.label ?? option;
      say(`answered ${label} (v${answered.version})`);
      ctx.apply(answered);
      return;
    }
    // The composer's Steer sends what it holds; no button of its own runs here.
    case "steer":
      return;
  }
}

/** The owner's "Erase session…": asks first, then `DELETE`s the session (closing it if open)
 * and goes back to the list. Not a record action, so it carries no `data-action`. */
export function eraseButton(record: Handoff): HTMLButtonElement {
  const button = h("button", { type: "button", id: "erase", "data-key": "erase", class: "danger" }, "Erase session…");
  button.addEventListener(
    "click",
    busy(button, async () => {
      const yes = await confirmDialog(
        `Erase ${record.session}?`,
        "Erasing is final: the session is closed if it is open, then its record, work record, packages and turns are deleted for good, and its machine can no longer reach it.",
        "Erase for good",
      );
      if (!yes) return;
      // Leave the session page first: its live view would read the session as it is erased.
      await new Promise<void>((resolve) => {
        window.addEventListener("hashchange", () => resolve(), { once: true });
        location.hash = "#/";
      });
      await api.erase(record.id);
      // The list, which polls, drops its row at its next look.
      say(`erased ${record.session}`);
    }),
  );
  return button;
}

