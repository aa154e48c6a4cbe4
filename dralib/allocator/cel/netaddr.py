"""IP addresses and prefixes parsed and printed like Go's ``net/netip``, which Kubernetes uses.

Python's ``ipaddress`` differs from Go in what it accepts (netmask prefixes such as
``10.0.0.0/255.0.0.0``, host bits with ``strict=False`` only) and in its error messages, and
Kubernetes' IP and CIDR libraries repeat Go's messages to the user, so the parser here follows
``netip.ParseAddr`` and ``netip.ParsePrefix`` rule by rule, messages included. Formatting follows
``Addr.String`` (RFC 5952: lowercase, the longest run of two or more zero groups elided).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Addr", "AddrError", "Prefix", "go_quote", "parse_addr", "parse_prefix"]


class AddrError(ValueError):
    """A string that ``netip`` would not parse; the message is Go's."""


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` for the strings that appear in these messages."""
    escapes = {
        '"': '\\"',
        "\\": "\\\\",
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
    }
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class Addr:
    """An IPv4 (``bits == 32``) or IPv6 (``bits == 128``) address with an optional zone."""

    value: int
    bits: int
    zone: str = ""

    @property
    def is4(self) -> bool:
        return self.bits == 32

    @property
    def is4in6(self) -> bool:
        return self.bits == 128 and self.value >> 32 == 0xFFFF

    def byte(self, index: int) -> int:
        return (self.value >> (self.bits - 8 * (index + 1))) & 0xFF

    def group(self, index: int) -> int:
        return (self.value >> (128 - 16 * (index + 1))) & 0xFFFF

    def __str__(self) -> str:
        if self.is4:
            return ".".join(str(self.byte(i)) for i in range(4))
        if self.is4in6:
            text = "::ffff:" + ".".join(str((self.value >> s) & 0xFF) for s in (24, 16, 8, 0))
            return text + (f"%{self.zone}" if self.zone else "")
        groups = [self.group(i) for i in range(8)]
        start, end = -1, -1  # the longest run of two or more zero groups, the first if tied
        for i in range(8):
            j = i
            while j < 8 and groups[j] == 0:
                j += 1
            if j - i >= 2 and j - i > end - start:
                start, end = i, j
        text, i = "", 0
        while i < 8:
            if i == start:
                text += "::"
                i = end
                if i >= 8:
                    break
            elif i > 0:
                text += ":"
            text += f"{groups[i]:x}"
            i += 1
        return text + (f"%{self.zone}" if self.zone else "")

    def masked(self, bits: int) -> Addr:
        """The address with all but its first ``bits`` bits cleared (no zone)."""
        host = self.bits - bits
        return Addr((self.value >> host) << host, self.bits)

    def is_unspecified(self) -> bool:
        return self.value == 0

    def is_loopback(self) -> bool:
        return self.byte(0) == 127 if self.is4 else self.value == 1

    def is_multicast(self) -> bool:
        return self.byte(0) & 0xF0 == 0xE0 if self.is4 else self.byte(0) == 0xFF

    def is_link_local_multicast(self) -> bool:
        if self.is4:
            return self.value >> 8 == 0xE00000
        return self.group(0) & 0xFF0F == 0xFF02

    def is_link_local_unicast(self) -> bool:
        if self.is4:
            return self.value >> 16 == 0xA9FE
        return self.group(0) & 0xFFC0 == 0xFE80

    def is_global_unicast(self) -> bool:
        # Go keeps package net's rule: private IPv4 and ULA IPv6 are global unicast too.
        if self.is4 and self.value in (0, 0xFFFFFFFF):
            return False
        return not (
            self.is_unspecified()
            or self.is_loopback()
            or self.is_multicast()
            or self.is_link_local_unicast()
        )


def _error(text: str, message: str, at: str | None = None) -> AddrError:
    suffix = f" (at {go_quote(at)})" if at else ""
    return AddrError(f"ParseAddr({go_quote(text)}): {message}{suffix}")


def _ipv4_fields(text: str, part: str) -> list[int]:
    fields: list[int] = []
    value, digits = 0, 0
    for i, char in enumerate(part):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise _error(text, "IPv4 field has octet with leading zero")
            value = value * 10 + ord(char) - ord("0")
            digits += 1
            if value > 255:
                raise _error(text, "IPv4 field has value >255")
        elif char == ".":
            if i == 0 or i == len(part) - 1 or part[i - 1] == ".":
                raise _error(text, "IPv4 field must have at least one digit", part[i:])
            if len(fields) == 3:
                raise _error(text, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _error(text, "unexpected character", part[i:])
    if len(fields) < 3:
        raise _error(text, "IPv4 address too short")
    return [*fields, value]


def _parse_ipv6(text: str) -> Addr:
    rest, zone = text, ""
    if "%" in text:
        rest, zone = text.split("%", 1)
        if not zone:
            raise _error(text, "zone must be a non-empty string")
    data = [0] * 16
    ellipsis = -1
    if rest.startswith("::"):
        ellipsis, rest = 0, rest[2:]
        if not rest:
            return Addr(0, 128, zone)
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(rest) and rest[off] in "0123456789abcdefABCDEF":
            acc = (acc << 4) + int(rest[off], 16)
            off += 1
            if acc > 0xFFFF:
                raise _error(text, "IPv6 field has value >=2^16", rest)
        if off == 0:
            raise _error(text, "each colon-separated field must have at least one digit", rest)
        if off < len(rest) and rest[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _error(
                    text,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    rest,
                )
            if i + 4 > 16:
                raise _error(
                    text,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    rest,
                )
            data[i : i + 4] = _ipv4_fields(text, rest)
            rest = ""
            i += 4
            break
        data[i], data[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        rest = rest[off:]
        if not rest:
            break
        if rest[0] != ":":
            raise _error(text, "unexpected character, want colon", rest)
        if len(rest) == 1:
            raise _error(text, "colon must be followed by more characters", rest)
        rest = rest[1:]
        if rest[0] == ":":
            if ellipsis >= 0:
                raise _error(text, "multiple :: in address", rest)
            ellipsis, rest = i, rest[1:]
            if not rest:
                break
    if rest:
        raise _error(text, "trailing garbage after address", rest)
    if i < 16:
        if ellipsis < 0:
            raise _error(text, "address string too short")
        shift = 16 - i
        data = data[:ellipsis] + [0] * shift + data[ellipsis:i]
    elif ellipsis >= 0:
        raise _error(text, "the :: must expand to at least one field of zeros")
    return Addr(int.from_bytes(bytes(data), "big"), 128, zone)


def parse_addr(text: str) -> Addr:
    """``netip.ParseAddr``: dotted IPv4, IPv6 (with embedded IPv4 or a zone)."""
    for char in text:
        if char == ".":
            fields = _ipv4_fields(text, text)
            return Addr(int.from_bytes(bytes(fields), "big"), 32)
        if char == ":":
            return _parse_ipv6(text)
        if char == "%":
            raise _error(text, "missing IPv6 address")
    raise _error(text, "unable to parse IP")


@dataclass(frozen=True)
class Prefix:
    """An address and a prefix length; the address keeps its host bits, as in Go."""

    addr: Addr
    length: int

    def __str__(self) -> str:
        return f"{self.addr}/{self.length}"

    def masked(self) -> Prefix:
        return Prefix(self.addr.masked(self.length), self.length)

    def contains(self, ip: Addr) -> bool:
        if ip.zone or ip.bits != self.addr.bits:
            return False
        return ip.masked(self.length) == self.addr.masked(self.length)

    def overlaps(self, other: Prefix) -> bool:
        if other.addr.bits != self.addr.bits:
            return False
        bits = min(self.length, other.length)
        return self.addr.masked(bits) == other.addr.masked(bits)


def parse_prefix(text: str) -> Prefix:
    """``netip.ParsePrefix``: ``address/bits`` with decimal bits and no zone."""

    def fail(message: str) -> AddrError:
        return AddrError(f"netip.ParsePrefix({go_quote(text)}): {message}")

    slash = text.rfind("/")
    if slash < 0:
        raise fail("no '/'")
    try:
        addr = parse_addr(text[:slash])
    except AddrError as exc:
        raise fail(str(exc)) from exc
    if addr.zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    bits_text = text[slash + 1 :]
    # strconv.Atoi would take a sign and leading zeros; Go refuses both first.
    bad_bits = fail("bad bits after slash: " + go_quote(bits_text))
    if len(bits_text) > 1 and not "1" <= bits_text[0] <= "9":
        raise bad_bits
    if not bits_text or not bits_text.isascii() or not bits_text.isdigit():
        raise bad_bits
    bits = int(bits_text)
    if bits > addr.bits:
        raise fail("prefix length out of range")
    return Prefix(addr, bits)
