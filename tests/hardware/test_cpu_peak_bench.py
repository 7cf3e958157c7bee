"""The wall-clock GEMM bench builds and runs its graphs on MindSpore's CPU backend."""

from __future__ import annotations

import math

import pytest

from hardware.calibration import cpu_peak_bench


def test_input_gradient_counts_the_useful_macs_of_a_stride_2_one_by_one_convolution():
    case = cpu_peak_bench.conv_input_grad(batch=2, c_out=8, c_in=4, size=6)
    assert case.lhs == (2, 8, 3, 3) and case.rhs == (8, 4, 1, 1) and case.input_shape == (2, 4, 6, 6)
    assert case.flops == 2 * math.prod(case.lhs) * math.prod(case.rhs[1:])   # as hardware.model.ir counts it


@pytest.mark.slow
def test_a_tiny_matmul_and_input_gradient_time_to_a_finite_per_call_figure():
    for case in (cpu_peak_bench.matmul(32, 16, 8), cpu_peak_bench.conv_input_grad(2, 8, 4, 6)):
        assert math.isfinite(cpu_peak_bench.seconds_per_call(case, rounds=1))
