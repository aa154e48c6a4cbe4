"""Helpers for benchmark scripts: Django set up on a fresh throwaway database."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def setup_fresh_database() -> str:
    """Configure Django and create an empty test database (never the user's own)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.db import connection

    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return f"{connection.vendor} ({connection.settings_dict['NAME']})"


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
