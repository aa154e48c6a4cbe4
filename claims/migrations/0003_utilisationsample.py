"""UtilisationSample moves here from the base app, rows and all.

The table is renamed in place, never copied: claims takes the model into its state, the base's
0002 drops it from its own without touching the table. The content type is renamed too, so its
permissions follow and no stale type is left behind.
"""

from django.db import migrations, models

OLD_TABLE = "dashboard_utilisationsample"
NEW_TABLE = "claims_utilisationsample"


def move_content_type(apps, schema_editor, *, source: str, target: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    types = content_type.objects.using(schema_editor.connection.alias)
    if not types.filter(app_label=target, model="utilisationsample").exists():
        types.filter(app_label=source, model="utilisationsample").update(app_label=target)


def forwards(apps, schema_editor) -> None:
    move_content_type(apps, schema_editor, source="dashboard", target="claims")


def backwards(apps, schema_editor) -> None:
    move_content_type(apps, schema_editor, source="claims", target="dashboard")


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0002_pod_resource_health"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("dashboard", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"ALTER TABLE {OLD_TABLE} RENAME TO {NEW_TABLE}",
                    reverse_sql=f"ALTER TABLE {NEW_TABLE} RENAME TO {OLD_TABLE}",
                ),
            ],
            state_operations=[
                migrations.CreateModel(
                    name="UtilisationSample",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("taken_at", models.DateTimeField(db_index=True)),
                        ("driver", models.CharField(max_length=253)),
                        ("total", models.PositiveIntegerField(default=0)),
                        (
                            "allocated",
                            models.PositiveIntegerField(
                                default=0,
                                help_text=(
                                    "Devices held by at least one claim (exclusive, shared or"
                                    " admin)."
                                ),
                            ),
                        ),
                        ("tainted", models.PositiveIntegerField(default=0)),
                        ("unhealthy", models.PositiveIntegerField(default=0)),
                    ],
                    options={
                        "ordering": ["taken_at", "driver"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("taken_at", "driver"),
                                name="utilisation_sample_time_driver_unique",
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
