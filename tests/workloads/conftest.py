"""Fixtures shared by the workload tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def graph_mode(scratch):
    import mindspore as ms

    before = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=before)
