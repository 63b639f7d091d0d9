// The console's service worker: a push message of the hand-off service (its plaintext
// `{"type", "handoff": {"id", "session", "turn", "status", "summary"}, "url"}`) becomes a
// notification titled with the session, its body the summary, tagged with the hand-off so a
// newer one replaces an older; clicking it opens the session's page of this console.
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
  const body = typeof handoff.summary === "string" && handoff.summary ? handoff.summary : `This session ${says}.`;
  const tag = typeof handoff.id === "string" ? handoff.id : "handoff";
  const url = typeof message.url === "string" ? message.url : "/";
  event.waitUntil(self.registration.showNotification(title, { body, tag, data: { url, type: message.type } }));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  // Only a page of this console, whatever the message said.
  const url = target.origin === self.location.origin ? target.href : self.location.origin + "/";
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((windows) => {
      const open = windows.find((w) => w.url.startsWith(self.location.origin));
      if (!open) return self.clients.openWindow(url);
      // Focus is the browser's to grant; the page is opened either way.
      return open.navigate(url).then((w) => (w || open).focus().catch(() => undefined));
    }),
  );
});
