"""The package page and the suggestion, in the browser (issue 15, "The package page" and "One
session"):

- the package page shows its state (offered, rejected with the typed reason and note as a
  callout that stays after a recompile, accepted); Recompile answers "package recompiled (vN,
  <8 hex>…)" or "package unchanged (vN, <8 hex>…)"; Reject takes a typed reason and a note;
  at every state its buttons are the record's `actions` ∩ {compile, accept, reject};
- the briefing preview at a chosen budget is the API's briefing at that budget, within it,
  with what was left out;
- the whole hash with a copy button;
- the suggestion with its reason, and a button that opens the hand-off dialog pre-filled.

Everything a machine wrote is shown as text. The CSP is enforced (a plain browser context),
and no page sees a console error, a page error or a dialog (the `pages` fixture checks on
teardown).
"""

import re

from playwright.sync_api import expect

from helpers import BASE, PACKAGE_ACTIONS, api_session_ready_to_hand_off, assert_actions, log, shot, sign_in, unique

TWO_S = 2000  # the contract's "within 2 s, with no reload"

HASH8 = r"[0-9a-f]{8}…"
LEFT_OUT_RE = re.compile(r"(?:^|\n)## Left out\n([\s\S]*?)(?=\n## |\n*$)")


def package_path(hid: str, tail: str = "") -> str:
    return f"/v1/handoffs/{hid}/package{tail}"


def handed_to_a_runtime(api, owner_token: str, prefix: str, decisions: list[dict] = ()) -> tuple[str, str]:
    """A hand-off whose turn 1 is done and whose turn 2 the owner handed to codex through the
    API, so that package v1 is offered: (id, machine token)."""
    record, machine_token = api.create(owner_token, unique(prefix))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Parser", "goal": "Parse the config file",
        "constraints": ["No new dependencies"], "acceptance_criteria": ["Every fixture parses"]})
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token,
             {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    for d in decisions:
        api.call("POST", f"/v1/handoffs/{hid}/decisions", machine_token, d)
    api.call("POST", f"/v1/handoffs/{hid}/report", machine_token,
             {"turn": 1, "status": "done", "summary": "Tokenizer drafted"})
    opened = api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": 1, "handoff": {
        "runtime": "codex", "objective": "Finish the parser", "purpose": "a fresh context"}})
    assert (opened["handoff"]["turn"], opened["handoff"]["package_version"]) == (2, 1), opened["handoff"]
    return hid, machine_token


def open_package_page(page, hid: str, version: int) -> None:
    page.goto(f"{BASE}/#/s/{hid}/package")
    expect(page.locator("main#package")).to_have_attribute("data-id", hid)
    expect(page.locator("main#package")).to_have_attribute("data-version", str(version))


def assert_package_actions(page, api, hid: str, token: str, label: str) -> dict:
    return assert_actions(page, api, hid, token, label, root="main#package", only=PACKAGE_ACTIONS)


