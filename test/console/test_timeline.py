"""The turn's timeline in the console: the running turn's commentary live over
the watch's `handoff.v2` frames (the model's words, each tool call as one line that opens to its
input and output, "working for … · N steps"), the same on a second page, the stalled line, an
ended turn's steps folded behind "N steps" and read when opened, a turn whose steps were
dropped, and the machine's sync mode. The machine's side is the API with the machine token, as
the machine posts its events (POST …/events)."""

import re

from playwright.sync_api import expect

import helpers
from helpers import shot, unique

# The console's test-only override of the 2-minute "no word from the machine" threshold
# (console/src/timeline.ts, STALL_MS_TEST_KEY).
STALL_KEY = "handoff.test.stall-ms"


class Machine:
    """One hand-off's machine side: reports and numbered event batches."""

    def __init__(self, api, owner_token: str):
        self.api = api
        self.owner = owner_token
        record, self.token = api.create(owner_token, unique("timeline"))
        self.hid = record["id"]
        self.seq = {}

    def report(self, body: dict) -> dict:
        return self.api.call("POST", f"/v1/handoffs/{self.hid}/report", self.token, body)

    def post(self, turn: int, *events: dict) -> dict:
        batch = []
        for e in events:
            self.seq[turn] = self.seq.get(turn, 0) + 1
            batch.append({"seq": self.seq[turn], **e})
        return self.api.call("POST", f"/v1/handoffs/{self.hid}/events", self.token, {"turn": turn, "events": batch})

    def tool(self, turn: int, tid: str, name: str, tool_input: str, output: str | None = None, state: str = "done"):
        started = {"kind": "tool", "id": tid, "name": name, "state": "started", "input": tool_input}
        if state == "started":
            return self.post(turn, started)
        ended = {"kind": "tool", "id": tid, "name": name, "state": state, "duration_ms": 1200}
        if output is not None:
            ended["output"] = output
        return self.post(turn, started, ended)

    def open_turn(self, after: int, prompt: str) -> None:
        self.api.call("POST", f"/v1/handoffs/{self.hid}/turns", self.owner, {"after": after, "prompt": prompt})


def open_session(pages, owner_token: str, hid: str, name: str, stall_ms: int | None = None, **options):
    def stall(page):
        if stall_ms is not None:
            page.add_init_script(f"localStorage.setItem({STALL_KEY!r}, {str(stall_ms)!r})")
    return helpers.open_session(pages, owner_token, hid, name, live=False, before=stall, **options)


def timeline(page, turn: int):
    return page.locator(f'ol#lineage > li.turn[data-turn="{turn}"] section.timeline')


def assert_commentary(page, n_steps: int) -> None:
    running = timeline(page, 1)
    expect(running).to_have_attribute("data-state", "running")
    expect(running.locator(".step")).to_have_count(n_steps)
    expect(running.locator(".timeline-status")).to_have_text(re.compile(rf"^working for \d+ (s|min) · {n_steps} steps$"))
    expect(running.locator(".step-message").first).to_contain_text("Looking at the parser first.")
    bash = running.locator('.step-tool[data-step="t:toolu_1"]')
    expect(bash.locator(".tool-line")).to_contain_text("Bash cargo test -p parser")
    expect(running.locator('.step-tool[data-step="t:toolu_2"] .tool-line')).to_contain_text("Write src/lib.rs")
    expect(running.locator(".step-note")).to_have_text("resumed session abc")


