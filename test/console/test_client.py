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


def open_blocker(api, owner_token):
    hid, _ = api_session_ready_to_hand_off(api, owner_token)
    blocker = api.get(f"/v1/handoffs/{hid}/work", owner_token)["work"]["blockers"][0]
    return hid, blocker["id"]


def test_a_change_answered_503_is_sent_again_with_the_same_idempotency_key_and_lands_once(pages, api, cli):
    owner_token = cli.owner_token(unique("console-client-retry"))
    hid, bid = open_blocker(api, owner_token)
    w = pages("owner")
    page = w.page
    sent = []

    def busy_once(route):
        sent.append(route.request.headers.get("idempotency-key"))
        if len(sent) == 1:
            route.fulfill(status=503, content_type="application/json", headers={"Retry-After": "0"},
                          body=json.dumps({"error": {"code": "store.unavailable", "message": "busy"}}))
        else:
            route.continue_()

    page.route(re.compile(r".*/v1/handoffs/[^/]+/blockers/[^/]+/resolve$"), busy_once)
    sign_in(w, owner_token, expect_hash="#/")
    page.goto(f"{BASE}/#/s/{hid}")
    resolve = page.locator(f'#blockers li.blocker[data-id="{bid}"] button[data-action="resolve_blocker"]')
    version = api.record(hid, owner_token)["version"]
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
    owner_token = cli.owner_token(unique("console-client-down"))
    hid, bid = open_blocker(api, owner_token)
    w = pages("owner")
    page = w.page
    tries = []

    def down(route):
        tries.append(route.request.headers.get("idempotency-key"))
        route.abort("connectionrefused")

    page.route(re.compile(r".*/v1/handoffs/[^/]+/blockers/[^/]+/resolve$"), down)
    sign_in(w, owner_token, expect_hash="#/")
    page.goto(f"{BASE}/#/s/{hid}")
    resolve = page.locator(f'#blockers li.blocker[data-id="{bid}"] button[data-action="resolve_blocker"]')
    version = api.record(hid, owner_token)["version"]
    resolve.click()
    expect(page.locator("#error")).to_have_text(
        "network.unreachable: the service did not answer; check the connection", timeout=10_000)
    assert len(tries) == 5, f"every try of the client's ATTEMPTS_MAX was made: {len(tries)}"
    assert len(set(tries)) == 1, f"one Idempotency-Key on every try: {tries}"
    assert api.record(hid, owner_token)["version"] == version, "nothing changed"
    expect(resolve).to_be_visible()
    only_load_failures(w)
    w.assert_clean()
