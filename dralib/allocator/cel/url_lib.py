"""Kubernetes' CEL URL library (k8s.io/apiserver/pkg/cel/library/urls.go).

A URL value is a CEL ``map(string, bool)`` ``{"<URL.String()>": true}``: a type nothing else
uses, so the checker keeps URLs apart from other values (errors call it ``kubernetes.URL``), and
``==`` compares ``URL.String()`` as upstream's ``URL.Equal`` does. The getters parse the text
again; Go's ``String()`` output parses back to the same components. Parsing follows Go's
``net/url`` (`dralib.allocator.cel.gourl`): ``url()`` and ``isURL()`` accept what
``url.ParseRequestURI`` accepts (an absolute URI or an absolute path).
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from dralib.allocator.cel.gourl import URL as GoURL
from dralib.allocator.cel.gourl import URLError, parse, parse_request_uri
from dralib.allocator.cel.library import URL, FunctionError, Overloads, overload

__all__ = ["overloads"]


def _text(data: bytes) -> str:
    return data.decode(errors="replace")


def _to_url(text: str) -> dict[str, bool]:
    try:
        parse_request_uri(text)
        # As upstream: ParseRequestURI validates, Parse (which splits the fragment) builds.
        url = parse(text)
    except URLError as exc:
        raise FunctionError(f"URL parse error during conversion from string: {exc}") from exc
    return {_text(url.string()): True}


def _is_url(text: str) -> bool:
    try:
        parse_request_uri(text)
    except URLError:
        return False
    return True


def _from_value(value: object) -> GoURL:
    if isinstance(value, dict) and len(value) == 1:
        text, flag = next(iter(value.items()))
        if isinstance(text, str) and flag is True:
            try:
                return parse(text)
            except URLError as exc:
                raise FunctionError(str(exc)) from exc
    raise FunctionError("no such overload")


def _query(value: object) -> dict[str, list[str]]:
    return {
        _text(key): [_text(v) for v in values] for key, values in _from_value(value).query().items()
    }


def overloads() -> Overloads:
    """The URL library's overloads by function name."""
    string, boolean = cel.Type.STRING, cel.Type.BOOL

    def getter(name: str, read: Any) -> list[Any]:
        return [
            overload(
                f"url_{name}", [URL], string, lambda v: _text(read(_from_value(v))), member=True
            )
        ]

    return {
        "url": [overload("string_to_url", [string], URL, _to_url)],
        "isURL": [overload("is_url_string", [string], boolean, _is_url)],
        "getScheme": getter("get_scheme", lambda u: u.scheme),
        "getHost": getter("get_host", lambda u: u.host),
        "getHostname": getter("get_hostname", GoURL.hostname),
        "getPort": getter("get_port", GoURL.port),
        "getEscapedPath": getter("get_escaped_path", GoURL.escaped_path),
        "getQuery": [
            overload(
                "url_get_query",
                [URL],
                cel.Type.Map(string, cel.Type.List(string)),
                _query,
                member=True,
            )
        ],
    }
