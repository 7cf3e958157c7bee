"""Assemble the report: which records are 'now' and which the commit baseline, then every section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from msbench.asv_results import load_results
from msbench.compare import FLAG_ORDER
from msbench.conditions import mixed, of_record, overloaded
from msbench.records import Record
from msbench.report import accuracy_widths, best, claims, diff, effects, latency, perop, plots, tradeoffs, uncertainty
from msbench.report.frame import GIB, brief, has_values
from msbench.report.load import Inputs, RecordSet, load_inputs
from msbench.report.section import Figure, Section, Table
from msbench.tracked import ACCURACY_TOLERANCE_PP, cell_key

CHANGE_THRESHOLD = 0.05
CELL_COLUMNS = ["cell_id", "workload", "preset", "target", "label", "status", "throughput", "step_time_s",
                "peak_gib", "accuracy", "accuracy_delta_pp", "bound", "reason"]


@dataclass(frozen=True)
class Options:
    memory_cap_gib: float | None = None
    tolerance_pp: float = ACCURACY_TOLERANCE_PP
    baselines: tuple[str, ...] = ()
    threshold: float = CHANGE_THRESHOLD
    plots: bool = True                  # off when only Markdown is written (it carries no plots)


@dataclass(frozen=True)
class Sides:
    """The records the report describes (`now`), the ones before them for the commit diff, and the
    asv results directories with the two asv commits to compare."""

    now: RecordSet
    before: RecordSet | None
    asv_dirs: tuple[Path, ...]
    asv_commits: tuple[str, str] | None
    notes: tuple[str, ...]


def short(commit: str) -> str:
    return commit[:10]


def choose_sides(inputs: Inputs, baselines: Sequence[str]) -> Sides:
    """--baseline PATH: those records are 'before'; --baseline COMMIT: that commit's records among the
    inputs; neither: the second-newest commit when the inputs hold several. 'now' is the newest."""
    notes: list[str] = []
    runs, asv_dirs = inputs.runs, list(inputs.asv_dirs)
    paths = [b for b in baselines if Path(b).exists()]
    commit = next((b for b in baselines if not Path(b).exists()), None)
    before: RecordSet | None = None
    if paths:
        loaded = load_inputs(paths)
        before = loaded.runs
        asv_dirs += [d for d in loaded.asv_dirs if d not in asv_dirs]
        notes.append(f"commit baseline: the records in {', '.join(paths)}")
    present = runs.commits()
    if commit:
        before = runs.of_commit(commit)
        if not before.records:
            notes.append(f"--baseline {commit}: no records of that commit among the inputs "
                         f"(commits present: {', '.join(map(short, present)) or 'none'})")
            before = None
        present = [c for c in present if not c.startswith(commit)]
    elif before is None and len(present) >= 2:
        before = runs.of_commit(present[-2])
        notes.append(f"the inputs hold {len(present)} commits; the diff compares {short(present[-1])} "
                     f"against {short(present[-2])}")
    now = runs
    if len(runs.commits()) > 1 and present:
        now = runs.of_commit(present[-1])
        notes.append(f"sections 1-4 describe commit {short(present[-1])}")
    asv_commits = diff.asv_sides(asv_dirs, commit) if asv_dirs else None
    return Sides(now, before, tuple(asv_dirs), asv_commits, tuple(notes))


def asv_summary(dirs: Sequence[Path]) -> pd.DataFrame:
    """The newest commit's asv values (current benchmark versions only)."""
    values = [v for d in dirs for v in load_results(d) if v.current]
    if not values:
        return pd.DataFrame()
    newest = diff.asv_commit_order(dirs)[-1]
    return pd.DataFrame([{"machine": v.machine, "commit": short(v.commit), "benchmark": v.benchmark,
                          "params": ", ".join(f"{k}={p}" for k, p in v.params), "value": v.value,
                          "status": v.status} for v in values if v.commit == newest])


