"""Claims services: what-if, headroom and pending-claim diagnosis (logic lives in claims.whatif).

`what_if(source, *, nodes=, node=, node_selector=, count=, assume=, features=, namespace=,
explain=, use_cache=, progress=) -> dict` answers "would this fit, where, with which devices, and
if not, why?"; see its docstring for the input and the answer's shape. Bad input raises
`WhatIfError` (a ValueError with `.field` and `.message`).
"""

from claims.whatif.inputs import WhatIfError
from claims.whatif.options import MAX_COUNT
from claims.whatif.service import what_if

__all__ = ["MAX_COUNT", "WhatIfError", "what_if"]
