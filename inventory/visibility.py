"""Which namespaces a person may see: the one home of that decision, asked of the cluster.

A person's Kubernetes identity is their Django username and the names of their Django groups
(the OIDC sign-in keeps both equal to the token's claims; local accounts use theirs). The API
server answers SubjectAccessReviews for that identity, so whatever authorizes the person in
kubectl (RBAC, webhooks) decides here too.

The rule, strict on purpose: a namespace is visible when the person may `list` both `pods`
(core) and `resourceclaims` (resource.k8s.io) there. Every namespaced page joins the two (a
claim names the pods it is reserved for, a pod its claims), so either right alone would leak the
other kind through the join; templates, quotas, LimitRanges and Events of the namespace go with
them (Kubernetes' own view/edit/admin roles grant those together with pods). One cluster-wide
review of each first: allowed everywhere means the whole view, without a review per namespace.
Otherwise pods are asked per namespace known to the database, and claims only where pods were
allowed.

Superusers see everything; with DASHBOARD_RBAC_VISIBILITY off every signed-in person does (the
behaviour before visibility existed, for a snapshot with no cluster to ask). Anonymous readers
(DASHBOARD_PUBLIC_READ) see cluster-scoped capacity only. When the API server cannot answer,
visibility fails closed: no namespace, and `error` says why (pages show it in a banner).

Answers are cached per identity (user and groups) for DASHBOARD_RBAC_CACHE_SECONDS, at most
DASHBOARD_RBAC_CACHE_SIZE identities, least recently used dropped first. The web server serves
from several threads: one identity's reviews run once while its other requests wait for them.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Model, Q, QuerySet

from dralib.kube.access import AccessQuestion, review
from dralib.kube.client import KubeClient, KubeError
from inventory.models import Namespace
from inventory.sync.watch.runner import client_from_settings

log = logging.getLogger(__name__)

RESOURCE_GROUP = "resource.k8s.io"
# Reviews of one person sent at once: a few, as the API server's in-flight limit is shared
# with the watchers (and with everyone else's reviews).
REVIEWS_IN_FLIGHT = 4
# A failed review is retried sooner than a good answer expires: the API server may be back.
FAILURE_SECONDS = 5.0
# What pages say instead of another namespace's claim or pod.
OTHER_CLAIM = "a claim in another namespace"
OTHER_POD = "a pod in another namespace"

M = TypeVar("M", bound=Model)
Identity = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Visibility:
    """What one person may see: every namespace, or these; `error` when the cluster was not
    asked successfully (then no namespace: fail closed)."""

    everything: bool
    namespaces: frozenset[str] = frozenset()
    error: str = ""

    def allows(self, namespace: str) -> bool:
        return self.everything or namespace in self.namespaces

    @property
    def key(self) -> str:
        """A short fingerprint: two people with the same key see the same rows (shared renders)."""
        if self.everything:
            return "all"
        digest = hashlib.sha256("\n".join(sorted(self.namespaces)).encode()).hexdigest()
        return f"ns-{digest[:16]}"


EVERYTHING = Visibility(everything=True)
NOTHING = Visibility(everything=False)


def scope_namespaced(
    queryset: QuerySet[M],
    visibility: Visibility,
    *,
    field: str = "namespace",
    cluster_scoped: bool = False,
) -> QuerySet[M]:
    """`queryset` narrowed to the rows whose `field` (a namespace name, or a lookup such as
    `claim__namespace`) the person may see; `cluster_scoped` keeps rows whose namespace is ""
    (a table of any kind). Every namespaced list goes through this."""
    if visibility.everything:
        return queryset
    allowed = Q(**{f"{field}__in": sorted(visibility.namespaces)})
    return queryset.filter(allowed | Q(**{field: ""}) if cluster_scoped else allowed)


def identity_of(user: Any) -> Identity:
    """The Kubernetes identity of a Django user: its username and its groups' names, sorted."""
    names = user.groups.order_by("name").values_list("name", flat=True)
    return str(user.get_username()), tuple(names)


