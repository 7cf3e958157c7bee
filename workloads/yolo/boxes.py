"""Box geometry in MindSpore ops for the losses (Ultralytics `utils/metrics.py::bbox_iou`, `utils/tal.py`).

Everything broadcasts over leading dimensions with the 4 box numbers in the last one, so the
losses keep static shapes (padded ground truth plus a mask) and compile in graph mode.
"""

from __future__ import annotations

import math

import numpy as np
from mindspore import ops

EPS = 1e-7


def xywh_to_xyxy(box):
    xy, wh = box[..., :2], box[..., 2:4]
    return ops.cat((xy - wh / 2, xy + wh / 2), -1)


def bbox_ciou(box1, box2, xywh: bool = False, eps: float = EPS):
    """Complete IoU (Zheng et al. 2020): IoU minus centre-distance and aspect-ratio penalties.

    Written as Ultralytics `bbox_iou(..., CIoU=True)`, including the no-grad trade-off term alpha.
    Returns the broadcast shape without the last dimension.
    """
    if xywh:
        box1, box2 = xywh_to_xyxy(box1), xywh_to_xyxy(box2)
    b1_x1, b1_y1, b1_x2, b1_y2 = box1[..., 0], box1[..., 1], box1[..., 2], box1[..., 3]
    b2_x1, b2_y1, b2_x2, b2_y2 = box2[..., 0], box2[..., 1], box2[..., 2], box2[..., 3]
    w1, h1 = b1_x2 - b1_x1, ops.clamp(b1_y2 - b1_y1, min=eps)
    w2, h2 = b2_x2 - b2_x1, ops.clamp(b2_y2 - b2_y1, min=eps)
    inter = (ops.clamp(ops.minimum(b1_x2, b2_x2) - ops.maximum(b1_x1, b2_x1), min=0.0)
             * ops.clamp(ops.minimum(b1_y2, b2_y2) - ops.maximum(b1_y1, b2_y1), min=0.0))
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = ops.maximum(b1_x2, b2_x2) - ops.minimum(b1_x1, b2_x1)
    ch = ops.maximum(b1_y2, b2_y2) - ops.minimum(b1_y1, b2_y1)
    c2 = cw * cw + ch * ch + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
    v = (4 / math.pi ** 2) * (ops.atan(w2 / h2) - ops.atan(w1 / h1)) ** 2
    alpha = ops.stop_gradient(v / (v - iou + (1 + eps)))
    return iou - (rho2 / c2 + v * alpha)


def dist_to_bbox(distance, anchor_points):
    """(left, top, right, bottom) distances from anchor points -> xyxy boxes (`dist2bbox`)."""
    lt, rb = distance[..., :2], distance[..., 2:4]
    return ops.cat((anchor_points - lt, anchor_points + rb), -1)


def bbox_to_dist(anchor_points, bbox, reg_max: int):
    """xyxy boxes -> ltrb distances clipped into the DFL range [0, reg_max - 1 - 0.01] (`bbox2dist`)."""
    dist = ops.cat((anchor_points - bbox[..., :2], bbox[..., 2:4] - anchor_points), -1)
    return ops.clamp(dist, 0.0, reg_max - 1 - 0.01)


def make_anchors(image_size: int, strides: tuple[int, ...], offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Anchor-point centres in grid units (A, 2) and their strides (A, 1), level by level, row-major.

    Static (computed from the input size), so they enter the graph as constants.
    """
    points, stride_column = [], []
    for s in strides:
        n_h = n_w = image_size // s
        sy, sx = np.meshgrid(np.arange(n_h) + offset, np.arange(n_w) + offset, indexing="ij")
        points.append(np.stack((sx, sy), -1).reshape(-1, 2))
        stride_column.append(np.full((n_h * n_w, 1), s))
    return np.concatenate(points).astype(np.float32), np.concatenate(stride_column).astype(np.float32)
