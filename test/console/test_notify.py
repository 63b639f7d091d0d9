"""The "Notify me" switch and the console's service worker (Web Push): the switch is the
owner's; switched on, it registers the worker, subscribes with the service's key and posts the
subscription (the browser's push service, which headless Chromium lacks, is the one thing
stubbed, and only in the "Notify me" tests: PUSH_SERVICE_STUB). A push message delivered to the
service worker through the DevTools protocol (`ServiceWorker.deliverPushMessage`, as the
browser's push service would) shows a notification titled with the session, its body the
summary, tagged with the hand-off so that a newer one replaces it, and kept until acted on when
the session needs its owner; clicking it (a `notificationclick` dispatched in the service
worker, as the browser does) brings the open console to the session's page. Where the question
of "Answer from anywhere" is open, the notification's actions are its options, and an action's
click answers it through the API from the page (the service worker holds no token).

Every step waits on a condition the browser reports, never on time: the worker activated and in
control before a push, each push's event completed (DevTools' BackgroundService domain) before
its notification is read or clicked (see ServiceWorkerPushes for why reading earlier loses it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

from playwright.sync_api import expect

from helpers import BASE, CLI, SIGNING_KEY, log, sign_in, unique

# What the page reads of its notifications. Only after a push event completed (ServiceWorkerPushes).
NOTIFICATIONS = """() => navigator.serviceWorker.ready
  .then((r) => r.getNotifications())
  .then((ns) => ns.map((n) => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url,
                                sticky: n.requireInteraction})))"""

# Registers the console's service worker and resolves once it is activated (its activate handler,
# clients.claim(), has finished) and controls this page: then a push reaches its push handler.
REGISTER = """async () => {
  const registration = await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  const worker = registration.active;
  if (worker.state !== "activated") {
    await new Promise((done) => worker.addEventListener("statechange", () => worker.state === "activated" && done()));
  }
  if (!navigator.serviceWorker.controller) {
    await new Promise((done) => navigator.serviceWorker.addEventListener("controllerchange", done, {once: true}));
  }
  return registration.scope;
}"""


class ServiceWorkerPushes:
    """The console's service worker registered in `page`, and push messages delivered to it
    through DevTools (`ServiceWorker.deliverPushMessage`) as the browser's push service would.

    Nothing reads the notifications while a push is being shown: Chromium's getNotifications()
    reconciles its store with what the platform displays and deletes a record written before the
    call but not displayed yet, so a read racing a showNotification() makes that notification
    vanish from getNotifications() for good (still on screen, never readable or clickable again;
    a page polling every 100 ms lost one in a few, more under load). So `deliver` waits for the
    browser's own record of the push (DevTools' BackgroundService domain): "Push event completed",
    sent when the event's waitUntil promise settles, after the notification was displayed."""

    def __init__(self, page):
        self.page = page
        self.cdp = page.context.new_cdp_session(page)
        self.registrations: list[dict] = []
        self.events: list[dict] = []
        self.cdp.on("ServiceWorker.workerRegistrationUpdated", lambda e: self.registrations.extend(e["registrations"]))
        self.cdp.on("BackgroundService.backgroundServiceEventReceived", self._on_event)
        for service in ("pushMessaging", "notifications"):
            self.cdp.send("BackgroundService.startObserving", {"service": service})
            self.cdp.send("BackgroundService.setRecording", {"shouldRecord": True, "service": service})
        self.cdp.send("ServiceWorker.enable")
        scope = page.evaluate(REGISTER)
        self.registration = self._until(
            lambda: next((r["registrationId"] for r in self.registrations if r["scopeURL"] == scope and not r["isDeleted"]), None),
            f"registration of {scope} in DevTools")

    def _on_event(self, event: dict) -> None:
        e = event["backgroundServiceEvent"]
        meta = {m["key"]: m["value"] for m in e.get("eventMetadata", [])}
        self.events.append({"service": e["service"], "name": e["eventName"], "tag": e["instanceId"], "meta": meta})
        log("browser", f"background service: {e['service']} {e['eventName']} {e['instanceId']!r} {meta}")

    def _until(self, found, what: str, timeout_s: float = 10.0):
        """found()'s first value that is not None; DevTools events arrive while Playwright waits."""
        deadline = time.monotonic() + timeout_s
        while (value := found()) is None:
            assert time.monotonic() < deadline, f"no {what} within {timeout_s} s; background services saw {self.events}"
            self.page.wait_for_timeout(20)
        return value

    def deliver(self, data: str, tag: str) -> list[dict]:
        """Delivers one push message, waits until its push event completed, checks that the event
        lasted until the notification tagged `tag` was displayed (event.waitUntil), and returns
        the notifications the page then reads."""
        seen = len(self.events)
        self.cdp.send("ServiceWorker.deliverPushMessage", {"origin": BASE, "registrationId": self.registration, "data": data})
        done = self._until(
            lambda: next((i for i in range(seen, len(self.events))
                          if self.events[i]["service"] == "pushMessaging" and self.events[i]["name"] == "Push event completed"), None),
            "push event completed")
        assert self.events[done]["meta"].get("Status") == "Success", self.events[done]
        assert any(e["service"] == "notifications" and e["name"] == "Notification displayed" and e["tag"] == tag
                   for e in self.events[seen:done]), f"the push event ended before a notification tagged {tag} was shown: {self.events[seen:]}"
        return self.page.evaluate(NOTIFICATIONS)

    def click(self, tag: str, action: str | None = None) -> None:
        """The browser's `notificationclick` on the notification tagged `tag` (on one of its
        action buttons with `action`), dispatched in the service worker as the browser does; a
        script cannot click a notification, so the event is built from the real Notification."""
        worker = next(sw for sw in self.page.context.service_workers if sw.url.startswith(BASE))
        found = worker.evaluate("""([tag, action]) => self.registration.getNotifications({tag}).then((ns) => {
          if (ns.length !== 1) return ns.length;
          self.dispatchEvent(new NotificationEvent("notificationclick", action ? {notification: ns[0], action} : {notification: ns[0]}));
          return 1;
        })""", [tag, action])
        assert found == 1, f"{found} notifications tagged {tag} to click"

    def until_none_shown(self) -> None:
        """Waits until no notification is left (reading is safe: none is being shown)."""
        self._until(lambda: True if not self.page.evaluate(NOTIFICATIONS) else None, "notification closed")


