"""Transformer family: published sizes of the full networks, the tiny presets' training, data and pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from msbench.errors import ConfigError
from msbench.settings import Settings
from workloads.registry import get_workload
from workloads.transformer import data
from workloads.transformer.config import IGNORE_INDEX, PAD
from workloads.transformer.workload import published

NAMES = ["transformer-base", "transformer-large", "bert-base", "bert-large", "gpt2-small"]


def param_count(network) -> int:
    return sum(int(np.prod(p.shape)) for p in network.trainable_params())


@pytest.mark.slow
def test_full_networks_have_the_published_parameter_counts(scratch):
    """All five, built at full size (parameters declared, not materialised: nothing is trained)."""
    from mindspore.nn.utils import no_init_parameters

    counts = {}
    for name in NAMES:
        wl = get_workload(name)
        with no_init_parameters():
            counts[name] = param_count(wl.build_network(wl.preset("full")))
    for name, count in counts.items():
        ref = published(name)
        assert count == pytest.approx(ref["params"], rel=ref["tolerance"]), (name, count)
    # exact counts of the shared 32k vocabulary, tied output projection (Vaswani et al.'s base/big layout)
    assert counts["transformer-base"] == 32000 * 512 + 6 * 3_152_384 + 6 * 4_204_032
    assert counts["bert-base"] == pytest.approx(110.1e6, rel=0.002)   # HF BertForPreTraining: 110,106,428
    assert counts["gpt2-small"] == 124_439_808                        # HF GPT2LMHeadModel, tied


def test_full_synthetic_batches_have_full_size_shapes():
    shapes = {name: [a.shape for a in get_workload(name).synthetic_batch(get_workload(name).preset("full"), 2)]
              for name in ("transformer-base", "bert-large", "gpt2-small")}
    assert shapes["transformer-base"] == [(2, 128)] * 3
    assert shapes["bert-large"] == [(2, 128), (2, 128), (2, 20), (2, 20), (2,)]
    assert shapes["gpt2-small"] == [(2, 1024), (2, 1024)]


def test_bert_seq_len_512_is_selectable_and_longer_is_refused():
    wl = get_workload("bert-base")
    long = wl.preset("full", {"seq_len": 512})
    assert long.max_predictions == 80                 # Google's max_predictions_per_seq at 512
    assert wl.preset("full").max_predictions == 20    # ... and at 128
    with pytest.raises(ConfigError, match="seq_len"):
        wl.preset("full", {"seq_len": 1024})


@pytest.mark.parametrize("overrides, field", [({"heads": 7}, "heads"), ({"task": "sort"}, "task"),
                                              ({"dropout": 1.5}, "dropout"), ({"layers": 0}, "layers"),
                                              ({"activation": "relu"}, "activation")])
def test_bad_preset_override_raises_config_error(overrides, field):
    wl = get_workload("gpt2-small" if field == "task" else "bert-base")
    with pytest.raises(ConfigError, match=field):
        wl.preset("tiny", overrides)


@pytest.mark.slow
def test_bert_activation_chooses_the_erf_gelu_or_mindspores_gelu_kernel():
    """`activation = "gelu_tanh"` (nn.GELU's default, what Google's and MindSpore's model-zoo BERT build; the full
    presets') is one GeLU op per FFN and MLM head, forward and backward; the erf GELU (the tiny presets') is
    composed of Erf and friends."""
    from hardware.model.graph import extract_graph
    from msbench.settings import Settings

    def types(overrides):
        return {op.type for op in extract_graph("bert-base", "tiny", overrides, Settings(mode="graph")).ops}

    assert get_workload("bert-base").preset("tiny").activation == "gelu"          # as its CPU data was measured
    assert {get_workload(n).preset("full").activation for n in ("bert-base", "bert-large")} == {"gelu_tanh"}
    exact, fused = types({}), types({"activation": "gelu_tanh"})
    assert "Erf" in exact and "GeLU" not in exact
    assert {"GeLU", "GeLUGrad"} <= fused and "Erf" not in fused


def test_label_smoothing_is_the_model_zoo_one_hot_form_of_smoothed_cross_entropy():
    """eps > 0 (the full encoder-decoder presets, Vaswani et al.'s 0.1) equals MindSpore's own smoothed
    cross-entropy, whose eps spreads over all V classes (so eps x V / (V - 1) here), and builds the explicit
    (tokens, V) OneHot the model zoo's Transformer launches; the tiny presets keep plain cross-entropy."""
    ms = pytest.importorskip("mindspore")
    from mindspore import ops

    from workloads.transformer.network import SmoothedTokenCrossEntropy, TokenCrossEntropy

    assert {get_workload(n).preset("full").label_smoothing for n in ("transformer-base", "transformer-large")} == {0.1}
    assert {get_workload(n).preset("tiny").label_smoothing for n in ("transformer-base", "transformer-large")} == {0.0}
    assert type(get_workload("transformer-base").build_loss(get_workload("transformer-base").preset("tiny"))) \
        is TokenCrossEntropy
    rng = np.random.default_rng(0)
    vocab = 7
    logits = ms.Tensor(rng.standard_normal((2, 5, vocab)).astype(np.float32))
    labels = ms.Tensor(np.array([[1, 2, 3, IGNORE_INDEX, IGNORE_INDEX], [0, 6, 5, 4, IGNORE_INDEX]], np.int32))
    plain = float(TokenCrossEntropy()(logits, labels).asnumpy())
    assert float(SmoothedTokenCrossEntropy(vocab, 0.0)(logits, labels).asnumpy()) == pytest.approx(plain, rel=1e-5)
    reference = ops.cross_entropy(ops.reshape(logits, (-1, vocab)), ops.reshape(labels, (-1,)),
                                  ignore_index=IGNORE_INDEX, label_smoothing=0.1 * vocab / (vocab - 1))
    smoothed = float(SmoothedTokenCrossEntropy(vocab, 0.1)(logits, labels).asnumpy())
    assert smoothed == pytest.approx(float(reference.asnumpy()), rel=1e-5) and smoothed != pytest.approx(plain)
    with pytest.raises(ConfigError, match="label_smoothing"):
        get_workload("transformer-base").preset("tiny", {"label_smoothing": 1.0})


@pytest.mark.parametrize("task, expect", [("copy", lambda s: s), ("reverse", lambda s: s[::-1]), ("sort", np.sort)])
def test_sequence_tasks_label_the_transformed_source(task, expect):
    preset = get_workload("transformer-base").preset("tiny", {"task": task})
    src, tgt, labels = data.SequenceTaskSource(preset, "train")[5]
    symbols = src[: np.flatnonzero(src == data.EOS)[0]]
    target = expect(symbols)
    n = len(target)
    assert list(labels[:n + 1]) == list(target) + [data.EOS] and (labels[n + 1:] == IGNORE_INDEX).all()
    assert tgt[0] == data.BOS and list(tgt[1:n + 1]) == list(target) and (tgt[n + 1:] == PAD).all()


def test_samples_are_deterministic_per_index_and_split():
    preset = get_workload("gpt2-small").preset("tiny")
    a, b = data.LanguageModelSource(preset, "train"), data.LanguageModelSource(preset, "eval")
    assert all(np.array_equal(x, y) for x, y in zip(a[3], a[3]))
    assert not np.array_equal(a[3][0], b[3][0])
    inputs, labels = a[3]
    assert np.array_equal(inputs[1:], labels[:-1])   # next-token labels


@pytest.mark.slow
def test_bert_masking_is_80_10_10_over_words_only():
    preset = get_workload("bert-base").preset("full")
    source, masking = data.BertPairSource(preset, "train"), data.BertMasking(preset)
    chosen = masked = replaced = 0
    for i in range(200):
        ids, types, nsp = source[i]
        out, positions, labels = masking(ids)
        keep = labels != IGNORE_INDEX
        pos = positions[keep]
        assert np.array_equal(ids[pos], labels[keep]) and (ids[pos] > data.MASK).all()
        assert np.array_equal(np.delete(out, pos), np.delete(ids, pos))      # only chosen positions change
        assert keep.sum() == min(preset.max_predictions, round(0.15 * (ids > data.MASK).sum()))
        chosen += len(pos)
        masked += (out[pos] == data.MASK).sum()
        replaced += ((out[pos] != data.MASK) & (out[pos] != ids[pos])).sum()
    assert masked / chosen == pytest.approx(0.8, abs=0.03)
    assert replaced / chosen == pytest.approx(0.1, abs=0.03)


def batches(dataset):
    return [tuple(np.asarray(c) for c in b) for b in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True)]


