"""Independent check of msbench's LLM predictions against published MindFormers throughput (issue 45).

Each case in cases.toml is a published tokens/s/p figure of a MindFormers training run on Ascend 910B and
the config it names (re-written in configs/). This predicts every case with the public CLI,
`msbench predict --config FILE --hardware CHIP --json`, exactly as a user would, and prints published vs
predicted throughput, the signed and absolute error, the memory verdict against the source (a published
run trained, so it fit in the card's memory), and the median |error| overall and per model family.
A case msbench refuses is listed with its refusal line: that is a finding, not a skipped case.

Usage: python tools/independent_check/run.py [--cases FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One published figure and the config that produced it."""
    name: str
    family: str
    source: str
    cards: int
    published: float
    config: Path
    chip: str
    note: str
    in_median: bool


@dataclass(frozen=True)
class Outcome:
    """msbench's answer for one case: a prediction, or the refusal line."""
    case: Case
    predicted: float | None = None
    peak_gib: float | None = None
    capacity_gib: float | None = None
    oom: bool | None = None
    devices: int | None = None
    parameters: int | None = None
    refusal: str | None = None

    @property
    def error(self) -> float | None:
        """Signed relative error of the prediction against the published figure."""
        return None if self.predicted is None else self.predicted / self.case.published - 1.0


def load_cases(path: Path) -> list[Case]:
    """The cases of a cases file; configs are relative to the file."""
    data = tomllib.loads(path.read_text())
    return [Case(name=c["name"], family=c["family"], source=c["source"], cards=int(c["cards"]),
                 published=float(c["published_tokens_per_s_per_card"]), config=path.parent / c["config"],
                 chip=c.get("chip", data["chip"]), note=c.get("note", ""),
                 in_median=not c.get("exclude_from_median", False)) for c in data["cases"]]


def predict(case: Case) -> Outcome:
    """Run the public CLI on the case's config; a non-zero exit is a refusal (its last stderr line)."""
    cmd = [str(Path(sys.executable).with_name("msbench")), "predict", "--config", str(case.config), "--hardware", case.chip,
           "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return Outcome(case, refusal=lines[-1] if lines else f"exit {done.returncode}")
    data = json.loads(done.stdout)
    return Outcome(case, predicted=float(data["detail"]["tokens_per_s_per_device"]),
                   peak_gib=data["peak_memory_bytes"] / 2**30, capacity_gib=data["memory_capacity_bytes"] / 2**30,
                   oom=bool(data["oom"]), devices=int(data["settings"].get("devices", 1)),
                   parameters=data["config"]["parameters"])


def memory_verdict(out: Outcome) -> str:
    """The prediction's memory verdict against the source's (the published run trained: it fit)."""
    if out.oom is None:
        return "-"
    word = "OOM (source ran: wrong)" if out.oom else "fits (agrees)"
    return f"{out.peak_gib:.1f}/{out.capacity_gib:.0f} GiB {word}"


def table(outcomes: list[Outcome]) -> list[str]:
    """The markdown table, the refusals and the medians."""
    rows = ["| case | family | params (msbench) | cards | published tok/s/p | predicted tok/s/p | error | abs error | memory |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for o in outcomes:
        c = o.case
        mark = "" if c.in_median else " (†)"
        if o.predicted is None:
            rows.append(f"| {c.name}{mark} | {c.family} | - | {c.cards} | {c.published:.0f} | refused | - | - | - |")
            continue
        cards = f"{c.cards}" if o.devices == c.cards else f"{c.cards} (msbench: {o.devices})"
        rows.append(f"| {c.name}{mark} | {c.family} | {o.parameters / 1e9:.2f} B | {cards} | {c.published:.0f} | {o.predicted:.0f} | "
                    f"{o.error:+.1%} | {abs(o.error):.1%} | {memory_verdict(o)} |")
    lines = rows + [""]
    for o in outcomes:
        if o.refusal:
            lines.append(f"- refused: {o.case.name}: {o.refusal}")
        if o.case.note:
            lines.append(f"- note: {o.case.name}{'' if o.case.in_median else ' (†)'}: {o.case.note}")
    counted = [o for o in outcomes if o.error is not None and o.case.in_median]
    lines.append("")
    if counted:
        lines.append(f"median |error| over {len(counted)} predicted cases († left out): "
                     f"{statistics.median(abs(o.error) for o in counted):.1%}; "
                     f"median signed error {statistics.median(o.error for o in counted):+.1%}")
        for family in sorted({o.case.family for o in counted}):
            errs = [abs(o.error) for o in counted if o.case.family == family]
            lines.append(f"  {family}: median |error| {statistics.median(errs):.1%} over {len(errs)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=HERE / "cases.toml", help="cases file (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes as JSON to this file")
    args = parser.parse_args(argv)
    outcomes = [predict(case) for case in load_cases(args.cases)]
    print("\n".join(table(outcomes)))
    if args.json is not None:
        args.json.write_text(json.dumps([{"name": o.case.name, "published": o.case.published,
                                          "predicted": o.predicted, "error": o.error, "oom": o.oom,
                                          "peak_gib": o.peak_gib, "refusal": o.refusal} for o in outcomes],
                                         indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
