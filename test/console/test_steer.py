"""Steering a running turn from the console: while a turn runs the composer's main
button is Steer (Enter steers), with Stop and "Stop and send" beside it; each steer shows under
the running turn's prompt with its state (sent, read after the current step; delivered; or not
delivered with why, as the turn's timeline says), and an undelivered one offers "Send as next
turn"; "Stop and send" cancels the turn and opens the next with the words typed, without typing
them again. At 390×844 the composer keeps its buttons in view (a screenshot is kept)."""

from playwright.sync_api import expect

from helpers import assert_actions, composer_buttons, open_session, shot, unique

TWO_S = 2000


def running(api, owner_token: str, prompt: str) -> tuple[str, str]:
    answer = api.call("POST", "/v1/handoffs", owner_token,
                      {"session": unique("steer"), "machine": "vm-1", "size": "large", "prompt": prompt})
    return answer["handoff"]["id"], answer["machine_token"]


def test_enter_steers_the_running_turn_and_each_steer_shows_under_its_prompt(pages, api, cli):
    owner_token = cli.owner_token(unique("console-steer"))
    hid, machine = running(api, owner_token, "Refactor the parser")
    w = open_session(pages, owner_token, hid)
    page = w.page
    other = open_session(pages, owner_token, hid, name="other-device")
    rec = assert_actions(page, api, hid, owner_token, "turn 1 running")
    assert "steer" in rec["actions"] and "open_turn" not in rec["actions"]
    assert composer_buttons(page) == ["stop", "stop-and-send", "steer"]
    expect(page.locator("form#composer button#steer")).to_have_class("primary")
    expect(page.locator("#composer-hint")).to_contain_text("Enter steers it")

    box = page.locator("textarea#prompt")
    box.click()
    page.keyboard.type("Keep the old API")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("and add tests")
    page.keyboard.press("Enter")
    words = "Keep the old API\nand add tests"
    turn1 = page.locator('ol#lineage > li.turn[data-turn="1"]')
    steer = turn1.locator(".bubble.steer")
    expect(steer).to_have_count(1)
    expect(steer.locator(".prompt-text")).to_have_text(words)
    expect(steer.locator(".steer-state")).to_have_text("sent")
    expect(box).to_have_value("")
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["status"], [s["prompt"] for s in rec["steers"]]) == (1, "running", [words]), rec
    # The other device sees the steer over the watch; the turn keeps running.
    expect(other.page.locator('ol#lineage > li.turn[data-turn="1"] .bubble.steer .prompt-text')).to_have_text(words, timeout=TWO_S)
    # Under the prompt, above the outcome.
    order = page.evaluate("""() => [...document.querySelectorAll('#lineage > li.turn[data-turn="1"] > *')].map(e => e.className)""")
    assert order.index("bubble prompt steer") == order.index("bubble prompt") + 1, order

    # An empty steer sends nothing.
    version = api.record(hid, owner_token)["version"]
    box.click()
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_contain_text("write the words first")
    assert api.record(hid, owner_token)["version"] == version

    # The turn ends: Send comes back, the steer stays with its turn.
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Parser refactored"})
    expect(page.locator("main#session")).to_have_attribute("data-status", "done", timeout=TWO_S)
    expect(page.locator("form#composer button#send")).to_be_visible()
    assert composer_buttons(page) == ["hand-off-next", "send"]
    expect(turn1.locator(".bubble.steer .prompt-text")).to_have_text(words)
    assert_actions(page, api, hid, owner_token, "turn 1 done")
    w.assert_clean()
    other.assert_clean()


def steer_event(api, hid: str, machine: str, turn: int, seq: int, steer_id: str, why: str | None = None) -> dict:
    event = {"seq": seq, "kind": "steer", "id": steer_id, "state": "undelivered" if why else "delivered"}
    if why:
        event["why"] = why
    return api.call("POST", f"/v1/handoffs/{hid}/events", machine, {"turn": turn, "events": [event]})


