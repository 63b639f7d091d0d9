"""The issue's "Done when" session from the console alone, while `handoff serve` runs on the
machine (cli/tests/served_console.rs sets that up and runs this; scripts/served-demo runs
both). The owner answers turn 1's permission question, sends turn 2, hands turn 3 to Codex and
stops turn 4; each step is checked in the page and in the record, and shot on a phone
(390x844) and a desktop (1280x800) into SERVED_SHOTS/served-<step>-<phone|desktop>.png.

Environment: CONSOLE_BASE_URL, SERVED_OWNER (the owner's token), SERVED_ID, SERVED_SHOTS,
CONSOLE_CHROMIUM (default /usr/bin/chromium)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import time
import urllib.request

from playwright.sync_api import expect, sync_playwright

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from helpers import CHROMIUM_ARGS  # noqa: E402

BASE = os.environ["CONSOLE_BASE_URL"].rstrip("/")
OWNER = os.environ["SERVED_OWNER"]
HID = os.environ["SERVED_ID"]
SHOTS = pathlib.Path(os.environ["SERVED_SHOTS"])
CHROMIUM = os.environ.get("CONSOLE_CHROMIUM", "/usr/bin/chromium")
# A harness run against the scripted model takes seconds; the machine's steps get this long.
MACHINE_MS = 60_000

expect.set_options(timeout=15_000)


def record() -> dict:
    req = urllib.request.Request(f"{BASE}/v1/handoffs/{HID}", headers={"Authorization": f"Bearer {OWNER}"})
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.loads(answer.read())["handoff"]


def say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} {line}", flush=True)


def open_session(browser, **options):
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(f"{BASE}/#token={OWNER}")
    expect(page).not_to_have_url(re.compile(r"token="))
    page.goto(f"{BASE}/#/s/{HID}")
    expect(page.locator("main#session")).to_have_attribute("data-id", HID)
    expect(page.locator("#live")).to_have_text("live")
    return page


def turn(page, n: int):
    return page.locator(f'ol#lineage > li.turn[data-turn="{n}"]')


def main() -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        desktop = open_session(browser, viewport={"width": 1280, "height": 800})
        phone = open_session(browser, viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True)

        def both(step: str, n: int, ready) -> None:
            """Waits until `ready(page)` holds on both pages, then shoots each (the phone's
            screen scrolled to turn `n`'s end)."""
            for name, page in (("desktop", desktop), ("phone", phone)):
                ready(page)
                if name == "phone":
                    turn(page, n).evaluate("e => e.scrollIntoView({block: 'end'})")
                path = SHOTS / f"served-{step}-{name}.png"
                page.screenshot(path=str(path), full_page=name == "desktop")
                say(f"screenshot {path}")

        # Turn 1, opened with its prompt at create: serve runs it and Claude Code asks.
        def asks_1(page):
            expect(turn(page, 1).locator("section#question pre#question-input")).to_contain_text("touch proof.txt", timeout=MACHINE_MS)
        both("1-turn1-asks", 1, asks_1)
        assert record()["question"]["kind"] == "permission"
        desktop.locator("section#question button[data-option='allow']").click()
        say("answered turn 1's question: allow")

        def done_1(page):
            expect(turn(page, 1).locator("#summary, .summary").first).to_have_text("Made proof.txt.", timeout=MACHINE_MS)
        both("2-turn1-done", 1, done_1)
        r = record()
        assert (r["turn"], r["status"], r["summary"]) == (1, "done", "Made proof.txt."), r

        # Turn 2: the owner's words, sent from the phone's composer.
        phone.locator("textarea#prompt").fill("Now make the parser read empty input.")
        phone.locator("form#composer button#send").click()
        say("sent turn 2 from the phone")

        def done_2(page):
            expect(turn(page, 2).locator(".prompt-text")).to_have_text("Now make the parser read empty input.")
            expect(turn(page, 2).locator("#summary, .summary").first).to_have_text("Turn 2: the parser reads empty input now.", timeout=MACHINE_MS)
        both("3-turn2-done", 2, done_2)
        r = record()
        assert (r["turn"], r["status"]) == (2, "done"), r
        say(f"turn 2's record names runtime {r.get('runtime')!r}")

        # Turn 3: handed to Codex through the hand-off dialog.
        desktop.locator("textarea#prompt").fill("Look for the edge cases the tests miss.")
        desktop.locator("form#composer button#hand-off-next").click()
        dialog = desktop.locator("dialog#handoff-dialog")
        expect(dialog).to_be_visible()
        target = dialog.locator("#target-runtime")
        if target.evaluate("e => e.tagName") == "SELECT":
            target.select_option("codex")
        else:
            target.fill("codex")
        dialog.locator("input#purpose").fill("a second pair of eyes")
        dialog.locator("textarea#objective").fill("Review the parser for edge cases")
        desktop.screenshot(path=str(SHOTS / "served-4-handoff-dialog-desktop.png"))
        say("screenshot served-4-handoff-dialog-desktop.png")
        dialog.locator("button#submit-handoff").click()
        expect(desktop.locator("#message")).to_contain_text("opened turn 3 on codex")
        say("handed turn 3 to codex")

        def done_3(page):
            expect(turn(page, 3).locator(".turn-head")).to_contain_text("codex")
            expect(turn(page, 3).locator("#summary, .summary").first).to_have_text("Codex reviewed the parser: two edge cases left.", timeout=MACHINE_MS)
        both("5-turn3-codex-done", 3, done_3)
        r = record()
        assert (r["turn"], r["status"], r.get("runtime")) == (3, "done", "codex"), r

        # Turn 4: sent, Codex asks to run a command, and the owner stops the turn instead.
        desktop.locator("textarea#prompt").fill("Clean the build folder.")
        desktop.locator("form#composer button#send").click()

        def asks_4(page):
            expect(turn(page, 4).locator("section#question pre#question-input")).to_contain_text("rm -rf build", timeout=MACHINE_MS)
        both("6-turn4-asks", 4, asks_4)
        phone.locator("form#composer button#stop").click()
        expect(phone.locator("dialog#confirm")).to_be_visible()
        phone.locator("button#confirm-yes").click()
        say("stopped turn 4 from the phone")

        def cancelled_4(page):
            expect(page.locator("main#session")).to_have_attribute("data-status", "cancelled", timeout=MACHINE_MS)
        both("7-turn4-cancelled", 4, cancelled_4)
        r = record()
        assert (r["turn"], r["status"]) == (4, "cancelled"), r
        # Nothing the machine does after the cancel moves the turn.
        time.sleep(3)
        after = record()
        assert (after["status"], after["version"]) == ("cancelled", r["version"]), after
        for page in (desktop, phone):
            page.reload()
            expect(page.locator("#live")).to_have_text("live")
        both("8-after-reload", 4, cancelled_4)
        browser.close()
    say("the session went as the owner asked")


if __name__ == "__main__":
    main()
