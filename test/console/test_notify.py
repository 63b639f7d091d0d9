"""The "Notify me" switch and the console's service worker (Web Push): the switch is the
owner's, and a push message delivered to the service worker through the DevTools protocol
(`ServiceWorker.deliverPushMessage`, as the browser's push service would) shows a notification
titled with the session, its body the summary, tagged with the hand-off so that a newer one
replaces it; clicking it (a `notificationclick` dispatched in the service worker, as the browser
does) brings the open console to the session's page."""

from __future__ import annotations

import json
import time

from playwright.sync_api import expect

from helpers import BASE, sign_in, unique

HID = "ho_" + "a" * 32

NOTIFICATIONS = """() => navigator.serviceWorker.ready
  .then((r) => r.getNotifications())
  .then((ns) => ns.map((n) => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url})))"""


def message(kind: str, summary: str | None) -> str:
    handoff = {"id": HID, "session": "chat-42", "turn": 2, "status": "needs-you", "summary": summary}
    return json.dumps({"type": kind, "handoff": handoff, "url": f"{BASE}/#/s/{HID}"})


def notifications_once(page, want: int, timeout_s: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        shown = page.evaluate(NOTIFICATIONS)
        if len(shown) >= want or time.monotonic() > deadline:
            return shown
        time.sleep(0.1)


def test_the_owner_has_the_notify_me_switch(pages, cli):
    owner = cli.owner_token(unique("notify"))
    w = pages("owner")
    sign_in(w, owner, "#/")
    switch = w.page.locator("#notify")
    expect(switch).to_be_visible()
    expect(switch).to_have_text("Notify me")
    expect(switch).to_have_attribute("aria-pressed", "false")


def test_a_push_to_the_service_worker_shows_the_session_and_its_summary_and_a_newer_one_replaces_it(pages, cli):
    owner = cli.owner_token(unique("notify"))
    w = pages("owner", permissions=["notifications"])
    sign_in(w, owner, "#/")
    page = w.page
    cdp = page.context.new_cdp_session(page)
    registrations: list[dict] = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    assert page.evaluate("() => navigator.serviceWorker.register('/sw.js').then(() => navigator.serviceWorker.ready).then(() => true)")
    deadline = time.monotonic() + 10
    while not any(r["scopeURL"].startswith(BASE) and not r["isDeleted"] for r in registrations):
        assert time.monotonic() < deadline, f"no registration seen: {registrations}"
        page.wait_for_timeout(100)
    registration = next(r["registrationId"] for r in registrations if r["scopeURL"].startswith(BASE) and not r["isDeleted"])

    cdp.send("ServiceWorker.deliverPushMessage", {"origin": BASE, "registrationId": registration, "data": message("handoff.needs_you", "Postgres or SQLite?")})
    shown = notifications_once(page, 1)
    assert shown == [{"title": "chat-42", "body": "Postgres or SQLite?", "tag": HID, "url": f"{BASE}/#/s/{HID}"}], shown

    cdp.send("ServiceWorker.deliverPushMessage", {"origin": BASE, "registrationId": registration, "data": message("handoff.done", None)})
    deadline = time.monotonic() + 10
    while (shown := page.evaluate(NOTIFICATIONS)) and shown[0]["body"] == "Postgres or SQLite?":
        assert time.monotonic() < deadline, shown
        page.wait_for_timeout(100)
    assert shown == [{"title": "chat-42", "body": "This session is done.", "tag": HID, "url": f"{BASE}/#/s/{HID}"}], "one per hand-off: the newer replaced it"

    # Clicking it: the browser dispatches `notificationclick` in the worker.
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    worker = next(sw for sw in page.context.service_workers if sw.url.startswith(BASE))
    worker.evaluate("""() => self.registration.getNotifications().then((ns) =>
      self.dispatchEvent(new NotificationEvent("notificationclick", {notification: ns[0]})))""")
    expect(page).to_have_url(f"{BASE}/#/s/{HID}")
