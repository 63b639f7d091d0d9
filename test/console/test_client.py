"""The console calls the API through @handoff/client (clients/typescript), so these are the
client's browser tests: a change answered 503 is sent again with the same Idempotency-Key and
lands once, and a service that never answers is shown as `network.unreachable`, a refusal the
page expected (no console error of its own)."""

import json
import re

from playwright.sync_api import expect

from helpers import BASE, api_session_ready_to_hand_off, sign_in, unique

# Chromium's own line for a response it saw fail: the network's, not the page's.
LOAD_FAILED = re.compile(r"^Failed to load resource")


def only_load_failures(w) -> list[str]:
    """Clears Chromium's load-failure lines (which these tests cause) and returns them."""
    failed = [e for e in w.console_errors if LOAD_FAILED.search(e)]
    w.console_errors = [e for e in w.console_errors if not LOAD_FAILED.search(e)]
    return failed


def blocker_page(pages, api, cli, owner: str, on_resolve):
    """An owner's session page with an open blocker, whose resolve requests go to `on_resolve`
    (a Playwright route handler): (watched page, owner token, hand-off id, the resolve button,
    the record's version before the click)."""
    owner_token = cli.owner_token(unique(owner))
    hid, _ = api_session_ready_to_hand_off(api, owner_token)
    bid = api.get(f"/v1/handoffs/{hid}/work", owner_token)["work"]["blockers"][0]["id"]
    w = pages("owner")
    w.page.route(re.compile(r".*/v1/handoffs/[^/]+/blockers/[^/]+/resolve$"), on_resolve)
    sign_in(w, owner_token, expect_hash="#/")
    w.page.goto(f"{BASE}/#/s/{hid}")
    resolve = w.page.locator(f'#blockers li.blocker[data-id="{bid}"] button[data-action="resolve_blocker"]')
    return w, owner_token, hid, bid, resolve, api.record(hid, owner_token)["version"]


def test_a_change_answered_503_is_sent_again_with_the_same_idempotency_key_and_lands_once(pages, api, cli):
    sent = []

    def busy_once(route):
        sent.append(route.request.headers.get("idempotency-key"))
        if len(sent) == 1:
            route.fulfill(status=503, content_type="application/json", headers={"Retry-After": "0"},
                          body=json.dumps({"error": {"code": "store.unavailable", "message": "busy"}}))
        else:
            route.continue_()

    w, owner_token, hid, bid, resolve, version = blocker_page(pages, api, cli, "console-client-retry", busy_once)
    page = w.page
    resolve.click()
    expect(page.locator("#message")).to_contain_text(f"blocker {bid} resolved")
    expect(resolve).to_have_count(0)
    assert len(sent) == 2, f"the 503 was retried once: {len(sent)} requests"
    assert sent[0] and sent[0] == sent[1], f"one Idempotency-Key on both tries: {sent}"
    assert api.record(hid, owner_token)["version"] == version + 1, "the change landed once"
    expect(page.locator("#error")).to_have_text("")
    only_load_failures(w)
    w.assert_clean()


def test_a_service_that_never_answers_is_shown_as_network_unreachable(pages, api, cli):
    tries = []

    def down(route):
        tries.append(route.request.headers.get("idempotency-key"))
        route.abort("connectionrefused")

    w, owner_token, hid, _, resolve, version = blocker_page(pages, api, cli, "console-client-down", down)
    page = w.page
    resolve.click()
    expect(page.locator("#error")).to_have_text(
        "network.unreachable: the service did not answer; check the connection", timeout=10_000)
    assert len(tries) == 5, f"every try of the client's ATTEMPTS_MAX was made: {len(tries)}"
    assert len(set(tries)) == 1, f"one Idempotency-Key on every try: {tries}"
    assert api.record(hid, owner_token)["version"] == version, "nothing changed"
    expect(resolve).to_be_visible()
    only_load_failures(w)
    w.assert_clean()
