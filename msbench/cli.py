"""The `msbench` command. Each verb's handler is imported only when that verb runs."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Callable, Sequence

from msbench.child import Terminated, raise_on_sigterm
from msbench.console import print_table
from msbench.errors import UserError
from msbench.matrix import MAX_CELLS
from msbench.matrix_file import load_matrix
from msbench.plugins import check_spec, import_object
from msbench.settings import parse_assignments
from msbench.tracked import ACCURACY_TOLERANCE_PP

# verb -> "module:function(args) -> exit code"; lazy so `msbench list knobs` never imports MindSpore.
HANDLERS: dict[str, str] = {
    "list": "msbench.cli:list_command",
    "matrix": "msbench.cli:matrix_command",
    "run": "msbench.runner:run_command",
    "measure": "msbench.commands.measure:measure_command",
    "predict": "msbench.commands.predict:predict_command",
    "validate": "msbench.commands.validate:validate_command",
    "calibrate": "msbench.commands.calibrate:calibrate_command",
    "report": "msbench.report.cli:report_command",
    "compare": "msbench.compare:compare_command",
    "nightly": "msbench.nightly:nightly_command",
}


def add_cell_options(p: argparse.ArgumentParser, preset_help: str = "preset name (default: tiny)",
                     preset_default: str | None = "tiny", workload_optional: bool = False) -> None:
    p.add_argument("workload", help="workload name (msbench list workloads)" + (" (or --config)" if workload_optional
                                                                                else ""),
                   nargs="?" if workload_optional else None)
    p.add_argument("--preset", default=preset_default, help=preset_help)
    p.add_argument("--set", dest="set", action="append", default=[], metavar="KNOB=VALUE",
                   help="set a knob (repeatable; msbench list knobs)")
    p.add_argument("--override", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a preset field, e.g. seq_len=512 (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--allow-plugin", action="append", default=[], metavar="MODULE:CLASS",
                   help="trust this workload class, so that WORKLOAD may be MODULE:CLASS (repeatable)")


def add_matrix_guards(p: argparse.ArgumentParser) -> None:
    """What a matrix file cannot decide for itself: which plugin code may run, and how many cells are sane."""
    p.add_argument("--allow-plugin", action="append", default=[], metavar="MODULE:CLASS",
                   help="trust this target or workload class; a matrix may then name it (repeatable)")
    p.add_argument("--max-cells", type=int, default=MAX_CELLS,
                   help=f"refuse a matrix of more cells than this (default {MAX_CELLS})")


def add_executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=["local", "ray"], default=None,
                   help="where cells run: this machine (local, the default; or $MSBENCH_EXECUTOR) or a Ray cluster")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (with --executor ray; default: start a local Ray instance)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msbench", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("list", help="list workloads, knobs or hardware profiles")
    p.add_argument("what", choices=["workloads", "knobs", "hardware"])
    p.add_argument("--json", action="store_true")
    p.add_argument("--md", action="store_true", help="print a Markdown table (the docs' generated pages)")

    p = sub.add_parser("matrix", help="inspect a matrix file")
    p.add_argument("action", choices=["show"])
    p.add_argument("file")
    p.add_argument("--target", help="override the matrix's targets")
    p.add_argument("--set", dest="set", action="append", default=[], metavar="KNOB=VALUE")
    add_matrix_guards(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("run", help="run a matrix's cells on a target")
    p.add_argument("matrix")
    p.add_argument("--target", help="target (default: the matrix's targets)")
    p.add_argument("--out", default="results/runs", help="directory of run files (default results/runs)")
    p.add_argument("--run-id", help="name of the run file (default: <matrix>-<target>-<time>)")
    p.add_argument("--resume", action="store_true", help="skip cells already recorded in the run")
    p.add_argument("--jobs", type=int, default=None,
                   help="cells run at once (default: what the target allows; 2 on the device model, 1 measuring)")
    p.add_argument("--shard", default="1/1", help="run only shard i of N (1-based), e.g. 2/4")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per isolated cell")
    p.add_argument("--set", dest="set", action="append", default=[], metavar="KNOB=VALUE")
    add_matrix_guards(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_executor_options(p)
    p.add_argument("--trace-dir", help="model targets: also write each cell's predicted step as a Chrome trace here")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each measured process, wait up to SECONDS for the machine to be quiet (0: don't)")

    p = sub.add_parser("measure", help="run one cell for real through MindSpore and print its record")
    add_cell_options(p)
    p.add_argument("--device", default="cpu", choices=["cpu", "ascend", "gpu"])
    p.add_argument("--accuracy", action="store_true", help="also train the tiny preset and evaluate it")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per measured process")
    p.add_argument("--versus", action="append", default=[], metavar="KNOB=VALUE",
                   help="also measure the cell with these knobs changed, interleaved with it (A, B, A, B ...)")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each measured process, wait up to SECONDS for the machine to be quiet")
    p.add_argument("--profile", action="store_true",
                   help="after the measured steps, run MindSpore's Profiler over a few more and add the per-op "
                        "summary to the record (its output under --profile-dir/<cell id>/)")
    p.add_argument("--profile-dir", default="results/profiles", help="root of the Profiler's output (with --profile)")
    p.add_argument("--scenario", default="train", choices=["train", "inference"],
                   help="train: one optimizer step; inference: one call of the exported forward network")

    p = sub.add_parser("predict", help="predict one cell on the device model (a workload, or your own config)",
                       description="Predict one cell: WORKLOAD [--preset] [--set] [--override], or --config FILE, "
                                   "your own MindFormers, mindcv or mindyolo training YAML, whose network, parallel "
                                   "layout, recompute, precision, batch and context become the cell (--set and "
                                   "--override go over it); every field of the file is listed as mapped or not "
                                   "modelled, with why (docs/your-config.md).")
    add_cell_options(p, "preset name (default: full, the published size, on an NPU profile; tiny on cpu)", None,
                     workload_optional=True)
    p.add_argument("--config", metavar="FILE.yaml",
                   help="your training config instead of WORKLOAD: MindFormers (model.model_config, "
                        "parallel_config, recompute_config, runner_config, context ...), mindcv or mindyolo")
    p.add_argument("--hardware", default="ascend910b", help="hardware profile (msbench list hardware)")
    p.add_argument("--trace", metavar="FILE", help="also write the predicted step as a Chrome trace (Perfetto)")
    p.add_argument("--scenario", default="train", choices=["train", "inference"],
                   help="train: one optimizer step; inference: one forward call of the network")
    p.add_argument("--from", dest="start", default=None, choices=["recipe", "mindspore-defaults"],
                   help="the settings --set goes over: the workload's published recipe at its full size "
                        "(workloads/recipes.toml; default) or MindSpore's API defaults (not with --config: "
                        "the config is the start)")

    p = sub.add_parser("calibrate", help="re-measure this host's data pipelines into hardware/calibration/host_cost.json "
                                         "(host) or pipeline_modes.json (pipeline-modes); fit a profile of your Ascend "
                                         "chip from its profiler output (ascend)")
    p.add_argument("what", choices=["host", "pipeline-modes", "ascend"])
    p.add_argument("workloads", nargs="*", help="workloads to measure (host: or --all; pipeline-modes: default set; "
                                                "ascend: the profiled cell's workload)")
    p.add_argument("--profiler", action="append", default=[], metavar="DIR[::KNOB=V,...]",
                   help="ascend: a profiler output of one run (MindSpore's ASCEND_PROFILER_OUTPUT/kernel_details.csv or "
                        "msprof's op_summary_*.csv under DIR); after '::' the run's own knobs over --set (repeatable)")
    p.add_argument("--name", help="ascend: the new profile's name (hardware/profiles/NAME.toml, or --out/NAME.toml)")
    p.add_argument("--chip", default="ascend910b", help="ascend: the profile whose datasheet part the new one keeps")
    p.add_argument("--out", help="ascend: write NAME.toml into this folder (then MSBENCH_PROFILES=DIR finds it)")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                   help="ascend: a knob of the profiled runs, over the workload's recipe (repeatable)")
    p.add_argument("--config", metavar="FILE.yaml",
                   help="ascend: the profiled run's own mindcv or mindyolo config instead of WORKLOAD (as msbench "
                        "predict --config reads it)")
    p.add_argument("--hold-out", action="append", default=[], metavar="DIR",
                   help="ascend: a --profiler folder left out of the fit; its per-op error is printed (repeatable)")
    p.add_argument("--steps", type=int, default=1,
                   help="ascend: steps each profiler output covers where its kernels carry no Step Id (default 1)")
    p.add_argument("--all", action="store_true", help="host: re-measure every entry already in the file")
    p.add_argument("--check", action="store_true",
                   help="host: measure nothing: print the scaling law's error on the file's held-out wall-clock points")
    p.add_argument("--preset", action="append", default=[], help="preset (repeatable; default: tiny and full)")
    p.add_argument("--data-format", action="append", default=[], choices=["generator", "mindrecord"],
                   help="data format (repeatable; default: both)")
    p.add_argument("--override", action="append", default=[], metavar="FIELD=VALUE", help="preset override")
    p.add_argument("--file", help="the calibration file to rewrite (default: the repository's)")
    p.add_argument("--note", default="", help="conditions of this measurement, kept in the file's note")
    p.add_argument("--beside-others", action="store_true",
                   help="do not wait to have the host alone (per-stage CPU times tolerate sharing; the held-out "
                        "wall-clock points do not, and each entry records it)")
    p.add_argument("--runs", type=int, default=1,
                   help="host: measure each entry in this many child processes and keep the median one by its "
                        "bottleneck stage (one process's segments are not independent; the entry lists every run)")

    p = sub.add_parser("validate", help="compare the device model with real CPU runs (cpu) or published Ascend runs")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--out", default="results/validation")
    p.add_argument("--json", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--full", action="store_true",
                   help="cpu profiles: measure all 40 cells of matrices/validation.toml with up to 6 processes each "
                        "(about an hour; default: 12 cells chosen by hardware/validation/cpu_subset.py, 3 processes)")
    p.add_argument("--skip", action="append", metavar="CASE", help="published case not to predict here (repeatable)")
    p.add_argument("--locked", action="store_true",
                   help="published runs: report the locked part, held out of model work (default: the development part)")
    p.add_argument("--measured", metavar="FILE", help="your own runs: a .toml/.csv of runs or a TimeMonitor log")
    p.add_argument("--workload", help="--measured LOG: the logged run's workload (with --preset, --set, --override)")
    p.add_argument("--preset", help="--measured LOG: the logged run's preset (default: full)")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE", help="--measured LOG: a knob of the run")
    p.add_argument("--override", action="append", default=[], metavar="FIELD=VALUE", help="--measured LOG: a preset field")

    p = sub.add_parser("report", help="tables and plots from records (and asv results)")
    p.add_argument("inputs", nargs="+", help="run files or directories")
    p.add_argument("--html", help="write a self-contained HTML report here")
    p.add_argument("--md", help="write a Markdown report here")
    p.add_argument("--baseline", action="append", default=[], help="baseline commit or run for the commit diff")
    p.add_argument("--memory-cap", type=float, help="GiB cap for best settings")
    p.add_argument("--accuracy-tolerance", type=float, default=ACCURACY_TOLERANCE_PP, help="pp of accuracy loss tolerated")

    p = sub.add_parser("compare", help="direction-aware comparison of two commits' results")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--results", default="results", help="where to find results (asv or msbench runs)")
    p.add_argument("--threshold", type=float, default=0.05, help="relative change flagged (default 0.05)")
    p.add_argument("--accuracy-tolerance", type=float, default=ACCURACY_TOLERANCE_PP, help="accuracy change flagged, in pp")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("nightly", help="benchmark every new commit with asv, publish HTML, write the report")
    p.add_argument("--machine", default="msbench-devmodel")
    p.add_argument("--since", help="first commit to benchmark (default: after the last one with results)")
    p.add_argument("--max-commits", type=int, default=0, help="cap on commits (0 = all new)")
    p.add_argument("--python", help="an interpreter that already has MindSpore (asv's existing environment)")
    add_executor_options(p)
    return parser


def list_command(args: argparse.Namespace) -> int:
    if args.md:
        # lazy: the CLI's startup loads only what every verb needs (msbench --help: 198 modules; at the top, 226)
        from msbench.docs_gen import LIST_MARKDOWN

        print(LIST_MARKDOWN[args.what](), end="")
        return 0
    if args.what == "knobs":
        # lazy: the CLI's startup loads only what every verb needs (msbench --help: 198 modules; at the top, 226)
        from hardware.knob_table import knob_table

        rows = knob_table()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            kinds = list(rows[0]["targets"])
            print_table(["name", "type", "default", "allowed", *kinds, "help"],
                        [[r["name"], r["type"], r["default"], r["allowed"], *r["targets"].values(), r["help"]]
                         for r in rows])
        return 0
    fn = {"workloads": "msbench.commands.summary:list_workloads", "hardware": "hardware.model.profile:list_profiles"}
    rows = import_object(fn[args.what])()  # type: ignore[operator]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        cols = list(rows[0]) if rows else []
        print_table(cols, [[r[c] for c in cols] for r in rows])
    return 0


def matrix_command(args: argparse.Namespace) -> int:
    if args.max_cells < 1:
        raise UserError(f"--max-cells={args.max_cells} is not allowed; allowed: an integer >= 1")
    plugins = tuple(check_spec(p) for p in args.allow_plugin)
    matrix = load_matrix(args.file, target=args.target, extra=parse_assignments(args.set), plugins=plugins)
    expansion = matrix.expand(args.max_cells)
    if args.json:
        print(json.dumps(expansion.to_json(), indent=2))
        return 0
    print_table(["id", "workload", "preset", "target", "label", "status"],
                [[c.cell.id, c.cell.workload, c.cell.preset, c.cell.target, c.cell.label, c.status_text]
                 for c in expansion.entries])
    print(expansion.summary_line())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = import_object(HANDLERS[args.verb])  # type: ignore[assignment]
    in_main = threading.current_thread() is threading.main_thread()
    previous = raise_on_sigterm() if in_main else None   # SIGTERM unwinds like Ctrl-C: child scopes clean up
    try:
        return int(handler(args) or 0)
    except UserError as err:
        print(f"msbench {args.verb}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"msbench {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"msbench {args.verb}: terminated", file=sys.stderr)
        return 143
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


def one_line(err: Exception) -> str:
    """The message on one line (a value quoted from a file may hold newlines)."""
    return " ".join(str(err).split("\n"))


if __name__ == "__main__":
    sys.exit(main())
