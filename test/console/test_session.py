"""A whole session in the browser while a machine reports through the CLI in another process
(issue 15, "Tests in scripts/test, in a real browser", the first two items):

- the list shows the new session, and needs-you on the list and on the session page, within
  2 s and with no reload;
- the owner opens the next turn through the hand-off dialog; the machine accepts the package;
  the package page shows it accepted with the API's whole hash; close asks for confirmation
  and ends the live view;
- at every record state reached, the session page's buttons (their distinct data-action
  values) are the record's `actions` as the API answers the same token, for the owner and,
  at the states the machine's page is open, for the machine.

The CSP is enforced (a plain browser context), and no page sees a console error, a page error
or a dialog (the `pages` fixture checks on teardown).
"""

import json
import re
import time

from playwright.sync_api import expect

from helpers import BASE, PACKAGE_ACTIONS, assert_actions, log, shot, sign_in, unique

TWO_S = 2000  # the contract's "within 2 s, with no reload"


def assert_not_reloaded(page, where: str) -> None:
    assert page.evaluate("() => window.__consoleTestDocument") == "not reloaded", f"{where} reloaded the page"


def test_a_whole_session_while_the_machine_reports_through_the_cli(pages, api, cli):
    owner_token = cli.owner_token(unique("console"))

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    expect(page.locator("select#state-filter")).to_be_visible()
    expect(page.locator("form#sign-in")).to_have_count(0)
    # A mark in this document: it survives everything but a reload (all routes are hash routes).
    page.evaluate("() => { window.__consoleTestDocument = 'not reloaded'; }")

    # --- the owner creates the session from a terminal: the list shows it within 2 s --------
    created = cli.run("create", unique("chat"), "--machine", "vm-7", "--size", "large", token=owner_token)
    hid, machine_token = created["handoff"]["id"], created["machine_token"]
    row = page.locator(f'tr.session-row[data-id="{hid}"]')
    expect(row).to_be_visible(timeout=TWO_S)
    expect(row).to_have_attribute("data-status", "running")
    expect(row).to_have_attribute("data-version", str(created["handoff"]["version"]))
    expect(row.locator(f'a[href$="#/s/{hid}"]')).to_have_count(1)
    expect(row.locator(".mark-needs-you")).to_have_count(0)

    # The work and the policy (so the hand-off dialog has runtimes to offer), from the terminal.
    cli.run("work", hid, "--title", "Billing schema", "--goal", "Invoices survive a restart",
            "--constraint", "Postgres only", "--criterion", "Migrations apply cleanly", token=owner_token)
    cli.run("policy", hid, "--runtime", "claude-code", "--runtime", "codex",
            "--context-threshold-pct", "80", token=owner_token)

    # --- the machine needs the owner: the list marks it within 2 s ---------------------------
    cli.run("report", hid, "--turn", "1", "--status", "needs-you", "--summary", "Which database?", token=machine_token)
    expect(row.locator(".mark-needs-you")).to_be_visible(timeout=TWO_S)
    expect(row).to_have_attribute("data-status", "needs-you", timeout=TWO_S)
    # One badge says so, not two (`needs-you` and `needs you`).
    expect(row.locator(".mark-needs-you")).to_have_text("needs-you")
    expect(row.locator(".badge, .mark").filter(has_text=re.compile("needs.you"))).to_have_count(1)
    expect(row).to_contain_text("Which database?")
    shot(page, "flow-01-list-needs-you")

    # The list follows with list requests only, never one request per row.
    per_row = [(m, u) for (m, u, _) in owner.requests if re.search(r"/v1/handoffs/ho_", u)]
    list_gets = [(m, u, h) for (m, u, h) in owner.requests if re.search(r"/v1/handoffs(\?|$)", u)]
    log("browser", f"list page: {len(list_gets)} list requests, {len(per_row)} per-row requests; "
                   f"If-None-Match on {sum(1 for *_, h in list_gets if 'if-none-match' in h)}")
    assert not per_row, f"the list page asked about single sessions: {per_row[:5]}"
    assert len(list_gets) >= 2, f"the list page asked GET /v1/handoffs {len(list_gets)} times in its first seconds"
    assert any("if-none-match" in h for *_, h in list_gets[1:]), \
        "the list page's repeated GET /v1/handoffs are not conditional (no If-None-Match)"

    assert_not_reloaded(page, "the list page")

    # --- the session page: needs-you there too, then live while it is open ------------------
    row.locator(f'a[href$="#/s/{hid}"]').click()
    expect(page).to_have_url(f"{BASE}/#/s/{hid}")
    session = page.locator("main#session")
    expect(session).to_have_attribute("data-id", hid)
    expect(session).to_have_attribute("data-status", "needs-you")
    expect(session).to_have_attribute("data-state", "open")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("#summary")).to_have_text("Which database?")
    assert_actions(page, api, hid, owner_token, "turn 1 needs-you (owner)")

    cli.run("report", hid, "--turn", "1", "--status", "running", "--summary", "Drafting the schema", token=machine_token)
    expect(session).to_have_attribute("data-status", "running", timeout=TWO_S)
    assert_actions(page, api, hid, owner_token, "turn 1 running (owner)")

    cli.run("report", hid, "--turn", "1", "--status", "needs-you", "--summary", "Postgres or SQLite?", token=machine_token)
    expect(session).to_have_attribute("data-status", "needs-you", timeout=TWO_S)
    expect(page.locator("#summary")).to_have_text("Postgres or SQLite?", timeout=TWO_S)
    assert_actions(page, api, hid, owner_token, "turn 1 needs-you again (owner)")
    assert_not_reloaded(page, "the session page")
    shot(page, "flow-02-session-needs-you")

    # --- a blocker from the machine, resolved by the owner on the page -----------------------
    blocker = cli.run("block", hid, "--severity", "high", "No database credentials", token=machine_token)["blocker"]
    blocker_row = page.locator(f'#blockers li.blocker[data-id="{blocker["id"]}"]')
    expect(blocker_row).to_contain_text("No database credentials")
    rec = assert_actions(page, api, hid, owner_token, "an open blocker (owner)")
    assert "resolve_blocker" in rec["actions"]
    resolve = blocker_row.locator('button[data-action="resolve_blocker"]')
    expect(resolve).to_have_text(re.compile(r"^\s*Resolve\s*$"))
    resolve.click()
    expect(resolve).to_have_count(0)
    rec = assert_actions(page, api, hid, owner_token, "the blocker resolved (owner)")
    assert "resolve_blocker" not in rec["actions"]

    # --- the machine finishes turn 1 ---------------------------------------------------------
    cli.run("report", hid, "--turn", "1", "--status", "done", "--summary", "Schema drafted on Postgres", token=machine_token)
    expect(session).to_have_attribute("data-status", "done", timeout=TWO_S)
    rec = assert_actions(page, api, hid, owner_token, "turn 1 done (owner)")
    assert "open_turn" in rec["actions"]

    # --- the hand-off dialog: runtime from the policy, a dry run, then the next turn ---------
    handoff_button = page.locator('main#session button#hand-off-next')
    expect(handoff_button).to_have_text(re.compile(r"^\s*Hand off…\s*$"))
    handoff_button.click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    runtime = dialog.locator("#target-runtime")
    assert runtime.evaluate("e => e.localName") == "select", "with a policy the runtime is a select"
    offered = runtime.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert {"claude-code", "codex"} <= set(offered), f"the policy's runtimes, offered: {offered}"
    runtime.select_option("codex")
    dialog.locator("input#purpose").fill("Ship billing")
    dialog.locator("textarea#objective").fill("Write the migrations")
    dialog.locator("textarea#note").fill("Staging runs Postgres 16")
    version_before = api.record(hid, owner_token)["version"]
    dialog.locator("button#dry-run").click()
    preview = dialog.locator("pre#dry-run-preview")
    expect(preview).to_contain_text("Write the migrations")
    assert api.record(hid, owner_token)["version"] == version_before, "a dry run writes nothing"
    shot(page, "flow-03-handoff-dialog")

    dialog.locator("button#submit-handoff").click()
    message = page.locator("#message")
    expect(message).to_have_text(re.compile(r"^opened turn 2 on codex, package v1 \([0-9a-f]{12}…\)$"))
    expect(dialog).to_be_hidden()
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["runtime"], rec["package_version"]) == (2, "codex", 1), rec
    assert message.text_content().strip() == f"opened turn 2 on codex, package v1 ({rec['package_hash'][:12]}…)"
    expect(session).to_have_attribute("data-status", "running")
    expect(page.locator("ol#lineage > li.turn")).to_have_count(2)
    expect(page.locator('ol#lineage > li.turn[data-turn="2"]')).to_contain_text("codex")
    expect(page.locator('ol#lineage > li.turn[data-turn="2"]')).to_contain_text(rec["package_hash"][:8])
    rec = assert_actions(page, api, hid, owner_token, "turn 2 running, package offered (owner)")
    assert {"accept", "reject"} <= set(rec["actions"])

    # --- the machine's own view: its one hand-off, its own actions ---------------------------
    machine = pages("machine")
    sign_in(machine, machine_token, expect_hash=f"#/s/{hid}")
    expect(machine.page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(machine.page.locator("#live")).to_have_text("live")
    rec = assert_actions(machine.page, api, hid, machine_token, "turn 2 running, package offered (machine)")
    assert "report" in rec["actions"]
    shot(machine.page, "flow-04-machine-view")

    # --- the machine accepts the package through the CLI -------------------------------------
    accepted = cli.run("package", "accept", hid, token=machine_token)
    assert accepted["state"] == "accepted", accepted
    latest = api.get(f"/v1/handoffs/{hid}/package", owner_token)
    assert latest["state"] == "accepted" and latest["package_hash"] == rec["package_hash"]
    assert_actions(page, api, hid, owner_token, "package accepted (owner)")
    assert_actions(machine.page, api, hid, machine_token, "package accepted (machine)")

    # --- the package page: accepted, the API's whole hash, the canonical JSON ----------------
    page.locator("a#package-link").click()
    expect(page).to_have_url(f"{BASE}/#/s/{hid}/package")
    package = page.locator("main#package")
    expect(package).to_have_attribute("data-state", "accepted")
    expect(package).to_have_attribute("data-version", "1")
    expect(package).to_have_attribute("data-hash", latest["package_hash"])
    expect(page.locator("code#package-hash")).to_have_text(latest["package_hash"])
    assert page.locator("code#package-hash").text_content() == latest["package_hash"], "the whole hash, exactly"
    expect(page.locator("#package-state")).to_have_text("accepted")
    expect(page.locator("#package-markdown")).to_contain_text("Write the migrations")
    details = page.locator("details#package-json")
    assert details.evaluate("d => d.open") is False, "the canonical JSON starts collapsed"
    shown = json.loads(details.locator("pre").text_content())
    shown.pop("generated_at", None)
    wanted = dict(latest["package"])
    wanted.pop("generated_at", None)
    assert shown == wanted, "the package page's JSON is the package the API serves"
    expect(page.get_by_role("button", name="Copy hash")).to_be_visible()
    assert_actions(page, api, hid, owner_token, "package page, accepted (owner)", root="main#package",
                   only=PACKAGE_ACTIONS)
    shot(page, "flow-05-package-accepted")

    # --- close: confirmation first (No changes nothing), then the live view ends -------------
    page.goto(f"{BASE}/#/s/{hid}")
    expect(session).to_have_attribute("data-id", hid)
    expect(page.locator("#live")).to_have_text("live")
    close = page.locator('main#session button[data-action="close"]')
    expect(close).to_have_text(re.compile(r"^\s*Close session\s*$"))
    version_before = api.record(hid, owner_token)["version"]
    close.click()
    confirm = page.locator("dialog#confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text(re.compile(r"final", re.I))
    confirm.locator("button#confirm-no").click()
    expect(confirm).to_be_hidden()
    time.sleep(0.3)
    assert api.record(hid, owner_token)["version"] == version_before, "No closes nothing"

    close.click()
    expect(confirm).to_be_visible()
    confirm.locator("button#confirm-yes").click()
    expect(page.locator("#live")).to_have_text("ended")
    expect(session).to_have_attribute("data-state", "closed")
    rec = assert_actions(page, api, hid, owner_token, "closed (owner)")
    assert rec["state"] == "closed" and rec["actions"] == [], rec
    expect(machine.page.locator("main#session")).to_have_attribute("data-state", "closed")
    expect(machine.page.locator("#live")).to_have_text("ended")
    assert_actions(machine.page, api, hid, machine_token, "closed (machine)")
    shot(page, "flow-06-session-closed")

    # --- back on the list: the filter tells open from closed ---------------------------------
    page.goto(f"{BASE}/#/")
    expect(row).to_be_visible()
    page.locator("select#state-filter").select_option("open")
    expect(row).to_have_count(0)
    page.locator("select#state-filter").select_option("closed")
    expect(row).to_be_visible()
    expect(row).to_have_attribute("data-status", "cancelled")

    assert_not_reloaded(page, "the whole session")
    owner.assert_clean()
    machine.assert_clean()


def test_handing_off_again_after_an_accepted_package(pages, api, cli):
    """Turn 2 was handed to codex, its package accepted, and the turn is done: the owner hands
    turn 3 to claude-code through the dialog. The preview and the submit must not lead to a
    refusal (the session page shows open_turn, so the dialog is a legal action), and the
    buttons equal the actions at each step."""
    owner_token = cli.owner_token(unique("console-again"))
    record, machine_token = api.create(owner_token, unique("again"))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Parser", "goal": "Parse the config file", "constraints": [], "acceptance_criteria": []})
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token,
             {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine_token, {"turn": 1, "status": "done"})
    opened = api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": 1, "handoff": {
        "runtime": "codex", "objective": "Finish the parser", "purpose": "a fresh context"}})
    cli.run("package", "accept", hid, token=machine_token)
    cli.run("report", hid, "--turn", "2", "--status", "done", "--summary", "Parser finished", token=machine_token)

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    page.goto(f"{BASE}/#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-status", "done")
    rec = assert_actions(page, api, hid, owner_token, "turn 2 done, its package accepted (owner)")
    assert "open_turn" in rec["actions"] and "compile" not in rec["actions"], rec["actions"]

    page.locator('main#session button#hand-off-next').click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("#target-runtime").select_option("claude-code")
    dialog.locator("input#purpose").fill("Review")
    dialog.locator("textarea#objective").fill("Review the parser's error messages")
    dialog.locator("button#dry-run").click()
    expect(dialog.locator("pre#dry-run-preview")).to_contain_text("Review the parser's error messages")
    dialog.locator("button#submit-handoff").click()
    expect(page.locator("#message")).to_have_text(
        re.compile(r"^opened turn 3 on claude-code, package v2 \([0-9a-f]{12}…\)$"))
    rec = api.record(hid, owner_token)
    assert rec["package_hash"] != opened["handoff"]["package_hash"]
    assert page.locator("#message").text_content().strip() == \
        f"opened turn 3 on claude-code, package v2 ({rec['package_hash'][:12]}…)"
    assert_actions(page, api, hid, owner_token, "turn 3 running, package v2 offered (owner)")
    owner.assert_clean()
