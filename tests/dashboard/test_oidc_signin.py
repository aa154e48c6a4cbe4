"""Sign-in with a real OpenID provider, end to end: the dashboard's web server (console.serve)
and panva's oidc-provider on loopback, a requests session following every redirect between
them and filling in the provider's own login and consent pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from tests.oidc.provider import CLIENT_ID, sign_in
from tests.oidc.site import (
    ACCOUNTS,
    LOCAL_USER,
    PROVIDER_NAME,
    SESSION_SECONDS,
    Site,
    oidc_site,
)

pytestmark = pytest.mark.once

SIGN_IN_WITH = r'<a class="button" id="oidc-sign-in" href="([^"]+)">Sign in with ([^<]+)<'


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with oidc_site(
        tmp_path_factory.mktemp("oidc-var"), tmp_path_factory.mktemp("oidc-provider")
    ) as running:
        yield running


def oidc_start(site: Site, session: requests.Session, next_path: str = "") -> str:
    """The "Sign in with …" link of the sign-in page."""
    page = session.get(f"{site.url}/accounts/login/{next_path}", timeout=10)
    found = re.search(SIGN_IN_WITH, page.text)
    assert found is not None, page.text
    assert found.group(2) == PROVIDER_NAME
    return site.url + found.group(1).replace("&amp;", "&")


def messages_on_login(site: Site, session: requests.Session) -> list[str]:
    page = session.get(f"{site.url}/accounts/login/", timeout=10)
    return re.findall(r'<p class="bad" role="alert">([^<]+)</p>', page.text)


def test_alice_and_bob_sign_in_as_their_kubernetes_identities(site: Site) -> None:
    """Each lands on the dashboard signed in as their username, with exactly their groups."""
    for name, group in (("alice", "team-a"), ("bob", "team-b")):
        session = requests.Session()
        landed = sign_in(session, oidc_start(site, session, "?next=/nodes/"), name)
        assert landed.status_code == 200
        assert urlsplit(landed.url).path == "/nodes/"
        assert site.signed_in_as(session) == name
        callback = next(r for r in landed.history if "/accounts/oidc/callback/" in r.url)
        assert f"Max-Age={SESSION_SECONDS}" in callback.headers["Set-Cookie"]
        identity = site.identity(name)
        assert identity["groups"] == [group]
        assert identity == {
            "groups": [group],
            "is_staff": False,
            "is_superuser": False,
            "usable_password": False,
            "email": f"{name}@example.com",
        }


def test_groups_follow_the_provider_at_every_sign_in(site: Site) -> None:
    """A group added at the provider appears at the next sign-in, and a removed one goes."""
    promoted = {"email": "bob@example.com", "groups": ["team-c", "platform-admins"]}
    changed = {**ACCOUNTS, "bob": promoted}
    site.provider.set_accounts(changed)
    try:
        session = requests.Session()
        sign_in(session, oidc_start(site, session), "bob")
        assert site.signed_in_as(session) == "bob"
        bob = site.identity("bob")
        assert bob["groups"] == ["platform-admins", "team-c"]
        assert bob["is_staff"] and bob["is_superuser"]
    finally:
        site.provider.set_accounts(ACCOUNTS)
    session = requests.Session()
    sign_in(session, oidc_start(site, session), "bob")
    bob = site.identity("bob")
    assert bob["groups"] == ["team-b"]
    assert not bob["is_staff"] and not bob["is_superuser"]


def test_a_replayed_callback_signs_nobody_in(site: Site) -> None:
    """The same callback again, in the same browser or another: no session, no 500."""
    session = requests.Session()
    landed = sign_in(session, oidc_start(site, session), "alice")
    callback = next(r.url for r in landed.history if "/accounts/oidc/callback/" in r.url)
    assert "code=" in callback and "state=" in callback
    session.post(
        f"{site.url}/accounts/logout/",
        data={"csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": site.url + "/"},
        allow_redirects=False,
        timeout=10,
    )
    assert site.signed_in_as(session) is None
    for browser in (session, requests.Session()):
        answer = browser.get(callback, allow_redirects=False, timeout=10)
        assert answer.status_code == 302
        assert answer.headers["Location"] == "/accounts/login/"
        assert site.signed_in_as(browser) is None
        assert any("did not complete" in m for m in messages_on_login(site, browser))


def test_a_used_code_under_a_fresh_state_is_refused_by_the_provider(site: Site) -> None:
    """The state matches a sign-in under way, but the code was spent: the provider says no."""
    session = requests.Session()
    landed = sign_in(session, oidc_start(site, session), "alice")
    old = parse_qs(urlsplit(next(r.url for r in landed.history if "code=" in r.url)).query)
    attacker = requests.Session()
    start = attacker.get(oidc_start(site, attacker), allow_redirects=False, timeout=10)
    state = parse_qs(urlsplit(start.headers["Location"]).query)["state"][0]
    answer = attacker.get(
        f"{site.url}/accounts/oidc/callback/",
        params={"code": old["code"][0], "state": state},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302 and answer.headers["Location"] == "/accounts/login/"
    assert site.signed_in_as(attacker) is None
    assert any("did not complete" in m for m in messages_on_login(site, attacker))


@pytest.mark.parametrize(
    "query",
    [
        "code=x&state=y",
        "state=y",
        "error=access_denied&state=y",
        "code=x",
        "",
    ],
)
def test_a_forged_callback_is_a_redirect_to_sign_in(site: Site, query: str) -> None:
    """Without a sign-in under way in this browser, any callback goes back to sign-in."""
    session = requests.Session()
    answer = session.get(
        f"{site.url}/accounts/oidc/callback/?{query}", allow_redirects=False, timeout=10
    )
    assert answer.status_code == 302 and answer.headers["Location"] == "/accounts/login/"
    assert site.signed_in_as(session) is None
    assert messages_on_login(site, session) != []


def test_a_local_account_is_not_taken_over_by_the_provider(site: Site) -> None:
    """The provider's carol is refused while a local carol exists; local carol still signs in."""
    session = requests.Session()
    landed = sign_in(session, oidc_start(site, session), "carol")
    assert urlsplit(landed.url).path == "/accounts/login/"
    assert "a local account is named carol" in landed.text
    assert site.signed_in_as(session) is None
    local = requests.Session()
    local.get(f"{site.url}/accounts/login/", timeout=10)
    local.post(
        f"{site.url}/accounts/login/",
        data={
            "username": LOCAL_USER[0],
            "password": LOCAL_USER[1],
            "csrfmiddlewaretoken": local.cookies["csrftoken"],
        },
        headers={"Referer": f"{site.url}/accounts/login/"},
        timeout=10,
    )
    assert site.signed_in_as(local) == "carol"
    assert site.identity("carol")["usable_password"]


def test_sign_out_ends_the_provider_session_too(site: Site) -> None:
    """Sign-out goes to the provider's end_session_endpoint, which comes back to sign-in."""
    session = requests.Session()
    sign_in(session, oidc_start(site, session), "alice")
    answer = session.post(
        f"{site.url}/accounts/logout/",
        data={"csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": site.url + "/"},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        f"{site.provider.issuer}/session/end"
    )
    query = parse_qs(location.query)
    assert query["post_logout_redirect_uri"] == [f"{site.url}/accounts/login/"]
    assert query["client_id"] == [CLIENT_ID]
    assert site.signed_in_as(session) is None
    # The provider asks to confirm; confirming brings the browser back to the sign-in page.
    page = session.get(answer.headers["Location"], timeout=10)
    action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
    assert action is not None, page.text[:500]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    back = session.post(
        requests.compat.urljoin(page.url, action.group(1)),
        data={**fields, "logout": "yes"},
        timeout=10,
    )
    assert back.url == f"{site.url}/accounts/login/"
    # Signed out at the provider too: signing in again asks for the login again.
    start = session.get(oidc_start(site, session), timeout=10)
    assert 'name="prompt" value="login"' in start.text
