"""OIDC sign-in without a provider: settings, the Kubernetes identity of claims, ID token
verification, and callbacks that must end on the sign-in page (the end-to-end flow is in
test_oidc_signin.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.test import Client

from dashboard import oidc, scope
from dashboard.env import ConfigError, OIDCSettings, read_oidc
from tests.dashboard.test_settings_refusals import settings_error
from tests.paths import free_port

ISSUER = "https://idp.example.com/realms/org"
REQUIRED = {
    "DASHBOARD_OIDC_ISSUER": ISSUER,
    "DASHBOARD_OIDC_CLIENT_ID": "dra-dashboard",
    "DASHBOARD_OIDC_CLIENT_SECRET": "a-real-client-secret",
}


@pytest.fixture
def oidc_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def config(**changes: Any) -> OIDCSettings:
    values: dict[str, Any] = {
        "issuer": ISSUER,
        "client_id": "dra-dashboard",
        "client_secret": "a-real-client-secret",
        "username_prefix": ISSUER + "#",
    }
    return OIDCSettings(**{**values, **changes})


def test_no_oidc_variable_means_oidc_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local accounts only, and nothing is read from the network."""
    for name in REQUIRED:
        monkeypatch.delenv(name, raising=False)
    assert read_oidc() is None


def test_the_client_secret_may_come_from_a_file(oidc_env, tmp_path) -> None:
    """A mounted Secret: DASHBOARD_OIDC_CLIENT_SECRET_FILE alone configures the secret."""
    (tmp_path / "secret").write_text("secret-from-a-file\n")
    oidc_env.delenv("DASHBOARD_OIDC_CLIENT_SECRET")
    oidc_env.setenv("DASHBOARD_OIDC_CLIENT_SECRET_FILE", str(tmp_path / "secret"))
    settings = read_oidc()
    assert settings is not None and settings.client_secret == "secret-from-a-file"


def test_a_secret_file_alone_is_half_a_configuration(monkeypatch, tmp_path) -> None:
    (tmp_path / "secret").write_text("secret-from-a-file")
    for name in REQUIRED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DASHBOARD_OIDC_CLIENT_SECRET_FILE", str(tmp_path / "secret"))
    with pytest.raises(ConfigError, match="DASHBOARD_OIDC_CLIENT_SECRET set.*ISSUER"):
        read_oidc()


def test_the_defaults_are_kube_apiservers(oidc_env: pytest.MonkeyPatch) -> None:
    """sub as username, prefixed by the issuer and "#"; groups from "groups"; RS256."""
    settings = read_oidc()
    assert settings is not None
    assert (settings.username_claim, settings.username_prefix) == ("sub", ISSUER + "#")
    assert (settings.groups_claim, settings.groups_prefix) == ("groups", "")
    assert settings.signing_algorithm == "RS256"
    assert settings.admin_groups == ()


