"""Benchmark: `manage.py import_snapshot` of a demo snapshot, as a user runs it.

Run: .venv/bin/python tests/benchmarks/bench_import.py [--nodes 1000] [--format json|yaml]
       [--runs 5] [--against DIR]
Writes the demo cluster as one List file, then runs `manage.py import_snapshot FILE` in a child
process `--runs` times into an on-disk database: a SQLite file, emptied (a fresh file) before
each run, or a fresh PostgreSQL database when DASHBOARD_DATABASE_URL names one (flushed between
runs). Each run's wall time, CPU time (user + system of the child, from wait4) and peak RSS (the
child's own VmHWM, read by the child as it exits) are measured; the figures are medians,
judged against the goals (5,000 nodes: ≤ 15 s, peak RSS ≤ 800 MB; 1,000 nodes in proportion).
A re-import of the same file (nothing changed) is timed once. Every run prints its figures with
the load average as it ended.

`--against DIR` (SQLite only) names another checkout of the project, such as a `git worktree`
of an earlier commit: its `import_snapshot` runs in turn with this one's, run by run, on the
same file (each migrated by its own code), so that both medians are taken under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _django import ROOT
from _measure import RUNS, load_average
from _server import setup_shared_database

GOAL_SECONDS_PER_NODE = 15.0 / 5000
RSS_GOAL_MB = 800.0


# The child reports its own VmHWM as it exits. Not wait4's ru_maxrss: Linux carries the
# launching process's peak into a child across exec (a /bin/true child of a 600 MB parent
# reports 611 MB), and this parent holds the generated snapshot.
_RUN_AND_REPORT_PEAK = """
import atexit, runpy, sys
def report():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("bench-peak-kb " + line.split()[1] + "\\n")
atexit.register(report)
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


def _child_peak_mb(err: str) -> float:
    for line in err.splitlines():
        if line.startswith("bench-peak-kb "):
            return int(line.split()[1]) * 1024 / 1e6
    raise SystemExit("import_snapshot's child did not report its VmHWM")


def _import(path: Path, env: dict[str, str], tree: Path) -> tuple[float, float, float, str]:
    """One `import_snapshot` of the checkout `tree` in a child: (wall s, CPU s, peak RSS MB,
    its summary line)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [str(ROOT / ".venv/bin/python"), "-c", _RUN_AND_REPORT_PEAK, "import_snapshot", str(path)],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # wait4 rather than communicate: its rusage is this child's alone. The pipes are drained
    # after; the summary is a few lines, well under a pipe's buffer.
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    out, err = child.communicate()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"import_snapshot failed ({child.returncode}): {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, _child_peak_mb(err.decode()), out.decode()


def _fresh_database(
    where: Path, run: int, postgres_url: str, tree: Path, *, label: int = 0
) -> dict[str, str]:
    """The environment of a child importing into an empty on-disk database migrated by the
    checkout `tree`: a new SQLite file, or the benchmark's own PostgreSQL database, flushed
    (never the one the user named)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
    if not postgres_url:
        env["DASHBOARD_DATABASE_URL"] = f"sqlite:///{where / f'import-{run}-{label}.sqlite3'}"
    else:
        env["DASHBOARD_DATABASE_URL"] = postgres_url
    if postgres_url and run:
        subprocess.run(
            [str(ROOT / ".venv/bin/python"), "manage.py", "flush", "--noinput"],
            cwd=tree,
            env=env,
            check=True,
        )
    subprocess.run(
        [str(ROOT / ".venv/bin/python"), "manage.py", "migrate", "--noinput"],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=["json", "yaml"], default="json")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument(
        "--against", type=Path, help="another checkout, imported in turn with this one"
    )
    args = parser.parse_args()
    trees = [ROOT]
    if args.against is not None:
        against = args.against.resolve()
        if not (against / "manage.py").is_file() or against == ROOT:
            raise SystemExit(f"--against {against}: not another checkout of the project")
        if os.environ.get("DASHBOARD_DATABASE_URL", "").startswith("postgres"):
            raise SystemExit("--against compares on SQLite files (the trees' schemas may differ)")
        trees.append(against)
    sys.path.insert(0, str(ROOT))
    from demo.generator import generate_demo_cluster
    from dralib.kube.documents import dump_yaml

    objects = generate_demo_cluster(nodes=args.nodes, seed=args.seed)
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    count = len(objects)
    del objects
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        path = where / f"demo.{args.format}"
        if args.format == "json":
            path.write_text(json.dumps(document))
        else:
            with path.open("w") as out:
                dump_yaml(document, out)
        del document
        size_mb = path.stat().st_size / 1e6
        postgres = os.environ.get("DASHBOARD_DATABASE_URL", "").startswith("postgres")
        database = "PostgreSQL" if postgres else "SQLite file"
        postgres_url = ""
        if postgres:
            from django.db import connection

            # A fresh test database beside the named one; this process lets it go at once.
            postgres_url = setup_shared_database(where)
            connection.close()
        print(f"snapshot: {count} objects, {size_mb:.1f} MB {args.format}; database: {database}")
        print(f"  {load_average()}")
        runs: dict[Path, list[tuple[float, float, float, str]]] = {tree: [] for tree in trees}
        again: dict[Path, tuple[float, float, float, str]] = {}
        for run in range(args.runs):
            for label, tree in enumerate(trees):
                env = _fresh_database(where, run, postgres_url, tree, label=label)
                runs[tree].append(_import(path, env, tree))
                wall, cpu, peak, _ = runs[tree][-1]
                print(
                    f"  run {run + 1} {tree}: CPU {cpu:.2f} s, wall {wall:.2f} s, "
                    f"peak RSS {peak:.0f} MB; {load_average()}"
                )
                if run + 1 < args.runs:
                    # The last file of each tree stays for its re-import below.
                    if not postgres:
                        Path(env["DASHBOARD_DATABASE_URL"].removeprefix("sqlite:///")).unlink()
                else:
                    again[tree] = _import(path, env, tree)
    for tree in trees:
        if len(trees) > 1:
            print(f"{tree}:")
        _report(runs[tree], again[tree], nodes=args.nodes, count=count)


def _report(
    runs: list[tuple[float, float, float, str]],
    again: tuple[float, float, float, str],
    *,
    nodes: int,
    count: int,
) -> None:
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    peak = statistics.median(r[2] for r in runs)
    goal = GOAL_SECONDS_PER_NODE * nodes
    print(
        f"  import_snapshot: CPU {cpu:.2f} s, wall {wall:.2f} s (median of {len(runs)}; "
        f"{count / wall:.0f} objects/s); goal ≤ {goal:.1f} s "
        f"(15 s at 5,000 nodes, in proportion): {'met' if cpu <= goal else 'MISSED'}"
    )
    print(
        f"  import_snapshot peak RSS (the child's VmHWM): {peak:.0f} MB (median; "
        f"max {max(r[2] for r in runs):.0f}); goal ≤ {RSS_GOAL_MB:g} MB: "
        f"{'met' if peak <= RSS_GOAL_MB else 'MISSED'}"
    )
    print(
        f"  re-import of the same file (nothing changed): CPU {again[1]:.2f} s, "
        f"wall {again[0]:.2f} s, peak RSS {again[2]:.0f} MB; {load_average()}"
    )
    print("  " + runs[-1][3].strip().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
