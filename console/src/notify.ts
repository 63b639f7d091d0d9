// "Notify me": this browser subscribes to the service's Web Push with its VAPID key and posts
// the subscription, so the owner hears of needs-you, done, failed and close with the console
// closed; switched off, it unsubscribes and deletes it. The service worker (static/sw.js)
// shows each message. Shown only where the browser has push, for an owner.

import { api } from "./api.js";
import type { PushSubscriptionInput } from "../../clients/typescript/src/index.js";
import { byId } from "./dom.js";
import { fail, say } from "./ui.js";

const KEY = "handoff.push-subscription";

function held(): string | null {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

function supported(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

function show(button: HTMLButtonElement): void {
  const on = held() !== null;
  button.setAttribute("aria-pressed", String(on));
  button.textContent = on ? "Notifications on" : "Notify me";
}

/** The switch in the header: visible for an owner where push exists. */
export function notifySwitch(owner: boolean): void {
  const button = byId<HTMLButtonElement>("notify");
  button.hidden = !(owner && supported());
  if (!button.hidden) show(button);
}

export function wireNotify(): void {
  const button = byId<HTMLButtonElement>("notify");
  button.addEventListener("click", () => {
    button.disabled = true;
    toggle()
      .catch(fail)
      .finally(() => {
        button.disabled = false;
        show(button);
      });
  });
}

async function toggle(): Promise<void> {
  const registration = await navigator.serviceWorker.register("/sw.js");
  const id = held();
  if (id !== null) {
    const subscription = await registration.pushManager.getSubscription();
    await subscription?.unsubscribe();
    await api.deletePushSubscription(id).catch(() => undefined);
    localStorage.removeItem(KEY);
    say("Notifications are off in this browser.");
    return;
  }
  if ((await Notification.requestPermission()) !== "granted") {
    say("Notifications are blocked for this site; allow them in the browser to be told.");
    return;
  }
  const public_key = await api.pushKey();
  const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: decode(public_key) });
  const created = await api.subscribePush(subscription.toJSON() as PushSubscriptionInput);
  localStorage.setItem(KEY, created.id);
  say("This browser will be told when a session needs you, is done, failed or closed.");
}

/** base64url, as the service gives the key, to the bytes `applicationServerKey` takes. */
function decode(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  const raw = atob(base64);
  const bytes = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}