def test_mindrecord_and_generator_pipelines_give_the_same_masked_batches(scratch):
    wl = get_workload("bert-base")
    preset = wl.preset("tiny", {"eval_samples": 64})
    got = {fmt: batches(wl.make_dataset(preset, "eval", Settings(data_format=fmt), 16, workdir=scratch))
           for fmt in ("generator", "mindrecord")}
    assert len(got["generator"]) == 4
    for a, b in zip(got["generator"], got["mindrecord"]):
        assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b))
    expected = wl.rows(preset, "eval", 16)                # the numpy path evaluate() uses
    assert [x.shape for x in got["generator"][0]] == [x.shape for x in expected]
    assert all(np.array_equal(x, y) for x, y in zip(got["generator"][0], expected))


def test_sharding_splits_the_training_set(scratch):
    wl = get_workload("gpt2-small")
    preset = wl.preset("tiny", {"train_samples": 64})
    shards = [batches(wl.make_dataset(preset, "train", Settings(), 8, rank=r, world=2)) for r in (0, 1)]
    rows = [{tuple(x) for b in shard for x in b[0]} for shard in shards]
    assert len(rows[0]) == len(rows[1]) == 32 and not rows[0] & rows[1]


def test_recompute_blocks_selective_marks_attention_cores_full_marks_layers(scratch):
    from workloads.transformer.layers import AttentionCore, DecoderLayer, EncoderLayer

    wl = get_workload("transformer-base")
    preset = wl.preset("tiny")
    network = wl.build_network(preset)
    selective, full = wl.recompute_blocks(network, full=False), wl.recompute_blocks(network, full=True)
    assert len(selective) == preset.layers + 2 * preset.decoder_layers
    assert all(isinstance(b, AttentionCore) for b in selective)
    assert len(full) == preset.layers + preset.decoder_layers
    assert all(isinstance(b, (EncoderLayer, DecoderLayer)) for b in full)


