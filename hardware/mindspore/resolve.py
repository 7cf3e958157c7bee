"""Workload names as the real target reads them: registry names, or `module:Class` import paths
(how tests and out-of-tree workloads reach the isolated child process, which only gets a name)."""

from __future__ import annotations

from msbench.errors import ConfigError
from msbench.plugins import import_object
from workloads.base import Workload
from workloads.registry import WORKLOADS, get_workload


def load_workload(name: str) -> Workload:
    if name in WORKLOADS or ":" not in name:
        return get_workload(name)
    cls = import_object(name)
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        raise ConfigError("workload", name, "a registry name or module:WorkloadSubclass")
    return cls()
