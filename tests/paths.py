"""Where tests find the repository and the shared data beside it, wherever the test file sits."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CONFORMANCE = SHARED / "conformance" / "upstream"
