"""The session page as a conversation (issue 48, item 3): each turn shows the person's prompt,
then what came back; a composer at the foot sends the next turn's prompt. Send is offered
exactly when `actions` holds `open_turn`, Stop exactly when it holds `cancel`, a question's
buttons exactly when it holds `answer`; Enter sends and Shift+Enter starts a new line; a 409
`handoff.turn_conflict` shows the other device's prompt and keeps the text typed; the composer
is absent on a closed hand-off. The page stays live over the watch. The CSP is enforced, and
no page sees a console error, a page error or a dialog the test does not expect."""

import os
import re
import shutil

from playwright.sync_api import expect

from helpers import RUN_DIR, assert_actions, composer_buttons, log, open_session, shot, sign_in, unique

TWO_S = 2000


def test_sending_a_prompt_opens_the_next_turn_and_it_comes_back_live(pages, api, cli):
    owner_token = cli.owner_token(unique("console-chat"))
    record, machine = api.create(owner_token, unique("chat"))
    hid = record["id"]
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Read the repo"})

    w = open_session(pages, owner_token, hid)
    page = w.page
    other = open_session(pages, owner_token, hid, name="other-device")
    composer = page.locator("form#composer")
    expect(composer).to_be_visible()
    rec = assert_actions(page, api, hid, owner_token, "turn 1 done")
    assert "open_turn" in rec["actions"] and "cancel" not in rec["actions"]
    assert composer_buttons(page) == ["hand-off-next", "send"]

    # Shift+Enter starts a new line; Enter sends.
    box = page.locator("textarea#prompt")
    box.click()
    page.keyboard.type("Add the rollback migration")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("and test it on staging")
    assert box.input_value() == "Add the rollback migration\nand test it on staging"
    page.keyboard.press("Enter")
    words = "Add the rollback migration\nand test it on staging"

    turn2 = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(turn2.locator(".prompt-text")).to_have_text(words)
    expect(box).to_have_value("")
    expect(page.locator("main#session")).to_have_attribute("data-status", "running")
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["prompt"]) == (2, words), rec
    lineage = api.get(f"/v1/handoffs/{hid}/turns", owner_token)["turns"]
    assert [t["prompt"] for t in lineage] == [None, words], lineage
    # Running: Stop, Stop and send, and Steer in place of Send.
    rec = assert_actions(page, api, hid, owner_token, "turn 2 running")
    assert composer_buttons(page) == ["stop", "stop-and-send", "steer"]
    expect(page.locator("#composer-hint")).to_contain_text("Turn 2 is running")

    # The other device sees the prompt over the watch, with no reload.
    expect(other.page.locator('ol#lineage > li.turn[data-turn="2"] .prompt-text')).to_have_text(words, timeout=TWO_S)

    # What came back: the machine's reports appear under the prompt, live.
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 2, "status": "running", "summary": "Writing 0002_rollback.sql"})
    expect(turn2.locator("#summary")).to_have_text("Writing 0002_rollback.sql", timeout=TWO_S)
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {
        "turn": 2, "status": "needs-you", "summary": "Bash: psql",
        "question": {"kind": "permission", "text": "Bash: psql against staging",
                     "input": "psql \"$STAGING_URL\" -f migrations/0002_rollback.sql",
                     "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}})
    question = turn2.locator("section#question")
    expect(question.locator("pre#question-input")).to_have_text("psql \"$STAGING_URL\" -f migrations/0002_rollback.sql", timeout=TWO_S)
    rec = assert_actions(page, api, hid, owner_token, "turn 2 asks")
    assert "answer" in rec["actions"]
    expect(question.locator('button[data-action="answer"]')).to_have_count(2)
    question.locator('button[data-option="allow"]').click()
    expect(question.locator(".question-answer")).to_contain_text("Answered Allow")
    rec = assert_actions(page, api, hid, owner_token, "turn 2 answered")
    assert "answer" not in rec["actions"]
    expect(question.locator('button[data-action="answer"]')).to_have_count(0)

    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 2, "status": "done", "summary": "Rollback written and tested"})
    expect(turn2.locator("#summary")).to_have_text("Rollback written and tested", timeout=TWO_S)
    # The question stays in its turn, answered, once the record has withdrawn it.
    expect(turn2.locator(".past-question")).to_contain_text("Answered Allow")
    expect(turn2.locator(".past-question pre.question-input")).to_have_text("psql \"$STAGING_URL\" -f migrations/0002_rollback.sql")
    rec = assert_actions(page, api, hid, owner_token, "turn 2 done")
    assert composer_buttons(page) == ["hand-off-next", "send"]

    # Top to bottom: turn 1, then turn 2's prompt, then its outcome, then the composer.
    order = page.evaluate("""() => [...document.querySelectorAll('#lineage > li.turn, #lineage .prompt-text, #lineage #summary, form#composer')]
        .map(e => e.id || e.className.split(' ')[0] + (e.dataset.turn ? ':' + e.dataset.turn : ''))""")
    assert order == ["turn:1", "turn:2", "prompt-text", "summary", "composer"], order

    # An empty prompt sends nothing.
    version = api.record(hid, owner_token)["version"]
    box.click()
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_contain_text("write the prompt first")
    assert api.record(hid, owner_token)["version"] == version
    w.assert_clean()
    other.assert_clean()


