"""Version normalizers: every served version of every kind into the internal v1 shape.

Pure functions, no Django. `normalize` checks one object as the API server sent it and returns a
new dict in the v1 shape; `to_version` goes back, so a fake API server can serve a v1 cluster as an
older version.
"""

from .errors import NormalizeError
from .registry import NAMESPACED_KINDS, SUPPORTED, normalize, to_version

__all__ = ["NAMESPACED_KINDS", "SUPPORTED", "NormalizeError", "normalize", "to_version"]
