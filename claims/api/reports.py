"""Computed reports of the claims API: pool status in upstream's ResourcePoolStatusRequest shape
(mounted under /api/inventory/) and leaked allocations (under /api/claims/).

Views only translate: query parameters in, the functions of `claims.devices.poolstatus` and
`claims.leaks` called, their JSON out. Bad parameters are a 400 naming the parameter.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from claims.devices.poolstatus import (
    LIMIT_DEFAULT,
    LIMIT_MAX,
    PoolStatusError,
    PoolStatusFilter,
    pool_status_request,
)
from claims.leaks import leak_report
from inventory.visibility import visibility_for


class PoolStatusQuerySerializer(serializers.Serializer[Any]):
    driver = serializers.CharField(required=False, default="", max_length=253)
    pool = serializers.CharField(required=False, default="", max_length=253)
    node = serializers.CharField(required=False, default="", max_length=253)
    device_class = serializers.CharField(required=False, default="", max_length=253)
    limit = serializers.IntegerField(
        required=False, default=LIMIT_DEFAULT, min_value=1, max_value=LIMIT_MAX
    )
    defaultPartitionTypeAttribute = serializers.CharField(  # noqa: N815 (upstream's field name)
        required=False, default="", max_length=253
    )


class PoolStatusView(APIView):
    """A completed ResourcePoolStatusRequest (resource.k8s.io/v1alpha3, KEP-5677) computed from
    the synced state: per pool total, allocated, available and unavailable devices, validation
    errors, partition and shareable summaries. Filters: driver, pool, node, class, limit,
    defaultPartitionTypeAttribute."""

    @extend_schema(responses=OpenApiResponse(description="A ResourcePoolStatusRequest object."))
    def get(self, request: Request) -> Response:
        params = request.query_params.dict()
        if "class" in params:
            params["device_class"] = params.pop("class")
        query = PoolStatusQuerySerializer(data=params)
        if not query.is_valid():
            errors = dict(query.errors)
            if "device_class" in errors:
                errors["class"] = errors.pop("device_class")
            raise ValidationError(errors)
        data = query.validated_data
        spec = PoolStatusFilter(
            driver=data["driver"],
            pool_name=data["pool"],
            node=data["node"],
            device_class=data["device_class"],
            limit=data["limit"],
            default_partition_type_attribute=data["defaultPartitionTypeAttribute"],
        )
        try:
            return Response(pool_status_request(spec))
        except PoolStatusError as error:
            field = "class" if spec.device_class and "DeviceClass" in str(error) else "limit"
            raise ValidationError({field: [str(error)]}) from error


class LeakView(APIView):
    """Claims holding devices for nobody: allocated and unreserved for longer than
    DASHBOARD_LEAK_UNRESERVED_SECONDS, reserved for pods that are gone or finished, owned by a
    pod that is gone, or holding devices of pools that no longer exist; each with since when
    and where that time comes from."""

    @extend_schema(responses=OpenApiResponse(description="Leaks with counts and ages per kind."))
    def get(self, request: Request) -> Response:
        return Response(leak_report(visibility=visibility_for(request)))
