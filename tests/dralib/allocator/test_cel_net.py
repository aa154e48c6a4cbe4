"""Tests of Kubernetes' IP and CIDR CEL libraries and of the Go-compatible address parser.

Expressions and expected results come from k8s.io/apiserver/pkg/cel/library/ip_test.go and
cidr_test.go; parser messages from Go's net/netip tests.
"""

from __future__ import annotations

import ipaddress
import random

import pytest

from dralib.allocator.cel import CELError, DeviceInput, compile_selector
from dralib.allocator.cel.netaddr import AddrError, parse_addr, parse_prefix

DEVICE = DeviceInput(driver="driver-a", attributes={"address": {"string": "10.1.2.3"}})

# (expression, expected result) pairs of upstream's tables.
UPSTREAM = [
    ('ip("192.168.0.1") == ip("192.168.0.1")', True),
    ('isIP("192.168.0.1")', True),
    ('isIP("192.168.0.1.0")', False),
    ('ip.isCanonical("127.0.0.1")', True),
    ('ip("192.168.0.1").family() == 4', True),
    ('ip("0.0.0.0").isUnspecified()', True),
    ('ip("127.0.0.1").isUnspecified()', False),
    ('ip("127.0.0.1").isLoopback()', True),
    ('ip("1.2.3.4").isLoopback()', False),
    ('ip("224.0.0.1").isLinkLocalMulticast()', True),
    ('ip("224.0.1.1").isLinkLocalMulticast()', False),
    ('ip("169.254.169.254").isLinkLocalUnicast()', True),
    ('ip("192.168.0.1").isLinkLocalUnicast()', False),
    ('ip("192.168.0.1").isGlobalUnicast()', True),
    ('ip("255.255.255.255").isGlobalUnicast()', False),
    ('isIP("2001:db8::68")', True),
    ('isIP("2001:db8:::68")', False),
    ('ip.isCanonical("2001:db8::68")', True),
    ('ip.isCanonical("2001:DB8::68")', False),
    ('ip("2001:db8::68").family() == 6', True),
    ('ip("::").isUnspecified()', True),
    ('ip("::1").isUnspecified()', False),
    ('ip("::1").isLoopback()', True),
    ('ip("2001:db8::abcd").isLoopback()', False),
    ('ip("ff02::1").isLinkLocalMulticast()', True),
    ('ip("fd00::1").isLinkLocalMulticast()', False),
    ('ip("fe80::1").isLinkLocalUnicast()', True),
    ('ip("fd80::1").isLinkLocalUnicast()', False),
    ('ip("2001:db8::abcd").isGlobalUnicast()', True),
    ('ip("ff00::1").isGlobalUnicast()', False),
    ('string(ip("192.168.0.1")) == "192.168.0.1"', True),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))', True),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))', False),
    ('cidr("192.168.0.0/24").containsIP("192.168.0.1")', True),
    ('cidr("192.168.0.0/24").containsIP("192.168.1.1")', False),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))', True),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.1/32"))', True),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))', False),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.169.0.1/32"))', False),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")', True),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', False),
    ('cidr("192.168.0.0/24").ip() == ip("192.168.0.0")', True),
    ('cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.0/24").prefixLength() == 24', True),
    ('cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))', True),
    ('cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))', False),
    ('cidr("2001:db8::/32").containsIP("2001:db8::1")', True),
    ('cidr("2001:db8::/32").containsIP("2001:dc8::1")', False),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))', True),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))', False),
    ('cidr("2001:db8::/32").containsCIDR("2001:db8::/33")', True),
    ('cidr("2001:db8::/32").containsCIDR("2001:db8::/31")', False),
    ('cidr("2001:db8::/32").ip() == ip("2001:db8::")', True),
    ('cidr("2001:db8::/32").masked() == cidr("2001:db8::/32")', True),
    ('cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")', True),
    ('cidr("2001:db8::/32").prefixLength() == 32', True),
    ('string(cidr("192.168.0.0/24")) == "192.168.0.0/24"', True),
    # Equality keeps host bits and families apart, as Go's Prefix == and Addr == do.
    ('cidr("192.168.0.1/24") == cidr("192.168.0.0/24")', False),
    ('ip("::1.2.3.4") == ip("::102:304")', True),
    ('cidr("10.0.0.0/8").containsIP("::a00:1")', False),
    ('cidr("0.0.0.0/0").containsCIDR("::/0")', False),
    # Selectors over device attributes.
    'cidr("10.0.0.0/8").containsIP(device.attributes["driver-a"].address)',
    'isIP(device.attributes["driver-a"].address) && ip(device.attributes["driver-a"].address)'
    ".isGlobalUnicast()",
    'string(ip(device.attributes["driver-a"].address)) + "/32" == '
    'string(cidr(device.attributes["driver-a"].address + "/32"))',
]


