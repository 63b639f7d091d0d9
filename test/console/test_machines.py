"""The Machines page: a machine's code is looked up and the machine shown (name, host name, key
fingerprint) before Approve; once the machine collects its credential and reports, it is listed
online with its runtimes and models, workspaces and sessions, last seen; a revoke ends its
credential. Screenshot at 390x844."""

from __future__ import annotations

import hashlib
import json
import os

from playwright.sync_api import expect

from helpers import BASE, shot, sign_in, unique


def start_enrolment(api, name: str) -> tuple[str, str, str]:
    """(code, key hex, fingerprint) of an enrolment the machine `name` started."""
    key = os.urandom(32)
    public_key = hashlib.sha256(key).hexdigest()
    address = "10.9." + ".".join(str(b) for b in os.urandom(2))
    body = {"name": name, "host": f"{name}.internal", "public_key": public_key}
    status, _, text = api.request("POST", "/v1/enrolments", None, body, headers={"CF-Connecting-IP": address})
    assert status == 201, text
    enrolment = json.loads(text)["enrolment"]
    return enrolment["code"], key.hex(), enrolment["fingerprint"]


def test_a_code_is_shown_then_approved_and_the_machine_listed_online_with_what_it_reported_then_revoked(pages, api, cli):
    subject = unique("machines")
    owner = cli.owner_token(subject)
    name = unique("vm")
    code, key, fingerprint = start_enrolment(api, name)

    w = pages("phone", viewport={"width": 390, "height": 844})
    page = w.page
    sign_in(w, owner, "#/")
    page.locator("#machines-link").click()
    expect(page.locator("main#machines")).to_be_visible()
    expect(page.locator("#no-machines")).to_be_visible()

    page.locator("#enrol-code").fill(code.lower())
    page.locator("#look-up").click()
    expect(page.locator("#enrol-name")).to_have_text(name)
    expect(page.locator("#enrol-host")).to_have_text(f"{name}.internal")
    expect(page.locator("#enrol-fingerprint")).to_have_text(fingerprint)
    page.locator("#approve").click()
    expect(page.locator("#enrolment")).to_be_hidden()

    collected = api.call("POST", "/v1/enrolments/collect", None, {"code": code, "key": key, "owner": subject})
    assert collected["status"] == "accepted", collected
    credential = collected["credential"]
    record, _ = api.create(owner, unique("chat"), machine=name)
    presence = {
        "workspaces": ["api", "web"],
        "runtimes": [{"name": "claude-code", "models": ["opus", "sonnet"]}, {"name": "codex", "models": ["gpt-5-codex"]}],
        "sessions": [record["id"]],
    }
    api.call("POST", "/v1/machine/presence", credential, presence)

    page.reload()
    row = page.locator(f'#machine-list tr[data-machine="{name}"]')
    expect(row).to_have_attribute("data-online", "true")
    expect(row).to_contain_text("online")
    expect(row).to_contain_text("claude-code: opus, sonnet")
    expect(row).to_contain_text("codex: gpt-5-codex")
    expect(row).to_contain_text("api, web")
    expect(row.locator(f'a[href="#/s/{record["id"]}"]')).to_be_visible()
    expect(row.locator("time")).to_have_count(1)
    shot(page, "machines-390x844", full_page=False)

    row.locator("button.revoke").click()
    expect(page.locator("dialog#confirm")).to_be_visible()
    page.locator("button#confirm-yes").click()
    expect(page.locator("#machine-list tbody tr")).to_have_count(0)
    status, _, text = api.request("POST", "/v1/machine/presence", credential, presence)
    assert status == 401 and "auth.revoked" in text, text
    w.assert_clean()


def test_a_refused_code_is_told_to_the_machine(pages, api, cli):
    subject = unique("machines")
    owner = cli.owner_token(subject)
    name = unique("vm")
    code, key, _ = start_enrolment(api, name)
    w = pages("desk")
    sign_in(w, owner, "#/")
    page = w.page
    page.goto(f"{BASE}/#/machines")
    page.locator("#enrol-code").fill(code)
    page.locator("#look-up").click()
    expect(page.locator("#enrol-name")).to_have_text(name)
    page.locator("#refuse").click()
    expect(page.locator("#enrolment")).to_be_hidden()
    status, _, text = api.request("POST", "/v1/enrolments/collect", None, {"code": code, "key": key, "owner": subject})
    assert status == 403 and "enrolment.refused" in text, text
    w.assert_clean()
