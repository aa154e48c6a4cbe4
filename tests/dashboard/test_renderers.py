"""`?format=yaml` output: the renderer's YAML must read back through the dashboard's own reader."""

from __future__ import annotations

from dashboard.renderers import KubeYAMLRenderer
from dralib.kube.documents import load_documents


def test_shared_values_are_written_out_not_aliased() -> None:
    """A map met twice is written twice: anchors would make pasted output a refused what-if."""
    selector = {"cel": {"expression": 'device.driver == "gpu.example.com"'}}
    claim = {"devices": {"requests": [{"name": "a", "selectors": [selector]}]}}
    data = {"kind": "ResourceClaimTemplate", "spec": {"spec": claim}, "copy": claim}
    text = KubeYAMLRenderer().render(data).decode()
    assert "&id" not in text and "*id" not in text
    assert [document.value for document in load_documents(text)] == [data]