def message(hid: str, kind: str, summary: str | None) -> str:
    handoff = {"id": hid, "session": "chat-42", "turn": 2, "status": "needs-you", "summary": summary}
    return json.dumps({"type": kind, "handoff": handoff, "url": f"{BASE}/#/s/{hid}"})


def test_the_owner_has_the_notify_me_switch(pages, cli):
    owner = cli.owner_token(unique("notify"))
    w = pages("owner")
    sign_in(w, owner, "#/")
    switch = w.page.locator("#notify")
    expect(switch).to_be_visible()
    expect(switch).to_have_text("Notify me")
    expect(switch).to_have_attribute("aria-pressed", "false")


# The browser's push service, stubbed in the page before any of its scripts runs (a stub of the
# browser's boundary, not of the console's code, used only by the two "Notify me" tests): headless
# Chromium has none (in Playwright's contexts, which are off the record, subscribe() rejects with
# "AbortError: Registration failed - permission denied"; in a persistent profile it never answers,
# as it waits on Google's push servers). Only PushManager's subscribe and getSubscription, and the
# subscription's unsubscribe, are replaced: they answer what a push service would, a subscription
# with a fresh P-256 key and auth secret whose toJSON() has a real one's shape; the console's code,
# its service worker's registration and the API calls run as they are. The subscription lives in
# sessionStorage so that a reload finds it, as the browser's does.
PUSH_SERVICE_STUB = """(() => {
  const HELD = "test.push-service.subscription";
  const record = (window.__pushService = {subscribed: [], unsubscribed: 0});
  const b64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const subscription = (json) => ({
    endpoint: json.endpoint,
    expirationTime: null,
    options: {userVisibleOnly: true},
    toJSON: () => JSON.parse(JSON.stringify(json)),
    unsubscribe: async () => { record.unsubscribed += 1; sessionStorage.removeItem(HELD); return true; },
  });
  PushManager.prototype.subscribe = async function (options) {
    const key = new Uint8Array(options.applicationServerKey instanceof ArrayBuffer ? options.applicationServerKey : options.applicationServerKey.buffer);
    record.subscribed.push({userVisibleOnly: options.userVisibleOnly, applicationServerKey: b64url(key)});
    const pair = await crypto.subtle.generateKey({name: "ECDH", namedCurve: "P-256"}, true, ["deriveBits"]);
    const json = {
      endpoint: "http://127.0.0.1:9/push/" + b64url(crypto.getRandomValues(new Uint8Array(16))),
      expirationTime: null,
      keys: {p256dh: b64url(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey))),
             auth: b64url(crypto.getRandomValues(new Uint8Array(16)))},
    };
    sessionStorage.setItem(HELD, JSON.stringify(json));
    return subscription(json);
  };
  PushManager.prototype.getSubscription = async function () {
    const held = sessionStorage.getItem(HELD);
    return held ? subscription(JSON.parse(held)) : null;
  };
})()"""


