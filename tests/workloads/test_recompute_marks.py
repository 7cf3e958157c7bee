"""One recompute marker for every family, and it survives AMP O1's rewrite of cell classes."""

import pytest



# AMP O1's rewrite (mindspore.rewrite) re-imports each rewritten cell's module by its bare file name
# (`from network import V8Detect`); in a process that has rewritten another family's network first, the
# YOLO rewrite once resolved `network` to workloads/transformer/network.py and raised ImportError (CI,
# under xdist, where a worker's earlier files decide what it has rewritten). msbench rewrites one
# workload per process (a cell's child), so each case runs in a fresh interpreter, as a cell does.
O1_MARKS = """
import json, sys
from msbench.settings import make_settings
from workloads.registry import get_workload
from workloads.train_step import apply_amp
wl = get_workload(sys.argv[1])
preset = wl.preset("tiny")
plain = wl.build_network(preset)
rewritten = apply_amp(wl.build_network(preset), make_settings({"amp_level": "O1"}))
print(json.dumps({"plain": [len(wl.recompute_blocks(plain, f)) for f in (False, True)],
                  "rewritten": [len(wl.recompute_blocks(rewritten, f)) for f in (False, True)],
                  "full_covers_more": {id(c) for c in wl.recompute_blocks(plain, False)}
                                      != {id(c) for c in wl.recompute_blocks(plain, True)}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "bert-base", "yolov8n"])
def test_marks_survive_amp_o1_and_full_covers_more(name, scratch):
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", O1_MARKS, name], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert marks["rewritten"] == marks["plain"] and min(marks["plain"]) > 0
    assert marks["full_covers_more"]
