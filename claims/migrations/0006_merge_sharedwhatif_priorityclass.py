# Two migrations written at the same time: the kept what-if answers and the PriorityClass /
# PodDisruptionBudget tables. Neither touches the other's tables.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0005_priorityclass_poddisruptionbudget"),
        ("claims", "0005_sharedwhatif"),
    ]

    operations = []
