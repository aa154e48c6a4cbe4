"""Sign-in with the organisation's OpenID provider, as the person Kubernetes RBAC sees.

mozilla-django-oidc runs the authorization code flow (state, nonce and PKCE checked against the
session); this module decides who the person is. The ID token is verified in full (signature
by the provider's published keys, algorithm, issuer, audience, expiry) and read the way
kube-apiserver reads it (`--oidc-username-claim`, `--oidc-username-prefix`,
`--oidc-groups-claim`, `--oidc-groups-prefix`): the Django user's `username` is that Kubernetes
username and the user's Django groups are exactly those Kubernetes groups, set again at every
sign-in, so a SubjectAccessReview made from them asks about the same identity kubectl would.

The userinfo endpoint is never asked: Kubernetes knows only the ID token, and identity must not
depend on what one of the two says. A bad callback (unknown state, replayed or forged code,
token that does not verify, provider down) is logged, counted against the client address by the
sign-in throttle, and answered with the sign-in page and a message, never a 500.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group
from django.contrib.auth.views import LogoutView, redirect_to_login
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)
from requests.auth import HTTPBasicAuth

from dashboard.env import ConfigError, OIDCSettings, check_provider_url, url_origin
from dashboard.throttle import (
    ThrottledLoginView,
    client_address,
    is_address_locked,
    record_address_failure,
)

logger = logging.getLogger(__name__)

# Django's own limits (auth_user.username, auth_group.name).
NAME_MAX_LENGTH = 150


class ProviderError(Exception):
    """The OpenID provider could not be reached or answered what the dashboard cannot use."""


class SignInRefused(Exception):
    """The provider vouched for someone the dashboard must not sign in; the message says why."""


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    jwks_uri: str
    end_session: str = ""


_discovered: dict[str, Endpoints] = {}
_discovery_lock = threading.Lock()


def configured() -> OIDCSettings:
    """The OIDC settings; 404 when OIDC sign-in is off."""
    config: OIDCSettings | None = settings.OIDC
    if config is None:
        raise Http404("OIDC sign-in is not configured (DASHBOARD_OIDC_ISSUER)")
    return config


def tls_verify(config: OIDCSettings) -> str | bool:
    return config.ca_file or True


def endpoints(config: OIDCSettings) -> Endpoints:
    """The provider's endpoints: configured ones, or its discovery document, read once.

    Read at the first sign-in rather than at startup, so that a provider that is down only
    fails sign-ins (and is asked again at the next one) instead of stopping the dashboard.
    """
    if config.authorization_endpoint:
        return Endpoints(
            config.authorization_endpoint,
            config.token_endpoint,
            config.jwks_uri,
            config.end_session_endpoint,
        )
    with _discovery_lock:
        found = _discovered.get(config.issuer)
        if found is None:
            found = _discover(config)
            _discovered[config.issuer] = found
    return found


def _discover(config: OIDCSettings) -> Endpoints:
    url = config.issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=config.timeout_seconds, verify=tls_verify(config))
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderError(f"discovery at {url} failed: {exc}") from exc
    if not isinstance(document, dict) or document.get("issuer") != config.issuer:
        # OpenID Connect Discovery 1.0 §4.3: the document must name the issuer it was read from.
        named = document.get("issuer") if isinstance(document, dict) else None
        raise ProviderError(f"discovery at {url} names issuer {named!r}, not {config.issuer!r}")
    found: dict[str, str] = {}
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri", "end_session_endpoint"):
        value = document.get(field) or ""
        if not isinstance(value, str) or (not value and field != "end_session_endpoint"):
            raise ProviderError(f"discovery at {url} has no usable {field}")
        if value:
            try:
                check_provider_url("OIDC_ISSUER", value)
            except ConfigError as exc:
                raise ProviderError(f"discovery at {url}: {field}: {exc}") from exc
        found[field] = value
    return Endpoints(
        found["authorization_endpoint"],
        found["token_endpoint"],
        found["jwks_uri"],
        found["end_session_endpoint"],
    )


def kubernetes_identity(token: dict[str, Any], config: OIDCSettings) -> tuple[str, list[str]]:
    """The username and groups kube-apiserver would derive from this ID token's fields.

    As upstream: the username claim must be a non-empty string; with the email claim, an
    `email_verified` present must be true; the groups claim is a string or a list of strings,
    and may be absent (no groups).
    """
    value = token.get(config.username_claim)
    if not isinstance(value, str) or not value:
        raise SignInRefused(f"the ID token has no {config.username_claim!r} claim to name you by")
    if config.username_claim == "email" and token.get("email_verified", True) is not True:
        raise SignInRefused(f"the provider has not verified the email address {value}")
    username = config.username_prefix + value
    raw_groups = token.get(config.groups_claim)
    if raw_groups is None:
        raw_groups = []
    elif isinstance(raw_groups, str):
        raw_groups = [raw_groups]
    if not isinstance(raw_groups, list) or not all(isinstance(g, str) for g in raw_groups):
        raise SignInRefused(f"the ID token's {config.groups_claim!r} claim is not a list of names")
    groups = sorted({config.groups_prefix + group for group in raw_groups if group})
    too_long = [name for name in (username, *groups) if len(name) > NAME_MAX_LENGTH]
    if too_long:
        raise SignInRefused(f"{too_long[0][:40]}… is longer than {NAME_MAX_LENGTH} characters")
    return username, groups


def library_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, from DASHBOARD_OIDC_* (settings.OIDC) and fixed choices."""
    config: OIDCSettings | None = settings.OIDC
    if config is not None:
        values: dict[str, Any] = {
            "OIDC_RP_CLIENT_ID": config.client_id,
            "OIDC_RP_CLIENT_SECRET": config.client_secret,
            "OIDC_RP_SCOPES": config.scopes,
            "OIDC_RP_SIGN_ALGO": config.signing_algorithm,
            "OIDC_VERIFY_SSL": tls_verify(config),
            "OIDC_TIMEOUT": config.timeout_seconds,
            "OIDC_PROXY": None,
            "OIDC_USE_NONCE": True,
            "OIDC_USE_PKCE": True,
            "OIDC_VERIFY_KID": True,
            "OIDC_ALLOW_UNSECURED_JWT": False,
            # Kept for the provider's logout (id_token_hint); the session lives in the database.
            "OIDC_STORE_ID_TOKEN": True,
            "OIDC_STORE_ACCESS_TOKEN": False,
            "OIDC_CREATE_USER": True,
            "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc-callback",
            "OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS": config.session_seconds,
            "LOGIN_REDIRECT_URL_FAILURE": settings.LOGIN_URL,
        }
        if attr in values:
            return values[attr]
    return import_from_settings(attr, *default)


