"""`msbench validate --profile NAME --measured FILE`: the device model against the user's own runs.

Each run (hardware/validation/measured_file.py) is a case like a published one, so it is predicted,
compared and tabled by the same code (hardware/validation/report.py): per run the prediction, the
measured figure and the step-time error, then the median |error| over the runs predicted. A run the
model refuses, or cannot predict, is a row with the reason; only a bad file stops the command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from hardware.model.outcome import ModelRefusal
from hardware.validation import report
from hardware.validation.cases import PublishedCase
from hardware.validation.measured_file import SPLIT, LogRun, read_measured
from msbench.errors import ConfigError

LOG_OPTIONS = ("workload", "preset", "set", "override")     # what describes a TimeMonitor log's run


def measured_predictor(case: PublishedCase) -> report.PredictionLike:
    """The published cases' predictor; a setting only the workload refuses (a ConfigError raised while the
    cell resolves) is the model declining that run, so it becomes a refusal row, not the command's error."""
    try:
        return report.model_predictor(case)
    except ConfigError as err:
        raise ModelRefusal(str(err)) from None


def evaluate_measured(cases: Sequence[PublishedCase], profile: str,
                      predictor: report.Predictor | None = None) -> dict[str, Any]:
    """Every run predicted, in file order, tabled like the published cases."""
    rows = [report.predict_case(case, predictor or measured_predictor) for case in cases]
    return report.table_data(profile, SPLIT, rows, reference="measured")


def wants_measured(args: argparse.Namespace) -> bool:
    """`--measured`, or an option that only describes a measured run (refused below if FILE is missing)."""
    return bool(args.measured) or any(getattr(args, name) for name in LOG_OPTIONS)


def log_run(args: argparse.Namespace) -> LogRun | None:
    """The run a TimeMonitor log stands for, from the command line (None when no such option is given)."""
    if not any(getattr(args, name) for name in LOG_OPTIONS):
        return None
    if not args.workload:
        raise ConfigError("--workload", None, "the workload of the logged run, with --set and --override")
    return LogRun(args.workload, args.preset or "full", tuple(args.set), tuple(args.override))


def measured_command(args: argparse.Namespace) -> int:
    """Read FILE, predict its runs on --profile (or each run's own), print the table (or --json), save the JSON."""
    for name in ("skip", "locked", "resume"):
        if getattr(args, name):
            raise ConfigError(f"--{name}", getattr(args, name), "not with --measured (it validates the file's runs)")
    if not args.measured:
        raise ConfigError("--measured", None, "the file of runs that --workload/--preset/--set/--override describe")
    path = Path(args.measured)
    data = evaluate_measured(read_measured(path, args.profile, log_run(args)), args.profile)
    data["measured"] = str(path)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"validation-report-{args.profile}-measured-{path.stem}.json").write_text(
        json.dumps(data, indent=2, sort_keys=True))
    print(json.dumps(data, sort_keys=True) if args.json else report.render(data))
    return 0
