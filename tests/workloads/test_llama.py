"""Decoder-only LLMs (llama2-7b/13b/70b, gpt3-175b): published shapes and parameter counts from the config,
the count formula against the real tiny networks, one block at per-shard shapes, and tiny training."""

from __future__ import annotations

import numpy as np
import pytest

from msbench.settings import Settings
from workloads.registry import get_workload
from workloads.transformer.config import llm_parameter_count
from workloads.transformer.workload import published

LLMS = ["llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b"]
SHAPES = {   # (layers, d_model, heads, kv_heads, ff_dim, vocab, seq_len): Llama 2 table 1 / HF configs, GPT-3 table 2.1
    "llama2-7b": (32, 4096, 32, 32, 11008, 32000, 4096),
    "llama2-13b": (40, 5120, 40, 40, 13824, 32000, 4096),
    "llama2-70b": (80, 8192, 64, 8, 28672, 32000, 4096),
    "gpt3-175b": (96, 12288, 96, 96, 4 * 12288, 50257, 2048),
}


def param_count(network) -> int:
    return sum(int(np.prod(p.shape)) for p in network.trainable_params())


@pytest.mark.parametrize("name", LLMS)
def test_full_presets_have_the_published_shapes_and_parameter_counts(name):
    p = get_workload(name).preset("full")
    assert (p.layers, p.d_model, p.heads, p.kv_heads, p.ff_dim, p.vocab_size, p.seq_len) == SHAPES[name]
    ref = published(name)
    assert llm_parameter_count(p) == pytest.approx(ref["params"], rel=ref["tolerance"])


def test_the_count_matches_the_released_checkpoints_exactly():
    counts = {n: llm_parameter_count(get_workload(n).preset("full")) for n in LLMS[:3]}
    assert counts == {"llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320, "llama2-70b": 68_976_648_192}


@pytest.mark.parametrize("name", LLMS)
def test_the_count_formula_is_the_real_tiny_networks(name, scratch):
    wl = get_workload(name)
    p = wl.preset("tiny")
    assert param_count(wl.build_network(p)) == llm_parameter_count(p)


def test_one_block_at_per_shard_shapes_holds_a_tensor_parallel_share(scratch):
    from mindspore.nn.utils import no_init_parameters

    from workloads.transformer.llm import BlockShape, build_block, build_embedding_head

    p = get_workload("llama2-70b").preset("full")
    shape = BlockShape.per_shard(p, tensor_parallel=8, micro_batch=1)
    assert (shape.heads, shape.kv_heads, shape.ffn, shape.head_dim) == (8, 1, 3584, 128)
    with no_init_parameters():
        block = build_block(p, shape)
        head = build_embedding_head(p, tensor_parallel=8)
    d, q, kv = p.d_model, 8 * 128, 1 * 128
    assert param_count(block) == 2 * d * q + 2 * d * kv + 3 * d * 3584 + 2 * d
    assert param_count(head) == 2 * 4000 * d + d
    with pytest.raises(ValueError, match="kv_heads=8"):
        BlockShape.per_shard(p, tensor_parallel=16)


@pytest.mark.slow
def test_a_tiny_block_runs_forward_and_backward_at_its_shard_shapes(scratch):
    import mindspore as ms

    from workloads.transformer.llm import BlockShape, block_inputs, build_block

    p = get_workload("llama2-70b").preset("tiny")
    shape = BlockShape.per_shard(p, tensor_parallel=2, micro_batch=2)
    block = build_block(p, shape)
    (x,) = block_inputs(shape)
    x = ms.Tensor(np.random.default_rng(0).standard_normal(x.shape).astype(np.float32))
    out = block(x)
    grads = ms.grad(lambda t: block(t).sum(), grad_position=None, weights=block.trainable_params())(x)
    assert out.shape == (2, p.seq_len, p.d_model)
    assert all(np.isfinite(g.asnumpy()).all() for g in grads) and any(np.abs(g.asnumpy()).sum() > 0 for g in grads)


@pytest.mark.slow
def test_rotary_positions_make_attention_depend_on_order(scratch):
    """With rotary embeddings and no position table, swapping two earlier tokens changes the last output."""
    import mindspore as ms

    wl = get_workload("llama2-7b")
    p = wl.preset("tiny")
    net = wl.build_network(p)
    ids = np.arange(3, 3 + p.seq_len, dtype=np.int32)[None]
    swapped = ids.copy()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]
    a, b = (net(ms.Tensor(x)).asnumpy()[0, -1] for x in (ids, swapped))
    assert not np.allclose(a, b, atol=1e-6)