@pytest.mark.parametrize(
    ("claim", "prefix", "expected"),
    [
        ("email", "", ""),
        ("preferred_username", "", ISSUER + "#"),
        ("sub", "-", ""),
        ("email", "oidc:", "oidc:"),
    ],
)
def test_the_username_prefix_follows_kube_apiserver(
    oidc_env: pytest.MonkeyPatch, claim: str, prefix: str, expected: str
) -> None:
    """Unset: issuer# for any claim but email; "-": none; anything else as given."""
    oidc_env.setenv("DASHBOARD_OIDC_USERNAME_CLAIM", claim)
    oidc_env.setenv("DASHBOARD_OIDC_USERNAME_PREFIX", prefix)
    settings = read_oidc()
    assert settings is not None and settings.username_prefix == expected


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"DASHBOARD_OIDC_ISSUER": ""},
            "half configured .*DASHBOARD_OIDC_ISSUER missing",
        ),
        (
            {"DASHBOARD_OIDC_CLIENT_SECRET": ""},
            "half configured .*DASHBOARD_OIDC_CLIENT_SECRET missing",
        ),
        ({"DASHBOARD_OIDC_ISSUER": "http://idp.example.com"}, "plain HTTP off this host"),
        ({"DASHBOARD_OIDC_ISSUER": "idp.example.com"}, "expected an https:// URL"),
        ({"DASHBOARD_OIDC_CLIENT_SECRET": "CHANGE-ME-oidc"}, "client secret is the placeholder"),
        (
            {"DASHBOARD_OIDC_TOKEN_ENDPOINT": "https://idp.example.com/token"},
            "all together or not at all.*AUTHORIZATION_ENDPOINT",
        ),
        ({"DASHBOARD_OIDC_SIGNING_ALGORITHM": "HS256"}, "expected one of RS256"),
        ({"DASHBOARD_OIDC_SCOPES": "email groups"}, "must include openid"),
        ({"DASHBOARD_OIDC_CA_FILE": "/nonexistent/ca.pem"}, "not a readable file"),
        ({"DASHBOARD_OIDC_SESSION_SECONDS": "5"}, "at least 60"),
    ],
)
def test_unusable_oidc_settings_are_refused(
    oidc_env: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    """Each names the variable and what is wrong."""
    for name, value in variables.items():
        oidc_env.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        read_oidc()


def test_a_client_id_alone_stops_the_settings(tmp_path) -> None:
    """The process does not start half configured, nor with no way to sign in at all."""
    error = settings_error(tmp_path, DASHBOARD_OIDC_CLIENT_ID="dra-dashboard")
    assert "ConfigError" in error and "DASHBOARD_OIDC_ISSUER" in error
    error = settings_error(tmp_path, DASHBOARD_LOCAL_ACCOUNTS="0")
    assert "ConfigError" in error and "no way to sign in" in error
    assert settings_error(tmp_path, DASHBOARD_LOCAL_ACCOUNTS="0", **REQUIRED) == ""


@pytest.mark.parametrize(
    ("claims", "username", "groups"),
    [
        ({"sub": "1234", "groups": ["b", "a", "a"]}, ISSUER + "#1234", ["a", "b"]),
        ({"sub": "1234", "groups": "solo"}, ISSUER + "#1234", ["solo"]),
        ({"sub": "1234"}, ISSUER + "#1234", []),
    ],
)
def test_claims_give_the_kubernetes_identity(
    claims: dict[str, Any], username: str, groups: list[str]
) -> None:
    """A string or a list of groups, or none; duplicates once."""
    assert oidc.kubernetes_identity(claims, config()) == (username, groups)


def test_prefixes_apply_to_the_username_and_every_group() -> None:
    settings = config(username_claim="email", username_prefix="", groups_prefix="oidc:")
    claims = {"email": "alice@example.com", "email_verified": True, "groups": ["team-a"]}
    assert oidc.kubernetes_identity(claims, settings) == ("alice@example.com", ["oidc:team-a"])


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"groups": ["a"]}, "no 'sub' claim"),
        ({"sub": ""}, "no 'sub' claim"),
        ({"sub": 7}, "no 'sub' claim"),
        ({"sub": "x", "groups": [1]}, "not a list of names"),
        ({"sub": "x", "groups": {"a": 1}}, "not a list of names"),
        ({"sub": "x" * 200}, "longer than 150"),
        ({"sub": "x", "groups": ["g" * 151]}, "longer than 150"),
    ],
)
def test_claims_without_a_usable_identity_are_refused(claims: dict[str, Any], message: str) -> None:
    with pytest.raises(oidc.SignInRefused, match=message):
        oidc.kubernetes_identity(claims, config())


def test_an_unverified_email_is_no_username() -> None:
    """As kube-apiserver: with the email claim, email_verified present and false is refused."""
    settings = config(username_claim="email", username_prefix="")
    with pytest.raises(oidc.SignInRefused, match="not verified"):
        oidc.kubernetes_identity({"email": "a@example.com", "email_verified": False}, settings)
    assert oidc.kubernetes_identity({"email": "a@example.com"}, settings)[0] == "a@example.com"


KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def id_token(key: Any = KEY, algorithm: str = "RS256", **changes: Any) -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": "dra-dashboard",
        "sub": "alice",
        "iat": now,
        "exp": now + 300,
        "nonce": "n",
    }
    claims.update(changes)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm=algorithm)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (lambda: id_token(OTHER_KEY), "Signature verification failed"),
        (lambda: id_token(aud="another-client"), "Audience"),
        (lambda: id_token(iss="https://evil.example.com"), "issuer"),
        (lambda: id_token(exp=int(time.time()) - 3600), "expired"),
        (lambda: id_token(exp=None), "exp"),
        (lambda: id_token(KEY, "RS512"), "alg value is not allowed"),
        (lambda: id_token("shared-secret-" * 3, "HS256"), "alg value is not allowed"),
    ],
)
def test_an_id_token_that_does_not_verify_signs_nobody_in(settings, token, message: str) -> None:
    """Signature by the provider's key, algorithm, issuer, audience and expiry are checked."""
    settings.OIDC = config()
    backend = oidc.KubernetesIdentityBackend()
    with pytest.raises(SuspiciousOperation, match=message):
        backend._verify_jws(token(), KEY.public_key())


def test_a_good_id_token_gives_its_claims(settings) -> None:
    settings.OIDC = config()
    claims = oidc.KubernetesIdentityBackend()._verify_jws(id_token(), KEY.public_key())
    assert (claims["sub"], claims["aud"]) == ("alice", "dra-dashboard")


@pytest.fixture
def oidc_on(settings) -> OIDCSettings:
    # Nothing listens on this port: no callback below may reach the provider.
    issuer = f"http://127.0.0.1:{free_port()}"
    settings.OIDC = config(
        issuer=issuer,
        provider_name="Example SSO",
        username_prefix="",
        authorization_endpoint=f"{issuer}/auth",
        token_endpoint=f"{issuer}/token",
        jwks_uri=f"{issuer}/jwks",
    )
    return settings.OIDC


def test_a_provider_down_at_discovery_is_a_message_not_a_500(oidc_on, settings, db) -> None:
    """Endpoints read from discovery: no answer there sends the browser back with a message."""
    settings.OIDC = config(issuer=oidc_on.issuer, provider_name="Example SSO")
    client = Client()
    answer = client.get("/accounts/oidc/authenticate/")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert b"Example SSO cannot be reached" in client.get("/accounts/login/").content


