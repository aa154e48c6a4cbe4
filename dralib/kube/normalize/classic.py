"""Classic DRA (resource.k8s.io/v1alpha2, Kubernetes 1.27-1.30): shapes and the mapping to v1.

Claims, templates and 1.30 `namedResources` slices become their v1 kinds with the fields v1 has
no place for carried in a top-level `classic` mapping. ResourceClass, PodSchedulingContext and the
1.30 parameter kinds have no v1 counterpart and keep their v1alpha2 shape.
"""

from __future__ import annotations

from typing import Any

from .errors import Context
from .schema import ANY, BOOL, INT, QUANTITY, STR, ListOf, Obj, child, item, obj, plain
from .shapes import CONSUMER, NODE_SELECTOR, STRINGS, TEMPLATE_METADATA

V1ALPHA2 = "resource.k8s.io/v1alpha2"

_CLAIM_PARAMETERS_REF = obj(required=("kind", "name"), apiGroup=STR, kind=STR, name=STR)
_CLASS_PARAMETERS_REF = _CLAIM_PARAMETERS_REF.extend(namespace=STR)
_CLAIM_SPEC = obj(
    required=("resourceClassName",),
    resourceClassName=STR,
    parametersRef=_CLAIM_PARAMETERS_REF,
    allocationMode=STR,
)
_NAMED_SELECTOR = obj(required=("selector",), selector=STR)
_STRUCTURED_HANDLE = obj(
    vendorClassParameters=ANY,
    vendorClaimParameters=ANY,
    nodeName=STR,
    results=ListOf(
        obj(
            vendorRequestParameters=ANY,
            namedResources=obj(required=("name",), name=STR),
        )
    ),
)
_ALLOCATION = obj(
    resourceHandles=ListOf(obj(driverName=STR, data=STR, structuredData=_STRUCTURED_HANDLE)),
    availableOnNodes=NODE_SELECTOR,
    shareable=BOOL,
)
_ATTRIBUTE = obj(
    required=("name",),
    name=STR,
    quantity=QUANTITY,
    bool=BOOL,
    int=INT,
    intSlice=obj(required=("ints",), ints=ListOf(INT)),
    string=STR,
    stringSlice=obj(required=("strings",), strings=STRINGS),
    version=STR,
)
_INSTANCE = obj(required=("name",), name=STR, attributes=ListOf(_ATTRIBUTE))

KINDS: dict[str, Obj] = {
    "ResourceClaim": obj(
        required=("spec",),
        spec=_CLAIM_SPEC,
        status=obj(
            driverName=STR,
            allocation=_ALLOCATION,
            reservedFor=ListOf(CONSUMER),
            deallocationRequested=BOOL,
        ),
    ),
    "ResourceClaimTemplate": obj(
        required=("spec",),
        spec=obj(required=("spec",), metadata=TEMPLATE_METADATA, spec=_CLAIM_SPEC),
    ),
    "ResourceClass": obj(
        required=("driverName",),
        driverName=STR,
        parametersRef=_CLASS_PARAMETERS_REF,
        suitableNodes=NODE_SELECTOR,
        structuredParameters=BOOL,
    ),
    "PodSchedulingContext": obj(
        required=("spec",),
        spec=obj(selectedNode=STR, potentialNodes=STRINGS),
        status=obj(resourceClaims=ListOf(obj(name=STR, unsuitableNodes=STRINGS))),
    ),
    "ResourceSlice": obj(
        required=("driverName",),
        nodeName=STR,
        driverName=STR,
        namedResources=obj(instances=ListOf(_INSTANCE)),
    ),
    "ResourceClaimParameters": obj(
        generatedFrom=_CLAIM_PARAMETERS_REF,
        shareable=BOOL,
        driverRequests=ListOf(
            obj(
                driverName=STR,
                vendorParameters=ANY,
                requests=ListOf(obj(vendorParameters=ANY, namedResources=_NAMED_SELECTOR)),
            )
        ),
    ),
    "ResourceClassParameters": obj(
        generatedFrom=_CLASS_PARAMETERS_REF,
        vendorParameters=ListOf(obj(driverName=STR, parameters=ANY)),
        filters=ListOf(obj(driverName=STR, namedResources=_NAMED_SELECTOR)),
    ),
}
# Kinds that become v1 kinds; the others keep apiVersion v1alpha2.
CONVERTED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"})

