"""Login throttling: failed sign-ins lock out a username from one address, and then the address.

Two counters per failure, each locking for settings.LOGIN_LOCKOUT_SECONDS once it reaches its
limit within that many seconds; while locked every attempt fails, the right password included:

* the username from this address, at LOGIN_MAX_FAILURES: the pair, not the username alone, so
  that a stranger cannot lock the admin out everywhere;
* the address, whatever the usernames, at LOGIN_MAX_ADDRESS_FAILURES: password spraying (one
  password tried against many usernames) from one address. A successful sign-in clears its
  pair's count, never the address's.

The counters are rows of `SignInThrottle` in the database: every web process shares them, and
nothing else competes for their room (in a local-memory cache, what-if answers evicted them).
A locked key is refused before any password is checked, so it costs no write. The backend
enforces this for every sign-in form (the admin's too); the login view also says why.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboard.models import SignInThrottle

logger = logging.getLogger(__name__)


def client_address(request: HttpRequest | None) -> str:
    """The peer address (a trusted proxy's X-Forwarded-For already applied by ProxyHeaders)."""
    return str(request.META.get("REMOTE_ADDR", "")) if request is not None else ""


def _key(*parts: str) -> str:
    # Hashed: usernames are user input of any length.
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def pair_key(username: str, address: str) -> str:
    return _key("pair", username.casefold(), address)


def address_key(address: str) -> str:
    return _key("address", address)


def is_locked(username: str, address: str) -> bool:
    """Whether the username from this address, or the address itself, is locked out now."""
    return SignInThrottle.objects.filter(
        key__in=[pair_key(username, address), address_key(address)],
        locked_until__gt=timezone.now(),
    ).exists()


def _count(key: str, *, limit: int, now: datetime) -> bool:
    """One more failure under `key`; True when it locks the key."""
    window = timedelta(seconds=settings.LOGIN_LOCKOUT_SECONDS)
    row, _ = SignInThrottle.objects.select_for_update().get_or_create(
        key=key, defaults={"window_start": now, "expires": now + window}
    )
    if row.window_start + window <= now:
        row.failures, row.window_start = 0, now
    row.failures += 1
    locked = row.failures >= limit
    if locked:
        row.locked_until = now + window
        row.failures, row.window_start = 0, now
    row.expires = max(row.window_start + window, row.locked_until or now)
    row.save()
    return locked


def record_failure(username: str, address: str) -> bool:
    """Count one failed sign-in for the pair and the address; True when either is now locked."""
    now = timezone.now()
    with transaction.atomic():
        SignInThrottle.objects.filter(expires__lte=now).delete()
        pair = _count(pair_key(username, address), limit=settings.LOGIN_MAX_FAILURES, now=now)
        spraying = _count(address_key(address), limit=settings.LOGIN_MAX_ADDRESS_FAILURES, now=now)
    if pair or spraying:
        logger.warning(
            "sign-in locked for %s seconds: %s (address %s)",
            settings.LOGIN_LOCKOUT_SECONDS,
            "too many failures from this address" if spraying else "too many for one username",
            address or "unknown",
        )
    return pair or spraying


def is_address_locked(address: str) -> bool:
    """Whether the address is locked out now, whatever the username (OIDC callbacks have none)."""
    return SignInThrottle.objects.filter(
        key=address_key(address), locked_until__gt=timezone.now()
    ).exists()


def record_address_failure(address: str) -> bool:
    """Count a failed sign-in that names nobody (a bad OIDC callback) against the address."""
    now = timezone.now()
    with transaction.atomic():
        SignInThrottle.objects.filter(expires__lte=now).delete()
        locked = _count(address_key(address), limit=settings.LOGIN_MAX_ADDRESS_FAILURES, now=now)
    if locked:
        logger.warning(
            "sign-in locked for %s seconds: too many failures from this address (address %s)",
            settings.LOGIN_LOCKOUT_SECONDS,
            address or "unknown",
        )
    return locked


def clear_failures(username: str, address: str) -> None:
    """Forget the pair's failures (after a successful sign-in); the address keeps its count."""
    SignInThrottle.objects.filter(key=pair_key(username, address)).delete()


class ThrottledModelBackend(ModelBackend):
    """ModelBackend that refuses locked pairs and addresses, and counts failures."""

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
    """LoginView answering 429 while the username, or the address, is locked out."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if getattr(form, "locked", False):
            response.status_code = 429
        return response
