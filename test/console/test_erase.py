"""Erasing a session from the console: the owner's "Erase session…" asks first (No erases
nothing), then the session is gone (404 for the owner and its machine) and the page is back on
the list without it. The machine's page has no erase button."""

import time

from playwright.sync_api import expect

from helpers import BASE, sign_in, unique


def test_erase_asks_first_then_erases_the_session_and_returns_to_the_list(pages, api, cli):
    owner_token = cli.owner_token(unique("console-erase"))
    session_name = unique("erase")
    rec, machine_token = api.create(owner_token, session_name)
    hid = rec["id"]

    machine = pages("machine")
    sign_in(machine, machine_token)
    expect(machine.page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(machine.page.locator("button#erase")).to_have_count(0)
    # Another viewer of an erased session reads 404s (console errors here): this one leaves.
    machine.page.goto("about:blank")

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token)
    page.goto(f"{BASE}/#/s/{hid}")
    session = page.locator("main#session")
    expect(session).to_have_attribute("data-id", hid)
    erase = page.locator("main#session button#erase")
    expect(erase).to_have_text("Erase session…")

    erase.click()
    confirm = page.locator("dialog#confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("final")
    confirm.locator("button#confirm-no").click()
    expect(confirm).to_be_hidden()
    time.sleep(0.3)
    assert api.record(hid, owner_token)["state"] == "open", "No erases nothing"

    erase.click()
    expect(confirm).to_be_visible()
    confirm.locator("button#confirm-yes").click()
    expect(page.locator("#message")).to_have_text(f"erased {session_name}")
    expect(page).to_have_url(f"{BASE}/#/")
    expect(page.locator("main select#state-filter")).to_be_visible()
    expect(page.locator(f'.session-row[data-id="{hid}"]')).to_have_count(0)
    for token in (owner_token, machine_token):
        status, _, _ = api.request("GET", f"/v1/handoffs/{hid}", token)
        assert status == 404, f"the session answers {status} after its erasure"
    owner.assert_clean()
