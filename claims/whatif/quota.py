"""ResourceQuota admission for what-if pods and claims: would the API server reject them, and how
many copies fit.

Two of upstream's evaluators (`pkg/quota/v1/evaluator/core`, 1.36) count what the input creates:

- Pods (`pods.go`): `count/pods` and `pods`; `requests.cpu`, `requests.memory`,
  `requests.ephemeral-storage` (also spelled `cpu`, `memory`, `ephemeral-storage`) from PodRequests;
  `limits.*` of those from PodLimits; `hugepages-*` and `requests.hugepages-*`; `requests.<name>` of
  every extended resource the pod requests. A quota applies to a pod when it tracks one of those
  and all its scopes match the pod: `BestEffort` / `NotBestEffort` (QoS), `Terminating` /
  `NotTerminating` (activeDeadlineSeconds), `PriorityClass` (the scopeSelector's In, NotIn,
  Exists, DoesNotExist on `priorityClassName`) and `CrossNamespacePodAffinity`. A quota tracking
  cpu or memory in any spelling also needs every container to name it ("must specify", the
  evaluator's Constraints).
- ResourceClaims (`resource_claims.go`, KEP-4381 and the extended-resource form of KEP-5004): one
  `count/resourceclaims.resource.k8s.io`, and per DeviceClass the devices it may take, as
  `<class>.deviceclass.resource.k8s.io/devices` and
  `requests.deviceclass.resource.kubernetes.io/<class>` (plus `requests.<extendedResourceName>`
  when the class names one; for the claim the scheduler makes for a pod's extended resources,
  less what the pod itself was charged). ExactCount counts `count`, All counts the allocation
  maximum (32), and a `firstAvailable` request counts its largest alternative per class. A scoped
  quota never applies to claims.

Messages are the API server's: "exceeded quota: <name>, requested: <r>=<v>, used: ..., limited:
...", and "failed quota: <name>: must specify <resource> for: <containers>".
No Django: the demo cluster admits its claims with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from claims.whatif.extended import CLAIM_ANNOTATION
from claims.whatif.inputs import JSON, InputClaim
from claims.whatif.podasks import PodAsks
from claims.whatif.resources import (
    CPU,
    DEVICE_CLASS_RESOURCE_PREFIX,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    is_extended,
    quantity_text,
)
from dralib.allocator import ALLOCATION_RESULTS_MAX_SIZE
from dralib.allocator.quantity import Quantity, QuantityError

CLAIM_COUNT_KEY = "count/resourceclaims.resource.k8s.io"


def _device_count(view: Mapping[str, Any]) -> int:
    mode = view.get("allocationMode") or "ExactCount"
    if mode == "All":
        return ALLOCATION_RESULTS_MAX_SIZE
    count = view.get("count")
    return int(count) if isinstance(count, int) and count > 0 else 1


def claim_usage(spec: Mapping[str, Any], *, extended_names: Mapping[str, str]) -> dict[str, int]:
    """What one claim adds to its namespace's quota, per quota resource name."""
    usage: dict[str, int] = {CLAIM_COUNT_KEY: 1}
    per_class: dict[str, int] = {}
    for request in (spec.get("devices") or {}).get("requests") or []:
        alternatives = request.get("firstAvailable") or []
        if alternatives:
            largest: dict[str, int] = {}
            for sub in alternatives:
                name = str(sub.get("deviceClassName") or "")
                largest[name] = max(largest.get(name, 0), _device_count(sub))
            for name, count in largest.items():
                per_class[name] = per_class.get(name, 0) + count
        elif request.get("exactly"):
            name = str(request["exactly"].get("deviceClassName") or "")
            per_class[name] = per_class.get(name, 0) + _device_count(request["exactly"])
    for name, count in per_class.items():
        for key in (
            f"{name}.deviceclass.resource.k8s.io/devices",
            f"requests.deviceclass.resource.kubernetes.io/{name}",
        ):
            usage[key] = usage.get(key, 0) + count
        extended = extended_names.get(name)
        if extended:
            usage[f"requests.{extended}"] = usage.get(f"requests.{extended}", 0) + count
    return usage


def extended_resource_names(classes: Iterable[JSON]) -> dict[str, str]:
    """DeviceClass name -> spec.extendedResourceName, for classes that set one."""
    names = {}
    for device_class in classes:
        extended = (device_class.get("spec") or {}).get("extendedResourceName")
        if extended:
            names[str((device_class.get("metadata") or {}).get("name"))] = str(extended)
    return names


