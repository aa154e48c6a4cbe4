"""`accounts/` URLs: Django's auth views with a throttled login; password reset only with mail;
sign-in with the OpenID provider under `oidc/` (answering 404 while OIDC is off).

Without mail (DASHBOARD_EMAIL_HOST unset) a reset link could never arrive, and the form would
only tell strangers which addresses have accounts: the reset URLs answer 404.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path

from dashboard.oidc import AuthenticateView, CallbackView, SignInView, SignOutView


def mail_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.PASSWORD_RESET_ENABLED:
            raise Http404("password reset needs mail (DASHBOARD_EMAIL_HOST)")
        return view(request, *args, **kwargs)

    return wrapped


def password_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """People the OpenID provider signed in have no password here to change."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated and not request.user.has_usable_password():
            raise Http404("no password here: change it at your organisation's provider")
        return view(request, *args, **kwargs)

    return wrapped


urlpatterns = [
    path("login/", SignInView.as_view(), name="login"),
    path("logout/", SignOutView.as_view(), name="logout"),
    path("oidc/authenticate/", AuthenticateView.as_view(), name="oidc-authenticate"),
    # The redirect URI to register with the provider: https://<dashboard>/accounts/oidc/callback/
    path("oidc/callback/", CallbackView.as_view(), name="oidc-callback"),
    path(
        "password_change/",
        password_required(views.PasswordChangeView.as_view()),
        name="password_change",
    ),
    path(
        "password_change/done/",
        password_required(views.PasswordChangeDoneView.as_view()),
        name="password_change_done",
    ),
    path(
        "password_reset/",
        mail_required(views.PasswordResetView.as_view()),
        name="password_reset",
    ),
    path(
        "password_reset/done/",
        mail_required(views.PasswordResetDoneView.as_view()),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        mail_required(views.PasswordResetConfirmView.as_view()),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        mail_required(views.PasswordResetCompleteView.as_view()),
        name="password_reset_complete",
    ),
]