def ask_cluster(
    identity: Identity,
    *,
    namespaces: list[str],
    client_factory: Callable[[], KubeClient] = client_from_settings,
) -> Visibility:
    """Ask the API server which of `namespaces` the identity may see (see the module's rule)."""
    user, groups = identity
    try:
        client = client_factory()
    except KubeError as exc:
        return Visibility(everything=False, error=f"no cluster to ask: {exc}")
    try:

        def may_list(resource: str, group: str, namespace: str) -> bool:
            question = AccessQuestion(
                user=user,
                groups=groups,
                verb="list",
                resource=resource,
                group=group,
                namespace=namespace,
            )
            return review(client, question).allowed

        if may_list("pods", "", "") and may_list("resourceclaims", RESOURCE_GROUP, ""):
            return EVERYTHING
        with ThreadPoolExecutor(max_workers=REVIEWS_IN_FLIGHT) as pool:
            pods = pool.map(lambda ns: may_list("pods", "", ns), namespaces)
            with_pods = [ns for ns, allowed in zip(namespaces, pods, strict=True) if allowed]
            claims = pool.map(lambda ns: may_list("resourceclaims", RESOURCE_GROUP, ns), with_pods)
            visible = [ns for ns, allowed in zip(with_pods, claims, strict=True) if allowed]
        return Visibility(everything=False, namespaces=frozenset(visible))
    except KubeError as exc:
        log.warning("SubjectAccessReview for %s failed: %s", user, exc)
        return Visibility(everything=False, error=f"the API server did not answer: {exc}")
    finally:
        client.api_client.close()


