"""`python -m hardware.calibration.cube_fp32`: a chip's fp32 Cube rate from public fp32-vs-fp16 GEMM timings.

Why: the A2 profile once put the fp32 Cube rate at half the fp16 datasheet peak, a guess. The public torch.mm
timings already used for its MatMul table (data/public_gemm_tflops.csv, one run on a 910B2) print fp32 too:
aclnnMatmul at fp32 (torch_npu's default, no HF32 for MatMul; CANN's default likewise converts only Conv-class
ops to HF32) runs at about a quarter of its fp16 speed on the same shapes. So the profile's `cube.tflops_fp32`
is the fp16 datasheet peak times the measured fp32/fp16 ratio at the shape where fp16 runs fastest (both
dtypes then compute-bound); its estimate range runs from that value less 25% (MindSpore's kernel slower
than aclnnMatmul, the convention of the MatMul table's own range) to the highest ratio over the compute-bound
shapes (n >= 2048: below it both dtypes are bound by fixed costs and the ratio says nothing about the Cube).
It prints the same on every machine (no timing is taken here) and reads no end-to-end figure.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hardware.calibration.gemm_bench import GEMM_DATA, read_entries
from hardware.model.profile import load_profile

COMPUTE_BOUND_N = 2048     # the smallest measured size at which fp16 reaches most of its peak (251 of 354 TFLOPS)
KERNEL_SLOWER = 0.75       # low end: MindSpore's fp32 kernel 25% slower than aclnnMatmul (as the MatMul table's range)


@dataclass(frozen=True)
class SizeRatio:
    """One measured square size: fp32 and fp16 TFLOPS of the same torch.mm."""

    n: int
    fp32: float
    fp16: float

    @property
    def ratio(self) -> float:
        return self.fp32 / self.fp16


@dataclass(frozen=True)
class Fp32Rate:
    """The derived `cube.tflops_fp32` and its estimate range, TFLOPS, rounded to one decimal."""

    value: float
    low: float
    high: float
    sizes: tuple[SizeRatio, ...]


def size_ratios(profile_name: str, path: Path = GEMM_DATA) -> tuple[SizeRatio, ...]:
    """The sizes measured at both fp32 and fp16 on this profile's chip (none for a chip nobody measured)."""
    by_dtype: dict[str, dict[int, float]] = {"fp32": {}, "fp16": {}}
    for r in read_entries(path):
        if r["profile"] == profile_name and r["dtype"] in by_dtype and r["m"] == r["n"] == r["k"]:
            by_dtype[r["dtype"]][int(r["n"])] = float(r["tflops"])
    both = sorted(set(by_dtype["fp32"]) & set(by_dtype["fp16"]))
    return tuple(SizeRatio(n, by_dtype["fp32"][n], by_dtype["fp16"][n]) for n in both)


def fp32_rate(profile_name: str, path: Path = GEMM_DATA) -> Fp32Rate | None:
    """The fp32 Cube rate the measurements give this profile (module docstring), or None without fp32 data."""
    sizes = size_ratios(profile_name, path)
    bound = [s for s in sizes if s.n >= COMPUTE_BOUND_N]
    if not bound:
        return None
    peak = load_profile(profile_name).cube.tflops_fp16
    fastest = max(bound, key=lambda s: s.fp16)
    value = peak * fastest.ratio
    return Fp32Rate(value=round(value, 1), low=round(value * KERNEL_SLOWER, 1),
                    high=round(peak * max(s.ratio for s in bound), 1), sizes=sizes)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hardware.calibration.cube_fp32", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="ascend910b")
    args = ap.parse_args(argv)
    rate = fp32_rate(args.profile)
    if rate is None:
        print(f"{args.profile}: no public fp32 and fp16 GEMM timings at n >= {COMPUTE_BOUND_N} in {GEMM_DATA.name}")
        return 1
    print(f"{'n':>6} {'fp32 TFLOPS':>12} {'fp16 TFLOPS':>12} {'fp32/fp16':>10}")
    for s in rate.sizes:
        print(f"{s.n:>6} {s.fp32:>12.2f} {s.fp16:>12.2f} {s.ratio:>10.3f}")
    current = load_profile(args.profile).cube.tflops_fp32
    print(f"\n{args.profile}: cube.tflops_fp32 = {rate.value:g} (estimate range [{rate.low:g}, {rate.high:g}]); "
          f"the profile has {current:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
