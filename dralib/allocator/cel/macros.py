"""Source rewrite for the macros cel-cpp lacks: two-variable comprehensions and ``sortBy``.

cel_expr_python's parser has no hook for new macros, so before compiling, each call of one of
cel-go's macros (``ext.TwoVarComprehensions`` and the lists extension's ``sortBy``) is replaced
by an equivalent expression built from cel.bind, the one-variable macros and a few helper
functions (`dralib.allocator.cel.macro_lib`)::

    X.all(i, v, P)           -> cel.bind(R, X, @keys(R).all(i, cel.bind(v, R[i], P)))
    X.exists(i, v, P)        -> ... .exists(...)      X.existsOne(i, v, P) -> ... .exists_one(...)
    X.transformList(i, v, [F,] E)     -> cel.bind(R, X, @keys(R).map(i, [F',] E'))
    X.transformMap(k, v, [F,] E)      -> cel.bind(R, X, @mapOf(@keys(R).map(k, [F',] [k, E'])))
    X.transformMapEntry(k, v, [F,] E) -> cel.bind(R, X, @mapMerge(@keys(R).map(k, [F',] E')))
    X.sortBy(e, K)           -> cel.bind(R, X, @sortBy(R, R.map(e, K)))

where ``@keys`` lists a list's indexes or a map's keys, ``R`` is a fresh name and ``E'`` is
``cel.bind(v, R[i], E)``. Upstream's macros evaluate the same sub-expressions in the same order
(filter then transform, element by element), so results and errors agree; the iteration
variables of the two-variable forms are ``dyn`` here, where upstream types them.

A small tokenizer (`dralib.allocator.cel.rewrite`) finds the calls, so string literals and
comments are never touched; each call's receiver is found by walking back over its postfix
chain. Every character of the rewritten text remembers its offset in the user's text, so
compile errors are reported against what the user wrote (`Rewritten.remap_errors`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dralib.allocator.cel.library import TYPE_NAMES
from dralib.allocator.cel.rewrite import TOKEN

__all__ = ["HELPERS", "MacroError", "Rewritten", "rewrite_macros"]

KEYS: Final = "__keys__"
MAP_OF: Final = "__mapOf__"
MAP_MERGE: Final = "__mapMerge__"
SORT_BY: Final = "__sortBy__"
NET_STRING: Final = "__netString__"
HELPERS: Final = (KEYS, MAP_OF, MAP_MERGE, SORT_BY, NET_STRING)
_BOUND: Final = "__input{}__"

_QUANTIFIERS: Final = {"all": "all", "exists": "exists", "existsOne": "exists_one"}
_QUANTIFIERS_ALL: Final = {**_QUANTIFIERS, "exists_one": "exists_one"}
_ARITY: Final = {
    **{name: (3,) for name in _QUANTIFIERS_ALL},
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
    "sortBy": (2,),
}
_KEYWORDS: Final = frozenset({"in", "true", "false", "null"})
_CLOSERS: Final = {")": "(", "]": "[", "}": "{"}
_ACCUMULATOR: Final = "__result__"


class MacroError(Exception):
    """A macro call with invalid arguments, at ``offset`` of the user's text."""

    def __init__(self, message: str, *, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def ends_operand(self) -> bool:
        if self.kind == "ident":
            return self.text not in {"in"}
        return self.kind in {"string", "number"} or self.text in _CLOSERS


@dataclass(frozen=True)
class Rewritten:
    """The rewritten text and, for each of its characters, the offset in the original."""

    original: str
    text: str
    origin: tuple[int, ...]

    def original_offset(self, offset: int) -> int:
        """The offset in the user's text that produced ``offset`` of the rewritten text."""
        if not self.origin:
            return 0
        return self.origin[min(max(offset, 0), len(self.origin) - 1)]

    def remap_errors(self, message: str) -> str:
        """cel-cpp's ``ERROR: <input>:L:C: ...`` report, pointing into the user's text."""
        if self.text == self.original:
            return public_message(message)
        reports: dict[str, str] = {}
        for match in _ERROR.finditer(message):
            location, report = self._remap_one(match)
            # One report per place: a bad range also fails the helpers built around it.
            reports.setdefault(location, report)
        return "\n".join(reports.values()) if reports else message

    def retarget_string(self, message: str) -> Rewritten | None:
        """The text with the ``string(...)`` call that the checker could not apply to an IP or
        CIDR calling ``__netString__`` instead; None when the message reports no such call."""
        match = _STRING_OVERLOAD.search(message)
        if match is None:
            return None
        lines = self.text.split("\n")
        line, column = int(match["line"]), int(match["column"])
        paren = sum(len(part) + 1 for part in lines[: line - 1]) + column - 1
        start = len(self.text[:paren].rstrip())
        if self.text[start - 6 : start] != "string" or paren >= len(self.text):
            return None
        start -= 6
        text = self.text[:start] + NET_STRING + self.text[start + 6 :]
        origin = (
            self.origin[:start] + (self.origin[start],) * len(NET_STRING) + self.origin[start + 6 :]
        )
        return Rewritten(self.original, text, origin)

    def _remap_one(self, match: re.Match[str]) -> tuple[str, str]:
        line, column = int(match["line"]), int(match["column"])
        lines = self.text.split("\n")
        offset = sum(len(part) + 1 for part in lines[: line - 1]) + column - 1
        source = self.original_offset(offset)
        before = self.original[:source]
        new_line = before.count("\n") + 1
        new_column = source - (before.rfind("\n") + 1) + 1
        text = self.original.split("\n")[new_line - 1]
        location = f"{new_line}:{new_column}"
        return location, (
            f"ERROR: <input>:{location}: {public_message(match['message'])}\n"
            f" | {text}\n | {'.' * (new_column - 1)}^"
        )


_ERROR: Final = re.compile(
    r"ERROR: <input>:(?P<line>\d+):(?P<column>\d+): (?P<message>[^\n]*)\n \| [^\n]*\n \| \.*\^"
)
_STRING_OVERLOAD: Final = re.compile(
    r"ERROR: <input>:(?P<line>\d+):(?P<column>\d+): found no matching overload for 'string' "
    r"applied to '\((map\(bool, string\)|map\(int, string\))\)'"
)
_RANGE_ERROR: Final = re.compile(rf"found no matching overload for '{KEYS}' applied to '\((.*)\)'")


def public_message(message: str) -> str:
    """A message about the rewritten text, in the words upstream uses for the user's text."""
    message = _RANGE_ERROR.sub(
        r"expression of type '\1' cannot be the range of a comprehension "
        "(must be list, map, or dynamic)",
        message,
    )
    message = message.replace(f"{KEYS}(", "range(").replace(f"'{KEYS}'", "'range'")
    message = message.replace(MAP_OF, "cel.@mapInsert").replace(MAP_MERGE, "cel.@mapInsert")
    for ours, upstream in TYPE_NAMES:
        message = message.replace(ours, upstream)
    return message.replace(SORT_BY, "@sortByAssociatedKeys").replace(NET_STRING, "string")


def _tokens(text: str) -> list[_Token]:
    tokens = [
        _Token(m.lastgroup or "", m.group(), m.start())
        for m in TOKEN.finditer(text)
        if m.lastgroup != "space"
    ]
    return tokens


def _matching(tokens: list[_Token], index: int, step: int) -> int | None:
    """The index of the bracket matching ``tokens[index]``, searching in direction ``step``."""
    depth = 0
    opening = {"(", "[", "[?", "{"}
    while 0 <= index < len(tokens):
        text = tokens[index].text
        if text in opening:
            depth += step
        elif text in _CLOSERS:
            depth -= step
        if depth == 0:
            return index
        index += step
    return None


def _receiver_start(tokens: list[_Token], dot: int) -> int | None:
    """The first token of the postfix expression that ends right before ``tokens[dot]``."""
    pos = dot - 1
    while pos >= 0:
        token = tokens[pos]
        if token.text in _CLOSERS:
            opener = _matching(tokens, pos, -1)
            if opener is None:
                return None
            before = tokens[opener - 1] if opener > 0 else None
            if token.text == "]" and before is not None and before.ends_operand:
                pos = opener - 1  # an index: the operand continues before it
                continue
            if token.text in {")", "}"} and before is not None and before.kind == "ident":
                pos = opener - 1  # a call or a message construction: continue at its name
                continue
            return opener  # a parenthesized expression or a list or map literal
        if token.kind not in {"ident", "string", "number"} or token.text in {"in"}:
            return None
        previous = tokens[pos - 1] if pos > 0 else None
        if previous is not None and previous.text in {".", "?."}:
            if pos > 1 and tokens[pos - 2].ends_operand:
                pos -= 2
                continue
            return pos - 1  # a leading-dot name such as .device
        return pos
    return None


def _arguments(tokens: list[_Token], open_paren: int) -> tuple[list[tuple[int, int]], int] | None:
    """Token ranges of a call's arguments (split at top-level commas) and its ')'."""
    close = _matching(tokens, open_paren, 1)
    if close is None:
        return None
    args: list[tuple[int, int]] = []
    depth, start = 0, open_paren + 1
    for index in range(open_paren + 1, close):
        text = tokens[index].text
        if text in {"(", "[", "[?", "{"}:
            depth += 1
        elif text in _CLOSERS:
            depth -= 1
        elif text == "," and depth == 0:
            args.append((start, index))
            start = index + 1
    if start < close:
        args.append((start, close))
    return args, close


def _simple_name(tokens: list[_Token], span: tuple[int, int]) -> str | None:
    first, end = span
    token = tokens[first]
    if end - first == 1 and token.kind == "ident" and token.text not in _KEYWORDS:
        return token.text
    return None


@dataclass
class _Text:
    """Text under construction with the original offset of each character."""

    text: str
    origin: list[int]

    def splice(self, start: int, end: int, parts: list[str | tuple[int, int]], anchor: int) -> None:
        """Replace ``[start, end)`` by parts: template strings or ranges of the current text."""
        text: list[str] = []
        origin: list[int] = []
        for part in parts:
            if isinstance(part, str):
                text.append(part)
                origin.extend([self.origin[anchor]] * len(part))
            else:
                text.append(self.text[part[0] : part[1]])
                origin.extend(self.origin[part[0] : part[1]])
        self.text = self.text[:start] + "".join(text) + self.text[end:]
        self.origin = self.origin[:start] + origin + self.origin[end:]


def _check_iteration_variables(
    tokens: list[_Token], args: list[tuple[int, int]], *, text: _Text
) -> tuple[str, str]:
    names: list[str] = []
    for span in args[:2]:
        name = _simple_name(tokens, span)
        if name is None:
            raise MacroError(
                "argument must be a simple name", offset=text.origin[tokens[span[0]].start]
            )
        names.append(name)
    first, second = names
    if first == second:
        raise MacroError(
            f"duplicate variable name: {second}", offset=text.origin[tokens[args[1][0]].start]
        )
    for name, span in zip(names, args, strict=False):
        if name == _ACCUMULATOR:
            raise MacroError(
                "iteration variable overwrites accumulator variable",
                offset=text.origin[tokens[span[0]].start],
            )
    return first, second


def _rewrite_one(text: _Text, tokens: list[_Token], dot: int, serial: int) -> bool:
    """Rewrite the macro call whose '.' is ``tokens[dot]``; False when it is not one."""
    name = tokens[dot + 1].text
    parsed = _arguments(tokens, dot + 2)
    if parsed is None:
        return False
    args, close = parsed
    if len(args) not in _ARITY[name]:
        return False
    start = _receiver_start(tokens, dot)
    if start is None:
        return False
    anchor = tokens[dot + 1].start
    bound = _BOUND.format(serial)

    def source(span: tuple[int, int]) -> tuple[int, int]:
        return (tokens[span[0]].start, tokens[span[1] - 1].end)

    receiver = (tokens[start].start, tokens[dot - 1].end)
    if name == "sortBy":
        element = _simple_name(tokens, args[0])
        if element is None:
            raise MacroError(
                "argument is not an identifier", offset=text.origin[tokens[args[0][0]].start]
            )
        if tokens[start].text == "{" or (start == dot - 1 and tokens[start].kind != "ident"):
            raise MacroError(
                "sortBy can only be applied to a list, identifier, comprehension, call or "
                "select expression",
                offset=text.origin[tokens[start].start],
            )
        parts: list[str | tuple[int, int]] = [
            f"cel.bind({bound}, ",
            receiver,
            f", {SORT_BY}({bound}, {bound}.map({element}, ",
            source(args[1]),
            ")))",
        ]
        text.splice(receiver[0], tokens[close].end, parts, anchor)
        return True
    index, value = _check_iteration_variables(tokens, args, text=text)

    def with_value(span: tuple[int, int], *, pair: bool = False) -> list[str | tuple[int, int]]:
        head = f"cel.bind({value}, {bound}[{index}], " + (f"[{index}, " if pair else "")
        return [head, source(span), "])" if pair else ")"]

    body: list[str | tuple[int, int]] = []
    if name in _QUANTIFIERS_ALL:
        method, wrap = _QUANTIFIERS_ALL[name], ""
        body = with_value(args[2])
    else:
        method = "map"
        wrap = {"transformList": "", "transformMap": MAP_OF, "transformMapEntry": MAP_MERGE}[name]
        if len(args) == 4:
            body += [*with_value(args[2]), ", "]
        body += with_value(args[-1], pair=name == "transformMap")
    opening = f"{wrap}(" if wrap else ""
    parts = [
        f"cel.bind({bound}, ",
        receiver,
        f", {opening}{KEYS}({bound}).{method}({index}, ",
        *body,
        ")))" if wrap else "))",
    ]
    text.splice(receiver[0], tokens[close].end, parts, anchor)
    return True


def rewrite_macros(expression: str) -> Rewritten:
    """``expression`` with the missing macros expanded; MacroError for invalid arguments."""
    text = _Text(expression, list(range(len(expression) + 1)))
    serial = 0
    while True:
        tokens = _tokens(text.text)
        if "".join(m.group() for m in TOKEN.finditer(text.text)) != text.text:
            break  # not tokenizable here; leave it to the CEL parser
        candidates = [
            i
            for i in range(len(tokens) - 2)
            if tokens[i].text == "."
            and tokens[i + 1].kind == "ident"
            and tokens[i + 1].text in _ARITY
            and tokens[i + 2].text == "("
        ]
        # The rightmost call first: its arguments hold no other call, and a call in its
        # receiver is copied verbatim and rewritten in a later round.
        if not any(_rewrite_one(text, tokens, i, serial) for i in reversed(candidates)):
            break
        serial += 1
    return Rewritten(expression, text.text, tuple(text.origin))
