from django.db import migrations, models
import django.utils.timezone


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0004_syncstate_kind_limitrange"),
    ]

    operations = [
        migrations.CreateModel(
            name="SnapshotImport",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "imported_at",
                    models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                ),
                ("merge", models.BooleanField(default=False)),
                (
                    "stored",
                    models.JSONField(blank=True, default=dict, help_text="kind -> objects stored"),
                ),
            ],
            options={
                "ordering": ["-imported_at", "-pk"],
            },
        ),
    ]
