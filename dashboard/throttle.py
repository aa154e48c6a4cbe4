"""Login throttling: too many failed sign-ins for one username from one address lock that pair out.

After settings.LOGIN_MAX_FAILURES failures within settings.LOGIN_LOCKOUT_SECONDS, the pair is
locked for LOGIN_LOCKOUT_SECONDS; every attempt meanwhile fails, the right password included. The
counters live in the Django cache (Redis when configured, so all web processes share them). The
pair, not the username alone, is locked so that a stranger cannot lock the admin out everywhere.
The backend enforces it for every sign-in form (the admin's too); the login view also says why.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)


def client_address(request: HttpRequest | None) -> str:
    """The peer address (a trusted proxy's X-Forwarded-For already applied by ProxyHeaders)."""
    return str(request.META.get("REMOTE_ADDR", "")) if request is not None else ""


def _key(kind: str, username: str, address: str) -> str:
    # Hashed: usernames are user input and cache keys must stay short and printable.
    digest = hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()
    return f"login:{kind}:{digest}"


def is_locked(username: str, address: str) -> bool:
    return cache.get(_key("locked", username, address)) is not None


def record_failure(username: str, address: str) -> bool:
    """Count one failed sign-in; True when it locks the pair out."""
    window = settings.LOGIN_LOCKOUT_SECONDS
    key = _key("failures", username, address)
    cache.add(key, 0, window)
    try:
        failures = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, window)
        failures = 1
    if failures < settings.LOGIN_MAX_FAILURES:
        return False
    cache.set(_key("locked", username, address), 1, settings.LOGIN_LOCKOUT_SECONDS)
    cache.delete(key)
    logger.warning(
        "sign-in locked for %s seconds after %s failures (address %s)",
        settings.LOGIN_LOCKOUT_SECONDS,
        failures,
        address or "unknown",
    )
    return True


def clear_failures(username: str, address: str) -> None:
    cache.delete(_key("failures", username, address))


class ThrottledModelBackend(ModelBackend):
    """ModelBackend that refuses locked (username, address) pairs and counts failures."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        address = client_address(request)
        if is_locked(username, address):
            # PermissionDenied stops authenticate() from asking any other backend.
            raise PermissionDenied("sign-in temporarily locked")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            record_failure(username, address)
        else:
            clear_failures(username, address)
        return user


class ThrottledAuthenticationForm(AuthenticationForm):
    """The sign-in form, telling a locked-out user so instead of "wrong password"."""

    locked = False

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username and is_locked(username, client_address(self.request)):
            self.locked = True
            minutes = max(1, settings.LOGIN_LOCKOUT_SECONDS // 60)
            raise ValidationError(
                f"Too many failed sign-ins. Try again in {minutes} minutes.", code="locked"
            )
        return super().clean()


class ThrottledLoginView(LoginView):
    """LoginView answering 429 while the username is locked out from this address."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if getattr(form, "locked", False):
            response.status_code = 429
        return response
