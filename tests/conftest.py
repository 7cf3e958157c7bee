"""Shared fixtures: MindSpore runs from a scratch directory with the AVX2 oneDNN cap, and no test reads or
writes the developer's `~/.cache/msbench`: every test gets an empty msbench cache of its own, except
`slow` tests (they compile and train real networks), which share one cache per pytest run, its xdist
workers included (as they shared the developer's cache before; its locks let one process compute an entry
while the other waits), so a graph they all read compiles once per run: entries are content-keyed, sharing
changes time, never an outcome. A module-scoped fixture that points `$MSBENCH_CACHE` at its own cache keeps it."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from msbench.cache import CACHE_ENV

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory):
    """The msbench cache of this pytest run, in its numbered temporary directory (under xdist the one that
    holds every worker's): the slow tests' warm cache, and what module- and session-scoped fixtures see
    unless they set their own."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "msbench-cache-session"
    root.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(root))
        yield root


@pytest.fixture(autouse=True)
def _cache_per_test(request, session_cache, tmp_path_factory, monkeypatch):
    """An empty cache per test unless the test is `slow` or a wider fixture set its own cache.
    Outside tmp_path, so a test that lists its tmp_path sees only its own files."""
    if os.environ.get(CACHE_ENV) != str(session_cache) or request.node.get_closest_marker("slow"):
        return
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("msbench-cache")))


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Run in an empty directory: MindSpore writes rank_0/, kernel_meta/ ... into the cwd."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """An empty msbench cache at a known path, for tests that must see a cold cache (slow ones too)."""
    path = tmp_path / "msbench-cache"
    monkeypatch.setenv("MSBENCH_CACHE", str(path))
    return path


def pytest_collection_modifyitems(config, items):
    """Files with the most slow tests first, each file's tests in their own order: `make test`'s two
    xdist workers (--dist loadfile) then start on the long files and end on short ones together. Tests
    marked `long` run only with MSBENCH_LONG=1 (`make test-long`)."""
    if os.environ.get("MSBENCH_LONG") != "1":
        for item in items:
            if item.get_closest_marker("long"):
                item.add_marker(pytest.mark.skip(reason="long tier: make test-long (MSBENCH_LONG=1)"))
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    file_order = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (-slow[item.path], file_order[item.path]))