def test_notify_me_registers_the_worker_subscribes_with_the_service_key_and_posts_the_subscription(pages, api, cli):
    """"Notify me" end to end but for the browser's push service, which is stubbed at
    PushManager (PUSH_SERVICE_STUB, above: headless Chromium has none). What is checked is the
    console's side: the service worker registered, subscribe() called with userVisibleOnly and the
    service's key from GET /v1/push/key, the subscription's JSON posted as it is to
    POST /v1/push/subscriptions, the switch showing it (after a reload too), and switching off
    unsubscribing and deleting it from the API."""
    owner = cli.owner_token(unique("notify-sub"))
    key = api.get("/v1/push/key", owner)["public_key"]
    w = pages("owner", permissions=["notifications"])
    w.page.context.add_init_script(PUSH_SERVICE_STUB)
    sign_in(w, owner, "#/")
    page = w.page
    switch = page.locator("#notify")
    expect(switch).to_have_attribute("aria-pressed", "false")

    # What the page posts, seen on its way (the request goes on to the Worker unchanged).
    posted: list[str | None] = []

    def through(route):
        posted.append(route.request.post_data)
        route.continue_()

    page.route(f"{BASE}/v1/push/subscriptions", through)
    switch.click()
    expect(switch).to_have_attribute("aria-pressed", "true")
    expect(switch).to_have_text("Notifications on")
    expect(page.locator("#message")).to_have_text("This browser will be told when a session needs you, is done, failed or closed.")

    assert page.evaluate("() => navigator.serviceWorker.getRegistration().then((r) => r && (r.active || r.waiting || r.installing).scriptURL)") == f"{BASE}/sw.js"
    assert page.evaluate("() => window.__pushService.subscribed") == [{"userVisibleOnly": True, "applicationServerKey": key}]
    held = page.evaluate("() => JSON.parse(sessionStorage.getItem('test.push-service.subscription'))")
    assert [json.loads(p or "null") for p in posted] == [held], "the subscription's JSON, posted as the browser gave it"
    listed = api.get("/v1/push/subscriptions", owner)["subscriptions"]
    assert [(s["id"], s["origin"]) for s in listed] == [(page.evaluate("() => localStorage.getItem('handoff.push-subscription')"), "http://127.0.0.1:9")], listed

    # The switch reads what this browser holds: a reload still shows it on.
    page.reload()
    expect(switch).to_have_attribute("aria-pressed", "true")
    expect(switch).to_have_text("Notifications on")

    # Off: the browser's subscription is dropped and the service forgets it.
    with page.expect_response(lambda r: r.request.method == "DELETE" and r.url == f"{BASE}/v1/push/subscriptions/{listed[0]['id']}") as deleting:
        switch.click()
    assert deleting.value.status == 204
    expect(switch).to_have_attribute("aria-pressed", "false")
    expect(switch).to_have_text("Notify me")
    expect(page.locator("#message")).to_have_text("Notifications are off in this browser.")
    assert page.evaluate("() => window.__pushService.unsubscribed") == 1
    assert api.get("/v1/push/subscriptions", owner)["subscriptions"] == []


def test_notify_me_where_notifications_are_blocked_subscribes_nothing(pages, cli):
    owner = cli.owner_token(unique("notify-denied"))
    w = pages("owner")
    w.page.context.add_init_script(PUSH_SERVICE_STUB)
    sign_in(w, owner, "#/")
    page = w.page
    # Blocked for this site, as the owner's "Block" would (not left to a headless prompt).
    cdp = page.context.new_cdp_session(page)
    context_id = cdp.send("Target.getTargetInfo")["targetInfo"]["browserContextId"]
    cdp.send("Browser.setPermission", {"permission": {"name": "notifications"}, "setting": "denied", "origin": BASE, "browserContextId": context_id})
    assert page.evaluate("() => Notification.permission") == "denied"
    page.locator("#notify").click()
    expect(page.locator("#message")).to_have_text("Notifications are blocked for this site; allow them in the browser to be told.")
    expect(page.locator("#notify")).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("() => window.__pushService.subscribed") == []
    assert not [r for r in w.requests if r[1].startswith(f"{BASE}/v1/push/")], w.requests


def test_a_push_to_the_service_worker_shows_the_session_and_its_summary_and_a_newer_one_replaces_it(pages, api, cli):
    owner = cli.owner_token(unique("notify"))
    hid = api.create(owner, unique("chat"))[0]["id"]
    url = f"{BASE}/#/s/{hid}"
    w = pages("owner", permissions=["notifications"])
    sign_in(w, owner, "#/")
    page = w.page
    pushes = ServiceWorkerPushes(page)

    # A needs-you stays until the owner acts on it (requireInteraction).
    shown = pushes.deliver(message(hid, "handoff.needs_you", "Postgres or SQLite?"), hid)
    assert shown == [{"title": "chat-42", "body": "Postgres or SQLite?", "tag": hid, "url": url, "sticky": True}], shown

    shown = pushes.deliver(message(hid, "handoff.done", None), hid)
    assert shown == [{"title": "chat-42", "body": "This session is done.", "tag": hid, "url": url, "sticky": False}], \
        "one per hand-off: the newer replaced it"

    # Clicking it: the browser dispatches `notificationclick` in the worker; the page it brings
    # up is the session's, drawn.
    pushes.click(hid)
    expect(page).to_have_url(url)
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(page.locator("main#session")).to_have_attribute("data-version", re.compile(r"^\d+$"))
    pushes.until_none_shown()