def test_a_turn_conflict_shows_the_other_devices_prompt_and_keeps_the_text(pages, api, cli):
    owner_token = cli.owner_token(unique("console-conflict"))
    record, machine = api.create(owner_token, unique("conflict"))
    hid = record["id"]
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Ready"})
    w = open_session(pages, owner_token, hid)
    page = w.page

    # The other device speaks first: its open lands while this page's own is on its way, so
    # this page's `after` is the turn it saw, now behind.
    theirs = "From the phone: ship it\nwithout the rollback"
    spoke = []

    def other_device_first(route):
        if route.request.method == "POST" and not spoke:
            spoke.append(api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": 1, "prompt": theirs}))
        route.continue_()

    page.route(re.compile(r".*/v1/handoffs/ho_[0-9a-f]+/turns$"), other_device_first)
    mine = "From the laptop: add the rollback first"
    page.locator("textarea#prompt").fill(mine)
    page.locator("form#composer button#send").click()

    conflict = page.locator("#composer-conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("Another device spoke first: turn 2 opened")
    expect(conflict.locator(".their-prompt")).to_have_text(theirs)
    expect(page.locator("#error")).to_contain_text("handoff.turn_conflict")
    # The text typed is kept; the page moved to the turn the other device opened.
    expect(page.locator("textarea#prompt")).to_have_value(mine)
    expect(page.locator('ol#lineage > li.turn[data-turn="2"] .prompt-text')).to_have_text(theirs)
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["prompt"]) == (2, theirs), "the other device's turn stands, and only it"
    assert_actions(page, api, hid, owner_token, "after the conflict")
    shot(page, "conversation-conflict", full_page=False)
    page.locator("button#conflict-dismiss").click()
    expect(conflict).to_be_hidden()
    expect(page.locator("textarea#prompt")).to_be_focused()

    # The one console error expected: Chromium logs the 409.
    expected = [e for e in w.console_errors if "409" in e]
    assert expected, w.console_errors
    w.console_errors = [e for e in w.console_errors if "409" not in e]
    page.unroute_all()

    # Once turn 2 ends, the kept text is sent as turn 3.
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 2, "status": "done", "summary": "Shipped"})
    send = page.locator("form#composer button#send")
    expect(send).to_be_visible(timeout=TWO_S)
    send.click()
    expect(page.locator('ol#lineage > li.turn[data-turn="3"] .prompt-text')).to_have_text(mine)
    expect(conflict).to_be_hidden()
    w.assert_clean()


