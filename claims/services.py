"""Claims services: what-if, headroom and pending-claim diagnosis (logic lives in claims.whatif).

`what_if(source, *, nodes=, node=, node_selector=, count=, assume=, features=, namespace=,
explain=, use_cache=, progress=) -> dict` answers "would this fit, where, with which devices, and
if not, why?"; see its docstring for the input and the answer's shape. Bad input raises
`WhatIfError` (a ValueError with `.field` and `.message`).

`refresh_diagnoses(force=False) -> dict` recomputes `ResourceClaim.diagnosis` for every pending
claim an unbound pod waits for (skipped when neither the cluster nor the waiting set changed).
"""

from claims.whatif.diagnosis import diagnose_all
from claims.whatif.inputs import WhatIfError
from claims.whatif.options import MAX_COUNT
from claims.whatif.service import what_if


def refresh_diagnoses(*, force: bool = False) -> dict[str, int]:
    """Recompute pending-claim diagnoses; returns {"claims", "written", "cleared", "skipped"}."""
    return diagnose_all(force=force)


__all__ = ["MAX_COUNT", "WhatIfError", "refresh_diagnoses", "what_if"]
