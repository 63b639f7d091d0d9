// A new session from anywhere (#/new): the machine (online ones first), its workspace, the
// runtime (those installed there), the model (those it reaches there), the permission mode and
// the first prompt, each offered only as the machine last reported them. Send creates the
// session (`POST /v1/handoffs`, a fresh session id) and the page follows it as it starts.

import { api } from "./api.js";
import { h } from "./dom.js";
import type { Machine } from "../../clients/typescript/src/index.js";
import { guard, Page, say } from "./ui.js";

/** The permission modes the console offers (the harness's own names); "" leaves it to the machine. */
const PERMISSION_MODES: [string, string][] = [
  ["", "the machine's default"],
  ["default", "ask before each tool (default)"],
  ["acceptEdits", "accept file edits (acceptEdits)"],
  ["plan", "plan only (plan)"],
];

/** What a new session's hand-off is created as: one size for every session from the console. */
const SIZE = "standard";

function options(select: HTMLSelectElement, items: [string, string][]): void {
  select.replaceChildren(...items.map(([value, label]) => h("option", { value }, label)));
}

function field(id: string, label: string, control: HTMLElement, hint?: string): HTMLElement {
  const hintEl = hint ? h("p", { id: `${id}-hint`, class: "hint" }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", `${id}-hint`);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

/** A fresh session id: `chat-` and 16 random hex digits. */
function freshSession(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `chat-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export function renderNewSession(page: Page, main: HTMLElement): void {
  main.id = "new-session";
  const machine = h("select", { id: "new-machine", name: "machine", required: true }) as HTMLSelectElement;
  const workspace = h("select", { id: "new-workspace", name: "workspace" }) as HTMLSelectElement;
  const runtime = h("select", { id: "new-runtime", name: "runtime" }) as HTMLSelectElement;
  const model = h("select", { id: "new-model", name: "model" }) as HTMLSelectElement;
  const mode = h("select", { id: "new-mode", name: "permission_mode" }) as HTMLSelectElement;
  options(mode, PERMISSION_MODES);
  const prompt = h("textarea", { id: "new-prompt", name: "prompt", rows: 5, required: true, placeholder: "What should it do?" }) as HTMLTextAreaElement;
  const send = h("button", { type: "submit", id: "new-send", class: "primary" }, "Send") as HTMLButtonElement;
  const none = h("p", { id: "no-machine", class: "muted", hidden: true }, "No machine is enrolled yet: enrol one on the ", h("a", { href: "#/machines" }, "Machines"), " page.");
  const form = h(
    "form",
    { id: "new-session-form" },
    field("new-machine", "Machine", machine, "Online machines first."),
    field("new-workspace", "Workspace", workspace),
    field("new-runtime", "Runtime", runtime, "Those installed on the machine."),
    field("new-model", "Model", model, "Those the runtime reaches on the machine."),
    field("new-mode", "Permission mode", mode),
    field("new-prompt", "First prompt", prompt),
    h("div", { class: "buttons" }, send),
  ) as HTMLFormElement;
  let machines: Machine[] = [];

  const chosen = () => machines.find((m) => m.name === machine.value);
  const fillModels = () => {
    const r = chosen()?.runtimes.find((x) => x.name === runtime.value);
    const models = r?.models ?? [];
    options(model, [["", models.length ? "the runtime's default" : "none reported"], ...models.map((m): [string, string] => [m, m])]);
  };
  const fillMachine = () => {
    const m = chosen();
    const workspaces = m?.workspaces ?? [];
    options(workspace, workspaces.length ? workspaces.map((w): [string, string] => [w, w]) : [["", "none reported"]]);
    const runtimes = m?.runtimes ?? [];
    options(runtime, runtimes.length ? runtimes.map((r): [string, string] => [r.name, r.name]) : [["", "none reported"]]);
    fillModels();
  };
  machine.addEventListener("change", fillMachine);
  runtime.addEventListener("change", fillModels);

  form.addEventListener(
    "submit",
    guard(async (e: Event) => {
      e.preventDefault();
      const words = prompt.value;
      if (!machine.value || !words.trim()) return;
      send.disabled = true;
      try {
        const optional = (v: string) => (v ? v : null);
        const made = await api.create({
          session: freshSession(),
          machine: machine.value,
          size: SIZE,
          prompt: words,
          workspace: optional(workspace.value),
          runtime: optional(runtime.value),
          model: optional(model.value),
          requested_permission_mode: optional(mode.value),
        });
        say(`Session started on ${machine.value}`);
        location.hash = `#/s/${made.handoff.id}`;
      } finally {
        send.disabled = false;
      }
    }),
  );

  main.replaceChildren(h("h1", null, "New session"), none, form);
  guard(async () => {
    machines = await api.machines();
    if (!page.alive) return;
    none.hidden = machines.length > 0;
    form.hidden = machines.length === 0;
    options(machine, machines.map((m): [string, string] => [m.name, `${m.name} (${m.online ? "online" : "offline"})`]));
    fillMachine();
  })();
}
