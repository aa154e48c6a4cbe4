from django.db import migrations

from inventory.versions import watch_tables

# The triggers again: a bump now sets the version from the clock (inventory.versions). A
# claim's diagnosis is the what-if's own writing, not the cluster's: it moves no version.
TABLES = {"claims_resourceclaim": ["diagnosis", "diagnosed_at"], "claims_pod": []}


def watch(apps, schema_editor):
    watch_tables(schema_editor, TABLES)


class Migration(migrations.Migration):

    dependencies = [
        ('claims', '0014_event_indexes_for_hot_updates'),
        ('inventory', '0013_table_versions_from_the_clock'),
    ]

    operations = [
        migrations.RunPython(watch, migrations.RunPython.noop),
    ]
