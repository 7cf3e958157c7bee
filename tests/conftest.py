"""Shared fixtures: MindSpore runs from a scratch directory with the AVX2 oneDNN cap and a private cache."""

from __future__ import annotations

import os
from collections import Counter

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


def pytest_collection_modifyitems(config, items):
    """Files with the most slow tests first, each file's tests in their own order: `make test`'s two
    xdist workers (--dist loadfile) then start on the long files and end on short ones together."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    file_order = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (-slow[item.path], file_order[item.path]))
