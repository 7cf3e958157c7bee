"""Shared fixtures: MindSpore runs from a scratch directory with the AVX2 oneDNN cap and a private cache."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Run in an empty directory: MindSpore writes rank_0/, kernel_meta/ ... into the cwd."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """An empty msbench cache, for tests that must see a cold cache."""
    path = tmp_path / "msbench-cache"
    monkeypatch.setenv("MSBENCH_CACHE", str(path))
    return path
