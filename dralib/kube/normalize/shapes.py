"""Shapes of the structured-parameters kinds (v1alpha3 through v1), written from k8s.io/api types.

v1 and v1beta2 serialize identically. v1beta1 nests device fields under `basic` and keeps request
fields inline. v1alpha3 is the union of what 1.31-1.33 served under that name: `basic` devices with
plain-quantity capacity, inline requests, and the 1.31 control-plane-controller fields.
"""

from __future__ import annotations

from .schema import ANY, BOOL, INT, QUANTITY, STR, ListOf, MapOf, Obj, Shape, obj

STRINGS = ListOf(STR)

OWNER_REFERENCE = obj(
    required=("apiVersion", "kind", "name", "uid"),
    apiVersion=STR,
    kind=STR,
    name=STR,
    uid=STR,
    controller=BOOL,
    blockOwnerDeletion=BOOL,
)
# The parts of ObjectMeta the dashboard reads; managedFields and the rest pass through unchecked.
TEMPLATE_METADATA = obj(
    name=STR,
    namespace=STR,
    labels=MapOf(STR),
    annotations=MapOf(STR),
)
METADATA = TEMPLATE_METADATA.extend(
    required=("name", "uid"),
    uid=STR,
    resourceVersion=STR,
    generation=INT,
    creationTimestamp=STR,
    deletionTimestamp=STR,
    deletionGracePeriodSeconds=INT,
    ownerReferences=ListOf(OWNER_REFERENCE),
    finalizers=STRINGS,
)

_REQUIREMENT = obj(required=("key", "operator"), key=STR, operator=STR, values=STRINGS)
NODE_SELECTOR = obj(
    nodeSelectorTerms=ListOf(
        obj(matchExpressions=ListOf(_REQUIREMENT), matchFields=ListOf(_REQUIREMENT))
    ),
)
CONDITION = obj(
    required=("type", "status"),
    type=STR,
    status=STR,
    reason=STR,
    message=STR,
    lastTransitionTime=STR,
    observedGeneration=INT,
)

COUNTER = obj(required=("value",), value=QUANTITY)
COUNTER_SET = obj(required=("name",), name=STR, counters=MapOf(COUNTER))
COUNTER_CONSUMPTION = obj(required=("counterSet",), counterSet=STR, counters=MapOf(COUNTER))
ATTRIBUTE = obj(
    int=INT,
    bool=BOOL,
    string=STR,
    version=STR,
    ints=ListOf(INT),
    bools=ListOf(BOOL),
    strings=STRINGS,
    versions=STRINGS,
)
_RANGE = obj(min=QUANTITY, max=QUANTITY, step=QUANTITY)
CAPACITY = obj(
    required=("value",),
    value=QUANTITY,
    requestPolicy=obj(default=QUANTITY, validValues=ListOf(QUANTITY), validRange=_RANGE),
)
TAINT = obj(required=("key", "effect"), key=STR, value=STR, effect=STR, timeAdded=STR)
_NODE_ALLOCATABLE = obj(
    mapping=obj(capacityKey=STR, capacityMultiplier=QUANTITY, deviceMultiplier=QUANTITY),
    overhead=obj(perPod=QUANTITY, perContainer=QUANTITY),
)

# Everything a v1 device has besides its name: what v1beta1 and v1alpha3 keep under `basic`.
DEVICE_FIELDS: dict[str, Shape] = {
    "attributes": MapOf(ATTRIBUTE),
    "capacity": MapOf(CAPACITY),
    "consumesCounters": ListOf(COUNTER_CONSUMPTION),
    "nodeName": STR,
    "nodeSelector": NODE_SELECTOR,
    "allNodes": BOOL,
    "taints": ListOf(TAINT),
    "bindsToNode": BOOL,
    "bindingConditions": STRINGS,
    "bindingFailureConditions": STRINGS,
    "allowMultipleAllocations": BOOL,
    "nodeAllocatableResources": MapOf(_NODE_ALLOCATABLE),
}
BASIC_DEVICE_FIELDS: tuple[str, ...] = tuple(DEVICE_FIELDS)

DEVICE_V1 = obj(required=("name",), name=STR, **DEVICE_FIELDS)
DEVICE_V1BETA1 = obj(required=("name",), name=STR, basic=Obj(DEVICE_FIELDS))
DEVICE_V1ALPHA3 = obj(
    required=("name",),
    name=STR,
    basic=Obj({**DEVICE_FIELDS, "capacity": MapOf(QUANTITY)}),
)

POOL = obj(
    required=("name", "generation", "resourceSliceCount"),
    name=STR,
    generation=INT,
    resourceSliceCount=INT,
)
_SLICE_SPEC = obj(
    required=("driver", "pool"),
    driver=STR,
    pool=POOL,
    nodeName=STR,
    nodeSelector=NODE_SELECTOR,
    allNodes=BOOL,
    perDeviceNodeSelection=BOOL,
    sharedCounters=ListOf(COUNTER_SET),
    partitionTypeAttribute=STR,
    skipNodeOperations=STRINGS,
)