POD_COUNT_KEY = "count/pods"
# The pod evaluator's resources (podResources), its prefixes and Constraints' validation set.
_POD_RESOURCES = frozenset(
    {
        POD_COUNT_KEY,
        "pods",
        CPU,
        MEMORY,
        EPHEMERAL_STORAGE,
        f"requests.{CPU}",
        f"requests.{MEMORY}",
        f"requests.{EPHEMERAL_STORAGE}",
        f"limits.{CPU}",
        f"limits.{MEMORY}",
        f"limits.{EPHEMERAL_STORAGE}",
    }
)
_POD_PREFIXES = (HUGEPAGES_PREFIX, f"requests.{HUGEPAGES_PREFIX}")
_MUST_SPECIFY = frozenset(
    {CPU, MEMORY, f"requests.{CPU}", f"requests.{MEMORY}", f"limits.{CPU}", f"limits.{MEMORY}"}
)
_CLAIM_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
_CLAIM_EXTENDED_PREFIX = "requests.deviceclass.resource.kubernetes.io/"
NEVER_CLAIMS = "scoped: quota scopes never match ResourceClaims"
MATCHES_NO_POD = "scoped: its scopes match none of the pods (and never ResourceClaims)"

Usage = dict[str, Fraction]


@dataclass(frozen=True)
class QuotaObject:
    """One ResourceQuota as admission reads it: hard, used and its scope selectors."""

    name: str
    hard: Mapping[str, Any]
    used: Mapping[str, Any]
    scopes: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_spec(
        cls, name: str, hard: Mapping[str, Any], used: Mapping[str, Any], spec: Mapping[str, Any]
    ) -> QuotaObject:
        """With `spec.scopes` (each an Exists selector) and `spec.scopeSelector`'s expressions."""
        selectors: list[Mapping[str, Any]] = [
            {"scopeName": str(scope), "operator": "Exists"} for scope in spec.get("scopes") or []
        ]
        selector = spec.get("scopeSelector") or {}
        if isinstance(selector, Mapping):
            selectors.extend(
                e for e in selector.get("matchExpressions") or [] if isinstance(e, Mapping)
            )
        return cls(name, hard, used, tuple(selectors))


def _quota_objects(quotas: Iterable[Any]) -> list[QuotaObject]:
    return [q if isinstance(q, QuotaObject) else QuotaObject(q[0], q[1], q[2]) for q in quotas]


def _is_native(name: str) -> bool:
    if name.startswith(f"requests.{DEVICE_CLASS_RESOURCE_PREFIX}"):
        # What the pod evaluator charges for a class's implicit extended resource.
        return False
    return "/" not in name or "kubernetes.io/" in name


def pod_tracked(names: Iterable[str]) -> set[str]:
    """The pod evaluator's MatchingResources: the quota names it counts."""
    out = set()
    for name in names:
        if (
            name in _POD_RESOURCES
            or name.startswith(_POD_PREFIXES)
            or (name.startswith("requests.") and not _is_native(name))
        ):
            out.add(name)
    return out


def claim_tracked(names: Iterable[str], *, extended: Iterable[str] = ()) -> set[str]:
    """The ResourceClaim evaluator's MatchingResources (`extended`: the extended resource names
    DeviceClasses back)."""
    requests = {f"requests.{name}" for name in extended}
    return {
        name
        for name in names
        if name == CLAIM_COUNT_KEY
        or name.endswith(_CLAIM_CLASS_SUFFIX)
        or name.startswith(_CLAIM_EXTENDED_PREFIX)
        or name in requests
    }


def pod_usage(asks: PodAsks) -> Usage:
    """PodUsageFunc of a pod being created: its count, compute requests and limits."""
    usage: Usage = {POD_COUNT_KEY: Fraction(1), "pods": Fraction(1)}
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        if name in asks.requests:
            usage[name] = asks.requests[name]
            usage[f"requests.{name}"] = asks.requests[name]
        if name in asks.limits:
            usage[f"limits.{name}"] = asks.limits[name]
    for name, value in asks.requests.items():
        if name.startswith(HUGEPAGES_PREFIX):
            usage[name] = value
            usage[f"requests.{name}"] = value
        elif is_extended(name):
            usage[f"requests.{name}"] = value
    return usage


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(selector.get("scopeName") or "")
    operator = selector.get("operator")
    values = {str(v) for v in selector.get("values") or []}
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def pod_matches_scope(selector: Mapping[str, Any], asks: PodAsks) -> bool:
    """podMatchesScopeFunc."""
    scope = selector.get("scopeName")
    if scope == "Terminating":
        return asks.terminating
    if scope == "NotTerminating":
        return not asks.terminating
    if scope == "BestEffort":
        return asks.best_effort
    if scope == "NotBestEffort":
        return not asks.best_effort
    if scope == "PriorityClass":
        if selector.get("operator") == "Exists":
            return bool(asks.priority_class)
        labels = {"PriorityClass": asks.priority_class} if asks.priority_class else {}
        return _selector_matches(selector, labels)
    if scope == "CrossNamespacePodAffinity":
        return asks.cross_namespace_affinity
    return False


