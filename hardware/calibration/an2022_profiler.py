"""Write the An et al. Ascend 910 runs as MindSpore Profiler output folders (`msbench calibrate ascend`'s input).

    python -m hardware.calibration.an2022_profiler GIT_DIR OUT_DIR [--commit SHA]

GIT_DIR is a clone of github.com/Huawei-Performance-Model/Ascend-910B, as for hardware.calibration.convert.
Each run convert reads becomes OUT_DIR/<network>_<batch>/ASCEND_PROFILER_OUTPUT/kernel_details.csv: one row per
launched AI Core kernel (its op_info tensors as Input/Output Shapes, Data Types and Formats, its AI-Core time
as Duration(us) at full precision), in the run file's order. `msbench calibrate ascend` over these folders
reads the same kernels convert reads: the round trip that shows the profiler path derives the shipped
tables (tests/hardware/test_profiler_calibration.py makes it from the checked-in table instead).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hardware.calibration.convert import RUNS, git_show, run_kernels
from hardware.calibration.profiler_kernels import write_kernel_details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--commit", default="6066283e4ee22d0b5f5cb3c58cd1099f2ba8192a")
    args = parser.parse_args(argv)
    for (network, batch), run in RUNS.items():
        base, name = f"application_test/{run}", run.rsplit("/", 1)[-1]
        kernels = run_kernels(git_show(args.git_dir, args.commit, f"{base}/{name}.csv"),
                              git_show(args.git_dir, args.commit, f"{base}/aicore_intermediate_0_detail.csv"))
        path = Path(args.out_dir) / f"{network}_{batch}" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        write_kernel_details(path, kernels)
        print(f"{path}: {len(kernels)} kernels")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
