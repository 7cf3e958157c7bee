"""Adapters over the model zoos MindSpore users train from: `<zoo>:<model>` names (workloads/registry.py)."""
