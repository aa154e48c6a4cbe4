"""Freshness: how current the stored cluster is, in one word, since when and why.

One definition, read from the SyncState rows (one per kind) and the newest `SnapshotImport`,
for the header badge and banner of every page, `/freshness/`, `/readyz` and the `cluster` of
every what-if answer. Per served kind (a kind the cluster does not serve is neutral):

- **switching**: the kind was listed before and its cursor is no longer valid: another cluster
  answers at the address (new kube-system uid: its objects were dropped) or the server went
  back behind the cursor (an etcd restore); a relist is under way. Kinds that disagree on the
  cluster uid are switching too. Until every kind has relisted, the tables hold two states.
- **stale**: the watch is failing (`last_error`, set on every failed request and cleared by any
  success), the kind was never listed, `SyncState.is_stale()` (not verified for 15 minutes),
  no watcher owns it, or its watcher has been silent for `SILENT_AFTER` (a running watcher
  writes a batch or a heartbeat every 5 s, and records each failure). `since` is the last
  time the kind heard from the API server (list, cursor check, batch or heartbeat).
- **live**: none of the above.

The cluster is `switching` if any kind is, else `snapshot` when the newest snapshot import came
after the sync last heard from the cluster and no watcher is heard from now, else `stale` if
any kind is (the first failing kind says why), else `live`, as of the oldest kind's last
contact. Nothing synced and nothing imported is `stale` ("not synced yet").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from inventory.models import Namespace, SnapshotImport, SyncState

LIVE = "live"
STALE = "stale"
SWITCHING = "switching"
SNAPSHOT = "snapshot"
STATES = (LIVE, STALE, SWITCHING, SNAPSHOT)

# A running watcher reports at least every 5 s (WatchOptions.heartbeat_every) and records every
# failure; this long without a word, it is hung or gone.
SILENT_AFTER = timedelta(seconds=30)


def _plural(kind: str) -> str:
    return kind + ("es" if kind.endswith("s") else "s")


def clock(value: datetime | None, *, now: datetime | None = None) -> str:
    """A time as the header says it: "10:02 UTC" today, "2026-11-20 10:02 UTC" another day."""
    if value is None:
        return "never"
    local = timezone.localtime(value)
    today = timezone.localtime(now or timezone.now()).date()
    text = (
        local.strftime("%H:%M %Z") if local.date() == today else local.strftime("%Y-%m-%d %H:%M %Z")
    )
    return text.strip()


def last_contact(state: SyncState) -> datetime | None:
    """When the kind last heard from the API server: a list, a cursor check, a batch, a beat."""
    times = [
        t
        for t in (state.verified_at, state.last_list_at, state.last_event_at, state.heartbeat_at)
        if t is not None
    ]
    return max(times) if times else None


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


@dataclass(frozen=True)
class KindFreshness:
    """One served kind: live, stale or switching, since its last contact, and why."""

    kind: str
    state: str
    since: datetime | None
    why: str = ""
    error: str = ""
    cluster_uid: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state": self.state,
            "since": _iso(self.since),
            "why": self.why,
            "error": self.error,
            "clusterUid": self.cluster_uid,
        }


def kind_freshness(state: SyncState, *, now: datetime) -> KindFreshness:
    """The freshness of one served kind (see the module docstring)."""
    since = last_contact(state)
    plural = _plural(state.kind)
    error = _first_line(state.last_error)

    def made(word: str, why: str) -> KindFreshness:
        return KindFreshness(state.kind, word, since, why, error, state.cluster_uid)

    if not state.cursor_valid and state.last_list_at is not None:
        return made(SWITCHING, f"relisting {plural}")
    if state.last_error:
        return made(STALE, f"watch of {plural} failing since {clock(since, now=now)}")
    if not state.cursor_valid or not state.resource_version or state.verified_at is None:
        return made(STALE, f"{plural} not listed yet")
    if state.is_stale(now=now):
        return made(STALE, f"{plural} not verified since {clock(state.verified_at, now=now)}")
    if not state.watcher:
        return made(STALE, f"no watcher for {plural} since {clock(since, now=now)}")
    if since is None or now - since > SILENT_AFTER:
        return made(STALE, f"no word from the watcher of {plural} since {clock(since, now=now)}")
    return made(LIVE, "")


@dataclass(frozen=True)
class Freshness:
    """How current the stored cluster is: `state` (one of STATES), since when, why, which
    cluster, and `as_of`, the time up to which the data is known to match the cluster (the
    import's time for a snapshot)."""

    state: str
    checked_at: datetime
    since: datetime | None = None
    why: str = ""
    detail: str = ""
    cluster_uid: str = ""
    as_of: datetime | None = None
    kinds: tuple[KindFreshness, ...] = ()
    # The newest import's id: open pages refetch everything when it changes.
    snapshot: int | None = None

    @property
    def badge(self) -> str:
        """The header text (a live badge's age is kept ticking by static/dashboard/live.js)."""
        if self.state == LIVE:
            seconds = (
                max(0, int((self.checked_at - self.as_of).total_seconds())) if self.as_of else 0
            )
            return f"synced {seconds} s ago"
        if self.state == SNAPSHOT:
            return f"snapshot imported {clock(self.since, now=self.checked_at)}"
        if self.state == SWITCHING:
            return "switching clusters: relisting"
        return f"stale: {self.why}"

    @property
    def banner(self) -> str:
        """A sentence for the banner every page shows while stale or switching ("" otherwise)."""
        if self.state == SWITCHING:
            return f"Another state of the cluster is being read: {self.why}. {self.detail}".strip()
        if self.state == STALE:
            text = f"The data shown may be out of date: {self.why}."
            return f"{text} {self.detail}".strip() if self.detail else text

        return ""

    def answer(self) -> dict[str, Any]:
        """The `cluster` of a what-if, headroom or diagnosis answer."""
        return {"uid": self.cluster_uid, "state": self.state, "asOf": _iso(self.as_of)}

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": _iso(self.since),
            "why": self.why,
            "detail": self.detail,
            "clusterUid": self.cluster_uid,
            "asOf": _iso(self.as_of),
            "checkedAt": _iso(self.checked_at),
            "badge": self.badge,
            "banner": self.banner,
            "snapshot": self.snapshot,
            "kinds": [k.as_dict() for k in self.kinds],
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def cluster_freshness(*, now: datetime | None = None) -> Freshness:
    """The freshness of the stored cluster now (two small queries; three for a snapshot)."""
    now = now or timezone.now()
    rows = list(SyncState.objects.order_by("kind"))
    served = [s for s in rows if s.served]
    latest = SnapshotImport.objects.order_by("-imported_at", "-pk").first()
    kinds = tuple(kind_freshness(s, now=now) for s in served)
    contacts = [c for c in (last_contact(s) for s in served) if c is not None]
    heard = any(
        s.watcher and (c := last_contact(s)) is not None and now - c <= SILENT_AFTER for s in served
    )
    snapshot_id = latest.pk if latest is not None else None
    if latest is not None and not heard and (not contacts or latest.imported_at >= max(contacts)):
        how = "merged into the stored objects" if latest.merge else "imported"
        return Freshness(
            SNAPSHOT,
            now,
            since=latest.imported_at,
            why=f"{how} at {clock(latest.imported_at, now=now)}; no sync runs",
            cluster_uid=_snapshot_uid(),
            as_of=latest.imported_at,
            kinds=kinds,
            snapshot=snapshot_id,
        )
    if not served:
        why = "not synced yet" if not rows else "the cluster serves none of the synced kinds"
        return Freshness(STALE, now, why=why, kinds=kinds, snapshot=snapshot_id)
    oldest = min(contacts) if contacts else None
    uids = Counter(s.cluster_uid for s in served if s.cluster_uid)
    switching = [k for k in kinds if k.state == SWITCHING]
    if switching or len(uids) > 1:
        return _switching(served, kinds, now=now, oldest=oldest, snapshot=snapshot_id)
    uid = next(iter(uids), "")
    stale = [k for k in kinds if k.state == STALE]
    if stale:
        # Failing watches first: their error says the most.
        stale.sort(key=lambda k: (not k.error, k.kind))
        first = stale[0]
        why = first.why
        failing = [k for k in stale if k.error]
        if len(failing) > 1:
            names = ", ".join(_plural(k.kind) for k in failing[:2])
            more = f" and {len(failing) - 2} more" if len(failing) > 2 else ""
            why = f"watches of {names}{more} failing since {clock(first.since, now=now)}"
        elif len(stale) > 1:
            why += f" (and {len(stale) - 1} more kinds)"
        since_values = [k.since for k in stale if k.since is not None]
        return Freshness(
            STALE,
            now,
            since=min(since_values) if since_values else None,
            why=why,
            detail=first.error,
            cluster_uid=uid,
            as_of=min(since_values) if since_values else None,
            kinds=kinds,
            snapshot=snapshot_id,
        )
    return Freshness(LIVE, now, cluster_uid=uid, as_of=oldest, kinds=kinds, snapshot=snapshot_id)


def _switching(
    served: list[SyncState],
    kinds: tuple[KindFreshness, ...],
    *,
    now: datetime,
    oldest: datetime | None,
    snapshot: int | None,
) -> Freshness:
    # Kinds that dropped their objects for another cluster name it (their cursor is gone).
    dropped = Counter(s.cluster_uid for s in served if s.cluster_uid and not s.resource_version)
    if dropped:
        new = dropped.most_common(1)[0][0]
    else:
        # Else the kind that heard from the server last: the old cluster is gone.
        never = datetime.min.replace(tzinfo=now.tzinfo)
        new = max(served, key=lambda s: last_contact(s) or never).cluster_uid
    old = sorted({s.cluster_uid for s in served if s.cluster_uid and s.cluster_uid != new})
    relisting = [k.kind for k in kinds if k.state == SWITCHING] or [
        s.kind for s in served if s.cluster_uid != new
    ]
    names = ", ".join(_plural(k) for k in relisting[:3])
    if len(relisting) > 3:
        names += f" and {len(relisting) - 3} more"
    if old or dropped:
        was = f", was {', '.join(old)}" if old else ""
        why = (
            f"the cluster behind the API server changed (kube-system uid {new}{was}); "
            f"relisting {names}"
        )
    else:
        why = f"the API server went back behind the stored cursor (restored?); relisting {names}"
    marked = [s.heartbeat_at for s in served if s.kind in relisting and s.heartbeat_at]
    return Freshness(
        SWITCHING,
        now,
        since=min(marked) if marked else None,
        why=why,
        cluster_uid=new,
        as_of=oldest,
        kinds=kinds,
        snapshot=snapshot,
    )


def _snapshot_uid() -> str:
    # The cluster's identity is its kube-system namespace's uid, when the snapshot holds it.
    return str(
        Namespace.objects.filter(name="kube-system").values_list("uid", flat=True).first() or ""
    )