def test_the_running_turns_commentary_shows_live_on_every_page_and_folds_when_it_ends(pages, api, cli):
    owner_token = cli.owner_token(unique("console-timeline"))
    m = Machine(api, owner_token)
    m.report({"turn": 1, "status": "running", "sync_mode": "full"})
    w = open_session(pages, owner_token, m.hid, "owner")
    page = w.page
    expect(page.locator("#sync-mode")).to_have_text("full")
    expect(timeline(page, 1)).to_have_attribute("data-state", "running")

    # Events move no version: the page's version stays while the commentary grows.
    version = page.locator("main#session").get_attribute("data-version")
    m.post(1, {"kind": "message", "text": "Looking at the parser first.\n\nIt has **two** entry points."})
    expect(timeline(page, 1).locator(".step-message strong")).to_have_text("two")
    m.tool(1, "toolu_1", "Bash", "cargo test -p parser\n  --quiet", output="test result: ok. 12 passed")
    m.tool(1, "toolu_2", "Write", "src/lib.rs\npub fn parse() {}")
    m.post(1, {"kind": "note", "text": "resumed session abc"})
    assert_commentary(page, 4)
    assert page.locator("main#session").get_attribute("data-version") == version

    # A tool line opens to its whole input and its output.
    bash = timeline(page, 1).locator('.step-tool[data-step="t:toolu_1"]')
    bash.locator("summary").click()
    expect(bash.locator(".tool-input")).to_have_text("cargo test -p parser\n  --quiet")
    expect(bash.locator(".tool-output")).to_have_text("test result: ok. 12 passed")

    # A second page shows the same conversation, and both follow what comes next.
    other = open_session(pages, owner_token, m.hid, "second-page")
    assert_commentary(other.page, 4)
    m.tool(1, "toolu_3", "Read", "docs/api.md", state="started")
    for p in (page, other.page):
        line = timeline(p, 1).locator('.step-tool[data-step="t:toolu_3"]')
        expect(line.locator(".tool-state")).to_have_text("running")
        expect(timeline(p, 1).locator(".timeline-status")).to_contain_text("· 5 steps")
    # The open tool line stayed open through the new event.
    expect(bash.locator(".tool-output")).to_be_visible()
    m.post(1, {"kind": "tool", "id": "toolu_3", "name": "Read", "state": "failed"})
    expect(timeline(page, 1).locator('.step-tool[data-step="t:toolu_3"] .tool-state')).to_have_text("failed")

    # Ended: the reply, and the steps folded behind their count, which open to the same lines.
    m.report({"turn": 1, "status": "done", "summary": "Tests pass.", "reply": "All **12** tests pass."})
    for p in (page, other.page):
        ended = timeline(p, 1)
        expect(ended).to_have_attribute("data-state", "ended")
        expect(ended.locator(".steps-fold > summary")).to_have_text("5 steps")
        expect(ended.locator(".step").first).to_be_hidden()
        ended.locator(".steps-fold > summary").click()
        expect(ended.locator(".step")).to_have_count(5)
    # A reload reads the ended turn's steps when the fold is opened.
    page.reload()
    fold = timeline(page, 1).locator(".steps-fold")
    expect(fold).to_be_visible()
    fold.locator("> summary").click()
    expect(timeline(page, 1).locator(".step")).to_have_count(5)
    expect(fold.locator("> summary")).to_have_text("5 steps")


def test_no_word_from_the_machine_is_said_and_goes_when_an_event_comes(pages, api, cli):
    owner_token = cli.owner_token(unique("console-stalled"))
    m = Machine(api, owner_token)
    m.report({"turn": 1, "status": "running", "sync_mode": "messages"})
    m.post(1, {"kind": "message", "text": "Starting."})
    # The page reads a 2-second threshold in place of 2 minutes (test-only).
    w = open_session(pages, owner_token, m.hid, "owner", stall_ms=2000)
    running = timeline(w.page, 1)
    stalled = running.locator(".timeline-stalled")
    expect(stalled).to_have_text(re.compile(r"^no word from the machine for \d+ s$"), timeout=10_000)
    m.post(1, {"kind": "message", "text": "Still here."})
    expect(stalled).to_be_hidden()
    expect(running.locator(".timeline-status")).to_contain_text("· 2 steps")
    expect(stalled).to_be_visible(timeout=10_000)
    # Waiting on the person is not the machine's silence.
    m.report({"turn": 1, "status": "needs-you", "summary": "Which branch?",
              "question": {"kind": "choice", "text": "Which branch?", "options": [{"id": "main", "label": "main"}, {"id": "dev", "label": "dev"}]}})
    expect(running.locator(".timeline-status")).to_have_text("waiting for you · 2 steps")
    expect(stalled).to_be_hidden()


