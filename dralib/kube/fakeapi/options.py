"""List and watch query options, parsed and validated the way kube-apiserver does it.

The rules follow `ValidateListOptions` of k8s.io/apimachinery (pkg/apis/meta/internalversion/
validation): breaking them is a 422 Invalid naming the field, as the real handler answers
(`errors.NewInvalid` on kind ListOptions). Storage-level rules (`storage.ValidateListOptions`:
a resourceVersion beside a continue token, an unreadable token or version) are 400 BadRequest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
TRUE = ("1", "true", "True")
FALSE = ("0", "false", "False")


class InvalidOptions(Exception):
    """The query breaks a ListOptions rule: 422 Invalid, one cause per broken rule."""

    def __init__(self, causes: list[tuple[str, str]]) -> None:
        self.causes = causes
        joined = ", ".join(f"{field}: {message}" for field, message in causes)
        if len(causes) > 1:
            joined = f"[{joined}]"
        super().__init__(f'ListOptions.meta.k8s.io "" is invalid: {joined}')

    def details(self) -> dict[str, Any]:
        """The Status details of a 422: the group/kind and a cause per field."""
        return {
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [
                {"reason": reason_of(message), "message": message, "field": field}
                for field, message in self.causes
            ],
        }


def reason_of(message: str) -> str:
    """The cause type a field error message starts with (FieldValueForbidden, ...)."""
    if message.startswith("Unsupported value"):
        return "FieldValueNotSupported"
    return "FieldValueForbidden"


@dataclass(frozen=True)
class ListOptions:
    """The query parameters of a list or watch that change what the server returns."""

    watch: bool
    resource_version: str
    match: str
    continue_token: str
    limit: int
    send_initial_events: bool | None
    allow_bookmarks: bool
    timeout_seconds: float | None


def parse(query: dict[str, str]) -> ListOptions:
    """Read and validate list/watch options; InvalidOptions (422) or ValueError (400)."""
    limit_text = query.get("limit") or "0"
    if not limit_text.lstrip("-").isdigit():
        raise ValueError(f'limit: Invalid value: "{limit_text}": must be an integer')
    timeout_text = query.get("timeoutSeconds")
    initial_text = query.get("sendInitialEvents")
    send_initial: bool | None = None
    if initial_text is not None:
        if initial_text not in TRUE + FALSE:
            raise ValueError(f'sendInitialEvents: Invalid value: "{initial_text}": not a boolean')
        send_initial = initial_text in TRUE
    options = ListOptions(
        watch=query.get("watch") in TRUE,
        resource_version=query.get("resourceVersion", ""),
        match=query.get("resourceVersionMatch", ""),
        continue_token=query.get("continue", ""),
        limit=max(int(limit_text), 0),
        send_initial_events=send_initial,
        allow_bookmarks=query.get("allowWatchBookmarks") in TRUE,
        timeout_seconds=float(timeout_text) if timeout_text else None,
    )
    causes = _watch_causes(options) if options.watch else _list_causes(options)
    if causes:
        raise InvalidOptions(causes)
    if options.resource_version:
        parse_rv(options.resource_version)
    return options


def _list_causes(options: ListOptions) -> list[tuple[str, str]]:
    causes: list[tuple[str, str]] = []
    match = options.match
    if match:
        if not options.resource_version:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                    "provided",
                )
            )
        if options.continue_token:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(
                (
                    "resourceVersionMatch",
                    f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan", ""',
                )
            )
        if match == EXACT and options.resource_version == "0":
            causes.append(
                (
                    "resourceVersionMatch",
                    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if options.send_initial_events is not None:
        causes.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(options: ListOptions) -> list[tuple[str, str]]:
    causes: list[tuple[str, str]] = []
    match = options.match
    if options.send_initial_events is not None and match != NOT_OLDER_THAN:
        causes.append(
            (
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                "NotOlderThan",
            )
        )
    if match:
        if options.send_initial_events is None:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided",
                )
            )
        if match != NOT_OLDER_THAN:
            causes.append(
                (
                    "resourceVersionMatch",
                    f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                )
            )
        if options.continue_token:
            causes.append(
                (
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            )
    return causes


def watch_list_forbidden() -> InvalidOptions:
    """What a server without the WatchList feature answers to sendInitialEvents on a watch."""
    return InvalidOptions(
        [
            (
                "sendInitialEvents",
                "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                "feature gate is enabled",
            )
        ]
    )


def parse_rv(value: str) -> int:
    """This server's resourceVersions are integers; anything else is a 400 as upstream."""
    if not value.isdigit():
        raise ValueError(f'invalid resource version: resourceVersion: Invalid value: "{value}"')
    return int(value)
