// The dialogs of index.html: confirm (cancel, close), hand-off, reject, report and compile.
// Each is a modal <dialog>; Escape or its Cancel button closes it and the focus goes back to
// the button that opened it. A refusal stays visible in #error and in the dialog itself.

import { api, HandoffError } from "./api.js";
import { byId, h, short } from "./dom.js";
import type { CompileAnswer, Handoff, LatestPackage, OpenTurnInput, RejectReason, ReportInput } from "./types.js";
import { fail, guard, say } from "./ui.js";

let opener: Element | null = null;
let openerKey: string | undefined;

function show(dialog: HTMLDialogElement): void {
  opener = document.activeElement;
  openerKey = opener instanceof HTMLElement ? opener.dataset.key : undefined;
  for (const old of dialog.querySelectorAll(".form-error")) old.remove();
  if (!dialog.open) dialog.showModal();
}

function hide(dialog: HTMLDialogElement): void {
  if (dialog.open) dialog.close();
}

/** Back to the button that opened the dialog, or to the one drawn in its place since (a live
 * update redraws the buttons), or else to the page's main. */
function restoreFocus(): void {
  const back = opener;
  const key = openerKey;
  opener = null;
  openerKey = undefined;
  if (back instanceof HTMLElement && back.isConnected && back !== document.body) return back.focus();
  const again = key ? document.querySelector<HTMLElement>(`main [data-key="${CSS.escape(key)}"]`) : null;
  (again ?? document.querySelector<HTMLElement>("main"))?.focus();
}

function formError(dialog: HTMLDialogElement, error: unknown): void {
  fail(error);
  for (const old of dialog.querySelectorAll(".form-error")) old.remove();
  const text = error instanceof HandoffError ? error.message : String(error);
  dialog.querySelector(".buttons")?.before(h("p", { class: "form-error" }, text));
}

function value(id: string): string {
  return (byId<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>(id).value ?? "").trim();
}

function setValue(id: string, text: string | null | undefined): void {
  byId<HTMLInputElement | HTMLTextAreaElement>(id).value = text ?? "";
}

/** One submit handler per form: no navigation ever (the CSP's form-action is 'none'). */
function onSubmit(formId: string, fn: () => Promise<void>): void {
  const form = byId<HTMLFormElement>(formId);
  let running = false;
  form.addEventListener(
    "submit",
    guard(async (event: Event) => {
      event.preventDefault();
      if (running) return;
      running = true;
      form.setAttribute("aria-busy", "true");
      try {
        await fn();
      } finally {
        running = false;
        form.removeAttribute("aria-busy");
      }
    }),
  );
}

// ---- confirm -------------------------------------------------------------------------------

let confirmAnswer: ((yes: boolean) => void) | null = null;

/** Asks before a command that cannot be taken back; true for yes. */
export function confirmDialog(title: string, text: string, yes: string, no = "Keep it"): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>("confirm");
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  byId("confirm-yes").textContent = yes;
  byId("confirm-no").textContent = no;
  confirmAnswer?.(false);
  return new Promise((resolve) => {
    confirmAnswer = resolve;
    show(dialog);
    byId("confirm-no").focus();
  });
}

function answerConfirm(yes: boolean): void {
  const answer = confirmAnswer;
  confirmAnswer = null;
  hide(byId<HTMLDialogElement>("confirm"));
  answer?.(yes);
}

// ---- hand-off ------------------------------------------------------------------------------

export interface HandoffPrefill {
  /** The turn's prompt: the person's words, which the next runtime gets after its briefing. */
  prompt?: string | null;
  runtime?: string | null;
  purpose?: string | null;
  objective?: string | null;
  note?: string | null;
}

let handoffFor: { record: Handoff; done: (h: Handoff) => void } | null = null;

function runtimeChoices(record: Handoff): string[] {
  const policy = record.policy?.runtimes ?? [];
  if (policy.length > 0) return policy;
  return (record.machine_runtimes?.runtimes ?? []).map((r) => r.name);
}

/** The models the dialog offers: those the target runtime reaches on the session's machine (its
 * last presence), after the previous turn's, carried over (the default). */
function offerModels(record: Handoff, reached: Map<string, string[]>): void {
  const select = byId<HTMLSelectElement>("target-model");
  const models = reached.get(value("target-runtime")) ?? [];
  const carried = record.model ? `${record.model}, carried over` : "the previous turn's, carried over";
  select.replaceChildren(h("option", { value: "" }, carried), ...models.map((m) => h("option", { value: m }, m)));
}

/** What each runtime reaches on `machine`, as it last reported (none where it is not enrolled). */
async function reachedOn(machine: string): Promise<Map<string, string[]>> {
  const machines = await api.machines().catch(() => []);
  const m = machines.find((x) => x.name === machine);
  return new Map((m?.runtimes ?? []).map((r) => [r.name, r.models ?? []]));
}

