"""A what-if answer cut down to a size: what a finished job keeps for an hour.

An answer about a large cluster (every node with its devices or reasons, thousands of headroom
placements, every pod) can run to tens of megabytes; a job keeps its answer for an hour, and a
user may start job after job. `trim_answer` keeps an answer whole when its JSON fits the limit
and otherwise shortens its largest lists (by JSON size: `nodes`, `placements`, `pods`,
`headroom.placements`, ...) until it fits. Lists keep their first entries, which are the
answer's own order (nodes by name, placements first-fit); scalars, summaries and reasons stay
as they are. What was cut is said in `trimmed`.
"""

from __future__ import annotations

from typing import Any

import orjson

from claims.whatif.inputs import JSON

__all__ = ["trim_answer"]

# Lists nested deeper than this are cut with the list that holds them.
_MAX_DEPTH = 3
# Top-level keys a last-resort answer keeps when cutting lists is not enough.
_ESSENTIAL = (
    "fits",
    "summary",
    "nodesPage",
    "nodeGroups",
    "gang",
    "simulated",
    "namespace",
    "fingerprint",
    "cluster",
    "gaveUp",
)


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


def _lists(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths (dict keys) of the lists with more than one entry, at most _MAX_DEPTH deep."""
    found: list[tuple[str, ...]] = []
    if not isinstance(value, dict) or len(path) >= _MAX_DEPTH:
        return found
    for key, item in value.items():
        if isinstance(item, list) and len(item) > 1:
            found.append((*path, key))
        elif isinstance(item, dict):
            found.extend(_lists(item, (*path, key)))
    return found


def _get(value: JSON, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _set(value: JSON, path: tuple[str, ...], item: Any) -> None:
    """Replace the value at `path`, copying the dicts on the way (the answer is not changed)."""
    for key in path[:-1]:
        value[key] = dict(value[key])
        value = value[key]
    value[path[-1]] = item


def trim_answer(answer: JSON, *, max_bytes: int) -> JSON:
    """`answer` if its JSON is at most `max_bytes`; else a copy cut to fit, saying what was cut.

    The copy carries `trimmed`: {maxBytes, bytes (the whole answer's size), lists: {"a.b":
    {kept, total}}, message}.
    """
    whole = _size(answer)
    if whole <= max_bytes:
        return answer
    out = dict(answer)
    cut: dict[str, dict[str, int]] = {}

    def noted(message: str) -> JSON:
        note = {"maxBytes": max_bytes, "bytes": whole, "lists": cut, "message": message}
        return {**out, "trimmed": note}

    message = (
        f"the answer ({whole:,} bytes of JSON) is over the {max_bytes:,}-byte limit of a kept "
        "job result: long lists keep their first entries"
    )
    size = _size(noted(message))
    while size > max_bytes:
        candidates = _lists(out)
        if not candidates:
            break
        sizes = {path: _size(_get(out, path)) for path in candidates}
        path = max(candidates, key=sizes.__getitem__)
        items = _get(out, path)
        name = ".".join(path)
        cut.setdefault(name, {"kept": len(items), "total": len(items)})
        # Entries in proportion to the bytes to shed (one at least, one fewer at most).
        share = (sizes[path] - (size - max_bytes)) / sizes[path]
        kept = max(1, min(len(items) - 1, int(len(items) * share)))
        cut[name]["kept"] = kept
        _set(out, path, items[:kept])
        size = _size(noted(message))
    if size > max_bytes:
        out = {key: answer[key] for key in _ESSENTIAL if key in answer}
        cut = {}
        message = (
            f"the answer ({whole:,} bytes of JSON) is over the {max_bytes:,}-byte limit of a "
            "kept job result: only its summary is kept"
        )
    return noted(message)
