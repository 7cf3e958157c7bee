"""mAP@0.5 and mAP@0.5:0.95 with pycocotools' COCOeval (the numbers COCO and mindyolo report)."""

from __future__ import annotations

import contextlib
import io

import numpy as np


def coco_map(ground_truth: list[np.ndarray], predictions: list[np.ndarray], num_classes: int) -> dict[str, float]:
    """ground_truth[i]: (n, 5) [class, x1, y1, x2, y2]; predictions[i]: (m, 6) [x1, y1, x2, y2, score, class].

    Returns {"map50", "map50_95"}; 0.0 when nothing was detected (COCOeval then has nothing to rank).
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images, annotations, results = [], [], []
    for image_id, (gt, pred) in enumerate(zip(ground_truth, predictions), start=1):
        images.append({"id": image_id})
        for c, x1, y1, x2, y2 in np.asarray(gt, np.float64).reshape(-1, 5):
            w, h = x2 - x1, y2 - y1
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": int(c) + 1,
                                "bbox": [x1, y1, w, h], "area": w * h, "iscrowd": 0})
        for x1, y1, x2, y2, score, c in np.asarray(pred, np.float64).reshape(-1, 6):
            results.append({"image_id": image_id, "category_id": int(c) + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                            "score": score})
    if not results or not annotations:
        return {"map50": 0.0, "map50_95": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = {"images": images, "annotations": annotations,
                        "categories": [{"id": c + 1} for c in range(num_classes)]}
        coco.createIndex()
        evaluator = COCOeval(coco, coco.loadRes(results), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return {"map50": max(0.0, float(evaluator.stats[1])), "map50_95": max(0.0, float(evaluator.stats[0]))}
