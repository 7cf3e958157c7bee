"""Derive the profiles' per-class efficiency tables from the checked-in per-op tables.

    python -m hardware.calibration.derive            # rewrite the derived block of each profile
    python -m hardware.calibration.derive --check    # exit 1 if a committed block differs

Reads only the per-op tables of data/ (through hardware.calibration.table) and the datasheet sections of
the profiles: an2022_ascend910_ops.csv (An et al., HPCC 2022: AI-Core time of every kernel of a training
step on an Ascend 910) for the Ascend profiles, cpu_*_ops.csv for the cpu profiles (below). For the 910A:

- Cube classes (conv forward / input-gradient / filter-gradient, MatMul, MatMul with K > M, N, BatchMatMul): the
  efficiency tile-padded FLOPs / (Cube peak x time) of each profiled kernel, as a step table over the work per
  core, ceil(M/16)·ceil(N/16)·ceil(K/16)·batch / cores, from the GEMM each kernel's shapes imply.
- Vector classes (elementwise, reduction, data movement) and `memory` (the streaming traffic of
  Cube operands, fitted on all Vector kernels): bytes / (HBM bandwidth x time), over bytes moved.
- `unaligned_<class>`: Vector kernels whose innermost dimension is not whole 32-byte blocks are
  left out of the tables; their summed time over what the tables predict is the class's slowdown.
- `min_kernel_us`: the median time of the kernels that move at most 4 KiB: the fixed cost of a
  kernel, taken off every measured time before its efficiency is computed (time = fixed + roofline).

Each table cell is its fitted kernels' total ideal time over their total measured time (less the
fixed cost), so the bin's summed time is reproduced, capped at 1 (an L2-resident kernel can beat
the HBM rate) and made non-decreasing in the work. Fitted on ResNet-50 at every profiled batch (16, 32
and 64) and on one size of each of three more networks: BERT-base (seq 128) batch 128, ViT-B/32 batch 128
and DeepFM batch 16,000 (these hold the GEMMs with the most tiles per core: up to ~390,000, all sides
>= 768). ResNet-50's batch 64 is in the fit because the tables must reach the sizes predictions read: its
BN-gradient kernels move 294 MiB (73 MiB at batch 32) and stream at 0.65 of the HBM peak, against 0.37
for the pooled reductions from 16 MiB up; without it that top bin was an extrapolation for every
ResNet-50 step at batch 64 and above (1.2 GB per kernel at 256). The fitting itself is kernel_fit.py. The
report printed at the end is the per-op error on the runs not fitted (BERT-base batch 32, 64, 256 and 512, whose largest GEMMs reach 1.2 million tiles per core; ViT-B/32 batch 64 and
256; DeepFM batch 12,000 and 20,000; YOLOv5 and InceptionV3 at batch 16, 32 and 64), costed with
hardware.model.compute's own functions, per run and class and over all held-out runs together.

No per-op data exists for the A2 generation (910B, 910B4) or the 310P (Atlas 300I Duo). Their tables
are the 910A's scaled by datasheet ratios and labelled `estimate` with a range (see `ratio_estimates`),
except where public GEMM timings of the chip exist (data/public_gemm_tflops.csv, read by gemm_bench:
torch.mm on a 910B2, n = 1024..10240): the 910B's MatMul table is fitted on those from the smallest
measured work per core up (`with_measured_matmul`). They show the A2 Cube far closer to its peak on
large GEMMs (0.83-0.89 from 4096^3) than the 910A's profiled kernels (about 0.4), so the 910A ratio is
not carried over there. Where public FlashAttentionScore timings of the chip exist
(data/public_flash_attention.csv, read by flash_bench: a torch_npu call on a 910B2, seq 1024..32768), its
`flash_attention` and `flash_attention_grad` tables are fitted on them (flash_bench.with_flash_tables); a
chip without them has no fused attention kernel to cost.

The cpu-kind profiles in `CPU_PROFILES` get their [kernel_classes] the same way from per-op times measured
on their own CPU (data/<profile>_ops.csv: MindSpore's Profiler over a run of matrices/validation.toml,
converted by cpu_ops): fitted on the fp32 kernels of the `fit` cells (the tiny presets as shipped). A CPU
has no 32-byte block unit, so its unaligned factors stay 1. CPU kernel time is not a step function of the
work per core (oneDNN picks an algorithm per shape), so each op type with enough profiled shapes also
gets a line of its own, `op_costs` (fit_op_costs), fitted on those kernels and on the profile's kernel
sweep (data/<profile>_sweep_ops.csv, a run of matrices/cpu_kernels.toml: ResNet-50 and BERT at sizes no
validate cell has); the model costs a lone op by its line where it has one, by the tables otherwise.
GEMM rows faster than the Cube peak allows are left out (`beyond_peak`). The per-op error is printed on
the rest: the resized `validate` cells, YOLOv8n, and the AMP cells' fp16 kernels.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tomllib
from pathlib import Path
from typing import Callable, Sequence

from hardware.calibration import flash_bench
from hardware.calibration.gemm_bench import GEMM_DATA, measured_rows
from hardware.calibration.kernel_fit import (TILE_GRID, fit_classes, fit_op_costs, fit_table, ideal_seconds,
                                             op_costs_text, predicted_seconds, sig, step_table, weighted_median,
                                             work)
from hardware.calibration.table import DATA, OPAQUE, Row, load_rows, ops_table, read_dtypes
from hardware.model.opclass import CUBE_CLASSES, FLASH_CLASSES, VECTOR_CLASSES
from hardware.model.profile import PROFILE_DIR, EfficiencyTable, HardwareProfile, KernelClasses

SOURCE_PROFILE = "ascend910a"
RATIO_PROFILES = ("ascend910b", "ascend910b4", "atlas300i-duo")
FIT = {("resnet50", 16), ("resnet50", 32), ("resnet50", 64), ("bert-base", 128), ("vit-b32", 128),
       ("deepfm", 16000)}                                             # the rest is held out
BEGIN = "# >>> derived by `python -m hardware.calibration.derive` (do not edit by hand)"
END = "# <<< derived"
# The 910A's kernel level per class from later per-op tables (written by `python -m hardware.calibration.stack_level`).
LEVEL_DATA = DATA.parent / "stack_level_910a.json"


# --- the error report -----------------------------------------------------------------------------

def errors(rows: Sequence[Row], profile: HardwareProfile) -> tuple[int, float, float]:
    """(kernels, count-weighted median |error|, time-weighted |error|) of predicted vs measured."""
    pairs, abs_time, total = [], 0.0, 0.0
    for r in rows:
        measured = r.duration_us * 1e-6
        predicted = predicted_seconds(r, profile)
        pairs.append((abs(predicted - measured) / measured, r.count))
        abs_time += r.count * abs(predicted - measured)
        total += r.count * measured
    return sum(r.count for r in rows), weighted_median(pairs), abs_time / total


def in_fit(row: Row) -> bool:
    return (row.network, row.batch) in FIT


def report(rows: Sequence[Row], profile: HardwareProfile, fitted: Callable[[Row], bool] = in_fit,
           tables: str = "910A") -> list[str]:
    lines = [f"per-op |error| of the derived {tables} tables (median over kernels; time-weighted = "
             "sum |pred-meas| / sum meas; pred/meas = summed time ratio); AtomicAddrClean excluded "
             "(its op_info is not its traffic)",
             f"{'run':<18} {'class':<17} {'kernels':>7} {'median':>8} {'time-wtd':>9} {'measured ms':>11} {'pred/meas':>9}"]
    runs = sorted({(r.network, r.batch) for r in rows})
    fitted_runs = {(r.network, r.batch) for r in rows if fitted(r)}
    for held_out in (False, True):
        if any((run in fitted_runs) != held_out for run in runs):
            lines.append("fitted rows:" if not held_out else "held-out rows (not fitted):")
        for run in runs:
            if (run in fitted_runs) == held_out:
                continue
            mine = [r for r in rows if (r.network, r.batch) == run and r.op_type not in OPAQUE]
            for kind in ("all", *CUBE_CLASSES, *VECTOR_CLASSES):
                sel = mine if kind == "all" else [r for r in mine if r.kernel_class == kind]
                if sel:
                    lines.append(error_line(f"{run[0]} bs{run[1]}", kind, sel, profile))
    held = [r for r in rows if (r.network, r.batch) not in fitted_runs and r.op_type not in OPAQUE]
    if not held:
        return lines
    lines.append("all held-out runs together:")
    for kind, sel in (("all", held), ("cube", [r for r in held if r.gemm is not None]),
                      ("vector", [r for r in held if r.gemm is None])):
        lines.append(error_line("held-out", kind, sel, profile))
    return lines


def error_line(label: str, kind: str, rows: Sequence[Row], profile: HardwareProfile) -> str:
    n, med, tw = errors(rows, profile)
    ms = sum(r.count * r.duration_us for r in rows) / 1000
    ratio = sum(r.count * predicted_seconds(r, profile) for r in rows) * 1000 / ms
    return f"{label:<18} {kind:<17} {n:>7} {med:>7.1%} {tw:>8.1%} {ms:>11.2f} {ratio:>9.2f}"


# --- profiles of other chips: datasheet ratios to the 910A --------------------------------------

def bytes_per_core_cycle(p: HardwareProfile) -> float:
    return p.memory.gbps / (p.cube.cores * p.cube.ghz)


def ratio_estimates(source: KernelClasses, base: HardwareProfile, chip: HardwareProfile
                    ) -> tuple[KernelClasses, list[tuple[str, float, float, str]]]:
    """The 910A tables carried to another DaVinci chip, and the estimate label of each.

    Cube tables are per core and per tile, so the core count is already in the index; what changes is
    how fast each core is fed: a Cube table is scaled by min(1, chip/910A bytes of memory bandwidth
    per core-cycle). Traffic tables are fractions of the chip's own bandwidth (factor 1). The device
    floor is a fixed number of cycles: it scales with the 910A/chip clock ratio."""
    feed = min(1.0, bytes_per_core_cycle(chip) / bytes_per_core_cycle(base))
    scaled = {}
    labels = []
    for kind in (*CUBE_CLASSES, *VECTOR_CLASSES, "memory"):
        factor = feed if kind in CUBE_CLASSES else 1.0
        table = source.table(kind)
        scaled[kind] = EfficiencyTable(tuple((t, sig(min(1.0, e * factor))) for t, e in table.rows))
        if kind in CUBE_CLASSES:
            labels.append((f"kernel_classes.{kind}", 0.75, sig(max(1.0, 1 / feed)),
                           f"910A per-op table x {feed:.3f} (memory bytes per core-cycle {bytes_per_core_cycle(chip):.1f} "
                           f"vs {bytes_per_core_cycle(base):.1f}); no per-op data for this chip. Low end: a 25% "
                           "slower Cube; high end: the unscaled 910A table"))
        else:
            labels.append((f"kernel_classes.{kind}", 0.75, 1.25,
                           "910A fraction of bandwidth reused (same DaVinci MTE); no per-op data for this chip"))
    factors = {f"unaligned_{kind}": source.unaligned(kind) for kind in VECTOR_CLASSES}
    for key, value in factors.items():
        labels.append((f"kernel_classes.{key}", sig(max(1.0, value * 0.75)), sig(value * 1.25),
                       "910A unaligned-access slowdown reused (same 32-byte MTE/UB blocks); no per-op data for this chip"))
    floor = sig(source.min_kernel_us * base.cube.ghz / chip.cube.ghz)
    lo, hi = sorted((floor, source.min_kernel_us))
    labels.append(("kernel_classes.min_kernel_us", lo, hi,
                   f"910A floor {source.min_kernel_us:g} us x clock ratio {base.cube.ghz:g}/{chip.cube.ghz:g} GHz; "
                   "range up to the unscaled 910A floor"))
    return KernelClasses(min_kernel_us=floor, **factors, **scaled), labels


def with_measured_matmul(classes: KernelClasses, labels: list[tuple[str, float, float, str]],
                         chip: HardwareProfile, measured: Sequence[Row]
                         ) -> tuple[KernelClasses, list[tuple[str, float, float, str]]]:
    """A chip's MatMul table from its public GEMM measurements (gemm_bench), fitted like the 910A's,
    from the smallest measured work per core up; below it (no data) the ratio estimate, capped so the
    table stays non-decreasing. Unchanged where nobody measured the chip."""
    if not measured:
        return classes, labels
    on_chip = dataclasses.replace(chip, kernel_classes=classes)
    fitted = fit_table(measured, on_chip, TILE_GRID, classes.min_kernel_us)
    start = min(max(t for t in TILE_GRID if t <= work(r, on_chip)) for r in measured)
    ratio = classes.matmul
    table = step_table(TILE_GRID, [fitted.at(t) if t >= start else min(ratio.at(t), fitted.at(start))
                                   for t in TILE_GRID])
    sources = ", ".join(sorted({r.network for r in measured}))
    label = ("kernel_classes.matmul", 0.75, 1.1,
             f"from {start} tiles per core up: public torch.mm timings on this chip ({sources}, "
             f"{len(measured)} shapes, data/{GEMM_DATA.name}) fitted as the 910A table; below: the 910A table x "
             "datasheet ratio. Low end: MindSpore's kernel 25% slower than aclnnMatmul; high end: the best measured shape")
    labels = [label if key == label[0] else (key, lo, hi, why) for key, lo, hi, why in labels]
    return dataclasses.replace(classes, matmul=table), labels


# --- writing the derived block ------------------------------------------------------------------

def table_text(table: EfficiencyTable) -> str:
    return "[" + ", ".join(f"[{int(t)}, {e:g}]" for t, e in table.rows) + "]"


def block_text(classes: KernelClasses, note: str, labels: Sequence[tuple[str, float, float, str]]) -> str:
    lines = [BEGIN, f"# {note}", "[kernel_classes]", f"min_kernel_us = {classes.min_kernel_us:g}"]
    lines += [f"unaligned_{kind} = {classes.unaligned(kind):g}" for kind in VECTOR_CLASSES]
    for kind in ("memory", *CUBE_CLASSES, *VECTOR_CLASSES, *FLASH_CLASSES):
        if getattr(classes, kind) is not None:
            lines.append(f"{kind} = {table_text(classes.table(kind))}")
    if classes.op_costs:
        lines += op_costs_text(classes.op_costs)
    for key, lo, hi, reason in labels:
        lines += ["", f'[estimates."{key}"]', f"range = [{lo:g}, {hi:g}]", f'reason = "{reason}"']
    lines.append(END)
    return "\n".join(lines) + "\n"


def with_block(text: str, block: str) -> str:
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        return head + block + tail
    return text.rstrip("\n") + "\n\n" + block


def without_block(text: str) -> str:
    return with_block(text, "") if BEGIN in text else text


def datasheet(path: Path) -> HardwareProfile:
    """A profile's hand-written part (its derived block stripped): the facts derive may read."""
    return HardwareProfile.from_mapping(tomllib.loads(without_block(path.read_text())), str(path), complete=False)


