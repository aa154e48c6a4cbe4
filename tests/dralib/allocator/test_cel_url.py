"""Tests of Kubernetes' URL CEL library and of the Go-compatible URL parser.

Expressions and expected results come from the documentation of
k8s.io/apiserver/pkg/cel/library/urls.go; validity cases from Go's net/url url_test.go.
"""

from __future__ import annotations

import pytest

from dralib.allocator.cel import CELError, DeviceInput, compile_selector
from dralib.allocator.cel.gourl import URL, parse

DEVICE = DeviceInput(driver="driver-a", attributes={"endpoint": {"string": "https://h:8443/x"}})

UPSTREAM = [
    "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
    "isURL('/absolute-path')",
    "!isURL('https://a:b:c/')",
    "!isURL('../relative-path')",
    "url('/path').getScheme() == ''",
    "url('https://example.com/').getScheme() == 'https'",
    "url('https://example.com:80/').getHost() == 'example.com:80'",
    "url('https://example.com/').getHost() == 'example.com'",
    "url('https://[::1]:80/').getHost() == '[::1]:80'",
    "url('https://[::1]/').getHost() == '[::1]'",
    "url('/path').getHost() == ''",
    "url('https://example.com:80/').getHostname() == 'example.com'",
    "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
    "url('https://[::1]:80/').getHostname() == '::1'",
    "url('/path').getHostname() == ''",
    "url('https://example.com:80/').getPort() == '80'",
    "url('https://example.com/').getPort() == ''",
    "url('/path').getPort() == ''",
    "url('https://example.com/path').getEscapedPath() == '/path'",
    "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
    "url('https://example.com').getEscapedPath() == ''",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
    "url('https://example.com/path?key with spaces=value with spaces').getQuery()"
    " == {'key with spaces': ['value with spaces']}",
    "url('https://example.com/path?').getQuery() == {}",
    "url('https://example.com/path').getQuery() == {}",
    # Equality compares URL.String(): the scheme is lowercased, escapes are normalized.
    "url('HTTPS://example.com/a') == url('https://example.com/a')",
    "url('https://example.com/a%41') != url('https://example.com/aA')",
    "url('https://example.com/a b') == url('https://example.com/a%20b')",
    "url('https://example.com/p?a=1;b=2').getQuery() == {}",
    'url(device.attributes["driver-a"].endpoint).getPort() == "8443"',
]


@pytest.mark.parametrize("expression", UPSTREAM)
def test_upstream_examples(expression: str) -> None:
    """Upstream's documented examples give upstream's results."""
    assert compile_selector(expression).matches(DEVICE) is True


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "url('https://a:b:c/') == url('/')",
            'parse "https://a:b:c/": invalid port ":c" after host',
        ),
        (
            "url('../relative-path') == url('/')",
            'parse "../relative-path": invalid URI for request',
        ),
        ("url('') == url('/')", 'parse "": empty url'),
        ("url('http://[::1/') == url('/')", "parse \"http://[::1/\": missing ']' in host"),
        ("url('http://a b/') == url('/')", 'parse "http://a b/": invalid character " " in host'),
        ("url('/a%zz') == url('/')", 'parse "/a%zz": invalid URL escape "%zz"'),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    """Invalid URLs fail at evaluation with Go's messages."""
    with pytest.raises(CELError, match="CEL runtime error") as error:
        compile_selector(expression).matches(DEVICE)
    assert "URL parse error during conversion from string: " + message in str(error.value)


def test_compile_errors_name_the_url_type() -> None:
    """A URL is not a string or a quantity for the checker."""
    with pytest.raises(CELError) as error:
        compile_selector("url('/a').startsWith('/')")
    assert "applied to '(kubernetes.URL, string)'" in str(error.value)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("http://foo.com", True),
        ("http://foo.com/", True),
        ("http://foo.com/path", True),
        ("/", True),
        ("//not.a.user@not.a.host/just/a/path", True),
        ("//not.a.user@%66%6f%6f.com/just/a/path/also", True),
        ("*", True),
        ("http://192.168.0.1/", True),
        ("http://192.168.0.1:8080/", True),
        ("http://[fe80::1]/", True),
        ("http://[fe80::1]:8080/", True),
        ("http://[fe80::1%25en0]/", True),
        ("http://[fe80::1%25en0]:8080/", True),
        ("http://[fe80::1%25%65%6e%301-._~]/", True),
        ("http://[fe80::1%25%65%6e%301-._~]:8080/", True),
        ("foo.html", False),
        ("../dir/", False),
        (" http://foo.com", False),
        ("http://192.168.0.%31/", False),
        ("http://192.168.0.%31:8080/", False),
        ("http://[fe80::%31]/", False),
        ("http://[fe80::%31]:8080/", False),
    ],
)
def test_request_uri_validity(text: str, valid: bool) -> None:
    """isURL accepts what Go's url.ParseRequestURI accepts."""
    quoted = text.replace("'", "\\'")
    assert compile_selector(f"isURL('{quoted}') == {str(valid).lower()}").matches(DEVICE)


def test_string_round_trips() -> None:
    """URL.String() of a parsed URL parses back to what the getters observe."""
    for text in (
        "https://user:p%40ss@example.com:80/a%2Fb/c d?x=1&y=%20#frag%21",
        "mailto:someone@example.com?subject=hi",
        "http://[fe80::1%25en0]:8080/",
        "/just/a/path?",
    ):
        first = parse(text)
        second = parse(first.string().decode())
        for read in (URL.string, URL.escaped_path, URL.hostname, URL.port, URL.query):
            assert read(second) == read(first)
        assert (second.scheme, second.host) == (first.scheme, first.host)
