"""Where a watch loop writes: the batched form of client-go's reflector store.

client-go's reflector lists and watches, and writes what it sees into a `ReflectorStore`
(`Replace` after a list, `Add`/`Update`/`Delete` per event, `UpdateResourceVersion` on a
bookmark). A `Sink` is the same seam with batches: the loop knows HTTP and no model, the sink
knows the database and no HTTP. Each write is one transaction on the sink's side, so a cursor
is stored exactly when the objects it covers are.

Besides the three writes, the sink keeps the loop's health (errors, a cursor the server proved
wrong, which cluster answers): the loop reports, the sink stores and publishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

JSON = dict[str, Any]


class LostOwnership(Exception):
    """Another watcher owns this kind now (lock lost or expired); this one must stop."""


@dataclass(frozen=True)
class Cursor:
    """What a sink holds of an earlier run: the cursor and whom it came from."""

    resource_version: str = ""
    served_version: str = ""
    cluster_uid: str = ""
    valid: bool = False


@dataclass
class Listing:
    """The whole state of a kind as the loop hands it to `Sink.replace`.

    `items` is read once: a paginated list yields each page's objects while the sink writes
    them and fetches the next page only then, so the loop holds one page, never the list
    (client-go's reflector holds the whole list before `Replace`; 150,000 pods are ~800 MB).
    `resource_version` is the list's, known once `items` has been read to its end. `pages` and
    `largest_page` count what was fetched so far, for the log and for tests of that bound.
    """

    items: Iterable[JSON]
    resource_version: str = ""
    pages: int = 0
    largest_page: int = 0


class Sink(Protocol):
    """The store a `KindWatcher` writes one kind into; see the module docstring."""

    def open(self) -> Cursor:
        """Take the kind over for this watcher and return what is stored of it."""

    def close(self) -> None:
        """This watcher stops; never raises for a kind another watcher took."""

    def replace(self, listing: Listing, *, served_version: str, cluster_uid: str) -> None:
        """Make the stored objects equal to the listing's, atomically, and store its cursor.

        The listing's objects are read once, as they come (a paginated list fetches its next
        page when the sink asks for more); an error while reading them (a page the server
        refused) must leave what was stored before untouched.
        """

    def apply(self, events: list[tuple[str, JSON]], *, resource_version: str, rate: float) -> None:
        """Apply one batch of watch events and store its cursor, in one transaction."""

    def bookmark(self, *, rate: float) -> None:
        """The watch is alive without changes (a heartbeat between batches).

        `open`, `replace`, `apply` and `verified` say so too: the loop bookmarks only after
        `heartbeat_every` without any of them."""

    def verified(self) -> None:
        """The server proved the stored cursor: it is not ahead of the server's data."""

    def cursor_invalid(self) -> None:
        """The server proved the stored cursor wrong: stale until the next replace."""

    def cluster_seen(self, cluster_uid: str) -> None:
        """Note which cluster the objects come from (first sight of it)."""

    def cluster_changed(self, cluster_uid: str) -> None:
        """Another cluster answers now: drop every stored object of the kind and the cursor."""

    def not_served(self, message: str) -> None:
        """The server serves no known version of the kind: store none of it, neutrally."""

    def error(self, message: str) -> None:
        """Note a failure; never raises (the store may be what failed)."""

    def idle(self) -> None:
        """Between passes: let go of resources a long-lived loop must not hold (connections)."""
