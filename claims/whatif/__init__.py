"""What-if, headroom and pending-claim diagnosis over the synced cluster.

`claims.services` re-exports the public functions; this package holds the parts: input parsing
(`inputs`), options (`options`), the cached cluster state and assumed changes (`state`), the
allocation runs (`engine`), quota admission (`quota`), the service entry point (`service`) and
diagnoses of pending claims (`diagnosis`).

`inputs` and `quota` do not need Django, and the demo cluster uses them outside it, so `what_if`
(which reads the database) is imported only when first asked for.
"""

from typing import TYPE_CHECKING, Any

from claims.whatif.inputs import WhatIfError

if TYPE_CHECKING:
    from claims.whatif.service import what_if

__all__ = ["WhatIfError", "what_if"]


def __getattr__(name: str) -> Any:
    if name == "what_if":
        from claims.whatif.service import what_if

        return what_if
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
