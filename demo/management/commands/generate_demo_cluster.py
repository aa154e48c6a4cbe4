"""`manage.py generate_demo_cluster`: write a demo cluster as a Kubernetes List (JSON or YAML)."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from demo.catalog import DemoError
from demo.generator import generate_demo_cluster
from dralib.kube.documents import SafeDumper


def write_objects(out: IO[str], objects: list[dict[str, Any]], *, fmt: str) -> None:
    """JSON: one `kind: List`. YAML: one document per object, the multi-document form."""
    if fmt == "json":
        listed = {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"resourceVersion": ""},
            "items": objects,
        }
        json.dump(listed, out, indent=2)
        out.write("\n")
    else:
        # The generator shares attribute maps between devices: SafeDumper writes them out each time
        # (no anchors), so the dashboard's own import reads the file back.
        yaml.dump_all(objects, out, Dumper=SafeDumper, sort_keys=False, default_flow_style=False)


class Command(BaseCommand):
    help = "Generate a deterministic demo DRA cluster (nodes, slices, claims, pods, quotas)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--nodes", type=int, default=100, help="number of nodes (default 100)")
        parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
        parser.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
        parser.add_argument("--format", choices=["yaml", "json"], default="json")

    def handle(
        self, *args: Any, nodes: int, seed: int, output: str, format: str, **options: Any
    ) -> None:
        try:
            objects = generate_demo_cluster(nodes=nodes, seed=seed)
            if output == "-":
                write_objects(sys.stdout, objects, fmt=format)
            else:
                with open(output, "w", encoding="utf-8") as out:
                    write_objects(out, objects, fmt=format)
        except BrokenPipeError:
            # The reader (e.g. `| head`) stopped early: not an error worth a traceback.
            return
        except (OSError, DemoError) as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"generated {len(objects)} objects for {nodes} nodes (seed {seed})")