def test_stop_ends_the_running_turn_and_send_comes_back(pages, api, cli):
    owner_token = cli.owner_token(unique("console-stop"))
    answer = api.call("POST", "/v1/handoffs", owner_token,
                      {"session": unique("stop"), "machine": "vm-1", "size": "large", "prompt": "Refactor the parser"})
    hid = answer["handoff"]["id"]
    w = open_session(pages, owner_token, hid)
    page = w.page
    expect(page.locator('ol#lineage > li.turn[data-turn="1"] .prompt-text')).to_have_text("Refactor the parser")
    rec = assert_actions(page, api, hid, owner_token, "turn 1 running")
    assert "cancel" in rec["actions"] and "open_turn" not in rec["actions"]
    assert composer_buttons(page) == ["stop", "stop-and-send", "steer"]

    # Text can be typed while the turn runs; it stays until Steer or Stop and send takes it.
    box = page.locator("textarea#prompt")
    box.fill("Then the lexer")
    assert api.record(hid, owner_token)["turn"] == 1
    expect(box).to_have_value("Then the lexer")

    page.locator("form#composer button#stop").click()
    confirm = page.locator("dialog#confirm")
    expect(confirm).to_be_visible()
    expect(page.locator("#confirm-title")).to_have_text("Stop turn 1?")
    page.locator("button#confirm-yes").click()
    expect(page.locator("main#session")).to_have_attribute("data-status", "cancelled")
    rec = assert_actions(page, api, hid, owner_token, "turn 1 cancelled")
    assert rec["status"] == "cancelled" and "cancel" not in rec["actions"]
    assert composer_buttons(page) == ["hand-off-next", "send"]
    expect(box).to_have_value("Then the lexer")
    w.assert_clean()


def test_the_composer_is_absent_on_a_closed_hand_off_and_for_the_machine(pages, api, cli):
    owner_token = cli.owner_token(unique("console-closed"))
    record, machine = api.create(owner_token, unique("closed"))
    hid = record["id"]
    w = open_session(pages, owner_token, hid)
    page = w.page
    expect(page.locator("form#composer")).to_have_count(1)

    m = pages("machine")
    sign_in(m, machine, expect_hash=f"#/s/{hid}")
    expect(m.page.locator("#live")).to_have_text("live")
    expect(m.page.locator("ol#lineage > li.turn")).to_have_count(1)
    expect(m.page.locator("form#composer")).to_have_count(0)

    # Closed while the page is open: the composer goes, live.
    api.call("POST", f"/v1/handoffs/{hid}/close", owner_token, {})
    expect(page.locator("main#session")).to_have_attribute("data-state", "closed", timeout=TWO_S)
    expect(page.locator("form#composer")).to_have_count(0)
    expect(page.locator("textarea#prompt")).to_have_count(0)
    assert_actions(page, api, hid, owner_token, "closed")

    # And on a fresh load of the closed hand-off.
    page.reload()
    expect(page.locator("main#session")).to_have_attribute("data-state", "closed")
    expect(page.locator("ol#lineage > li.turn")).to_have_count(1)
    expect(page.locator("form#composer")).to_have_count(0)
    w.assert_clean()
    m.assert_clean()


