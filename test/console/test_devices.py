"""A sign-in that lasts on each device: an owner's sign-in link signs the browser in
as a device, and from then on a second page, a reload or a push's tap in that browser lands
signed in on the page it asked for, while another browser (context) is not signed in. The
Devices page lists the owner's devices with this one marked and revokes them; a device revoked
from another lands on Sign in at its next load; Sign out ends the device on the service; and
revoking a device removes the push subscription made from it."""

from __future__ import annotations

from playwright.sync_api import expect

from helpers import BASE, sign_in, unique
from test_notify import ServiceWorkerPushes, message, push_owner  # noqa: F401  (a fixture, used by name)


def devices(api, token) -> list[dict]:
    return api.call("GET", "/v1/devices", token)["devices"]


def test_a_second_page_and_a_reload_land_signed_in_and_another_browser_does_not(pages, browser, api, cli):
    name = unique("device")
    owner = cli.owner_token(name)
    record, _ = api.create(owner, unique("chat"))
    hid = record["id"]
    w = pages("owner")
    sign_in(w, owner, "#/")
    page = w.page
    assert owner not in page.content(), "the owner token is on no page"
    assert page.evaluate("() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})").find("eyJ") < 0, \
        "no token is kept in storage"
    cookies = page.context.cookies()
    device_cookie = [c for c in cookies if c["name"] == "handoff_device"]
    assert len(device_cookie) == 1 and device_cookie[0]["httpOnly"] and device_cookie[0]["sameSite"] == "Strict", cookies
    assert device_cookie[0]["path"] == "/v1/devices/refresh", device_cookie
    assert page.evaluate("() => document.cookie") == "", "no page script reads the credential"

    # A second page of the same browser, opened on a session's address: signed in, on that page.
    second = page.context.new_page()
    second.goto(f"{BASE}/#/s/{hid}")
    expect(second.locator("main#session")).to_have_attribute("data-id", hid)
    expect(second.locator("#who")).to_have_text(f"Signed in as {name} (owner)")
    second.close()

    # A reload lands signed in, on the page it was on.
    page.goto(f"{BASE}/#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    page.reload()
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(page.locator("#who")).to_have_text(f"Signed in as {name} (owner)")

    # Another browser context has no cookie: Sign in.
    other = pages("another browser")
    other.page.goto(f"{BASE}/#/s/{hid}")
    expect(other.page.locator("form#sign-in")).to_be_visible()
    assert len(devices(api, owner)) == 1
    w.assert_clean()


def test_the_devices_page_marks_this_device_and_a_device_revoked_from_another_lands_on_sign_in_at_its_next_load(pages, api, cli):
    name = unique("devices")
    owner = cli.owner_token(name)
    phone, desk = pages("phone"), pages("desk")
    sign_in(phone, owner, "#/")
    sign_in(desk, owner, "#/")
    listed = devices(api, owner)
    assert len(listed) == 2, listed

    desk.page.goto(f"{BASE}/#/devices")
    rows = desk.page.locator("#device-list tbody tr")
    expect(rows).to_have_count(2)
    expect(desk.page.locator('#device-list tr[data-current="true"]')).to_have_count(1)
    expect(desk.page.locator('#device-list tr[data-current="true"]')).to_contain_text("(this device)")
    phone_row = desk.page.locator('#device-list tr[data-current="false"]')
    phone_id = phone_row.get_attribute("data-device")
    phone_row.locator("button.revoke").click()
    expect(desk.page.locator("dialog#confirm")).to_be_visible()
    desk.page.locator("button#confirm-yes").click()
    expect(rows).to_have_count(1)
    assert [d["id"] for d in devices(api, owner)] != [phone_id]

    # The phone's next load: its refresh is refused (the browser logs the 401), and it lands on
    # Sign in.
    phone.page.reload()
    expect(phone.page.locator("form#sign-in")).to_be_visible()
    assert any("/v1/devices/refresh" in e and "401" in e for e in phone.console_errors), phone.console_errors
    phone.console_errors.clear()
    expect(desk.page.locator("#who")).to_have_text(f"Signed in as {name} (owner)")
    desk.assert_clean()


def test_sign_out_ends_the_device_on_the_service(pages, api, cli):
    owner = cli.owner_token(unique("sign-out"))
    w = pages("owner")
    sign_in(w, owner, "#/")
    page = w.page
    assert len(devices(api, owner)) == 1
    with page.expect_response(lambda r: r.request.method == "DELETE" and "/v1/devices/" in r.url) as ending:
        page.locator("button#sign-out").click()
    assert ending.value.status == 204
    expect(page.locator("form#sign-in")).to_be_visible()
    assert devices(api, owner) == [], "the device's sign-in ended on the service, not only in the page"
    page.reload()
    expect(page.locator("form#sign-in")).to_be_visible()
    # The credential the browser still holds refreshes nothing.
    refused = page.evaluate("""() => fetch("/v1/devices/refresh", {method: "POST", headers: {"Handoff-Refresh": "1"},
                                  credentials: "same-origin"}).then((r) => r.json()).then((b) => b.error.code)""")
    assert refused == "auth.revoked"
    w.console_errors.clear()  # the browser's log of that 401, asked for here
    w.assert_clean()


def test_a_cross_origin_page_cannot_refresh_with_the_devices_cookie(pages, api, cli):
    owner = cli.owner_token(unique("csrf"))
    w = pages("owner")
    sign_in(w, owner, "#/")
    # The same request without the header its defence asks for: refused although the cookie goes.
    status = w.page.evaluate("""() => fetch("/v1/devices/refresh", {method: "POST", credentials: "same-origin"})
                                  .then((r) => r.status)""")
    assert status == 403
    w.console_errors.clear()  # the browser's log of that 403, asked for here
    w.assert_clean()


def test_revoking_a_device_removes_its_push_subscription(push_owner, api, cli):
    stand_in, w = push_owner
    owner = cli.owner_token(unique("device-push"))
    sign_in(w, owner, "#/")
    page = w.page
    switch = page.locator("#notify")
    switch.click()
    expect(switch).to_have_attribute("aria-pressed", "true")
    listed = api.get("/v1/push/subscriptions", owner)["subscriptions"]
    [device] = devices(api, owner)
    assert [s["device"] for s in listed] == [device["id"]], "the subscription belongs to this device"

    # A push's tap: the service worker (which holds no token) takes the console to the session's
    # page, a navigation that lands signed in.
    record, _ = api.create(owner, unique("chat"))
    hid = record["id"]
    pushes = ServiceWorkerPushes(page)
    pushes.deliver(message(hid, "handoff.needs_you", "Which branch?"), hid)
    page.reload()  # a fresh load, so that the tap's page is loaded anew from the worker's navigate
    pushes.click(hid)
    expect(page).to_have_url(f"{BASE}/#/s/{hid}")
    expect(page.locator("main#session")).to_have_attribute("data-id", hid)
    expect(page.locator("#who")).to_contain_text("(owner)")

    api.call("DELETE", f"/v1/devices/{device['id']}", owner, ok=(204,))
    assert api.get("/v1/push/subscriptions", owner)["subscriptions"] == [], "revoking the device removed it"
    page.reload()
    expect(page.locator("form#sign-in")).to_be_visible()
    w.console_errors.clear()  # the browser's log of the revoked device's refused refresh
