"""Where the project is, for benchmark scripts run by path (`python tests/benchmarks/x.py`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
