"""Workload names as the real target reads them: any name the registry resolves (built-in, zoo,
entry point, `module:Class`), which is how plugins reach the isolated child process: it only gets a name."""

from __future__ import annotations

from workloads.registry import get_workload as load_workload

__all__ = ["load_workload"]
