"""Kubernetes' CEL IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go).

Values (cel_expr_python cannot carry opaque values): an IP is a CEL ``map(bool, string)``
``{true: "<address>"}`` and a CIDR a ``map(int, string)`` ``{0: "<address>/<bits>"}``, each
holding Go's canonical text. The two map types are used by nothing else, so the checker keeps
IPs, CIDRs and quantities apart (``cidr("10.0.0.0/8").family()`` is a compile error, as
upstream), and ``==`` compares the canonical texts, which is Go's ``Addr ==`` and ``Prefix ==``
(a CIDR keeps its host bits: ``cidr("10.0.0.1/8") != cidr("10.0.0.0/8")``).

``string(ip)`` and ``string(cidr)``: cel-cpp's ``string`` cannot take more overloads, so the
compiler retargets such a call to ``__netString__`` when the checker reports it (see
``dralib.allocator.cel.macros.Rewritten.retarget_string``). ``type(ip("..."))`` is a map type
here, not ``net.IP``.
"""

from __future__ import annotations

from typing import Any, Final

from cel_expr_python import cel

from dralib.allocator.cel.library import CIDR, IP, FunctionError, Overloads, overload
from dralib.allocator.cel.macros import NET_STRING
from dralib.allocator.cel.netaddr import Addr, AddrError, Prefix, go_quote, parse_addr, parse_prefix

__all__ = ["NET_STRING", "overloads"]

_IP_KEY: Final = True
_CIDR_KEY: Final = 0


def _parse_ip(text: str) -> Addr:
    try:
        addr = parse_addr(text)
    except AddrError as exc:
        raise FunctionError(
            f"IP Address {go_quote(text)} parse error during conversion from string: {exc}"
        ) from exc
    if addr.zone:
        raise FunctionError(f"IP address {go_quote(text)} with zone value is not allowed")
    if addr.is4in6:
        raise FunctionError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return addr


_PARSE_ERROR: Final = "network address parse error during conversion from string: "


def _parse_cidr(text: str) -> Prefix:
    try:
        prefix = parse_prefix(text)
    except AddrError as exc:
        # Upstream wraps the message twice (parseCIDR, then stringToCIDR).
        raise FunctionError(f"{_PARSE_ERROR}{_PARSE_ERROR}{exc}") from exc
    if prefix.addr.is4in6:
        raise FunctionError(
            f"{_PARSE_ERROR}IPv4-mapped IPv6 address {go_quote(text)} is not allowed"
        )
    return prefix


def _ip_value(addr: Addr) -> dict[Any, str]:
    return {_IP_KEY: str(addr)}


def _cidr_value(prefix: Prefix) -> dict[Any, str]:
    return {_CIDR_KEY: str(prefix)}


def _as_ip(value: object) -> Addr:
    if isinstance(value, dict) and len(value) == 1:
        text = value.get(_IP_KEY)
        if isinstance(text, str) and next(iter(value)) is True:
            return parse_addr(text)
    raise FunctionError("no such overload")


def _as_cidr(value: object) -> Prefix:
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        text = value.get(_CIDR_KEY)
        if isinstance(text, str) and key == 0 and key is not False:
            return parse_prefix(text)
    raise FunctionError("no such overload")


def _is_ip(text: str) -> bool:
    try:
        _parse_ip(text)
    except FunctionError:
        return False
    return True


def _is_cidr(text: str) -> bool:
    try:
        _parse_cidr(text)
    except FunctionError:
        return False
    return True


def _contains_ip(cidr: object, other: object) -> bool:
    prefix = _as_cidr(cidr)
    if isinstance(other, str):
        # Upstream turns a bad address string into "no such overload", not the parse error.
        if not _is_ip(other):
            raise FunctionError("no such overload")
        return prefix.contains(_parse_ip(other))
    return prefix.contains(_as_ip(other))


def _contains_cidr(cidr: object, other: object) -> bool:
    prefix = _as_cidr(cidr)
    inner = _parse_cidr(other) if isinstance(other, str) else _as_cidr(other)
    return prefix.overlaps(inner) and prefix.length <= inner.length


def _net_string(value: object) -> str:
    if isinstance(value, dict) and next(iter(value), None) is True:
        return str(_as_ip(value))
    return str(_as_cidr(value))


def overloads() -> Overloads:
    """The IP and CIDR overloads by function name."""
    string, boolean, integer = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT

    def predicate(name: str, test: Any) -> list[Any]:
        return [overload(f"ip_{name}", [IP], boolean, lambda v: test(_as_ip(v)), member=True)]

    return {
        "ip": [
            overload("string_to_ip", [string], IP, lambda t: _ip_value(_parse_ip(t))),
            overload("cidr_ip", [CIDR], IP, lambda c: _ip_value(_as_cidr(c).addr), member=True),
        ],
        "isIP": [overload("is_ip", [string], boolean, _is_ip)],
        "ip.isCanonical": [
            overload("ip_is_canonical", [string], boolean, lambda t: str(_parse_ip(t)) == t)
        ],
        "family": [
            overload("ip_family", [IP], integer, lambda v: 4 if _as_ip(v).is4 else 6, member=True)
        ],
        "isUnspecified": predicate("is_unspecified", Addr.is_unspecified),
        "isLoopback": predicate("is_loopback", Addr.is_loopback),
        "isLinkLocalMulticast": predicate("is_link_local_multicast", Addr.is_link_local_multicast),
        "isLinkLocalUnicast": predicate("is_link_local_unicast", Addr.is_link_local_unicast),
        "isGlobalUnicast": predicate("is_global_unicast", Addr.is_global_unicast),
        "cidr": [overload("string_to_cidr", [string], CIDR, lambda t: _cidr_value(_parse_cidr(t)))],
        "isCIDR": [overload("is_cidr", [string], boolean, _is_cidr)],
        "containsIP": [
            overload("cidr_contains_ip_string", [CIDR, string], boolean, _contains_ip, member=True),
            overload("cidr_contains_ip_ip", [CIDR, IP], boolean, _contains_ip, member=True),
        ],
        "containsCIDR": [
            overload(
                "cidr_contains_cidr_string", [CIDR, string], boolean, _contains_cidr, member=True
            ),
            overload("cidr_contains_cidr", [CIDR, CIDR], boolean, _contains_cidr, member=True),
        ],
        "prefixLength": [
            overload(
                "cidr_prefix_length", [CIDR], integer, lambda c: _as_cidr(c).length, member=True
            )
        ],
        "masked": [
            overload(
                "cidr_masked",
                [CIDR],
                CIDR,
                lambda c: _cidr_value(_as_cidr(c).masked()),
                member=True,
            )
        ],
        # One overload: the runtime tells overloads apart by value kind, and both are maps.
        NET_STRING: [
            overload("net_to_string", [cel.Type.Map(cel.Type.DYN, string)], string, _net_string)
        ],
    }