class VisibilityCache:
    """Answers per identity for `ttl` seconds, at most `size` identities, one lookup at a time
    per identity (concurrent requests of one person wait for the first one's reviews)."""

    def __init__(self, *, ttl: float, size: int, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._lock = threading.Lock()
        self._kept: OrderedDict[Identity, tuple[float, Visibility]] = OrderedDict()
        self._pending: dict[Identity, threading.Lock] = {}

    def get(self, identity: Identity, lookup: Callable[[], Visibility]) -> Visibility:
        kept = self._recall(identity)
        if kept is not None:
            return kept
        with self._lock:
            gate = self._pending.setdefault(identity, threading.Lock())
        with gate:
            kept = self._recall(identity)
            if kept is not None:
                return kept
            try:
                answer = lookup()
                keep = min(self.ttl, FAILURE_SECONDS) if answer.error else self.ttl
                with self._lock:
                    self._kept[identity] = (self.clock() + keep, answer)
                    self._kept.move_to_end(identity)
                    while len(self._kept) > self.size:
                        self._kept.popitem(last=False)
            finally:
                with self._lock:
                    self._pending.pop(identity, None)
        return answer

    def _recall(self, identity: Identity) -> Visibility | None:
        with self._lock:
            entry = self._kept.get(identity)
            if entry is None:
                return None
            if entry[0] <= self.clock():
                del self._kept[identity]
                return None
            self._kept.move_to_end(identity)
            return entry[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


cache = VisibilityCache(ttl=settings.RBAC_CACHE_SECONDS, size=settings.RBAC_CACHE_SIZE)


def visibility_of_user(user: Any) -> Visibility:
    """What `user` (a Django user, maybe anonymous) may see; asks the cluster when not cached."""
    if user is None or not user.is_authenticated:
        return NOTHING
    if user.is_superuser or not settings.RBAC_VISIBILITY:
        return EVERYTHING
    if not user.is_active:
        return NOTHING
    identity = identity_of(user)

    def lookup() -> Visibility:
        namespaces = list(Namespace.objects.order_by("name").values_list("name", flat=True))
        return ask_cluster(identity, namespaces=namespaces)

    return cache.get(identity, lookup)


def visibility_for(request: Any) -> Visibility:
    """The visibility of the person behind a Django or DRF request, computed once per request."""
    inner = getattr(request, "_request", request)
    found = getattr(inner, "_dashboard_visibility", None)
    if isinstance(found, Visibility):
        return found
    found = visibility_of_user(getattr(inner, "user", None))
    inner._dashboard_visibility = found
    return found


_POD_KEYS = frozenset({"pod", "pods", "victim", "victims", "consumer", "consumers"})


def hide_other_namespaces(value: Any, seen: Visibility) -> Any:
    """A copy of an answer (JSON: what-if, diagnosis) naming no object of a namespace `seen`
    does not allow: an object `{namespace, name...}` of one keeps only its kind of place, and a
    `namespace/name` in any string becomes "a claim (pod) in another namespace"."""
    if seen.everything:
        return value
    hidden = set(Namespace.objects.values_list("name", flat=True)) - seen.namespaces
    hidden |= {ns for ns in _namespaces_in(value, 0) if not seen.allows(ns)}
    if not hidden:
        return value
    names = "|".join(re.escape(ns) for ns in sorted(hidden, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.-])(?:{names})/[A-Za-z0-9][-A-Za-z0-9_.]*")
    return _hide(value, seen, pattern, key="", depth=0)


def _namespaces_in(value: Any, depth: int) -> set[str]:
    if depth > 64:
        return set()
    if isinstance(value, dict):
        found = {value["namespace"]} if isinstance(value.get("namespace"), str) else set()
        for item in value.values():
            found |= _namespaces_in(item, depth + 1)
        return found - {""}
    if isinstance(value, list):
        return set().union(*(_namespaces_in(item, depth + 1) for item in value))
    return set()


# Inside another namespace's object only these strings are kept: where and what it holds,
# never what it or its pods are called.
_PLACE_KEYS = frozenset({"request", "device", "driver", "pool", "stage", "kind", "resource"})


def _hide(value: Any, seen: Visibility, pattern: re.Pattern[str], *, key: str, depth: int) -> Any:
    other = OTHER_POD if key in _POD_KEYS else OTHER_CLAIM
    if isinstance(value, str):
        return pattern.sub(other, value)
    if depth > 64:
        return None  # deeper than any answer: dropped rather than shown unread
    if isinstance(value, list):
        return [_hide(item, seen, pattern, key=key, depth=depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    namespace = value.get("namespace")
    if isinstance(namespace, str) and namespace and not seen.allows(namespace):
        return _placed(value, key=key, depth=depth)
    return {k: _hide(v, seen, pattern, key=k, depth=depth + 1) for k, v in value.items()}


def _placed(value: dict[str, Any], *, key: str, depth: int) -> dict[str, Any]:
    """Another namespace's object: that it exists is said, and where, not what it is called."""
    kept = {k: _place_only(v, key=k, depth=depth + 1) for k, v in value.items()}
    kept = {k: v for k, v in kept.items() if v is not None and k not in ("name", "uid")}
    other = OTHER_POD if key in _POD_KEYS else OTHER_CLAIM
    return {**kept, "namespace": "", "name": other, "hidden": True}


def _place_only(value: Any, *, key: str, depth: int) -> Any:
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str):
        return value if key in _PLACE_KEYS else None
    if depth > 64:
        return None
    if isinstance(value, list):
        items = [_place_only(item, key=key, depth=depth + 1) for item in value]
        return [item for item in items if item is not None]
    if isinstance(value, dict):
        if "namespace" in value:
            return _placed(value, key=key, depth=depth)
        found = {k: _place_only(v, key=k, depth=depth + 1) for k, v in value.items()}
        return {k: v for k, v in found.items() if v is not None}
    return None


def sharing_key(request: Any) -> str:
    """The part of a shared live render's key that keeps people with different views apart."""
    return visibility_for(request).key
