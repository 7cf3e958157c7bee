"""The CPU's per-op table: Profiler timestamps joined to the extracted graph, and what derive makes of it."""

from __future__ import annotations

import dataclasses

import pytest

from hardware.calibration import cpu_ops, derive, kernel_fit, table
from hardware.calibration.cpu_ops import Instance
from hardware.model.compute import gemm_shape, make_kernel
from hardware.calibration.fit import SCALARS, parameter_paths
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.profile import OpCost, load_profile


def op(kind: str, scope: str, out: tuple[int, ...], unit: str = "vector", flops: int = 0) -> Op:
    spec = TensorSpec("Float32", out)
    return Op(type=kind, scope=scope, inputs=(spec,), outputs=(spec,), flops=flops, bytes=2 * spec.nbytes,
              unit=unit, phase="forward")


def test_timestamps_give_each_instance_its_first_start_and_mean_duration(tmp_path):
    path = tmp_path / "cpu_op_execute_timestamp_0.txt"
    path.write_text("Default/net/conv-Conv2d/Conv2D-op3;HostCpuOps;100,2.0,0 900,4.0,0 \n"
                    "Default/optimizer/ApplyMomentum-op12;HostCpuOps;50,0.01,0 \n")
    conv, momentum = cpu_ops.read_timestamps(path)
    assert (conv.scope, conv.op_type, conv.start_ns, conv.duration_us) == ("Default/net/conv-Conv2d", "Conv2D", 100, 3000.0)
    assert (momentum.scope, momentum.op_type, momentum.duration_us) == ("Default/optimizer", "ApplyMomentum", 10.0)


def test_the_median_over_processes_ignores_one_slowed_process():
    a = [Instance("s/Add-op0", 5, 10.0)]
    b = [Instance("s/Add-op0", 7, 11.0)]
    c = [Instance("s/Add-op0", 9, 90.0)]          # a neighbour's burst
    (only,) = cpu_ops.median_instances([a, b, c])
    assert (only.start_ns, only.duration_us) == (5, 11.0)


def test_join_pairs_scope_and_type_in_execution_order_and_leaves_mismatched_groups_out():
    small, large = op("ApplyMomentum", "Default/optimizer", (4,)), op("ApplyMomentum", "Default/optimizer", (4096,))
    relu = op("ReLU", "Default/net/relu-ReLU", (8,))
    extra = op("Cast", "Default/net", (8,))
    measured = [Instance("Default/optimizer/ApplyMomentum-op1", 20, 9.0),     # ran second
                Instance("Default/optimizer/ApplyMomentum-op0", 10, 1.0),     # ran first
                Instance("Default/net/relu-ReLU/ReLU-op0", 5, 2.0),
                Instance("Default/net/Cast-op0", 1, 1.0), Instance("Default/net/Cast-op1", 2, 1.0)]
    pairs, left_graph, left_measured = cpu_ops.join([small, large, relu, extra], measured)
    assert [(o, i.duration_us) for o, i in pairs] == [(relu, 2.0), (small, 1.0), (large, 9.0)]
    assert (left_graph, left_measured) == (1, 2)           # one Cast in the graph, two profiled: left out


def test_rows_merge_identical_kernels_and_carry_the_models_gemm():
    conv = dataclasses.replace(op("Conv2D", "s/conv", (8, 16, 4, 4), unit="cube", flops=2 * 8 * 16 * 16 * 16 * 9),
                               inputs=(TensorSpec("Float32", (8, 16, 4, 4)), TensorSpec("Float32", (16, 16, 3, 3))))
    rows = cpu_ops.rows_of("resnet50 base", 8, [(conv, Instance("s/conv/Conv2D-op0", 1, 30.0)),
                                                (conv, Instance("s/conv/Conv2D-op1", 2, 50.0)),
                                                (op("ReLU", "s", (8,)), Instance("s/ReLU-op0", 3, 2.0))])
    by_type = {r["op_type"]: r for r in rows}
    assert by_type["Conv2D"]["count"] == "2" and float(by_type["Conv2D"]["duration_us"]) == 40.0
    assert by_type["Conv2D"]["gemm"] == "x".join(map(str, gemm_shape(conv))) and by_type["ReLU"]["gemm"] == ""
    assert by_type["Conv2D"]["inputs"] == "fp32:ND:8x16x4x4;fp32:ND:16x16x3x3"


def test_the_committed_table_has_fit_and_held_out_rows_whose_gemms_are_read_back():
    rows = table.load_rows(table.ops_table("cpu-icelake"))
    fit = [r for r in rows if derive.cpu_fit_row(r)]
    held = [r for r in rows if not derive.cpu_fit_row(r)]
    assert fit and held and {r.network.split()[0].split("@")[0] for r in fit} == {"resnet50", "bert-base"}
    assert any(r.network.startswith("yolov8n@") for r in held)              # a family the fit never sees
    cube = [r for r in rows if r.gemm_dims is not None]
    assert cube and all(r.gemm == r.gemm_dims and r.flops == 2 * r.gemm_dims[0] * r.gemm_dims[1]
                        * r.gemm_dims[2] * r.gemm_dims[3] for r in cube)
    assert {r.kernel_class for r in cube} >= {"conv_forward", "conv_input_grad", "conv_filter_grad", "matmul"}


def test_a_profile_with_measured_kernel_tables_fits_only_its_dispatch_costs():
    measured, fitted = load_profile("cpu-icelake"), load_profile("cpu-xeon")
    assert measured.kernel_classes is not None and parameter_paths(measured) == list(SCALARS)
    assert fitted.kernel_classes is None and "cube.efficiency" in parameter_paths(fitted)


