"""`python -m hardware.validation --profile ascend910a|ascend910b [--locked]`: one part of the published runs.

`msbench validate --profile X` reports the development part. The locked part is asked for here, explicitly,
once a model change is done: its figures are the ones that have not steered the change
(hardware/validation/cases.py, `split_of`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hardware.validation.cases import load_catalogue
from hardware.validation.report import evaluate, render


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hardware.validation", description=__doc__.splitlines()[0])
    p.add_argument("--profile", required=True)
    p.add_argument("--locked", action="store_true", help="report the locked part (held out of model work)")
    p.add_argument("--out", default="results/validation")
    p.add_argument("--json", action="store_true")
    p.add_argument("--skip", action="append", metavar="CASE", help="published case not to predict here (repeatable)")
    args = p.parse_args(argv)
    part = "locked" if args.locked else "dev"
    data = evaluate(load_catalogue(), args.profile, skip=args.skip or (), part=part)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"validation-report-{args.profile}-{part}.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    print(json.dumps(data, sort_keys=True) if args.json else render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
