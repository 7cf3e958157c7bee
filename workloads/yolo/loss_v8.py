"""YOLOv8 training loss (Ultralytics `utils/loss.py::v8DetectionLoss`, `utils/tal.py`) in static shapes.

Assignment is the task-aligned assigner (Feng et al., TOOD 2021): for every ground-truth box the
anchor points inside it are ranked by score^alpha * CIoU^beta, the top k become positives, an anchor
claimed by several boxes keeps the one it overlaps most, and the soft class target is the alignment
normalised per box. Losses: class BCE against those soft targets, CIoU and distribution focal loss
(DFL, Li et al. 2020) on positives, each weighted by the target score. Ground truth is padded to M
boxes per image with a mask, so every tensor is (B, M, anchors) and the graph is static.
"""

from __future__ import annotations

import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

from workloads.yolo.boxes import bbox_ciou, bbox_to_dist, dist_to_bbox, make_anchors, xywh_to_xyxy
from workloads.yolo.network import STRIDES


class TaskAlignedAssigner(nn.Cell):
    """`construct(scores, boxes, anchor_points, gt_labels, gt_boxes, gt_mask)` ->
    (target_boxes (B,A,4), target_scores (B,A,nc), fg_mask (B,A) bool), all without gradient.

    scores: sigmoid class scores (B, A, nc); boxes: predicted xyxy (B, A, 4) and anchor_points
    (A, 2) in pixels; gt_labels (B, M) int; gt_boxes (B, M, 4) xyxy pixels; gt_mask (B, M) float.
    """

    def __init__(self, num_classes: int, topk: int = 10, alpha: float = 0.5, beta: float = 6.0,
                 eps: float = 1e-9) -> None:
        super().__init__()
        self.nc, self.topk, self.alpha, self.beta, self.eps = num_classes, topk, alpha, beta, eps

    def construct(self, scores, boxes, anchor_points, gt_labels, gt_boxes, gt_mask):
        scores, boxes = ops.stop_gradient(scores), ops.stop_gradient(boxes)
        # Anchor centres strictly inside each box (`select_candidates_in_gts`).
        lt = anchor_points[None, None] - gt_boxes[:, :, None, :2]
        rb = gt_boxes[:, :, None, 2:] - anchor_points[None, None]
        in_gts = (ops.amin(ops.cat((lt, rb), -1), axis=-1) > self.eps).astype(ms.float32)   # (B, M, A)
        candidate = in_gts * gt_mask[:, :, None]
        # Alignment metric (`get_box_metrics`): score of the box's class times CIoU^beta.
        onehot = ops.one_hot(gt_labels, self.nc, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32))
        class_scores = ops.bmm(onehot, scores.transpose(0, 2, 1))                      # (B, M, A)
        overlaps = ops.clamp(bbox_ciou(gt_boxes[:, :, None, :], boxes[:, None, :, :]), min=0.0) * candidate
        align = ops.pow(class_scores * candidate, self.alpha) * ops.pow(overlaps, self.beta)
        # Top-k anchors per box (`select_topk_candidates`).
        _, topk_idx = ops.topk(align, self.topk, dim=-1)
        topk_mask = ops.tensor_scatter_elements(ops.zeros_like(align), topk_idx,
                                                ops.ones(topk_idx.shape, ms.float32), axis=-1)
        mask_pos = topk_mask * candidate                                                # (B, M, A)
        # An anchor claimed by several boxes keeps the one it overlaps most (`select_highest_overlaps`).
        fg = mask_pos.sum(1)
        best = ops.one_hot(ops.argmax(overlaps, dim=1), gt_mask.shape[1], Tensor(1.0, ms.float32),
                           Tensor(0.0, ms.float32)).transpose(0, 2, 1)                    # (B, M, A)
        mask_pos = ops.where(fg[:, None, :] > 1, best, mask_pos)
        fg = mask_pos.sum(1)
        # Targets of each anchor from its box (`get_targets`).
        assigned = ops.one_hot(ops.argmax(mask_pos, dim=1), gt_mask.shape[1], Tensor(1.0, ms.float32),
                               Tensor(0.0, ms.float32))                                    # (B, A, M)
        target_boxes = ops.bmm(assigned, gt_boxes)
        target_onehot = ops.bmm(assigned, onehot) * (fg > 0).astype(ms.float32)[:, :, None]
        # Soft targets: alignment normalised so each box's best anchor gets its best IoU.
        align = align * mask_pos
        pos_align = ops.amax(align, axis=-1, keepdims=True)
        pos_overlap = ops.amax(overlaps * mask_pos, axis=-1, keepdims=True)
        norm = ops.amax(align * pos_overlap / (pos_align + self.eps), axis=1)           # (B, A)
        target_scores = target_onehot * norm[:, :, None]
        return (ops.stop_gradient(target_boxes), ops.stop_gradient(target_scores), fg > 0)


