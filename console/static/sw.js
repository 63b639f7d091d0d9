// The console's service worker: a push message of the hand-off service (its plaintext
// `{"type", "handoff": {"id", "session", "turn", "status", "summary"}, "url", "question"}`)
// becomes a notification titled with the session, its body the summary, tagged with the hand-off
// so a newer one replaces an older; clicking it opens the session's page of this console.
// A needs-you stays until the owner acts on it (`requireInteraction`): a session waits on it,
// and a notification that closes itself after some seconds (Chromium's popups do) is missed.
// A permission is never approved from a notification: for a `permission` question the body says
// that a permission is asked and no action is offered, whatever the message carries; the owner
// reads it whole and answers in the page. A choice's options become the notification's actions
// when all of them fit (`Notification.maxActions`); otherwise none is offered, and the page shows
// every option. A choice's input follows the summary; one the message carries only as its head
// comes with no options at all, and the body says the whole is in the console.
// This worker holds no token: an action's click opens the session's page and hands the choice to
// it by `postMessage`, and the page answers through the API with the owner's token.
"use strict";

const SAYS = {
  "handoff.needs_you": "needs you",
  "handoff.done": "is done",
  "handoff.failed": "failed",
  "handoff.closed": "was closed",
};

// A console page open when this worker starts is one it may bring to a session's page.
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch {
    message = {};
  }
  const handoff = message.handoff || {};
  const says = SAYS[message.type] || "changed";
  const title = typeof handoff.session === "string" ? handoff.session : "A session";
  const permission = isPermission(message.question);
  const said = typeof handoff.summary === "string" && handoff.summary ? handoff.summary : `This session ${says}.`;
  const body = permission ? PERMISSION_ASKED : said + inputLines(message.question);
  const tag = typeof handoff.id === "string" ? handoff.id : "handoff";
  const url = typeof message.url === "string" ? message.url : "/";
  const question = openQuestion(message.question, handoff.id);
  const options = { body, tag, requireInteraction: message.type === "handoff.needs_you", data: { url, type: message.type, question } };
  if (question) options.actions = question.options.map((o) => ({ action: o.id, title: o.label }));
  // The push event lasts until the notification is shown: a worker stopped before would show none.
  event.waitUntil(self.registration.showNotification(title, options));
});

const PERMISSION_ASKED = "A permission is asked: open the session to read it whole and allow or deny it.";

// Whether the message's question is a permission, or one that does not say its kind.
function isPermission(question) {
  return !!question && typeof question === "object" && question.kind !== "choice";
}

// The question's input as the notification shows it: whole, or its head and where the rest is.
function inputLines(question) {
  if (!question || typeof question.input !== "string" || !question.input) return "";
  if (typeof question.input_bytes !== "number") return `\n${question.input}`;
  return `\n${question.input}…\nThe whole input (${question.input_bytes} bytes) is in the console: open it to read it and answer.`;
}

// The message's open question as the click will need it, or null when there is none, it is
// malformed, or its options do not all fit as actions (offering some would hide the others).
function openQuestion(question, handoff) {
  if (!question || typeof question !== "object" || !Array.isArray(question.options)) return null;
  // Only a choice is answered from a notification; a permission is allowed in the page.
  if (isPermission(question)) return null;
  const max = typeof Notification !== "undefined" && Notification.maxActions >= 0 ? Notification.maxActions : 0;
  const options = question.options.filter((o) => o && /^[a-z0-9_-]{1,32}$/.test(o.id) && typeof o.label === "string" && o.label);
  if (typeof handoff !== "string" || !/^ho_[0-9a-f]{32}$/.test(handoff)) return null;
  if (typeof question.id !== "string" || !/^q_[0-9]+(_[0-9]+)?$/.test(question.id)) return null;
  // An input the message could not carry whole is never approved from the notification.
  if (typeof question.input_bytes === "number") return null;
  if (options.length === 0 || options.length !== question.options.length || options.length > max) return null;
  return { handoff, id: question.id, options: options.map((o) => ({ id: o.id, label: o.label })) };
}

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  const question = data.question;
  // An action is one of the question's options: the page answers with exactly that one.
  const chosen = event.action && question && question.options.some((o) => o.id === event.action)
    ? { kind: "handoff.answer", handoff: question.handoff, question: question.id, option: event.action }
    : null;
  const target = new URL(chosen ? `/#/s/${chosen.handoff}` : data.url || "/", self.location.origin);
  // Only a page of this console, whatever the message said.
  const url = target.origin === self.location.origin ? target.href : self.location.origin + "/";
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(async (windows) => {
      const open = windows.find((w) => w.url.startsWith(self.location.origin));
      const page = open ? (await open.navigate(url)) || open : await self.clients.openWindow(url);
      // Focus is the browser's to grant; the page is opened either way.
      if (open) await page.focus().catch(() => undefined);
      if (chosen && page) page.postMessage(chosen);
    }),
  );
});