def pod_matches(quota: QuotaObject, asks: PodAsks) -> bool:
    """generic.Matches for the pod evaluator: it tracks something and every scope matches."""
    return bool(pod_tracked(quota.hard)) and all(pod_matches_scope(s, asks) for s in quota.scopes)


def must_specify(quota: QuotaObject, asks: PodAsks) -> str:
    """The pod evaluator's Constraints: "" or "must specify <resource> for: <containers>; ..."."""
    required = pod_tracked(quota.hard) & _MUST_SPECIFY
    if not required or asks.pod_level:
        # Pod-level resources stand for the containers' (PodLevelResources, beta since 1.34).
        return ""
    missing: dict[str, set[str]] = {}
    for container in asks.containers:
        named: set[str] = {"pods"}
        if CPU in container.requests:
            named |= {CPU, f"requests.{CPU}"}
        if CPU in container.limits:
            named.add(f"limits.{CPU}")
        if MEMORY in container.requests:
            named |= {MEMORY, f"requests.{MEMORY}"}
        if MEMORY in container.limits:
            named.add(f"limits.{MEMORY}")
        for name in required - named:
            missing.setdefault(name, set()).add(container.name)
    if not missing:
        return ""
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return f"must specify {'; '.join(parts)}"


def claims_usage(
    claims: Iterable[InputClaim],
    *,
    extended_names: Mapping[str, str],
    charged: Mapping[str, Fraction] | None = None,
) -> Usage:
    """What the claims the input creates add (existing and classic claims add nothing). The
    claim the scheduler makes for a pod's extended resources is not charged again for what the
    pod itself was charged (`charged`: the pod's usage)."""
    usage: Usage = {}
    for claim in claims:
        if claim.existing or claim.classic:
            continue
        own = claim_usage(claim.obj.get("spec") or {}, extended_names=extended_names)
        annotations = (claim.obj.get("metadata") or {}).get("annotations") or {}
        for key, value in own.items():
            amount = Fraction(value)
            if (
                charged
                and annotations.get(CLAIM_ANNOTATION) == "true"
                and (key.startswith("requests.") and key != CLAIM_COUNT_KEY)
            ):
                amount = max(amount - charged.get(key, Fraction(0)), Fraction(0))
            if amount:
                usage[key] = usage.get(key, Fraction(0)) + amount
    return usage


def _number(value: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(value))
    except (QuantityError, ValueError):
        return None


def _text(key: str, value: Fraction) -> str:
    return quantity_text(value, key)


@dataclass
class Creation:
    """What one pod of the input (or claims without a pod) would create, as quota counts it."""

    pod: PodAsks | None
    claims: Usage
    pod_usage: Usage = field(default_factory=dict)

    def usage_under(self, quota: QuotaObject, *, extended: Iterable[str]) -> tuple[Usage, str]:
        """(what this creation charges the quota, the Constraints refusal or "")."""
        charged: Usage = {}
        refusal = ""
        if self.pod is not None and pod_matches(quota, self.pod):
            refusal = must_specify(quota, self.pod)
            tracked = pod_tracked(quota.hard)
            charged.update({k: v for k, v in self.pod_usage.items() if k in tracked and v})
        if not quota.scopes:
            tracked = claim_tracked(quota.hard, extended=extended)
            for key, value in self.claims.items():
                if key in tracked and value:
                    charged[key] = charged.get(key, Fraction(0)) + value
        return charged, refusal


def creations(
    pods: Sequence[tuple[PodAsks | None, Sequence[InputClaim]]],
    *,
    extended_names: Mapping[str, str],
) -> list[Creation]:
    """Per pod of the quota's namespace (None: claims alone), what it creates."""
    out = []
    for asks, claims in pods:
        usage = pod_usage(asks) if asks is not None else {}
        out.append(
            Creation(
                pod=asks,
                claims=claims_usage(claims, extended_names=extended_names, charged=usage),
                pod_usage=usage,
            )
        )
    return out


def _exceeded(
    quota: QuotaObject, used: Mapping[str, Fraction], wanted: Mapping[str, Fraction]
) -> list[str]:
    keys = []
    for key, amount in wanted.items():
        hard = _number(quota.hard.get(key))
        if hard is not None and used.get(key, Fraction(0)) + amount > hard.exact:
            keys.append(key)
    return sorted(keys)


def _listing(values: Mapping[str, Any], keys: Iterable[str]) -> str:
    """prettyPrint: `key=value` sorted by key, joined by commas."""
    parts = []
    for key in sorted(keys):
        value = values.get(key)
        parts.append(
            f"{key}={value if isinstance(value, str) else _text(key, value or Fraction(0))}"
        )
    return ",".join(parts)