class YOLOv8Loss(nn.Cell):
    """`construct(p3, p4, p5, labels)` -> scalar loss; gains box 7.5, cls 0.5, dfl 1.5 (default.yaml)."""

    def __init__(self, num_classes: int, image_size: int, reg_max: int = 16, box: float = 7.5,
                 cls: float = 0.5, dfl: float = 1.5, topk: int = 10) -> None:
        super().__init__()
        self.nc, self.reg_max, self.image_size = num_classes, reg_max, image_size
        self.gains = (box, cls, dfl)
        points, strides = make_anchors(image_size, STRIDES)
        self.anchor_points, self.stride = Tensor(points), Tensor(strides)
        self.bins = Tensor(np.arange(reg_max, dtype=np.float32))
        self.assigner = TaskAlignedAssigner(num_classes, topk)
        self.bce = nn.BCEWithLogitsLoss(reduction="none")

    def flatten(self, p3, p4, p5):
        """Level maps (B, 4R+nc, H, W) -> distributions (B, A, 4, R) and class logits (B, A, nc)."""
        b, no = p3.shape[0], p3.shape[1]
        flat = ops.cat([p.reshape(b, no, -1) for p in (p3, p4, p5)], 2).transpose(0, 2, 1)
        return flat[..., :4 * self.reg_max].reshape(b, -1, 4, self.reg_max), flat[..., 4 * self.reg_max:]

    def construct(self, p3, p4, p5, labels):
        dist_logits, cls_logits = self.flatten(p3, p4, p5)
        batch = dist_logits.shape[0]
        # Decode boxes in grid units: expected bin of each side's distribution (the DFL "integral").
        pred_boxes = dist_to_bbox((ops.softmax(dist_logits, -1) * self.bins).sum(-1), self.anchor_points)
        gt_mask = (labels[:, :, 0] > 0.5).astype(ms.float32)
        gt_boxes = xywh_to_xyxy(labels[:, :, 2:6]) * self.image_size
        target_boxes, target_scores, fg = self.assigner(
            ops.sigmoid(cls_logits), pred_boxes * self.stride, self.anchor_points * self.stride,
            labels[:, :, 1].astype(ms.int32), gt_boxes, gt_mask)
        score_sum = ops.maximum(target_scores.sum(), 1.0)
        loss_cls = self.bce(cls_logits, target_scores).sum() / score_sum
        fg_weight = target_scores.sum(-1) * fg.astype(ms.float32)                       # (B, A)
        target_boxes = target_boxes / self.stride
        iou = bbox_ciou(pred_boxes, target_boxes)
        loss_box = ((1.0 - iou) * fg_weight).sum() / score_sum
        loss_dfl = (self.dfl(dist_logits, bbox_to_dist(self.anchor_points, target_boxes, self.reg_max))
                    * fg_weight).sum() / score_sum
        box, cls, dfl = self.gains
        return (loss_box * box + loss_cls * cls + loss_dfl * dfl) * batch

    def dfl(self, dist_logits, target):
        """Distribution focal loss: cross-entropy to the two bins around the target, linearly weighted."""
        log_p = ops.log_softmax(dist_logits, -1)                                          # (B, A, 4, R)
        left = ops.floor(target)
        w_left = left + 1 - target
        on, off = Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)
        left_i = left.astype(ms.int32)
        ce_left = -(log_p * ops.one_hot(left_i, self.reg_max, on, off)).sum(-1)
        ce_right = -(log_p * ops.one_hot(left_i + 1, self.reg_max, on, off)).sum(-1)
        return (ce_left * w_left + ce_right * (1 - w_left)).mean(-1)
