"""The vocabulary of the write path: handlers, batch results, columns every object has.

A `KindHandler` says how one kind maps onto rows: its model, the columns of one normalized object
(a pure function, so a batch is validated before anything is written), and optional batch hooks
for kinds that own child rows (devices of a slice, allocated devices of a claim).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

import orjson
from django.db import connections, models, router
from django.db.models import QuerySet
from django.db.models.base import ModelState
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from inventory.models import KubeObject, SkippedObject
from inventory.sync import sqlite
from inventory.sync.pgcopy import COPY_MIN_ROWS, copy_rows, copy_update, server_bound_cursor

log = logging.getLogger("inventory.sync")

JSON = dict[str, Any]
# Values bound in one `IN (...)` lookup: under the 999 parameters of older SQLite builds, and
# a lookup this size stays quick on either database.
MAX_QUERY_VALUES = 500
# Rows in one multi-row INSERT on SQLite (fewer when the columns would pass its parameter limit);
# PostgreSQL sends every row through one pipelined executemany instead.
MAX_INSERT_ROWS = 500


@dataclass
class BatchResult:
    """What a batch did: counts, skipped objects and changed ids per live-update topic."""

    upserted: int = 0
    # Of the upserted, rows that did not exist: with `deleted`, `unskipped` and `trimmed`,
    # whether the stored counts can have moved (most batches only update rows).
    created: int = 0
    unchanged: int = 0
    deleted: int = 0
    # Skip records removed because their objects are stored now.
    unskipped: int = 0
    # Rows a handler removed to keep its kind within bounds (events past their count or age).
    trimmed: int = 0
    # States replaced by a later state of the same object in the same batch, never written.
    superseded: int = 0
    skipped: list[str] = field(default_factory=list)
    changed: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    dirty_pools: set[int] = field(default_factory=set, repr=False)

    def touch(self, topic: str, *ids: object) -> None:
        self.changed[topic].update(str(i) for i in ids)

    def merge(self, other: BatchResult) -> None:
        self.upserted += other.upserted
        self.created += other.created
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.unskipped += other.unskipped
        self.trimmed += other.trimmed
        self.superseded += other.superseded
        self.skipped.extend(other.skipped)
        for topic, ids in other.changed.items():
            self.changed[topic].update(ids)
        self.dirty_pools.update(other.dirty_pools)


@dataclass
class Pending:
    """One object of a batch, normalized and turned into columns, before it is written."""

    uid: str
    namespace: str
    name: str
    raw: JSON
    obj: JSON
    columns: JSON
    # Filled from the stored row, when there is one: its pk and the handler's `stored_fields`.
    pk: int | None = None
    stored: JSON = field(default_factory=dict)
    # What the handler's `children` made of the object (device columns of a slice, ...).
    children: Any = None


class Written(NamedTuple):
    """A row the batch created or updated, with the object it came from."""

    row: Any
    item: Pending
    created: bool


def _pk(row: Any) -> object:
    return row.pk


@dataclass(frozen=True)
class KindHandler:
    """How one kind is stored: its model, its columns, and how changes are announced.

    `columns` returns the kind's own columns of a normalized object and may raise ValueError,
    KeyError or TypeError for an object it cannot store (the object is then skipped). Kinds
    with child rows add `children` (what those rows are made of, computed for changed objects
    before the first write), `prepare` (runs on the changed objects before their rows are
    written: slices resolve pools there) and `written` (runs after: child rows, counts and
    touches). Without `written`, each written row counts as upserted and touches `topic` with
    `live_id(row)`. `redact` removes what must never be stored or served.
    """

    kind: str
    model: type[KubeObject]
    columns: Callable[[JSON], JSON]
    # Deletes the given rows of this kind (and what hangs off them) and records the touches.
    delete: Callable[[list[Any], BatchResult], None]
    topic: str
    namespaced: bool = False
    # Objects the kind keeps out of the database are removed instead.
    keep: Callable[[JSON], bool] = lambda obj: True
    live_id: Callable[[Any], object] = _pk
    stored_fields: tuple[str, ...] = ()
    children: Callable[[JSON], Any] | None = None
    prepare: Callable[[list[Pending], BatchResult], None] | None = None
    written: Callable[[list[Written], BatchResult], None] | None = None
    # Applied to the raw and normalized object before anything is stored (pods: no secrets).
    redact: Callable[[JSON], JSON] | None = None
    # The stored objects for a snapshot export, in a stable order, when `raw` is not the whole
    # story (pods kept as a slim projection); by default every row's `raw`.
    export: Callable[[], Iterable[JSON]] | None = None


HANDLERS: dict[str, KindHandler] = {}

# Called after a batch's transaction commits (claims registers its diagnosis trigger here, so
# inventory does not import claims).
AFTER_COMMIT: list[Callable[[BatchResult], None]] = []


def register(handler: KindHandler) -> None:
    HANDLERS[handler.kind] = handler


def handler_for(kind: str) -> KindHandler:
    try:
        return HANDLERS[kind]
    except KeyError:
        raise ValueError(f"unsupported kind {kind!r}") from None


def meta_columns(raw: Mapping[str, Any], obj: Mapping[str, Any]) -> JSON:
    """The KubeObject columns of one object."""
    meta = obj.get("metadata") or {}
    created = meta.get("creationTimestamp")
    created_at: datetime | None = parse_datetime(created) if isinstance(created, str) else None
    return {
        "name": meta["name"],
        "api_version": str(raw.get("apiVersion", "")),
        "resource_version": str(meta.get("resourceVersion", "")),
        "created_at": created_at,
        "labels": meta.get("labels") or {},
        "raw": dict(raw),
        "obj": dict(obj),
    }


def object_uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    uid = meta.get("uid")
    if uid:
        return str(uid)
    # Objects from hand-written files may lack a uid: name them stably so re-import is idempotent.
    return f"nouid:{obj.get('kind', '')}:{meta.get('namespace', '')}/{meta.get('name', '')}"


class Upserted(NamedTuple):
    row: Any
    changed: bool
    created: bool


def upsert_row(
    model: type[KubeObject],
    *,
    uid: str,
    columns: JSON,
    namespace: str | None = None,
    result: BatchResult | None = None,
) -> Upserted:
    """Create or update the row for `uid` on its own (batches use the bulk path instead).

    Unchanged rows are not written; a row under the same name with another uid (the object was
    deleted and recreated) is removed first.
    """
    row = model.objects.filter(uid=uid).first()
    created = row is None
    if row is None:
        lookup: JSON = {"name": columns["name"]}
        if namespace is not None:
            lookup["namespace"] = namespace
        model.objects.filter(**lookup).delete()
        row = model(uid=uid, **({"namespace": namespace} if namespace is not None else {}))
    elif row.raw == columns["raw"]:
        return Upserted(row, False, False)
    for key, value in columns.items():
        setattr(row, key, value)
    row.save()
    return Upserted(row, True, created)


def count_change(result: BatchResult, changed: bool, topic: str, pk: object) -> None:
    if changed:
        result.upserted += 1
        result.touch(topic, pk)
    else:
        result.unchanged += 1


def delete_rows(rows: list[Any]) -> None:
    """Delete `rows` (one model) with one collector per chunk: its cascades are a few queries
    per chunk, where deleting row by row cost a few per row (most of a deleting batch)."""
    if not rows:
        return
    model = type(rows[0])
    for part in chunks([row.pk for row in rows]):
        without_json(model).filter(pk__in=part).delete()


def without_json(model: type[models.Model]) -> QuerySet[Any]:
    """The model's rows without their JSON columns, for deletes: hooks and Django's collector
    read keys and names, and decoding the stored objects was a tenth of a deleting batch."""
    heavy = [f.name for f in model._meta.concrete_fields if isinstance(f, models.JSONField)]
    return model._default_manager.defer(*heavy)


def delete_row(topic: str) -> Callable[[list[Any], BatchResult], None]:
    def delete(rows: list[Any], result: BatchResult) -> None:
        result.touch(topic, *(row.pk for row in rows))
        delete_rows(rows)

    return delete


def record_skip(kind: str, raw: Any, exc: BaseException, result: BatchResult) -> None:
    """Remember an object that could not be stored, by kind, namespace and name."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "<unnamed>")
    SkippedObject.objects.update_or_create(
        kind=kind,
        namespace=namespace,
        name=name,
        defaults={
            "api_version": str(raw.get("apiVersion", "")) if isinstance(raw, Mapping) else "",
            "field": str(getattr(exc, "field", "") or ""),
            "error": str(exc),
        },
    )
    result.skipped.append(str(exc))
    log.warning("skipped %s %s/%s: %s", kind, namespace, name, exc)


