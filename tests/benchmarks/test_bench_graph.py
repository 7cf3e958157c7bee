"""Speed of graph extraction (pytest-benchmark, run with --benchmark-enable by `make test`).

Claim: a cold extraction (child process: import MindSpore, build the real step, compile without running,
parse the final kernel-graph IR) of resnet50/tiny takes under 45 s on a shared 2-core machine; a warm one
is a cache read, median under 50 ms. Issue 5 asked for 15 s cold: not met here, where two runs took 24.5 s
and 15.8 s on 2 vCPUs shared with other sessions (load 9 in the first); the warm median was 0.27 ms.
"""

from __future__ import annotations

import itertools

import pytest

from hardware.model.graph import extract_graph
from msbench.settings import Settings

SETTINGS = Settings(mode="graph", amp_level="O2")


@pytest.fixture(scope="module")
def bench_cache(tmp_path_factory):
    """One cache directory for the module: the cold test fills it, the warm test reads it."""
    return tmp_path_factory.mktemp("bench-cache")


@pytest.mark.slow
def test_cold_extraction(benchmark, bench_cache, monkeypatch):
    fresh = (bench_cache / f"round-{n}" for n in itertools.count())

    def empty_cache():                      # every round starts from an empty cache: a real compile
        monkeypatch.setenv("MSBENCH_CACHE", str(next(fresh)))

    graph = benchmark.pedantic(extract_graph, args=("resnet50", "tiny", {}, SETTINGS), setup=empty_cache,
                               rounds=1, iterations=1)
    assert graph.ops and graph.meta["ops_by_phase"]["backward"] > 0
    assert benchmark.stats.stats.min < 45.0                 # the claim (one round)


@pytest.mark.slow
def test_warm_extraction(benchmark, bench_cache, monkeypatch):
    monkeypatch.setenv("MSBENCH_CACHE", str(bench_cache / "round-0"))     # filled by the cold test
    cold = extract_graph("resnet50", "tiny", {}, SETTINGS)
    warm = benchmark.pedantic(extract_graph, args=("resnet50", "tiny", {}, SETTINGS), rounds=20, warmup_rounds=1)
    assert warm == cold
    assert benchmark.stats.stats.median < 0.050
