"""URLs parsed and printed like Go's ``net/url``, which Kubernetes' URL library uses.

``urllib.parse`` accepts and splits differently (it never fails, keeps invalid ports, treats
``;`` as a query separator in older versions), so the rules of Go's ``url.Parse``,
``url.ParseRequestURI``, ``URL.String``, ``EscapedPath``, ``Hostname``, ``Port`` and ``Query``
are followed here, error messages included. Like Go, it works on the UTF-8 bytes of the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dralib.allocator.cel.netaddr import go_quote

__all__ = ["URL", "URLError", "parse", "parse_request_uri"]

_PATH, _HOST, _ZONE, _USER, _QUERY, _FRAGMENT = range(6)
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class URLError(ValueError):
    """A URL that Go would not parse; the message is Go's."""


def _should_escape(c: int, mode: int) -> bool:
    if c in _ALNUM:
        return False
    if mode in (_HOST, _ZONE) and chr(c) in "!$&'()*+,;=:[]<>\"":
        return False
    if chr(c) in "-_.~":
        return False
    if chr(c) in "$&+,/:;=?@":
        if mode == _PATH:
            return c == ord("?")
        if mode == _USER:
            return chr(c) in "@/?:"
        if mode == _QUERY:
            return True
        if mode == _FRAGMENT:
            return False
    # Fragments may keep these sub-delims; everything else must be escaped.
    return not (mode == _FRAGMENT and chr(c) in "!()*")


def _unescape(s: bytes, mode: int) -> bytes:
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise URLError("invalid URL escape " + go_quote(s[i : i + 3].decode("latin-1")))
            # In a host, %-encoding is for non-ASCII bytes only, except %25 (RFC 6874).
            if mode == _HOST and int(chr(s[i + 1]), 16) < 8 and s[i : i + 3] != b"%25":
                raise URLError("invalid URL escape " + go_quote(s[i : i + 3].decode("latin-1")))
            if mode == _ZONE:
                value = int(s[i + 1 : i + 3], 16)
                if s[i : i + 3] != b"%25" and value != 0x20 and _should_escape(value, _HOST):
                    raise URLError("invalid URL escape " + go_quote(s[i : i + 3].decode()))
            i += 3
            continue
        if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
            raise URLError(f"invalid character {go_quote(chr(c))} in host name")
        i += 1
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(ord(" ") if c == ord("+") and mode == _QUERY else c)
        i += 1
    return bytes(out)


def _escape(s: bytes, mode: int) -> bytes:
    out = bytearray()
    for c in s:
        if c == ord(" ") and mode == _QUERY:
            out.append(ord("+"))
        elif _should_escape(c, mode):
            out.extend(f"%{c:02X}".encode())
        else:
            out.append(c)
    return bytes(out)


def _valid_optional_port(port: bytes) -> bool:
    return port == b"" or (port[:1] == b":" and all(48 <= c <= 57 for c in port[1:]))


def _valid_encoded(s: bytes, mode: int) -> bool:
    return all(chr(c) in "!$&'()*+,;=:@[]%" or not _should_escape(c, mode) for c in s)


def _valid_userinfo(s: bytes) -> bool:
    return all(c in _ALNUM or chr(c) in "-._:~!$&'()*+,;=%@" for c in s)


@dataclass
class URL:
    """The fields of Go's ``url.URL`` that the URL library observes (as bytes)."""

    scheme: bytes = b""
    opaque: bytes = b""
    user: tuple[bytes, bytes | None] | None = None
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""
    raw_fragment: bytes = field(default=b"")

    def escaped_path(self) -> bytes:
        if self.raw_path and _valid_encoded(self.raw_path, _PATH):
            try:
                if _unescape(self.raw_path, _PATH) == self.path:
                    return self.raw_path
            except URLError:
                pass
        if self.path == b"*":
            return b"*"
        return _escape(self.path, _PATH)

    def escaped_fragment(self) -> bytes:
        if self.raw_fragment and _valid_encoded(self.raw_fragment, _FRAGMENT):
            try:
                if _unescape(self.raw_fragment, _FRAGMENT) == self.fragment:
                    return self.raw_fragment
            except URLError:
                pass
        return _escape(self.fragment, _FRAGMENT)

    def string(self) -> bytes:
        """``URL.String()``."""
        buf = bytearray()
        if self.scheme:
            buf += self.scheme + b":"
        if self.opaque:
            buf += self.opaque
        else:
            if self.scheme or self.host or self.user is not None:
                if self.host or self.path or self.user is not None:
                    buf += b"//"
                if self.user is not None:
                    name, password = self.user
                    buf += _escape(name, _USER)
                    if password is not None:
                        buf += b":" + _escape(password, _USER)
                    buf += b"@"
                if self.host:
                    buf += _escape(self.host, _HOST)
            path = self.escaped_path()
            if path and path[:1] != b"/" and self.host:
                buf += b"/"
            if not buf and b":" in path.split(b"/", 1)[0]:
                buf += b"./"
            buf += path
        if self.force_query or self.raw_query:
            buf += b"?" + self.raw_query
        if self.fragment:
            buf += b"#" + self.escaped_fragment()
        return bytes(buf)

    def _split_host_port(self) -> tuple[bytes, bytes]:
        host, port = self.host, b""
        colon = host.rfind(b":")
        if colon != -1 and _valid_optional_port(host[colon:]):
            host, port = host[:colon], host[colon + 1 :]
        if host.startswith(b"[") and host.endswith(b"]"):
            host = host[1:-1]
        return host, port

    def hostname(self) -> bytes:
        return self._split_host_port()[0]

    def port(self) -> bytes:
        return self._split_host_port()[1]

    def query(self) -> dict[bytes, list[bytes]]:
        """``URL.Query()``: malformed pairs and pairs with ';' are dropped."""
        values: dict[bytes, list[bytes]] = {}
        for pair in self.raw_query.split(b"&") if self.raw_query else []:
            if b";" in pair or not pair:
                continue
            key, _, value = pair.partition(b"=")
            try:
                key, value = _unescape(key, _QUERY), _unescape(value, _QUERY)
            except URLError:
                continue
            values.setdefault(key, []).append(value)
        return values


