"""A profile of the user's own chip from the user's own Ascend profiler output (`msbench calibrate ascend`).

Each profiled run (one profiler output of one cell) becomes per-op table rows exactly as the An et al. table
is built (hardware.calibration.table.group_kernels), labelled (network, batch) by its cell, and the per-class
tables are fitted by the code that derives the shipped profiles: derive.datasheet for the chip's hand-written
part, table.read_dtypes, kernel_fit.fit_classes, flash_bench.with_flash_tables for a chip whose fused attention
kernel has public timings, derive.block_text for the written block, derive.report and error_line for the
per-op error. Runs named as held out are left out of the fit and their error printed; with two or more fitted
runs, each fitted run is also predicted by tables fitted on the others (leave one run out).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Sequence

from hardware.calibration import flash_bench
from hardware.calibration.derive import BEGIN, block_text, datasheet, error_line, report, with_block
from hardware.calibration.kernel_fit import fit_classes, sig, table_rows, unaligned_rows
from hardware.calibration.profiler_join import Join
from hardware.calibration.profiler_kernels import ProfilerFile
from hardware.calibration.table import OPAQUE, Row, group_kernels, read_dtypes, row_from_fields
from hardware.model.opclass import CUBE_CLASSES, VECTOR_CLASSES
from hardware.model.profile import PROFILE_DIR, HardwareProfile, KernelClasses, load_profile

Label = tuple[str, float, float, str]      # an estimate's key, range and reason (derive.block_text)


@dataclass(frozen=True)
class ProfiledRun:
    """One profiler output of one cell: its label in the table, what ran, and its kernels as table rows."""

    network: str
    batch: int
    cell: str                     # what ran, in words (workload, preset, knobs); "" where no cell was named
    source: ProfilerFile
    steps: int
    join: Join | None             # None where the run was not joined to a lowered graph

    @property
    def label(self) -> tuple[str, int]:
        return (self.network, self.batch)

    @property
    def rows(self) -> list[Row]:
        gemms = self.join.gemms if self.join else {}
        fields = group_kernels(self.network, self.batch, ((k.op_type, k.block_dim, k.inputs, k.outputs, k.duration_us)
                                                          for k in self.source.kernels))
        for f in fields:
            g = gemms.get((f["op_type"], f["block_dim"], f["inputs"], f["outputs"]))
            f["gemm"] = "x".join(map(str, g)) if g else ""
        return [row_from_fields(f) for f in fields]


@dataclass(frozen=True)
class Derived:
    """The fitted tables, the profile file's new text, and the lines to print."""

    classes: KernelClasses
    text: str
    lines: list[str]


def fit(rows: Sequence[Row], chip: HardwareProfile, chip_name: str) -> tuple[KernelClasses, list[Label]]:
    """derive's fit of a chip's tables on `rows`, plus its flash tables where the chip has public timings. A
    table whose class has no kernel in `rows` (a ResNet profile has no BatchMatMul) stays the shipped chip
    profile's, labelled an estimate with that profile's range for it (or x0.75-1.25), as does an unaligned
    factor without unaligned kernels of its class."""
    shipped = load_profile(chip_name)
    kept = [kind for kind, mine in table_rows(rows).items() if not mine]
    kept += [f"unaligned_{kind}" for kind in VECTOR_CLASSES if not unaligned_rows(rows, kind)]
    classes = fit_classes(rows, chip, fallback=shipped.kernel_classes if kept else None)
    ranges = {e.key: e for e in shipped.estimates}
    labels: list[Label] = []
    for kind in kept:
        key = f"kernel_classes.{kind}"
        own = ranges.get(key)
        value = getattr(classes, kind) if kind.startswith("unaligned_") else 1.0   # a table's range is a factor
        low, high = (own.low, own.high) if own else (sig(max(1.0, value * 0.75)) if value != 1.0 else 0.75,
                                                     sig(value * 1.25))
        labels.append((key, low, high,
                       f"no {kind.replace('unaligned_', 'unaligned ')} kernel in the profiled runs: {chip_name}'s shipped value"
                       + (f" ({own.reason})".replace('"', "'") if own else "")))
    return flash_bench.with_flash_tables(classes, labels, chip, flash_bench.measured_timings(chip_name))