@pytest.mark.parametrize("case", UPSTREAM)
def test_upstream_examples(case: tuple[str, bool] | str) -> None:
    """Upstream's documented examples give upstream's results."""
    expression, expected = case if isinstance(case, tuple) else (case, True)
    assert compile_selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            'ip("192.168.0.1.0") == ip("1.1.1.1")',
            'IP Address "192.168.0.1.0" parse error during conversion from string: '
            'ParseAddr("192.168.0.1.0"): IPv4 address too long',
        ),
        (
            'ip.isCanonical("2001:db8:::68")',
            'IP Address "2001:db8:::68" parse error during conversion from string: '
            'ParseAddr("2001:db8:::68"): each colon-separated field must have at least one digit '
            '(at ":68")',
        ),
        (
            'cidr("192.168.0.0/").prefixLength() == 0',
            "network address parse error during conversion from string: network address parse "
            'error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits '
            'after slash: ""',
        ),
        (
            'cidr("2001:db8::/").prefixLength() == 0',
            'netip.ParsePrefix("2001:db8::/"): bad bits after slash: ""',
        ),
        ('ip("fe80::1%eth0").family() == 6', 'IP address "fe80::1%eth0" with zone value is not'),
        ('ip("::ffff:1.2.3.4").family() == 6', 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not'),
        ('cidr("::ffff:1.2.3.4/128").prefixLength() == 1', "IPv4-mapped IPv6 address"),
        ('cidr("10.0.0.0/8").containsIP("10.0.0.256")', "no such overload"),
        ('cidr("10.0.0.0/8").containsCIDR("10.0.0.0/255.0.0.0")', 'bad bits after slash: "255.'),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    """Invalid addresses fail at evaluation with Go's messages."""
    with pytest.raises(CELError, match="CEL runtime error") as error:
        compile_selector(expression).matches(DEVICE)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            'isIP(cidr("192.168.0.0/24"))',
            "found no matching overload for 'isIP' applied to '(net.CIDR)'",
        ),
        ('cidr("10.0.0.0/8").family() == 4', "'family' applied to '(net.CIDR)'"),
        ('ip("1.2.3.4").sign() == 1', "'sign' applied to '(net.IP)'"),
        ('ip("1.2.3.4") == cidr("1.2.3.4/32")', "'_==_' applied to '(net.IP, net.CIDR)'"),
        ('string([ip("1.2.3.4")]) == ""', "found no matching overload for 'string'"),
    ],
)
def test_compile_errors(expression: str, message: str) -> None:
    """Type errors are found at compile time and name upstream's types."""
    with pytest.raises(CELError, match="CEL compile error") as error:
        compile_selector(expression)
    assert message in str(error.value)


def test_string_conversions_are_retargeted_one_by_one() -> None:
    """Several string() calls on IPs and CIDRs compile, and other string() calls are untouched."""
    expression = (
        'string(ip("2001:DB8::1")) + string(cidr("10.0.0.1/8")) + string(1) + string(b"x")'
        ' == "2001:db8::110.0.0.1/81x"'
    )
    assert compile_selector(expression).matches(DEVICE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'ParseAddr(""): unable to parse IP'),
        ("%x", 'ParseAddr("%x"): missing IPv6 address'),
        ("010.0.0.1", "IPv4 field has octet with leading zero"),
        ("1.2.3", "IPv4 address too short"),
        ("1..2.3", 'IPv4 field must have at least one digit (at ".2.3")'),
        ("1.2.3.256", "IPv4 field has value >255"),
        ("1:2:3:4:5:6:7:8:9", 'trailing garbage after address (at "9")'),
        ("1:2:3:4:5:6:7::8", "the :: must expand to at least one field of zeros"),
        ("1::2::3", 'multiple :: in address (at ":3")'),
        ("12345::", 'IPv6 field has value >=2^16 (at "12345::")'),
        ("1:2", "address string too short"),
        ("fe80::1%", "zone must be a non-empty string"),
        ("1.2.3.4:80", 'unexpected character (at ":80")'),
    ],
)
def test_address_parser_messages(text: str, message: str) -> None:
    """The parser refuses what Go refuses, with Go's message."""
    with pytest.raises(AddrError) as error:
        parse_addr(text)
    assert message in str(error.value)


def test_prefix_parser_messages() -> None:
    """ParsePrefix's rules: a slash, decimal bits without sign or leading zero, no zone."""
    cases = {
        "10.0.0.0": "no '/'",
        "10.0.0.0/08": 'bad bits after slash: "08"',
        "10.0.0.0/+8": 'bad bits after slash: "+8"',
        "10.0.0.0/33": "prefix length out of range",
        "fe80::1%eth0/64": "IPv6 zones cannot be present in a prefix",
        "999/8": 'ParseAddr("999"): unable to parse IP',
    }
    for text, message in cases.items():
        with pytest.raises(AddrError) as error:
            parse_prefix(text)
        assert str(error.value) == f'netip.ParsePrefix("{text}"): {message}'


def test_ipv6_text_matches_rfc_5952() -> None:
    """Addresses print like Go (RFC 5952), checked against Python's formatting of random values."""
    rng = random.Random(7)
    for _ in range(2000):
        groups = [rng.choice([0, 0, 1, 0xFFFF, rng.getrandbits(16)]) for _ in range(8)]
        value = int("".join(f"{g:04x}" for g in groups), 16)
        reference = ipaddress.IPv6Address(value)
        if reference.ipv4_mapped is not None:
            continue
        assert str(parse_addr(reference.exploded)) == reference.compressed
    assert str(parse_addr("1:0:0:1:0:0:0:1")) == "1:0:0:1::1"
    assert str(parse_addr("2001:db8:0:1:1:1:1:1")) == "2001:db8:0:1:1:1:1:1"