def test_the_hand_off_dialog_takes_the_prompt(pages, api, cli):
    owner_token = cli.owner_token(unique("console-dialog"))
    record, machine = api.create(owner_token, unique("dialog"))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token, {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Parser", "goal": "Parse the config", "constraints": [], "acceptance_criteria": []})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Half parsed"})
    w = open_session(pages, owner_token, hid)
    page = w.page

    # What the composer holds goes into the dialog's prompt.
    page.locator("textarea#prompt").fill("Finish the parser, then the docs")
    page.locator("form#composer button#hand-off-next").click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("textarea#handoff-prompt")).to_have_value("Finish the parser, then the docs")
    dialog.locator("#target-runtime").select_option("codex")
    dialog.locator("input#purpose").fill("a fresh context")
    dialog.locator("textarea#objective").fill("Finish the parser")
    # The dry run's briefing carries the prompt after the briefing, as the next runtime gets it.
    version = api.record(hid, owner_token)["version"]
    dialog.locator("button#dry-run").click()
    preview = dialog.locator("pre#dry-run-preview")
    expect(preview).to_contain_text("Finish the parser, then the docs")
    assert api.record(hid, owner_token)["version"] == version, "a dry run writes nothing"
    dialog.locator("button#submit-handoff").click()
    expect(page.locator("#message")).to_contain_text("opened turn 2 on codex")
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["runtime"], rec["prompt"]) == (2, "codex", "Finish the parser, then the docs"), rec
    turn2 = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(turn2.locator(".prompt-text")).to_have_text("Finish the parser, then the docs")
    expect(turn2.locator(".turn-head")).to_contain_text("handed to codex with package v1")
    # Sent once: the composer no longer holds it.
    expect(page.locator("textarea#prompt")).to_have_value("")
    w.assert_clean()


def create_with_a_prompt(api, owner_token: str) -> tuple[str, str]:
    """The session the screenshots show, its turn 1 opened with a prompt: (id, machine token)."""
    answer = api.call("POST", "/v1/handoffs", owner_token, {
        "session": "chat-billing", "machine": "vm-7", "size": "large",
        "prompt": "The invoices vanish when the billing service restarts. Find out why and fix it."})
    return answer["handoff"]["id"], answer["machine_token"]


