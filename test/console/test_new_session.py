"""The New session form (#/new): the machine (online ones first), its workspace, the runtime
(those installed there), the model (those it reaches there), the permission mode and the first
prompt, each as the machine reported it; Send creates the session with a fresh id and the page
follows it as it starts. Screenshots at 390x844."""

from __future__ import annotations

from playwright.sync_api import expect

from helpers import shot, sign_in, unique
from test_machines import start_enrolment

TWO_S = 2000

PRESENCE = {
    "workspaces": ["api", "web"],
    "runtimes": [{"name": "claude-code", "models": ["opus", "sonnet"]}, {"name": "codex", "models": ["gpt-5-codex"]}],
    "sessions": [],
}


def enrolled(api, subject: str, owner: str, name: str) -> str:
    """The credential of machine `name`, enrolled by `subject`."""
    code, key, _ = start_enrolment(api, name)
    api.call("POST", f"/v1/enrolments/{code}/approve", owner, {})
    collected = api.call("POST", "/v1/enrolments/collect", None, {"code": code, "key": key, "owner": subject})
    assert collected["status"] == "accepted", collected
    return collected["credential"]


def option_values(page, select: str) -> list[str]:
    return page.locator(f"{select} option").evaluate_all("(os) => os.map((o) => o.value)")


def test_the_form_offers_what_the_machine_reported_and_send_starts_the_session_and_follows_it(pages, api, cli):
    subject = unique("newsession")
    owner = cli.owner_token(subject)
    # "a-" sorts first by name: the list still puts the online machine before it.
    offline, online = unique("a-vm"), unique("vm")
    enrolled(api, subject, owner, offline)
    credential = enrolled(api, subject, owner, online)
    api.call("POST", "/v1/machine/presence", credential, PRESENCE)

    w = pages("phone", viewport={"width": 390, "height": 844})
    page = w.page
    sign_in(w, owner, "#/")
    page.locator("#new-link").click()
    expect(page.locator("main#new-session")).to_be_visible()
    expect(page.locator("#new-machine option")).to_have_count(2)
    assert option_values(page, "#new-machine") == [online, offline], "online machines first"
    expect(page.locator("#new-machine option").first).to_have_text(f"{online} (online)")
    assert option_values(page, "#new-workspace") == ["api", "web"]
    assert option_values(page, "#new-runtime") == ["claude-code", "codex"], "the runtimes installed there"
    assert option_values(page, "#new-model") == ["", "opus", "sonnet"], "the models claude-code reaches there"
    page.locator("#new-runtime").select_option("codex")
    assert option_values(page, "#new-model") == ["", "gpt-5-codex"], "the models codex reaches there"
    page.locator("#new-machine").select_option(offline)
    assert option_values(page, "#new-runtime") == [""], "a machine that never reported offers nothing to choose"
    page.locator("#new-machine").select_option(online)
    shot(page, "new-session-390x844", full_page=False)

    page.locator("#new-workspace").select_option("web")
    page.locator("#new-runtime").select_option("codex")
    page.locator("#new-model").select_option("gpt-5-codex")
    page.locator("#new-mode").select_option("plan")
    page.locator("#new-prompt").fill("Say hello.")
    shot(page, "new-session-filled-390x844", full_page=True)
    page.locator("#new-send").click()

    session = page.locator("main#session")
    expect(session).to_be_visible()
    hid = session.get_attribute("data-id")
    assert hid and hid.startswith("ho_"), hid
    record = api.record(hid, owner)
    assert record["session"].startswith("chat-"), record
    assert (record["machine"], record["workspace"], record["requested_runtime"], record["model"]) == (online, "web", "codex", "gpt-5-codex")
    assert (record["requested_permission_mode"], record["prompt"]) == ("plan", "Say hello."), record

    # The machine's daemon learns of it and starts it; the page follows with no reload.
    listed = api.call("GET", "/v1/machine/handoffs", credential, None, ok=(200,))
    assert listed["handoffs"][0]["id"] == hid, listed
    token = api.call("POST", f"/v1/machine/handoffs/{hid}/machine-token", credential, {})["machine_token"]
    api.call("POST", f"/v1/handoffs/{hid}/report", token, {"turn": 1, "status": "running", "runtime": "codex"})
    expect(session).to_have_attribute("data-status", "running", timeout=TWO_S)
    shot(page, "new-session-started-390x844", full_page=False)
    w.assert_clean()


def test_with_no_machine_enrolled_the_form_says_where_to_enrol_one(pages, cli):
    owner = cli.owner_token(unique("newsession"))
    w = pages("phone", viewport={"width": 390, "height": 844})
    sign_in(w, owner, "#/")
    w.page.locator("#new-link").click()
    expect(w.page.locator("#no-machine")).to_be_visible()
    expect(w.page.locator("#new-session-form")).to_be_hidden()
    w.assert_clean()


def test_the_hand_off_dialog_offers_only_the_models_the_target_runtime_reaches_on_that_machine(pages, api, cli):
    subject = unique("handoffmodel")
    owner = cli.owner_token(subject)
    name = unique("vm")
    credential = enrolled(api, subject, owner, name)
    api.call("POST", "/v1/machine/presence", credential, PRESENCE)
    body = {"session": unique("chat"), "machine": name, "size": "large", "runtime": "claude-code", "model": "opus"}
    hid = api.call("POST", "/v1/handoffs", owner, body)["handoff"]["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner, {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner, {"title": "t", "goal": "g", "constraints": [], "acceptance_criteria": []})
    token = api.call("POST", f"/v1/machine/handoffs/{hid}/machine-token", credential, {})["machine_token"]
    api.call("POST", f"/v1/handoffs/{hid}/report", token, {"turn": 1, "status": "done", "summary": "half"})

    w = pages("phone", viewport={"width": 390, "height": 844})
    page = w.page
    sign_in(w, owner, "#/")
    page.goto(f"{page.url.split('#')[0]}#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    page.locator("form#composer button#hand-off-next").click()
    dialog = page.locator("dialog#handoff-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("#target-runtime").select_option("codex")
    expect(dialog.locator("#target-model option")).to_have_count(2)
    assert option_values(page, "#target-model") == ["", "gpt-5-codex"], "only what codex reaches there"
    expect(dialog.locator("#target-model option").first).to_have_text("opus, carried over")
    dialog.locator("#target-runtime").select_option("claude-code")
    assert option_values(page, "#target-model") == ["", "opus", "sonnet"]
    dialog.locator("#target-runtime").select_option("codex")
    dialog.locator("#target-model").select_option("gpt-5-codex")
    dialog.locator("input#purpose").fill("a fresh view")
    dialog.locator("textarea#objective").fill("Finish it")
    shot(page, "handoff-dialog-model-390x844", full_page=False)
    dialog.locator("button#submit-handoff").click()
    expect(dialog).to_be_hidden()
    record = api.record(hid, owner)
    assert (record["turn"], record["requested_runtime"], record["model"]) == (2, "codex", "gpt-5-codex"), record
    w.assert_clean()