export function openHandoffDialog(record: Handoff, prefill: HandoffPrefill, done: (h: Handoff) => void): void {
  handoffFor = { record, done };
  const dialog = byId<HTMLDialogElement>("handoff-dialog");
  byId("handoff-intro").textContent = `Opens turn ${record.turn + 1} of ${record.session} after turn ${record.turn} (${record.status}). With a runtime, a package is compiled for it as the turn opens.`;
  const choices = runtimeChoices(record);
  const slot = byId("target-runtime-slot");
  if (choices.length > 0) {
    const wanted = prefill.runtime && choices.includes(prefill.runtime) ? prefill.runtime : choices[0];
    const select = h(
      "select",
      { id: "target-runtime" },
      ...choices.map((name) => h("option", { value: name, selected: name === wanted }, name)),
      h("option", { value: "" }, "none: a plain turn, no package"),
    );
    slot.replaceChildren(select);
  } else {
    const input = h("input", { id: "target-runtime", type: "text", autocomplete: "off", maxlength: 64 });
    input.value = prefill.runtime ?? "";
    slot.replaceChildren(input);
  }
  let reached = new Map<string, string[]>();
  offerModels(record, reached);
  byId("target-runtime").addEventListener("change", () => offerModels(record, reached));
  void reachedOn(record.machine).then((r) => {
    reached = r;
    if (handoffFor?.record === record) offerModels(record, reached);
  });
  setValue("handoff-prompt", prefill.prompt);
  setValue("purpose", prefill.purpose);
  setValue("objective", prefill.objective);
  setValue("note", prefill.note);
  const preview = byId("dry-run-preview");
  preview.textContent = "";
  preview.hidden = true;
  show(dialog);
  byId(prefill.objective ? "submit-handoff" : "objective").focus();
}

function packageRequest(prefix: "" | "compile-"): { runtime: string; purpose: string; objective: string; note: string | null; model?: string } | null {
  const runtime = value(prefix ? "compile-runtime" : "target-runtime");
  const purpose = value(`${prefix}purpose`);
  const objective = value(`${prefix}objective`);
  const note = value(`${prefix}note`);
  if (!runtime && !purpose && !objective && !note && !prefix) return null;
  const missing = [!runtime && "runtime", !purpose && "purpose", !objective && "objective"].filter(Boolean);
  if (missing.length > 0) throw new HandoffError(400, "request.invalid", `${missing.join(", ")} needed`);
  const model = prefix ? "" : value("target-model");
  return { runtime, purpose, objective, note: note || null, ...(model ? { model } : {}) };
}

/** The dialog's prompt, or nothing when it was left empty. */
function promptOf(): { prompt?: string } {
  const prompt = value("handoff-prompt");
  return prompt ? { prompt } : {};
}

async function dryRun(): Promise<void> {
  const current = handoffFor;
  if (!current) return;
  const preview = byId("dry-run-preview");
  preview.hidden = false;
  let request;
  try {
    request = packageRequest("");
  } catch (error) {
    preview.textContent = error instanceof HandoffError ? error.message : String(error);
    return;
  }
  if (!request) {
    preview.textContent = "A turn with no runtime carries no package: there is no briefing to preview.";
    return;
  }
  preview.textContent = "Previewing…";
  try {
    // The same open, carried out on a copy by the service and stored nowhere: the package and
    // the briefing the next runtime would get if the turn opened now.
    const body: OpenTurnInput = { after: current.record.turn, handoff: request, ...promptOf() };
    const answer = await api.previewTurn(current.record.id, body);
    const head = `Dry run, nothing written: turn ${answer.turn} would open with package v${answer.package_version} (${short(answer.package_hash)}).`;
    preview.textContent = `${head}\n\n${answer.briefing}`;
  } catch (error) {
    preview.textContent = error instanceof HandoffError ? error.message : String(error);
  }
}

async function submitHandoff(): Promise<void> {
  const current = handoffFor;
  if (!current) return;
  const dialog = byId<HTMLDialogElement>("handoff-dialog");
  try {
    const request = packageRequest("");
    const prompt = promptOf();
    const body: OpenTurnInput = { after: current.record.turn, ...(request ? { handoff: request } : {}), ...prompt };
    const r = await api.openTurn(current.record.id, body);
    hide(dialog);
    // The composer's text went with the turn: it is not sent twice.
    const typed = document.getElementById("prompt");
    if (typed instanceof HTMLTextAreaElement && prompt.prompt !== undefined && typed.value.trim() === prompt.prompt) typed.value = "";
    say(
      r.package_hash
        ? `opened turn ${r.turn} on ${r.runtime ?? "?"}, package v${r.package_version ?? "?"} (${short(r.package_hash, 12)})`
        : `opened turn ${r.turn}`,
    );
    current.done(r);
  } catch (error) {
    formError(dialog, error);
  }
}

// ---- reject --------------------------------------------------------------------------------

