"""Browser tests: a headless Chromium page per test, skipped cleanly where Chromium is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "msbench"))      # report_fixtures, test_asv_e2e helpers

from cdp import Page, chromium_binary  # noqa: E402


@pytest.fixture
def page():
    binary = chromium_binary()
    if binary is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    tab = Page(binary)
    yield tab
    tab.close()
