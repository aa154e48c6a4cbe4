"""Demo cluster: a generator of realistic DRA objects and a churn loop that keeps them moving.

Pure Python (no Django): it feeds the embedded fake API server, the tests and the benchmarks.
"""

from inventory.demo.catalog import DemoError, quota_usage
from inventory.demo.churn import DemoChurn
from inventory.demo.generator import generate_demo_cluster

__all__ = ["DemoChurn", "DemoError", "generate_demo_cluster", "quota_usage"]
