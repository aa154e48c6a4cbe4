"""`manage.py export_snapshot`: write every stored object back out as a Kubernetes List."""

import sys

from django.core.management.base import BaseCommand, CommandError

from inventory.clusters import in_default_cluster
from inventory.snapshot import SnapshotError, write_snapshot


class Command(BaseCommand):
    help = "Export every stored object, as the API server sent it, as a List (YAML or JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
        parser.add_argument("--format", choices=["yaml", "json"], default="yaml")

    @in_default_cluster
    def handle(self, *args, output, format, **options):
        try:
            if output == "-":
                count = write_snapshot(sys.stdout, fmt=format)
            else:
                with open(output, "w", encoding="utf-8") as out:
                    count = write_snapshot(out, fmt=format)
        except (OSError, SnapshotError) as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"exported {count} objects")