class KubernetesIdentityBackend(OIDCAuthenticationBackend):
    """Signs in the person an ID token names, as their Kubernetes username and groups."""

    get_settings = staticmethod(library_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds every backend for every authenticate() call, OIDC on or off: nothing
        # is read here, only when a callback arrives.
        self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        config: OIDCSettings | None = settings.OIDC
        # Only the callback view passes a nonce; a password form never reaches the provider.
        if config is None or request is None or "nonce" not in kwargs:
            return None
        found = endpoints(config)
        self.OIDC_OP_TOKEN_ENDPOINT = found.token
        self.OIDC_OP_JWKS_ENDPOINT = found.jwks_uri
        self.OIDC_OP_USER_ENDPOINT = ""
        self.OIDC_RP_CLIENT_ID = config.client_id
        self.OIDC_RP_CLIENT_SECRET = config.client_secret
        self.OIDC_RP_SIGN_ALGO = config.signing_algorithm
        self.OIDC_RP_IDP_SIGN_KEY = None
        return super().authenticate(request, **kwargs)

    def get_user(self, user_id: Any) -> Any:
        # The library's get_user skips Django's is_active check: a deactivated person would
        # keep the session they have. ModelBackend's refuses them at their next request.
        return ModelBackend.get_user(self, user_id)

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The token response, the client authenticated by HTTP Basic (client_secret_basic).

        RFC 6749 §2.3.1 form-encodes the id and secret before Basic encoding them; the library
        sends them raw, which a secret with `%`, `+` or `:` breaks.
        """
        data = {k: v for k, v in payload.items() if k not in ("client_id", "client_secret")}
        auth = HTTPBasicAuth(quote_plus(payload["client_id"]), quote_plus(payload["client_secret"]))
        config = configured()
        response = requests.post(
            self.OIDC_OP_TOKEN_ENDPOINT,
            data=data,
            auth=auth,
            verify=tls_verify(config),
            timeout=config.timeout_seconds,
        )
        self.raise_token_response_error(response)
        answer = response.json()
        if not isinstance(answer, dict) or not isinstance(answer.get("id_token"), str):
            raise ProviderError("the token response has no id_token")
        return answer

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The ID token's fields, verified as kube-apiserver verifies them.

        The library checks the signature only; the issuer, the audience (this client) and the
        expiry are checked here too: a token issued to another client of the same provider
        must not sign anyone in.
        """
        config = configured()
        try:
            token: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[config.signing_algorithm],
                audience=config.client_id,
                issuer=config.issuer,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
                leeway=30,
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the ID token does not verify: {exc}") from exc
        return token

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        config = configured()
        username, groups = kubernetes_identity(payload, config)
        email = payload.get("email") if isinstance(payload.get("email"), str) else ""
        admin = not set(groups).isdisjoint(config.admin_groups)
        with transaction.atomic():
            user, created = self.UserModel.objects.select_for_update().get_or_create(
                username=username
            )
            if not created and user.has_usable_password():
                # A local account of that name (the embedded admin, say) stays its owner's.
                raise SignInRefused(f"a local account is named {username}; ask an administrator")
            if created:
                user.set_unusable_password()
            user.email = email or ""
            # The provider is the source of truth: leaving an admin group takes the rights away.
            user.is_staff = user.is_superuser = admin
            user.save()
            user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups])
        logger.info(
            "OIDC sign-in: %s, groups %s%s", username, ",".join(groups) or "-", " (admin)" * admin
        )
        return user


