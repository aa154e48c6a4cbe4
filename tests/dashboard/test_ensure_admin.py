"""`manage.py ensure_admin`: the first administrator, and where to find its password later."""

from __future__ import annotations

import io
import stat

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command


def run() -> str:
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_first_run_creates_admin_and_a_private_password_file(settings, tmp_path) -> None:
    """The first run creates 'admin', prints the password and keeps it in a 0600 file."""
    settings.VAR_DIR = tmp_path
    said = run()
    password = (tmp_path / "admin-password").read_text().strip()
    assert f"password {password}" in said
    assert User.objects.get(username="admin").check_password(password)
    assert stat.S_IMODE((tmp_path / "admin-password").stat().st_mode) == 0o600


@pytest.mark.django_db
def test_second_run_says_where_the_password_is(settings, tmp_path) -> None:
    """A later run names the password file instead of pointing at credentials it never printed."""
    settings.VAR_DIR = tmp_path
    run()
    said = run()
    assert str(tmp_path / "admin-password") in said
    assert "above" not in said
    assert User.objects.filter(is_superuser=True).count() == 1


@pytest.mark.django_db
def test_existing_admin_without_file_gets_the_reset_command(settings, tmp_path) -> None:
    """When the file is gone, the run says how to set a new password."""
    settings.VAR_DIR = tmp_path
    User.objects.create_superuser("root", "", "x")
    assert "changepassword" in run()
