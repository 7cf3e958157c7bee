"""Wall-clock GEMM rates of MindSpore's CPU kernels, against a cpu profile's Cube peak.

The check behind a cpu profile's `cube.tflops_fp32`: a kernel that runs faster than the peak the profile
states would prove the peak wrong. The per-op table cannot settle it (some of its GEMM rows beat the AVX2
peak, but the Profiler's CPU MatMul times are short of the wall clock), so this times whole graphs:
REPEATS calls of one kernel in one graph, minus the same graph without the kernel, per call. Each call
gets its own operand (`b + i`), or graph mode's common-subexpression elimination merges the calls into
one. FLOPs are the useful ones, as hardware.model.ir counts them (a stride-2 input gradient does a
quarter of the dense convolution's MACs).

    OMP_NUM_THREADS=2 ONEDNN_MAX_CPU_ISA=AVX2 python -m hardware.calibration.cpu_peak_bench --profile cpu-icelake
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from hardware.model.profile import load_profile

REPEATS = 16


@dataclass(frozen=True)
class Case:
    """One kernel shape: a MatMul m x k by k x n, or a stride-2 1x1 Conv2DBackpropInput (dy, w, x shapes)."""

    name: str
    flops: int
    lhs: tuple[int, ...]
    rhs: tuple[int, ...]
    input_shape: tuple[int, ...] = ()      # the input-gradient's output (x) shape; () for a MatMul


def matmul(m: int, k: int, n: int) -> Case:
    return Case(f"MatMul {m}x{k}x{n}", 2 * m * k * n, (m, k), (k, n))


def conv_input_grad(batch: int, c_out: int, c_in: int, size: int) -> Case:
    """dy batch x c_out x size/2 x size/2, a 1x1 weight, stride 2: one useful MAC per dy pixel and weight."""
    half = size // 2
    return Case(f"Conv2DBackpropInput dy {batch}x{c_out}x{half}x{half} w {c_out}x{c_in}x1x1 stride 2",
                2 * batch * c_out * c_in * half * half, (batch, c_out, half, half), (c_out, c_in, 1, 1),
                (batch, c_in, size, size))


CASES = (conv_input_grad(32, 192, 96, 16), matmul(2048, 64, 256), matmul(4096, 128, 512), matmul(1024, 1024, 1024))


def seconds_per_call(case: Case, rounds: int = 9) -> float:
    """Best-of-`rounds` wall time of one call: the graph with REPEATS calls minus the graph without."""
    import mindspore as ms
    import numpy as np
    from mindspore import nn, ops

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    grad = ops.Conv2DBackpropInput(case.rhs[1], 1, stride=2) if case.input_shape else None

    def kernel(a, b):
        return grad(a, b, case.input_shape) if grad is not None else ops.matmul(a, b)

    class Repeated(nn.Cell):
        """REPEATS kernel calls, each reduced to one scalar; without the kernel, only that scaffolding."""

        def __init__(self, with_kernel: bool):
            super().__init__()
            self.with_kernel = with_kernel

        def construct(self, a, b):
            total = 0
            for i in range(REPEATS):
                total = total + (kernel(a, b + i) if self.with_kernel else b + i).reshape(-1)[0]
            return total

    rng = np.random.default_rng(0)
    a, b = (ms.Tensor(rng.random(s, dtype=np.float32)) for s in (case.lhs, case.rhs))

    def best(cell: nn.Cell) -> float:
        cell(a, b).asnumpy()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            cell(a, b).asnumpy()
            times.append(time.perf_counter() - start)
        return min(times)

    return (best(Repeated(True)) - best(Repeated(False))) / REPEATS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="wall-clock CPU GEMM rates against a cpu profile's Cube peak")
    parser.add_argument("--profile", default="cpu-icelake")
    args = parser.parse_args(argv)
    peak = load_profile(args.profile).cube.tflops_fp32 * 1e3
    for case in CASES:
        seconds = seconds_per_call(case)
        rate = case.flops / seconds / 1e9
        print(f"{case.name}: {seconds * 1e6:,.0f} us per call, {rate:,.0f} GFLOP/s = {rate / peak:.2f} of "
              f"{args.profile}'s {peak:,.0f} GFLOP/s peak")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