# What a failed callback may raise: the library's checks, the provider's answers, our own.
CALLBACK_FAILURES = (
    SignInRefused,
    SuspiciousOperation,
    ProviderError,
    requests.RequestException,
    jwt.PyJWTError,
    ValueError,
    KeyError,
    TypeError,
)


class CallbackView(OIDCAuthenticationCallbackView):
    """The redirect URI: the provider sends the browser back here with a code and the state."""

    get_settings = staticmethod(library_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        config = configured()
        address = client_address(request)
        if is_address_locked(address):
            # The sign-in page itself, as a browser shows no body of a redirect it cannot follow.
            messages.error(request, "Too many failed sign-ins from your address. Try again later.")
            response = SignInView.as_view()(request)
            response.status_code = 429
            return response
        issuer = request.GET.get("iss")
        if issuer is not None and issuer != config.issuer:
            # RFC 9207: an answer from another provider the browser was sent to (mix-up attack).
            logger.warning("OIDC callback from %s names issuer %r", address or "unknown", issuer)
            return self.refuse(f"Sign-in with {config.provider_name} did not complete.")
        try:
            return super().get(request)
        except SignInRefused as exc:
            logger.warning("OIDC sign-in refused from %s: %s", address or "unknown", exc)
            return self.refuse(f"Sign-in with {config.provider_name} refused: {exc}.")
        except CALLBACK_FAILURES as exc:
            logger.warning("OIDC callback failed from %s: %s", address or "unknown", exc)
            return self.refuse(
                f"Sign-in with {config.provider_name} did not complete (it expired, was used "
                "already or came from another browser). Please try again."
            )

    def login_failure(self) -> HttpResponse:
        error = self.request.GET.get("error")
        provider = configured().provider_name
        logger.warning(
            "OIDC callback failed from %s: %s",
            client_address(self.request) or "unknown",
            error or "no sign-in under way in this session",
        )
        if error:
            return self.refuse(f"{provider} did not sign you in ({error[:100]}).")
        return self.refuse(f"Sign-in with {provider} did not complete. Please try again.")

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        # Groups are read at sign-in only: the session ends in time for a change to count.
        self.request.session.set_expiry(configured().session_seconds)
        return response

    def refuse(self, message: str) -> HttpResponse:
        record_address_failure(client_address(self.request))
        messages.error(self.request, message)
        return redirect(settings.LOGIN_URL)


class AuthenticateView(OIDCAuthenticationRequestView):
    """`Sign in with …`: sends the browser to the provider with a fresh state, nonce and PKCE."""

    get_settings = staticmethod(library_setting)

    def __init__(self, **kwargs: Any) -> None:
        # The library reads the endpoints here, at every request; they are resolved in get().
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        config = configured()
        try:
            self.OIDC_OP_AUTH_ENDPOINT = endpoints(config).authorization
        except ProviderError as exc:
            logger.warning("OIDC provider unavailable: %s", exc)
            messages.error(request, f"{config.provider_name} cannot be reached. Try again later.")
            return redirect(settings.LOGIN_URL)
        self.OIDC_RP_CLIENT_ID = config.client_id
        return super().get(request)


class SignInView(ThrottledLoginView):
    """The sign-in page: the provider's button when OIDC is on, the password form unless off."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["oidc"] = settings.OIDC
        context["local_accounts"] = settings.LOCAL_ACCOUNTS
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_ACCOUNTS:
            raise PermissionDenied("local accounts are off (DASHBOARD_LOCAL_ACCOUNTS=0)")
        return super().post(request, *args, **kwargs)


def admin_sign_in(request: HttpRequest) -> HttpResponse:
    """The admin's password form while local accounts are on; else the dashboard's sign-in, so
    that an admin group's members reach the admin through the provider."""
    if settings.LOCAL_ACCOUNTS:
        return admin.site.login(request)
    return redirect_to_login(request.GET.get("next", reverse("admin:index")), settings.LOGIN_URL)


class SignOutView(LogoutView):
    """Signs out here, then at the provider too when it has an end_session_endpoint."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        config: OIDCSettings | None = settings.OIDC
        if config is None or not isinstance(id_token, str):
            return response
        try:
            end_session = endpoints(config).end_session
        except ProviderError as exc:
            logger.warning("OIDC provider unavailable at sign-out: %s", exc)
            return response
        if not end_session:
            return response
        if url_origin(end_session) not in config.origins:
            # The pages' form-action policy would stop the browser there: sign out here only.
            logger.warning(
                "OIDC end_session_endpoint %s is off the issuer's origin; set "
                "DASHBOARD_OIDC_END_SESSION_ENDPOINT to sign out at the provider too",
                end_session,
            )
            return response
        # OpenID Connect RP-Initiated Logout 1.0: the provider returns the browser to sign-in.
        query = urlencode(
            {
                "id_token_hint": id_token,
                "client_id": config.client_id,
                "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
            }
        )
        separator = "&" if "?" in end_session else "?"
        return HttpResponseRedirect(f"{end_session}{separator}{query}")
