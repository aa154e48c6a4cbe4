"""What-if endpoints: a synchronous answer, and jobs run by a worker (or the web's job threads).

`POST /api/claims/what-if/` takes JSON ({"yaml": ..., "nodes", "nodeSelector", "count",
"assume", "features", "namespace", "gang"}) or the raw YAML with Content-Type application/yaml
(options then come from the query string). `POST /api/claims/what-if/jobs/` queues the same
request and `GET /api/claims/what-if/jobs/<id>/` reads its progress and answer. Requests are
read by `claims.whatif.request.read_request` and answered by its `run_request`, as the what-if
page's are; the answer is the service's dict as it is, described for the schema by
`claims.api.whatif_serializers`. Bad input is a 400 that names the field; a 503 says the cluster
is switching (see `claims.whatif.state.cluster_state`); nothing here writes cluster objects.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.api.whatif_serializers import (
    WhatIfAnswerSerializer,
    WhatIfErrorSerializer,
    WhatIfJobSerializer,
    WhatIfRequestSerializer,
)
from claims.tasks import queue_what_if_job
from claims.whatif.inputs import INPUT_LIMITS, WhatIfError
from claims.whatif.jobs import TooManyJobs, create_job, get_job, job_owner, owner_of
from claims.whatif.request import (
    answer_as_seen,
    check_namespaces,
    check_request,
    read_input,
    read_request,
    run_request,
)
from claims.whatif.state import ClusterSwitching
from dralib.kube.documents import DocumentError, Limits, check_value, decode
from inventory.visibility import visibility_for

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
        return {"yaml": read_input(stream) if stream is not None else ""}


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"


class XYAMLParser(YAMLTextParser):
    media_type = "application/x-yaml"


class PlainTextParser(YAMLTextParser):
    media_type = "text/plain"


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


def _bad(exc: WhatIfError) -> Response:
    if isinstance(exc, ClusterSwitching):
        # Not the question's fault: the cluster behind the API server changed, a relist is
        # under way and no complete state was read before it.
        return Response(
            {**exc.as_dict(), "cluster": exc.freshness.answer()},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )
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
            200: WhatIfAnswerSerializer,
            400: WhatIfErrorSerializer,
            503: OpenApiResponse(
                description="The cluster behind the API server changed and is being listed "
                "again, with no complete state to answer from yet: try again (Retry-After)."
            ),
        },
        examples=[_EXAMPLE],
        summary="What-if: would these claims fit, and where",
    )
    def post(self, request: Request) -> Response:
        try:
            question = read_request(request.data, options=request.query_params)
            check_namespaces(question, visibility_for(request))
            answer = run_request(question, budget=settings.WHATIF_BUDGET_SECONDS)
            answer = answer_as_seen(answer, question, visibility_for(request))
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
            question = read_request(request.data, options=request.query_params)
            # Bad input is a 400 now, not a job that fails later.
            check_namespaces(question, visibility_for(request))
            check_request(question)
        except WhatIfError as exc:
            return _bad(exc)
        try:
            job = create_job(question, queue=queue_what_if_job, owner=owner_of(request.user))
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
        # A job is its submitter's (and the admins'): to anyone else it does not exist.
        mine = job is not None and (
            request.user.is_superuser or job_owner(job_id) == owner_of(request.user)
        )
        if job is None or not mine:
            return Response({"detail": "unknown or expired job"}, status=status.HTTP_404_NOT_FOUND)
        if isinstance(job.get("result"), dict):
            try:
                job = {**job, "result": answer_as_seen(job["result"], {}, visibility_for(request))}
            except WhatIfError as exc:
                job = {**job, "status": "failed", "result": None, "error": exc.as_dict()}
        return Response(job)