@pytest.mark.parametrize("name", derive.CPU_PROFILES)
def test_cpu_tables_never_exceed_the_peak_and_grow_with_the_work(name):
    classes = load_profile(name).kernel_classes
    assert classes is not None and all(classes.unaligned(k) == 1.0 for k in ("elementwise", "reduction", "data_movement"))
    for kind in ("conv_forward", "conv_input_grad", "conv_filter_grad", "matmul", "elementwise", "memory"):
        values = [e for _, e in sorted(classes.table(kind).rows)]
        assert all(0 < e <= 1 for e in values) and values == sorted(values), kind


def conv_op(batch: int, channels: int) -> Op:
    x, w = TensorSpec("Float32", (batch, channels, 8, 8)), TensorSpec("Float32", (channels, channels, 3, 3))
    return Op(type="Conv2D", scope="s/conv", inputs=(x, w), outputs=(x,), unit="cube", phase="forward",
              flops=2 * batch * 64 * channels * channels * 9, bytes=2 * x.nbytes + w.nbytes)


def rows_for(ops_and_times: list[tuple[Op, float]], tmp_path) -> list[table.Row]:
    """Rows as derive reads them: through cpu_ops' conversion and the CSV it writes."""
    pairs = [(o, Instance(f"s/conv/Conv2D-op{i}", i, us)) for i, (o, us) in enumerate(ops_and_times)]
    cpu_ops.write(cpu_ops.rows_of("net base", 8, pairs), tmp_path / "ops.csv", ["test"])
    return table.load_rows(tmp_path / "ops.csv")


def test_an_op_line_is_fitted_from_its_shapes_and_costs_the_same_op_in_the_model(tmp_path):
    profile = load_profile("cpu-icelake")
    ops = [conv_op(b, c) for b, c in ((2, 8), (4, 16), (8, 16), (8, 32), (16, 32))]
    true = OpCost(op_type="Conv2D", dtype="fp32", fixed_us=20.0, us_per_mb=50.0, us_per_gflop=9000.0, rows=5)
    rows = [dataclasses.replace(r, duration_us=kernel_fit.line_seconds(true, r) * 1e6)
            for r in rows_for([(o, 1.0) for o in ops], tmp_path)]
    (line,) = kernel_fit.fit_op_costs(rows, profile)
    assert (line.fixed_us, line.us_per_mb, line.us_per_gflop, line.rows) == pytest.approx((20.0, 50.0, 9000.0, 5), rel=1e-2)
    classes = dataclasses.replace(profile.kernel_classes, op_costs=(true,))
    model = dataclasses.replace(profile, kernel_classes=classes)
    for o, r in zip(ops, sorted(rows, key=lambda r: r.nbytes)):      # the model reads the op as the fit read its row
        kernel = make_kernel([o], model)
        assert not kernel.overlapped and kernel.time_s == pytest.approx(kernel_fit.line_seconds(true, r), rel=1e-9)
    fp16 = dataclasses.replace(ops[0], inputs=tuple(dataclasses.replace(t, dtype="Float16") for t in ops[0].inputs))
    assert make_kernel([fp16], model).overlapped                        # no fp16 line: the class tables cost it


def test_op_lines_need_three_shapes_and_never_move_bytes_faster_than_the_cache(tmp_path):
    profile = load_profile("cpu-icelake")
    few = rows_for([(conv_op(2, 8), 30.0), (conv_op(4, 16), 60.0)], tmp_path)
    assert kernel_fit.fit_op_costs(few, profile) == ()
    flat = rows_for([(conv_op(b, 8), 10.0) for b in (1, 2, 4, 8)], tmp_path)     # time independent of size
    (line,) = kernel_fit.fit_op_costs(flat, profile)
    assert line.us_per_mb >= kernel_fit.sig(kernel_fit.min_us_per_mb(profile)) > 0


@pytest.mark.parametrize("name", derive.CPU_PROFILES)
def test_the_committed_cpu_lines_are_physical(name):
    profile = load_profile(name)
    lines = profile.kernel_classes.op_costs
    assert lines and {"Conv2D", "MatMul", "ReLU", "BatchNorm"} <= {c.op_type for c in lines}
    peak_us_per_gflop = 1e6 / (profile.cube.tflops_fp32 * 1e3)
    for c in lines:
        assert c.rows >= kernel_fit.MIN_LINE_SHAPES and c.us_per_mb >= kernel_fit.sig(kernel_fit.min_us_per_mb(profile))
        if c.op_type in ("Conv2D", "Conv2DBackpropFilter", "MatMul"):   # no GEMM beats the Cube peak
            assert c.us_per_gflop >= peak_us_per_gflop, c


def test_a_unary_ops_proportional_bytes_and_flops_get_one_slope_not_an_arbitrary_split(tmp_path):
    profile = load_profile("cpu-icelake")
    relus = [op("ReLU", "s/conv", (n, 64)) for n in (8, 64, 512, 4096)]
    rows = rows_for([(o, 3.0 + 1e-3 * n) for o, n in zip(relus, (8, 64, 512, 4096))], tmp_path)
    assert kernel_fit.line_terms(sorted({(r.nbytes, r.flops) for r in rows})) == [0, 1]
    (line,) = kernel_fit.fit_op_costs(rows, profile)
    assert line.us_per_gflop == 0 and line.us_per_mb > 0
    assert kernel_fit.line_terms([(10, 1), (20, 5), (30, 2)]) == [0, 1, 2]
    assert kernel_fit.line_terms([(10, 1), (10, 5), (10, 9)]) == [0, 2]
