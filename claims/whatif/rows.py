"""Decoded rows kept in the process by version, read again only where the database changed.

A `RowCache` holds one table's decoded rows by uid with their version (resourceVersion and
synced_at): a read fetches only the rows that are new or changed and returns the very same
objects for the others (caches keyed by object identity keep their work), and after a change
lists only the rows written since the last read (`RowCache._recent`). `share_equal` makes the
equal small parts of the rows fetched together one object. Returned objects must be treated as
immutable. `claims.whatif.listing` reads the cluster through them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import connection, models
from django.db.models import Max
from django.db.models.functions import Cast

# Rows fetched per query when only some changed (below SQLite's bound-parameter limit).
_FETCH_CHUNK = 500
# A read after the last one lists only the rows written since (`RowCache._recent`), looking this
# far back from the newest write it saw: a writer takes its timestamp before it commits (a batch
# commits within seconds of it).
_RECENT_MARGIN = timedelta(seconds=60)
# Past this share of the kept rows written lately (the minutes after a sync or an import), one
# listing of the table costs less than reading what changed.
_RECENT_SHARE = 0.25


class RowCache:
    """Decoded values of one table's rows by uid, valid while the row's version is unchanged."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[tuple[str, Any], Any]] = {}
        # The table's version at the last read and the list returned then.
        self.last: tuple[str, list[Any]] | None = None
        # The uids of the last read in the queryset's order, and the newest write seen then
        # (see `_recent`).
        self.order: list[str] | None = None
        self.newest: datetime | None = None
        # Every uid of the table (the queryset's and the others): a count tells deletions.
        self.table_uids: set[str] = set()

    def values(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        version: str | None = None,
        share: bool = False,
    ) -> list[Any]:
        """Decoded values in the queryset's order; only new or changed rows are fetched.

        `columns` are fetched for changed rows and passed to `decode` as a tuple. With the
        table's `version` (see `table_versions`) unchanged since the last read, the last list is
        returned without a query: after a change to one table the others cost nothing. `share`:
        equal small parts of the rows fetched together are made one object (`share_equal`).
        """
        if version is not None and self.last is not None and self.last[0] == version:
            return self.last[1]
        out = None
        if self.order is not None and self.newest is not None:
            out = self._recent(queryset, columns=columns, decode=decode, share=share)
        if out is None:
            out = self._values(queryset, columns=columns, decode=decode, share=share)
        self.last = (version, out) if version is not None else None
        return out

    def _recent(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> list[Any] | None:
        """The read after a change, from the rows written since the last read only; None when
        it cannot be told that way (a row joined the queryset: its place is the database's to
        say; or rows were deleted: the table's count says so), and the table is listed instead.

        Listing every row's version was most of a what-if right after a change at 20,000
        claims. A writer takes its timestamp before it commits, so rows written up to
        `_RECENT_MARGIN` before the newest one seen are looked at again.
        """
        assert self.order is not None and self.newest is not None
        # No ordering: rows written lately are found by the synced_at index, not by walking
        # the whole table in the order of another index.
        base = queryset.model._default_manager.order_by()
        newest = base.aggregate(newest=Max("synced_at"))["newest"]
        since = self.newest - _RECENT_MARGIN
        if base.filter(synced_at__gte=since).count() > _RECENT_SHARE * len(self.entries) + 100:
            return None
        recent = _raw_rows(
            queryset.order_by()
            .filter(synced_at__gte=since)
            .values_list(
                "uid", "resource_version", Cast("synced_at", output_field=models.TextField())
            )
        )
        entries = self.entries
        if any(uid not in entries for uid, _, _ in recent):
            return None
        inside = {uid for uid, _, _ in recent}
        written = [
            uid for (uid,) in _raw_rows(base.filter(synced_at__gte=since).values_list("uid"))
        ]
        # Written lately and no longer in the queryset (a claim whose devices were freed).
        left = {uid for uid in written if uid not in inside and uid in entries}
        # The table's rows are those known plus those created since, unless some were deleted.
        created = {uid for uid in written if uid not in self.table_uids}
        if base.count() != len(self.table_uids) + len(created):
            return None
        versions = {uid: (rv, synced) for uid, rv, synced in recent}
        stale = [uid for uid, version in versions.items() if entries[uid][0] != version]
        fetched = self._fetch(
            [queryset.values_list("uid", *columns).filter(uid__in=part) for part in _parts(stale)],
            versions=versions,
            columns=columns,
            decode=decode,
            share=share,
        )
        if len(fetched) != len(stale):
            return None  # changed again meanwhile (outside a consistent read)
        if left or fetched:
            self.entries = entries = {
                uid: fetched.get(uid) or entry for uid, entry in entries.items() if uid not in left
            }
        if left:
            self.order = [uid for uid in self.order if uid not in left]
        if newest is not None and newest > self.newest:
            self.newest = newest
        self.table_uids.update(created)
        return [entries[uid][1] for uid in self.order]

    def _values(
        self,
        queryset: models.QuerySet[Any],
        *,
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> list[Any]:
        base = queryset.model._default_manager.order_by()
        newest = base.aggregate(newest=Max("synced_at"))["newest"]
        table_uids = {uid for (uid,) in _raw_rows(base.values_list("uid"))}
        # The write time as text: only compared, and PostgreSQL's timestamps cost a Python
        # conversion each otherwise.
        listed = _raw_rows(
            queryset.values_list(
                "uid", "resource_version", Cast("synced_at", output_field=models.TextField())
            )
        )
        entries = self.entries
        stale = [
            uid
            for uid, rv, synced in listed
            if (cached := entries.get(uid)) is None or cached[0] != (rv, synced)
        ]
        fetched: dict[str, tuple[tuple[str, Any], Any]] = {}
        if stale:
            versions = {uid: (rv, synced) for uid, rv, synced in listed}
            rows = queryset.values_list("uid", *columns)
            if len(stale) > len(listed) // 2:
                chunks: list[models.QuerySet[Any]] = [rows]
            else:
                chunks = [rows.filter(uid__in=part) for part in _parts(stale)]
            fetched = self._fetch(
                chunks, versions=versions, columns=columns, decode=decode, share=share
            )
        if fetched or len(entries) != len(listed):
            # Rows no longer listed are gone from the database: forget them. A row listed but
            # not fetched (written in between, outside a consistent read) is left for next time.
            self.entries = entries = {
                uid: entry
                for uid, _, _ in listed
                if (entry := fetched.get(uid) or entries.get(uid)) is not None
            }
        order = [uid for uid, _, _ in listed if uid in entries]
        # A row listed but not fetched is not known: the next read lists the table again.
        complete = len(order) == len(listed) and len(entries) == len(listed)
        self.order = order if complete else None
        self.newest = newest
        self.table_uids = table_uids
        return [entries[uid][1] for uid in order]

    def _fetch(
        self,
        chunks: Sequence[models.QuerySet[Any]],
        *,
        versions: Mapping[str, tuple[str, Any]],
        columns: tuple[str, ...],
        decode: Callable[[tuple[Any, ...]], Any],
        share: bool,
    ) -> dict[str, tuple[tuple[str, Any], Any]]:
        """The rows of `chunks` whose version differs from the kept one, decoded."""
        entries = self.entries
        fetched: dict[str, tuple[tuple[str, Any], Any]] = {}
        # Columns 1.. are `columns`; those reading the object are JSON.
        json_at = {i + 1 for i, c in enumerate(columns) if c == "obj" or c.startswith("obj__")}
        # One memo per read: it is dropped with the read, and holds no row after it.
        memo: dict[Any, Any] | None = {} if share else None
        for chunk in chunks:
            for row in _iter_raw_rows(chunk):
                uid, *values = _json_columns(row, json_at, memo)
                version = versions.get(uid)
                cached = entries.get(uid)
                if version is None or (cached is not None and cached[0] == version):
                    # Fetched with the whole table but unchanged: keep the same object.
                    continue
                # Inside a consistent read the row is the listed version; outside one it may
                # be newer, and is then fetched again next time: never older.
                fetched[uid] = (version, decode(tuple(values)))
        return fetched


def _parts(uids: Sequence[str]) -> list[Sequence[str]]:
    return [uids[start : start + _FETCH_CHUNK] for start in range(0, len(uids), _FETCH_CHUNK)]


def _raw_rows(queryset: models.QuerySet[Any]) -> list[tuple[Any, ...]]:
    """The queryset's rows as the database driver returns them, without Django's converters.

    Only versions are listed this way (compared with each other, never shown): converting
    every row's timestamp cost more than the rest of a read after a small change.
    """
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _iter_raw_rows(queryset: models.QuerySet[Any]) -> Iterator[tuple[Any, ...]]:
    """`_raw_rows`, fetched `_FETCH_CHUNK` rows at a time: a whole table's JSON text (50 MB of
    slices at 5,000 nodes) is never held at once beside the objects decoded from it."""
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(_FETCH_CHUNK):
            yield from rows


def _json_columns(
    row: tuple[Any, ...], json_at: set[int], memo: dict[Any, Any] | None = None
) -> tuple[Any, ...]:
    """A raw row with the JSON columns at `json_at` decoded (SQLite returns their text, psycopg
    decodes them itself), their equal parts shared through `memo` when one is given.

    orjson decodes a 1,000-node cluster's objects several times faster than the json module
    Django's JSONField uses, which was most of a cold read.
    """
    out = []
    for i, v in enumerate(row):
        if i in json_at:
            if isinstance(v, (str, bytes, bytearray)):
                v = orjson.loads(v)
            if memo is not None:
                v = share_equal(v, memo)
        out.append(v)
    return tuple(out)


# Containers with more entries than this are not shared (only their parts are): a big map is
# rarely equal to another, and its memo key would cost more than it could save.
_SHARE_MAX_ENTRIES = 8
# Strings longer than this are not shared: long ones are mostly unique (UIDs, messages).
_SHARE_MAX_CHARS = 64
# A string this long seen for the first time in a read is taken as unique (a UID, a device's
# UUID or MAC address): the map or list holding it is new, so it is neither looked up nor kept
# whole in the memo, nor is any container around it (its other parts still are shared). Every
# device of a 5,000-node cluster has such an attribute: building, hashing and keeping their
# keys was a fifth of the read. An equal container that does come again is shared from its
# second copy on.
_FRESH_CHARS = 16
# Deeper parts are left as they are (Python's recursion limit is below orjson's depth limit).
_SHARE_MAX_DEPTH = 32
# Memo tokens: `_UNSHARED` marks a part that is not in the memo (its parents are not shared
# either); `_NULL` stands for JSON null, as a hashable value of its own.
_UNSHARED = object()
_NULL = object()


def share_equal(value: Any, memo: dict[Any, Any]) -> Any:
    """`value` (decoded JSON) with its equal small parts made one object, in place.

    A 5,000-node cluster's slices are 100,000 devices whose attribute values and capacities
    are mostly the same few (`{"string": "a100"}`, `{"value": "40Gi"}`): decoded, each is its
    own dict, 400 MB in all; shared, 100 MB (the `memo` holds each distinct part once, as long
    as the caller keeps it). Objects read from the database are treated as immutable (see the
    module's docstring), so sharing is safe; whoever changes one copies it first.
    """
    return _share(value, memo, 0)[0]


def _share(value: Any, memo: dict[Any, Any], depth: int) -> tuple[Any, Any]:
    """(the shared value, its memo token): a string itself, a number typed (True, 1 and 1.0
    are equal in Python, never in JSON), a container the id of its shared copy."""
    kind = type(value)
    if kind is dict or kind is list:
        return _share_container(value, kind, memo, depth)
    return _leaf(value, kind, memo)


def _leaf(value: Any, kind: type, memo: dict[Any, Any]) -> tuple[Any, Any]:
    if kind is str:
        if len(value) <= _SHARE_MAX_CHARS:
            value = memo.setdefault(value, value)
        return value, value
    if value is None:
        return value, _NULL
    if kind is int or kind is bool or kind is float:
        return value, (kind, value)
    return value, _UNSHARED


def _share_container(value: Any, kind: type, memo: dict[Any, Any], depth: int) -> tuple[Any, Any]:
    if depth > _SHARE_MAX_DEPTH:
        return value, _UNSHARED
    # None once the container cannot be shared whole (its parts still are).
    parts: list[Any] | None = [kind] if len(value) <= _SHARE_MAX_ENTRIES else None
    entries = value.items() if kind is dict else enumerate(value)
    for key, item in entries:
        # Most parts are strings and numbers: decided here, without a call per part (a
        # 5,000-node cluster's read shares millions of them: most of its CPU).
        item_kind = type(item)
        if item_kind is str:
            if len(item) <= _SHARE_MAX_CHARS:
                shared = memo.setdefault(item, item)
                if shared is not item:
                    value[key] = shared  # an existing key: the dict's size does not change
                    token: Any = shared
                elif len(item) >= _FRESH_CHARS:
                    token = _UNSHARED
                else:
                    token = shared
            else:
                token = item
        elif item_kind is dict and len(item) == 1 and depth < _SHARE_MAX_DEPTH:
            # The commonest part of all: a one-entry map of a string or number (an attribute's
            # `{"string": "a100"}`, a capacity's `{"value": "40Gi"}`), shared as
            # `_share_container` would share it, without its call and lists.
            ((name, leaf),) = item.items()
            leaf_kind = type(leaf)
            if leaf_kind is str:
                if len(leaf) <= _SHARE_MAX_CHARS:
                    shared_leaf = memo.setdefault(leaf, leaf)
                    if shared_leaf is not leaf:
                        item[name] = shared_leaf
                        leaf_token: Any = shared_leaf
                    elif len(leaf) >= _FRESH_CHARS:
                        leaf_token = _UNSHARED
                    else:
                        leaf_token = shared_leaf
                else:
                    leaf_token = leaf
            elif leaf_kind is dict or leaf_kind is list:
                shared_leaf, leaf_token = _share_container(leaf, leaf_kind, memo, depth + 2)
                if shared_leaf is not leaf:
                    item[name] = shared_leaf
            else:
                leaf_token = _leaf(leaf, leaf_kind, memo)[1]
            if leaf_token is _UNSHARED:
                token = _UNSHARED
            else:
                shared = memo.setdefault((dict, name, leaf_token), item)
                if shared is not item:
                    value[key] = shared
                token = id(shared)
        elif item_kind is dict or item_kind is list:
            shared, token = _share_container(item, item_kind, memo, depth + 1)
            if shared is not item:
                value[key] = shared
        else:
            token = _leaf(item, item_kind, memo)[1]
        if parts is not None:
            if token is _UNSHARED:
                parts = None
            elif kind is dict:
                parts.append(key)
                parts.append(token)
            else:
                parts.append(token)
    if parts is None:
        return value, _UNSHARED
    found = memo.setdefault(tuple(parts), value)
    return found, id(found)
