"""The two web pages users look at, in a real browser: the report HTML from disk, and asv's published
site through `asv preview` on loopback. No console errors; images decoded; tables and graphs drawn."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from asv_assets import vendor_into
from report_fixtures import claims_records  # noqa: E402

from msbench.cli import main
from msbench.store import RunStore


def test_report_html_renders(tmp_path, page):
    store = RunStore(tmp_path / "runs" / "claims.jsonl")
    for rec in claims_records() + claims_records("model:ascend910a", scale=0.5):
        store.append(rec)
    html = tmp_path / "report.html"
    assert main(["report", str(store.path.parent), "--html", str(html)]) == 0
    page.load(html.as_uri())
    images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) >= 4 and all(done and w > 0 and h > 0 for done, w, h in images), images
    tables = page.evaluate("Array.from(document.querySelectorAll('table'))"
                           ".map(t => [t.rows.length, t.getBoundingClientRect().height])")
    assert len(tables) >= 6 and all(rows >= 1 and height > 0 for rows, height in tables), tables
    assert page.evaluate("document.querySelectorAll('table tbody tr').length") > 20
    assert page.errors == []


@pytest.mark.slow
def test_asv_site_graph_shows_both_commits(tmp_path, page):
    from hardware.mindspore.dataset_cache import free_port
    from test_asv_e2e import MACHINE, benchmarked_repo

    repo, home, first, second, _ = benchmarked_repo(tmp_path)
    try:
        vendor_into(repo / "results" / "html")        # asv.conf.json's html_dir, as `msbench nightly` published it
    except OSError as err:
        pytest.skip(f"asv's CDN scripts are served from npm tarballs, and npm's registry is not reachable: {err}")
    port = free_port()
    asv = Path(sys.executable).with_name("asv")
    server = subprocess.Popen([str(asv), "preview", "--port", str(port)], cwd=repo, env={**os.environ, "HOME": str(home)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        page.load(base + f"#matrix_cells.Performance.track_throughput?machine={MACHINE}")
        assert page.wait_for("typeof jQuery !== 'undefined' && typeof jQuery.plot !== 'undefined'", timeout=20)
        points = page.wait_for("(() => { const p = $('#main-graph').data('plot'); if (!p) return null;"
                               " return p.getData().map(s => s.data.filter(pt => pt[1] !== null).length); })()")
        assert points and max(points) == 2, points          # one point per commit on the base variant's line
        commits = page.evaluate("Object.values($.asv.main_json.revision_to_hash)")
        assert {first, second} <= set(commits)
        assert page.errors == []
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=10)