def an_fit(rows: Sequence[Row]) -> tuple[HardwareProfile, KernelClasses]:
    """The 910A datasheet and the tables fitted on An et al.'s kernels of the FIT runs."""
    base = datasheet(PROFILE_DIR / f"{SOURCE_PROFILE}.toml")
    checked, _ = read_dtypes(rows, base)
    return base, fit_classes([r for r in checked if (r.network, r.batch) in FIT], base)


def an_fitted() -> HardwareProfile:
    """The 910A as fitted on An et al.'s kernels, before the level (what the per-op error report and the
    other chips' ratio tables read)."""
    base, classes = an_fit(load_rows())
    return dataclasses.replace(base, kernel_classes=classes)


def with_level(classes: KernelClasses) -> tuple[KernelClasses, list[tuple[str, float, float, str]]]:
    """The An-fitted tables at the level of the later per-op table (LEVEL_DATA), and each scaled table's
    estimate label: low end An et al.'s level, high end the newest table's."""
    data = json.loads(LEVEL_DATA.read_text())
    scaled, labels = {}, []
    for kind, factor in sorted(data["level"].items()):
        scaled[kind] = EfficiencyTable(tuple((t, sig(min(1.0, e * factor))) for t, e in classes.table(kind).rows))
        far = data["far"][kind]
        labels.append((f"kernel_classes.{kind}", sig(1 / factor), sig(max(1.0, far / factor)),
                       f"An et al. table x {factor:g}: the level of the {data['level_run']} per-op table (data/{LEVEL_DATA.name}, "
                       f"hardware.calibration.stack_level); low end: An et al.'s level, high end: {data['far_run']}'s "
                       f"(x {far:g}); which stack MindSpore 2.10 is closer to is not measured"))
    return dataclasses.replace(classes, **scaled), labels


