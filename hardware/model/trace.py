"""The predicted step as a Chrome trace-event timeline (opens in Perfetto and chrome://tracing).

Built only from the quantities `predict()` assembled the step time from (`Prediction.parts`), so the
timeline cannot disagree with the number: the serial spans (data wait, host-to-device copy, kernel
slots, exposed all-reduce, round trip) follow one another and end at the predicted step time.

Lanes: the device's compute stream (one span per kernel: op names, phase, FLOPs, bytes) and its
communication stream (one span per gradient bucket, placed so that it ends where the exposed part
ends, i.e. overlapping backward as comm.py computes); the host's dispatch thread (one launch per
kernel, the batch copy, the exposed waits, the step's round trip); one lane per data-pipeline worker
(the batch of the next step when prefetch overlaps it, of this step otherwise).

Format: the JSON Object Format of the Trace Event Format (Google, "Trace Event Format", 2016):
`traceEvents` of complete events (`ph: "X"`, `ts`/`dur` in microseconds) and metadata events
(`ph: "M"`) naming processes and threads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hardware.model.compute import Kernel
from hardware.model.predict import Prediction
from msbench.outputs import write_atomic

DEVICE_PID, HOST_PID = 1, 2
COMPUTE_TID, COMM_TID = 1, 2
DISPATCH_TID, WORKER_TID0 = 1, 10


def us(seconds: float) -> float:
    """Microseconds, rounded to the nanosecond so the text is the same everywhere."""
    return round(seconds * 1e6, 3)


def span(name: str, cat: str, pid: int, tid: int, start_s: float, dur_s: float, **args: Any) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": us(start_s), "dur": us(dur_s),
            "args": args}


def label(pid: int, tid: int | None, name: str) -> dict[str, Any]:
    if tid is None:
        return {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def kernel_name(kernel: Kernel) -> str:
    types = [op.type for op in kernel.ops]
    return types[0] if len(types) == 1 else f"Fused[{'+'.join(types)}]"


UNTRACEABLE = ("no trace: this prediction is composed from per-block costs (an LLM cell, hardware/model/llm), "
               "which keep no kernel schedule to draw")


def trace_events(prediction: Prediction, title: str) -> dict[str, Any]:
    """The trace of one predicted step (`title` names the device process, e.g. the cell and profile)."""
    parts = prediction.parts
    if parts is None:
        raise ValueError(UNTRACEABLE)
    ht, comm = parts.host, parts.comm
    events = [label(DEVICE_PID, None, title), label(DEVICE_PID, COMPUTE_TID, "compute stream"),
              label(DEVICE_PID, COMM_TID, "communication stream"), label(HOST_PID, None, "host"),
              label(HOST_PID, DISPATCH_TID, "dispatch thread")]
    workers = parts.pipeline_workers
    for i in range(workers):
        events.append(label(HOST_PID, WORKER_TID0 + i, f"data worker {i}"))
    samples = int(prediction.detail.get("samples_per_step", 0))
    batch_of = "next step (prefetched)" if ht.data_overlapped else "this step"
    for i in range(workers):
        events.append(span(f"prepare batch for {batch_of}", "data", HOST_PID, WORKER_TID0 + i, 0.0, ht.data_s,
                           samples=samples / workers))

    t = 0.0 if ht.data_overlapped else ht.data_s          # the device waits for an unprefetched batch
    if not ht.data_overlapped and ht.data_s > 0:
        events.append(span("wait for batch (no prefetch)", "data", HOST_PID, DISPATCH_TID, 0.0, ht.data_s))
    if ht.transfer_s > 0:
        events.append(span("copy batch host->device", "transfer", HOST_PID, DISPATCH_TID, t, ht.transfer_s))
        t += ht.transfer_s

    for kernel, slot in zip(parts.kernels, parts.slots):
        device_start = t + slot.slot_s - slot.device_s if slot.overlapped else t + slot.dispatch_s
        name = kernel_name(kernel)
        events.append(span(f"launch {name}", "dispatch", HOST_PID, DISPATCH_TID, t, slot.dispatch_s))
        events.append(span(name, kernel.phase, DEVICE_PID, COMPUTE_TID, device_start, slot.device_s,
                           phase=kernel.phase, scope=kernel.ops[0].scope, ops=[op.type for op in kernel.ops],
                           flops=kernel.flops, bytes=kernel.bytes,
                           bound="memory" if kernel.memory_bound else "compute"))
        t += slot.slot_s

    comm_start = t + comm.exposed_s - comm.total_s        # buckets back to back, ending with the exposed part
    for i, bucket_s in enumerate(comm.bucket_s):
        events.append(span(f"all-reduce bucket {i}", "comm", DEVICE_PID, COMM_TID, comm_start, bucket_s))
        comm_start += bucket_s
    if comm.exposed_s > 0:
        events.append(span("wait for all-reduce", "comm", HOST_PID, DISPATCH_TID, t, comm.exposed_s))
        t += comm.exposed_s
    if ht.roundtrip_s > 0:
        events.append(span("step round trip (batch hand-over + launch + loss fetch)", "roundtrip", HOST_PID, DISPATCH_TID, t,
                           ht.roundtrip_s))
        t += ht.roundtrip_s
    if ht.data_overlapped and parts.data_exposed_s > 0:
        events.append(span("wait for next batch", "data", HOST_PID, DISPATCH_TID, t, parts.data_exposed_s))
        t += parts.data_exposed_s
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"title": title, "step_time_us": us(prediction.step_time_s), "end_us": us(t),
                          "breakdown_us": {k: us(v) for k, v in sorted(prediction.breakdown.items())},
                          "profile_hash": prediction.detail.get("profile_hash", ""),
                          "host_cost_hash": prediction.detail.get("host_cost_hash", "")}}


def trace_title(cell: Any) -> str:
    """The name of a cell's trace (a `msbench.cell.Cell` on a `model:<profile>` target)."""
    return f"{cell.workload} ({cell.preset}) on {cell.target} [{cell.id}]"


def write_trace(path: str | Path, prediction: Prediction, title: str) -> Path:
    """Write the trace as JSON (keys sorted: the same bytes for the same prediction), atomically: a full disk
    leaves no truncated trace."""
    return write_atomic(path, json.dumps(trace_events(prediction, title), sort_keys=True, separators=(",", ":")))
