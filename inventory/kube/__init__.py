"""Kubernetes connection: client, discovery, list+watch loop, version normalizers, fake API server."""
