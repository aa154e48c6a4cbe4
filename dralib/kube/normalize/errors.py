"""The one error every normalizer raises, and the object context it names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_REPR_LIMIT = 60


def describe(value: Any) -> str:
    """Short repr of an offending value, so a huge blob never floods a log line."""
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return text


class NormalizeError(ValueError):
    """An object from the API server does not have the shape its apiVersion promises."""

    kind: str
    name: str
    namespace: str
    field: str
    reason: str

    def __init__(self, *, kind: str, name: str, namespace: str, field: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.field = field
        self.reason = reason
        super().__init__(str(self))

    @property
    def object_ref(self) -> str:
        """`namespace/name` for namespaced objects, `name` otherwise."""
        name = self.name or "<unnamed>"
        return f"{self.namespace}/{name}" if self.namespace else name

    def __str__(self) -> str:
        kind = self.kind or "object"
        where = f"{self.field}: " if self.field else ""
        return f"{kind} {self.object_ref}: {where}{self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only __init__ needs help to survive pickling (Celery results, multiprocessing).
        return (_rebuild, (self.kind, self.name, self.namespace, self.field, self.reason))


def _rebuild(kind: str, name: str, namespace: str, field: str, reason: str) -> NormalizeError:
    return NormalizeError(kind=kind, name=name, namespace=namespace, field=field, reason=reason)


@dataclass(frozen=True)
class Context:
    """Which object is being normalized; every error raised while walking it names it."""

    kind: str
    name: str
    namespace: str

    def error(self, field: str, reason: str) -> NormalizeError:
        """Build the error for `field` (a path like `spec.devices[0].name`) of this object."""
        return NormalizeError(
            kind=self.kind, name=self.name, namespace=self.namespace, field=field, reason=reason
        )