_CLAIM_SPEC_FIELDS = ("resourceClassName", "parametersRef", "allocationMode")
_ALLOCATION_FIELDS = ("resourceHandles", "availableOnNodes", "shareable")
_SCALAR_VALUES = ("bool", "int", "string", "version")
_VALUE_FIELDS = ("quantity", *_SCALAR_VALUES, "intSlice", "stringSlice")


def _move(source: dict[str, Any], target: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if name in source:
            target[name] = source.pop(name)


def claim_to_v1(claim: dict[str, Any], ctx: Context) -> None:
    """Rewrite a checked v1alpha2 ResourceClaim or ResourceClaimTemplate in place."""
    classic: dict[str, Any] = {}
    spec = claim["spec"]
    if claim.get("kind") == "ResourceClaimTemplate":
        spec = spec["spec"]
    _move(spec, classic, _CLAIM_SPEC_FIELDS)
    status = claim.get("status")
    if isinstance(status, dict):
        _move(status, classic, ("driverName", "deallocationRequested"))
        allocation = status.get("allocation")
        if isinstance(allocation, dict):
            _move(allocation, classic, _ALLOCATION_FIELDS)
            # A v1 server always sends `devices` in an allocation; an allocated classic claim
            # must still read as allocated.
            allocation.setdefault("devices", {})
            if classic.get("availableOnNodes") is not None:
                allocation["nodeSelector"] = plain(classic["availableOnNodes"])
    claim["classic"] = classic


def _device(instance: dict[str, Any], path: str, ctx: Context) -> dict[str, Any]:
    device: dict[str, Any] = {"name": instance["name"]}
    attributes: dict[str, Any] = {}
    capacity: dict[str, Any] = {}
    for index, attribute in enumerate(instance.get("attributes") or []):
        where = item(child(path, "attributes"), index)
        name = attribute["name"]
        if name in attributes or name in capacity:
            raise ctx.error(child(where, "name"), f"duplicate attribute name {name!r}")
        values = [key for key in _VALUE_FIELDS if attribute.get(key) is not None]
        # Keys this code does not know are value types newer than it: keep them as they are.
        extra = {k: v for k, v in attribute.items() if k != "name" and k not in _VALUE_FIELDS}
        if len(values) > 1 or (not values and not extra):
            reason = "expected exactly one value of " + ", ".join(_VALUE_FIELDS)
            raise ctx.error(where, f"{reason}, got {len(values)}")
        if values == ["quantity"]:
            capacity[name] = {"value": attribute["quantity"], **extra}
            continue
        value: dict[str, Any] = dict(extra)
        if values == ["intSlice"]:
            value["ints"] = list(attribute["intSlice"]["ints"])
        elif values == ["stringSlice"]:
            value["strings"] = list(attribute["stringSlice"]["strings"])
        elif values:
            value[values[0]] = attribute[values[0]]
        attributes[name] = value
    if attributes:
        device["attributes"] = attributes
    if capacity:
        device["capacity"] = capacity
    for key, value in instance.items():
        if key not in ("name", "attributes"):
            device.setdefault(key, value)
    return device


def slice_to_v1(resource_slice: dict[str, Any], ctx: Context) -> None:
    """Rewrite a checked 1.30 ResourceSlice in place: one pool per node, devices from instances."""
    classic: dict[str, Any] = {}
    if "spec" in resource_slice:
        classic["spec"] = resource_slice.pop("spec")
    driver = resource_slice.pop("driverName")
    node_name = resource_slice.pop("nodeName", None) or ""
    named = resource_slice.pop("namedResources", None)
    # 1.30 had no pools; each node's slice is its own single-slice pool.
    pool_name = node_name or resource_slice["metadata"]["name"]
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool_name, "generation": 0, "resourceSliceCount": 1},
    }
    if node_name:
        spec["nodeName"] = node_name
    devices: list[dict[str, Any]] = []
    if isinstance(named, dict):
        classic["resourceModel"] = "namedResources"
        path = "namedResources.instances"
        for index, instance in enumerate(named.get("instances") or []):
            devices.append(_device(instance, item(path, index), ctx))
        extra = {key: value for key, value in named.items() if key != "instances"}
        if extra:
            classic["namedResources"] = extra
    spec["devices"] = devices
    resource_slice["spec"] = spec
    resource_slice["classic"] = classic
