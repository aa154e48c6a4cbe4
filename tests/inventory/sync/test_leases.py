"""Adopting free watch leases, in-process against a real Redis of the test's own.

The worker processes' side (a worker alone, a worker killed with -9) is in test_adoption.py; these
tests race the adopting workers deterministically, which separate processes cannot.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
import redis

from dashboard import scope
from dralib.kube.kinds import KINDS
from inventory.leases import QUEUED_SUFFIX, LeaseSupervisor, adopt_free, lease_name
from inventory.locks import LOCK_PREFIX, watcher_lock

# Each test starts its own redis-server: run once (bin/test).
pytestmark = pytest.mark.once


@pytest.fixture
def leases_in_redis(settings, redis_url: str) -> str:
    settings.REDIS_URL = redis_url
    return redis_url


def test_the_default_clusters_lease_is_the_kinds_key_and_others_carry_the_cluster():
    """The default cluster keeps the key workers always used; another cluster is a prefix."""
    assert lease_name("Node") == "Node"
    assert lease_name("Node", "eu-west") == "eu-west/Node"


def test_workers_racing_for_free_leases_queue_one_watcher_each(leases_in_redis):
    """Eight workers check the same free leases at once: each kind is queued once, held leases
    are left alone, and the markers go away after their hold so a lost task is queued again."""
    watcher_lock(lease_name("Node"), owner="busy-worker:1:Node", ttl=30).acquire()
    queued: Counter[str] = Counter()
    guard = threading.Lock()
    barrier = threading.Barrier(8)

    def start(kind: str) -> None:
        with guard:
            queued[kind] += 1

    def worker(index: int) -> None:
        barrier.wait()
        adopt_free(KINDS, owner=f"worker-{index}", start=start, hold=30)

    threads = [threading.Thread(target=scope.carried(worker), args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    free = set(KINDS) - {"Node"}
    assert queued == Counter(dict.fromkeys(free, 1))

    # Nobody took the leases (the queued tasks were lost): once the markers expire, they are
    # queued again, and only then.
    client = redis.Redis.from_url(leases_in_redis)
    assert adopt_free(KINDS, owner="worker-9", start=start, hold=30).started == []
    for kind in free:
        client.delete(LOCK_PREFIX + lease_name(kind) + QUEUED_SUFFIX)
    assert sorted(adopt_free(KINDS, owner="worker-9", start=start, hold=30).started) == sorted(free)


def test_a_worker_not_consuming_the_watch_queue_adopts_nothing(leases_in_redis):
    """The supervisor asks whether the worker consumes the watch queue before every check."""
    consuming = threading.Event()
    queued: list[str] = []
    supervisor = LeaseSupervisor(
        kinds=["Node", "ResourceSlice"],
        owner="pinned:1",
        start=queued.append,
        consumes=consuming.is_set,
        period=30,
        stop=threading.Event(),
        rng=random.Random(1),
    )
    assert supervisor.check().started == [] and queued == [] and supervisor.checks == 0
    consuming.set()
    assert supervisor.check().started == ["Node", "ResourceSlice"] and supervisor.checks == 1
    assert queued == ["Node", "ResourceSlice"]


def test_a_dying_lease_is_checked_again_just_after_it_expires(leases_in_redis):
    """A renewed lease (two thirds or more left) leaves the period alone; one that runs out
    before the next check brings the check forward to just after its expiry."""
    supervisor = LeaseSupervisor(
        kinds=["Node", "ResourceSlice"],
        owner="survivor:1",
        start=lambda kind: None,
        consumes=lambda: True,
        period=15,
        stop=threading.Event(),
        rng=random.Random(7),
    )
    watcher_lock(lease_name("Node"), owner="alive:1:Node", ttl=30).acquire()
    watcher_lock(lease_name("ResourceSlice"), owner="alive:1:ResourceSlice", ttl=30).acquire()
    healthy = supervisor.check()
    assert healthy.started == [] and 29 < healthy.soonest_expiry <= 30
    assert all(11.25 <= supervisor.next_delay(healthy) <= 18.75 for _ in range(100))

    # The ResourceSlice holder died 28 s ago: its lease has 2 s left.
    client = redis.Redis.from_url(leases_in_redis)
    client.pexpire(LOCK_PREFIX + lease_name("ResourceSlice"), 2000)
    dying = supervisor.check()
    assert dying.started == [] and 1 < dying.soonest_expiry <= 2
    assert all(
        dying.soonest_expiry < supervisor.next_delay(dying) <= dying.soonest_expiry + 1
        for _ in range(100)
    )


def test_the_supervisor_checks_at_once_then_every_period_until_stopped(leases_in_redis):
    """The first check comes at once, not after a period (an hour here); stop ends the thread."""
    stop = threading.Event()
    first = threading.Event()
    supervisor = LeaseSupervisor(
        kinds=["Node"],
        owner="quick:1",
        start=lambda kind: first.set(),
        consumes=lambda: True,
        period=3600,
        stop=stop,
    )
    thread = supervisor.start()
    assert first.wait(timeout=30)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and supervisor.checks == 1


def test_without_redis_the_local_lease_tells_its_time_left_too(settings):
    """The embedded mode's process-local lock answers `remaining` like the Redis one."""
    settings.REDIS_URL = ""
    lease = watcher_lock("local-remaining-test", owner="me", ttl=30)
    assert lease.remaining() is None
    assert lease.acquire()
    assert 29 < (lease.remaining() or 0) <= 30
    lease.release()
    assert lease.remaining() is None
