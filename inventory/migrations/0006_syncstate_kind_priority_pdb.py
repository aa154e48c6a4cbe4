from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0005_snapshotimport"),
    ]

    operations = [
        migrations.AlterField(
            model_name="syncstate",
            name="kind",
            field=models.CharField(choices=[("ResourceSlice", "Resource Slice"), ("DeviceClass", "Device Class"), ("ResourceClaim", "Resource Claim"), ("ResourceClaimTemplate", "Resource Claim Template"), ("DeviceTaintRule", "Device Taint Rule"), ("Node", "Node"), ("Pod", "Pod"), ("ResourceQuota", "Resource Quota"), ("ResourceClass", "Resource Class"), ("PodSchedulingContext", "Pod Scheduling Context"), ("Namespace", "Namespace"), ("LimitRange", "Limit Range"), ("PriorityClass", "Priority Class"), ("PodDisruptionBudget", "Pod Disruption Budget")], max_length=64, unique=True),
        ),
    ]