def derive_profile(runs: Sequence[ProfiledRun], chip_name: str, name: str, held_out: Sequence[tuple[str, int]] = (),
                   note: str | None = None, leave_one_out: bool = True) -> Derived:
    """NAME's profile text: CHIP's datasheet part with its kernel tables fitted on `runs` less `held_out`."""
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two profiled runs share a label: {labels}")
    fitted_labels = [lab for lab in labels if lab not in set(held_out)]
    if not fitted_labels:
        raise ValueError("every profiled run is held out: nothing to fit")
    chip_path = PROFILE_DIR / f"{chip_name}.toml"
    chip = datasheet(chip_path)
    rows, dtype_lines = read_dtypes([row for run in runs for row in run.rows], chip)
    in_fit = [r for r in rows if (r.network, r.batch) in set(fitted_labels)]
    classes, estimate_labels = fit(in_fit, chip, chip_name)
    on_chip = dataclasses.replace(chip, kernel_classes=classes)
    note = note or ("fitted on the user's Ascend profiler output by `msbench calibrate ascend`: "
                    + ", ".join(f"{n} bs{b}" for n, b in fitted_labels))
    text = with_block(profile_head(chip_path.read_text(), chip_name, name, runs), block_text(classes, note, estimate_labels))
    lines = [f"{len(rows)} table rows ({sum(r.count for r in rows)} kernels) from {len(runs)} profiled runs",
             *dtype_lines, *report(rows, on_chip, lambda r: (r.network, r.batch) in set(fitted_labels), name)]
    if leave_one_out:
        lines += leave_one_run_out(rows, fitted_labels, chip, chip_name)
    return Derived(classes, text, lines)


def leave_one_run_out(rows: Sequence[Row], fitted: Sequence[tuple[str, int]], chip: HardwareProfile,
                      chip_name: str) -> list[str]:
    """Per-op error of each fitted run under tables fitted on the other fitted runs."""
    if len(fitted) < 2:
        return ["leave one run out: needs two or more fitted runs (profile another batch size or network)"]
    lines = ["leave one run out (each run predicted by tables fitted on the other runs):",
             f"{'run':<18} {'class':<17} {'kernels':>7} {'median':>8} {'time-wtd':>9} {'measured ms':>11} {'pred/meas':>9}"]
    for label in fitted:
        others = [r for r in rows if (r.network, r.batch) in set(fitted) - {label}]
        classes, _ = fit(others, chip, chip_name)
        on_chip = dataclasses.replace(chip, kernel_classes=classes)
        mine = [r for r in rows if (r.network, r.batch) == label and r.op_type not in OPAQUE]
        for kind in ("all", *CUBE_CLASSES, *VECTOR_CLASSES):
            sel = mine if kind == "all" else [r for r in mine if r.kernel_class == kind]
            if sel:
                lines.append(error_line(f"{label[0]} bs{label[1]}", kind, sel, on_chip))
    return lines


def profile_head(text: str, chip_name: str, name: str, runs: Sequence[ProfiledRun]) -> str:
    """CHIP's hand-written text renamed NAME, under a header that says where the kernel tables came from."""
    body = text.split(BEGIN, 1)[0]
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    header = [f"# {name}: the datasheet sections of hardware/profiles/{chip_name}.toml (sources in its comments), with",
              "# [kernel_classes] fitted on this chip's own Ascend profiler output by `msbench calibrate ascend`",
              "# (hardware/calibration/user_profile.py, the code that derives the shipped profiles). Profiled runs:"]
    for run in runs:
        header.append(f"#   {run.network} bs{run.batch}: {run.source.path} ({run.source.layout}, sha256 "
                      f"{run.source.sha256[:16]}, {len(run.source.kernels)} AI Core kernels over {run.steps} step(s))"
                      + (f"; cell {run.cell}" if run.cell else ""))
    renamed = re.sub(r'(?m)^(\[profile\]\nname = )"[^"]*"', rf'\g<1>"{name}"', "\n".join(lines[start:]))
    return "\n".join(header) + "\n\n" + renamed + "\n"