def handed_over(items: list[Any]) -> Iterator[Any]:
    """Yield a list's items while emptying it, so each can be freed once it is written.

    A relist or an import of thousands of objects would otherwise keep every one to the end.
    """
    queue = deque(items)
    items.clear()
    while queue:
        yield queue.popleft()


_ROW_DEFAULTS: dict[type[models.Model], tuple[str, list[tuple[str, Any]], frozenset[str]]] = {}


def new_row(model: type[models.Model], /, **values: Any) -> Any:
    """An unsaved instance for a bulk write, made without Model.__init__.

    `values` are given by attname (`pool_id`, not `pool`), or `pk`; other fields get their
    defaults, as Model.__init__ gives them. Its per-keyword work was a tenth of an import (tens
    of thousands of device rows); the rows only carry values to insert_rows and update_rows.
    """
    known = _ROW_DEFAULTS.get(model)
    if known is None:
        fields = model._meta.concrete_fields
        known = (
            model._meta.pk.attname,
            [(f.attname, f.get_default) for f in fields],
            frozenset(f.attname for f in fields) | {"pk"},
        )
        _ROW_DEFAULTS[model] = known
    pk_name, defaults, names = known
    if not names.issuperset(values):
        raise TypeError(f"{model.__name__} has no column {sorted(set(values) - names)[0]}")
    row = model.__new__(model)
    row._state = ModelState()
    data = row.__dict__
    for name, default in defaults:
        if name not in values:
            data[name] = default()
    if "pk" in values:
        values[pk_name] = values.pop("pk")
    data.update(values)
    return row