SETTINGS = Settings(mode="graph", seed=3)


def first_losses(wl, preset, steps):
    """The first `steps` updates of `train(wl, preset, SETTINGS, preset.epochs)`, built the same way."""
    from workloads.train_step import build_train_step, steps_per_epoch

    step = build_train_step(wl, preset, SETTINGS, total_steps=preset.epochs * steps_per_epoch(preset, SETTINGS))
    batches = wl.make_dataset(preset, "train", SETTINGS, step.step_batch).create_tuple_iterator(num_epochs=1)
    return [float(step.cell(*batch).asnumpy()) for batch, _ in zip(batches, range(steps))]


# metric / chance each tiny run must reach (measured: 3.3x, 1.6x, 2.9x; the runs are deterministic). Masked-LM
# of a 2-layer post-LN BERT under the default optimizer (momentum) is the slowest of the three to learn.
# The large variants build the same network classes at other sizes: their tiny presets get the few-step test.
BEATS_CHANCE = {"transformer-base": 2.5, "bert-base": 1.4, "gpt2-small": 2.0}
SAME_NETWORK_AT_ANOTHER_SIZE = ["transformer-large", "bert-large"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n if n == "bert-base" else pytest.param(n, marks=pytest.mark.long) for n in BEATS_CHANCE])
def test_tiny_trains_in_graph_mode_beats_chance_deterministically(name, graph_mode):
    from workloads.train_step import train

    wl = get_workload(name)
    preset = wl.preset("tiny")
    result = train(wl, preset, SETTINGS, preset.epochs)
    losses = result.losses
    assert len(losses) == preset.epochs * (preset.train_samples // preset.batch_size)
    assert np.mean(losses[-16:]) < 0.85 * np.mean(losses[:4])
    metrics = wl.evaluate(result.network, preset)
    chance = wl.chance(preset)
    assert 0 < chance < 0.2
    assert metrics[wl.metric_name] > BEATS_CHANCE[name] * chance, (metrics, chance)
    assert first_losses(wl, preset, 24) == losses[:24]   # a second run repeats the first, bit for bit


@pytest.mark.slow
@pytest.mark.long               # the base variants' trainings cover the same network classes
@pytest.mark.parametrize("name", SAME_NETWORK_AT_ANOTHER_SIZE)
def test_tiny_of_a_large_variant_learns_in_its_first_steps_deterministically(name, graph_mode):
    """The full accuracy run is its base variant's (same classes); here its own preset must compile, learn
    and repeat bit for bit over the first 32 updates."""
    wl = get_workload(name)
    preset = wl.preset("tiny")
    losses = first_losses(wl, preset, 32)
    assert np.isfinite(losses).all() and np.mean(losses[-8:]) < 0.9 * np.mean(losses[:4]), losses
    assert first_losses(wl, preset, 8) == losses[:8]


@pytest.mark.slow
def test_tiny_trains_in_pynative_with_selective_recompute(scratch):
    import mindspore as ms

    ms.set_context(mode=ms.PYNATIVE_MODE)
    from workloads.train_step import build_train_step

    wl = get_workload("gpt2-small")
    preset = wl.preset("tiny")
    step = build_train_step(wl, preset, Settings(recompute="selective"), total_steps=4)
    assert step.recomputed_blocks == preset.layers
    batch = [ms.Tensor(a) for a in wl.synthetic_batch(preset, preset.batch_size)]
    losses = [float(step.cell(*batch).asnumpy()) for _ in range(4)]
    assert losses[-1] < losses[0]


@pytest.mark.slow
def test_full_recompute_compiles_and_trains_in_graph_mode(graph_mode):
    import mindspore as ms
    from workloads.train_step import build_train_step

    wl = get_workload("transformer-base")
    preset = wl.preset("tiny")
    step = build_train_step(wl, preset, Settings(mode="graph", recompute="full"), total_steps=4)
    assert step.recomputed_blocks == preset.layers + preset.decoder_layers
    batch = [ms.Tensor(a) for a in wl.synthetic_batch(preset, preset.batch_size)]
    losses = [float(step.cell(*batch).asnumpy()) for _ in range(4)]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("name, source", [("bert-large", "bert-base"), ("transformer-large", "transformer-base")])
def test_a_larger_stack_reads_its_smaller_peers_pipeline_entry_because_its_data_is_the_same(name, source):
    """One pipeline, one host-cost entry: the larger network's samples (after the map stages) equal its peer's;
    a pipeline field carried as an override keeps them apart, a network field does not."""
    from workloads.registry import calibration_entry

    big, small = get_workload(name), get_workload(source)
    for preset in ("tiny", "full"):
        assert calibration_entry(name, preset, {}) == (source, preset, {})
    for a, b in zip(big.rows(big.preset("tiny"), "train", 4), small.rows(small.preset("tiny"), "train", 4)):
        np.testing.assert_array_equal(a, b)
    assert calibration_entry(name, "tiny", {"layers": 3, "seq_len": 24}) == (source, "tiny", {"seq_len": 24})
    assert calibration_entry("llama2-7b", "tiny", {}) == ("llama2-7b", "tiny", {})   # composed: no host cost read
