"""The speed claims are benchmarks with thresholds: they run in their own invocation with
`--benchmark-enable` (`make test` does it, so CI does). Under the suite's default `--benchmark-disable`
they are skipped with that reason: never run with their assertions switched off."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("benchmark_enable") or not config.getoption("benchmark_disable"):
        return
    skip = pytest.mark.skip(reason="a speed claim: run `pytest tests/benchmarks --benchmark-enable` (make test does)")
    for item in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)
