"""The five Transformer workloads: one family class, three stacks, five published sizes.

The stack decides the network, loss, data and columns; the size comes from presets.toml. Everything that
touches MindSpore is imported inside methods, so listing workloads stays framework-free.
"""

from __future__ import annotations

import tomllib
from abc import abstractmethod
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from workloads.base import Preset, Workload, load_presets
from workloads.pipeline import MapStage, PipelineSpec, SampleSource, build_pipeline
from workloads.transformer import data
from msbench.errors import ConfigError
from workloads.parallel_plan import annotate, plan_parallel
from workloads.transformer.config import (TASKS, BertPreset, LLMPreset, Seq2SeqPreset, TransformerPreset,
                                          llm_forward_flops, llm_parameter_count)
from workloads.transformer.metrics import majority_accuracy, token_accuracy

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn

    from msbench.settings import Settings

PRESETS_FILE = Path(__file__).with_name("presets.toml")
DATA_VERSION = 2  # bump when the generated data changes (it keys the MindRecord files)


@cache
def published(name: str) -> dict[str, Any]:
    """The published parameter count of a full network, its tolerance and source (presets.toml [published])."""
    with open(PRESETS_FILE, "rb") as fh:
        return tomllib.load(fh)["published"][name]


def run_stages(row: dict[str, np.ndarray], stages: Sequence[MapStage]) -> dict[str, np.ndarray]:
    """Apply the pipeline's map stages to one sample in numpy (evaluation and synthetic batches reuse them)."""
    row = dict(row)
    for stage in stages:
        values: Any = tuple(row[c] for c in stage.input_columns)
        for op in stage.operations:
            values = op(*values)
            values = values if isinstance(values, tuple) else (values,)
        row.update(zip(stage.output_columns or stage.input_columns, values))
    return row


class TransformerWorkload(Workload):
    """What the three stacks share: presets, pipeline, evaluation, chance level and recompute blocks."""

    family: ClassVar[str] = "transformer"
    preset_cls: ClassVar[type[TransformerPreset]] = TransformerPreset
    presets_file: ClassVar[Path] = PRESETS_FILE
    architecture: ClassVar[str]          # a key of TASKS: encoder-decoder | encoder | decoder
    identical_blocks: ClassVar[tuple[str, ...]] = ("layers", "decoder_layers")
    # What the generated data and its maps read (BERT's max_predictions follows seq_len), with the probe's
    # batch; each stack's smallest network names the entry (`data_workload`).
    pipeline_fields: ClassVar[tuple[str, ...]] = ("task", "seq_len", "vocab_size", "train_samples", "batch_size")
    source_columns: ClassVar[list[str]]
    input_columns: ClassVar[list[str]]
    label_columns: ClassVar[list[str]]

    def preset(self, name: str = "tiny", overrides: Any = None) -> TransformerPreset:
        preset = super().preset(name, overrides)
        if preset.task not in TASKS[self.architecture]:
            raise ConfigError("task", preset.task, "|".join(TASKS[self.architecture]), f"{self.name}.{name}")
        return preset  # type: ignore[return-value]

    # -- what a stack provides ------------------------------------------------------------------
    @abstractmethod
    def source(self, preset: TransformerPreset, split: str) -> SampleSource:
        """The generated samples of a split, one tuple per sample in `source_columns` order."""

    def stages(self, preset: TransformerPreset) -> list[MapStage]:
        """Map operations of the pipeline (BERT's masking); none by default."""
        return []

    def scored(self, outputs: Any, labels: Sequence[np.ndarray]) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        """(extra metrics, headline predictions, headline labels) of one evaluation batch."""
        return {}, np.asarray(outputs.asnumpy()).argmax(-1), labels[0]

    # -- the Workload contract --------------------------------------------------------------------
    def columns(self, preset: TransformerPreset) -> tuple[list[str], list[str]]:
        return list(self.input_columns), list(self.label_columns)

    def rows(self, preset: TransformerPreset, split: str, count: int | None = None) -> list[np.ndarray]:
        """The first `count` samples of a split after the map stages, stacked per column (inputs, labels)."""
        source, stages = self.source(preset, split), self.stages(preset)
        count = len(source) if count is None else count
        samples = [run_stages(dict(zip(self.source_columns, source[i % len(source)])), stages) for i in range(count)]
        return [np.stack([s[c] for s in samples]) for c in self.input_columns + self.label_columns]

    def synthetic_batch(self, preset: TransformerPreset, batch_size: int) -> Sequence[np.ndarray]:
        return self.rows(preset, "train", batch_size)

    def make_dataset(self, preset: TransformerPreset, split: str, settings: "Settings", batch_size: int,
                     rank: int = 0, world: int = 1, workdir: Path | None = None):
        source = self.source(preset, split)
        key = f"{self.family}/{preset.task}/{split}/n{len(source)}/t{preset.seq_len}/v{preset.vocab_size}/d{DATA_VERSION}"
        spec = PipelineSpec(source=source, columns=list(self.source_columns), source_key=key,
                            stages=self.stages(preset), shuffle=split == "train",
                            project=self.input_columns + self.label_columns)
        return build_pipeline(spec, settings, batch_size, rank=rank, world=world, workdir=workdir)

    def evaluate(self, network: "nn.Cell", preset: TransformerPreset) -> dict[str, float]:
        import mindspore as ms

        columns = self.rows(preset, "eval")
        n_inputs, batch = len(self.input_columns), min(preset.batch_size, len(columns[0]))
        was_training = network.training
        network.set_train(False)
        extras: dict[str, list[float]] = {}
        predictions, labels = [], []
        try:
            for start in range(0, len(columns[0]) - batch + 1, batch):  # full batches: one compiled shape
                part = [c[start:start + batch] for c in columns]
                outputs = network(*(ms.Tensor(x) for x in part[:n_inputs]))
                more, predicted, truth = self.scored(outputs, part[n_inputs:])
                for key, value in more.items():
                    extras.setdefault(key, []).append(value)
                predictions.append(predicted)
                labels.append(truth)
        finally:
            network.set_train(was_training)
        result = {self.metric_name: token_accuracy(np.concatenate(predictions), np.concatenate(labels))}
        result.update({key: float(np.mean(values)) for key, values in extras.items()})
        return result

    def chance(self, preset: TransformerPreset) -> float:
        return majority_accuracy(self.rows(preset, "eval")[len(self.input_columns)])


