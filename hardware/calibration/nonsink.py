"""`python -m hardware.calibration.nonsink`: what a step costs on the host without dataset sink, term by term.

The mechanism (hardware/model/host_time.py, "Round trip") rests on the sources in SOURCES, read from the
code that runs the loop, not from any end-to-end throughput. Without sink, one Python thread per device:
  1. takes the next batch from the dataset iterator (the hand-over: MindSpore 2.10's iterator converts each
     column with Tensor.from_numpy, no copy, unless do_copy is set; the CPU it spends per sample is the
     consumer figure `msbench calibrate host` measures on the reference host, hardware/calibration/host_cost.json),
  2. copies the batch to the device (PCIe, the profile's [host] link_gbps, a datasheet figure),
  3. launches the graph and fetches the loss (the profile's [launch] step_us, an estimate: no public figure),
  4. and does the rest of the loop's per-step work (`Model.train`'s bookkeeping and callbacks, the feeding of the
     inputs to the launched graph): the profile's [launch] nonsink_us, derived here from STEP_TRACE,
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

# The one public component-level figure of a non-sink step: MindInsight's step traces of one script run with
# dataset_sink_mode False and then True (screenshots in the docs repository, read by hand). The iteration gap is
# the host time between two steps' device work; the forward-and-backward part is the same in both (38.00 and
# 38.11 ms), and without sink the host queue was empty 1 of 117 times, so the data pipeline kept up: the gap is
# the loop's serial host work. The run is also a validation case (its sink pair is then not independent of this).
STEP_TRACE: dict[str, Any] = {
    "repo": "mindspore-ai/docs", "commit": "da71357b6dc10fa32fedbd91655fbb9c7b62f691",
    "path": "docs/mindspore/source_zh_cn/migration_guide/sample_code.md",
    "figures": "images/resnet_profiler1.png (no sink), images/resnet_profiler9.png (sink)",
    "run": "ResNet-50 on CIFAR-10 resized to 224x224, batch 32, one Ascend 910, MindSpore 1.8, Model.train with "
           "LossMonitor and TimeMonitor, amp O0, profiler on",
    "profile": "ascend910a",
    "pipeline": "resnet50/full/mindrecord/num_classes=10,stored_height=32,stored_width=32",
    "batch": 32,
    "gap_nosink_ms": 34.747,
    "gap_sink_ms": 0.2043,
}
# The figure is one MindSpore 1.8 run with the profiler on; MindSpore 2.x's iterator no longer copies the batch.
# So the derived value is an estimate whose low end allows most of the gap to be that run's own (LOW_SHARE of it).
LOW_SHARE, HIGH_SHARE = 0.1, 1.15


def accelerator_profiles() -> list[str]:
    """The profiles whose device is separate from the host (the mechanism's scope)."""
    return [n for n in profile_names() if not load_profile(n).host.shares_device]


def terms(entry: dict[str, Any], batch: int, profile_name: str) -> dict[str, float]:
    """Seconds per step of each non-sink host term on this profile (hardware/model/host_time.py's arithmetic)."""
    p = load_profile(profile_name)
    handover = entry["consumer_seconds_per_sample"] * batch / p.host.core_speed
    copy = entry["bytes_per_sample"] * batch / (p.host.link_gbps * 1e9)
    launch = p.launch.step_us * 1e-6
    loop = p.launch.nonsink_us * 1e-6
    return {"handover": handover, "copy": copy, "launch": launch, "loop": loop,
            "total": handover + copy + launch + loop}


def derived_nonsink_us(profile_name: str, entries: dict[str, Any] | None = None) -> float:
    """`launch.nonsink_us` of a profile: STEP_TRACE's serial host time without sink (the iteration gap less the
    gap with sink), less the hand-over, copy and round trip the model prices apart on the traced chip's host,
    scaled to this profile's host by core speed (it is host CPU work)."""
    entries = entries or json.loads(HOST_COST.read_text())["entries"]
    traced = STEP_TRACE["profile"]
    t = terms(entries[STEP_TRACE["pipeline"]], STEP_TRACE["batch"], traced)
    rest_s = (STEP_TRACE["gap_nosink_ms"] - STEP_TRACE["gap_sink_ms"]) / 1e3 - (t["handover"] + t["copy"] + t["launch"])
    return round(rest_s * 1e6 * load_profile(traced).host.core_speed / load_profile(profile_name).host.core_speed, 1)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hardware.calibration.nonsink", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, action="append", help="per-device batch sizes (default 16, 32, 256)")
    args = ap.parse_args(argv)
    entries = json.loads(HOST_COST.read_text())["entries"]
    print("sources:")
    for s in SOURCES:
        at = f" @ {s['commit']}" if s["commit"] else ""
        print(f"- {s['repo']}{at}: {s['path']} ({s['where']}): {s['what']}")
    trace = STEP_TRACE
    print(f"\nstep trace: {trace['repo']} @ {trace['commit']}: {trace['path']} ({trace['figures']}); {trace['run']}: "
          f"iteration gap {trace['gap_nosink_ms']} ms without sink, {trace['gap_sink_ms']} ms with it")
    print("launch.nonsink_us (the gap's difference less hand-over, copy and step_us on the traced host, scaled by "
          f"core speed; estimate range {LOW_SHARE:g}x-{HIGH_SHARE:g}x):")
    for name in accelerator_profiles():
        value = derived_nonsink_us(name, entries)
        print(f"  {name:14} {value:>10.1f} us  range [{value * LOW_SHARE:.0f}, {value * HIGH_SHARE:.0f}]")
    print("\nnon-sink host terms per step, ms (hand-over = consumer x batch / core_speed; copy = bytes x batch / "
          "link_gbps; launch = step_us, an estimate; loop = nonsink_us):")
    print(f"{'profile':14} {'pipeline':28} {'batch':>5} {'hand-over':>10} {'copy':>8} {'launch':>8} {'loop':>8} "
          f"{'total':>8}")
    for name in accelerator_profiles():
        for key in PIPELINES:
            for batch in args.batch or (16, 32, 256):
                t = terms(entries[key], batch, name)
                print(f"{name:14} {key:28} {batch:>5} {t['handover'] * 1e3:>10.3f} {t['copy'] * 1e3:>8.3f} "
                      f"{t['launch'] * 1e3:>8.3f} {t['loop'] * 1e3:>8.3f} {t['total'] * 1e3:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
