"""Source rewrite that gives ``device.attributes``/``device.capacity`` upstream's default.

Upstream wraps both maps so that looking up an unknown domain returns an empty map. cel-cpp has
no such map, so ``device.attributes[X]`` becomes ``device.attributes[?X].orValue({})`` and
``device.attributes.X`` becomes ``device.attributes[?"X"].orValue({})``. A small CEL tokenizer
finds the lookups so that string literals and comments are never touched.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["TOKEN", "rewrite_domain_lookups"]

TOKEN: Final = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR]?[bB]?|[bB]?[rR]?)(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
        |'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?)
  | (?P<punct>\[\?|\?\.|&&|\|\||==|!=|<=|>=|.)
    """,
    re.VERBOSE | re.DOTALL,
)
_MAPS: Final = frozenset({"attributes", "capacity"})


def _tokens(expression: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "", m.group()) for m in TOKEN.finditer(expression)]


def rewrite_domain_lookups(expression: str) -> str:
    """Return ``expression`` with domain lookups turned into defaulting optional lookups."""
    tokens = _tokens(expression)
    if "".join(text for _, text in tokens) != expression:
        return expression  # not tokenizable here; leave it to the CEL parser
    significant = [i for i, (kind, _) in enumerate(tokens) if kind != "space"]
    out = [text for _, text in tokens]
    for pos, index in enumerate(significant):
        if tokens[index][1] != "device" or pos + 3 >= len(significant):
            continue
        if pos > 0 and tokens[significant[pos - 1]][1] in {".", "?."}:
            continue  # a field named device, not the variable
        dot, name, nxt = (significant[pos + k] for k in (1, 2, 3))
        if tokens[dot][1] != "." or tokens[name][1] not in _MAPS:
            continue
        if tokens[nxt][1] == "[":
            close = _matching_bracket(tokens, significant, pos + 3)
            if close is None:
                continue
            out[nxt] = "[?"
            out[close] = "].orValue({})"
        elif tokens[nxt][1] == "." and pos + 4 < len(significant):
            key = significant[pos + 4]
            follow = significant[pos + 5] if pos + 5 < len(significant) else None
            if tokens[key][0] != "ident" or (follow is not None and tokens[follow][1] == "("):
                continue
            out[nxt] = ""
            out[key] = f'[?"{tokens[key][1]}"].orValue({{}})'
    return "".join(out)


def _matching_bracket(
    tokens: list[tuple[str, str]], significant: list[int], start: int
) -> int | None:
    depth = 0
    for index in significant[start:]:
        text = tokens[index][1]
        if text in {"[", "[?"}:
            depth += 1
        elif text == "]":
            depth -= 1
            if depth == 0:
                return index
    return None
