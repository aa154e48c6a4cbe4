"""What-if, headroom and pending-claim diagnosis over the synced cluster.

`claims.services` re-exports the public functions; this package holds the parts: input parsing
(`inputs`), options (`options`), the cached cluster state and assumed changes (`state`), the
allocation runs (`engine`), quota admission (`quota`), the service entry point (`service`) and
diagnoses of pending claims (`diagnosis`).
"""

from claims.whatif.inputs import WhatIfError
from claims.whatif.service import what_if

__all__ = ["WhatIfError", "what_if"]