ACTIONS = """() => navigator.serviceWorker.ready
  .then((r) => r.getNotifications())
  .then((ns) => ns.map((n) => ({tag: n.tag, actions: n.actions.map((a) => ({action: a.action, title: a.title}))})))"""


def question_message(record: dict, options: list[dict] | None = None) -> str:
    """The push message the service sends for `record` (PushPayload): its open question's id and
    options."""
    q = record["question"]
    handoff = {"id": record["id"], "session": record["session"], "turn": record["turn"], "status": record["status"], "summary": q["text"]}
    question = {"id": q["id"], "options": options if options is not None else q["options"]}
    return json.dumps({"type": "handoff.needs_you", "handoff": handoff, "url": f"{BASE}/#/s/{record['id']}", "question": question})


def test_a_push_for_an_open_question_offers_its_options_as_actions_and_an_action_answers_it(pages, api, cli):
    owner_token = cli.owner_token(unique("notify-q"))
    created = cli.run("create", unique("chat"), "--machine", "vm-nq", "--size", "large", token=owner_token)
    hid, machine_token = created["handoff"]["id"], created["machine_token"]

    # The machine asks in another process and waits there for the answer.
    env = dict(os.environ, HANDOFF_URL=BASE, HANDOFF_SIGNING_KEY=SIGNING_KEY, HANDOFF_TOKEN=machine_token)
    asking = subprocess.Popen(
        [CLI, "ask", hid, "--turn", "1", "--kind", "permission", "--text", "Bash: cargo clean",
         "--option", "allow=Allow", "--option", "deny=Deny", "--wait", "60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while not (asked := api.record(hid, owner_token)).get("question"):
            assert time.monotonic() < deadline, asked
            time.sleep(0.1)
        assert asked["question"]["answer"] is None, asked

        w = pages("owner", permissions=["notifications"])
        sign_in(w, owner_token, "#/")
        page = w.page
        pushes = ServiceWorkerPushes(page)
        max_actions = page.evaluate("() => Notification.maxActions")
        assert max_actions >= 2, max_actions

        # More options than fit as actions: none is offered (offering some would hide the
        # others); the notification still opens the page, which shows them all.
        too_many = [{"id": f"o{i}", "label": f"Option {i}"} for i in range(max_actions + 1)]
        assert [n["tag"] for n in pushes.deliver(question_message(asked, too_many), hid)] == [hid]
        assert page.evaluate(ACTIONS) == [{"tag": hid, "actions": []}]

        # The question as the service sends it: its two options are the notification's actions
        # (the newer notification replaces the older, same tag).
        pushes.deliver(question_message(asked), hid)
        assert page.evaluate(ACTIONS) == [{"tag": hid, "actions": [{"action": "allow", "title": "Allow"}, {"action": "deny", "title": "Deny"}]}]

        # "Deny" clicked: the page of the session opens and answers that question with deny.
        pushes.click(hid, "deny")
        expect(page).to_have_url(f"{BASE}/#/s/{hid}")
        expect(page.locator("#message")).to_have_text(re.compile(r"^answered Deny \(v\d+\)$"))
        out, err = asking.communicate(timeout=30)
        log("cli", f"ask -> exit {asking.returncode}: {out!r} {err!r}")
        assert (asking.returncode, out) == (0, "deny\n"), (asking.returncode, out, err)
        answered = api.record(hid, owner_token)
        assert answered["question"]["id"] == asked["question"]["id"], answered
        assert answered["question"]["answer"]["option"] == "deny", answered
        assert answered["version"] > asked["version"], (asked["version"], answered["version"])
        # The click closed it (the worker's notificationclick).
        pushes.until_none_shown()

        # The same notification again, its question answered since: the API's 409
        # question.answered, shown as every refusal is; nothing moves.
        assert [n["tag"] for n in pushes.deliver(question_message(asked), hid)] == [hid]
        pushes.click(hid, "allow")
        expect(page.locator("#error")).to_contain_text('question.answered: the question was answered "deny" already')
        assert api.record(hid, owner_token)["version"] == answered["version"]
        assert api.record(hid, owner_token)["question"]["answer"]["option"] == "deny"
        w.console_errors = [e for e in w.console_errors if not re.search(r"^Failed to load resource.*409", e)]
    finally:
        if asking.poll() is None:
            asking.kill()
            asking.communicate()
