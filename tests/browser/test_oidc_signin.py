"""Sign-in through the organisation's OpenID provider in a real Chromium: the button, the
provider's own pages, back to the page asked for, signed in; sign-out at both ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.test_accessibility import axe_violations
from tests.oidc.site import PROVIDER_NAME, Site, oidc_site

pytestmark = [pytest.mark.browser, pytest.mark.once]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with oidc_site(
        tmp_path_factory.mktemp("oidc-browser-var"),
        tmp_path_factory.mktemp("oidc-browser-provider"),
    ) as running:
        yield running


def test_alice_signs_in_and_out_through_the_provider(chromium: Any, site: Site) -> None:
    """Cookies, redirects and forms as a browser handles them, across the two origins."""
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.goto(f"{site.url}/nodes/")
        assert page.url.startswith(f"{site.url}/accounts/login/?next=")
        page.click(f"text=Sign in with {PROVIDER_NAME}")
        page.wait_for_url(f"{site.provider.issuer}/interaction/**")
        page.fill("input[name=login]", "alice")
        page.fill("input[name=password]", "any")
        page.click("button[type=submit]")
        page.wait_for_selector("button[autofocus], button[type=submit]")
        if page.url.startswith(site.provider.issuer):  # the consent page
            page.click("button[type=submit]")
        page.wait_for_url(f"{site.url}/nodes/")
        assert page.locator(".topbar .right span", has_text="alice").count() == 1
        assert site.identity("alice")["groups"] == ["team-a"]
        page.click("button.logout")
        page.wait_for_url(f"{site.provider.issuer}/session/end**")
        page.click("button[type=submit]")  # the provider asks to confirm
        page.wait_for_url(f"{site.url}/accounts/login/")
        page.goto(f"{site.url}/nodes/")
        assert page.url.startswith(f"{site.url}/accounts/login/")
    finally:
        context.close()


def test_the_sign_in_page_with_the_provider_and_a_message_is_accessible(
    chromium: Any, site: Site
) -> None:
    """axe-core finds nothing serious on the sign-in page with the button and an error shown."""
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.goto(f"{site.url}/accounts/oidc/callback/?code=x&state=y")
        assert page.url == f"{site.url}/accounts/login/"
        assert page.locator("[role=alert]", has_text="did not complete").count() == 1
        assert page.locator("#oidc-sign-in").count() == 1
        assert axe_violations(page) == []
    finally:
        context.close()