let rejectFor: { id: string; done: (latest: LatestPackage) => void } | null = null;

export function openRejectDialog(id: string, done: (latest: LatestPackage) => void): void {
  rejectFor = { id, done };
  setValue("reject-note", "");
  byId<HTMLSelectElement>("reject-reason").value = "missing_context";
  show(byId<HTMLDialogElement>("reject-dialog"));
  byId("reject-reason").focus();
}

async function submitReject(): Promise<void> {
  const current = rejectFor;
  if (!current) return;
  const dialog = byId<HTMLDialogElement>("reject-dialog");
  try {
    const note = value("reject-note");
    if (!note) throw new HandoffError(400, "request.invalid", "note: say what is wrong with the package");
    const reason = value("reject-reason") as RejectReason;
    const latest = await api.rejectPackage(current.id, { reason, note });
    hide(dialog);
    say(`package rejected (v${latest.package_version}, ${short(latest.package_hash)})`);
    current.done(latest);
  } catch (error) {
    formError(dialog, error);
  }
}

// ---- report (a machine's) ------------------------------------------------------------------

let reportFor: { record: Handoff; done: (h: Handoff) => void } | null = null;

export function openReportDialog(record: Handoff, done: (h: Handoff) => void): void {
  reportFor = { record, done };
  byId("report-title").textContent = `Report on turn ${record.turn}`;
  byId<HTMLSelectElement>("report-status").value = record.status === "needs-you" ? "needs-you" : "running";
  setValue("report-summary", "");
  show(byId<HTMLDialogElement>("report-dialog"));
  byId("report-status").focus();
}

async function submitReport(): Promise<void> {
  const current = reportFor;
  if (!current) return;
  const dialog = byId<HTMLDialogElement>("report-dialog");
  try {
    const status = value("report-status");
    const summary = value("report-summary");
    const reported = await api.report(current.record.id, {
      turn: current.record.turn,
      status: status as ReportInput["status"],
      summary: summary || null,
    });
    hide(dialog);
    say(`reported: v${reported.version} turn ${reported.turn} ${reported.status}`);
    current.done(reported);
  } catch (error) {
    formError(dialog, error);
  }
}

// ---- compile (when there is no package to recompile from) ----------------------------------

let compileFor: { id: string; done: (answer: CompileAnswer) => void } | null = null;

export function openCompileDialog(record: Handoff, done: (answer: CompileAnswer) => void): void {
  compileFor = { id: record.id, done };
  setValue("compile-runtime", record.runtime ?? record.policy?.runtimes[0] ?? "");
  setValue("compile-purpose", "");
  setValue("compile-objective", "");
  setValue("compile-note", "");
  show(byId<HTMLDialogElement>("compile-dialog"));
  byId("compile-runtime").focus();
}

export function compiledMessage(answer: CompileAnswer): string {
  return `package ${answer.changed ? "recompiled" : "unchanged"} (v${answer.package_version}, ${short(answer.package_hash)})`;
}

async function submitCompile(): Promise<void> {
  const current = compileFor;
  if (!current) return;
  const dialog = byId<HTMLDialogElement>("compile-dialog");
  try {
    const request = packageRequest("compile-");
    if (!request) throw new HandoffError(400, "request.invalid", "runtime, purpose, objective needed");
    const answer = await api.compilePackage(current.id, request);
    hide(dialog);
    say(compiledMessage(answer));
    current.done(answer);
  } catch (error) {
    formError(dialog, error);
  }
}

// ---- wiring, once --------------------------------------------------------------------------

export function wireDialogs(): void {
  for (const dialog of document.querySelectorAll("dialog")) {
    dialog.addEventListener("close", () => {
      if (dialog.id === "confirm") {
        const answer = confirmAnswer;
        confirmAnswer = null;
        answer?.(false);
      }
      restoreFocus();
    });
  }
  onSubmit("confirm-form", async () => answerConfirm(true));
  byId("confirm-no").addEventListener("click", () => answerConfirm(false));
  onSubmit("handoff-form", submitHandoff);
  byId("dry-run").addEventListener("click", guard(dryRun));
  byId("handoff-cancel").addEventListener("click", () => hide(byId<HTMLDialogElement>("handoff-dialog")));
  onSubmit("reject-form", submitReject);
  byId("reject-cancel").addEventListener("click", () => hide(byId<HTMLDialogElement>("reject-dialog")));
  onSubmit("report-form", submitReport);
  byId("report-cancel").addEventListener("click", () => hide(byId<HTMLDialogElement>("report-dialog")));
  onSubmit("compile-form", submitCompile);
  byId("compile-cancel").addEventListener("click", () => hide(byId<HTMLDialogElement>("compile-dialog")));
}

/** Closes whatever dialog is open (a route change, a sign-out). */
export function closeDialogs(): void {
  for (const dialog of document.querySelectorAll("dialog")) hide(dialog);
}
