"""`model:ascend910b` on a decoder-only LLM: the real per-shard block and ends composed into one step."""

from __future__ import annotations

import pytest

from hardware.model.outcome import predict_cell
from msbench.cell import Cell
from msbench.errors import ConfigError
from msbench.settings import make_settings

BASE = {"mode": "graph", "sink": True, "optimizer": "adamw", "batch_size": 2, "devices": 4,
        "parallel_mode": "semi_auto"}


def predict(**knobs):
    return predict_cell(Cell(workload="llama2-7b", settings=make_settings({**BASE, **knobs})), "ascend910b")


@pytest.mark.slow
def test_tensor_parallel_block_is_one_ranks_shard():
    one, two = predict(tensor_parallel=1), predict(tensor_parallel=2)
    d, ff = 64, 172                                           # the tiny preset's d_model and ff_dim
    norms = 2 * d
    shard = one.graph.param_count - norms
    assert two.graph.param_count == shard // 2 + norms        # Q/K/V/O and the SwiGLU split, the norms whole
    for result in (one, two):
        p = result.prediction
        assert sum(p.breakdown.values()) == pytest.approx(p.step_time_s)
        assert p.detail["composition"].startswith("llm")
    assert one.prediction.breakdown["tp_comm"] == 0 < two.prediction.breakdown["tp_comm"]
    assert two.prediction.memory["params"] < one.prediction.memory["params"]
    assert one.graph.param_count == 4 * d * d + 3 * d * ff + norms


@pytest.mark.slow
def test_pipeline_and_optimizer_shard_change_the_step():
    plain = predict(tensor_parallel=2)
    pipelined = predict(tensor_parallel=2, pipeline_stages=2, micro_batches=2)
    sharded = predict(tensor_parallel=2, optimizer_shard=True)
    assert pipelined.prediction.breakdown["pp_bubble"] > 0 and pipelined.prediction.detail["bubble_fraction"] == pytest.approx(1 / 3, rel=1e-5)
    assert sharded.prediction.memory["optimizer_states"] * 2 == pytest.approx(plain.prediction.memory["optimizer_states"], abs=2)


@pytest.mark.slow
def test_a_trace_of_a_composed_llm_step_is_refused_with_the_reason(tmp_path, capsys):
    """A composed step keeps per-block costs, not a kernel schedule: one line and exit 2, never a traceback."""
    from msbench.cli import main

    out = tmp_path / "llama.json"
    code = main(["predict", "llama2-7b", "--preset", "tiny", "--hardware", "ascend910b", *sum(
        (["--set", f"{k}={v}"] for k, v in {**BASE, "sink": "true"}.items()), []), "--trace", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "--trace" in err and "composed from per-block costs" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.slow
def test_prepare_compiles_every_part_the_cells_read_so_they_start_no_compile(tmp_path, monkeypatch, forbid_compiles):
    """`ModelTarget.prepare` (the runner calls it before a matrix's cells) plans and compiles the parts of all
    its LLM cells at once; the cells then compose from the cache alone. A cell whose layout is refused
    (8 does not divide the 4 heads) is left to report that itself."""
    from hardware.model.target import ModelTarget
    from msbench.cell import Cell

    monkeypatch.setenv("MSBENCH_CACHE", str(tmp_path))
    cells = [Cell(workload="llama2-7b", settings=make_settings({**BASE, "sink": True, "devices": 8, "tensor_parallel": tp}))
             for tp in (1, 2, 8)]
    target, said = ModelTarget("ascend910b"), []
    target.prepare(cells, said.append)
    assert said[0] == "compiling the 4 graphs that 2 cells read, first"    # a block per rank, the ends twice
    assert said[-1] == "compiled 4 of 4 graphs"                         # a line as each chunk of compiles ends
    lines = len(said)
    forbid_compiles()
    target.prepare(cells, said.append)
    assert len(said) == lines                                                # nothing left to compile
    assert [target.run(cell).status for cell in cells[:2]] == ["ok", "ok"]
    with pytest.raises(ConfigError, match="tensor_parallel=8"):
        target.run(cells[2])