def inputs_section(inputs: Inputs, sides: Sides, options: Options) -> Section:
    frame = sides.now.frame
    notes = list(sides.notes)
    for run, commits in inputs.runs.spanning_runs().items():
        notes.append(f"run {run} was made across {len(commits)} commits ({', '.join(map(short, commits))}): "
                     "its records count as the commit of its first record")
    tables = []
    if frame.empty:
        notes.append("no msbench records in the inputs: sections 1-4 are empty")
    else:
        counts = frame.pivot_table(index=["workload", "preset", "target"], columns="status", values="cell_id",
                                   aggfunc="count", fill_value=0).reset_index()
        counts.columns.name = None
        tables.append(Table("Cells per status", counts))
        bad = frame[frame["status"] != "ok"]
        if not bad.empty:
            notes.append(f"{len(bad)} of {len(frame)} cells are not ok (listed below); they are left out of "
                         "effects, trade-offs, best settings and claims")
            bad = bad.assign(reason=bad["reason"].map(brief))
            tables.append(Table("Cells that are not ok", bad[["workload", "target", "label", "status", "reason", "cell_id"]],
                                links=("cell_id",)))
        for column, what in (("accuracy", "accuracy (run the matrix with accuracy = true): accuracy deltas, "
                                          "the tolerance filter and accuracy checks of the claims are missing"),
                             ("peak_memory_bytes", "peak memory: trade-offs and memory checks are missing"),
                             ("throughput", "throughput: speed-ups are missing")):
            if not has_values(frame, column):
                notes.append(f"no record has {what}")
        if not any(c.startswith("component.") and frame[c].notna().any() for c in frame.columns):
            notes.append("no record has a time breakdown (the device model fills it): 'component that moved' is empty")
        if len(frame) == 1:
            notes.append("a single cell: there is nothing to compare it with")
        conditions, why = conditions_table(sides.now.records)
        if not conditions.empty:
            tables.append(Table("Machine conditions of the measured cells", conditions, links=("cell_id",)))
        if why:
            notes.append(f"measured cells ran under very different machine conditions ({why}): their speed-ups "
                         "mix the knob's effect with the machine's load; re-measure with `msbench run --wait-quiet`")
    if sides.asv_dirs:
        tables.append(Table("asv results of the newest commit", asv_summary(sides.asv_dirs)))
    intro = (f"Read {len(inputs.sources)} file(s): {', '.join(inputs.sources) or 'none'}. "
             f"Accuracy tolerance {options.tolerance_pp:g} pp; memory cap "
             f"{'%g GiB' % options.memory_cap_gib if options.memory_cap_gib is not None else 'the device capacity'}.")
    return Section("0. Inputs and what is missing", intro, tuple(notes), tuple(tables), anchor="inputs")


def conditions_table(records: Sequence[Record]) -> tuple[pd.DataFrame, str | None]:
    """One row per measured record with its machine conditions (msbench.conditions), and why the set
    is too mixed to compare within (None when comparable)."""
    rows, labelled = [], []
    for r in records:
        cond = of_record(r)
        if not cond:
            continue
        labelled.append((f"{r.cell.workload} {r.cell.label}", cond))
        rows.append({"workload": r.cell.workload, "label": r.cell.label, "target": r.cell.target,
                     "load_before": (cond.get("load_before") or [None])[0], "others_cpu": cond.get("others_during"),
                     "steal": cond.get("steal_during"), "cores": cond.get("cores"),
                     "overloaded": overloaded(cond) or "", "cell_id": r.cell_id})
    return pd.DataFrame(rows), mixed(labelled)


def drawn(options: Options, caption: str, draw: Callable[[], bytes | None]) -> list[Figure]:
    """The figure, when plots are wanted and there is something to draw."""
    png = draw() if options.plots else None
    return [Figure(caption, png)] if png else []


def effects_section(frame: pd.DataFrame, options: Options) -> Section:
    table, notes = effects.knob_effects(frame) if not frame.empty else (pd.DataFrame(), ["no records"])
    figures = drawn(options, "Speed-up of each knob change against the baseline cell",
                    lambda: plots.speedup_heatmap(table) if not table.empty else None)
    figures += drawn(options, "Time per step by component (ms), per cell", lambda: plots.breakdown_bars(frame))
    intro = ("Each cell against the baseline cell (label 'base') of the same workload, preset and target: "
             "speed-up = throughput / baseline throughput; memory change = peak / baseline peak − 1; "
             "the component that moved is the breakdown entry whose time per step changed most.")
    return Section("1. Knob effects", intro, tuple(notes),
                   (Table("Knob effects against the baseline", table, links=("cell_id",)),), tuple(figures), "effects")