def chunks(values: list[Any], size: int = MAX_QUERY_VALUES) -> list[list[Any]]:
    """Slices of `values` small enough for SQLite's limit on query parameters."""
    return [values[start : start + size] for start in range(0, len(values), size)]


def _fast_json(value: Any) -> bytes | str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
        return json.dumps(value)


def _preparer(columns: list[Any], connection: Any) -> Callable[[list[Any]], list[Any]]:
    """The database values of a row of these columns, from its values (one call per row).

    JSON is dumped by orjson: the standard library's encoder was a tenth of an initial sync and
    of an import. What each column needs is worked out once per write, not per row.
    """
    # A str, int or bool for a column of that plain type is its own database value: Django's
    # per-value preparation was a tenth of an import (and of a 150,000-pod sync).
    kinds = [_column_kind(column) for column in columns]
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        def prepared_pg(values: list[Any]) -> list[Any]:
            prepared = []
            for kind, column, value in zip(kinds, columns, values, strict=True):
                if value.__class__ is kind:
                    prepared.append(value)
                elif kind is _JSON and value is not None:
                    prepared.append(Jsonb(value, dumps=_fast_json))
                else:
                    prepared.append(column.get_db_prep_save(value, connection))
            return prepared

        return prepared_pg
    # SQLite keeps JSON as text: what JSONField.get_db_prep_save gives, dumped faster (None is
    # SQL NULL there too).

    # Timestamps prepared in this write, by column and value: a write's rows share an auto_now
    # moment, and objects made together share their creationTimestamp. Equal datetimes are
    # the same instant (or the same naive time), which Django prepares to the same text.
    prepared_datetimes: dict[tuple[int, datetime], Any] = {}

    def prepared_sqlite(values: list[Any]) -> list[Any]:
        prepared = []
        # An object's raw and normalized columns are copies of one dict when normalizing
        # changed nothing (an import's v1 objects, every pod): dumped once (2 of 4 dumps of
        # an imported object).
        dumped: Any = None
        text = ""
        for index, (kind, column, value) in enumerate(zip(kinds, columns, values, strict=True)):
            if value.__class__ is kind:
                prepared.append(value)
            elif kind is _JSON and value is not None:
                if value.__class__ in _EMPTY_TEXTS and not value:
                    # Most of a device's JSON columns are empty (taints, counters, conditions).
                    prepared.append(_EMPTY_TEXTS[value.__class__])
                    continue
                if dumped is None or not _same_entries(value, dumped):
                    dumped, text = value, _json_text(value)
                prepared.append(text)
            elif value.__class__ is datetime:
                known = prepared_datetimes.get((index, value))
                if known is None:
                    known = column.get_db_prep_save(value, connection)
                    prepared_datetimes[(index, value)] = known
                prepared.append(known)
            else:
                prepared.append(column.get_db_prep_save(value, connection))
        return prepared

    return prepared_sqlite


