"""The Django-free library: the structured allocator and its CEL environment (`allocator`), and
what talks Kubernetes (`kube`: client, discovery, kinds, version normalizers, bounded YAML and
JSON documents, label and field selectors, and the fake kube-apiserver used by tests and the
demo). It imports nothing of the apps and no Django; `tests/test_layers.py` holds it to that.
"""
