"""Name formats the API server enforces, from k8s.io/apimachinery/pkg/util/validation.

Each function returns the reason a value is invalid, or "" when it is valid, so the caller
decides which field to blame.
"""

from __future__ import annotations

import re
from functools import lru_cache

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DRIVER_NAME_MAX_LENGTH = 63
C_IDENTIFIER_MAX_LENGTH = 32  # resource.DeviceMaxIDLength
ATTRIBUTE_DOMAIN_MAX_LENGTH = 63  # resource.DeviceMaxDomainLength

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=16_384)  # names repeat in every slice, pod and claim
def dns1123_label(value: str) -> str:
    """Reason `value` is not a DNS label (a request, device or counter name, a namespace)."""
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        return f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name')"
        )
    return ""


@lru_cache(maxsize=16_384)  # names repeat in every slice, pod and claim
def dns1123_subdomain(value: str) -> str:
    """Reason `value` is not a DNS subdomain (an object, class or node name)."""
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com')"
        )
    return ""


@lru_cache(maxsize=16_384)  # label and annotation keys repeat in every object
def qualified_name(value: str) -> str:
    """Reason `value` is not a label or annotation key (`[prefix/]name`)."""
    prefix, slash, name = value.rpartition("/")
    if value.count("/") > 1:
        return "a qualified name must consist of an optional DNS subdomain prefix and a name"
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        reason = dns1123_subdomain(prefix)
        if reason:
            return f"prefix part {reason}"
    if not name:
        return "name part must be non-empty"
    if len(name) > QUALIFIED_NAME_MAX_LENGTH:
        return f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters"
    if not _QUALIFIED_NAME_PART.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyName' or 'example.com/name')"
        )
    return ""


def label_value(value: str) -> str:
    """Reason `value` is not a label value (empty is valid)."""
    if not value:
        return ""
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        return f"must be no more than {LABEL_VALUE_MAX_LENGTH} characters"
    if not _QUALIFIED_NAME_PART.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return ""


def driver_name(value: str) -> str:
    """Reason `value` is not a DRA driver name (a DNS subdomain of at most 63 characters)."""
    if not value:
        return "required"
    if len(value) > DRIVER_NAME_MAX_LENGTH:
        return f"must be no more than {DRIVER_NAME_MAX_LENGTH} characters"
    return dns1123_subdomain(value.lower())


def pool_name(value: str) -> str:
    """Reason `value` is not a pool name (DNS subdomains joined by `/`, at most 253)."""
    if not value:
        return "required"
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
    for part in value.split("/"):
        reason = dns1123_subdomain(part)
        if reason:
            return reason
    return ""


def c_identifier(value: str) -> str:
    """Reason `value` is not a C identifier of at most 32 characters."""
    if len(value) > C_IDENTIFIER_MAX_LENGTH:
        return f"must be no more than {C_IDENTIFIER_MAX_LENGTH} characters"
    if not _C_IDENTIFIER.match(value):
        return (
            "a valid C identifier must start with alphabetic character or '_', followed by a "
            "string of alphanumeric characters or '_' (e.g. 'my_name')"
        )
    return ""


@lru_cache(maxsize=16_384)  # names repeat in every slice, pod and claim
def device_qualified_name(value: str) -> str:
    """Reason `value` is not an attribute or capacity name (`[domain/]cIdentifier`)."""
    parts = value.split("/")
    if len(parts) > 2:
        return "must not contain more than one slash"
    if len(parts) == 2:
        domain, name = parts
        if not domain:
            return "the domain must not be empty"
        reason = driver_name(domain)
        if reason:
            return f"the domain {reason}"
        if not name:
            return "the name must not be empty"
        return c_identifier(name)
    return c_identifier(value)


def fully_qualified_name(value: str) -> str:
    """Reason `value` is not a `domain/cIdentifier` (a constraint's attribute)."""
    reason = device_qualified_name(value)
    if reason:
        return reason
    if "/" not in value:
        return "a fully qualified name must be a domain and a name separated by a slash"
    return ""
