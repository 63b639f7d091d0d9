// The owner's signed-in devices (#/devices): each with its name, when it signed in and when it
// was last seen, this one marked; each revoked from here, or every other one at once. A revoke
// takes effect at the device's next refresh (within its access token's life); revoking this
// device is signing out.

import { api } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { h, timeEl } from "./dom.js";
import type { Device } from "../../clients/typescript/src/index.js";
import { guard, Page, say } from "./ui.js";

export function renderDevices(page: Page, main: HTMLElement, signOutHere: () => void): void {
  main.id = "devices";
  const body = h("tbody");
  const table = h(
    "table",
    { id: "device-list" },
    h("caption", { class: "visually-hidden" }, "Devices signed in as you, the oldest first"),
    h("thead", null, h("tr", null, ...["Device", "Signed in", "Last seen", ""].map((t) => h("th", { scope: "col" }, t)))),
    body,
  );
  const others = h("button", { type: "button", id: "revoke-others", class: "danger" }, "Sign out every other device");
  main.replaceChildren(
    h("h1", null, "Devices"),
    h("p", { class: "muted" }, "Each browser you signed in stays signed in until it signs out, goes unused for 30 days, reaches 90 days, or is revoked here. A revoke takes effect within 5 minutes."),
    h("div", { class: "table-wrap" }, table),
    h("div", { class: "buttons" }, others),
  );

  const show = (devices: Device[]) => {
    body.replaceChildren(
      ...devices.map((d) => {
        const revoke = h("button", { type: "button", class: "danger revoke", "data-device": d.id }, d.current ? "Sign out" : "Revoke");
        revoke.addEventListener(
          "click",
          guard(async () => {
            if (d.current) return signOutHere();
            const yes = await confirmDialog(`Revoke ${d.name}?`, `${d.name} is signed out at its next refresh, and the notifications it subscribed to stop.`, "Revoke", "Keep it");
            if (!yes) return;
            await api.revokeDevice(d.id);
            say(`${d.name} was revoked`);
            await load();
          }),
        );
        const name = h("td", null, d.name, d.current ? h("span", { class: "badge current" }, " (this device)") : null);
        return h("tr", { "data-device": d.id, "data-current": d.current ? "true" : "false" }, name, h("td", null, timeEl(d.created_at)), h("td", null, timeEl(d.last_seen_at)), h("td", null, revoke));
      }),
    );
    others.hidden = devices.every((d) => d.current);
  };
  const load = async () => {
    const devices = await api.devices();
    if (page.alive) show(devices);
  };
  others.addEventListener(
    "click",
    guard(async () => {
      const yes = await confirmDialog("Sign out every other device?", "Every device but this one is signed out at its next refresh.", "Sign them out", "Keep them");
      if (!yes) return;
      const n = await api.revokeAllDevices(true);
      say(`${n} other device${n === 1 ? " was" : "s were"} signed out`);
      await load();
    }),
  );
  guard(load)();
}
