"""Evaluation-time decoding and NMS in numpy (Ultralytics `Detect` inference path, `non_max_suppression`).

Deterministic and backend-free: the network's raw level maps come back as numpy and are turned into
(x1, y1, x2, y2, score, class) rows in input-image pixels.
"""

from __future__ import annotations

import numpy as np

from workloads.yolo.network import STRIDES, V5_ANCHORS


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def decode_v5(maps: list[np.ndarray], num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (B, N, 4) xyxy and class scores objectness×class (B, N, nc) of an anchor head."""
    boxes, scores = [], []
    for p, stride, anchors in zip(maps, STRIDES, V5_ANCHORS):
        b, _, h, w = p.shape
        na, no = len(anchors) // 2, num_classes + 5
        y = sigmoid(p.reshape(b, na, no, h, w).transpose(0, 1, 3, 4, 2).astype(np.float64))
        gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        grid = np.stack((gx, gy), -1)[None, None]
        xy = (y[..., :2] * 2 - 0.5 + grid) * stride
        wh = (y[..., 2:4] * 2) ** 2 * np.array(anchors, np.float64).reshape(1, na, 1, 1, 2)
        boxes.append(np.concatenate((xy - wh / 2, xy + wh / 2), -1).reshape(b, -1, 4))
        scores.append((y[..., 5:] * y[..., 4:5]).reshape(b, -1, num_classes))
    return np.concatenate(boxes, 1), np.concatenate(scores, 1)


def decode_v8(maps: list[np.ndarray], num_classes: int, reg_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (B, N, 4) xyxy from the expected DFL bins, and sigmoid class scores (B, N, nc)."""
    boxes, scores = [], []
    for p, stride in zip(maps, STRIDES):
        b, no, h, w = p.shape
        flat = p.reshape(b, no, h * w).transpose(0, 2, 1).astype(np.float64)
        logits = flat[..., :4 * reg_max].reshape(b, h * w, 4, reg_max)
        prob = np.exp(logits - logits.max(-1, keepdims=True))
        dist = (prob / prob.sum(-1, keepdims=True)) @ np.arange(reg_max, dtype=np.float64)
        gy, gx = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        centre = np.stack((gx, gy), -1).reshape(1, -1, 2)
        boxes.append(np.concatenate((centre - dist[..., :2], centre + dist[..., 2:]), -1) * stride)
        scores.append(sigmoid(flat[..., 4 * reg_max:]))
    return np.concatenate(boxes, 1), np.concatenate(scores, 1)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices kept by greedy NMS, highest score first (ties broken by index, so the result is stable)."""
    order = np.argsort(-scores, kind="stable")
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        lt = np.maximum(boxes[i, :2], boxes[rest, :2])
        rb = np.minimum(boxes[i, 2:], boxes[rest, 2:])
        inter = np.prod(np.clip(rb - lt, 0, None), axis=1)
        iou = inter / (areas[i] + areas[rest] - inter + 1e-9)
        order = rest[iou <= iou_threshold]
    return np.array(keep, dtype=np.int64)


def detections(boxes: np.ndarray, scores: np.ndarray, conf: float = 0.001, iou: float = 0.7,
               max_det: int = 300, max_nms: int = 30000) -> np.ndarray:
    """One image: multi-label candidates above `conf`, class-aware NMS -> (n, 6) [x1, y1, x2, y2, score, class]."""
    idx, cls = np.nonzero(scores > conf)
    if idx.size == 0:
        return np.zeros((0, 6))
    cand_scores = scores[idx, cls]
    top = np.argsort(-cand_scores, kind="stable")[:max_nms]
    idx, cls, cand_scores = idx[top], cls[top], cand_scores[top]
    cand_boxes = boxes[idx]
    offset = cls[:, None] * (float(np.abs(cand_boxes).max()) + 1.0)   # separate classes (`agnostic=False`)
    keep = nms(cand_boxes + offset, cand_scores, iou)[:max_det]
    return np.c_[cand_boxes[keep], cand_scores[keep], cls[keep]]
