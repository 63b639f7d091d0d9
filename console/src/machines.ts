// The owner's enrolled machines (#/machines): each online or offline, when it was last seen,
// its runtimes and the models each reaches, its workspaces and the sessions it runs; revoked
// from here. A machine's code (`handoff machine enrol` prints it) is looked up here, its name,
// host name and key fingerprint shown, and only then approved or refused.

import { api } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { h, timeEl } from "./dom.js";
import type { Machine } from "../../clients/typescript/src/index.js";
import { guard, Page, say } from "./ui.js";

function approveForm(reload: () => Promise<void>): HTMLElement {
  const input = h("input", { id: "enrol-code", name: "code", autocomplete: "off", placeholder: "XXXX-XXXX", "aria-describedby": "enrol-hint", required: true });
  const found = h("div", { id: "enrolment", hidden: true });
  const form = h(
    "form",
    { id: "approve-code" },
    h("label", { for: "enrol-code" }, "A machine's code"),
    h("p", { id: "enrol-hint", class: "hint" }, "The code ", h("code", null, "handoff machine enrol"), " printed. You see the machine before you approve it."),
    h("div", { class: "row" }, input, h("button", { type: "submit", id: "look-up" }, "Look up")),
    found,
  );
  form.addEventListener(
    "submit",
    guard(async (e: Event) => {
      e.preventDefault();
      const shown = await api.lookUpEnrolment(input.value.trim());
      const approve = h("button", { type: "button", id: "approve" }, "Approve");
      const refuse = h("button", { type: "button", id: "refuse", class: "danger" }, "Refuse");
      found.replaceChildren(
        h(
          "dl",
          null,
          h("dt", null, "Machine"),
          h("dd", { id: "enrol-name" }, shown.name),
          h("dt", null, "Host"),
          h("dd", { id: "enrol-host" }, shown.host),
          h("dt", null, "Key fingerprint"),
          h("dd", { id: "enrol-fingerprint", class: "mono" }, shown.fingerprint),
        ),
        h("div", { class: "buttons" }, approve, refuse),
      );
      found.hidden = false;
      approve.addEventListener(
        "click",
        guard(async () => {
          await api.approveEnrolment(shown.code);
          say(`${shown.name} is approved: it finishes enrolling on its own`);
          found.hidden = true;
          input.value = "";
          await reload();
        }),
      );
      refuse.addEventListener(
        "click",
        guard(async () => {
          await api.refuseEnrolment(shown.code);
          say(`${shown.name} was refused`);
          found.hidden = true;
          input.value = "";
        }),
      );
    }),
  );
  return form;
}

function row(m: Machine, reload: () => Promise<void>): HTMLElement {
  const revoke = h("button", { type: "button", class: "danger revoke", "data-machine": m.name }, "Revoke");
  revoke.addEventListener(
    "click",
    guard(async () => {
      const yes = await confirmDialog(`Revoke ${m.name}?`, `${m.name}'s credential stops working: it takes no new session. Enrol it again to use it.`, "Revoke", "Keep it");
      if (!yes) return;
      await api.revokeMachine(m.name);
      say(`${m.name} was revoked`);
      await reload();
    }),
  );
  const runtimes = m.runtimes.length
    ? h("ul", { class: "plain" }, ...m.runtimes.map((r) => h("li", null, h("strong", null, r.name), r.models?.length ? `: ${r.models.join(", ")}` : "")))
    : "none reported";
  const state = h("span", { class: `badge ${m.online ? "online" : "offline"}` }, m.online ? "online" : "offline");
  return h(
    "tr",
    { "data-machine": m.name, "data-online": m.online ? "true" : "false" },
    h("td", { "data-label": "Machine" }, h("strong", null, m.name), h("div", { class: "muted" }, m.host)),
    h("td", { "data-label": "State" }, state),
    h("td", { "data-label": "Last seen" }, m.last_seen_at ? timeEl(m.last_seen_at) : "never"),
    h("td", { "data-label": "Runtimes and models" }, runtimes),
    h("td", { "data-label": "Workspaces" }, m.workspaces.length ? m.workspaces.join(", ") : "none reported"),
    h("td", { "data-label": "Sessions" }, m.sessions.length ? h("ul", { class: "plain" }, ...m.sessions.map((s) => h("li", null, h("a", { href: `#/s/${s}` }, s)))) : "none"),
    h("td", null, revoke),
  );
}

export function renderMachines(page: Page, main: HTMLElement): void {
  main.id = "machines";
  const body = h("tbody");
  const empty = h("p", { id: "no-machines", class: "muted", hidden: true }, "No machine is enrolled yet: run ", h("code", null, "handoff machine enrol --name NAME"), " on one.");
  const table = h(
    "table",
    { id: "machine-list" },
    h("caption", { class: "visually-hidden" }, "Your enrolled machines, online first"),
    h("thead", null, h("tr", null, ...["Machine", "State", "Last seen", "Runtimes and models", "Workspaces", "Sessions", ""].map((t) => h("th", { scope: "col" }, t)))),
    body,
  );
  const load = async () => {
    const machines = await api.machines();
    if (!page.alive) return;
    body.replaceChildren(...machines.map((m) => row(m, load)));
    empty.hidden = machines.length > 0;
  };
  main.replaceChildren(
    h("h1", null, "Machines"),
    h("p", { class: "muted" }, "A machine is online while it reported in the last 30 seconds."),
    approveForm(load),
    h("div", { class: "table-wrap" }, table),
    empty,
  );
  guard(load)();
}