# pre_save methods that return the attribute unless a timestamp is automatic.
_READING_PRE_SAVES = (models.Field.pre_save, models.DateTimeField.pre_save)


def _row_values(
    columns: list[Any], rows: list[Any], prepare: Callable[[list[Any]], list[Any]]
) -> Callable[[Any], list[Any]]:
    """The database values of one row to insert: what `column.pre_save(row, True)` gives.

    Fields whose pre_save reads the attribute are read by one attrgetter per row; `auto_now`
    and `auto_now_add` timestamps take one moment for the whole write, set on every row as
    pre_save would (per row and per column, this was a twentieth of an import's CPU).
    """
    now = None
    reads_only = True
    for column in columns:
        pre_save = type(column).pre_save
        if pre_save is models.DateTimeField.pre_save and (column.auto_now or column.auto_now_add):
            if now is None:
                now = timezone.now()
            for row in rows:
                setattr(row, column.attname, now)
        elif pre_save not in _READING_PRE_SAVES:
            reads_only = False
    if not reads_only:

        def pre_saved(row: Any) -> list[Any]:
            return prepare([column.pre_save(row, True) for column in columns])

        return pre_saved
    read = attrgetter(*(column.attname for column in columns))
    if len(columns) == 1:
        return lambda row: prepare([read(row)])
    return lambda row: prepare(list(read(row)))


_EMPTY_TEXTS: dict[type, str] = {dict: "{}", list: "[]"}


def _same_entries(value: Any, other: Any) -> bool:
    """Whether `value` is `other`, or both are dicts holding the very same keys and values in
    the same order (shallow copies of one dict), so that both dump to the same text."""
    if value is other:
        return True
    if value.__class__ is not dict or other.__class__ is not dict or len(value) != len(other):
        return False
    return all(
        key is key_2 and entry is entry_2
        for (key, entry), (key_2, entry_2) in zip(value.items(), other.items(), strict=True)
    )


class _JSON:
    """Marks a JSONField without a custom encoder in `_column_kind`."""


# Field classes (exactly these: a subclass may prepare values its own way) whose database value
# on SQLite is a value of the given type itself.
_PLAIN_FIELDS: dict[type, type] = {
    models.CharField: str,
    models.TextField: str,
    models.BooleanField: bool,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveBigIntegerField: int,
}


def _column_kind(column: Any) -> type | None:
    if isinstance(column, models.JSONField) and column.encoder is None:
        return _JSON
    target = column.target_field if isinstance(column, models.ForeignKey) else column
    if isinstance(target, models.AutoField | models.BigAutoField):
        return int
    return _PLAIN_FIELDS.get(type(target))


class _KnownTexts(threading.local):
    """Objects whose JSON text their reader has made already (an import dumps every object it
    reads), by the id of their metadata dict, which the shallow copies written as columns share.
    Per thread: an import remembers and writes in its own thread, and nothing it remembers is
    seen by a watcher or request writing beside it."""

    def __init__(self) -> None:
        self.by_metadata: dict[int, tuple[JSON, bytes]] = {}


_KNOWN_TEXTS = _KnownTexts()


def remember_json_text(obj: JSON, text: bytes) -> None:
    """Write `text`, orjson's dump of `obj`, for `obj` (or a shallow copy of it) instead of
    dumping it again, in this thread; until `forget_json_texts`. The caller must not change
    `obj` after."""
    _KNOWN_TEXTS.by_metadata[id(obj["metadata"])] = (obj, text)


def forget_json_text(obj: JSON) -> None:
    """Forget the text remembered for `obj` (or a shallow copy of it), which is not written."""
    _KNOWN_TEXTS.by_metadata.pop(id(obj.get("metadata")), None)


def forget_json_texts() -> None:
    _KNOWN_TEXTS.by_metadata.clear()


def _json_text(value: Any) -> str:
    known_texts = _KNOWN_TEXTS.by_metadata
    if known_texts and value.__class__ is dict:
        key = id(value.get("metadata"))
        known = known_texts.get(key)
        if known is not None and _same_entries(value, known[0]):
            known_texts.pop(key, None)
            return known[1].decode()
    dumped = _fast_json(value)
    return dumped.decode() if isinstance(dumped, bytes) else dumped


