"""Top-1 accuracy of a classifier over a batched evaluation dataset (shared by image classifiers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from mindspore import nn
    from mindspore.dataset import Dataset


def eval_batch_size(samples: int, batch_size: int) -> int:
    """The largest batch <= `batch_size` that divides `samples`: the pipeline drops remainders, and
    evaluation must see every sample exactly once."""
    return max(d for d in range(1, min(samples, batch_size) + 1) if samples % d == 0)


def top1_accuracy(network: "nn.Cell", dataset: "Dataset") -> float:
    """Fraction of samples whose argmax logit is the label; columns are (image, label). The network runs
    in inference mode (BatchNorm on moving statistics) and gets its training flag back afterwards."""
    from mindspore import Tensor

    was_training = network.training
    network.set_train(False)
    correct = total = 0
    try:
        for image, label in dataset.create_tuple_iterator(num_epochs=1, output_numpy=True):
            logits = network(Tensor(image)).asnumpy()
            correct += int(np.sum(logits.argmax(axis=-1) == label.reshape(-1)))
            total += int(label.size)
    finally:
        network.set_train(was_training)
    if total == 0:
        raise ValueError("evaluation dataset is empty (eval_samples smaller than one batch?)")
    return correct / total


def chance_top1(num_classes: int) -> float:
    """Top-1 of a guess among balanced classes."""
    return 1.0 / num_classes
