"""`msbench calibrate ascend`'s path: profiler files in, the shipped derive code's tables out.

The An et al. runs (hardware/calibration/data/an2022_ascend910_ops.csv) written as MindSpore Profiler
kernel_details.csv folders, one launched kernel per row, and read back through the profiler path, give the
same table rows and byte-identical 910A tables as today's converter and derive."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import pytest

from hardware.calibration.derive import FIT, an_fitted
from hardware.calibration.profiler_join import join
from hardware.calibration.profiler_kernels import Kernel, read_profiler, write_kernel_details
from hardware.calibration.table import DATA, load_rows
from hardware.calibration.user_profile import ProfiledRun, derive_profile
from hardware.model.opgraph import Op, TensorSpec
from hardware.model.profile import PROFILE_DIR, HardwareProfile
from msbench.errors import UserError

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def an2022_kernels() -> dict[tuple[str, int], list[Kernel]]:
    """Each table row expanded back into its `count` launched kernels, per (network, batch), in table order."""
    with open(DATA, newline="") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    runs: dict[tuple[str, int], list[Kernel]] = {}
    for r in rows:
        mine = runs.setdefault((r["network"], int(r["batch"])), [])
        mine += [Kernel(name=f"{r['op_type']}-op{len(mine) + i}", op_type=r["op_type"], core="AI_CORE",
                        block_dim=int(r["block_dim"]), inputs=r["inputs"], outputs=r["outputs"],
                        duration_us=float(r["duration_us"]), step="") for i in range(int(r["count"]))]
    return runs


def test_an2022_runs_through_kernel_details_give_the_shipped_910a_tables(tmp_path):
    runs = []
    for (network, batch), kernels in an2022_kernels().items():
        folder = tmp_path / f"{network}_{batch}"
        write_kernel_details(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", kernels)
        runs.append(ProfiledRun(network, batch, "", read_profiler(folder), 1, None))
    assert [r for run in runs for r in run.rows] == load_rows()
    held_out = [run.label for run in runs if run.label not in FIT]
    derived = derive_profile(runs, "ascend910a", "an2022-roundtrip", held_out, leave_one_out=False)
    profile = HardwareProfile.from_mapping(tomllib.loads(derived.text), "roundtrip")
    assert profile.name == "an2022-roundtrip" and profile.kernel_classes == an_fitted().kernel_classes
    assert any(line.startswith("held-out rows") for line in derived.lines)


OP_SUMMARY = ("Device_id,Model Name,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),"
              "Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats\n")


def test_op_summary_layout_keeps_ai_core_kernels_and_counts_the_rest(tmp_path):
    (tmp_path / "op_summary_0_1.csv").write_text(OP_SUMMARY + (
        '0,m,MatMul-op1,MatMul,AI_CORE,1,12.5,0.1,32,"64,768;768,768",FLOAT16;FLOAT16,ND;ND,"64,768",FLOAT16,ND\n'
        '0,m,Cast-op2,Cast,AI_VECTOR_CORE,2,3.0,0.1,8,"",FLOAT,ND,"",FLOAT16,ND\n'
        '0,m,GetNext-op3,GetNext,AI_CPU,3,40.0,0.1,1,N/A,N/A,N/A,N/A,N/A,N/A\n'))
    got = read_profiler(tmp_path)
    assert got.layout == "op_summary" and got.skipped == {"AI_CPU": 1}
    assert [(k.op_type, k.block_dim, k.inputs, k.outputs) for k in got.kernels] == [
        ("MatMul", 32, "fp16:ND:64x768;fp16:ND:768x768", "fp16:ND:64x768"), ("Cast", 8, "fp32:ND:1", "fp16:ND:1")]


def test_kernel_details_steps_come_from_its_step_id_column(tmp_path):
    k = Kernel("Abs-op1", "Abs", "AI_VECTOR_CORE", 8, "fp16:ND:4x16", "fp16:ND:4x16", 2.5, "10")
    write_kernel_details(tmp_path / "kernel_details.csv", [k, Kernel(**{**k.__dict__, "step": "9"})])
    got = read_profiler(tmp_path / "kernel_details.csv")
    assert got.layout == "kernel_details" and got.steps == ("9", "10") and got.kernels[0] == k


def test_a_bad_profiler_file_is_one_line_naming_the_column(tmp_path):
    (tmp_path / "op_summary_0_1.csv").write_text(OP_SUMMARY.replace("Task Duration(us)", "Duration") + "0\n")
    with pytest.raises(UserError, match="no column 'Task Duration\\(us\\)'"):
        read_profiler(tmp_path)
    (tmp_path / "op_summary_0_1.csv").write_text(OP_SUMMARY + '0,m,A-op1,Abs,AI_CORE,1,2.0,0,1,"4",INT4,ND,"4",INT4,ND\n')
    with pytest.raises(UserError, match="line 2: input data type 'INT4'; allowed: FLOAT"):
        read_profiler(tmp_path)


def op(kind: str, ins, outs, flops: int, unit: str = "cube") -> Op:
    return Op(type=kind, scope=f"Default/{kind}", inputs=tuple(ins), outputs=tuple(outs), flops=flops,
              bytes=0, unit=unit, phase="forward")


def test_join_counts_per_type_and_takes_an_nd_convs_gemm_from_the_graph():
    x, w, y = TensorSpec("Float16", (8, 64, 56, 56)), TensorSpec("Float16", (64, 64, 3, 3)), TensorSpec("Float16", (8, 64, 56, 56))
    lowered = [op("Conv2D", (x, w), (y,), 2 * 8 * 56 * 56 * 64 * 64 * 9), op("ReLU", (y,), (y,), y.elements, "vector")]
    conv = Kernel("Conv2D-op1", "Conv2D", "AI_CORE", 32, "fp16:NCHW:8x64x56x56;fp16:NCHW:64x64x3x3",
                  "fp16:NCHW:8x64x56x56", 100.0, "1")
    relu = Kernel("ReLU-op2", "Relu", "AI_VECTOR_CORE", 8, "fp16:NCHW:8x64x56x56", "fp16:NCHW:8x64x56x56", 5.0, "1")
    j = join([conv, relu, conv], 2, lowered)
    by_type = {c.op_type: (c.profiled, c.lowered) for c in j.counts}
    assert by_type == {"Conv2D": (1.0, 1), "ReLU": (0.0, 1), "Relu": (0.5, 0)}
    assert j.gemms == {("Conv2D", 32, conv.inputs, conv.outputs): (1, 8 * 56 * 56, 64, 64 * 9)}


@pytest.mark.parametrize(("argv", "message"), [
    (["calibrate", "ascend", "resnet50", "--config", "CONFIGS/mindcv_resnet50.yaml", "--profiler", "x", "--name",
      "mine"], "workload 'resnet50' with --config"),
])
def test_calibrate_ascend_refuses_a_workload_beside_a_config(argv, message, capsys):
    from msbench.cli import main

    assert main([a.replace("CONFIGS", str(CONFIGS)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_config_names_the_cell_predict_config_predicts_with_the_runs_knobs_over_it():
    import argparse

    from msbench.commands.calibrate_ascend import profiled_cell
    from msbench.commands.config_cell import config_cell

    config = str(CONFIGS / "mindcv_resnet50.yaml")
    args = argparse.Namespace(config=config, workloads=[], preset=[], set=["jit_level=O2"], override=[],
                              chip="ascend910a")
    cell = profiled_cell(args, ["batch_size=16"])
    expected, _ = config_cell(argparse.Namespace(workload=None, preset=None, start=None, config=config,
                                                 set=["jit_level=O2", "batch_size=16"], override=[], scenario="train"),
                              "model:ascend910a")
    assert cell == expected and cell.workload.startswith("mindcv:") and cell.settings.batch_size == 16


@pytest.mark.parametrize(("argv", "message"), [
    (["calibrate", "ascend", "--profiler", "x", "--name", "mine"], "exactly one workload"),
    (["calibrate", "ascend", "resnet50", "--name", "mine"], "--profiler is missing"),
    (["calibrate", "ascend", "resnet50", "--profiler", "x", "--name", "My Chip"], "--name 'My Chip'"),
    (["calibrate", "ascend", "resnet50", "--profiler", "x", "--name", "mine", "--chip", "cpu"], "an NPU profile"),
    (["calibrate", "ascend", "resnet50", "--profiler", "/nonexistent", "--name", "mine", "--out", "OUT"],
     "--profiler /nonexistent: no such folder"),
    (["calibrate", "ascend", "resnet50", "--profiler", "x", "--name", "ascend910b", "--out", "OUT"],
     "ascend910b.toml exists and was not written by msbench calibrate ascend"),
])
def test_calibrate_ascend_refuses_bad_input_in_one_line(argv, message, tmp_path, capsys):
    from msbench.cli import main

    assert main([a.replace("OUT", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_profile_written_with_out_is_found_through_msbench_profiles(tmp_path, monkeypatch):
    from hardware.model.profile import PROFILES_ENV, profile_names, profile_path

    text = (PROFILE_DIR / "ascend910a.toml").read_text().replace('name = "ascend910a"', 'name = "mine"', 1)
    (tmp_path / "mine.toml").write_text(text)
    assert profile_path("mine") is None
    monkeypatch.setenv(PROFILES_ENV, str(tmp_path))
    assert profile_path("mine") == tmp_path / "mine.toml" and "mine" in profile_names()
    assert HardwareProfile.from_toml(profile_path("mine")).name == "mine"


@pytest.mark.slow
def test_calibrate_ascend_joins_resnet50_runs_to_the_lowered_graph_and_leaves_each_out(tmp_path, capsys, monkeypatch):
    """The An et al. ResNet-50 runs (bs16/32/64) through the command: the fused conv and BN kernels match the
    lowering's counts per step, each run is predicted by tables fitted on the other two, and the written profile
    predicts through MSBENCH_PROFILES."""
    from hardware.model.profile import PROFILES_ENV
    from msbench.cli import main

    specs = []
    for (network, batch), kernels in an2022_kernels().items():
        if network == "resnet50":
            write_kernel_details(tmp_path / f"bs{batch}" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", kernels)
            specs += ["--profiler", f"{tmp_path / f'bs{batch}'}::batch_size={batch}"]
    knobs = [a for k in ("mode=graph", "jit_level=O2", "amp_level=O2", "loss_scale=static") for a in ("--set", k)]
    assert main(["calibrate", "ascend", "resnet50", "--chip", "ascend910a", *knobs, *specs, "--name", "an2022-resnet50",
                 "--out", str(tmp_path / "profiles")]) == 0
    out = capsys.readouterr().out
    for kind in ("FusionOp_Conv2D_BNTrainingReduce", "FusionOp_BNTrainingUpdate_ReLUV2", "FusedMulApplyMomentum"):
        assert any(line.split()[:1] == [kind] and line.split()[1] == line.split()[2] for line in out.splitlines()), kind
    loro = out.split("leave one run out")[1]
    assert all(f"resnet50 bs{b}      all" in loro for b in (16, 32, 64))
    assert "kernel_classes.batch_matmul" in (tmp_path / "profiles" / "an2022-resnet50.toml").read_text()
    monkeypatch.setenv(PROFILES_ENV, str(tmp_path / "profiles"))
    assert main(["predict", "resnet50", "--hardware", "an2022-resnet50", "--set", "batch_size=32"]) == 0
    assert "on an2022-resnet50:" in capsys.readouterr().out


def model_kernel_rows(ops, chip, step: str = "1") -> list[Kernel]:
    """The composed step's kernels as a profiler would list them (ND tensors, each kernel the model's time)."""
    from hardware.model.compute import group_ops, kernels
    from hardware.model.lowering import kernel_type

    dtypes = {"Float16": "fp16", "BFloat16": "bf16", "Float32": "fp32", "Int32": "int32", "Int64": "int64",
              "Bool": "bool", "UInt8": "uint8"}

    def text(specs) -> str:
        return ";".join(f"{dtypes.get(s.dtype, 'fp32')}:ND:{'x'.join(map(str, s.shape)) or '1'}" for s in specs)

    rows = []
    for i, (group, k) in enumerate(zip(group_ops(ops), kernels(ops, chip))):
        rows.append(Kernel(name=f"k{i}", op_type=kernel_type(group), core="AI_CORE", block_dim=32,
                           inputs=text(group[0].inputs), outputs=text(group[-1].outputs),
                           duration_us=k.time_s * 1e6, step=step))
    return rows


@pytest.mark.slow
def test_an_llm_card_is_joined_to_its_blocks_and_ends_composed_kernel_by_kernel(tmp_path, capsys, monkeypatch):
    """Issue 45's LLM join, round trip: a tiny Llama's card (data parallel, 2 micro-batches of accumulation, flash
    attention) as its composed step predicts it, written as a profiler's kernel_details.csv, joins back with every
    kernel type's count matching, and fits a profile that predicts; a pipelined card is refused in one line."""
    from hardware.model.profile import load_profile
    from msbench.cell import Cell
    from msbench.cli import main
    from msbench.commands.calibrate_ascend import step_ops
    from msbench.settings import make_settings, parse_assignments

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path / "cache"))
    knobs = ["mode=graph", "jit_level=O1", "amp_level=O2", "flash_attention=true", "grad_accum=2", "batch_size=4"]
    chip = load_profile("ascend910b")
    cell = Cell(workload="llama2-7b", preset="tiny", settings=make_settings(parse_assignments(knobs)),
                target="model:ascend910b")
    ops = step_ops(cell, chip)
    assert sum(op.type == "FlashAttentionScore" for op in ops) == 2 * 2          # 2 layers x 2 micro-batches
    from hardware.calibration.profiler_kernels import write_kernel_details

    write_kernel_details(tmp_path / "run" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", model_kernel_rows(ops, chip))
    sets = [a for k in knobs for a in ("--set", k)]
    assert main(["calibrate", "ascend", "llama2-7b", "--preset", "tiny", *sets, "--profiler", str(tmp_path / "run"),
                 "--name", "tiny-llama", "--out", str(tmp_path / "profiles")]) == 0
    out = capsys.readouterr().out
    assert "100% are of a type whose count the lowering matches" in out and "  differs" not in out
    assert (tmp_path / "profiles" / "tiny-llama.toml").exists()
    assert main(["calibrate", "ascend", "llama2-7b", "--preset", "tiny", *sets, "--set", "pipeline_stages=2",
                 "--set", "devices=2", "--set", "parallel_mode=semi_auto", "--set", "micro_batches=2",
                 "--profiler", str(tmp_path / "run"), "--name", "tiny-llama2", "--out", str(tmp_path / "profiles")]) == 2
    err = capsys.readouterr().err
    assert "allowed: pipeline_stages=1 for an LLM" in err and err.count("\n") == 1