def test_each_steer_shows_delivered_or_not_delivered_with_why_and_an_undelivered_one_is_sent_as_the_next_turn(pages, api, cli):
    owner_token = cli.owner_token(unique("console-steer-states"))
    hid, machine = running(api, owner_token, "Refactor the parser")
    first = api.call("POST", f"/v1/handoffs/{hid}/steer", owner_token, {"turn": 1, "prompt": "Keep the old API"})["handoff"]["steers"][0]["id"]
    w = open_session(pages, owner_token, hid)
    page = w.page
    turn1 = page.locator('ol#lineage > li.turn[data-turn="1"]')
    bubble = turn1.locator(f'.bubble.steer[data-steer="{first}"]')
    expect(bubble.locator(".steer-state")).to_have_text("sent")
    expect(bubble.locator(".steer-note")).to_have_text("read after the current step")
    # The machine says it was delivered: the page shows it live (an event moves no version).
    version = api.record(hid, owner_token)["version"]
    steer_event(api, hid, machine, 1, 1, first)
    expect(bubble.locator(".steer-state")).to_have_text("delivered", timeout=TWO_S)
    expect(bubble.locator(".steer-note")).to_have_count(0)
    assert api.record(hid, owner_token)["version"] == version
    # A second steer the harness never took: not delivered, saying why, with its offer.
    page.locator("textarea#prompt").fill("Use SQLite instead")
    page.keyboard.press("Enter")
    second = turn1.locator(".bubble.steer").nth(1)
    expect(second.locator(".steer-state")).to_have_text("sent")
    second_id = second.get_attribute("data-steer")
    why = "the turn's harness had ended (exit 0)"
    steer_event(api, hid, machine, 1, 2, second_id, why)
    expect(second.locator(".steer-state")).to_have_text("not delivered", timeout=TWO_S)
    expect(second.locator(".steer-why")).to_have_text(why)
    expect(bubble.locator(".steer-resend")).to_have_count(0)
    resend = second.locator("button.steer-resend")
    expect(resend).to_have_text("Send as next turn")
    # While the turn still goes, the offer puts the words in the composer.
    resend.click()
    expect(page.locator("textarea#prompt")).to_have_value("Use SQLite instead")
    page.locator("textarea#prompt").fill("")
    # The turn ends; a reload reads the ended turn's timeline for its steers' states.
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "done", "summary": "Parser refactored"})
    page.reload()
    expect(page.locator("main#session")).to_have_attribute("data-status", "done")
    expect(bubble.locator(".steer-state")).to_have_text("delivered")
    expect(second.locator(".steer-state")).to_have_text("not delivered")
    second.locator("button.steer-resend").click()
    turn2 = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(turn2.locator(".bubble.prompt .prompt-text").first).to_have_text("Use SQLite instead")
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["status"], rec["prompt"]) == (2, "running", "Use SQLite instead"), rec
    w.assert_clean()


def test_stop_and_send_cancels_the_turn_and_opens_the_next_with_the_words_typed(pages, api, cli):
    owner_token = cli.owner_token(unique("console-stop-send"))
    hid, _ = running(api, owner_token, "Refactor the parser")
    w = open_session(pages, owner_token, hid)
    page = w.page
    box = page.locator("textarea#prompt")
    box.fill("Start over: rewrite the lexer first")
    page.locator("form#composer button#stop-and-send").click()
    turn2 = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(turn2.locator(".prompt-text")).to_have_text("Start over: rewrite the lexer first")
    expect(page.locator('ol#lineage > li.turn[data-turn="1"]')).to_have_attribute("data-status", "cancelled")
    expect(box).to_have_value("")
    rec = api.record(hid, owner_token)
    assert (rec["turn"], rec["status"], rec["prompt"]) == (2, "running", "Start over: rewrite the lexer first"), rec
    lineage = api.get(f"/v1/handoffs/{hid}/turns", owner_token)["turns"]
    assert [t["status"] for t in lineage] == ["cancelled", "running"], lineage
    # With nothing typed, it stops nothing.
    page.locator("form#composer button#stop-and-send").click()
    expect(page.locator("#message")).to_contain_text("write the words first")
    assert api.record(hid, owner_token)["status"] == "running"
    w.assert_clean()


def test_a_phone_shows_the_steer_and_the_composers_buttons_in_view(pages, api, cli):
    owner_token = cli.owner_token(unique("console-steer-phone"))
    hid, machine = running(api, owner_token, "Add a CSV export to the invoices page")
    api.call("POST", f"/v1/handoffs/{hid}/report", machine, {"turn": 1, "status": "running", "summary": "Reading src/invoices/export.rs"})
    steers = [
        "Use semicolons as the separator: the accountants open it in Excel.",
        "Name the file invoices-<month>.csv.",
        "And a header row.",
    ]
    ids = [api.call("POST", f"/v1/handoffs/{hid}/steer", owner_token, {"turn": 1, "prompt": words})["handoff"]["steers"][-1]["id"]
           for words in steers]
    steer_event(api, hid, machine, 1, 1, ids[0])
    steer_event(api, hid, machine, 1, 2, ids[1], "the turn's harness had ended (exit 0)")
    w = open_session(pages, owner_token, hid, name="phone", viewport={"width": 390, "height": 844},
                     device_scale_factor=2, is_mobile=True, has_touch=True)
    page = w.page
    expect(page.locator(".bubble.steer")).to_have_count(3)
    states = page.locator(".bubble.steer .steer-state")
    expect(states).to_have_text(["delivered", "not delivered", "sent"])
    resend = page.locator(".bubble.steer button.steer-resend").bounding_box()
    assert resend and resend["x"] + resend["width"] <= 390, f"Send as next turn in the width: {resend}"
    page.locator("textarea#prompt").fill("And quote every field.")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.evaluate("() => document.querySelector('#lineage > li.turn:last-child').scrollIntoView({block: 'start'})")
    shot(page, "steer-phone", full_page=False)
    for button in ["stop", "stop-and-send", "steer"]:
        box = page.locator(f"form#composer button#{button}").bounding_box()
        assert box and box["y"] + box["height"] <= 844 and box["x"] + box["width"] <= 390, f"{button} in view: {box}"
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"
    w.assert_clean()
