"""Public GEMM micro-benchmarks (data/public_gemm_tflops.csv) as per-op rows derive can fit.

For the A2 generation there is no per-op training profile, but there are public torch.mm
timings on an Ascend 910B2 (aclnnMatmul, the CANN MatMul that MindSpore runs too). Each
measured shape becomes one `Row` (a MatMul of m x k by k x n, its time from the TFLOPS printed),
so the chip's MatMul table is fitted by the same code, on the same index, as the 910A's.
"""

from __future__ import annotations

import csv
from pathlib import Path

from hardware.calibration.table import Row, Tensor
from msbench.resources import suite_path

GEMM_DATA = suite_path("hardware/calibration/data/public_gemm_tflops.csv")
TABLE_DTYPES = ("fp16", "bf16")    # the dtypes the Cube's efficiency tables are fitted on (fp32 sets a rate instead)


def read_entries(path: Path = GEMM_DATA) -> list[dict[str, str]]:
    """The file's rows as dicts (its comment lines left out)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def measured_rows(profile_name: str, path: Path = GEMM_DATA, dtypes: tuple[str, ...] = TABLE_DTYPES) -> list[Row]:
    """The measured GEMMs of one profile's chip in `dtypes` (none for a chip nobody measured)."""
    rows = []
    for r in read_entries(path):
        if r["profile"] != profile_name or r["dtype"] not in dtypes:
            continue
        m, n, k, dtype = int(r["m"]), int(r["n"]), int(r["k"]), r["dtype"]
        seconds = 2 * m * n * k / (float(r["tflops"]) * 1e12)
        rows.append(Row(network=r["source"], batch=n, op_type="MatMul", count=1, duration_us=seconds * 1e6,
                        inputs=(Tensor(dtype, "ND", (m, k)), Tensor(dtype, "ND", (k, n))),
                        outputs=(Tensor(dtype, "ND", (m, n)),)))
    return rows