class EncoderDecoderWorkload(TransformerWorkload):
    """Vaswani et al.'s encoder-decoder on copy/reverse/sort (token accuracy, teacher-forced)."""

    metric_name: ClassVar[str] = "token_accuracy"
    preset_cls: ClassVar[type[TransformerPreset]] = Seq2SeqPreset
    architecture: ClassVar[str] = "encoder-decoder"
    data_workload: ClassVar[str | None] = "transformer-base"
    # Not a stack of independent blocks: every decoder block reads the encoder output, so its gradient
    # is one AddN whose arity grows with the depth (a shallow extraction cannot be repeated exactly).
    identical_blocks: ClassVar[tuple[str, ...]] = ()
    source_columns: ClassVar[list[str]] = ["src_ids", "tgt_ids", "labels"]
    input_columns: ClassVar[list[str]] = ["src_ids", "tgt_ids"]
    label_columns: ClassVar[list[str]] = ["labels"]

    def source(self, preset: TransformerPreset, split: str) -> SampleSource:
        return data.SequenceTaskSource(preset, split)

    def build_network(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import EncoderDecoder

        return EncoderDecoder(preset)

    def build_loss(self, preset: Seq2SeqPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import SmoothedTokenCrossEntropy, TokenCrossEntropy

        if preset.label_smoothing:
            return SmoothedTokenCrossEntropy(preset.vocab_size, preset.label_smoothing)
        return TokenCrossEntropy()


class BertWorkload(TransformerWorkload):
    """BERT pre-training: masked LM (headline: accuracy on the masked tokens) and next-sentence prediction."""

    metric_name: ClassVar[str] = "mlm_accuracy"
    architecture: ClassVar[str] = "encoder"
    preset_cls: ClassVar[type[TransformerPreset]] = BertPreset
    data_workload: ClassVar[str | None] = "bert-base"
    source_columns: ClassVar[list[str]] = ["input_ids", "token_type_ids", "nsp_label"]
    input_columns: ClassVar[list[str]] = ["input_ids", "token_type_ids", "masked_positions"]
    label_columns: ClassVar[list[str]] = ["masked_ids", "nsp_label"]

    def source(self, preset: TransformerPreset, split: str) -> SampleSource:
        return data.BertPairSource(preset, split)

    def stages(self, preset: TransformerPreset) -> list[MapStage]:
        return [MapStage([data.BertMasking(preset)], ["input_ids"], ["input_ids", "masked_positions", "masked_ids"])]

    def scored(self, outputs: Any, labels: Sequence[np.ndarray]) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
        mlm_logits, nsp_logits = outputs
        nsp = float((nsp_logits.asnumpy().argmax(-1) == labels[1]).mean())
        return {"nsp_accuracy": nsp}, mlm_logits.asnumpy().argmax(-1), labels[0]

    def build_network(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import Bert

        return Bert(preset)

    def build_loss(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import BertPretrainingLoss

        return BertPretrainingLoss()


class GPT2Workload(TransformerWorkload):
    """GPT-2: next-token prediction on packed grammar documents (token accuracy)."""

    metric_name: ClassVar[str] = "token_accuracy"
    architecture: ClassVar[str] = "decoder"
    data_workload: ClassVar[str | None] = "gpt2-small"
    source_columns: ClassVar[list[str]] = ["input_ids", "labels"]
    input_columns: ClassVar[list[str]] = ["input_ids"]
    label_columns: ClassVar[list[str]] = ["labels"]

    def source(self, preset: TransformerPreset, split: str) -> SampleSource:
        return data.LanguageModelSource(preset, split)

    def build_network(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import GPT2

        return GPT2(preset)

    def build_loss(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.network import TokenCrossEntropy

        return TokenCrossEntropy()


class LLMWorkload(GPT2Workload):
    """Decoder-only LLMs (Llama 2, GPT-3): GPT-2's data, loss and metric, the LLM blocks of
    workloads/transformer/llm.py, and the parallel plan's rules (workloads/parallel_plan.py)."""

    preset_cls: ClassVar[type[TransformerPreset]] = LLMPreset
    data_workload: ClassVar[str | None] = None     # composed from blocks: reads no host cost (GPT-2's can't hold its shapes)
    identical_blocks: ClassVar[tuple[str, ...]] = ("layers",)

    def build_network(self, preset: TransformerPreset) -> "nn.Cell":
        # imports MindSpore: only when a network is built
        from workloads.transformer.llm import DecoderLM

        return DecoderLM(preset)  # type: ignore[arg-type]

    def size_from_config(self, preset: TransformerPreset) -> tuple[int, int]:
        """The formulas of config.py (tests/workloads/test_llama.py checks both against the tiny networks)."""

        return llm_parameter_count(preset), llm_forward_flops(preset)  # type: ignore[arg-type]

    def build_parallel_network(self, preset: TransformerPreset, settings: "Settings") -> "nn.Cell":
        """The fused attention kernel when flash_attention is set; the plan's shard strategies and pipeline
        stages on the blocks in the semi-auto/auto modes (workloads/parallel_plan.py)."""
        # imports MindSpore: only when a network is built
        from workloads.transformer.llm import DecoderLM

        return annotate(DecoderLM(preset, flash=settings.flash_attention), plan_parallel(settings))  # type: ignore[arg-type]

    def check_settings(self, preset: TransformerPreset, settings: "Settings") -> None:
        """Tensor parallelism splits heads (and kv heads) over the group; pipeline stages need a layer each
        and a batch that splits into the micro-batches."""
        where = f"{self.name}.{preset.name}"
        batch = settings.batch_size or preset.batch_size
        if batch % settings.micro_batches:
            raise ConfigError("micro_batches", settings.micro_batches, f"a divisor of the batch ({batch})", where,
                              rule="the pipeline splits each replica's batch into equal micro-batches")
        tp = settings.tensor_parallel
        for key in ("heads", "kv_heads"):
            if getattr(preset, key) % tp:
                raise ConfigError("tensor_parallel", tp, f"a divisor of {key}={getattr(preset, key)}", where,
                                  rule="tensor parallelism gives each card whole attention heads")
        head_dim = preset.d_model // preset.heads
        if settings.flash_attention and (head_dim % 16 or head_dim > 512):
            raise ConfigError("flash_attention", True, f"false at head dimension {head_dim}", where,
                              rule="FlashAttentionScore needs a head dimension that is a multiple of 16, "
                                   "at most 512 (mindspore.ops.flash_attention_score)")
        if settings.pipeline_stages > preset.layers:
            raise ConfigError("pipeline_stages", settings.pipeline_stages, f"1..layers={preset.layers}", where,
                              rule="each pipeline stage holds at least one layer")


class AnyLLMWorkload(LLMWorkload):
    """`llm`: a decoder-only LLM of any shape, written as preset overrides over Llama 2 7B's presets (what a
    MindFormers config the four named LLMs do not match becomes: msbench/importers/mindformers.py)."""

    name = "llm"
    base_shape: ClassVar[str] = "llama2-7b"

    def presets(self) -> dict[str, Preset]:
        return load_presets(self.presets_file, self.base_shape, self.preset_cls)
