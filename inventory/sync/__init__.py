"""Apply Kubernetes objects to the database: the one write path for import, watch and demo.

Every kind has a handler that says how one normalized object maps onto rows; replaying an
event changes nothing. `apply_events`, `upsert_events` and `replace_all` run one transaction
per batch, write its objects in bulk (`bulk`), record objects that cannot be stored instead of
failing the batch, recompute the pools the batch touched once, and publish the ids that changed
after the commit.
"""

from inventory.sync.batches import Replacement, apply_events, replace_all, upsert_events
from inventory.sync.bulk import BatchWriter
from inventory.sync.core import (
    AFTER_COMMIT,
    HANDLERS,
    JSON,
    BatchResult,
    KindHandler,
    Pending,
    Upserted,
    Written,
    chunks,
    count_change,
    delete_row,
    delete_rows,
    handed_over,
    handler_for,
    insert_rows,
    meta_columns,
    new_row,
    object_uid,
    record_skip,
    register,
    update_rows,
    upsert_row,
)
from inventory.sync.kinds import register_inventory_kinds
from inventory.sync.slices import device_columns, refresh_pool, refresh_pools, register_slices

# Inventory kinds first: a snapshot import writes kinds in registration order, so claims and
# pods (registered by the claims app) land on a complete picture.
register_inventory_kinds()
register_slices()

__all__ = [
    "AFTER_COMMIT",
    "HANDLERS",
    "JSON",
    "BatchResult",
    "BatchWriter",
    "KindHandler",
    "Pending",
    "Replacement",
    "Upserted",
    "Written",
    "apply_events",
    "chunks",
    "handed_over",
    "count_change",
    "delete_row",
    "delete_rows",
    "device_columns",
    "handler_for",
    "insert_rows",
    "new_row",
    "meta_columns",
    "object_uid",
    "record_skip",
    "refresh_pool",
    "refresh_pools",
    "register",
    "replace_all",
    "update_rows",
    "upsert_events",
    "upsert_row",
]