def test_oidc_pages_answer_404_while_oidc_is_off(db, settings) -> None:
    settings.OIDC = None
    client = Client()
    assert client.get("/accounts/oidc/authenticate/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    page = client.get("/accounts/login/")
    assert b"Sign in with" not in page.content and b'id="id_password"' in page.content


def test_the_sign_in_page_offers_the_provider(oidc_on, db) -> None:
    page = Client().get("/accounts/login/?next=/nodes/")
    assert b"Sign in with Example SSO" in page.content
    assert b'href="/accounts/oidc/authenticate/?next=/nodes/"' in page.content
    assert b'id="id_password"' in page.content


def test_local_accounts_off_leaves_only_the_provider(oidc_on, settings, viewer_user) -> None:
    """No password form, and a posted password is refused even when it is right."""
    settings.LOCAL_ACCOUNTS = False
    settings.AUTHENTICATION_BACKENDS = ["dashboard.oidc.KubernetesIdentityBackend"]
    client = Client()
    page = client.get("/accounts/login/")
    assert b"Sign in with Example SSO" in page.content and b'id="id_password"' not in page.content
    answer = client.post("/accounts/login/", {"username": "viewer", "password": "viewer-password"})
    assert answer.status_code == 403
    assert "_auth_user_id" not in client.session


def test_a_callback_without_a_sign_in_under_way_goes_back_to_sign_in(oidc_on, db) -> None:
    client = Client()
    answer = client.get("/accounts/oidc/callback/?code=x&state=y")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert b"did not complete" in client.get("/accounts/login/").content
    assert "_auth_user_id" not in client.session


def test_an_unknown_state_goes_back_to_sign_in(oidc_on, db) -> None:
    """A sign-in is under way, but not the one the callback names: 302, not 400 or 500."""
    client = Client()
    start = client.get("/accounts/oidc/authenticate/")
    assert start.status_code == 302 and start["Location"].startswith(oidc_on.issuer)
    answer = client.get("/accounts/oidc/callback/?code=x&state=forged")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert "_auth_user_id" not in client.session


def test_the_authorization_request_carries_state_nonce_and_pkce(oidc_on, db) -> None:
    """What the callback is checked against is kept in this browser's session only."""
    client = Client()
    start = client.get("/accounts/oidc/authenticate/")
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["response_type"] == ["code"] and query["client_id"] == ["dra-dashboard"]
    assert query["redirect_uri"] == ["http://testserver/accounts/oidc/callback/"]
    assert query["code_challenge_method"] == ["S256"]
    [state] = query["state"]
    kept = client.session["oidc_states"][state]
    assert kept["nonce"] == query["nonce"][0] and len(kept["code_verifier"]) >= 43


@pytest.mark.parametrize(
    ("next_url", "kept"),
    [
        ("/nodes/?pool=a", "/nodes/?pool=a"),
        ("https://evil.example/", None),
        ("//evil.example/", None),
    ],
)
def test_only_a_local_next_is_kept_for_after_sign_in(oidc_on, db, next_url, kept) -> None:
    """The page to return to after the provider: this site's own, never another (open redirect)."""
    client = Client()
    start = client.get("/accounts/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302 and start["Location"].startswith(f"{oidc_on.issuer}/auth?")
    assert client.session["oidc_login_next"] == kept


def test_another_issuer_in_the_callback_is_refused(oidc_on, db) -> None:
    """RFC 9207's iss parameter naming another provider: refused before the code is used."""
    client = Client()
    client.get("/accounts/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    answer = client.get(
        "/accounts/oidc/callback/", {"code": "x", "state": state, "iss": "https://evil.example"}
    )
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert state in client.session["oidc_states"]


def test_an_unreachable_provider_is_a_message_not_a_500(oidc_on, db) -> None:
    """The callback's token request fails to connect: back to sign-in with a message."""
    client = Client()
    client.get("/accounts/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    answer = client.get("/accounts/oidc/callback/", {"code": "x", "state": state})
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/")
    assert "_auth_user_id" not in client.session


def test_bad_callbacks_lock_the_address_out(oidc_on, settings, db) -> None:
    """Counted against the client address like failed passwords; then 429 at once."""
    settings.LOGIN_MAX_ADDRESS_FAILURES = 3
    client = Client(REMOTE_ADDR="192.0.2.40")
    statuses = [client.get("/accounts/oidc/callback/?code=x&state=y").status_code for _ in range(4)]
    assert statuses == [302, 302, 302, 429]
    locked = client.get("/accounts/oidc/callback/?code=x&state=y")
    assert locked.status_code == 429 and b"Too many failed sign-ins" in locked.content
    other = Client(REMOTE_ADDR="192.0.2.41")
    assert other.get("/accounts/oidc/callback/?code=x&state=y").status_code == 302


class DiscoveryHandler(BaseHTTPRequestHandler):
    document: dict[str, Any] = {}
    requests = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).requests += 1
        body = json.dumps(self.document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def discovery() -> Iterator[tuple[str, type[DiscoveryHandler]]]:
    handler = type("Handler", (DiscoveryHandler,), {"document": {}, "requests": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=scope.carried(server.serve_forever), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_discovery_is_read_once_and_must_name_its_issuer(discovery, settings) -> None:
    """A document naming another issuer is refused; a good one is asked for once."""
    issuer, handler = discovery
    handler.document = {
        "issuer": "https://someone-else.example",
        "authorization_endpoint": f"{issuer}/auth",
        "token_endpoint": f"{issuer}/token",
        "jwks_uri": f"{issuer}/jwks",
    }
    with pytest.raises(oidc.ProviderError, match="names issuer 'https://someone-else.example'"):
        oidc.endpoints(config(issuer=issuer))
    handler.document = {**handler.document, "issuer": issuer}
    first = oidc.endpoints(config(issuer=issuer))
    again = oidc.endpoints(config(issuer=issuer))
    assert first == again == oidc.Endpoints(f"{issuer}/auth", f"{issuer}/token", f"{issuer}/jwks")
    assert handler.requests == 2


def test_discovered_plain_http_off_this_host_is_refused(discovery) -> None:
    issuer, handler = discovery
    handler.document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/auth",
        "token_endpoint": "http://idp.example.com/token",
        "jwks_uri": f"{issuer}/jwks",
    }
    with pytest.raises(oidc.ProviderError, match="token_endpoint.*plain HTTP"):
        oidc.endpoints(config(issuer=issuer))


def test_a_local_account_keeps_its_name(db, settings) -> None:
    """An ID token naming a local account's username is refused; the account is untouched."""
    settings.OIDC = config(username_prefix="")
    User.objects.create_user("admin", password="admin-password", is_staff=True)
    backend = oidc.KubernetesIdentityBackend()
    with pytest.raises(oidc.SignInRefused, match="local account is named admin"):
        backend.get_or_create_user("", "", {"sub": "admin", "groups": ["x"]})
    admin = User.objects.get(username="admin")
    assert admin.is_staff and admin.has_usable_password() and not admin.groups.exists()


def test_admin_groups_give_and_take_staff_and_superuser(db, settings) -> None:
    settings.OIDC = config(username_prefix="", admin_groups=("platform-admins",))
    backend = oidc.KubernetesIdentityBackend()
    user = backend.get_or_create_user("", "", {"sub": "dana", "groups": ["platform-admins"]})
    assert user.is_staff and user.is_superuser and not user.has_usable_password()
    user = backend.get_or_create_user("", "", {"sub": "dana", "groups": ["team-a"]})
    user.refresh_from_db()
    assert not user.is_staff and not user.is_superuser
    assert list(user.groups.values_list("name", flat=True)) == ["team-a"]


def test_a_deactivated_person_loses_their_session(db, settings) -> None:
    """An OIDC session of a user an admin deactivated is not honoured at the next request."""
    settings.OIDC = config(username_prefix="")
    backend = oidc.KubernetesIdentityBackend()
    user = backend.get_or_create_user("", "", {"sub": "erin", "groups": []})
    client = Client()
    client.force_login(user, backend="dashboard.oidc.KubernetesIdentityBackend")
    assert client.get("/accounts/password_change/").status_code == 404  # no password here
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert client.get("/accounts/password_change/")["Location"].startswith("/accounts/login/")


def test_the_pages_let_sign_out_go_on_to_the_provider_only(oidc_on, db, settings) -> None:
    """form-action names the provider's origin beside 'self' while OIDC is on, and only then."""
    policy = Client().get("/accounts/login/")["Content-Security-Policy"]
    assert f"form-action 'self' {oidc_on.issuer};" in policy
    settings.OIDC = None
    policy = Client().get("/accounts/login/")["Content-Security-Policy"]
    assert "form-action 'self';" in policy


def test_origins_are_the_issuers_and_a_configured_end_sessions() -> None:
    settings = config(end_session_endpoint="https://logout.example.com:8443/end?x=1")
    assert settings.origins == ("https://idp.example.com", "https://logout.example.com:8443")
    assert config().origins == ("https://idp.example.com",)


def test_local_accounts_still_change_their_password(viewer_client) -> None:
    assert viewer_client.get("/accounts/password_change/").status_code == 200


def test_the_admin_sign_in_follows_local_accounts(oidc_on, settings, db) -> None:
    """Its password form while local accounts are on; the provider's way in when they are off."""
    client = Client()
    assert b'id="id_password"' in client.get("/admin/login/?next=/admin/").content
    settings.LOCAL_ACCOUNTS = False
    answer = client.get("/admin/login/?next=/admin/")
    assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/?next=/admin/")
    assert client.get("/admin/")["Location"].startswith("/admin/login/")