@pytest.mark.slow
@pytest.mark.long       # LLM cells are predicted from compiled blocks, never trained; the block tests stay
def test_tiny_llama_with_grouped_query_attention_trains_and_beats_chance(graph_mode):
    from workloads.train_step import train

    wl = get_workload("llama2-70b")
    preset = wl.preset("tiny")
    result = train(wl, preset, Settings(mode="graph"), preset.epochs)
    assert np.mean(result.losses[-16:]) < 0.85 * np.mean(result.losses[:4])
    chance = wl.chance(preset)
    assert wl.evaluate(result.network, preset)[wl.metric_name] > 2.0 * chance


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama2-70b", "gpt3-175b"])
def test_the_flop_formula_is_the_counters_on_the_real_tiny_networks(name, scratch):
    """The one FLOP counter (compiled forward graph) agrees with the formula `msbench list workloads` uses
    for the full sizes, on grouped-query/SwiGLU/rotary and on learned/GELU/tied networks."""
    import mindspore as ms

    from hardware.model.graph import forward_flops
    from workloads.transformer.config import llm_forward_flops

    wl = get_workload(name)
    p = wl.preset("tiny")
    inputs = [ms.Tensor(a) for a in wl.synthetic_batch(p, 1)[:1]]
    assert forward_flops(wl.build_network(p), inputs) == llm_forward_flops(p)


def test_workload_listing_sizes_the_full_llms_from_their_config(private_cache):
    from msbench.commands.summary import workload_row

    row = workload_row("llama2-7b")
    assert row["params"] == 6_738_415_616 and row["input_shape"] == "input_ids 4096"
    assert row["gflops"] == pytest.approx(2 * 4096 * 6.74e9 / 1e9, rel=0.15)   # ~6N FLOPs/token train = 2N fwd


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [pytest.param({"qkv_bias": True}, marks=pytest.mark.long),
                                       pytest.param({"tied": True}, marks=pytest.mark.long), {"qkv_bias": True, "tied": True}])
def test_the_count_formula_holds_for_qwen_and_glm_biases_and_tied_rotary_heads(overrides, scratch):
    """The `llm` workload's shapes (msbench predict --config): Q/K/V biases without LayerNorm (Qwen, ChatGLM)
    and a tied head on a rotary model (Qwen 1.5 0.5B), built for real and run once."""
    import mindspore as ms

    wl = get_workload("llm")
    p = wl.preset("tiny", overrides)
    network = wl.build_network(p)
    assert param_count(network) == llm_parameter_count(p)
    logits = network(ms.Tensor(np.ones((2, p.seq_len), np.int32)))
    assert logits.shape == (2, p.seq_len, p.vocab_size)


@pytest.mark.slow
def test_the_fused_kernel_is_called_in_its_causal_case(scratch, monkeypatch):
    """flash_attention=true on Ascend: ops.flash_attention_score gets the lower-triangle mask with
    next_tokens=0 (pre_tokens left at its default, every earlier token), the kernel's causal case at
    sparse_mode 0 that MindFormers' decoders use, whose skipped blocks the device model costs. The CPU has no
    FlashAttentionScore, so the call is recorded, not run."""
    import mindspore as ms

    from workloads.transformer import llm
    from workloads.transformer.layers import causal_bias

    calls = []

    def recorded(query, key, value, head_num, **options):
        calls.append((head_num, query.shape, key.shape, options))
        return query

    monkeypatch.setattr(llm.ops, "flash_attention_score", recorded)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    seq, heads, kv_heads, head_dim = 8, 4, 2, 16
    attention = llm.GroupedQueryAttention(64, heads, kv_heads, head_dim, rotary=False, biased=False, flash=True,
                                          dropout=0.0, std=0.02, out_std=0.02)
    attention(ms.Tensor(np.ones((1, seq, 64), np.float32)), causal_bias(seq), None, None)   # fp32: cast to fp16 inside
    ((head_num, q_shape, k_shape, options),) = calls
    assert (head_num, q_shape, k_shape) == (heads, (1, heads, seq, head_dim), (1, kv_heads, seq, head_dim))
    assert options["next_tokens"] == 0 and options.get("sparse_mode", 0) == 0 and "pre_tokens" not in options
    mask = options["attn_mask"].asnumpy()
    assert mask.dtype == np.uint8 and (mask == np.triu(np.ones((seq, seq), np.uint8), 1)).all()   # 1 = hidden