def update_rows(model: type[models.Model], rows: list[Any], fields: list[str]) -> None:
    """Write `fields` of existing `rows` by primary key.

    One UPDATE statement run for many parameter sets: Django's bulk_update builds a CASE per
    column over all its rows, whose cost grows with rows times fields and dominated big batches.
    """
    if not rows:
        return
    opts = model._meta
    columns = [opts.get_field(name) for name in fields]
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column.column)} = %s" for column in columns)
    sql = f"UPDATE {quote(opts.db_table)} SET {assignments} WHERE {quote(opts.pk.column)} = %s"
    prepare = _preparer(columns, connection)
    # In key order, the order an index scan of `pk IN (...)` locks rows in: two writers of one
    # table (the claims watcher, and the pods watcher re-linking templates) then wait for each
    # other instead of deadlocking, which cost the loser its batch and a retry.
    rows = sorted(rows, key=_pk)
    # The scratch table is emptied at every commit: only inside a transaction.
    if (
        connection.vendor == "postgresql"
        and len(rows) >= COPY_MIN_ROWS
        and connection.in_atomic_block
    ):
        copy_update(connection, opts, columns, rows, prepare)
        return
    params = ([*prepare([getattr(row, c.attname) for c in columns]), row.pk] for row in rows)
    if connection.vendor == "postgresql":
        with server_bound_cursor(connection) as cursor:
            cursor.executemany(sql, params)
        return
    with connection.cursor() as cursor:
        # A list: Django's query log counts the parameter sets.
        cursor.executemany(sql, list(params))


def insert_rows(
    model: type[models.Model], rows: list[Any], *, returning: tuple[str, ...] = ()
) -> None:
    """INSERT model instances; with `returning`, set their pks.

    The pks come back with the `returning` columns (a unique key of the rows), so no
    assumption is made about the order of returned rows. Used instead of bulk_create, whose
    UNNEST arrays psycopg quotes character by character on PostgreSQL: most of an import's time.
    PostgreSQL runs one single-row statement per row in a pipeline (parsed once), or from
    COPY_MIN_ROWS rows on a COPY (`pgcopy.copy_rows`); SQLite, multi-row statements within its
    parameter limit.
    """
    if not rows:
        return
    opts = model._meta
    columns = [f for f in opts.concrete_fields if not f.primary_key]
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    head = (
        f"INSERT INTO {quote(opts.db_table)} "
        f"({', '.join(quote(column.column) for column in columns)}) VALUES "
    )
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    tail = ""
    keys = [opts.get_field(name) for name in returning]
    if returning:
        names = ", ".join(quote(f.column) for f in [opts.pk, *keys])
        tail = f" RETURNING {names}"
    by_key = {tuple(getattr(row, f.attname) for f in keys): row for row in rows}

    prepare = _preparer(columns, connection)
    values = _row_values(columns, rows, prepare)

    if connection.vendor == "postgresql" and len(rows) >= COPY_MIN_ROWS:
        copy_rows(connection, opts, columns, rows, values, with_pks=bool(returning))
        return
    if connection.vendor == "postgresql":
        with server_bound_cursor(connection) as cursor:
            # A generator: each row's parameters (its JSON dumped) live only while it is sent.
            cursor.executemany(
                head + one + tail, (values(row) for row in rows), returning=bool(tail)
            )
            while returning:
                for pk, *key in cursor.fetchall():
                    by_key[tuple(key)].pk = pk
                if not cursor.nextset():
                    break
        return
    limit = connection.features.max_query_params or 50_000
    per_statement = max(1, min(MAX_INSERT_ROWS, limit // len(columns)))
    one_qmark = one.replace("%s", "?")
    with connection.cursor() as cursor:
        for part in chunks(rows, per_statement):
            params = [value for row in part for value in values(row)]
            sql = head + ", ".join([one] * len(part)) + tail
            # Column names hold no %s: the statement with `?`, written as such, not rewritten.
            qmark_sql = head + ", ".join([one_qmark] * len(part)) + tail
            sqlite.execute(cursor, sql, qmark_sql, params)
            if returning:
                for pk, *key in cursor.fetchall():
                    by_key[tuple(key)].pk = pk
