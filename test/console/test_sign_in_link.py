"""The sign-in link (`#token=…`) never swaps who is signed in silently: a first sign-in needs no
confirmation, and a link carrying another owner's token signs in as them only after a
confirmation that names both subjects. Saying no keeps the sign-in held. The owner token itself
is kept nowhere: it signs the browser in as a device."""

from playwright.sync_api import expect

from helpers import BASE, sign_in, unique


def stored(page) -> str | None:
    return page.evaluate("() => sessionStorage.getItem('handoff.token')")


def devices(api, token) -> list[str]:
    return [d["name"] for d in api.call("GET", "/v1/devices", token)["devices"]]


def test_a_sign_in_link_replaces_a_signed_in_token_only_after_a_confirmation_naming_the_new_subject(pages, cli, api):
    alice, bob = unique("alice"), unique("bob")
    alice_token, bob_token = cli.owner_token(alice), cli.owner_token(bob)
    w = pages("owner")
    page = w.page
    confirm = page.locator("dialog#confirm")

    # A first sign-in: no question asked.
    sign_in(w, alice_token, expect_hash="#/")
    expect(confirm).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # The same token again: nothing is replaced, nothing asked, no second device.
    page.goto(f"{BASE}/#token={alice_token}")
    expect(page).to_have_url(f"{BASE}/#/")
    expect(confirm).to_be_hidden()
    assert len(devices(api, alice_token)) == 1

    # Another owner's link: asked first, naming bob and alice; nothing changed meanwhile.
    page.goto(f"{BASE}/#token={bob_token}")
    expect(page).to_have_url(f"{BASE}/#/")
    expect(confirm).to_be_visible()
    expect(page.locator("#confirm-title")).to_have_text(f"Sign in as {bob} (owner)?")
    expect(page.locator("#confirm-text")).to_contain_text(f"signed in as {alice} (owner)")
    expect(page.locator("#confirm-text")).to_contain_text(f"the link signs in as {bob} (owner)")
    assert stored(page) is None, "no token is kept"
    assert devices(api, bob_token) == [], "bob is not signed in before the owner says yes"
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # No: alice stays signed in.
    page.locator("button#confirm-no").click()
    expect(confirm).to_be_hidden()
    expect(page.locator("#message")).to_contain_text(f"still signed in as {alice} (owner)")
    assert devices(api, bob_token) == [], "saying no keeps alice signed in"
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # Yes: bob's token replaces alice's.
    page.goto(f"{BASE}/#token={bob_token}")
    expect(confirm).to_be_visible()
    expect(page.locator("button#confirm-yes")).to_have_text(f"Sign in as {bob}")
    page.locator("button#confirm-yes").click()
    expect(confirm).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"Signed in as {bob} (owner)")
    assert len(devices(api, bob_token)) == 1
    assert devices(api, alice_token) == [], "alice's device was signed out as bob signed in"

    # A link whose token is no token at all replaces nothing, and asks nothing.
    page.goto(f"{BASE}/#token=not-a-token")
    expect(page.locator("#error")).to_contain_text("auth.invalid")
    expect(confirm).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"Signed in as {bob} (owner)")
    w.assert_clean()