DEVICE_SELECTOR = obj(cel=obj(required=("expression",), expression=STR))
TOLERATION = obj(key=STR, operator=STR, value=STR, effect=STR, tolerationSeconds=INT)
# Request fields v1 puts under `exactly` and older versions keep inline on the request.
EXACT_FIELDS: dict[str, Shape] = {
    "deviceClassName": STR,
    "selectors": ListOf(DEVICE_SELECTOR),
    "allocationMode": STR,
    "count": INT,
    "adminAccess": BOOL,
    "tolerations": ListOf(TOLERATION),
    "capacity": obj(requests=MapOf(QUANTITY)),
}
EXACT_FIELD_NAMES: tuple[str, ...] = tuple(EXACT_FIELDS)
SUBREQUEST = obj(
    required=("name", "deviceClassName"),
    name=STR,
    **{key: shape for key, shape in EXACT_FIELDS.items() if key != "adminAccess"},
)
REQUEST_V1 = obj(
    required=("name",),
    name=STR,
    exactly=obj(required=("deviceClassName",), **EXACT_FIELDS),
    firstAvailable=ListOf(SUBREQUEST),
)
REQUEST_INLINE = obj(
    required=("name",), name=STR, firstAvailable=ListOf(SUBREQUEST), **EXACT_FIELDS
)

OPAQUE = obj(required=("driver",), driver=STR, parameters=ANY)
CONSTRAINT = obj(requests=STRINGS, matchAttribute=STR, distinctAttribute=STR)
CLAIM_CONFIG = obj(requests=STRINGS, opaque=OPAQUE)


def _claim_spec(request: Shape) -> Obj:
    return obj(
        devices=obj(
            requests=ListOf(request),
            constraints=ListOf(CONSTRAINT),
            config=ListOf(CLAIM_CONFIG),
        )
    )


CONSUMER = obj(required=("resource", "name", "uid"), apiGroup=STR, resource=STR, name=STR, uid=STR)
_RESULT = obj(
    required=("request", "driver", "pool", "device"),
    request=STR,
    driver=STR,
    pool=STR,
    device=STR,
    adminAccess=BOOL,
    tolerations=ListOf(TOLERATION),
    bindingConditions=STRINGS,
    bindingFailureConditions=STRINGS,
    shareID=STR,
    consumedCapacity=MapOf(QUANTITY),
    skipNodeOperations=STRINGS,
)
_ALLOCATION = obj(
    devices=obj(
        results=ListOf(_RESULT),
        config=ListOf(obj(required=("source",), source=STR, requests=STRINGS, opaque=OPAQUE)),
    ),
    nodeSelector=NODE_SELECTOR,
    allocationTimestamp=STR,
)
_DEVICE_STATUS = obj(
    required=("driver", "pool", "device"),
    driver=STR,
    pool=STR,
    device=STR,
    shareID=STR,
    conditions=ListOf(CONDITION),
    data=ANY,
    networkData=obj(interfaceName=STR, ips=STRINGS, hardwareAddress=STR),
)
_CLAIM_STATUS = obj(
    allocation=_ALLOCATION,
    reservedFor=ListOf(CONSUMER),
    devices=ListOf(_DEVICE_STATUS),
)
_CLASS_SPEC = obj(
    selectors=ListOf(DEVICE_SELECTOR),
    config=ListOf(obj(opaque=OPAQUE)),
    extendedResourceName=STR,
)

TAINT_RULE = obj(
    required=("spec",),
    spec=obj(
        required=("taint",),
        deviceSelector=obj(
            deviceClassName=STR,
            driver=STR,
            pool=STR,
            device=STR,
            selectors=ListOf(DEVICE_SELECTOR),
        ),
        taint=TAINT,
    ),
    status=obj(conditions=ListOf(CONDITION)),
)


def _kinds(*, device: Shape, request: Shape, alpha: bool) -> dict[str, Obj]:
    """Top-level shapes (without metadata) for one served version."""
    claim_spec = _claim_spec(request)
    claim_status = _CLAIM_STATUS
    class_spec = _CLASS_SPEC
    if alpha:
        # 1.31 served the control-plane-controller fields under v1alpha3.
        claim_spec = claim_spec.extend(controller=STR)
        claim_status = claim_status.extend(
            deallocationRequested=BOOL,
            allocation=_ALLOCATION.extend(controller=STR),
        )
        class_spec = class_spec.extend(suitableNodes=NODE_SELECTOR)
    return {
        "ResourceSlice": obj(required=("spec",), spec=_SLICE_SPEC.extend(devices=ListOf(device))),
        "DeviceClass": obj(required=("spec",), spec=class_spec),
        "ResourceClaim": obj(required=("spec",), spec=claim_spec, status=claim_status),
        "ResourceClaimTemplate": obj(
            required=("spec",),
            spec=obj(required=("spec",), metadata=TEMPLATE_METADATA, spec=claim_spec),
        ),
    }


V1_KINDS = _kinds(device=DEVICE_V1, request=REQUEST_V1, alpha=False)
V1BETA1_KINDS = _kinds(device=DEVICE_V1BETA1, request=REQUEST_INLINE, alpha=False)
V1ALPHA3_KINDS = _kinds(device=DEVICE_V1ALPHA3, request=REQUEST_INLINE, alpha=True)