def exceeded_message(
    quota: QuotaObject,
    requested: Mapping[str, Fraction],
    used: Mapping[str, Fraction],
    keys: list[str],
) -> str:
    """The API server's words for a request over a quota."""
    return (
        f"exceeded quota: {quota.name}, requested: {_listing(requested, keys)}, "
        f"used: {_listing(used, keys)}, limited: {_listing(quota.hard, keys)}"
    )


def _used(quota: QuotaObject) -> Usage:
    out: Usage = {}
    for key in quota.hard:
        number = _number(quota.used.get(key, "0"))
        out[str(key)] = number.exact if number is not None else Fraction(0)
    return out


def admit_in_turn(
    entries: Sequence[Creation],
    *,
    quotas: Iterable[Any],
    extended: Iterable[str],
) -> list[str]:
    """Each creation admitted in order, as the API server admits pods created one by one: ""
    when admitted (its usage then counts for the next), else the refusal."""
    objects = _quota_objects(quotas)
    extended = list(extended)
    running = {q.name: _used(q) for q in objects}
    verdicts: list[str] = []
    for entry in entries:
        refusal = ""
        charges: list[tuple[QuotaObject, Usage]] = []
        for quota in objects:
            charged, constraint = entry.usage_under(quota, extended=extended)
            if constraint:
                refusal = f"failed quota: {quota.name}: {constraint}"
                break
            if not charged:
                continue
            over = _exceeded(quota, running[quota.name], charged)
            if over:
                refusal = exceeded_message(quota, charged, running[quota.name], over)
                break
            charges.append((quota, charged))
        verdicts.append(refusal)
        if refusal:
            continue
        for quota, charged in charges:
            used = running[quota.name]
            for key, value in charged.items():
                used[key] = used.get(key, Fraction(0)) + value
    return verdicts


def _whole(value: Fraction) -> int:
    return value.numerator if value.denominator == 1 else math.ceil(value)


def admission(
    claims: Sequence[InputClaim],
    *,
    namespace: str,
    quotas: Sequence[Any],
    classes: Iterable[JSON],
    copies: int,
    pods: Sequence[tuple[PodAsks | None, Sequence[InputClaim]]] | None = None,
) -> JSON:
    """Check what the input creates (times `copies`) against each quota of the namespace.

    `quotas`: `QuotaObject`s, or (name, hard, used) of unscoped ones. `pods`: per pod of the
    namespace, its asks and the claims it uses (None for claims asked without a pod); without
    it, `claims` are checked alone. Only claims the what-if would create count; a pod's
    existing claims are already counted.
    """
    class_list = list(classes)
    extended = extended_resource_names(class_list)
    objects = _quota_objects(quotas)
    entries = creations(pods if pods is not None else [(None, claims)], extended_names=extended)
    extended_names = set(extended.values())
    items: list[JSON] = []
    refusals: list[str] = []
    not_applied: list[JSON] = []
    copies_allowed: int | None = None
    for quota in objects:
        per_copy: Usage = {}
        for entry in entries:
            charged, constraint = entry.usage_under(quota, extended=extended_names)
            if constraint:
                refusals.append(f"failed quota: {quota.name}: {constraint}")
            for key, value in charged.items():
                per_copy[key] = per_copy.get(key, Fraction(0)) + value
        applies = any(
            (e.pod is not None and pod_matches(quota, e.pod)) or not quota.scopes for e in entries
        )
        if quota.scopes and not applies:
            has_pod = any(e.pod is not None for e in entries)
            not_applied.append(
                {"quota": quota.name, "reason": MATCHES_NO_POD if has_pod else NEVER_CLAIMS}
            )
            continue
        used = _used(quota)
        over: list[str] = []
        for key, hard_value in sorted(quota.hard.items()):
            wanted = per_copy.get(key)
            if not wanted:
                continue
            hard_q = _number(hard_value)
            if hard_q is None:
                continue
            room = hard_q.exact - used.get(key, Fraction(0))
            fit_copies = max(math.floor(room / wanted), 0)
            copies_allowed = (
                fit_copies if copies_allowed is None else min(copies_allowed, fit_copies)
            )
            total = wanted * copies
            exceeded = used.get(key, Fraction(0)) + total > hard_q.exact
            if exceeded:
                over.append(key)
            items.append(
                {
                    "quota": quota.name,
                    "resource": key,
                    "hard": str(hard_value),
                    "used": str(quota.used.get(key, "0")),
                    "requested": _whole(total),
                    "requestedQuantity": _text(key, total),
                    "exceeded": exceeded,
                }
            )
        if over:
            refusals.append(
                exceeded_message(quota, {k: per_copy[k] * copies for k in over}, used, over)
            )
    return {
        "namespace": namespace,
        "checked": bool(objects),
        "allowed": not refusals,
        "items": items,
        "copiesAllowed": copies_allowed,
        "message": "; ".join(dict.fromkeys(refusals)),
        "notApplied": not_applied,
    }
