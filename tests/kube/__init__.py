"""Tests of the Kubernetes connection layer."""
