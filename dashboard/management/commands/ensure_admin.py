"""`manage.py ensure_admin`: make sure a first administrator exists and say how to sign in."""

import os
import secrets

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the 'admin' user with a random password on first run and print it once."

    def handle(self, *args, **options):
        path = settings.VAR_DIR / "admin-password"
        if User.objects.filter(is_superuser=True).exists():
            where = (
                f"the password of 'admin' is in {path}"
                if path.exists() and User.objects.filter(username="admin").exists()
                else "reset a password with `.venv/bin/python manage.py changepassword admin`"
            )
            self.stdout.write(f"run: sign in with your existing administrator account ({where})")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        path.unlink(missing_ok=True)
        # Created private: the password is never readable by others, not even for a moment.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(password + "\n")
        self.stdout.write(f"run: created user 'admin' with password {password} (also in {path})")