def derived_texts(rows: Sequence[Row]) -> tuple[dict[Path, str], list[str]]:
    """The new text of each profile file, and the report lines."""
    base_path = PROFILE_DIR / f"{SOURCE_PROFILE}.toml"
    base, classes = an_fit(rows)
    rows, dtype_lines = read_dtypes(rows, base)
    fitted = dataclasses.replace(base, kernel_classes=classes)
    leveled, level_labels = with_level(classes)
    runs = ", ".join(f"{n} bs{b}" for n, b in sorted(FIT))
    texts = {base_path: with_block(base_path.read_text(), block_text(
        leveled, f"fitted on An et al. per-op times of {runs} (hardware/calibration/data), then scaled per class to "
                 f"the level of a later per-op table of the same chip (data/{LEVEL_DATA.name})", level_labels))}

    gemm_lines: list[str] = []
    flash_lines: list[str] = []
    for name in RATIO_PROFILES:
        path = PROFILE_DIR / f"{name}.toml"
        chip = datasheet(path)
        scaled, labels = ratio_estimates(classes, base, chip)
        measured = measured_rows(name)
        scaled, labels = with_measured_matmul(scaled, labels, chip, measured)
        timings = flash_bench.measured_timings(name)
        scaled, labels = flash_bench.with_flash_tables(scaled, labels, chip, timings)
        note = (f"estimate: the {SOURCE_PROFILE} tables fitted on An et al. (not scaled to the later level) carried over by "
                "datasheet ratios (derive.ratio_estimates)")
        if measured:
            note += "; matmul from public GEMM timings on this chip (derive.with_measured_matmul)"
        if timings:
            note += "; flash_attention from public FlashAttentionScore timings (flash_bench.with_flash_tables)"
        flash_lines += flash_bench.report(name, dataclasses.replace(chip, kernel_classes=scaled), timings)
        texts[path] = with_block(path.read_text(), block_text(scaled, note, labels))
        if measured:
            gemm_lines.append(error_line(f"{name} (fitted)", "matmul", measured,
                                         dataclasses.replace(chip, kernel_classes=scaled)))
    lines = [f"{len(rows)} table rows ({sum(r.count for r in rows)} kernels) from {DATA.name}",
             *dtype_lines, *report(rows, fitted),
             f"public GEMM timings ({GEMM_DATA.name}) against the chip's derived MatMul table:", *gemm_lines,
             *flash_lines]
    return texts, lines


