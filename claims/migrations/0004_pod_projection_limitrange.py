"""Every pod as a slim projection (requests, host ports, priority, required anti-affinity), and
LimitRanges.

The pods stored so far all use claims and keep their objects: they are marked so, and their
projection is computed from the stored object once, since a relist leaves an object whose
resourceVersion did not change untouched.
"""

from django.db import migrations, models

from claims.whatif.podtopology import anti_affinity_terms
from claims.whatif.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    ResourceError,
    host_ports,
    pod_requests,
    scheduler_units,
    with_request_defaults,
)


def project_stored_pods(apps, schema_editor) -> None:
    pods = apps.get_model("claims", "Pod").objects.using(schema_editor.connection.alias)
    for pod in pods.only("pk", "obj").iterator():
        obj = pod.obj or {}
        spec = with_request_defaults(obj.get("spec") or {})
        try:
            units = scheduler_units(pod_requests(spec, status=obj.get("status") or {}))
        except ResourceError:
            units = {}
        priority = spec.get("priority")
        pods.filter(pk=pod.pk).update(
            uses_claims=True,
            priority=priority if isinstance(priority, int) else 0,
            cpu_request=units.pop(CPU, 0),
            memory_request=units.pop(MEMORY, 0),
            storage_request=units.pop(EPHEMERAL_STORAGE, 0),
            other_requests=units,
            host_ports=[list(port) for port in host_ports(spec)],
            anti_affinity=anti_affinity_terms(spec),
        )


class Migration(migrations.Migration):

    dependencies = [
        ('claims', '0003_utilisationsample'),
    ]

    operations = [
        migrations.AddField(
            model_name='pod',
            name='anti_affinity',
            field=models.JSONField(blank=True, default=list, help_text="Required pod anti-affinity terms (InterPodAffinity checks running pods')."),
        ),
        migrations.AddField(
            model_name='pod',
            name='cpu_request',
            field=models.BigIntegerField(default=0, help_text='Requested cpu, millicores.'),
        ),
        migrations.AddField(
            model_name='pod',
            name='host_ports',
            field=models.JSONField(blank=True, default=list, help_text='[hostIP, protocol, hostPort] of each host port.'),
        ),
        migrations.AddField(
            model_name='pod',
            name='memory_request',
            field=models.BigIntegerField(default=0, help_text='Requested memory, bytes.'),
        ),
        migrations.AddField(
            model_name='pod',
            name='other_requests',
            field=models.JSONField(blank=True, default=dict, help_text='Other scalar requests (hugepages-*, extended).'),
        ),
        migrations.AddField(
            model_name='pod',
            name='priority',
            field=models.IntegerField(default=0, help_text='spec.priority'),
        ),
        migrations.AddField(
            model_name='pod',
            name='storage_request',
            field=models.BigIntegerField(default=0, help_text='Requested ephemeral-storage, bytes.'),
        ),
        migrations.AddField(
            model_name='pod',
            name='uses_claims',
            field=models.BooleanField(db_index=True, default=False, help_text='The whole object is kept (the pod uses claims).'),
        ),
        migrations.CreateModel(
            name='LimitRange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('uid', models.CharField(max_length=64, unique=True)),
                ('name', models.CharField(db_index=True, max_length=253)),
                ('api_version', models.CharField(help_text='The apiVersion the server sent the object in.', max_length=64)),
                ('resource_version', models.CharField(blank=True, default='', max_length=64)),
                ('created_at', models.DateTimeField(blank=True, null=True)),
                ('labels', models.JSONField(blank=True, default=dict)),
                ('raw', models.JSONField(help_text='The object exactly as the API server sent it.')),
                ('obj', models.JSONField(help_text='The object normalized to the internal v1 shape.')),
                ('synced_at', models.DateTimeField(auto_now=True)),
                ('namespace', models.CharField(db_index=True, max_length=253)),
                ('limits', models.JSONField(blank=True, default=list, help_text='spec.limits')),
            ],
            options={
                'ordering': ['namespace', 'name'],
                'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='limitrange_ns_name_unique')],
            },
        ),
        migrations.RunPython(project_stored_pods, migrations.RunPython.noop),
    ]
