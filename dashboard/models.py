"""The base's own tables: only what no app owns (sign-in throttling)."""

from __future__ import annotations

from django.db import models


class SignInThrottle(models.Model):
    """Failed sign-ins counted under one key, and the lock they led to (`dashboard.throttle`).

    Not a Kubernetes object. A key is a username from one client address, or one address for
    every username, hashed. Rows live in the database, shared by every web process and never
    evicted to make room for something else; a row is deleted once it `expires`.
    """

    key = models.CharField(max_length=64, help_text="SHA-256 of what is counted (hex).")
    failures = models.PositiveIntegerField(default=0)
    window_start = models.DateTimeField(help_text="Failures count from here.")
    locked_until = models.DateTimeField(null=True, blank=True)
    expires = models.DateTimeField(db_index=True, help_text="When the row says nothing more.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key"], name="sign_in_throttle_key_unique")]

    def __str__(self) -> str:
        return f"{self.key[:12]}: {self.failures} failures"
