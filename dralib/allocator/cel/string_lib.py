"""CEL's strings extension (version 2) and Kubernetes' regex library (``find``, ``findAll``).

Implemented here because cel-cpp's strings extension would clash with the list overloads of
indexOf/lastIndexOf. Indexes count code points, as CEL does. Strings built by these functions
are capped like upstream's cost limit would cap them.

Regular expressions use RE2 (``google-re2``), as Go's ``regexp`` and cel-cpp's built-in
``matches`` do: matching takes linear time, and Perl-only syntax such as backreferences or
lookaround is an error. ``findAll`` follows Go's ``FindAllString``: an empty match right after
the previous match is skipped.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

import re2
from cel_expr_python import cel

from dralib.allocator.cel.library import FunctionError, Overloads, overload

__all__ = ["MAX_STRING_RESULT", "compile_regex", "overloads"]

MAX_STRING_RESULT: Final = 1_000_000


def _check_size(size: int) -> None:
    if size > MAX_STRING_RESULT:
        raise FunctionError(f"result would be too large ({size} characters)")


def _char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise FunctionError(f"index out of range: {index}")
    return text[index : index + 1]


def _index_of(text: str, sub: str, start: int = 0) -> int:
    if start < 0 or start > len(text):
        raise FunctionError(f"index out of range: {start}")
    return text.find(sub, start)


def _last_index_of(text: str, sub: str, start: int | None = None) -> int:
    if start is None:
        return text.rfind(sub)
    if start < 0 or start > len(text):
        raise FunctionError(f"index out of range: {start}")
    return text.rfind(sub, 0, start + len(sub))


def _lower_ascii(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _upper_ascii(text: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in text)


def _replace(text: str, old: str, new: str, count: int = -1) -> str:
    if count == 0:
        return text
    _check_size(len(text) + len(new) * (len(text) + 1))
    return text.replace(old, new, count)


def _split(text: str, sep: str, count: int = -1) -> list[str]:
    if count == 0:
        return []
    if sep == "":
        parts = list(text)
        if count > 0 and len(parts) > count:
            parts = parts[: count - 1] + ["".join(parts[count - 1 :])]
        return parts
    return text.split(sep, count - 1 if count > 0 else -1)


def _substring(text: str, start: int, end: int | None = None) -> str:
    end = len(text) if end is None else end
    if start < 0 or end > len(text) or start > end:
        raise FunctionError(f"substring({start}, {end}) out of range for length {len(text)}")
    return text[start:end]


def _join(values: list[str], sep: str = "") -> str:
    if not all(isinstance(v, str) for v in values):
        raise FunctionError("join() needs a list of strings")
    return sep.join(values)


def _quote(text: str) -> str:
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes.update({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"})
    return '"' + "".join(escapes.get(c, c) for c in text) + '"'


def _re2_options() -> re2.Options:
    options = re2.Options()
    # RE2 logs every invalid pattern to stderr; the error is reported to the user instead.
    options.log_errors = False
    return options


_RE2_OPTIONS: Final = _re2_options()


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re2._Regexp:
    """The compiled RE2 pattern; FunctionError when RE2 rejects it."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        raise FunctionError(f"invalid regular expression {pattern!r}: {detail}") from exc


def _find(text: str, pattern: str) -> str:
    match = compile_regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    regex = compile_regex(pattern)
    found: list[str] = []
    pos, previous_end = 0, -1
    # Go's regexp.allMatches: search from pos in the whole text (anchors keep their meaning),
    # step one character past an empty match, and drop an empty match that touches the last one.
    while pos <= len(text) and (limit < 0 or len(found) < limit):
        match = regex.search(text, pos)
        if match is None:
            break
        start, end = match.span()
        accept = True
        if end == start:
            accept = start != previous_end
            pos = end + 1
        else:
            pos = end
        previous_end = end
        if accept:
            found.append(match.group(0))
    return found


def overloads() -> Overloads:
    """The strings extension's and regex library's overloads by function name."""
    string, integer = cel.Type.STRING, cel.Type.INT
    strings = cel.Type.List(string)
    return {
        "charAt": [overload("string_char_at", [string, integer], string, _char_at, member=True)],
        "indexOf": [
            overload("string_index_of", [string, string], integer, _index_of, member=True),
            overload(
                "string_index_of_int", [string, string, integer], integer, _index_of, member=True
            ),
        ],
        "lastIndexOf": [
            overload(
                "string_last_index_of", [string, string], integer, _last_index_of, member=True
            ),
            overload(
                "string_last_index_of_int",
                [string, string, integer],
                integer,
                _last_index_of,
                member=True,
            ),
        ],
        "lowerAscii": [overload("string_lower_ascii", [string], string, _lower_ascii, member=True)],
        "upperAscii": [overload("string_upper_ascii", [string], string, _upper_ascii, member=True)],
        "replace": [
            overload("string_replace", [string, string, string], string, _replace, member=True),
            overload(
                "string_replace_int",
                [string, string, string, integer],
                string,
                _replace,
                member=True,
            ),
        ],
        "split": [
            overload("string_split", [string, string], strings, _split, member=True),
            overload("string_split_int", [string, string, integer], strings, _split, member=True),
        ],
        "substring": [
            overload("string_substring", [string, integer], string, _substring, member=True),
            overload(
                "string_substring_int", [string, integer, integer], string, _substring, member=True
            ),
        ],
        "trim": [overload("string_trim", [string], string, str.strip, member=True)],
        "join": [
            overload("list_join", [strings], string, _join, member=True),
            overload("list_join_string", [strings, string], string, _join, member=True),
        ],
        "strings.quote": [overload("strings_quote", [string], string, _quote)],
        "find": [overload("string_find", [string, string], string, _find, member=True)],
        "findAll": [
            overload("string_find_all", [string, string], strings, _find_all, member=True),
            overload(
                "string_find_all_n", [string, string, integer], strings, _find_all, member=True
            ),
        ],
    }
