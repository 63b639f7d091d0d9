"""The sign-in link (`#token=…`) never swaps the signed-in token silently: a first sign-in
needs no confirmation, and a link carrying another token replaces the one held only after a
confirmation that names both subjects. Saying no keeps the token held."""

from playwright.sync_api import expect

from helpers import BASE, sign_in, unique


def stored(page) -> str | None:
    return page.evaluate("() => sessionStorage.getItem('handoff.token')")


def test_a_sign_in_link_replaces_a_signed_in_token_only_after_a_confirmation_naming_the_new_subject(pages, cli):
    alice, bob = unique("alice"), unique("bob")
    alice_token, bob_token = cli.owner_token(alice), cli.owner_token(bob)
    w = pages("owner")
    page = w.page
    confirm = page.locator("dialog#confirm")

    # A first sign-in: no question asked.
    sign_in(w, alice_token, expect_hash="#/")
    expect(confirm).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # The same token again: nothing is replaced, nothing asked.
    page.goto(f"{BASE}/#token={alice_token}")
    expect(page).to_have_url(f"{BASE}/#/")
    expect(confirm).to_be_hidden()

    # Another owner's link: asked first, naming bob and alice; nothing changed meanwhile.
    page.goto(f"{BASE}/#token={bob_token}")
    expect(page).to_have_url(f"{BASE}/#/")
    expect(confirm).to_be_visible()
    expect(page.locator("#confirm-title")).to_have_text(f"Sign in as {bob} (owner)?")
    expect(page.locator("#confirm-text")).to_contain_text(f"signed in as {alice} (owner)")
    expect(page.locator("#confirm-text")).to_contain_text(f"the link signs in as {bob} (owner)")
    assert stored(page) == alice_token, "the link's token is not kept before the owner says yes"
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # No: alice stays signed in.
    page.locator("button#confirm-no").click()
    expect(confirm).to_be_hidden()
    expect(page.locator("#message")).to_contain_text(f"still signed in as {alice} (owner)")
    assert stored(page) == alice_token, "saying no keeps the token held"
    expect(page.locator("#who")).to_have_text(f"Signed in as {alice} (owner)")

    # Yes: bob's token replaces alice's.
    page.goto(f"{BASE}/#token={bob_token}")
    expect(confirm).to_be_visible()
    expect(page.locator("button#confirm-yes")).to_have_text(f"Sign in as {bob}")
    page.locator("button#confirm-yes").click()
    expect(confirm).to_be_hidden()
    expect(page.locator("#who")).to_have_text(f"Signed in as {bob} (owner)")
    assert stored(page) == bob_token

    # A link whose token is no token at all replaces nothing, and asks nothing.
    page.goto(f"{BASE}/#token=not-a-token")
    expect(page.locator("#error")).to_contain_text("auth.invalid")
    expect(confirm).to_be_hidden()
    assert stored(page) == bob_token
    w.assert_clean()
