"""YOLOv5 training loss (Ultralytics `utils/loss.py::ComputeLoss`) with static shapes for graph mode.

Target assignment: a ground-truth box matches an anchor of a level when both its width and height
ratios to the anchor lie within 1/anchor_t..anchor_t; it is assigned to its own grid cell and to the
two neighbouring cells nearest its centre (offset 0.5). Losses: CIoU on matched predictions, class
BCE on matched predictions, objectness BCE on every cell with the (detached) CIoU as its target,
levels weighted (4.0, 1.0, 0.4). Ground truth arrives padded to M boxes per image with a mask, so
every candidate (M boxes × 3 anchors × 5 cells) is computed and masked instead of filtered.
Where two candidates land on one cell, the objectness target keeps the larger IoU (Ultralytics'
`sort_obj_iou=True` behaviour), which is order-independent and therefore deterministic.
"""

from __future__ import annotations

import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

from workloads.yolo.boxes import bbox_ciou
from workloads.yolo.network import STRIDES, V5_ANCHORS

# Neighbour-cell offsets: own cell, then left, up, right, down (times g = 0.5).
OFFSETS = np.array([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], np.float32) * 0.5


def v5_candidates(labels, grid_h: int, grid_w: int, anchors, anchor_t: float):
    """Candidate assignments of one level, every candidate kept and flagged.

    labels: (B, M, 6) [valid, class, cx, cy, w, h], coordinates normalised to the image.
    anchors: (na, 2) anchor sizes in grid cells of this level.
    Returns (valid (B,M,na,5), cell index (B,M,na,5) into the level's na*H*W cells,
    target box (B,M,1,5,4) xywh relative to the cell, anchor (1,1,na,1,2)).
    """
    na = anchors.shape[0]
    gain = Tensor(np.array([grid_w, grid_h], np.float32))
    gxy = labels[:, :, 2:4] * gain                                            # (B, M, 2)
    gwh = labels[:, :, 4:6] * gain
    ratio = gwh[:, :, None, :] / anchors[None, None]                         # (B, M, na, 2)
    worst = ops.amax(ops.maximum(ratio, 1.0 / ratio), axis=-1)
    match = worst < anchor_t                                                  # (B, M, na)
    gxi = gain - gxy
    frac, frac_i = gxy - ops.floor(gxy), gxi - ops.floor(gxi)
    near_lo = ops.logical_and(frac < 0.5, gxy > 1.0)                         # j, k
    near_hi = ops.logical_and(frac_i < 0.5, gxi > 1.0)                       # l, m
    own = ops.ones_like(near_lo[:, :, :1])
    cells = ops.cat((own, near_lo, near_hi), -1)                             # (B, M, 5)
    present = labels[:, :, 0] > 0.5
    valid = ops.logical_and(ops.logical_and(present[:, :, None, None], match[:, :, :, None]), cells[:, :, None, :])
    offsets = Tensor(OFFSETS)
    gij = ops.floor(gxy[:, :, None, :] - offsets[None, None])               # (B, M, 5, 2)
    gi = ops.clamp(gij[..., 0], 0.0, grid_w - 1.0)
    gj = ops.clamp(gij[..., 1], 0.0, grid_h - 1.0)
    tbox = ops.cat((gxy[:, :, None, :] - ops.stack((gi, gj), -1),
                    ops.broadcast_to(gwh[:, :, None, :], gij.shape)), -1)     # (B, M, 5, 4)
    cell = (gj * grid_w + gi).astype(ms.int32)                              # (B, M, 5)
    anchor_offset = Tensor(np.arange(na, dtype=np.int32) * grid_h * grid_w)
    index = cell[:, :, None, :] + anchor_offset[None, None, :, None]        # (B, M, na, 5)
    return valid, index, tbox[:, :, None], anchors[None, None, :, None, :]


class YOLOv5Loss(nn.Cell):
    """`construct(p3, p4, p5, labels)` -> scalar loss (Ultralytics hyp.scratch-low gains)."""

    def __init__(self, num_classes: int, image_size: int, box: float = 0.05, obj: float = 1.0,
                 cls: float = 0.5, anchor_t: float = 4.0, balance: tuple[float, ...] = (4.0, 1.0, 0.4)) -> None:
        super().__init__()
        nl = len(STRIDES)
        self.nc, self.anchor_t, self.balance = num_classes, anchor_t, balance
        self.box_gain = box * 3 / nl
        self.cls_gain = cls * num_classes / 80 * 3 / nl
        self.obj_gain = obj * (image_size / 640) ** 2 * 3 / nl
        self.grids = tuple(image_size // s for s in STRIDES)
        self.anchors = [Tensor(np.array(a, np.float32).reshape(-1, 2) / s) for a, s in zip(V5_ANCHORS, STRIDES)]
        self.bce = nn.BCEWithLogitsLoss(reduction="none")

    def level_loss(self, p, labels, level: int):
        b, h, w = p.shape[0], p.shape[2], p.shape[3]
        anchors = self.anchors[level]
        na, no = anchors.shape[0], self.nc + 5
        cells = na * h * w
        pred = p.reshape(b, na, no, h, w).transpose(0, 1, 3, 4, 2).reshape(b, cells, no)
        valid, index, tbox, anchor = v5_candidates(labels, h, w, anchors, self.anchor_t)
        shape = valid.shape                                                   # (B, M, na, 5)
        flat_index = (index + (ops.arange(b, dtype=ms.int32) * cells).reshape(b, 1, 1, 1)).reshape(-1)
        picked = ops.gather(pred.reshape(b * cells, no), flat_index, 0).reshape(shape + (no,))
        pxy = ops.sigmoid(picked[..., :2]) * 2 - 0.5
        pwh = (ops.sigmoid(picked[..., 2:4]) * 2) ** 2 * anchor
        iou = bbox_ciou(ops.cat((pxy, pwh), -1), ops.broadcast_to(tbox, shape + (4,)), xywh=True)
        weight = valid.astype(ms.float32)
        count = ops.maximum(weight.sum(), 1.0)
        lbox = ((1.0 - iou) * weight).sum() / count
        classes = labels[:, :, 1].astype(ms.int32)
        onehot = ops.one_hot(classes, self.nc, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32))
        tcls = ops.broadcast_to(onehot[:, :, None, None, :], shape + (self.nc,))
        lcls = (self.bce(picked[..., 5:], tcls).sum(-1) * weight).sum() / (count * self.nc) if self.nc > 1 else 0.0
        score = ops.stop_gradient(ops.clamp(iou, min=0.0)) * weight
        tobj = ops.clamp(ops.unsorted_segment_max(score.reshape(-1), flat_index, b * cells), min=0.0)
        lobj = self.bce(pred[..., 4].reshape(-1), tobj).mean()
        return lbox, lobj, lcls

    def construct(self, p3, p4, p5, labels):
        lbox, lobj, lcls = 0.0, 0.0, 0.0
        for level, p in enumerate((p3, p4, p5)):
            box, obj, cls = self.level_loss(p, labels, level)
            lbox = lbox + box
            lobj = lobj + obj * self.balance[level]
            lcls = lcls + cls
        return (lbox * self.box_gain + lobj * self.obj_gain + lcls * self.cls_gain) * p3.shape[0]
