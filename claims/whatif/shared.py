"""Shared what-if answers: an answer kept as it was computed, behind an unguessable link.

A share link must show what its sender saw (the answer, its `cluster` state and `asOf`), not
what the cluster says when the link is opened; "run again now" is a separate POST. Kept answers
are bounded three ways: each is cut to SHARED_ANSWER_MAX_BYTES (`trim_answer`, as jobs are),
each expires after SHARED_TTL, and a submitter keeps at most SHARED_PER_SUBMITTER (their oldest
go first). Expired rows are deleted whenever a new one is kept.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from claims.models import SharedWhatIf
from claims.whatif.inputs import JSON, WhatIfError
from claims.whatif.request import read_text_option
from claims.whatif.trim import trim_answer
from inventory.visibility import visibility_of_user

__all__ = [
    "SHARED_ANSWER_MAX_BYTES",
    "SHARED_PER_SUBMITTER",
    "SHARED_TTL",
    "answer_namespaces",
    "keep_answer",
    "may_see",
    "shared_answer",
]

SHARED_TTL = timedelta(days=7)
SHARED_PER_SUBMITTER = 20
# A page shows at most 50 placements; the rest of a large answer is only weight.
SHARED_ANSWER_MAX_BYTES = 512 * 1024
# 32 random bytes, URL-safe: 43 characters.
_TOKEN_BYTES = 32


def _claim_namespaces(value: Any, depth: int = 0) -> Iterator[str]:
    """Namespaces named by `claim: namespace/name` and `namespace:` anywhere in an answer."""
    if depth > 6:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("claim", "pod") and isinstance(item, str) and "/" in item:
                yield item.split("/", 1)[0]
            elif key == "namespace" and isinstance(item, str):
                yield item
            else:
                yield from _claim_namespaces(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _claim_namespaces(item, depth + 1)


def answer_namespaces(answer: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """The namespaces a question and its answer touch: its default namespace, its claims' and
    pods', the quota's and those of claims its assumptions release."""
    found = set(_claim_namespaces(answer))
    found.add(str(values.get("namespace") or "").strip())
    template = str(values.get("template") or "")
    if "/" in template:
        found.add(template.split("/", 1)[0])
    assume = str(values.get("assume") or "")
    try:
        changes = read_text_option(assume, field="assume") if assume.strip() else []
    except WhatIfError:
        changes = []
    for change in changes if isinstance(changes, list) else []:
        claim = change.get("claim") if isinstance(change, Mapping) else None
        if isinstance(claim, str) and "/" in claim:
            found.add(claim.split("/", 1)[0])
    return sorted(name for name in found if name)


def keep_answer(
    answer: JSON, *, values: Mapping[str, str], source: str, submitter: str
) -> SharedWhatIf:
    """Keep `answer` (cut to size) with the form `values` that asked it; returns the row whose
    token names the share link."""
    now = timezone.now()
    SharedWhatIf.objects.filter(expires__lte=now).delete()
    kept = SharedWhatIf.objects.filter(submitter=submitter).order_by("-created", "-pk")
    stale = list(kept.values_list("pk", flat=True)[SHARED_PER_SUBMITTER - 1 :])
    if stale:
        SharedWhatIf.objects.filter(pk__in=stale).delete()
    return SharedWhatIf.objects.create(
        token=secrets.token_urlsafe(_TOKEN_BYTES),
        created=now,
        expires=now + SHARED_TTL,
        submitter=submitter,
        namespaces=answer_namespaces(answer, values),
        values={str(k): str(v) for k, v in values.items()},
        source=source[:300],
        answer=trim_answer(answer, max_bytes=SHARED_ANSWER_MAX_BYTES),
    )


def shared_answer(token: str) -> SharedWhatIf | None:
    """The kept answer a link names, or None when unknown or expired."""
    if not token or len(token) > 64:
        return None
    return SharedWhatIf.objects.filter(token=token, expires__gt=timezone.now()).first()


def may_see(user: AbstractBaseUser | AnonymousUser, shared: SharedWhatIf) -> bool:
    """Whether `user` may see a kept answer: its submitter always; anyone else only when they
    may see every namespace it touched.

    Namespaced objects are shown only for namespaces a person may list (DESIGN.md, visibility,
    `inventory.visibility`). This is the one place a shared answer's visibility is decided.
    """
    if not user.is_authenticated:
        return False
    if shared.submitter and shared.submitter == user.get_username():
        return True
    seen = visibility_of_user(user)
    return all(seen.allows(namespace) for namespace in shared.namespaces or [])