# --- cpu-kind profiles: per-op times measured on that CPU (cpu_ops) ------------------------------

CPU_PROFILES = ("cpu-icelake", "cpu")  # the cpu profiles with a per-op table (data/<profile>_ops.csv)


def cpu_fit_row(row: Row) -> bool:
    """A row of a `fit` cell (a tiny preset as shipped: no `@overrides`) at fp32: the AMP cells' fp16
    kernels and every resized cell are held out."""
    return "@" not in row.network and "amp_level" not in row.network


def beyond_peak(row: Row, profile: HardwareProfile) -> bool:
    """A Cube kernel measured faster than its FLOPs allow at the datasheet peak: its join to the graph
    paired it with another op's shapes (or the peak is wrong), so its time is not this GEMM's."""
    return row.gemm is not None and ideal_seconds(row, profile) > row.duration_us * 1e-6


def cpu_rows(name: str) -> tuple[list[Row], set[tuple[str, int]]]:
    """A cpu profile's per-op rows: its validation run's and its kernel sweep's (data/<profile>_sweep_ops.csv,
    if measured), and the (network, batch) runs of the sweep, which are calibration data throughout."""
    rows = load_rows(ops_table(name))
    sweep_path = ops_table(name, "sweep")
    sweep = load_rows(sweep_path) if sweep_path.exists() else []
    swept = {(r.network, r.batch) for r in sweep}
    clash = swept & {(r.network, r.batch) for r in rows}
    if clash:
        raise ValueError(f"{sweep_path.name}: runs also in the validation run's table: {sorted(clash)}")
    return rows + sweep, swept