def test_a_turn_whose_steps_were_dropped_says_so_and_a_kept_one_loads_when_opened(pages, api, cli):
    owner_token = cli.owner_token(unique("console-dropped"))
    m = Machine(api, owner_token)
    m.report({"turn": 1, "status": "running", "sync_mode": "messages"})
    m.post(1, {"kind": "message", "text": "Turn one's words."})
    m.report({"turn": 1, "status": "done", "summary": "one"})
    # Four more turns: the service keeps the newest 4 turns' events, so turn 1's are dropped.
    for turn in range(2, 6):
        m.open_turn(turn - 1, f"prompt {turn}")
        m.report({"turn": turn, "status": "running", "sync_mode": "messages"})
        if turn == 2:
            m.tool(2, "toolu_a", "Bash", "ls -la")
            m.post(2, {"kind": "message", "text": "Turn two's words."})
        m.report({"turn": turn, "status": "done", "summary": f"turn {turn}"})
    w = open_session(pages, owner_token, m.hid, "owner")
    page = w.page
    one = timeline(page, 1)
    one.locator(".steps-fold > summary").click()
    expect(one.locator(".timeline-note")).to_have_text("Its steps are no longer kept (only the newest 4 turns' are).")
    expect(one.locator(".steps-fold > summary")).to_have_text("Steps (no longer kept)")
    expect(one.locator(".step")).to_have_count(0)
    two = timeline(page, 2)
    expect(two.locator(".steps-fold > summary")).to_have_text("Steps")
    two.locator(".steps-fold > summary").click()
    expect(two.locator(".step")).to_have_count(2)
    expect(two.locator(".steps-fold > summary")).to_have_text("2 steps")
    expect(two.locator(".step-tool .tool-line")).to_contain_text("Bash ls -la")
    three = timeline(page, 3)
    three.locator(".steps-fold > summary").click()
    expect(three.locator(".timeline-note")).to_have_text("No steps recorded.")


def post_many_steps(m: Machine, n_tools: int) -> None:
    m.post(1, {"kind": "message", "text": "I'll read the billing module, then run its tests.\n\n- the schema\n- the migrations"})
    for i in range(n_tools):
        if i % 3 == 0:
            m.tool(1, f"toolu_{i}", "Bash", f"cargo test -p billing --test migrations_{i} -- --nocapture --test-threads 1",
                   output=f"running 3 tests\ntest up_{i} ... ok\ntest down_{i} ... ok\n\ntest result: ok. 3 passed")
        elif i % 3 == 1:
            m.tool(1, f"toolu_{i}", "Read", f"crates/billing/src/migrations/{i:04}_invoices.sql")
        else:
            m.tool(1, f"toolu_{i}", "Edit", f"crates/billing/src/schema.rs\n@@ -1,3 +1,4 @@\n pub struct Invoice {{\n+    pub due: Date,\n }}")
        if i % 7 == 6:
            m.post(1, {"kind": "message", "text": f"Step {i}: the migrations so far apply cleanly."})


def test_screenshots_of_a_turn_with_many_steps_while_running_and_after(pages, api, cli):
    owner_token = cli.owner_token(unique("console-timeline-shots"))
    m = Machine(api, owner_token)
    m.report({"turn": 1, "status": "running", "sync_mode": "full"})
    post_many_steps(m, 21)
    m.tool(1, "toolu_last", "Bash", "cargo test -p billing", state="started")
    sizes = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 800}}
    shown = {}
    for name, viewport in sizes.items():
        w = open_session(pages, owner_token, m.hid, name, viewport=viewport, is_mobile=name == "phone")
        running = timeline(w.page, 1)
        expect(running.locator(".step")).to_have_count(26)
        running.locator('.step-tool[data-step="t:toolu_0"] summary').click()
        shot(w.page, f"timeline-running-{name}")
        shown[name] = w
    m.post(1, {"kind": "tool", "id": "toolu_last", "name": "Bash", "state": "done", "output": "test result: ok. 40 passed", "duration_ms": 61000})
    m.report({"turn": 1, "status": "done", "summary": "Migrations apply cleanly.",
              "reply": "## Done\n\nThe migrations apply cleanly; **40** tests pass."})
    for name, w in shown.items():
        ended = timeline(w.page, 1)
        expect(ended.locator(".steps-fold > summary")).to_have_text("26 steps")
        shot(w.page, f"timeline-ended-folded-{name}")
        ended.locator(".steps-fold > summary").click()
        shot(w.page, f"timeline-ended-open-{name}")
