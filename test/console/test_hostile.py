"""Hostile text from a machine renders as text (issue 15): a summary that is an <img onerror>,
a decision with a `javascript:` link and Markdown with raw HTML, shown on the list, session and
package pages. No dialog opens, no script runs (no page error), no console error (a CSP
violation is one), no `javascript:` URL and no event-handler attribute is in the DOM, and the
`<img src=x>` is never requested. The CSP is enforced."""

import re

from playwright.sync_api import expect

from helpers import BASE, ApiError, api_session_ready_to_hand_off, hostile_dom, shot, sign_in, unique

SUMMARY = "<img src=x onerror=alert(1)>"
STATEMENT = (
    "Use **Postgres** <script>alert(1)</script> and <img src=x onerror=alert(1)>\n"
    "[click me](javascript:alert(1)) <a href=\"javascript:alert(1)\">a link</a>"
)
RATIONALE = '<svg onload=alert(1)><b onmouseover="alert(1)">bold</b></svg>'
# The API refuses a `javascript:` evidence URI (only http, https or relative ones are kept), so
# the hostile evidence that reaches the page is a relative one that carries Markdown and a scheme.
EVIDENCE_REFUSED = "javascript:alert(1)"
EVIDENCE_KEPT = "x/[click](javascript:alert(1))"
ARTIFACT_TITLE = "<iframe src=javascript:alert(1)></iframe>"
BLOCKER_TITLE = '"><img src=x onerror=alert(1)>'
OBJECTIVE = "<script>alert(1)</script> finish"


def test_hostile_machine_text_is_shown_as_text(pages, api, cli):
    owner_token = cli.owner_token(unique("console-hostile"))
    record, machine_token = api.create(owner_token, unique("hostile"))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "<b>Title</b>", "goal": "<img src=x onerror=alert(1)> goal",
        "constraints": ["<script>alert(1)</script>"], "acceptance_criteria": ["[x](javascript:alert(1))"]})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine_token,
             {"turn": 1, "status": "needs-you", "summary": SUMMARY})
    try:
        api.call("POST", f"/v1/handoffs/{hid}/decisions", machine_token,
                 {"statement": "refused", "evidence": [EVIDENCE_REFUSED]})
        raise AssertionError("the API kept a javascript: evidence URI")
    except ApiError as e:
        assert e.status == 400, e
    api.call("POST", f"/v1/handoffs/{hid}/decisions", machine_token,
             {"statement": STATEMENT, "rationale": RATIONALE, "evidence": [EVIDENCE_KEPT, "https://example.com/ok"]})
    api.call("POST", f"/v1/handoffs/{hid}/artifacts", machine_token,
             {"type": "doc", "title": ARTIFACT_TITLE, "uri": "docs/x.md"})
    api.call("POST", f"/v1/handoffs/{hid}/blockers", machine_token, {"severity": "high", "title": BLOCKER_TITLE})
    compiled = api.call("POST", f"/v1/handoffs/{hid}/package", owner_token, {
        "objective": OBJECTIVE, "purpose": "<img src=x onerror=alert(1)>", "runtime": "codex",
        "note": "[note](javascript:alert(1)) <script>alert(1)</script>"})
    assert compiled["package_version"] == 1

    w = pages("owner")
    page = w.page
    image_requests = []
    page.on("request", lambda r: image_requests.append(r.url) if re.search(r"/x($|\?)", r.url) else None)
    sign_in(w, owner_token, expect_hash="#/")

    # The list: the summary is the row's text.
    row = page.locator(f'tr.session-row[data-id="{hid}"]')
    expect(row).to_have_attribute("data-status", "needs-you")
    expect(row).to_contain_text(SUMMARY)
    assert hostile_dom(page) == [], hostile_dom(page)
    shot(page, "hostile-list")

    # The session page: the summary exactly, the decision and the rest as text.
    row.locator(f'a[href$="#/s/{hid}"]').click()
    session = page.locator("main#session")
    expect(session).to_have_attribute("data-status", "needs-you")
    assert page.locator("#summary").text_content() == SUMMARY
    decisions = page.locator("#decisions")
    expect(decisions).to_contain_text("<script>alert(1)</script>")
    expect(decisions).to_contain_text("<img src=x onerror=alert(1)>")
    expect(decisions).to_contain_text("[click me](javascript:alert(1))")
    expect(decisions).to_contain_text(RATIONALE)
    expect(decisions).to_contain_text(EVIDENCE_KEPT)
    # Evidence links only for http(s) URLs: the relative one is text, the https one a link.
    hrefs = decisions.locator("a[href]").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert all(re.match(r"^https?://", h) for h in hrefs), f"evidence links that are not http(s): {hrefs}"
    assert "https://example.com/ok" in hrefs, f"the https evidence is a link: {hrefs}"
    expect(page.locator("#artifacts")).to_contain_text(ARTIFACT_TITLE)
    expect(page.locator("#blockers")).to_contain_text(BLOCKER_TITLE)
    expect(page.locator("#goal")).to_contain_text("<img src=x onerror=alert(1)> goal")
    expect(page.locator("#constraints")).to_contain_text("<script>alert(1)</script>")
    found = hostile_dom(page)
    assert found == [], found
    shot(page, "hostile-session")

    # The package page: the Markdown (marked, then DOMPurify) shows the raw HTML as text.
    page.locator("a#package-link").click()
    expect(page).to_have_url(f"{BASE}/#/s/{hid}/package")
    markdown = page.locator("#package-markdown")
    expect(markdown).to_contain_text("<script>alert(1)</script>")
    expect(markdown).to_contain_text("<img src=x onerror=alert(1)>")
    expect(markdown).to_contain_text(OBJECTIVE)
    expect(page.locator("code#package-hash")).to_have_text(compiled["package_hash"])
    found = hostile_dom(page)
    assert found == [], found
    md_hrefs = markdown.locator("a[href]").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert not [h for h in md_hrefs if h.strip().lower().startswith("javascript:")], md_hrefs
    shot(page, "hostile-package")

    # No script ran: nothing was asked for /x, no dialog, no page error, no console error.
    page.wait_for_timeout(500)
    assert image_requests == [], f"the hostile <img src=x> was requested: {image_requests}"
    w.assert_clean()


