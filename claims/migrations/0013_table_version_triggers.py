# Triggers bumping inventory.TableVersion for claims' tables that kept values follow.

from django.db import migrations

from inventory.versions import unwatch_tables, watch_tables

# A claim's diagnosis is the what-if's own writing, not the cluster's: it moves no version.
TABLES = {"claims_resourceclaim": ["diagnosis", "diagnosed_at"], "claims_pod": []}


def watch(apps, schema_editor):
    watch_tables(schema_editor, TABLES)


def unwatch(apps, schema_editor):
    unwatch_tables(schema_editor, TABLES)


class Migration(migrations.Migration):

    dependencies = [
        ('claims', '0012_indexes_without_pattern_twins'),
        ('inventory', '0012_tableversion'),
    ]

    operations = [
        migrations.RunPython(watch, unwatch),
    ]
