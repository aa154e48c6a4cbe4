"""Sign-in throttling holds under load: no eviction lifts a lock, and spraying locks the address."""

from __future__ import annotations

import random
import string

import pytest
from django.contrib.auth import SESSION_KEY
from django.core.cache import cache
from django.test import Client

from dashboard import throttle
from dashboard.models import SignInThrottle

LOGIN = "/accounts/login/"
ATTACKER = "198.51.100.7"
VICTIM = "192.0.2.10"


@pytest.fixture(autouse=True)
def limits(settings) -> None:
    """Small limits, and a cheap hasher: hundreds of sign-ins (unknown names hash too)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.LOGIN_MAX_FAILURES = 3
    settings.LOGIN_MAX_ADDRESS_FAILURES = 10
    settings.LOGIN_LOCKOUT_SECONDS = 600


def sign_in(client: Client, user: str, password: str, *, address: str):
    return client.post(
        LOGIN, {"username": user, "password": password, "next": "/"}, REMOTE_ADDR=address
    )


def random_name(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=12))


def test_320_random_usernames_do_not_lift_a_lockout(viewer_user, settings) -> None:
    """The attacker locks the viewer out from its address, fails 320 more times with random
    usernames from there (the address limit set out of reach) and the cache is cleared: the
    viewer's right password is still refused from that address."""
    settings.LOGIN_MAX_ADDRESS_FAILURES = 10_000
    rng = random.Random(26)
    for _ in range(3):
        assert sign_in(Client(), "viewer", "wrong", address=ATTACKER).status_code == 200
    assert throttle.is_locked("viewer", ATTACKER)
    for _ in range(320):
        assert sign_in(Client(), random_name(rng), "wrong", address=ATTACKER).status_code == 200
    cache.clear()
    assert SignInThrottle.objects.count() == 322  # the viewer's, 320 names', the address's
    assert not throttle.is_locked("someone-else", ATTACKER)
    client = Client()
    assert sign_in(client, "viewer", "viewer-password", address=ATTACKER).status_code == 429
    assert SESSION_KEY not in client.session


def test_spraying_usernames_from_one_address_locks_the_address(viewer_user) -> None:
    """LOGIN_MAX_ADDRESS_FAILURES failures over as many usernames lock the address: a real
    account's right password from there is refused, and refused attempts write nothing."""
    rng = random.Random(7)
    statuses = [
        sign_in(Client(), random_name(rng), "Spring2026!", address=ATTACKER).status_code
        for _ in range(10)
    ]
    assert statuses == [200] * 10
    rows = SignInThrottle.objects.count()
    for _ in range(20):
        assert sign_in(Client(), random_name(rng), "x", address=ATTACKER).status_code == 429
    assert SignInThrottle.objects.count() == rows
    client = Client()
    assert sign_in(client, "viewer", "viewer-password", address=ATTACKER).status_code == 429
    assert SESSION_KEY not in client.session
    # Another address is not affected.
    assert sign_in(Client(), "viewer", "viewer-password", address=VICTIM).status_code == 302


def test_a_success_does_not_reset_the_address_count(viewer_user) -> None:
    """Signing in to an account one owns between guesses does not reset the address's count."""
    rng = random.Random(3)
    for round_ in range(5):
        for _ in range(2):
            sign_in(Client(), random_name(rng), "guess", address=ATTACKER)
        expected = 302 if round_ < 4 else 429
        assert sign_in(Client(), "viewer", "viewer-password", address=ATTACKER).status_code == (
            expected
        )
    assert throttle.is_locked("anyone", ATTACKER)


def test_expired_rows_are_deleted(db) -> None:
    """Counters past their window are deleted by the next failure: the table stays small."""

    throttle.record_failure("someone", ATTACKER)
    SignInThrottle.objects.update(
        expires=SignInThrottle.objects.get(key=throttle.address_key(ATTACKER)).window_start
    )
    throttle.record_failure("another", VICTIM)
    assert set(SignInThrottle.objects.values_list("key", flat=True)) == {
        throttle.pair_key("another", VICTIM),
        throttle.address_key(VICTIM),
    }
