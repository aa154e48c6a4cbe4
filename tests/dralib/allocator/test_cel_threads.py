"""Concurrency tests of the CEL adapter: shared caches used from many threads at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from dralib.allocator.cel import CELError, DeviceInput, compile_selector

THREADS = 8
ROUNDS = 40

SELECTORS = [
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "a100"',
    'device.attributes["gpu.example.com"].cores > 8',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.capacity["gpu.example.com"].memory.isLessThan(quantity("50Gi"))',
    'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))',
    'device.attributes["gpu.example.com"].driverVersion == semver("2.0.0")',
    '[quantity("1"), device.capacity["gpu.example.com"].memory].max() == quantity("80Gi")',
    '"a100-x".find("[0-9]+") == "100" && device.attributes["gpu.example.com"].cores >= 0',
    'device.attributes["gpu.example.com"].missing == 1',
]


def _devices() -> list[DeviceInput]:
    # New objects, so no earlier test has already cached their activations in this thread.
    return [
        DeviceInput(
            driver="gpu.example.com",
            attributes={
                "model": {"string": model},
                "cores": {"int": cores},
                "driverVersion": {"version": version},
            },
            capacity={"memory": {"value": memory}},
        )
        for model, cores, version, memory in [
            ("a100", 16, "2.0.0", "80Gi"),
            ("a100", 8, "1.2.0", "40Gi"),
            ("t4", 4, "1.10.1", "16Gi"),
            ("h100", 32, "2.1.0-rc.1", "48Gi"),
        ]
    ]


def _answer(expression: str, device: DeviceInput) -> bool | str:
    try:
        return compile_selector(expression).matches(device)
    except CELError as error:
        return str(error)


def test_concurrent_evaluations_match_serial_answers() -> None:
    """Many threads evaluating shared selectors on shared devices get the serial answers."""
    devices = _devices()
    pairs = [(expression, device) for expression in SELECTORS for device in devices]
    # Serial answers first, from this thread: they fill the shared caches that the threads use.
    serial = [_answer(expression, device) for expression, device in pairs]
    start = threading.Barrier(THREADS)

    def work(offset: int) -> list[bool | str]:
        start.wait()
        answers: list[bool | str] = []
        for round_ in range(ROUNDS):
            # Each thread walks the pairs in its own order so different work overlaps.
            shift = (offset * 7 + round_) % len(pairs)
            order = pairs[shift:] + pairs[:shift]
            got = [_answer(expression, device) for expression, device in order]
            answers.extend(got[-shift:] + got[:-shift] if shift else got)
        return answers

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = list(pool.map(work, range(THREADS)))
    for answers in results:
        assert answers == serial * ROUNDS


def test_first_evaluation_in_a_new_thread() -> None:
    """A device first evaluated in one thread evaluates in another with the same answer."""
    device = _devices()[0]
    expression = SELECTORS[3]
    here = _answer(expression, device)
    there: list[bool | str] = []
    thread = threading.Thread(target=lambda: there.append(_answer(expression, device)))
    thread.start()
    thread.join()
    assert there == [here]
