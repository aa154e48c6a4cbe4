"""PriorityClasses and PodDisruptionBudgets: what preemption reads besides the pods."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("claims", "0004_pod_projection_limitrange"),
    ]

    operations = [
        migrations.CreateModel(
            name="PriorityClass",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("uid", models.CharField(max_length=64, unique=True)),
                ("api_version", models.CharField(help_text="The apiVersion the server sent the object in.", max_length=64)),
                ("resource_version", models.CharField(blank=True, default="", max_length=64)),
                ("created_at", models.DateTimeField(blank=True, null=True)),
                ("labels", models.JSONField(blank=True, default=dict)),
                ("raw", models.JSONField(help_text="The object exactly as the API server sent it.")),
                ("obj", models.JSONField(help_text="The object normalized to the internal v1 shape.")),
                ("synced_at", models.DateTimeField(auto_now=True)),
                ("name", models.CharField(max_length=253, unique=True)),
                ("value", models.IntegerField(default=0)),
                ("global_default", models.BooleanField(default=False)),
                ("preemption_policy", models.CharField(blank=True, default="", help_text="PreemptLowerPriority or Never.", max_length=32)),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="PodDisruptionBudget",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("uid", models.CharField(max_length=64, unique=True)),
                ("name", models.CharField(db_index=True, max_length=253)),
                ("api_version", models.CharField(help_text="The apiVersion the server sent the object in.", max_length=64)),
                ("resource_version", models.CharField(blank=True, default="", max_length=64)),
                ("created_at", models.DateTimeField(blank=True, null=True)),
                ("labels", models.JSONField(blank=True, default=dict)),
                ("raw", models.JSONField(help_text="The object exactly as the API server sent it.")),
                ("obj", models.JSONField(help_text="The object normalized to the internal v1 shape.")),
                ("synced_at", models.DateTimeField(auto_now=True)),
                ("namespace", models.CharField(db_index=True, max_length=253)),
                ("selector", models.JSONField(blank=True, help_text="spec.selector (null or empty: selects no pod).", null=True)),
                ("min_available", models.CharField(blank=True, default="", max_length=16)),
                ("max_unavailable", models.CharField(blank=True, default="", max_length=16)),
                ("disruptions_allowed", models.IntegerField(default=0)),
                ("disrupted_pods", models.JSONField(blank=True, default=list, help_text="Names in status.disruptedPods (already processed).")),
            ],
            options={
                "ordering": ["namespace", "name"],
                "constraints": [models.UniqueConstraint(fields=("namespace", "name"), name="pdb_ns_name_unique")],
            },
        ),
    ]
