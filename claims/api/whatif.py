"""What-if endpoints: a synchronous answer, and jobs that run on a Celery worker.

`POST /api/claims/what-if/` takes JSON ({"yaml": ..., "nodes", "nodeSelector", "count",
"assume", "features", "namespace", "gang"}) or the raw YAML with Content-Type application/yaml
(options then come from the query string). `POST /api/claims/what-if/jobs/` queues the same
request and `GET /api/claims/what-if/jobs/<id>/` reads its progress and answer. Both go through
`claims.whatif.request.run_request`. Bad input is a 400 that names the field; nothing here writes
cluster objects.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.tasks import TooManyJobs, create_job, get_job
from claims.whatif.inputs import INPUT_LIMITS, WhatIfError
from claims.whatif.request import REQUEST_KEYS, check_request, run_request
from dralib.kube.documents import DocumentError, Limits, check_value, decode

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")


# A JSON body carries the what-if text (escaped) plus options: room for that, not more.
BODY_LIMITS = Limits(max_bytes=4 * INPUT_LIMITS.max_bytes, max_nodes=INPUT_LIMITS.max_nodes)


def parse_json(data: bytes | str, *, field: str, limits: Limits = BODY_LIMITS) -> Any:
    """JSON within bounds (size, depth, values, valid Unicode); a WhatIfError otherwise."""
    try:
        text = decode(data, limits=limits)
        value = json.loads(text, parse_constant=_no_constant)
        check_value(value, limits=limits)
    except DocumentError as exc:
        raise WhatIfError(field, str(exc)) from exc
    except RecursionError as exc:
        raise WhatIfError(field, f"nested deeper than {limits.max_depth} levels") from exc
    except ValueError as exc:
        raise WhatIfError(field, f"invalid JSON: {exc}") from exc
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with bounds: a hostile body is a 400 naming `body`, never a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = stream.read(BODY_LIMITS.max_bytes + 1) if stream is not None else b""
        return parse_json(data, field="body")


class YAMLTextParser(BaseParser):
    """The body as text: the what-if input itself (options come from the query string)."""

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        # One byte past the limit is enough to refuse; invalid UTF-8 is refused, not replaced.
        data = stream.read(INPUT_LIMITS.max_bytes + 1) if stream is not None else b""
        if not isinstance(data, bytes):
            return {"yaml": data}
        try:
            return {"yaml": decode(data, limits=INPUT_LIMITS)}
        except DocumentError as exc:
            raise WhatIfError("yaml", str(exc)) from exc


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"


class XYAMLParser(YAMLTextParser):
    media_type = "application/x-yaml"


class PlainTextParser(YAMLTextParser):
    media_type = "text/plain"


class WhatIfRequestSerializer(serializers.Serializer):
    """A what-if question (only types are checked here; the service checks meaning)."""

    yaml = serializers.JSONField(
        help_text="YAML or JSON text of ResourceClaims, a ResourceClaimTemplate, a Pod or a "
        "workload with a pod template (any supported API version); or the object itself."
    )
    nodes = serializers.JSONField(required=False, help_text="Node names to consider.")
    nodeSelector = serializers.JSONField(  # noqa: N815 - the API's own spelling
        required=False, help_text="Label selector `k=v,k2 in (a,b)` or a map."
    )
    count = serializers.JSONField(
        required=False, help_text='Copies to place (headroom), 1..10000 or "max".'
    )
    assume = serializers.JSONField(
        required=False,
        help_text="Changes to assume: release-claim, remove-node, add-nodes (`like` an existing "
        "node, or a `shape`: {node, slices} with `{node}` placeholders; 1,000 added nodes and "
        "20,000 added devices at most), taint-device, untaint-device, drop-pool (objects with "
        "`op`).",
    )
    features = serializers.JSONField(required=False, help_text="Allocator feature switches.")
    namespace = serializers.CharField(required=False, help_text="Default namespace.")
    gang = serializers.BooleanField(
        required=False,
        help_text="All claims of the input on one node, all or nothing (default: pods are "
        "placed one after another).",
    )


class WhatIfErrorSerializer(serializers.Serializer):
    field = serializers.CharField()
    detail = serializers.CharField()


class WhatIfJobSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    progress = serializers.JSONField()
    result = serializers.JSONField(allow_null=True)
    error = serializers.JSONField(allow_null=True)


_EXAMPLE = OpenApiExample(
    "Two GPUs",
    value={
        "yaml": "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: two-gpus}\n"
        "spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: "
        "{deviceClassName: gpu.example.com, count: 2}\n",
        "count": 1,
    },
    request_only=True,
)


def read_request(request: Request) -> dict[str, Any]:
    """The what-if request from a JSON body or raw YAML plus query parameters."""
    data = request.data
    if not isinstance(data, dict):
        raise WhatIfError("body", "expected a JSON object or YAML text")
    out = {key: data.get(key) for key in REQUEST_KEYS}
    unknown = sorted(set(data) - set(REQUEST_KEYS))
    if unknown:
        raise WhatIfError(unknown[0], f"unknown field; expected {', '.join(REQUEST_KEYS)}")
    for key in REQUEST_KEYS:
        if out.get(key) is None and key in request.query_params:
            value: Any = request.query_params.get(key)
            if key in {"assume", "features"}:
                value = parse_json(value, field=key)
            out[key] = value
    if out.get("yaml") in (None, ""):
        raise WhatIfError("yaml", "required: the claim, template or pod to try")
    return out


def _bad(exc: WhatIfError) -> Response:
    return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)


class WhatIfView(APIView):
    """Would this fit, where, with which devices, and if not, why? Changes nothing."""

    allow_post = True
    parser_classes = [
        BoundedJSONParser,
        YAMLTextParser,
        TextYAMLParser,
        XYAMLParser,
        PlainTextParser,
    ]

    @extend_schema(
        request=WhatIfRequestSerializer,
        responses={
            200: OpenApiResponse(description="The answer (see claims.whatif.service.what_if)."),
            400: WhatIfErrorSerializer,
        },
        examples=[_EXAMPLE],
        summary="What-if: would these claims fit, and where",
    )
    def post(self, request: Request) -> Response:
        try:
            answer = run_request(read_request(request), budget=settings.WHATIF_BUDGET_SECONDS)
        except WhatIfError as exc:
            return _bad(exc)
        return Response(answer)


class WhatIfJobListView(APIView):
    """Queue a what-if as a job; progress is announced on the `whatif` live topic."""

    allow_post = True
    parser_classes = WhatIfView.parser_classes

    @extend_schema(
        request=WhatIfRequestSerializer,
        responses={
            202: WhatIfJobSerializer,
            400: WhatIfErrorSerializer,
            429: OpenApiResponse(description="Too many unfinished jobs of this user."),
        },
        examples=[_EXAMPLE],
        summary="Queue a what-if job",
    )
    def post(self, request: Request) -> Response:
        try:
            body = read_request(request)
            # Bad input is a 400 now, not a job that fails later.
            check_request(body)
        except WhatIfError as exc:
            return _bad(exc)
        try:
            job = create_job(body, owner=str(request.user.pk or ""))
        except TooManyJobs as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        return Response(job, status=status.HTTP_202_ACCEPTED)


class WhatIfJobDetailView(APIView):
    """A what-if job: queued, running (with progress), done (with the answer) or failed."""

    @extend_schema(
        responses={200: WhatIfJobSerializer, 404: OpenApiResponse(description="Unknown job.")},
        summary="Read a what-if job",
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = get_job(job_id)
        if job is None:
            return Response({"detail": "unknown or expired job"}, status=status.HTTP_404_NOT_FOUND)
        return Response(job)