def test_screenshots_of_a_three_turn_conversation_on_a_phone_and_a_desktop(pages, api, cli):
    owner_token = cli.owner_token(unique("console-convo"))
    hid, machine = create_with_a_prompt(api, owner_token)
    views = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 900}}
    opened = {name: open_session(pages, owner_token, hid, name=name, viewport=size,
                                 **({"device_scale_factor": 2, "is_mobile": True, "has_touch": True} if name == "phone" else {}))
              for name, size in views.items()}
    report = lambda body: api.call("POST", f"/v1/handoffs/{hid}/report", machine, body)  # noqa: E731
    turns = lambda after, prompt: api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": after, "prompt": prompt})  # noqa: E731

    report({"turn": 1, "status": "running", "summary": "Reading src/billing/store.rs"})
    report({"turn": 1, "status": "done", "summary": "Invoices were kept in memory only; they now go to Postgres in one transaction."})
    turns(1, "Good. Add a migration for the invoices table,\nand keep the old rows.")
    report({"turn": 2, "status": "needs-you", "summary": "Which database for the tests?",
            "question": {"kind": "choice", "text": "Run the migration tests on Postgres 16 or on SQLite?",
                         "options": [{"id": "pg", "label": "Postgres 16"}, {"id": "sqlite", "label": "SQLite"}]}})
    asked = api.record(hid, owner_token)["question"]
    api.call("POST", f"/v1/handoffs/{hid}/answer", owner_token, {"question": asked["id"], "option": "pg", "note": "staging runs 16"})
    report({"turn": 2, "status": "done", "summary": "Migration 0002 written; 14 tests pass on Postgres 16."})
    turns(2, "Now run it against staging.")
    report({"turn": 3, "status": "needs-you", "summary": "Bash: psql against staging",
            "question": {"kind": "permission", "text": "Bash: psql against staging",
                         "input": "psql \"$STAGING_DATABASE_URL\" \\\n  --single-transaction \\\n  -f migrations/0002_invoices.sql",
                         "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}})

    out = os.environ.get("CONSOLE_CONVERSATION_SCREENS")
    for name, w in opened.items():
        page = w.page
        expect(page.locator("ol#lineage > li.turn")).to_have_count(3)
        expect(page.locator('li.turn[data-turn="3"] section#question pre#question-input')).to_be_visible()
        expect(page.locator('li.turn[data-turn="1"] .turn-summary')).to_contain_text("Postgres in one transaction")
        expect(page.locator('li.turn[data-turn="2"] .past-question')).to_contain_text("Answered Postgres 16")
        page.locator("textarea#prompt").fill("If it fails, roll back and tell me.")
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        # The composer stays in view over the conversation, wherever the reader is in it.
        composer_top = lambda: page.locator("form#composer").bounding_box()["y"]  # noqa: E731
        page.evaluate("() => window.scrollTo(0, 0)")
        shots = [shot(page, f"conversation-{name}-top", full_page=False)]
        assert composer_top() < views[name]["height"], f"{name}: the composer is in view at the top"
        page.evaluate("() => document.querySelector('#lineage > li.turn:last-child').scrollIntoView({block: 'start'})")
        shots.append(shot(page, f"conversation-{name}-latest", full_page=False))
        buttons = page.locator('li.turn[data-turn="3"] section#question button[data-action="answer"]').first.bounding_box()
        assert buttons["y"] + buttons["height"] <= composer_top() or page.evaluate("() => window.scrollY") > 0, \
            f"{name}: the question's buttons can be scrolled clear of the composer"
        shots.append(shot(page, f"conversation-{name}-full", full_page=True))
        if out:
            os.makedirs(out, exist_ok=True)
            for path in shots:
                shutil.copyfile(path, os.path.join(out, path.name))
        # No control leaves the viewport sideways.
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), f"{name}: the page scrolls sideways"
        log("browser", f"conversation screenshots of {name} in {RUN_DIR / 'screenshots'}")
        w.assert_clean()


def test_the_permission_mode_a_turn_runs_in_is_shown_beside_its_runtime(pages, api, cli):
    """The machine's running report names the turn's runtime and permission mode: the session's
    facts and the turn show both, live, the mode labelled as the machine's own report (the service
    cannot check it); the next turn has none until its report names one, and the turn before keeps
    its own."""
    owner_token = cli.owner_token(unique("console-mode"))
    record, machine = api.create(owner_token, unique("chat"))
    hid = record["id"]
    page = open_session(pages, owner_token, hid).page
    turn1 = page.locator('ol#lineage > li.turn[data-turn="1"]')
    expect(turn1).to_be_visible()
    expect(page.locator("#permission-mode")).to_have_count(0)
    expect(turn1.locator(".turn-mode")).to_have_count(0)

    api.call("POST", f"/v1/handoffs/{hid}/report", machine,
             {"turn": 1, "status": "running", "runtime": "claude-code", "permission_mode": "acceptEdits"})
    expect(page.locator("#permission-mode")).to_have_text("acceptEdits", timeout=TWO_S)
    expect(page.locator("#runtime")).to_have_text("claude-code")
    expect(turn1.locator(".turn-mode")).to_have_text("acceptEdits", timeout=TWO_S)
    expect(turn1.locator(".turn-head")).to_contain_text("on claude-code · permission mode acceptEdits, as the machine reports it")
    expect(page.locator("dd", has=page.locator("#permission-mode"))).to_contain_text("permission mode acceptEdits, as the machine reports it")

    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Edited"})
    api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": 1, "prompt": "Next"})
    turn2 = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(turn2).to_be_visible(timeout=TWO_S)
    expect(page.locator("#permission-mode")).to_have_count(0)
    expect(turn2.locator(".turn-mode")).to_have_count(0)
    expect(turn1.locator(".turn-mode")).to_have_text("acceptEdits")
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 2, "status": "running", "permission_mode": "plan"})
    expect(turn2.locator(".turn-mode")).to_have_text("plan", timeout=TWO_S)
    expect(page.locator("#permission-mode")).to_have_text("plan")
    expect(turn1.locator(".turn-mode")).to_have_text("acceptEdits")
    shot(page, "conversation-permission-mode")
