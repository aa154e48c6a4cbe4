"""`manage.py demo_people`: local accounts for the demo's two teams, alice and bob.

Their Kubernetes identity is their username and group (team-a, team-b), which the demo cluster's
RBAC (`demo.rbac`) lets read different namespaces. Passwords are random, printed once and kept
in VAR_DIR/demo-people (owner only); accounts that exist are left as they are.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand

from demo.rbac import TEAMS

PEOPLE = {"alice": "team-a", "bob": "team-b"}


class Command(BaseCommand):
    help = "Create the demo's alice (team-a) and bob (team-b) with random passwords, once."

    def handle(self, *args: Any, **options: Any) -> None:
        path = settings.VAR_DIR / "demo-people"
        created = []
        for name, team in PEOPLE.items():
            assert team in TEAMS
            if User.objects.filter(username=name).exists():
                continue
            password = secrets.token_urlsafe(12)
            user = User.objects.create_user(name, "", password)
            user.groups.add(Group.objects.get_or_create(name=team)[0])
            created.append(f"{name} ({team}): {password}")
        if not created:
            self.stdout.write(f"run: demo people alice and bob exist (passwords in {path})")
            return
        # Private from the start, as the admin password is.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as out:
            out.write("".join(line + "\n" for line in created))
        for line in created:
            self.stdout.write(f"run: demo person {line} (also in {path})")
