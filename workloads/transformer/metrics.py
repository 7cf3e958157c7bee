"""Token-level quality metrics and the chance level they are compared against (numpy only)."""

from __future__ import annotations

import numpy as np

from workloads.transformer.config import IGNORE_INDEX


def token_accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of labelled tokens (label != IGNORE_INDEX) predicted exactly."""
    keep = labels != IGNORE_INDEX
    if not keep.any():
        raise ValueError("no labelled tokens to score")
    return float((predictions[keep] == labels[keep]).mean())


def majority_accuracy(labels: np.ndarray) -> float:
    """Chance level of a token task: the accuracy of the best predictor that ignores the input, i.e. the most
    frequent label at each position (>= 1/vocab; higher where positions or word frequencies are skewed)."""
    labels = labels.reshape(labels.shape[0], -1)
    hits = 0
    for column in labels.T:
        column = column[column != IGNORE_INDEX]
        if column.size:
            hits += np.bincount(column).max()
    total = int((labels != IGNORE_INDEX).sum())
    if not total:
        raise ValueError("no labelled tokens to score")
    return hits / total
