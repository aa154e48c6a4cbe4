"""How every HTTP benchmark measures: a figure is a goal, a median of several requests, the server
process's CPU time beside the wall time, and a verdict.

The server's CPU is read from /proc/<pid>/stat (utime + stime) before and after each request, so
a busy machine stretches the wall time but hardly the CPU time; verdicts are judged on CPU time
(the issue's goals are), and wall time is printed beside it. Peak memory is the server process's
VmHWM from /proc/<pid>/status, not a tracemalloc figure (which misses what Python's allocator and
the C libraries keep). Load averages are printed with the figures, since wall times mean little
without them.
"""

from __future__ import annotations

import os
import statistics
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

RUNS = 5


def load_average() -> str:
    """The machine's 1, 5 and 15-minute load averages, as /proc/loadavg says them."""
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return f"load average {one} {five} {fifteen} ({os.cpu_count()} CPUs)"


def process_cpu(pid: int) -> float:
    """CPU seconds the process used so far: utime + stime of /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_memory_mb(pid: int | str, field_name: str = "VmHWM") -> float:
    """A /proc/<pid>/status memory field in MB (10^6 bytes, the goals' unit): VmHWM is the peak
    resident set, VmRSS the resident set now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024 / 1e6
    raise LookupError(f"/proc/{pid}/status has no {field_name}")


def settle(pid: int, *, quiet: float = 1.0, limit: float = 600.0) -> float:
    """Wait until the process has used no CPU for `quiet` seconds (its start-up work, such as
    the class membership computed in the background, is done); its CPU seconds so far."""
    deadline = time.monotonic() + limit
    last, since = process_cpu(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = process_cpu(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


@dataclass
class Sample:
    """One request: wall seconds to the last byte, server CPU seconds, response bytes."""

    wall: float
    cpu: float
    size: int
    status: int
    body: bytes = field(repr=False, default=b"")


@dataclass
class Server:
    """A running server process and how to talk to it (cookies or headers of a signed-in user)."""

    pid: int
    base: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def request(
        self, path: str, *, data: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Sample:
        """One request, timed to the answer's last byte (as curl's time_total), with the server
        CPU it cost."""
        request = urllib.request.Request(
            self.base + path,
            data=data,
            headers={**self.headers, **(headers or {})},
            method="POST" if data is not None else "GET",
        )
        cpu = process_cpu(self.pid)
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=300) as response:
            body = response.read()
            status = response.status
        wall = time.perf_counter() - started
        return Sample(wall, process_cpu(self.pid) - cpu, len(body), status, body)


def verdict(ms: float, goal_ms: float | None) -> str:
    if goal_ms is None:
        return "no goal"
    return f"goal ≤ {goal_ms:g} ms: {'met' if ms <= goal_ms else 'MISSED'}"


def report(
    label: str, samples: list[Sample], *, goal_ms: float | None, size_goal: int | None = None
) -> None:
    """Print one figure: medians of wall and server CPU time, the goal judged on CPU time."""
    wall = statistics.median(s.wall for s in samples) * 1000
    cpu = statistics.median(s.cpu for s in samples) * 1000
    size = statistics.median(s.size for s in samples)
    runs = f"median of {len(samples)}" if len(samples) > 1 else "once"
    spread = ""
    if len(samples) > 1:
        low, high = (f(s.cpu for s in samples) * 1000 for f in (min, max))
        spread = f" [{low:.0f}-{high:.0f}]"
    sized = f", {size / 1e3:.0f} kB"
    if size_goal is not None:
        sized += f" (goal ≤ {size_goal / 1e6:g} MB: {'met' if size <= size_goal else 'MISSED'})"
    print(
        f"  {label}: server CPU {cpu:.0f} ms{spread}, wall {wall:.0f} ms ({runs}){sized}; "
        f"{verdict(cpu, goal_ms)}",
        flush=True,
    )


def repeat(action: Callable[[], Sample], runs: int = RUNS) -> list[Sample]:
    return [action() for _ in range(runs)]


def memory_line(pid: int | str, *, goal_mb: float | None = None, what: str = "server") -> str:
    """The process's peak RSS, with its goal and verdict."""
    peak = process_memory_mb(pid)
    judged = ""
    if goal_mb is not None:
        judged = f"; goal ≤ {goal_mb:g} MB: {'met' if peak <= goal_mb else 'MISSED'}"
    return f"  {what} peak RSS (VmHWM): {peak:.0f} MB{judged}"


def session_cookie(username: str = "bench") -> str:
    """A `sessionid=...` cookie of a signed-in user, written straight into the session table (the
    benchmark process shares the server's database)."""
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore

    user, _ = get_user_model().objects.get_or_create(username=username)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "dashboard.throttle.ThrottledModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"sessionid={session.session_key}"
