"""`python -m hardware.calibration.nonsink`: what a step costs on the host without dataset sink, term by term.

The mechanism (hardware/model/host_time.py, "Round trip") rests on the sources in SOURCES, read from the
code that runs the loop, not from any end-to-end throughput. Without sink, one Python thread per device:
  1. takes the next batch from the dataset iterator (the hand-over: MindSpore 2.10's iterator converts each
     column with Tensor.from_numpy, no copy, unless do_copy is set; the CPU it spends per sample is the
     consumer figure `msbench calibrate host` measures on the reference host, hardware/calibration/host_cost.json),
  2. copies the batch to the device (PCIe, the profile's [host] link_gbps, a datasheet figure),
  3. launches the graph and fetches the loss (the profile's [launch] step_us, an estimate: no public figure),
and then waits: the step-end callback reads the loss on the host every step (LossMonitor.step_end calls
asnumpy(); MindYOLO's train_step reads `not grads_finite`), which blocks until the device is done. So these
terms add to the device time instead of overlapping it. The pipeline's worker threads keep running in
parallel either way (that part is the pipelined law, unchanged).

What does not change without sink: how the graph runs. MindSpore's sinking-mode page (r2.0-r2.5) says data
sink on Ascend turns graph sink on too, which would make a non-sink step run kernel by kernel. The code that
picks the executor does not read the sink mode: in GRAPH mode MsContext::IsKByKExecutorMode returns kernel by
kernel for jit_level O0/O1 (or GRAPH_OP_RUN=1, or memory offload) and the whole-graph sink executor for O2,
and Model.train's non-sink loop calls the same compiled train network (SOURCES). So no per-kernel launch
cost is added to a non-sink step at O2, and O0/O1 pay it with or without sink.

This script prints, per Ascend profile with a separate device and per calibrated full-size pipeline, the three
terms per step at the batch sizes it is asked for, from the checked-in figures only (no host is timed here, so
it prints the same on every machine). It reads no end-to-end published figure (those are validation data).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from hardware.model.profile import load_profile, profile_names

HOST_COST = Path(__file__).with_name("host_cost.json")

# Where each piece of the mechanism is stated: code that runs the non-sink loop, at a named commit.
SOURCES: tuple[dict[str, str], ...] = (
    {"what": "Model.train without sink: one loop per step, `outputs = self._train_network(*inputs)` then "
             "`list_callback.step_end(run_context)`, on the calling thread",
     "repo": "mindspore-ai/mindspore", "path": "mindspore/python/mindspore/train/model.py",
     "commit": "81b7facea06983a47354883a9ba1cfff21b6e22a", "where": "Model._train_process"},
    {"what": "LossMonitor.step_end reads the loss with asnumpy() every step, whatever per_print_times is",
     "repo": "mindspore-ai/mindspore", "path": "mindspore/python/mindspore/train/callback/_loss_monitor.py",
     "commit": "01346f7427bd910c1f500e70e56cf7ff48d0e6c5", "where": "LossMonitor.step_end"},
    {"what": "MindYOLO's non-sink loop iterates create_dict_iterator(output_numpy=False) and reads the "
             "Tensor `grads_finite` on the host every step (`if not grads_finite and ...`)",
     "repo": "mindspore-lab/mindyolo", "path": "mindyolo/utils/trainer_factory.py",
     "commit": "0275ff6fc4031fb4b864496966366b88783ff776", "where": "Trainer.train, Trainer.train_step"},
    {"what": "the executor is chosen from jit_level (O0/O1 kernel by kernel, O2 whole-graph sink; also "
             "GRAPH_OP_RUN=1 and memory offload), never from the dataset sink mode",
     "repo": "mindspore-ai/mindspore", "path": "mindspore/core/utils/ms_context.cc",
     "commit": "", "where": "MsContext::IsKByKExecutorMode (2.3-2.6 era versions)"},
    {"what": "the non-sink DatasetHelper iterates create_tuple_iterator(do_copy=ds.config iterator mode); "
             "the default do_copy=False converts with Tensor.from_numpy (no copy of the batch)",
     "repo": "mindspore (2.10.0 wheel)", "path": "mindspore/train/dataset_helper.py, "
                                              "mindspore/dataset/engine/iterators.py",
     "commit": "", "where": "_DatasetIterNormal; _transform_md_to_tensor"},
)

PIPELINES = ("resnet50/full/mindrecord", "resnet50/full/generator", "yolov8n/full/generator")


def accelerator_profiles() -> list[str]:
    """The profiles whose device is separate from the host (the mechanism's scope)."""
    return [n for n in profile_names() if not load_profile(n).host.shares_device]


def terms(entry: dict[str, Any], batch: int, profile_name: str) -> dict[str, float]:
    """Seconds per step of each non-sink host term on this profile (hardware/model/host_time.py's arithmetic)."""
    p = load_profile(profile_name)
    handover = entry["consumer_seconds_per_sample"] * batch / p.host.core_speed
    copy = entry["bytes_per_sample"] * batch / (p.host.link_gbps * 1e9)
    launch = p.launch.step_us * 1e-6
    return {"handover": handover, "copy": copy, "launch": launch, "total": handover + copy + launch}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hardware.calibration.nonsink", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, action="append", help="per-device batch sizes (default 16, 32, 256)")
    args = ap.parse_args(argv)
    entries = json.loads(HOST_COST.read_text())["entries"]
    print("sources:")
    for s in SOURCES:
        at = f" @ {s['commit']}" if s["commit"] else ""
        print(f"- {s['repo']}{at}: {s['path']} ({s['where']}): {s['what']}")
    print("\nnon-sink host terms per step, ms (hand-over = consumer x batch / core_speed; copy = bytes x batch / "
          "link_gbps; launch = step_us, an estimate):")
    print(f"{'profile':14} {'pipeline':28} {'batch':>5} {'hand-over':>10} {'copy':>8} {'launch':>8} {'total':>8}")
    for name in accelerator_profiles():
        for key in PIPELINES:
            for batch in args.batch or (16, 32, 256):
                t = terms(entries[key], batch, name)
                print(f"{name:14} {key:28} {batch:>5} {t['handover'] * 1e3:>10.3f} {t['copy'] * 1e3:>8.3f} "
                      f"{t['launch'] * 1e3:>8.3f} {t['total'] * 1e3:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
