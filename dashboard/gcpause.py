"""Pausing the cyclic garbage collector around bulk work (sync batches, snapshot decoding).

Decoded JSON and batches of model instances make many containers and almost no reference cycles,
yet they set off full collections that walk every object of the process again and again.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (nesting and threads allowed).

    A batch allocates many dicts and model instances that live until it ends, so collections
    keep firing, and each full one walks every object of the process (a listed cluster, a
    parsed snapshot): that made a 1,000-node import several times slower. Reference counting
    still frees memory meanwhile; only reference cycles wait until the last batch ends.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()