def tradeoffs_section(frame: pd.DataFrame, options: Options) -> Section:
    table, notes = tradeoffs.tradeoffs(frame, options.tolerance_pp) if not frame.empty else (pd.DataFrame(), ["no records"])
    figures = drawn(options, "Throughput against peak memory; Pareto front joined; × = over the accuracy tolerance",
                    lambda: plots.tradeoff_scatter(table) if not table.empty else None)
    intro = (f"Pareto-optimal: no other cell of the context within {options.tolerance_pp:g} pp of accuracy loss "
             "has at least its throughput with at most its peak memory.")
    return Section("2. Trade-offs", intro, tuple(notes), (Table("Throughput and peak memory", table, links=("cell_id",)),),
                   tuple(figures), "tradeoffs")


def best_section(frame: pd.DataFrame, options: Options) -> Section:
    table, notes = (best.best_settings(frame, options.memory_cap_gib, options.tolerance_pp)
                    if not frame.empty else (pd.DataFrame(), ["no records"]))
    cap = f"{options.memory_cap_gib:g} GiB" if options.memory_cap_gib is not None else "the device capacity (cells that OOM are excluded)"
    intro = f"Highest throughput per workload and target with peak memory ≤ {cap} and accuracy loss ≤ {options.tolerance_pp:g} pp."
    return Section("3. Best settings", intro, tuple(notes), (Table("Best settings", table, links=("cell_id",)),),
                   anchor="best")


def claims_section(now: RecordSet, options: Options) -> Section:
    frame = training_frame(now.frame)
    results = claims.evaluate_claims(frame) if not frame.empty else []
    robust = uncertainty.robustness(now) if results else {}
    table = claims.claims_table(results, {k: r.text for k, r in robust.items()})
    notes = []
    targets = sorted({r.target for r in results})
    if len(targets) < 2:
        notes.append(f"claims are judged on {len(targets)} target(s); run matrices/claims.toml for two chips")
    mixed = sum(e.mixed_commits for r in results for e in r.evidence)
    if mixed:
        notes.append(f"{mixed} comparison(s) pair cells made at different commits (a run resumed while the code "
                     "changed): their numbers mix code changes with the tip's effect; rerun the matrix in one go")
    missing = [f"{r.claim.key} on {r.target}" for r in results if r.verdict == claims.NO_DATA]
    if missing:
        notes.append("no cells for: " + ", ".join(missing) + " (the 'numbers' column says which cells each needs)")
    widths = accuracy_widths.widths_table(frame, claims.CLAIMS) if not frame.empty else pd.DataFrame()
    if not widths.empty:
        notes.append(accuracy_widths.PROXY_NOTE)
    figures = drawn(options, "Verdict per claim and target", lambda: plots.claims_grid(table))
    intro = ("Evidence = ok cells of the same workload, preset and target that differ only in the knobs a tip names. "
             "A comparison holds when every check holds, does not hold when every measured check fails, else partly; "
             "a required check that could not be measured caps it at partly. A chip's verdict combines its comparisons "
             "the same way (holds only if all hold). Robustness: the device model's cells are predicted again with "
             "each `estimate` constant they read at each end of its range; a verdict that changes is uncertain.")
    return Section("4. Claims", intro, tuple(notes),
                   (Table("Claims", table, links=("cells",)), Table("Thresholds", claims.thresholds_table()),
                    Table("Estimate range ends that change a verdict", uncertainty.flips_table(robust)),
                    Table("Evidence", claims.evidence_table(results), links=("cells",)),
                    *([Table("Accuracy deltas the claims read: 95% seed-paired interval half-width per workload (pp)",
                             widths[accuracy_widths.WIDTH_COLUMNS])] if not widths.empty else [])),
                   tuple(figures), "claims")


