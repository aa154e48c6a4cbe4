"""A SliceCache shared by what-if requests: parsing and pool building race with `retain`."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dralib.allocator import SliceCache
from dralib.allocator.nodeselection import NodeInfo
from dralib.allocator.pools import PoolBuilder
from dralib.allocator.types import Features

ROUNDS = 300


def _slice(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"slice-{index}"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": f"pool-{index}", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [{"name": "gpu-0"}],
        },
    }


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch as often as possible, so a race shows within a few rounds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_retain_while_other_threads_parse_and_build(fast_switching) -> None:
    """`retain` during concurrent parses and pool builds neither fails nor loses kept slices."""
    cache = SliceCache()
    kept = [_slice(i) for i in range(200)]
    for index, raw in enumerate(kept):
        cache.parse(raw, index=index)
    stop = threading.Event()

    def parse_and_build(offset: int) -> int:
        built = 0
        while not stop.is_set():
            fresh = [_slice(1000 + offset * 100 + i) for i in range(50)]
            infos = [cache.parse(raw, index=i) for i, raw in enumerate(fresh)]
            builder = PoolBuilder(features=Features(), all_slices=infos, built=cache.pools)
            built += len(builder.gather(infos, NodeInfo(name="node-1", labels={})))
        return built

    def retain() -> None:
        try:
            for _ in range(ROUNDS):
                cache.retain(kept)
        finally:
            stop.set()

    with ThreadPoolExecutor(max_workers=4) as pool:
        workers = [pool.submit(parse_and_build, offset) for offset in range(3)]
        pool.submit(retain).result()
        assert all(worker.result() > 0 for worker in workers)
    cache.retain(kept)
    assert len(cache) == len(kept)
    assert all(cache.parse(raw, index=i).raw is raw for i, raw in enumerate(kept))