def cpu_derived(name: str) -> tuple[Path, str, list[str]]:
    """A cpu profile's new text (class tables from the fp32 kernels of its fit cells, op lines from those
    and its kernel sweep's) and the report lines (per-op error on the validate and AMP cells' kernels)."""
    path = PROFILE_DIR / f"{name}.toml"
    chip = datasheet(path)
    every, swept = cpu_rows(name)
    impossible = [r for r in every if beyond_peak(r, chip)]
    rows = [r for r in every if not beyond_peak(r, chip)]

    def fitted(row: Row) -> bool:
        return cpu_fit_row(row) or ((row.network, row.batch) in swept and row.dtype == "fp32")

    tables = fit_classes([r for r in rows if cpu_fit_row(r)], chip, blocks=False)
    classes = dataclasses.replace(tables, op_costs=fit_op_costs([r for r in rows if fitted(r)], chip))
    sources = " and ".join(t.name for t in (ops_table(name), ops_table(name, "sweep")) if t.exists())
    note = (f"MindSpore's Profiler on this CPU (data/{sources}, hardware.calibration.cpu_ops): the tables fitted "
            "on the fp32 fit cells' kernels, op_costs on those and the kernel sweep's")
    lines = [f"{name}: {len(every)} table rows ({sum(r.count for r in every)} kernels) from {sources}",
             f"{name}: {len(impossible)} rows ({sum(r.count for r in impossible)} kernels) measured faster than "
             f"their GEMM allows at the {chip.cube.tflops_fp32 * 1e3:.0f} GFLOP/s fp32 peak are left out (a join "
             "to another op's shapes)",
             *report(rows, dataclasses.replace(chip, kernel_classes=classes), fitted, name)]
    return path, with_block(path.read_text(), block_text(classes, note, [])), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="derive the Ascend profiles' efficiency tables")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed derived block differs")
    args = parser.parse_args(argv)
    texts, lines = derived_texts(load_rows())
    for name in CPU_PROFILES:
        path, text, cpu_lines = cpu_derived(name)
        texts[path] = text
        lines += cpu_lines
    print("\n".join(lines))
    stale = [p for p, text in texts.items() if p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"stale: {p.name} differs from what derive writes (run python -m hardware.calibration.derive)",
                  file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(texts[p])
        print(f"wrote {p.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
