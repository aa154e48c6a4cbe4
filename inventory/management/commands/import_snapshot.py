"""`manage.py import_snapshot FILE...`: load what `kubectl get ... -o yaml|json` printed."""

from django.core.management.base import BaseCommand, CommandError

from inventory.clusters import in_default_cluster
from inventory.snapshot import SnapshotError, import_files


class Command(BaseCommand):
    help = (
        "Import Kubernetes objects (List objects, multi-document YAML or single objects, any "
        "supported API version). A full import replaces the kinds it covers; all or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="YAML or JSON files")
        parser.add_argument(
            "--merge",
            action="store_true",
            help="only add and update; keep stored objects missing from the files",
        )

    @in_default_cluster
    def handle(self, *args, files, merge, **options):
        try:
            report = import_files(files, merge=merge)
        except SnapshotError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(report.summary())
