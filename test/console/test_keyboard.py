"""Keyboard only (issue 15): signing in, opening a session from the list, reaching every action
on the session and package pages, and opening and leaving the hand-off dialog, with Tab, Enter
and Escape and nothing else; every control on the way carries an accessible name (Playwright's
ARIA snapshot names each one). The CSP is enforced; axe-core runs in test_axe.py."""

import re

from playwright.sync_api import expect

from helpers import BASE, PACKAGE_ACTIONS, Watched, api_session_ready_to_hand_off, log, unique, unnamed_controls

TABS_MAX = 150


def focused(page) -> dict:
    return page.evaluate("""() => {
        const e = document.activeElement;
        if (!e || e === document.body) return {tag: 'body'};
        return {tag: e.localName, id: e.id, action: e.dataset ? (e.dataset.action || null) : null,
                href: e.getAttribute('href'), text: (e.textContent || '').trim().slice(0, 60),
                inDialog: e.closest('dialog') ? e.closest('dialog').id : null,
                row: e.closest('tr.session-row') ? e.closest('tr.session-row').dataset.id : null,
                blocker: e.closest('li.blocker') ? e.closest('li.blocker').dataset.id : null};
    }""")


def tab_until(page, matches, what: str) -> dict:
    """Presses Tab until the focused element matches; fails after TABS_MAX presses."""
    for _ in range(TABS_MAX):
        page.keyboard.press("Tab")
        now = focused(page)
        if matches(now):
            return now
    raise AssertionError(f"Tab never reached {what} in {TABS_MAX} presses")


def tab_cycle(page, presses: int = TABS_MAX) -> list[dict]:
    """Everything Tab focuses, in order, over `presses` presses."""
    seen = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        seen.append(focused(page))
    return seen


def assert_named(page, label: str, root: str = "body") -> None:
    missing = unnamed_controls(page, root)
    assert not missing, f"{label}: controls without an accessible name: {missing}"


def test_keyboard_only(pages, api, cli):
    owner_token = cli.owner_token(unique("console-keys"))
    hid, machine_token = api_session_ready_to_hand_off(api, owner_token, compiled=True)
    rec = api.record(hid, owner_token)
    assert {"open_turn", "close", "compile", "accept", "reject"} <= set(rec.get("actions", [])), rec

    w: Watched = pages("keyboard")
    page = w.page

    # --- sign in: the form, typed into and submitted from the keyboard -----------------------
    page.goto(f"{BASE}/")
    form = page.locator("form#sign-in")
    expect(form).to_be_visible()
    token_input = page.get_by_label("Owner or machine token")
    expect(token_input).to_have_id("token")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert_named(page, "sign-in page")
    tab_until(page, lambda f: f.get("id") == "token", "input#token")
    page.keyboard.type(owner_token)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile("^" + re.escape(BASE) + r"/(#/?)?$"))
    row = page.locator(f'tr.session-row[data-id="{hid}"]')
    expect(row).to_be_visible()

    # --- the list: Tab to the session's link, Enter opens it ---------------------------------
    assert_named(page, "list page")
    tab_until(page, lambda f: f.get("row") == hid and f.get("tag") == "a", f"the link of row {hid}")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{BASE}/#/s/{hid}")
    session = page.locator("main#session")
    expect(session).to_have_attribute("data-version", str(rec["version"]))
    expect(page.locator("#live")).to_have_text("live")
    assert_named(page, "session page")

    # --- every action on the session page is reachable with Tab ------------------------------
    cycle = tab_cycle(page)
    reached = {f["action"] for f in cycle if f.get("action") and not f.get("inDialog")}
    log("keyboard", f"session page Tab order: {[(f.get('tag'), f.get('id'), f.get('action')) for f in cycle[:40]]}")
    assert reached == set(rec["actions"]), f"Tab reaches {sorted(reached)}, the actions are {rec['actions']}"

    # --- the hand-off dialog: Enter opens it, Tab stays in it, Escape closes it --------------
    tab_until(page, lambda f: f.get("id") == "hand-off-next", "the composer's Hand off… button")
    page.keyboard.press("Enter")
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    assert dialog.evaluate("d => d.open"), "dialog#handoff-dialog is open"
    inside = focused(page)
    assert inside.get("inDialog") == "handoff-dialog", f"focus moved into the dialog, not to {inside}"
    assert_named(page, "hand-off dialog", "dialog#handoff-dialog")
    ids = {f.get("id") for f in tab_cycle(page, 20) if f.get("inDialog") == "handoff-dialog"}
    wanted = {"handoff-prompt", "target-runtime", "purpose", "objective", "note", "dry-run", "submit-handoff"}
    assert wanted <= ids, f"Tab in the dialog reaches {sorted(i for i in ids if i)}; missing {sorted(wanted - ids)}"
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert not dialog.evaluate("d => d.open"), "Escape closes the hand-off dialog"
    assert api.record(hid, owner_token)["version"] == rec["version"], "Escape changed nothing"

    # --- the package page, from the keyboard, with its actions reachable ---------------------
    tab_until(page, lambda f: f.get("id") == "package-link", "a#package-link")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{BASE}/#/s/{hid}/package")
    expect(page.locator("main#package")).to_have_attribute("data-state", "offered")
    assert_named(page, "package page")
    reached = {f["action"] for f in tab_cycle(page) if f.get("action") and not f.get("inDialog")}
    want = set(rec["actions"]) & PACKAGE_ACTIONS
    assert reached == want, f"Tab on the package page reaches {sorted(reached)}, want {sorted(want)}"
    copy = tab_until(page, lambda f: f.get("id") == "copy-hash", "button#copy-hash")
    assert copy["text"] == "Copy hash"

    # --- sign out from the keyboard ----------------------------------------------------------
    tab_until(page, lambda f: f.get("id") == "sign-out", "button#sign-out")
    page.keyboard.press("Enter")
    expect(page.locator("form#sign-in")).to_be_visible()
    assert page.evaluate("() => sessionStorage.getItem('handoff.token')") is None, "sign-out forgets the token"
    page.reload()
    expect(page.locator("form#sign-in")).to_be_visible()
    w.assert_clean()