def test_the_package_page_state_rejection_and_recompile(pages, api, cli):
    """Offered → rejected by the machine (the callout within 2 s, its note as text) → the record
    moves → Recompile: "package recompiled (v2, …)", the callout still there → Recompile:
    v3, which no longer lists the rejection → Recompile: "package unchanged (v3, …)" → the
    owner rejects v3 through the page's dialog. The buttons equal the API's package actions
    at each state."""
    owner_token = cli.owner_token(unique("console-package"))
    hid, machine_token = handed_to_a_runtime(api, owner_token, "package")

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    open_package_page(page, hid, 1)
    package = page.locator("main#package")
    state = page.locator("#package-state")
    message = page.locator("#message")
    rejection = page.locator("#rejection")
    latest = api.get(package_path(hid), owner_token)
    assert latest["state"] == "offered", latest
    expect(package).to_have_attribute("data-state", "offered")
    expect(package).to_have_attribute("data-hash", latest["package_hash"])
    expect(state).to_have_text("offered")
    expect(rejection).to_have_count(0)
    rec = assert_package_actions(page, api, hid, owner_token, "package v1 offered (owner)")
    assert {"compile", "accept", "reject"} <= set(rec["actions"]), rec["actions"]
    compile_button = page.locator('main#package button[data-action="compile"]')
    expect(compile_button).to_have_text(re.compile(r"^\s*Recompile package\s*$"))
    expect(page.locator('main#package button[data-action="accept"]')).to_have_text(re.compile(r"^\s*Accept package\s*$"))
    expect(page.locator('main#package button[data-action="reject"]')).to_have_text(re.compile(r"^\s*Reject package…\s*$"))
    shot(page, "package-01-offered")

    # --- the machine rejects through the API: the callout within 2 s, the note as text -------
    note = 'which tokenizer? <b>note</b> <img src=x onerror=alert(1)> [x](javascript:alert(1))'
    rejected = api.call("POST", package_path(hid, "/reject"), machine_token, {"reason": "missing_context", "note": note})
    assert rejected["state"] == "rejected", rejected
    expect(rejection).to_be_visible(timeout=TWO_S)
    expect(state).to_have_text("rejected", timeout=TWO_S)
    expect(package).to_have_attribute("data-state", "rejected")
    expect(rejection.locator(".rejection-reason")).to_have_text("missing_context")
    assert rejection.locator(".rejection-note").text_content() == note, "the note, literally"
    expect(rejection.locator("b, img, a")).to_have_count(0)
    expect(rejection).to_contain_text("by the machine")
    assert_package_actions(page, api, hid, owner_token, "package v1 rejected (owner)")
    shot(page, "package-02-rejected")

    # --- the record moves (a decision from the machine), then Recompile ----------------------
    api.call("POST", f"/v1/handoffs/{hid}/decisions", machine_token,
             {"statement": "Tokenizer: unicode61", "rationale": "the rejection asked which one", "evidence": []})
    expect(compile_button).to_be_visible()
    compile_button.click()
    expect(message).to_have_text(re.compile(rf"^package recompiled \(v2, {HASH8}\)$"))
    v2 = api.get(package_path(hid), owner_token)
    assert (v2["package_version"], v2["state"]) == (2, "offered"), v2
    assert message.text_content() == f"package recompiled (v2, {v2['package_hash'][:8]}…)"
    expect(package).to_have_attribute("data-version", "2")
    expect(package).to_have_attribute("data-hash", v2["package_hash"])
    expect(state).to_have_text("offered")
    expect(page.locator("code#package-hash")).to_have_text(v2["package_hash"])
    # The callout stays after the recompile: v2 lists the rejection under unresolved.
    assert f"handoff rejected (missing_context): {note}" in v2["package"]["state"]["unresolved"], v2["package"]["state"]
    expect(rejection).to_be_visible()
    expect(rejection.locator(".rejection-reason")).to_have_text("missing_context")
    assert rejection.locator(".rejection-note").text_content() == note
    expect(rejection.locator("b, img, a")).to_have_count(0)
    expect(page.locator("#package-markdown")).to_contain_text("Tokenizer: unicode61")
    assert_package_actions(page, api, hid, owner_token, "package v2 offered after a rejection (owner)")
    shot(page, "package-03-recompiled-callout")

    # --- Recompile again: v3 no longer lists the rejection (it was answered by v2's offer) ---
    compile_button.click()
    expect(message).to_have_text(re.compile(rf"^package (recompiled|unchanged) \(v\d+, {HASH8}\)$"))
    expect(message).not_to_have_text(f"package recompiled (v2, {v2['package_hash'][:8]}…)")
    v3 = api.get(package_path(hid), owner_token)
    log("package", f"second recompile: v{v3['package_version']} changed={v3['package_hash'] != v2['package_hash']} "
                   f"unresolved={v3['package']['state']['unresolved']}")
    assert message.text_content() == f"package recompiled (v3, {v3['package_hash'][:8]}…)", (
        f"the second recompile: the page says {message.text_content()!r}; the API's latest is "
        f"v{v3['package_version']} {v3['package_hash'][:8]}")
    assert not any(u.startswith("handoff rejected") for u in v3["package"]["state"]["unresolved"])
    expect(package).to_have_attribute("data-version", "3")
    expect(rejection).to_have_count(0)
    assert_package_actions(page, api, hid, owner_token, "package v3 offered (owner)")

    # --- Recompile with nothing changed: unchanged, no new version ---------------------------
    record_before = api.record(hid, owner_token)["version"]
    compile_button.click()
    expect(message).to_have_text(f"package unchanged (v3, {v3['package_hash'][:8]}…)")
    again = api.get(package_path(hid), owner_token)
    assert (again["package_version"], again["package_hash"]) == (3, v3["package_hash"]), again
    assert api.record(hid, owner_token)["version"] == record_before, "an unchanged compile moves no version"
    expect(package).to_have_attribute("data-version", "3")
    assert_package_actions(page, api, hid, owner_token, "package v3 unchanged (owner)")
    shot(page, "package-04-unchanged")

    # --- the owner rejects v3 through the page's dialog --------------------------------------
    reject_button = page.locator('main#package button[data-action="reject"]')
    reject_button.click()
    dialog = page.locator("dialog#reject-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("select#reject-reason").select_option("wrong_runtime")
    owner_note = "<i>codex</i> cannot run the fixtures; hand it to claude-code & retry"
    dialog.locator("textarea#reject-note").fill(owner_note)
    dialog.locator("button#reject-submit").click()
    expect(dialog).to_be_hidden()
    expect(message).to_have_text(f"package rejected (v3, {v3['package_hash'][:8]}…)")
    latest = api.get(package_path(hid), owner_token)
    assert latest["state"] == "rejected", latest
    assert (latest["rejection"]["reason"], latest["rejection"]["note"]) == ("wrong_runtime", owner_note), latest["rejection"]
    assert latest["rejection"].get("by") == "owner", latest["rejection"]
    expect(state).to_have_text("rejected")
    expect(rejection).to_be_visible()
    expect(rejection.locator(".rejection-reason")).to_have_text("wrong_runtime")
    assert rejection.locator(".rejection-note").text_content() == owner_note
    expect(rejection.locator("i")).to_have_count(0)
    assert_package_actions(page, api, hid, owner_token, "package v3 rejected by the owner (owner)")
    shot(page, "package-05-rejected-by-owner")
    owner.assert_clean()


def test_the_briefing_preview_at_a_budget_says_what_it_left_out(pages, api, cli):
    """25 standing decisions with long statements (non-ASCII too, so bytes are not
    characters): at 1024 bytes the page's briefing is the API's briefing at that budget, byte
    for byte, within the budget, and #left-out shows its "## Left out" section; at 65536 the
    package's own bound (20 decisions) is still said; a budget out of range is refused on the
    page without a request."""
    owner_token = cli.owner_token(unique("console-briefing"))
    decisions = [{
        "statement": f"Decision {i:02d}: the tokenizer keeps “{'é' * 40}” intact — " + "long statement " * 30,
        "rationale": "measured on every fixture; " + "why " * 40,
        "evidence": [f"https://example.com/bench/{i}"],
    } for i in range(25)]
    hid, _ = handed_to_a_runtime(api, owner_token, "briefing", decisions)
    latest = api.get(package_path(hid), owner_token)
    assert latest["package"]["truncation"]["decisions_omitted"] == 5, latest["package"]["truncation"]

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    open_package_page(page, hid, 1)
    budget = page.locator("input#budget")
    preview = page.locator("button#preview-briefing")
    briefing = page.locator("pre#briefing")
    left_out = page.locator("#left-out")
    message = page.locator("#message")

    for n in (1024, 65536):
        budget.fill(str(n))
        preview.click()
        status, _, wanted = api.request("GET", f"/v1/handoffs/{hid}/briefing?budget={n}", owner_token)
        assert status == 200, (status, wanted[:300])
        expect(message).to_have_text(f"briefing: {len(wanted.encode('utf-8'))} of {n} bytes")
        expect(briefing).to_be_visible()
        shown = briefing.text_content()
        log("package", f"briefing at {n}: page {len(shown.encode())} bytes, API {len(wanted.encode())} bytes")
        assert len(shown.encode("utf-8")) <= n, f"the page's briefing is {len(shown.encode())} bytes, over {n}"
        assert shown == wanted, f"the page's briefing at {n} bytes is not the API's GET …/briefing?budget={n}"
        section = LEFT_OUT_RE.search(wanted)
        assert section and section.group(1).strip(), f"the briefing at {n} bytes says nothing was left out:\n{wanted[:1500]}"
        expect(left_out).to_be_visible()
        expect(left_out).to_contain_text("Left out")
        for line in section.group(1).strip().splitlines():
            expect(left_out).to_contain_text(line.strip())
        if n == 1024:
            expect(left_out).to_contain_text("1024-byte runtime budget")
            assert "## Decisions" not in shown, "at 1024 bytes the decisions are left out"
            shot(page, "package-06-briefing-1024")
        else:
            expect(left_out).to_contain_text("5 older standing decisions")
            expect(left_out).not_to_contain_text("runtime budget")
            assert "## Decisions" in shown

    # Out of range: refused on the page (no briefing request), the briefing shown stays.
    asked = len([u for (m, u, _) in owner.requests if "/briefing" in u])
    budget.fill("100")
    preview.click()
    expect(page.locator("#error")).to_have_text("request.invalid: budget: a whole number of bytes from 256 to 65536")
    assert len([u for (m, u, _) in owner.requests if "/briefing" in u]) == asked, "a refused budget asked the API"
    owner.assert_clean()


def test_the_whole_hash_and_its_copy_button(pages, api, cli):
    """code#package-hash is the API's whole 64-hex hash, the canonical JSON on the page hashes
    to it, and Copy hash either copies it (then the clipboard holds it) or says the clipboard is
    not available and selects it."""
    owner_token = cli.owner_token(unique("console-hash"))
    hid, _ = handed_to_a_runtime(api, owner_token, "hash")
    latest = api.get(package_path(hid), owner_token)
    whole = latest["package_hash"]
    assert re.fullmatch(r"[0-9a-f]{64}", whole), whole

    owner = pages("owner", permissions=["clipboard-read", "clipboard-write"])
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    open_package_page(page, hid, 1)
    code = page.locator("code#package-hash")
    expect(code).to_have_text(whole)
    assert code.text_content() == whole, "the whole hash, exactly"
    expect(page.locator("main#package")).to_have_attribute("data-hash", whole)
    expect(page.locator("#hash-check")).to_have_text(
        "Its SHA-256 is the hash above: this is the document you are looking at.")

    copy = page.locator("button#copy-hash")
    expect(copy).to_have_text("Copy hash")
    copy.click()
    copied = "hash copied"
    fallback = "the clipboard is not available here: the hash is selected, copy it with Ctrl+C"
    message = page.locator("#message")
    expect(message).to_have_text(re.compile(f"^({re.escape(copied)}|{re.escape(fallback)})$"))
    said = message.text_content()
    log("package", f"copy hash: {said!r}")
    if said == copied:
        # Reading it back may itself be refused headless; when it answers, it is the whole hash.
        held = page.evaluate("() => navigator.clipboard.readText().catch(e => 'refused: ' + e)")
        log("package", f"clipboard read back: {held[:80]!r}")
        assert held == whole or held.startswith("refused: "), f"the clipboard holds {held!r}, not the hash"
    else:
        assert page.evaluate("() => String(window.getSelection())") == whole, "the whole hash is selected"
    owner.assert_clean()


def test_the_suggestion_opens_the_hand_off_dialog_pre_filled(pages, api, cli):
    """A policy (claude-code, codex; 50 %), both runtimes installed and signed in on the
    machine, and a final report over the threshold: the record carries a suggestion; the list
    marks the row; the session page shows its reason; "Hand off as suggested…" opens the
    dialog with the suggested runtime and the reason as purpose; submitting opens turn 2 on it.
    Then turn 2 crosses the threshold too: the suggestion (live, within 2 s) names only codex,
    the dialog pre-fills codex and the package's objective, and turn 3 opens on codex."""
    owner_token = cli.owner_token(unique("console-suggestion"))
    record, machine_token = api.create(owner_token, unique("suggestion"))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Parser", "goal": "Parse the config file", "constraints": [], "acceptance_criteria": []})
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token,
             {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 50})
    api.call("PUT", f"/v1/handoffs/{hid}/runtimes", machine_token, {"runtimes": [
        {"name": "claude-code", "version": "2.1.3 (Claude Code)", "signed_in": True},
        {"name": "codex", "version": "codex-cli 0.50.0", "signed_in": True}]})
    reported = api.call("POST", f"/v1/handoffs/{hid}/report", machine_token, {
        "turn": 1, "status": "done", "summary": "Tokenizer drafted",
        "usage": {"context_used": 150_000, "context_window": 200_000}})
    suggestion = reported["handoff"].get("suggestion")
    assert suggestion and suggestion["reason"] == "context-threshold" and suggestion["turn"] == 1, reported["handoff"]
    assert suggestion["runtimes"] == ["claude-code", "codex"], suggestion
    suggested = suggestion["runtimes"][0]

    owner = pages("owner")
    page = owner.page
    sign_in(owner, owner_token, expect_hash="#/")
    row = page.locator(f'tr.session-row[data-id="{hid}"]')
    expect(row).to_be_visible()
    expect(row.locator(".mark-suggestion")).to_have_text("suggestion")
    expect(row.locator(".mark-needs-you")).to_have_count(0)
    shot(page, "suggestion-01-list")

    row.locator(f'a[href$="#/s/{hid}"]').click()
    expect(page).to_have_url(f"{BASE}/#/s/{hid}")
    session = page.locator("main#session")
    expect(session).to_have_attribute("data-status", "done")
    section = page.locator("section#suggestion")
    expect(section).to_be_visible()
    expect(section).to_contain_text("the context window crossed its threshold")
    expect(section).to_contain_text("(context-threshold)")
    expect(section).to_contain_text("claude-code, codex")
    use = section.locator("button#use-suggestion")
    expect(use).to_have_text(re.compile(r"^\s*Hand off as suggested…\s*$"))
    expect(use).to_have_attribute("data-action", "open_turn")
    rec = assert_actions(page, api, hid, owner_token, "turn 1 done with a suggestion (owner)")
    assert "open_turn" in rec["actions"]
    shot(page, "suggestion-02-session")

    use.click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    runtime = dialog.locator("#target-runtime")
    expect(runtime).to_have_value(suggested)
    expect(dialog.locator("input#purpose")).to_have_value("the context window crossed its threshold")
    expect(dialog.locator("textarea#objective")).to_have_value("")  # turn 1 had no package to take it from
    dialog.locator("textarea#objective").fill("Finish the parser")
    shot(page, "suggestion-03-dialog")
    dialog.locator("button#submit-handoff").click()
    message = page.locator("#message")
    expect(message).to_have_text(re.compile(rf"^opened turn 2 on {suggested}, package v1 \([0-9a-f]{{12}}…\)$"))
    expect(dialog).to_be_hidden()
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["runtime"], rec["package_version"], rec.get("suggestion")) == (2, suggested, 1, None), rec
    assert message.text_content() == f"opened turn 2 on {suggested}, package v1 ({rec['package_hash'][:12]}…)"
    expect(session).to_have_attribute("data-status", "running")
    expect(section).to_have_count(0)
    assert_actions(page, api, hid, owner_token, "turn 2 running on the suggested runtime (owner)")

    # --- turn 2 crosses the threshold too: the suggestion now names only codex ---------------
    api.call("POST", package_path(hid, "/accept"), machine_token, {"package_hash": rec["package_hash"]})
    reported = api.call("POST", f"/v1/handoffs/{hid}/report", machine_token, {
        "turn": 2, "status": "done", "summary": "Parser half done",
        "usage": {"context_used": 120_000, "context_window": 200_000}})
    suggestion = reported["handoff"].get("suggestion")
    assert suggestion and suggestion["turn"] == 2 and suggestion["runtimes"] == ["codex"], reported["handoff"]
    expect(section).to_be_visible(timeout=TWO_S)
    expect(section).to_contain_text("Could hand off to: codex.")
    rec = assert_actions(page, api, hid, owner_token, "turn 2 done with a suggestion (owner)")
    section.locator("button#use-suggestion").click()
    expect(dialog).to_be_visible()
    expect(runtime).to_have_value("codex")  # not the first of the policy's runtimes
    expect(dialog.locator("input#purpose")).to_have_value("the context window crossed its threshold")
    expect(dialog.locator("textarea#objective")).to_have_value("Finish the parser")  # from the latest package
    dialog.locator("button#submit-handoff").click()
    expect(message).to_have_text(re.compile(r"^opened turn 3 on codex, package v2 \([0-9a-f]{12}…\)$"))
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["runtime"], rec["package_version"], rec.get("suggestion")) == (3, "codex", 2, None), rec
    assert message.text_content() == f"opened turn 3 on codex, package v2 ({rec['package_hash'][:12]}…)"
    expect(section).to_have_count(0)
    assert_actions(page, api, hid, owner_token, "turn 3 running on codex (owner)")

    # Back on the list: the suggestion is gone with the turn that had it.
    page.goto(f"{BASE}/#/")
    expect(row).to_have_attribute("data-version", str(rec["version"]))
    expect(row.locator(".mark-suggestion")).to_have_count(0)
    owner.assert_clean()


def test_accepting_from_the_session_page_names_the_hash_first(pages, api, cli):
    """The session page does not show the document, so its Accept asks first and names the
    whole hash it accepts; the API then holds that package accepted."""
    owner_token = cli.owner_token(unique("console-accept"))
    hid, machine_token = api_session_ready_to_hand_off(api, owner_token, compiled=True, blocker=False)
    latest = api.get(f"/v1/handoffs/{hid}/package", owner_token)
    w = pages("machine")
    page = w.page
    sign_in(w, machine_token, expect_hash=f"#/s/{hid}")
    page.locator('main#session button[data-action="accept"]').click()
    confirm = page.locator("dialog#confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text(latest["package_hash"])
    confirm.locator("button#confirm-yes").click()
    expect(page.locator("#message")).to_have_text(re.compile(r"^package accepted \(v1, [0-9a-f]{8}…\)$"))
    accepted = api.get(f"/v1/handoffs/{hid}/package", owner_token)
    assert (accepted["state"], accepted["package_hash"]) == ("accepted", latest["package_hash"]), accepted
    w.assert_clean()
