"""`msbench compare A B`: a direction-aware comparison of two commits' results.

asv's own `compare` reads every metric as lower-is-better and always exits 0; here each tracked
metric keeps its direction (msbench.tracked), changes over a threshold are flagged, and any
regression makes the exit code 1. Results come from asv's results directories or from msbench run
records (their provenance names the commit). Run records pair by cell id (workload, preset, settings
and target): two cells that share a display label stay two rows. asv results have no cell id; they
pair by asv's parameters (workload, variant, target), which a matrix makes unique.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from msbench.asv_results import is_results_dir, load_results
from msbench.conditions import mismatch, of_record
from msbench.errors import UserError
from msbench.gitrepo import rev_parse
from msbench.store import load_records
from msbench.tracked import ACCURACY_TOLERANCE_PP, TRACKED, TrackedMetric, cell_key, tracked_values

CellKey = tuple[str, str, str]          # (workload, variant, target)
BAD_FLAGS = ("regression", "lost")      # a flag that fails the comparison
FLAG_ORDER = {"regression": 0, "lost": 1, "conditions differ": 2, "improvement": 3, "new": 4, "removed": 5, "": 6}


@dataclass(frozen=True)
class Observation:
    """One metric of one cell at one commit, from one source (`asv <machine> <env>` or `runs`)."""

    source: str
    commit: str
    cell: CellKey
    metric: str
    value: float | None
    status: str
    cell_id: str = ""           # run records: the cell's id, the pairing key; asv: none
    conditions: dict[str, Any] | None = field(default=None, compare=False)   # measured runs (msbench.conditions)

    @property
    def key(self) -> str | CellKey:
        return self.cell_id or self.cell


@dataclass(frozen=True)
class Row:
    source: str
    workload: str
    variant: str
    target: str
    metric: str
    unit: str
    before: float | None
    after: float | None
    change: float | None        # relative (0.05 = +5 %) or, for pp metrics, the difference in pp
    direction: str              # better | worse | same | "" (not comparable)
    flag: str                   # regression | improvement | conditions differ | lost | new | removed | ""
    cell_id: str = ""           # the cell compared (run records); labels are for display only
    note: str = ""              # why the flag is "conditions differ"


@dataclass(frozen=True)
class Results:
    """Everything found under --results: observations of the wanted commits and every commit seen."""

    observations: list[Observation]
    commits: set[str]


# ---- loading -------------------------------------------------------------------------------------

def find_sources(root: Path) -> tuple[list[Path], list[Path]]:
    """asv results directories (holding benchmarks.json) and msbench run files (*.jsonl) under root."""
    if root.is_file():
        return [], [root]
    if not root.is_dir():
        raise UserError(f"--results={str(root)!r}: no such file or directory")
    asv_dirs = [root] if is_results_dir(root) else sorted({p.parent for p in root.rglob("benchmarks.json")})
    runs = [f for f in sorted(root.rglob("*.jsonl")) if not any(d in f.parents for d in asv_dirs)]
    return asv_dirs, runs


def asv_observations(results_dir: Path) -> Iterable[Observation]:
    for v in load_results(results_dir):
        metric = v.benchmark.rsplit(".", 1)[-1].removeprefix("track_")
        params = v.param_dict
        if metric not in TRACKED or not v.current or not {"workload", "variant", "target"} <= set(params):
            continue
        cell = (str(params["workload"]), str(params["variant"]), str(params["target"]))
        yield Observation(f"asv {v.machine} {v.env}", v.commit, cell, metric, v.value, v.status)


def run_observations(files: list[Path]) -> Iterable[Observation]:
    records = sorted(load_records(files), key=lambda r: r.started_at)   # later runs of a cell win
    for rec in records:
        commit = rec.provenance.get("commit")
        if not commit or rec.provenance.get("dirty"):
            continue                          # a dirty tree's numbers belong to no commit
        for metric, value in tracked_values(rec.metrics).items():
            yield Observation("runs", commit, cell_key(rec.cell), metric,
                              value if rec.status == "ok" else None, rec.status, rec.cell_id, of_record(rec))


def load_observations(root: Path) -> Results:
    asv_dirs, runs = find_sources(root)
    observations: list[Observation] = list(run_observations(runs)) if runs else []
    for d in asv_dirs:
        observations.extend(asv_observations(d))
    return Results(observations, {o.commit for o in observations})


HEX = re.compile(r"[0-9a-fA-F]{4,40}")


def resolve_commit(ref: str, known: set[str], root: Path) -> str:
    """A hash prefix of a commit with results, or any git revision (HEAD~1, main) that has results."""
    if HEX.fullmatch(ref):
        matches = sorted(c for c in known if c.startswith(ref.lower()))
        if len(matches) > 1:
            raise UserError(f"commit {ref!r} is ambiguous: {', '.join(m[:12] for m in matches)}")
        if matches:
            return matches[0]
    full = rev_parse(Path.cwd(), ref)
    listing = ", ".join(sorted(c[:8] for c in known)) or "none"
    if full in known:
        return full
    what = f"{ref!r} ({full[:8]})" if full else repr(ref)
    raise UserError(f"commit {what} has no results under {root}; commits with results: {listing}")


# ---- comparing -----------------------------------------------------------------------------------

def compare_values(metric: TrackedMetric, before: float, after: float, threshold: float,
                   tolerance_pp: float) -> tuple[float | None, str, bool]:
    """(change, better|worse|same, over the threshold?) by the metric's own direction."""
    if metric.absolute:
        change: float | None = after - before
        over = abs(change) > tolerance_pp
    elif before == 0:
        change, over = None, after != 0
    else:
        change = (after - before) / abs(before)
        over = abs(change) > threshold
    if after == before:
        return change, "same", False
    return change, "better" if (after > before) == metric.higher_is_better else "worse", over


