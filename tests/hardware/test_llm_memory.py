"""The LLM memory model against Korthikanti et al. 2022's closed forms, and the OOM verdict's flips."""

import pytest

from hardware.model.llm.memory import StageParams, layer_activation_bytes, llm_memory
from hardware.model.llm.shape import DecoderShape, Parallel
from hardware.model.profile import load_profile
from msbench.errors import ConfigError

# The paper's block: MHA, a 4h GeLU FFN, dropout. GPT-3 175B sizes (Brown et al. 2020).
GPT3 = DecoderShape(layers=96, hidden=12288, heads=96, kv_heads=96, ffn=4 * 12288, vocab=51200, seq=2048,
                    gated_ffn=False, dropout=True)
LLAMA7B = DecoderShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000, seq=4096)
LAYER = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
TOTAL = 32 * LAYER + 2 * 32000 * 4096 + 4096


def shard(t: int) -> StageParams:
    """Llama 2 7B's parameters on one of t tensor-parallel ranks (norms replicated)."""
    return StageParams(layer=(LAYER - 2 * 4096) // t + 2 * 4096, first=32000 * 4096 // t,
                       last=32000 * 4096 // t + 4096, total=TOTAL)


LLAMA7B_PARAMS = shard(1)


def korthikanti(shape: DecoderShape, b: int, t: int, sp: bool, recompute: str) -> float:
    """Table 2 of Korthikanti et al. 2022, per layer, bytes."""
    s, h, a = shape.seq, shape.hidden, shape.heads
    sbh = s * b * h
    scores = 0 if recompute == "selective" else 5 * a * s / h
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    if sp:
        return sbh * (34 / t + scores / t)
    return sbh * (10 + 24 / t + scores / t)


@pytest.mark.parametrize("t, sp, recompute", [(1, False, "none"), (8, False, "none"), (8, True, "none"),
                                               (8, True, "selective"), (8, False, "selective"),
                                               (8, False, "full"), (8, True, "full")])
def test_layer_activations_match_korthikanti(t, sp, recompute):
    par = Parallel(tp=t, micro_batch=2, sequence_parallel=sp, recompute=recompute)
    assert layer_activation_bytes(GPT3, par) == pytest.approx(korthikanti(GPT3, 2, t, sp, recompute), rel=1e-12)


def test_flash_attention_removes_the_score_tensors():
    plain = layer_activation_bytes(LLAMA7B, Parallel(tp=8))
    flash = layer_activation_bytes(LLAMA7B, Parallel(tp=8, flash_attention=True))
    s, a = LLAMA7B.seq, LLAMA7B.heads
    assert plain - flash == pytest.approx((2 * a * s * s - 64 * a * s) / 8)


def test_grouped_query_attention_keeps_narrower_k_and_v():
    gqa = DecoderShape(**{**LLAMA7B.__dict__, "kv_heads": 8})
    full = layer_activation_bytes(LLAMA7B, Parallel())
    assert full - layer_activation_bytes(gqa, Parallel()) == 2 * 2 * LLAMA7B.seq * (4096 - 8 * 128)


def test_first_stage_holds_pipeline_depth_micro_batches():
    one = llm_memory(LLAMA7B, Parallel(pp=4, micro_batches=1), LLAMA7B_PARAMS, load_profile("ascend910b"))
    deep = llm_memory(LLAMA7B, Parallel(pp=4, micro_batches=8), LLAMA7B_PARAMS, load_profile("ascend910b"))
    per_layer = layer_activation_bytes(LLAMA7B, Parallel(pp=4))
    assert deep.stage == "first"
    assert deep.activations == round(8 * 4 * per_layer)          # L/p layers x p micro-batches in flight
    assert one.activations < deep.activations


def test_optimizer_shard_divides_states_by_data_parallel_size():
    profile = load_profile("ascend910b")
    plain = llm_memory(LLAMA7B, Parallel(tp=2, dp=4), shard(2), profile)
    sharded = llm_memory(LLAMA7B, Parallel(tp=2, dp=4, optimizer_shard=True), shard(2), profile)
    assert sharded.optimizer_states == pytest.approx(plain.optimizer_states / 4, abs=1)
    assert sharded.params == pytest.approx(plain.params / 4, abs=1)
    assert plain.params == pytest.approx(4 * (32 * shard(2).layer + shard(2).first + shard(2).last), abs=1)
    assert sharded.transient > 0 and sharded.peak < plain.peak


def test_oom_flips_with_micro_batch_and_recompute():
    profile = load_profile("ascend910b")

    def oom(b: int, recompute: str) -> bool:
        return llm_memory(LLAMA7B, Parallel(tp=8, micro_batch=b, recompute=recompute), shard(8), profile).oom

    assert not oom(4, "none") and oom(8, "none")
    assert not oom(8, "full")
    assert oom(16, "selective") and not oom(16, "full")


def test_impossible_layouts_are_refused():
    with pytest.raises(ConfigError, match="sequence_parallel"):
        Parallel(sequence_parallel=True)
    with pytest.raises(ConfigError, match="tensor_parallel"):
        Parallel(tp=3).check(LLAMA7B)
    with pytest.raises(ConfigError, match="pipeline_stages"):
        Parallel(pp=5).check(LLAMA7B)