def _get_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if c in _ALNUM and not 48 <= c <= 57:
            continue
        if 48 <= c <= 57 or chr(c) in "+-.":
            if i == 0:
                return b"", raw
            continue
        if c == ord(":"):
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return b"", raw
    return b"", raw


def _parse_host(host: bytes) -> bytes:
    if host.startswith(b"["):
        close = host.rfind(b"]")
        if close < 0:
            raise URLError("missing ']' in host")
        colon_port = host[close + 1 :]
        if not _valid_optional_port(colon_port):
            raise URLError(f"invalid port {go_quote(colon_port.decode())} after host")
        zone = host[:close].find(b"%25")
        if zone >= 0:
            return (
                _unescape(host[:zone], _HOST)
                + _unescape(host[zone:close], _ZONE)
                + _unescape(host[close:], _HOST)
            )
    else:
        colon = host.rfind(b":")
        if colon != -1 and not _valid_optional_port(host[colon:]):
            raise URLError(f"invalid port {go_quote(host[colon:].decode())} after host")
    return _unescape(host, _HOST)


def _parse_authority(authority: bytes) -> tuple[tuple[bytes, bytes | None] | None, bytes]:
    at = authority.rfind(b"@")
    host = _parse_host(authority[at + 1 :] if at >= 0 else authority)
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not _valid_userinfo(userinfo):
        raise URLError("net/url: invalid userinfo")
    if b":" not in userinfo:
        return (_unescape(userinfo, _USER), None), host
    name, _, password = userinfo.partition(b":")
    return (_unescape(name, _USER), _unescape(password, _USER)), host


def _parse(raw: bytes, *, via_request: bool) -> URL:
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    url = URL()
    if raw == b"*":
        url.path = b"*"
        return url
    scheme, rest = _get_scheme(raw)
    url.scheme = scheme.lower()
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        url.force_query, rest = True, rest[:-1]
    else:
        rest, _, url.raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if url.scheme:
            url.opaque = rest
            return url
        if via_request:
            raise URLError("invalid URI for request")
        if b":" in rest.split(b"/", 1)[0]:
            raise URLError("first path segment in URL cannot contain colon")
    if (url.scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, rest = rest[2:], b""
        slash = authority.find(b"/")
        if slash >= 0:
            authority, rest = authority[:slash], authority[slash:]
        url.user, url.host = _parse_authority(authority)
    url.path = _unescape(rest, _PATH)
    url.raw_path = b"" if _escape(url.path, _PATH) == rest else rest
    return url


def _wrap(text: str, exc: URLError) -> URLError:
    return URLError(f"parse {go_quote(text)}: {exc}")


def parse_request_uri(text: str) -> URL:
    """``url.ParseRequestURI``: an absolute URI or an absolute path, no fragment split."""
    try:
        return _parse(text.encode(), via_request=True)
    except URLError as exc:
        raise _wrap(text, exc) from exc


def parse(text: str) -> URL:
    """``url.Parse``: any URI reference, with its fragment."""
    raw, _, fragment = text.encode().partition(b"#")
    try:
        url = _parse(raw, via_request=False)
    except URLError as exc:
        raise _wrap(raw.decode(errors="replace"), exc) from exc
    if fragment:
        try:
            url.fragment = _unescape(fragment, _FRAGMENT)
        except URLError as exc:
            raise _wrap(text, exc) from exc
        url.raw_fragment = b"" if _escape(url.fragment, _FRAGMENT) == fragment else fragment
    return url
