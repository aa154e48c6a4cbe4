"""Which (apiVersion, kind) pairs are understood, and the two entry points built on them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import classic, core, names, slices, structured, validation
from .defaults import apply_request_defaults
from .errors import Context, NormalizeError, describe
from .schema import Obj, TooLarge, already_plain, plain
from .semantics import check_semantics
from .shapes import METADATA, TAINT_RULE, V1_KINDS, V1ALPHA3_KINDS, V1BETA1_KINDS

V1 = "resource.k8s.io/v1"
V1BETA2 = "resource.k8s.io/v1beta2"
V1BETA1 = "resource.k8s.io/v1beta1"
V1ALPHA3 = "resource.k8s.io/v1alpha3"
V1ALPHA2 = classic.V1ALPHA2
CORE_V1 = "v1"

# Rewrites a checked private copy in place; gets the context to report errors found on the way.
Rewrite = Callable[[dict[str, Any], Context], None]

NAMESPACED_KINDS = frozenset(
    {
        "ResourceClaim",
        "ResourceClaimTemplate",
        "PodSchedulingContext",
        "ResourceClaimParameters",
        "ResourceClassParameters",
        "Pod",
        "ResourceQuota",
        "LimitRange",
        "PodDisruptionBudget",
        "Event",
    }
)


@dataclass(frozen=True)
class _Entry:
    shape: Obj
    internal_api_version: str
    rewrite: Rewrite | None = None


def _keep(obj: dict[str, Any], ctx: Context) -> None:
    return None


def _only(rewrite: Callable[[dict[str, Any]], None]) -> Rewrite:
    def run(obj: dict[str, Any], ctx: Context) -> None:
        rewrite(obj)

    return run


def _build() -> dict[tuple[str, str], _Entry]:
    table: dict[tuple[str, str], _Entry] = {}
    for kind, shape in V1_KINDS.items():
        table[(V1, kind)] = _Entry(shape, V1, _only(structured.tidy))
        table[(V1BETA2, kind)] = _Entry(shape, V1, _only(structured.tidy))
    for kind, shape in V1BETA1_KINDS.items():
        table[(V1BETA1, kind)] = _Entry(shape, V1, _only(structured.v1beta1_to_v1))
    for kind, shape in V1ALPHA3_KINDS.items():
        table[(V1ALPHA3, kind)] = _Entry(shape, V1, _only(structured.v1alpha3_to_v1))
    for version in (V1, V1BETA2, V1ALPHA3):
        table[(version, "DeviceTaintRule")] = _Entry(TAINT_RULE, V1)
    for kind, shape in classic.KINDS.items():
        if kind == "ResourceSlice":
            table[(V1ALPHA2, kind)] = _Entry(shape, V1, classic.slice_to_v1)
        elif kind in classic.CONVERTED_KINDS:
            table[(V1ALPHA2, kind)] = _Entry(shape, V1, classic.claim_to_v1)
        else:
            table[(V1ALPHA2, kind)] = _Entry(shape, V1ALPHA2)
    # 1.31 still served PodSchedulingContext, unchanged, under v1alpha3.
    table[(V1ALPHA3, "PodSchedulingContext")] = _Entry(
        classic.KINDS["PodSchedulingContext"], V1ALPHA2
    )
    for kind, shape in core.KINDS.items():
        rewrite = _only(core.pod_to_current) if kind == "Pod" else None
        table[(CORE_V1, kind)] = _Entry(shape, CORE_V1, rewrite)
    for (api_version, kind), shape in core.GROUPED_KINDS.items():
        table[(api_version, kind)] = _Entry(shape, api_version)
    return table


_TABLE = _build()
_KNOWN_KINDS = frozenset(kind for _, kind in _TABLE)

SUPPORTED: dict[tuple[str, str], tuple[str, str]] = {
    pair: (entry.internal_api_version, pair[1]) for pair, entry in _TABLE.items()
}
"""Every served (apiVersion, kind) `normalize` accepts, mapped to the internal pair it yields."""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _context(obj: Mapping[str, Any], kind: str) -> Context:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return Context(kind=kind, name="", namespace="")
    return Context(
        kind=kind, name=_text(metadata.get("name")), namespace=_text(metadata.get("namespace"))
    )


def _lookup(
    obj: Mapping[str, Any], *, api_version: str | None, kind: str | None
) -> tuple[str, str, _Entry, Context]:
    """Find the entry for `obj`; `api_version` and `kind` stand in for missing TypeMeta."""
    found_kind = obj.get("kind", kind)
    ctx = _context(obj, found_kind if isinstance(found_kind, str) else "")
    if found_kind is None:
        raise ctx.error("kind", "required field missing")
    if not isinstance(found_kind, str):
        raise ctx.error("kind", f"expected a string, got {describe(found_kind)}")
    found_version = obj.get("apiVersion", api_version)
    if found_version is None:
        raise ctx.error("apiVersion", "required field missing")
    if not isinstance(found_version, str):
        raise ctx.error("apiVersion", f"expected a string, got {describe(found_version)}")
    entry = _TABLE.get((found_version, found_kind))
    if entry is None:
        if found_kind in _KNOWN_KINDS:
            reason = f"unsupported apiVersion {found_version} for {found_kind}"
            raise ctx.error("apiVersion", reason)
        raise ctx.error("kind", f"unsupported kind {found_kind} (apiVersion {found_version})")
    return found_version, found_kind, entry, ctx


def _check(obj: Mapping[str, Any], *, kind: str, entry: _Entry, ctx: Context) -> None:
    if obj.get("metadata") is None:
        raise ctx.error("metadata", "required field missing")
    # Walked without paths first: a path is built only to name a field that does not fit (the
    # paths of every field checked were a fifth of normalizing a snapshot).
    if not METADATA.fits_all(obj["metadata"]):
        METADATA.check(obj["metadata"], "metadata", ctx)
    for name in ("name", "uid"):
        if obj["metadata"][name] == "":
            raise ctx.error(f"metadata.{name}", "must not be empty")
    if kind in NAMESPACED_KINDS and not obj["metadata"].get("namespace"):
        raise ctx.error("metadata.namespace", "required field missing")
    if not entry.shape.fits_all(obj):
        entry.shape.check(obj, "", ctx)


def normalize(
    obj: Mapping[str, Any],
    *,
    api_version: str | None = None,
    kind: str | None = None,
    validate: bool = False,
    owned: bool = False,
    plain_already: bool = False,
) -> dict[str, Any]:
    """Check one object as the API server sent it and return it in the internal v1 shape: a new
    dict, unless `owned`.

    `api_version` and `kind` stand in when the object lacks them, as items of a list response do.
    Fields this code does not know are kept. Raises NormalizeError naming the object and field.

    `validate` adds the API server's create-time validation (names, limits, CEL, one-of rules;
    see `validation`) for objects a user wrote or imported. Objects the API server sent were
    validated when stored, possibly under older rules that it still honours for them, so the
    sync leaves it off, as the API server itself does not re-check stored objects.

    `owned` says the caller gives `obj` away (just parsed, referenced nowhere else, not read
    again): when it is already plain JSON within the copy's bounds, it is rewritten in place and
    returned instead of copied (the copy was a fifth of normalizing a snapshot). The checks and
    errors are the same either way. `plain_already` (with `owned`) says the caller knows `obj`
    is what `plain` would make of it (dicts, lists and JSON scalars, within its depth and size
    bounds, as a bounded reader's value can be proven to be), so it is not walked to check.
    """
    if not isinstance(obj, Mapping):
        raise NormalizeError(
            kind=kind or "",
            name="",
            namespace="",
            field="",
            reason=f"expected a mapping, got {describe(obj)}",
        )
    found_version, found_kind, entry, ctx = _lookup(obj, api_version=api_version, kind=kind)
    _check(obj, kind=found_kind, entry=entry, ctx=ctx)
    try:
        if owned and (plain_already or already_plain(obj)):
            result: dict[str, Any] = obj  # type: ignore[assignment]
        else:
            result = plain(obj)
    except TooLarge as exc:
        raise ctx.error(exc.path, exc.reason) from exc
    result["apiVersion"] = entry.internal_api_version
    result["kind"] = found_kind
    (entry.rewrite or _keep)(result, ctx)
    # The API server defaults a request (allocationMode, count) before it validates it.
    apply_request_defaults(result)

    def fail(path: str, reason: str) -> NormalizeError:
        return ctx.error(served_path(path, api_version=found_version, kind=found_kind), reason)

    check_semantics(result, fail=fail)
    if validate:
        _validate(result, api_version=found_version, fail=fail)
    return result


_EXACTLY = re.compile(r"^(spec(?:\.spec)?\.devices\.requests\[\d+\])\.exactly(?=\.|$)")
_BASIC = re.compile(r"^(spec\.devices\[\d+\])\.(?!name(?:$|\.))")
_PLAIN_CAPACITY = re.compile(r"^(spec\.devices\[\d+\]\.basic\.capacity\[[^\]]*\])\.value$")


def served_path(path: str, *, api_version: str, kind: str) -> str:
    """A path in the v1 shape as the served version spells it (v1beta1's inline requests...)."""
    if api_version not in (V1BETA1, V1ALPHA3):
        return path
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        return _EXACTLY.sub(r"\1", path)
    if kind == "ResourceSlice":
        path = _BASIC.sub(r"\1.basic.", path)
        if api_version == V1ALPHA3:
            path = _PLAIN_CAPACITY.sub(r"\1", path)
    return path


def _validate(
    obj: dict[str, Any], *, api_version: str, fail: Callable[[str, str], Exception]
) -> None:
    """The API server's checks of what the dashboard reads; see `validation`."""
    kind = obj["kind"]
    validation.validate_metadata(obj["metadata"], path="metadata", fail=fail, named=True)
    spec = obj.get("spec")
    if api_version in (V1ALPHA2, CORE_V1):
        if kind == "Pod":
            _validate_pod(spec, fail=fail)
        elif kind == "Node":
            for index, taint in validation.dicts(validation.mapping(spec).get("taints")):
                validation.check_taint(
                    taint,
                    path=f"spec.taints[{index}]",
                    fail=fail,
                    effects=validation.NODE_TAINT_EFFECTS,
                )
        return
    inline = api_version in (V1BETA1, V1ALPHA3)
    if kind == "ResourceSlice":
        slices.validate_slice(spec, fail=fail, v1=api_version == V1)
    elif kind == "DeviceClass":
        validation.validate_device_class(spec, fail=fail)
    elif kind == "ResourceClaim":
        validation.validate_claim_spec(spec, path="spec", fail=fail, inline=inline)
    elif kind == "ResourceClaimTemplate":
        template = validation.mapping(spec)
        validation.validate_metadata(
            validation.mapping(template.get("metadata")),
            path="spec.metadata",
            fail=fail,
            named=False,
        )
        validation.validate_claim_spec(
            template.get("spec"), path="spec.spec", fail=fail, inline=inline
        )
    elif kind == "DeviceTaintRule":
        slices.validate_taint_rule(spec, fail=fail)


def _validate_pod(spec: Any, *, fail: Callable[[str, str], Exception]) -> None:
    for index, claim in validation.dicts(validation.mapping(spec).get("resourceClaims")):
        where = f"spec.resourceClaims[{index}]"
        validation.require_name(
            claim.get("name"), names.dns1123_label, path=f"{where}.name", fail=fail
        )
        refs = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
        if len(refs) != 1:
            raise fail(
                where,
                "must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )
        validation.require_name(
            claim[refs[0]], names.dns1123_subdomain, path=f"{where}.{refs[0]}", fail=fail
        )


_SERVABLE = {
    V1: None,
    V1BETA2: None,
    V1BETA1: structured.v1_to_v1beta1,
    V1ALPHA3: structured.v1_to_v1alpha3,
}
_SERVABLE_KINDS = frozenset(V1_KINDS) | {"DeviceTaintRule"}


def to_version(obj_v1: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    """Return a new dict showing an internal v1 object as `api_version` would serve it.

    Covers ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate (and DeviceTaintRule
    where that version serves it); `normalize(to_version(x, v)) == x` for those.
    """
    source = normalize(obj_v1)
    kind = source["kind"]
    ctx = _context(source, kind)
    if source["apiVersion"] != V1 or kind not in _SERVABLE_KINDS:
        raise ctx.error("kind", f"{kind} {source['apiVersion']} cannot be converted")
    if api_version not in _SERVABLE or (api_version, kind) not in _TABLE:
        raise ctx.error("apiVersion", f"unsupported apiVersion {api_version} for {kind}")
    classic_fields = source.get("classic")
    # Only 1.31's controller fields have a home outside v1, and only in v1alpha3.
    alpha_only = set(classic_fields or ()) <= set(structured.ALPHA_CLASSIC_FIELDS)
    if classic_fields and api_version != V1 and not (api_version == V1ALPHA3 and alpha_only):
        raise ctx.error("classic", f"classic fields cannot be served as {api_version}")
    rewrite = _SERVABLE[api_version]
    if rewrite is not None:
        rewrite(source)
    source["apiVersion"] = api_version
    return source
