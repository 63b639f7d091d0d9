"""Every outcome kept: an ended turn shows its reply whole, rendered as
Markdown through the same sanitiser as the package, then its questions and their answers, all
from the lineage, so that a reload, or a second page that never watched the turn, shows every
turn as the page that watched it live."""

from playwright.sync_api import expect

from helpers import open_session, shot, unique

REPLY_ONE = """## Done

The parser keeps **the old API**.

- `parse` and `parse_all`
- 12 tests added

<script>alert('x')</script> [a link](javascript:alert(1))"""

REPLY_TWO = "Rolled back: `0002_rollback.sql` ran on staging."


def assert_every_outcome(page) -> None:
    one = page.locator('ol#lineage > li.turn[data-turn="1"]')
    reply = one.locator(".turn-reply")
    expect(reply.locator("h4")).to_have_text("Done")
    expect(reply.locator("strong")).to_have_text("the old API")
    expect(reply.locator("li")).to_have_count(2)
    expect(reply).to_contain_text("<script>alert('x')</script>")
    assert reply.locator("script").count() == 0, "raw HTML is shown as text"
    assert reply.locator("a[href^='javascript']").count() == 0, "no javascript: link"
    asked = one.locator(".past-question")
    expect(asked).to_have_count(2)
    expect(asked.nth(0)).to_contain_text("Run cargo test?")
    expect(asked.nth(0).locator(".question-input")).to_have_text("cargo test")
    expect(asked.nth(0).locator(".question-answer")).to_contain_text("Answered Allow (go ahead)")
    expect(asked.nth(1)).to_contain_text("Push to main?")
    expect(asked.nth(1).locator(".question-answer")).to_contain_text("Answered Deny")
    expect(one.locator(".turn-summary")).to_have_text("All tests pass.")
    two = page.locator('ol#lineage > li.turn[data-turn="2"]')
    expect(two.locator(".turn-reply code")).to_have_text("0002_rollback.sql")


def test_a_reload_and_a_second_page_show_every_turns_reply_questions_and_answers(pages, api, cli):
    owner_token = cli.owner_token(unique("console-outcomes"))
    record, machine = api.create(owner_token, unique("outcomes"))
    hid = record["id"]
    report = lambda body: api.call("POST", f"/v1/handoffs/{hid}/report", machine, body)  # noqa: E731
    allow_deny = [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]
    w = open_session(pages, owner_token, hid, "owner", live=False)
    for text, command, option, note in [("Run cargo test?", "cargo test", "allow", "go ahead"), ("Push to main?", "git push", "deny", None)]:
        asked = report({"turn": 1, "status": "needs-you", "summary": text,
                        "question": {"kind": "permission", "text": text, "input": command, "options": allow_deny}})
        answer = {"question": asked["handoff"]["question"]["id"], "option": option}
        if note:
            answer["note"] = note
        api.call("POST", f"/v1/handoffs/{hid}/answer", owner_token, answer)
    report({"turn": 1, "status": "done", "summary": "All tests pass.", "reply": REPLY_ONE})
    api.call("POST", f"/v1/handoffs/{hid}/turns", owner_token, {"after": 1, "prompt": "Now roll it back on staging"})
    report({"turn": 2, "status": "done", "summary": "Rolled back.", "reply": REPLY_TWO})

    page = w.page
    expect(page.locator("main#session")).to_have_attribute("data-status", "done")
    assert_every_outcome(page)
    page.reload()
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    assert_every_outcome(page)
    shot(page, "outcomes-after-reload")
    other = open_session(pages, owner_token, hid, "second-page", live=False)
    assert_every_outcome(other.page)
