"""dashboard.kept.Kept: one computation per fingerprint, from the value kept before."""

from __future__ import annotations

import threading

from dashboard.kept import Kept


def test_a_value_is_computed_once_per_fingerprint_from_the_previous_one() -> None:
    """The same fingerprint returns the kept value; a new one computes from the last value."""
    kept: Kept[list[str]] = Kept()
    seen: list[list[str] | None] = []

    def compute(name: str):
        def inner(previous: list[str] | None) -> list[str]:
            seen.append(previous)
            return [*(previous or []), name]

        return inner

    assert kept.last() is None
    first = kept.get(1, compute("a"))
    assert kept.get(1, compute("never")) is first
    second = kept.get(2, compute("b"))
    assert second == ["a", "b"]
    assert seen == [None, ["a"]]
    assert kept.last() is second
    kept.forget()
    assert kept.last() is None
    assert kept.get(2, compute("c")) == ["c"]


def test_concurrent_callers_wait_for_one_computation() -> None:
    """Threads asking for the same fingerprint at once share one computation."""
    kept: Kept[int] = Kept(pause_gc=True)
    started = threading.Event()
    release = threading.Event()
    calls: list[int] = []

    def compute(previous: int | None) -> int:
        calls.append(1)
        started.set()
        release.wait(timeout=10)
        return 42

    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(kept.get("f", compute))) for _ in range(4)
    ]
    threads[0].start()
    started.wait(timeout=10)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(timeout=10)
    assert results == [42] * 4
    assert len(calls) == 1


def test_forget_every_drops_each_kept_value_in_the_process() -> None:
    """`Kept.forget_every()` drops every instance's value: each computes again from None."""
    first, second = Kept[int](), Kept[int]()
    seen: list[int | None] = []

    def compute(previous: int | None) -> int:
        seen.append(previous)
        return 7

    assert first.get("a", compute) == 7 and second.get("a", compute) == 7
    Kept.forget_every()
    assert first.last() is None and second.last() is None
    assert first.get("a", compute) == 7
    assert seen == [None, None, None]
