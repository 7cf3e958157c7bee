"""Public FlashAttentionScore timings (data/public_flash_attention.csv) as the chip's flash tables.

The fused attention kernel is not a GEMM the MatMul tables can cost: its QK^T and PV products are many
small Cube tiles fed by Vector softmax, all on chip. Its tables are therefore fitted on the kernel's own
timings, forward only (the one thing measured: a torch_npu call on a 910B2 at six sequence lengths), on
the index every Cube table uses: tiles per core, here the tile-equivalents of its FLOPs
(hardware.model.compute.flops_work). FLOPs follow hardware.model.llm.flash (forward 4·b·a·s_q·s_kv·d).

Each cell is its timings' FLOPs at peak over their time less the per-kernel floor, pooled per bin and
made non-decreasing (derive.fit_table's rules). With one timing per bin the fit reproduces each row; the
held-out check refits without each row in turn and predicts it (leave-one-out).

No FlashAttentionScoreGrad timing is public: the gradient's table is the forward's times the
backward/forward efficiency FlashAttention-2 reaches on a GPU (GRAD_EFFICIENCY_RATIO), an estimate.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hardware.calibration.kernel_fit import monotone, sig, step_table
from hardware.model.compute import flops_work, matrix_tflops
from hardware.model.llm.flash import forward_flops
from hardware.model.profile import EfficiencyTable, HardwareProfile, KernelClasses
from msbench.resources import suite_path

FLASH_DATA = suite_path("hardware/calibration/data/public_flash_attention.csv")
FLASH_GRID = (0, 1024, 4096, 16384, 65536, 262144, 1048576)      # tile-equivalents per core
# FlashAttention-2 backward over forward TFLOPS on one GPU, head dim 128, no causal mask, seq 2048:
# 124.57 / 169.28 (RTX 4090, github.com/apache/tvm tl_doc/flash_perf.md at bd6f95705749439fea3600bf078bccc26b780cd9,
# "Flash_attn" column).
GRAD_EFFICIENCY_RATIO = 0.736
Label = tuple[str, float, float, str]


@dataclass(frozen=True)
class FlashTiming:
    """One measured FlashAttentionScore forward call."""

    source: str
    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: str
    time_us: float

    @property
    def flops(self) -> int:
        return forward_flops(self.batch, self.heads, self.seq_q, self.seq_kv, self.head_dim)


def measured_timings(profile_name: str, path: Path = FLASH_DATA) -> list[FlashTiming]:
    """The measured forward calls of one profile's chip (none for a chip nobody measured)."""
    with open(path, newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    return [FlashTiming(source=r["source"], batch=int(r["batch"]), heads=int(r["heads"]), seq_q=int(r["seq_q"]),
                        seq_kv=int(r["seq_kv"]), head_dim=int(r["head_dim"]), dtype=r["dtype"],
                        time_us=float(r["time_us"]))
            for r in csv.DictReader(lines) if r["profile"] == profile_name]


def ideal_seconds(t: FlashTiming, profile: HardwareProfile) -> float:
    return t.flops / (matrix_tflops(t.dtype, profile) * 1e12)


def busy_seconds(t: FlashTiming, floor_us: float) -> float:
    return max(t.time_us - floor_us, 1e-3) * 1e-6


def fit_flash_table(timings: Sequence[FlashTiming], profile: HardwareProfile, floor_us: float) -> EfficiencyTable:
    """The step table on FLASH_GRID: per bin, its timings' ideal time over their measured time (less the
    floor), capped at 1 and made non-decreasing; an empty bin takes the nearest smaller filled one (else
    the nearest larger)."""
    if not timings:
        raise ValueError("no flash attention timings to fit")
    bins: dict[int, list[FlashTiming]] = {g: [] for g in FLASH_GRID}
    for t in timings:
        bins[max(g for g in FLASH_GRID if g <= flops_work(t.flops, profile))].append(t)
    filled_at = [g for g in FLASH_GRID if bins[g]]
    pooled = [min(1.0, sum(ideal_seconds(t, profile) for t in bins[g]) / sum(busy_seconds(t, floor_us) for t in bins[g]))
              for g in filled_at]
    filled = dict(zip(filled_at, (sig(v) for v in monotone(pooled, [len(bins[g]) for g in filled_at]))))
    values = [filled[max(u for u in filled if u <= g)] if any(u <= g for u in filled) else filled[min(filled)]
              for g in FLASH_GRID]
    return step_table(FLASH_GRID, values)


def predicted_seconds(t: FlashTiming, table: EfficiencyTable, profile: HardwareProfile, floor_us: float) -> float:
    """The model's time for a measured call: floor + FLOPs at the table's efficiency (compute.py's rule)."""
    return floor_us * 1e-6 + ideal_seconds(t, profile) / table.at(flops_work(t.flops, profile))


def held_out_errors(timings: Sequence[FlashTiming], profile: HardwareProfile, floor_us: float
                    ) -> list[tuple[FlashTiming, float]]:
    """Leave-one-out: each timing predicted by the table fitted on the others, (timing, signed error)."""
    out = []
    for i, t in enumerate(timings):
        rest = [u for j, u in enumerate(timings) if j != i]
        table = fit_flash_table(rest, profile, floor_us)
        out.append((t, predicted_seconds(t, table, profile, floor_us) / (t.time_us * 1e-6) - 1))
    return out


def with_flash_tables(classes: KernelClasses, labels: list[Label], chip: HardwareProfile,
                      timings: Sequence[FlashTiming]) -> tuple[KernelClasses, list[Label]]:
    """A chip's flash tables from its public timings; unchanged (no fused kernel to cost) where none exist."""
    if not timings:
        return classes, labels
    on_chip = dataclasses.replace(chip, kernel_classes=classes)
    forward = fit_flash_table(timings, on_chip, classes.min_kernel_us)
    grad = EfficiencyTable(tuple((g, sig(e * GRAD_EFFICIENCY_RATIO)) for g, e in forward.rows))
    seqs = sorted({t.seq_q for t in timings})
    sources = ", ".join(sorted({t.source for t in timings}))
    labels = labels + [
        ("kernel_classes.flash_attention", 0.8, 1.25,
         f"public FlashAttentionScore forward timings on this chip ({sources}: torch_npu, {len(timings)} sizes, seq "
         f"{seqs[0]}-{seqs[-1]}, one head, d 128, fp16, data/{FLASH_DATA.name}); low end: MindSpore's call with the "
         "uint8 mask it passes 20% slower than the unmasked torch_npu call; high end: the small rows' per-call "
         "host time (58 us at seq 1024) not being kernel time"),
        ("kernel_classes.flash_attention_grad", 0.8, sig(1 / GRAD_EFFICIENCY_RATIO),
         f"no public FlashAttentionScoreGrad timing: the forward table x {GRAD_EFFICIENCY_RATIO} (FlashAttention-2 "
         "backward/forward TFLOPS on a GPU, head dim 128, seq 2048: 124.57/169.28, apache/tvm tl_doc/flash_perf.md); "
         "backward FLOPs 2.5x forward (Dao 2023). Low end: 0.59 of the forward's efficiency; high end: the "
         "forward's own"),
    ]
    return dataclasses.replace(classes, flash_attention=forward, flash_attention_grad=grad), labels


def report(name: str, chip: HardwareProfile, timings: Sequence[FlashTiming]) -> list[str]:
    """Per timing: the fitted table's error and the leave-one-out (held-out) error."""
    classes = chip.kernel_classes
    if not timings or classes is None or classes.flash_attention is None:
        return []
    floor = classes.min_kernel_us
    lines = [f"{name}: FlashAttentionScore forward timings ({FLASH_DATA.name}) against the derived flash_attention "
             "table (fitted) and refitted without each row (held out)",
             f"{'seq':>7} {'measured us':>12} {'TFLOPS':>8} {'fitted':>8} {'held out':>9}"]
    held = held_out_errors(timings, chip, floor)
    for t, err in held:
        fitted = predicted_seconds(t, classes.flash_attention, chip, floor) / (t.time_us * 1e-6) - 1
        lines.append(f"{t.seq_q:>7} {t.time_us:>12.1f} {t.flops / t.time_us / 1e6:>8.1f} {fitted:>+8.1%} {err:>+9.1%}")
    worst = max(abs(e) for _, e in held)
    median = statistics.median(abs(e) for _, e in held)
    lines.append(f"held out: median |error| {median:.1%}, worst {worst:.1%} over {len(held)} rows")
    return lines
