"""Text or bytes into JSON-shaped documents, with bounds: the one parser for user input.

What-if input, snapshot import and anything else a user pastes or uploads goes through
`load_documents`. It accepts what `kubectl` accepts (one JSON value, or a YAML stream of one or
more documents, `kind: List` included) and refuses, with a `DocumentError` naming the source,
the document and the line, whatever would let a few bytes cost a lot:

- more than `Limits.max_bytes` of input (checked before parsing);
- YAML anchors and aliases (a 600-byte "billion laughs" expands to gigabytes in any code that
  walks the result; Kubernetes manifests do not need them);
- nesting deeper than `Limits.max_depth`, or more than `Limits.max_nodes` values in all;
- invalid UTF-8, lone surrogates, NaN/Infinity, duplicate mapping keys and YAML tags that have
  no JSON meaning (binary, sets, ...). YAML timestamps stay strings, as Kubernetes reads them.

YAML goes through libyaml's event parser when PyYAML has it (falling back to the pure-Python
one); values are built from its events by `yaml_builder`, so the limits apply before anything is
built. The bounds and the error live in `bounds`; this module keeps the entry points and
re-exports what callers import from it. Each document is built and handed out in turn; a large
snapshot is never held twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import IO, Any

import yaml

from dralib.kube.bounds import (
    _SURROGATE,
    _SURROGATE_ESCAPE,
    DEFAULT_LIMITS,
    MAX_DEPTH,
    MAX_DOCUMENTS,
    MAX_INPUT_BYTES,
    MAX_NODES,
    Document,
    DocumentError,
    Limits,
    _check_json,
    _reject_constant,
    check_value,
    count_values,
    decode,
    json_problem,
    list_items,
)
from dralib.kube.yaml_builder import (
    PurePythonLoader,
    _load_yaml,
    _Loader,
    yaml_objects,
)

# The names callers import from here, wherever they live now.
__all__ = [
    "DEFAULT_LIMITS",
    "MAX_DEPTH",
    "MAX_DOCUMENTS",
    "MAX_INPUT_BYTES",
    "MAX_NODES",
    "Document",
    "DocumentError",
    "IMPORTED_UID_NAMESPACE",
    "Limits",
    "PurePythonLoader",
    "SafeDumper",
    "_Loader",
    "_SURROGATE",
    "_SURROGATE_ESCAPE",
    "_check_json",
    "check_value",
    "count_values",
    "decode",
    "dump_yaml",
    "json_problem",
    "list_items",
    "load_documents",
    "stable_uid",
    "yaml_objects",
]

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class SafeDumper(_BaseDumper):  # type: ignore[misc]
    """PyYAML's safe dumper that writes a value out each time it occurs.

    PyYAML's own emits `&id001` and `*id001` for a dict or list met twice (the demo generator
    shares attribute maps between devices); the reader here refuses anchors (billion laughs), so
    without this the dashboard could not read back the YAML it wrote.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True


def load_documents(
    data: str | bytes,
    *,
    source: str = "",
    limits: Limits = DEFAULT_LIMITS,
    loader_class: Any = None,
) -> Iterator[Document]:
    """Yield the non-empty documents of a JSON value or YAML stream, one at a time.

    `loader_class` picks the YAML parser: libyaml's when PyYAML has it, else `PurePythonLoader`.
    """
    loader_class = loader_class or _Loader
    text = decode(data, source=source, limits=limits)
    del data  # a large input is held once (as text) while it is parsed, not twice
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            json_error = exc
        else:
            _check_json(value, text, source=source, limits=limits)
            line = text.count("\n", 0, len(text) - len(stripped)) + 1
            del text, stripped  # only the value is needed from here on
            if value is not None:
                yield Document(1, line, value)
            return
        # Flow-style YAML (`{a: 1}`) starts the same way; only when YAML fails too is it an error.
        try:
            documents = list(
                _load_yaml(text, source=source, limits=limits, loader_class=loader_class)
            )
        except DocumentError:
            raise json_problem(json_error, source=source, limits=limits) from json_error
        yield from documents
        return
    yield from _load_yaml(text, source=source, limits=limits, loader_class=loader_class)


IMPORTED_UID_NAMESPACE = uuid.UUID("6f1c3f0e-2b8a-5d7e-9c41-8a7d2e5b0c13")
"""uuid5 namespace of the uids given to hand-written objects that have none."""


def stable_uid(*, kind: str, namespace: str, name: str) -> str:
    """A uid for an object written without one, the same on every import of it."""
    return str(uuid.uuid5(IMPORTED_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def dump_yaml(data: Any, stream: IO[str] | None = None, **options: Any) -> str | None:
    """YAML in block style keeping key order, through libyaml when present."""
    options.setdefault("sort_keys", False)
    options.setdefault("default_flow_style", False)
    options.setdefault("allow_unicode", True)
    result: str | None = yaml.dump(data, stream, Dumper=SafeDumper, **options)
    return result
