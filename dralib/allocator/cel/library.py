"""Shared pieces of the Kubernetes CEL library functions: the error, value types, overloads.

The themed modules (`quantity_lib`, `semver_lib`, `list_lib`, `string_lib`) implement the
functions; `functions.declarations` merges their overloads into one declaration per name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from cel_expr_python import cel

__all__ = [
    "CIDR",
    "INT64_MAX",
    "INT64_MIN",
    "KINDS",
    "LIST",
    "MAP",
    "QUANTITY",
    "SEMVER",
    "TYPE_NAMES",
    "URL",
    "IP",
    "FunctionError",
    "Overloads",
    "check_int",
    "describe",
    "overload",
    "per_kind",
]

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

QUANTITY: Final = cel.Type.Map(cel.Type.UINT, cel.Type.DYN)
SEMVER: Final = cel.Type.List(cel.Type.STRING)
# Map types nothing else uses, so the checker tells these values apart (see net_lib).
IP: Final = cel.Type.Map(cel.Type.BOOL, cel.Type.STRING)
CIDR: Final = cel.Type.Map(cel.Type.INT, cel.Type.STRING)
URL: Final = cel.Type.Map(cel.Type.STRING, cel.Type.BOOL)
# How the checker's messages name these types, and how upstream names them.
TYPE_NAMES: Final = (
    ("map(bool, string)", "net.IP"),
    ("map(int, string)", "net.CIDR"),
    ("map(string, bool)", "kubernetes.URL"),
)
LIST: Final = cel.Type.List(cel.Type.DYN)
MAP: Final = cel.Type.Map(cel.Type.DYN, cel.Type.DYN)
# cel_expr_python's runtime does not dispatch a ``dyn`` parameter to arbitrary values, so a
# function taking "any value" gets one overload per value kind.
KINDS: Final = (
    ("int", cel.Type.INT),
    ("uint", cel.Type.UINT),
    ("double", cel.Type.DOUBLE),
    ("string", cel.Type.STRING),
    ("bool", cel.Type.BOOL),
    ("bytes", cel.Type.BYTES),
    ("list", LIST),
    ("map", MAP),
)

# Function name -> its overloads, in declaration order; one themed module's contribution.
Overloads = dict[str, list[Any]]


class FunctionError(ValueError):
    """A library function applied to a value it cannot handle."""


def describe(value: object) -> str:
    """The CEL type name of a Python value, for error messages."""
    return {bool: "bool", int: "int", float: "double", str: "string"}.get(
        type(value), type(value).__name__
    )


def check_int(value: int) -> int:
    """The value if it fits CEL's int64, else FunctionError."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise FunctionError("integer overflow")
    return value


def _guarded(impl: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Python failures into FunctionError so CEL reports a clean message."""

    def call(*args: Any) -> Any:
        try:
            return impl(*args)
        except FunctionError:
            raise
        except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:
            raise FunctionError(str(exc)) from exc

    return call


def overload(
    overload_id: str,
    params: Sequence[Any],
    result: Any,
    impl: Callable[..., Any],
    *,
    member: bool = False,
) -> Any:
    """One cel_expr_python overload whose Python failures become FunctionError."""
    return cel.Overload(
        overload_id,
        return_type=result,
        parameters=list(params),
        is_member=member,
        impl=_guarded(impl),
    )


def per_kind(
    prefix: str, params: Sequence[Any], result: Any, impl: Callable[..., Any]
) -> list[Any]:
    """Member overloads whose last parameter is any value: one per value kind."""
    return [
        overload(f"{prefix}_{name}", [*params, kind], result, impl, member=True)
        for name, kind in KINDS
    ]
