"""Snapshot import of hand-written and hostile input: bounds, validation, uids, honest counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from claims.models import Pod, ResourceClaim
from dralib.kube.documents import DEFAULT_LIMITS, stable_uid
from inventory.models import DeviceClass, ResourceSlice
from inventory.snapshot import SnapshotError, import_files, import_limits, import_texts

FIXTURES = Path(__file__).parent / "fixtures" / "snapshot"

CLAIM_WITHOUT_UID = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: hand-written, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
"""


@pytest.mark.django_db
def test_object_without_uid_gets_a_stable_one():
    """A hand-written manifest without metadata.uid is stored under a uid derived from its name."""
    import_texts([("claim.yaml", CLAIM_WITHOUT_UID)])
    claim = ResourceClaim.objects.get(name="hand-written")
    assert claim.uid == stable_uid(kind="ResourceClaim", namespace="team-a", name="hand-written")
    assert claim.raw["metadata"]["uid"] == claim.uid


@pytest.mark.django_db
def test_reimporting_objects_without_uid_changes_nothing():
    """The derived uid is the same every time, so a second import writes nothing."""
    import_texts([("claim.yaml", CLAIM_WITHOUT_UID)])
    report = import_texts([("claim.yaml", CLAIM_WITHOUT_UID)])
    assert (report.result.upserted, report.result.unchanged, report.result.deleted) == (0, 1, 0)
    assert ResourceClaim.objects.count() == 1


@pytest.mark.django_db
def test_report_counts_what_was_stored():
    """Objects per kind are those stored: every pod, those without claims too."""
    listed = yaml.safe_load((FIXTURES / "small-cluster.yaml").read_text())["items"]
    pods_in_file = Counter(item["kind"] for item in listed)["Pod"]
    report = import_files([FIXTURES / "small-cluster.yaml"])
    assert report.objects["Pod"] == Pod.objects.count() == pods_in_file
    assert "Pod" not in report.not_stored
    assert report.objects["ResourceSlice"] == ResourceSlice.objects.count()
    assert f"{Pod.objects.count()} Pod" in report.summary()
    assert "not stored" not in report.summary()


@pytest.mark.django_db
def test_billion_laughs_is_refused():
    """YAML aliases are refused before anything expands or is written."""
    text = 'a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: [*b,*b]\n'
    with pytest.raises(SnapshotError, match=r"bomb.yaml document 1 line 1: YAML anchor &a"):
        import_texts([("bomb.yaml", text)])


@pytest.mark.django_db
def test_invalid_utf8_file_names_the_line(tmp_path):
    """A file that is not UTF-8 is refused with its line, not a decoding traceback."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: Node\nmetadata: {name: caf\xe9}\n")
    with pytest.raises(SnapshotError, match=r"latin1.yaml line 3: not UTF-8 text"):
        import_files([path])


@pytest.mark.django_db
def test_oversized_file_is_refused_before_reading(tmp_path, settings):
    """A file over DASHBOARD_IMPORT_MAX_BYTES is refused from its size alone, naming the
    setting; the same bound holds for the text parsed."""
    settings.IMPORT_MAX_BYTES = 100
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * 200 + "\n")
    with pytest.raises(
        SnapshotError,
        match=r"big.yaml: file is 203 bytes, more than the limit of 100 \(DASHBOARD_IMPORT_MAX",
    ):
        import_files([path])
    with pytest.raises(SnapshotError, match="more than the limit"):
        import_texts([("big.yaml", path.read_text())], limits=import_limits())


def test_import_bound_is_the_operators_not_the_networks(settings):
    """Snapshots of large clusters (a 5,000-node demo is 123 MB of JSON) pass the default
    import bound, which the 64 MiB bound on network input would refuse; values scale with it."""
    assert import_limits().max_bytes == settings.IMPORT_MAX_BYTES >= 256 * 2**20
    assert import_limits().max_bytes > DEFAULT_LIMITS.max_bytes
    settings.IMPORT_MAX_BYTES = 2**30
    assert import_limits().max_nodes == 2**30 // 8


@pytest.mark.django_db
def test_validation_error_names_file_item_and_field():
    """An object the API server would refuse aborts the import, naming where and which field."""
    document = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSliceList",
        "items": [
            {
                "metadata": {"name": "ok", "uid": "u-1"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "node-a",
                    "allNodes": True,
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                },
            }
        ],
    }
    with pytest.raises(SnapshotError) as error:
        import_texts([("slices.json", json.dumps(document))])
    message = str(error.value)
    assert "slices.json document 1 items[0]: ResourceSlice ok: spec: exactly one of" in message
    assert not ResourceSlice.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: v1\nkind: Node\nmetadata: {name: a/b}\n", r"metadata.name: invalid value"),
        ("a: 1\na: 2\n", r"document 1 line 2: duplicate key 'a'"),
        ('{"kind": "Node", "metadata": {"name": "\\ud800"}}', r"lone surrogate"),
    ],
)
def test_bad_input_is_a_snapshot_error(text, expected):
    """Invalid names, duplicate keys and lone surrogates are SnapshotErrors, nothing is written."""
    with pytest.raises(SnapshotError, match=expected):
        import_texts([("input.yaml", text)])
    assert not DeviceClass.objects.exists()