def diff_section(sides: Sides, options: Options) -> Section:
    rows, notes = [], []
    env = pd.DataFrame()
    if sides.before is not None:
        rows += diff.run_rows(sides.before, sides.now, options.threshold, options.tolerance_pp)
        env = diff.environment_diff(sides.before.records, sides.now.records)
        both = diff.common_cells(sides.before, sides.now)
        only_before, only_now = len(sides.before.records) - len(both), len(sides.now.records) - len(both)
        notes.append(f"{len(both)} cells ran on both sides" + (f"; {only_before} only before" if only_before else "")
                     + (f"; {only_now} only now" if only_now else "") if both else
                     "the two sides share no cell (same workload, preset, settings and target): nothing to compare")
        if env.empty:
            notes.append("no environment difference in the records' provenance")
    if sides.asv_commits:
        rows += diff.asv_rows(sides.asv_dirs, *sides.asv_commits, options.threshold, options.tolerance_pp)
        notes.append(f"asv: {short(sides.asv_commits[1])} against {short(sides.asv_commits[0])}")
    if sides.before is None and not sides.asv_commits:
        notes.append("results of one commit only: give two commits' results (or --baseline COMMIT|RUN) for a diff")
    ids = {cell_key(r.cell): r.cell_id for r in [*sides.now.records, *(sides.before.records if sides.before else ())]}
    table = diff.diff_frame(sorted(rows, key=lambda r: FLAG_ORDER[r.flag]), ids)
    if not table.empty:
        counts = table["flag"].replace("", "within threshold").value_counts()
        notes.append(", ".join(f"{n} {flag}" for flag, n in counts.items()) +
                     f" (threshold {options.threshold:.0%}, accuracy {options.tolerance_pp:g} pp)")
    figures = drawn(options, "Largest changes", lambda: plots.diff_bars(table))
    intro = ("Direction-aware (msbench.tracked): throughput and accuracy higher is better, seconds per sample "
             "and peak memory lower is better; 'lost' = measured before, not ok now. Regressions first.")
    return Section("5. Commit diff", intro, tuple(notes),
                   (Table("Changes", table, links=("cell_id",)), Table("Environment difference", env)),
                   tuple(figures), "diff")


def cells_section(frame: pd.DataFrame) -> Section:
    if frame.empty:
        return Section("Appendix: cells", notes=("no cells",), anchor="cells")
    shown = frame.assign(peak_gib=frame["peak_memory_bytes"] / GIB, reason=frame["reason"].map(brief))
    columns = [c for c in CELL_COLUMNS if c in shown.columns]
    return Section("Appendix: cells", "Every cell the sections link to, by id.",
                   tables=(Table("Cells", shown[columns]),), anchor="cells")


def perop_section(records: Sequence[Record]) -> Section:
    types, notes = perop.by_op_type(records)
    classes = perop.by_op_class(records)
    if types.empty:
        notes.append("no profiled real cell: run `msbench measure WORKLOAD --profile`, or a matrix with profile = true "
                     "on mindspore:cpu and model:cpu for the comparison")
    intro = ("Measured: MindSpore's Profiler over a few steps after the timed ones (its overhead is not in the step "
             "times). Predicted: the device model's kernel times of the same cell on the paired profile "
             "(mindspore:cpu ↔ model:cpu), without dispatch. Error = predicted / measured − 1 of the op time per step.")
    return Section("7. Per-op profile", intro, tuple(notes),
                   (Table("Longest kernels (measured)", perop.top_kernels(records), links=("cell_id",)),
                    Table("Per op type: measured share and the model's error", types, links=("cell_id", "model_cell_id")),
                    Table("Per op class", classes, links=("cell_id", "model_cell_id"))), anchor="perop")


def latency_section(records: Sequence[Record], options: Options) -> Section:
    table = latency.latency_table(records)
    notes = [] if not table.empty else ["no inference cells: run matrices/inference.toml"]
    figures = drawn(options, "p50 latency against batch size per chip", lambda: latency.latency_plot(table))
    intro = ("scenario = inference: one call of the exported forward network (real target: MindIR through "
             "mindspore.load + nn.GraphCell; device model: the forward kernels only). Percentiles over the measured "
             "calls; a prediction has one value (p50). These cells are left out of sections 1-4.")
    return Section("6. Inference latency", intro, tuple(notes),
                   (Table("Latency per batch size", table, links=("cell_id",)),), tuple(figures), "latency")


def training_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows sections 1-4 compare: training cells (an inference cell's 'step' is one forward call)."""
    return frame[frame["scenario"] != "inference"] if "scenario" in frame.columns else frame


def build_report(inputs: Inputs, options: Options) -> list[Section]:
    sides = choose_sides(inputs, options.baselines)
    frame = sides.now.frame
    train = training_frame(frame)
    return [inputs_section(inputs, sides, options), effects_section(train, options), tradeoffs_section(train, options),
            best_section(train, options), claims_section(sides.now, options), diff_section(sides, options),
            latency_section(sides.now.records, options), perop_section(sides.now.records), cells_section(frame)]
