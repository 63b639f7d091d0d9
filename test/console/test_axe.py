"""axe-core (node_modules/axe-core, from npm) on every page of the console and the open
hand-off dialog: no violation of impact serious or critical (issue 15, "Keyboard only: every
action reachable and labelled"). axe is injected as a script, which the console's CSP forbids,
so only this module's browser context bypasses the CSP; every other test keeps it enforced."""

import pathlib

import pytest
from playwright.sync_api import expect

from helpers import AXE, BASE, api_session_ready_to_hand_off, axe_serious, sign_in, unique


def test_axe_finds_no_serious_violation_on_any_page(pages, api, cli):
    if not pathlib.Path(AXE).exists():
        pytest.fail(f"no axe-core at {AXE}: scripts/install runs npm ci (package.json lists axe-core)")
    owner_token = cli.owner_token(unique("console-axe"))
    hid, _ = api_session_ready_to_hand_off(api, owner_token, compiled=True)

    found: dict[str, list[str]] = {}
    w = pages("axe", bypass_csp=True)
    page = w.page

    page.goto(f"{BASE}/")
    expect(page.locator("form#sign-in")).to_be_visible()
    found["sign-in"] = axe_serious(page, "sign-in")

    sign_in(w, owner_token, expect_hash="#/")
    expect(page.locator(f'tr.session-row[data-id="{hid}"]')).to_be_visible()
    found["list"] = axe_serious(page, "list")

    page.goto(f"{BASE}/#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("section#work")).to_be_visible()
    found["session"] = axe_serious(page, "session")

    page.locator('main#session button#hand-off-next').click()
    expect(page.locator("dialog#handoff-dialog")).to_be_visible()
    found["hand-off dialog"] = axe_serious(page, "hand-off dialog")
    page.keyboard.press("Escape")
    expect(page.locator("dialog#handoff-dialog")).to_be_hidden()

    page.goto(f"{BASE}/#/s/{hid}/package")
    expect(page.locator("main#package")).to_have_attribute("data-state", "offered")
    expect(page.locator("#package-markdown")).to_contain_text("Write the migrations")
    found["package"] = axe_serious(page, "package")

    # A conversation: prompts, an answered question, and an open permission question with its
    # whole input, above the composer.
    asked = api.call("POST", "/v1/handoffs", owner_token, {
        "session": unique("axe-chat"), "machine": "vm-1", "size": "large", "prompt": "Fix the build"})
    chat, machine = asked["handoff"]["id"], asked["machine_token"]
    api.call("POST", f"/v1/handoffs/{chat}/report", machine, {"turn": 1, "status": "done", "summary": "Built"})
    api.call("POST", f"/v1/handoffs/{chat}/turns", owner_token, {"after": 1, "prompt": "Now deploy it\nto staging"})
    page.goto(f"{BASE}/#/s/{chat}")
    expect(page.locator("#live")).to_have_text("live")
    api.call("POST", f"/v1/handoffs/{chat}/report", machine, {
        "turn": 2, "status": "needs-you", "summary": "Bash: deploy",
        "question": {"kind": "permission", "text": "Bash: deploy", "input": "make deploy \\\n  ENV=staging",
                     "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}})
    expect(page.locator("pre#question-input")).to_be_visible()
    page.locator("textarea#prompt").fill("Then tell me")
    found["conversation"] = axe_serious(page, "conversation")

    bad = {name: v for name, v in found.items() if v}
    assert not bad, "axe-core: serious or critical violations: " + "; ".join(
        f"[{name}] " + " | ".join(v) for name, v in bad.items())
    w.assert_clean()