def compare(observations: list[Observation], before: str, after: str, threshold: float = 0.05,
            tolerance_pp: float = ACCURACY_TOLERANCE_PP) -> list[Row]:
    """One row per (source, cell, metric) seen at either commit, regressions first."""
    table: dict[tuple[str, str | CellKey, str], dict[str, Observation]] = {}
    for o in observations:
        if o.commit in (before, after):
            table.setdefault((o.source, o.key, o.metric), {})[o.commit] = o
    both = {o.source for o in observations if o.commit == before} & {o.source for o in observations if o.commit == after}
    if any(s.startswith("asv ") for s in both):
        both = {s for s in both if s.startswith("asv ")}    # the suite's own records repeat asv's numbers
    rows = []
    for (source, _key, name), pair in table.items():
        if source not in both:
            continue
        seen = pair.get(after) or pair[before]
        row = compare_pair(source, seen.cell, TRACKED[name], pair.get(before), pair.get(after), threshold,
                           tolerance_pp, seen.cell_id)
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (FLAG_ORDER[r.flag], r.source, r.workload, r.variant, r.target, r.cell_id,
                             list(TRACKED).index(r.metric)))
    return rows


def compare_pair(source: str, cell: CellKey, metric: TrackedMetric, b: Observation | None, a: Observation | None,
                 threshold: float, tolerance_pp: float, cell_id: str = "") -> Row | None:
    """A timing change between measurements made under very different machine conditions is flagged
    "conditions differ" (with the reason), never called a regression or an improvement: on this host a
    loaded machine alone makes steps ~2x slower. Accuracy is deterministic numerics, so it keeps its flag."""
    bv, av = (b.value if b else None), (a.value if a else None)
    change, direction, flag, note = None, "", "", ""
    if bv is not None and av is not None:
        change, direction, over = compare_values(metric, bv, av, threshold, tolerance_pp)
        flag = ("improvement" if direction == "better" else "regression") if over else ""
        note = "" if metric.absolute else (mismatch(b.conditions, a.conditions) or "")
        if flag and note:
            flag = "conditions differ"
    elif bv is not None:
        flag = "lost" if a is not None else "removed"      # measured before; failed/skipped or gone now
    elif av is not None:
        flag = "new"
    else:
        return None                                         # skipped or failed at both commits
    return Row(source, *cell, metric.name, metric.unit, bv, av, change, direction, flag, cell_id, note)


# ---- output --------------------------------------------------------------------------------------

def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "bytes":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {name}"
        return f"{value:.0f} B"
    if unit == "seconds":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {name}"
        return f"{value / 1e-9:.4g} ns"
    if unit == "pp":
        return f"{value:+.2f} pp"
    return f"{value:.4g} {unit}"


def format_change(row: Row) -> str:
    if row.change is None:
        return "n/a" if row.before is not None and row.after is not None else ""
    return f"{row.change:+.2f} pp" if TRACKED[row.metric].absolute else f"{row.change:+.1%}"


def summary(rows: list[Row]) -> dict[str, int]:
    counts = {flag or "within threshold": 0 for flag in FLAG_ORDER}
    for r in rows:
        counts[r.flag or "within threshold"] += 1
    return counts


def markdown(rows: list[Row], before: str, after: str, threshold: float, tolerance_pp: float) -> str:
    sources = sorted({r.source for r in rows})
    head = ["workload", "variant", "target", "metric", "before", "after", "change", "better/worse", "flag", "cell"]
    if len(sources) > 1:
        head.insert(0, "source")
    lines = [f"Comparing {before[:8]} -> {after[:8]} ({', '.join(sources) or 'no common source'}); "
             f"flagged: changes over {threshold:.0%} (accuracy: over {tolerance_pp:g} pp)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.workload, r.variant, r.target, r.metric, format_value(r.before, r.unit),
                 format_value(r.after, r.unit), format_change(r), r.direction,
                 f"**{r.flag}**" if r.flag in BAD_FLAGS else (f"{r.flag}: {r.note}" if r.note and r.flag else r.flag),
                 r.cell_id]
        if len(sources) > 1:
            cells.insert(0, r.source)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    counts = summary(rows)
    lines += ["", ", ".join(f"{k}: {n}" for k, n in counts.items() if n) or "nothing to compare"]
    return "\n".join(lines)


def to_json(rows: list[Row], before: str, after: str, threshold: float, tolerance_pp: float) -> str:
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return json.dumps({"before": before, "after": after, "threshold": threshold, "accuracy_tolerance_pp": tolerance_pp,
                       "regressions": sum(r.flag in BAD_FLAGS for r in rows), "summary": summary(rows),
                       "rows": [{k: clean(v) for k, v in asdict(r).items()} for r in rows]}, indent=2)


def compare_command(args: argparse.Namespace) -> int:
    """Exit 0 when nothing regressed, 1 on any regression (bad input: UserError, exit 2 from the CLI)."""
    if not args.threshold > 0:
        raise UserError(f"--threshold={args.threshold} is not allowed; allowed: a fraction > 0, e.g. 0.05 for 5%")
    tolerance = args.accuracy_tolerance
    root = Path(args.results)
    found = load_observations(root)
    before = resolve_commit(args.before, found.commits, root)
    after = resolve_commit(args.after, found.commits, root)
    rows = compare(found.observations, before, after, args.threshold, tolerance)
    if not rows:
        raise UserError(f"{before[:8]} and {after[:8]} have no tracked metric from a common source under {root}")
    print(to_json(rows, before, after, args.threshold, tolerance) if args.json
          else markdown(rows, before, after, args.threshold, tolerance))
    return 1 if any(r.flag in BAD_FLAGS for r in rows) else 0
