// "Notify me": this browser subscribes to the service's Web Push with its VAPID key and posts
// the subscription, so the owner hears of needs-you, done, failed and close with the console
// closed; switched off, it unsubscribes and deletes it. The service worker (static/sw.js)
// shows each message. Shown only where the browser has push, for an owner.
// A notification's action (an option of the open question) reaches the page from the service
// worker by `postMessage`; the page answers exactly that question with that option, with the
// signed-in token the service worker never holds. A link cannot answer: only this origin's
// service worker can post to the page.

import { api } from "./api.js";
import { whenSignedIn } from "./auth.js";
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
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (event: MessageEvent) => {
      const choice = chosen(event.data);
      // A page the click opened answers once it is signed in (its refresh comes first).
      if (choice) whenSignedIn().then(() => answerChosen(choice)).catch(fail);
    });
    // Messages posted before this listener (a page the click opened) wait until now.
    navigator.serviceWorker.startMessages();
  }
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

interface Choice {
  handoff: string;
  question: string;
  option: string;
}

/** The service worker's message of a notification action, checked, or null. */
function chosen(data: unknown): Choice | null {
  if (!data || typeof data !== "object") return null;
  const m = data as Record<string, unknown>;
  if (m.kind !== "handoff.answer") return null;
  const { handoff, question, option } = m;
  if (typeof handoff !== "string" || !/^ho_[0-9a-f]{32}$/.test(handoff)) return null;
  if (typeof question !== "string" || !/^q_[0-9]+(_[0-9]+)?$/.test(question)) return null;
  if (typeof option !== "string" || !/^[a-z0-9_-]{1,32}$/.test(option)) return null;
  return { handoff, question, option };
}

/** Answers the question the notification showed; a question answered or withdrawn since is the
 * API's 409 (`question.answered`, `question.stale`), shown as every refusal is. */
async function answerChosen(choice: Choice): Promise<void> {
  const answered = await api.answer(choice.handoff, { question: choice.question, option: choice.option });
  const label = answered.question?.options.find((o) => o.id === choice.option)?.label ?? choice.option;
  say(`answered ${label} (v${answered.version})`);
}

/** base64url, as the service gives the key, to the bytes `applicationServerKey` takes. */
function decode(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  const raw = atob(base64);
  const bytes = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}
