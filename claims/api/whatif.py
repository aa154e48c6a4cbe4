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

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.tasks import create_job, get_job
from claims.whatif.inputs import WhatIfError
from claims.whatif.request import REQUEST_KEYS, run_request

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")


class YAMLTextParser(BaseParser):
    """The body as text: the what-if input itself (options come from the query string)."""

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = stream.read() if stream is not None else b""
        return {"yaml": data.decode("utf-8", "replace") if isinstance(data, bytes) else data}


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
        "node, or a `shape`: {node, slices} with `{node}` placeholders; 1,000 added nodes at "
        "most), taint-device, untaint-device, drop-pool (objects with `op`).",
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
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as exc:
                    raise WhatIfError(key, f"invalid JSON in the query string: {exc}") from exc
            out[key] = value
    if out.get("yaml") in (None, ""):
        raise WhatIfError("yaml", "required: the claim, template or pod to try")
    return out


def _bad(exc: WhatIfError) -> Response:
    return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)


class WhatIfView(APIView):
    """Would this fit, where, with which devices, and if not, why? Changes nothing."""

    allow_post = True
    parser_classes = [JSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser, PlainTextParser]

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
            answer = run_request(read_request(request))
        except WhatIfError as exc:
            return _bad(exc)
        return Response(answer)


class WhatIfJobListView(APIView):
    """Queue a what-if as a job; progress is announced on the `whatif` live topic."""

    allow_post = True
    parser_classes = WhatIfView.parser_classes

    @extend_schema(
        request=WhatIfRequestSerializer,
        responses={202: WhatIfJobSerializer, 400: WhatIfErrorSerializer},
        examples=[_EXAMPLE],
        summary="Queue a what-if job",
    )
    def post(self, request: Request) -> Response:
        try:
            body = read_request(request)
        except WhatIfError as exc:
            return _bad(exc)
        job = create_job(body)
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
