"""Claims services: what-if, headroom and pending-claim diagnosis (logic lives in claims.whatif).

`what_if(source, *, nodes=, node=, node_selector=, count=, assume=, features=, namespace=,
explain=, gang=, use_cache=, progress=) -> dict` answers "would this fit, where, with which
devices, and if not, why?"; see its docstring for the input and the answer's shape. Bad input raises
`WhatIfError` (a ValueError with `.field` and `.message`).

`refresh_diagnoses(force=False) -> dict` recomputes `ResourceClaim.diagnosis` for every pending
claim an unbound pod waits for (skipped when neither the cluster nor the waiting set changed).

Page logic of the claims app lives in `claims.pages` and is re-exported here: `quota_rows(quota)`
(device-class quota lines, quantities compared exactly), `template_claim_counts(templates)` and
`shape_what_if(answer)` (the what-if page's view of a `what_if` answer).
"""

from claims.pages import (
    DEVICE_CLASS_QUOTA_SUFFIX,
    MAX_PLACEMENTS_SHOWN,
    quota_rows,
    shape_what_if,
    template_claim_counts,
)
from claims.whatif.diagnosis import diagnose_all
from claims.whatif.inputs import WhatIfError
from claims.whatif.options import MAX_COUNT
from claims.whatif.service import what_if


def refresh_diagnoses(*, force: bool = False) -> dict[str, int]:
    """Recompute pending-claim diagnoses; returns {"claims", "written", "cleared", "skipped"}."""
    return diagnose_all(force=force)


__all__ = [
    "DEVICE_CLASS_QUOTA_SUFFIX",
    "MAX_COUNT",
    "MAX_PLACEMENTS_SHOWN",
    "WhatIfError",
    "quota_rows",
    "refresh_diagnoses",
    "shape_what_if",
    "template_claim_counts",
    "what_if",
]
