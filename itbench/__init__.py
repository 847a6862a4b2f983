"""ITBench: a Kubernetes-native benchmark for AI agents on IT operations."""

__version__ = "0.1.0"
