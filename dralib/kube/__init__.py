"""Kubernetes connection: client, discovery, list+watch, normalizers, fake API server."""
