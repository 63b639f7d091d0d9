"""Screenshots of each page of the console (sign-in, list, session, package, the hand-off
dialog) at 1280x800, into the run's folder; with CONSOLE_SCREENSHOT_README set, the session
page's also to docs/console-session.png for the README. The session shown is a full one: two
turns, each opened with a prompt, the package offered to the second, a work record with decisions, artifacts, a blocker and files, the
machine's runtimes, and a suggestion."""

import os
import secrets
import shutil

from playwright.sync_api import expect

from helpers import BASE, RUN_DIR, TOP, log, shot, sign_in, unique


def test_screenshots_of_every_page(pages, api, cli):
    # For the README, an owner name a reader takes for a person's (still new on every run, so
    # that reruns against the same Worker start from an empty list).
    readme = bool(os.environ.get("CONSOLE_SCREENSHOT_README"))
    owner_token = cli.owner_token(f"alice-{secrets.token_hex(2)}" if readme else unique("console-shots"))

    # Two other sessions, so the list has rows to tell apart: one waits for the owner, one closed.
    waiting, waiting_machine = api.create(owner_token, "chat-parser", machine="vm-3", size="small")
    api.call("POST", f"/v1/handoffs/{waiting['id']}/report", waiting_machine,
             {"turn": 1, "status": "needs-you", "summary": "Which config format: TOML or YAML?"})
    closed, _ = api.create(owner_token, "chat-docs", machine="vm-2", size="small")
    api.call("POST", f"/v1/handoffs/{closed['id']}/close", owner_token, {})

    created = api.call("POST", "/v1/handoffs", owner_token, {
        "session": "chat-billing", "machine": "vm-7", "size": "large",
        "prompt": "Invoices vanish when the billing service restarts. Make them survive it."})
    hid, machine = created["handoff"]["id"], created["machine_token"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Billing schema", "goal": "Invoices survive a restart of the billing service",
        "task_type": "feature", "priority": "high",
        "constraints": ["Postgres only", "No new services"],
        "acceptance_criteria": ["Migrations apply cleanly", "An invoice survives a restart"]})
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token,
             {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    api.call("PUT", f"/v1/handoffs/{hid}/runtimes", machine, {"runtimes": [
        {"name": "claude-code", "version": "2.1.3 (Claude Code)", "signed_in": True},
        {"name": "codex", "version": "0.48.0", "signed_in": True}]})
    api.call("POST", f"/v1/handoffs/{hid}/decisions", machine, {
        "statement": "Use Postgres", "rationale": "the team runs it already",
        "evidence": ["https://example.com/adr/1"]})
    api.call("POST", f"/v1/handoffs/{hid}/artifacts", machine,
             {"type": "document", "title": "Schema design", "uri": "docs/billing-schema.md"})
    api.call("POST", f"/v1/handoffs/{hid}/workspace", machine, {"files": [
        {"path": "migrations/0001_invoices.sql", "insertions": 42, "deletions": 0},
        {"path": "src/billing/store.rs", "insertions": 118, "deletions": 17}]})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine,
             {"turn": 1, "status": "done", "summary": "Schema drafted on Postgres"})
    opened = api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {
        "after": 1, "prompt": "Good. Now write the migrations, and keep the old rows.", "handoff": {
            "runtime": "codex", "objective": "Write the migrations", "purpose": "Ship billing"}})
    assert opened["handoff"]["package_version"] == 1
    api.call("POST", f"/v1/handoffs/{hid}/blockers", machine,
             {"severity": "medium", "title": "Staging database credentials expire Friday"})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {
        "turn": 2, "status": "done", "summary": "Migrations written; 2 of 2 criteria met",
        "usage": {"context_used": 172000, "context_window": 200000}})
    log("browser", f"screenshot session {hid}: {api.record(hid, owner_token)}")

    w = pages("screenshots")
    page = w.page

    page.goto(f"{BASE}/")
    expect(page.locator("form#sign-in")).to_be_visible()
    shot(page, "sign-in", full_page=False)

    sign_in(w, owner_token, expect_hash="#/")
    expect(page.locator("tr.session-row")).to_have_count(3)
    shot(page, "list", full_page=False)

    page.goto(f"{BASE}/#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-status", "done")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("ol#lineage > li.turn")).to_have_count(2)
    expect(page.locator('ol#lineage > li.turn[data-turn="2"] .prompt-text')).to_contain_text("write the migrations")
    expect(page.locator("#decisions")).to_contain_text("Use Postgres")
    expect(page.locator("#files")).to_contain_text("migrations/0001_invoices.sql")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    session_png = shot(page, "session", full_page=False)
    shot(page, "session-full", full_page=True)
    if readme:
        target = TOP / "docs" / "console-session.png"
        shutil.copyfile(session_png, target)
        log("browser", f"README screenshot written to {target}")

    page.locator('main#session button#hand-off-next').click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("input#purpose").fill("Context nearly full")
    dialog.locator("textarea#objective").fill("Review the migrations and add the rollback")
    dialog.locator("button#dry-run").click()
    expect(dialog.locator("pre#dry-run-preview")).to_contain_text("rollback")
    shot(page, "handoff-dialog", full_page=False)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    page.goto(f"{BASE}/#/s/{hid}/package")
    expect(page.locator("main#package")).to_have_attribute("data-state", "offered")
    shot(page, "package", full_page=False)
    shot(page, "package-full", full_page=True)

    for name in ("sign-in", "list", "session", "package", "handoff-dialog"):
        assert (RUN_DIR / "screenshots" / f"{name}.png").stat().st_size > 5_000, name
    w.assert_clean()