# Markdown as no service of ours writes it (the service escapes machine text before it becomes
# Markdown), served to the page in place of the real one: what stops it here is the page's own
# renderer (marked, raw HTML shown as text) and sanitiser (DOMPurify, http(s) links only).
RAW_MARKDOWN = """# Hand-off package v1

<script>alert(1)</script>
<img src=x onerror=alert(1)>
<iframe src="javascript:alert(1)"></iframe>
<a href="javascript:alert(1)">raw link</a>

[a javascript link](javascript:alert(1)) [a data link](data:text/html,<script>alert(1)</script>)
[a relative link](/x) [an https link](https://example.com/ok) ![an image](x)

<details open><summary>raw details</summary><b onmouseover="alert(1)">bold</b></details>

## Package hash

{hash}
"""


def test_raw_html_in_the_markdown_is_stopped_by_the_page_itself(pages, api, cli):
    owner_token = cli.owner_token(unique("console-raw-md"))
    hid, _ = api_session_ready_to_hand_off(api, owner_token, compiled=True, blocker=False)
    w = pages("owner")
    page = w.page
    image_requests = []
    page.on("request", lambda r: image_requests.append(r.url) if re.search(r"/x($|\?)", r.url) else None)
    # The whole hash, as the service's Markdown names it: the page shows a Markdown only with
    # the JSON of the same package.
    body = RAW_MARKDOWN.replace("{hash}", api.get(f"/v1/handoffs/{hid}/package", owner_token)["package_hash"])
    page.route(re.compile(r".*/v1/handoffs/[^/]+/package\?format=markdown.*"),
               lambda route: route.fulfill(status=200, content_type="text/markdown; charset=utf-8", body=body))
    sign_in(w, owner_token, expect_hash="#/")
    page.goto(f"{BASE}/#/s/{hid}/package")
    markdown = page.locator("#package-markdown")
    expect(markdown).to_contain_text("raw link")
    # Raw HTML is shown as the text it is, never as elements.
    expect(markdown).to_contain_text("<script>alert(1)</script>")
    expect(markdown).to_contain_text("<img src=x onerror=alert(1)>")
    for tag in ["script", "img", "iframe", "details", "b"]:
        assert markdown.locator(tag).count() == 0, f"a <{tag}> from the Markdown reached the page"
    hrefs = markdown.locator("a[href]").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    assert hrefs == ["https://example.com/ok"], f"only the https link keeps its href: {hrefs}"
    found = hostile_dom(page)
    assert found == [], found
    page.wait_for_timeout(500)
    assert image_requests == [], f"the Markdown's image was requested: {image_requests}"
    w.assert_clean()


def test_a_markdown_that_never_names_its_hash_is_still_shown_after_a_few_reads(pages, api, cli):
    """The page reads the package again when its Markdown names another hash than its JSON (a
    recompile between the two reads), but only a few times: then it shows what it has."""
    owner_token = cli.owner_token(unique("console-md-nohash"))
    hid, _ = api_session_ready_to_hand_off(api, owner_token, compiled=True, blocker=False)
    w = pages("owner")
    page = w.page
    served = []

    def serve(route):
        served.append(route.request.url)
        route.fulfill(status=200, content_type="text/markdown; charset=utf-8", body=RAW_MARKDOWN.replace("{hash}", "no hash here"))

    page.route(re.compile(r".*/v1/handoffs/[^/]+/package\?format=markdown.*"), serve)
    sign_in(w, owner_token, expect_hash="#/")
    page.goto(f"{BASE}/#/s/{hid}/package")
    expect(page.locator("#package-markdown")).to_contain_text("raw link")
    page.wait_for_timeout(500)
    assert 2 <= len(served) <= 5, f"the Markdown was read {len(served)} times"
    w.assert_clean()
