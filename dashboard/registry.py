"""What each app adds to the shared frame: sidebar links, periodic tasks, task queues and live
topics.

The base names no app. Each app registers what it brings from its `AppConfig.ready()`, and the
base reads what was registered: the sidebar (`dashboard.templatetags.ui.nav_links`), Celery
(`dashboard.celery` hands beat `BeatSchedule()`, read when beat builds its scheduler, after every
app is ready, and routes each task to its registered queue when it is sent) and the live
socket's check of the topics a page asks for. Registering the same entry again replaces it, so a
second `ready()` (tests reload app configs) adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NavLink:
    """A sidebar link: the page it opens, its label, where it sits, and the pages it stands for.

    `sections` are the URL names under which the link is shown as the current one (a list and
    its detail pages); lower `order` comes first.
    """

    url_name: str
    label: str
    order: int
    sections: tuple[str, ...]


@dataclass(frozen=True)
class PeriodicTask:
    """A Celery task that beat sends every `seconds`, under the entry name `name`.

    `embedded`: the embedded mode (no Celery) runs it too, in the web process; a task whose
    work that mode does otherwise (keeping watchers running) says False.
    """

    name: str
    task: str
    seconds: float
    embedded: bool = True


_nav: dict[str, NavLink] = {}
_periodic: dict[str, PeriodicTask] = {}
_queues: dict[str, str] = {}
_topics: set[str] = set()
_viewer_key: list[Callable[[Any], str]] = []


def register_nav(url_name: str, label: str, *, order: int, sections: tuple[str, ...] = ()) -> None:
    """Add a sidebar link to the page named `url_name` (current on itself and `sections`)."""
    _nav[url_name] = NavLink(url_name, label, order, tuple(dict.fromkeys((url_name, *sections))))


def nav_links() -> list[NavLink]:
    """The registered sidebar links in their order."""
    return sorted(_nav.values(), key=lambda link: (link.order, link.label))


def register_periodic_task(name: str, *, task: str, seconds: float, embedded: bool = True) -> None:
    """Have beat send the Celery task named `task` every `seconds`, as the entry `name`."""
    if seconds <= 0:
        raise ValueError(f"periodic task {name!r}: seconds must be positive, not {seconds!r}")
    _periodic[name] = PeriodicTask(name, task, float(seconds), embedded)


def periodic_tasks() -> list[PeriodicTask]:
    """The registered periodic tasks, by entry name."""
    return [_periodic[name] for name in sorted(_periodic)]


class BeatSchedule(Mapping[str, dict[str, Any]]):
    """Celery's `beat_schedule` as a view of the registered periodic tasks.

    Celery keeps the object it is given; beat reads it when it builds its scheduler, which is
    after Django has set up every app, so the entries apps register in `ready()` are all there.
    """

    def __getitem__(self, name: str) -> dict[str, Any]:
        entry = _periodic[name]
        return {"task": entry.task, "schedule": entry.seconds}

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(_periodic))

    def __len__(self) -> int:
        return len(_periodic)


def register_task_queue(task: str, *, queue: str) -> None:
    """Send the Celery task named `task` to `queue` instead of the default one."""
    _queues[task] = queue


def task_queue(task: str) -> str | None:
    """The queue registered for the Celery task named `task`, if any."""
    return _queues.get(task)


def register_live_topics(*topics: str) -> None:
    """Declare topics the app publishes on (`dashboard.live.publish_changes`) and pages follow."""
    _topics.update(topics)


def live_topics() -> frozenset[str]:
    """Every registered live topic."""
    return frozenset(_topics)


def register_viewer_key(key: Callable[[Any], str]) -> None:
    """Declare how a request's viewer is told apart: two requests whose keys are equal see the
    same rows (the app deciding visibility registers it; shared renders are keyed by it)."""
    _viewer_key[:] = [key]


def viewer_key(request: Any) -> str:
    """The registered key of the request's viewer; "" when no app decides visibility."""
    return _viewer_key[0](request) if _viewer_key else ""
