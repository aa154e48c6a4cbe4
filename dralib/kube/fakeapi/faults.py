"""Faults the fake API server can inject into its next matching requests.

Each fault names what it does, which requests it matches (resource plural and verb, both optional)
and how many matching requests it affects. The kinds are the ways real API servers and the networks
in front of them misbehave towards a watch loop:

- ``close``: end a watch cleanly (terminating chunk) after ``after_events`` events; on a list or
  get, drop the connection without answering.
- ``cut``: write ``after_events`` events, then half of the next one, then close the socket without
  the terminating chunk; on a list or get, send half the body after a full Content-Length.
- ``hang``: keep the connection open and send nothing for ``hang_seconds`` (a watch gets its 200
  headers first, as a silent watch would).
- ``throttle``: 429 TooManyRequests with a ``Retry-After`` header of ``retry_after`` seconds.
- ``error``: 500 InternalError.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal, get_args

FaultKind = Literal["close", "cut", "hang", "throttle", "error"]
Verb = Literal["list", "watch", "get"]

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
VERBS: tuple[str, ...] = get_args(Verb)


@dataclass
class Fault:
    """One injected fault and how many more matching requests it will affect."""

    kind: FaultKind
    resource: str | None = None
    verb: Verb | None = None
    times: int = 1
    after_events: int = 0
    retry_after: int = 1
    hang_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, got {self.kind!r}")
        if self.verb is not None and self.verb not in VERBS:
            raise ValueError(f"fault verb must be one of {VERBS} or None, got {self.verb!r}")
        if self.times < 1:
            raise ValueError(f"fault times must be at least 1, got {self.times}")
        if self.after_events < 0 or self.retry_after < 0 or self.hang_seconds < 0:
            raise ValueError("fault after_events, retry_after and hang_seconds must be >= 0")

    def matches(self, *, resource: str | None, verb: Verb) -> bool:
        return (self.resource is None or self.resource == resource) and (
            self.verb is None or self.verb == verb
        )


class FaultPlan:
    """The pending faults, consumed first-in first-out by the requests they match."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def take(self, *, resource: str | None, verb: Verb) -> Fault | None:
        """The first fault matching this request, counting it as used once."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(resource=resource, verb=verb):
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                    return fault
        return None
