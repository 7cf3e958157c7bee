"""The LLM-scale claims against hand-built records with known numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from report_fixtures import record  # noqa: E402

from msbench.report.claims import FAILS, HOLDS, NO_DATA, evaluate_claims  # noqa: E402
from msbench.report.load import RecordSet  # noqa: E402

LLM = {"parallel_mode": "semi_auto", "devices": 8, "optimizer": "adamw", "batch_size": 8}


def llm(workload="llama2-7b", **kw):
    return record(workload=workload, **{**LLM, **kw})


def step_parts(compute, tp=0.0, dp=0.0, bubble=0.0):
    return {"compute": compute, "tp_comm": tp, "pp_send": 0.0, "pp_bubble": bubble, "dp_comm": dp, "optimizer": 0.0}


def verdicts(records):
    return {r.claim.key: r for r in evaluate_claims(RecordSet.of(records).frame)}


@pytest.mark.slow
def test_optimizer_shard_claim_reads_memory_and_communication_share():
    got = verdicts([
        llm(thr=10, peak_gib=50, breakdown=step_parts(5.0, tp=1.0, dp=2.0), tensor_parallel=2),
        llm(thr=10, peak_gib=30, breakdown=step_parts(5.0, tp=0.5, dp=0.5), tensor_parallel=2, optimizer_shard=True),
    ])
    result = got["optimizer_shard"]
    assert result.verdict == HOLDS
    values = result.evidence[0].values
    assert values["memory_ratio"] == 0.6
    assert abs(values["comm_share_after"] - 1.0 / 6.4) < 1e-9         # (0.5 + 0.5) s of 8 x 8 samples / 10 per s


@pytest.mark.slow
def test_selective_against_full_recompute():
    got = verdicts([llm(thr=100, peak_gib=20, breakdown=step_parts(0.08), recompute="full"),
                    llm(thr=104, peak_gib=30, breakdown=step_parts(0.077), recompute="selective")])
    assert got["llm_recompute"].verdict != HOLDS                        # 1.04x: not the claimed saving
    assert abs(got["llm_recompute"].evidence[0].values["speedup"] - 1.04) < 1e-9


@pytest.mark.slow
def test_pipeline_bubble_pairs_differ_only_in_micro_batches():
    got = verdicts([
        llm(thr=10, breakdown=step_parts(0.4, bubble=0.4), pipeline_stages=4, micro_batches=4),
        llm(thr=16, breakdown=step_parts(0.4, bubble=0.1), pipeline_stages=4, micro_batches=8),
        llm(thr=20, breakdown=step_parts(0.4), tensor_parallel=2, micro_batches=1),     # no pipeline: no pair
    ])
    result = got["pipeline_bubble"]
    assert len(result.evidence) == 1 and result.verdict == HOLDS
    assert result.evidence[0].values["speedup"] == 1.6


@pytest.mark.slow
def test_175b_memory_claim_reads_oom_cells_too():
    common = {"devices": 64, "tensor_parallel": 8, "pipeline_stages": 8, "micro_batches": 8}
    plain = llm("gpt3-175b", status="oom", reason="predicted peak 200 GiB", peak_gib=200, **common)
    sharded = llm("gpt3-175b", thr=1, peak_gib=50, optimizer_shard=False, recompute="full", **common)
    got = verdicts([plain, sharded])
    assert got["memory_175b"].verdict == NO_DATA                       # sharding missing: not the claimed pair
    common["devices"] = 128
    plain = llm("gpt3-175b", status="oom", reason="predicted peak 200 GiB", peak_gib=200, **common)
    both = llm("gpt3-175b", thr=1, peak_gib=50, optimizer_shard=True, recompute="full", **common)
    too_big = llm("gpt3-175b", status="oom", reason="x", peak_gib=150, optimizer_shard=True, recompute="selective",
                  **common)
    result = verdicts([plain, both, too_big])["memory_175b"]
    by_cell = {e.cells[1]: e for e in result.evidence}
    assert by_cell[both.cell.id].verdict == HOLDS and by_cell[both.cell.id].values["memory_ratio"] == 0.25
    assert by_cell[too_big.cell.id].verdict == FAILS
