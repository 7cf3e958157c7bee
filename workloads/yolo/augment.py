"""YOLO's image pipeline in Pillow + numpy (Ultralytics `utils/augmentations.py`, mindyolo `data/dataset.py`).

Train (`mosaic`, the mindyolo scratch configs): decode four JPEGs, mosaic them on a 2s×2s canvas,
random affine (translate 0.1, scale 0.5, no rotation or shear) back to s×s, HSV jitter (0.015, 0.7, 0.4)
and a left-right flip. `light` (CPU presets): decode, letterbox and flip. Eval: decode and letterbox.
Randomness comes from (seed, sample index, how often this sample was seen), never from a shared
generator, so results do not depend on how the pipeline's workers interleave.
Output: image float32 (3, s, s) in [0, 1] and labels float32 (M, 6) [valid, class, cx, cy, w, h]
normalised to the image, padded with zero rows to M boxes.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from PIL import Image

from workloads.yolo.data import decode_jpeg

PAD_VALUE = 114
AUGMENTS = ("mosaic", "light")


@dataclass(frozen=True)
class AugmentConfig:
    translate: float = 0.1
    scale: float = 0.5
    degrees: float = 0.0
    shear: float = 0.0
    hsv: tuple[float, float, float] = (0.015, 0.7, 0.4)
    flip: float = 0.5


def load_resized(jpeg: np.ndarray, boxes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode and resize so the long side is `size` (`load_image`); boxes scale with the image."""
    image = decode_jpeg(jpeg)
    h, w = image.shape[:2]
    r = size / max(h, w)
    if r != 1:
        image = np.asarray(Image.fromarray(image).resize((max(1, round(w * r)), max(1, round(h * r))),
                                                         Image.Resampling.BILINEAR))
    boxes = boxes.copy()
    boxes[:, 1:] *= r
    return image, boxes


def mosaic(parts: list[tuple[np.ndarray, np.ndarray]], size: int, rng: np.random.Generator):
    """Four images around a random centre of a 2s×2s canvas (`load_mosaic`)."""
    canvas = np.full((2 * size, 2 * size, 3), PAD_VALUE, np.uint8)
    yc, xc = (int(rng.uniform(size / 2, 3 * size / 2)) for _ in range(2))
    out = []
    for i, (image, boxes) in enumerate(parts):
        h, w = image.shape[:2]
        if i == 0:
            x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
            x1b, y1b, x2b, y2b = w - (x2a - x1a), h - (y2a - y1a), w, h
        elif i == 1:
            x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, 2 * size), yc
            x1b, y1b, x2b, y2b = 0, h - (y2a - y1a), min(w, x2a - x1a), h
        elif i == 2:
            x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(2 * size, yc + h)
            x1b, y1b, x2b, y2b = w - (x2a - x1a), 0, w, min(y2a - y1a, h)
        else:
            x1a, y1a, x2a, y2a = xc, yc, min(xc + w, 2 * size), min(2 * size, yc + h)
            x1b, y1b, x2b, y2b = 0, 0, min(w, x2a - x1a), min(y2a - y1a, h)
        canvas[y1a:y2a, x1a:x2a] = image[y1b:y2b, x1b:x2b]
        shifted = boxes.copy()
        shifted[:, [1, 3]] += x1a - x1b
        shifted[:, [2, 4]] += y1a - y1b
        out.append(shifted)
    boxes = np.concatenate(out)
    boxes[:, 1:] = np.clip(boxes[:, 1:], 0, 2 * size)
    return canvas, boxes


def box_candidates(before: np.ndarray, after: np.ndarray, wh_thr: float = 2, ar_thr: float = 100,
                   area_thr: float = 0.1) -> np.ndarray:
    """Boxes that survive an augmentation: > 2 px, > 10% of their scaled area, aspect < 100."""
    w1, h1 = before[:, 2] - before[:, 0], before[:, 3] - before[:, 1]
    w2, h2 = after[:, 2] - after[:, 0], after[:, 3] - after[:, 1]
    ar = np.maximum(w2 / (h2 + 1e-16), h2 / (w2 + 1e-16))
    return (w2 > wh_thr) & (h2 > wh_thr) & (w2 * h2 / (w1 * h1 + 1e-16) > area_thr) & (ar < ar_thr)


def random_affine(image: np.ndarray, boxes: np.ndarray, rng: np.random.Generator, cfg: AugmentConfig,
                  out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """`random_perspective` without perspective: centre, rotate+scale, shear, translate to out_size."""
    h, w = image.shape[:2]
    centre = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1]], np.float64)
    a, s = math.radians(rng.uniform(-cfg.degrees, cfg.degrees)), rng.uniform(1 - cfg.scale, 1 + cfg.scale)
    rotate = np.array([[s * math.cos(a), s * math.sin(a), 0], [-s * math.sin(a), s * math.cos(a), 0], [0, 0, 1]])
    shear = np.eye(3)
    shear[0, 1] = math.tan(math.radians(rng.uniform(-cfg.shear, cfg.shear)))
    shear[1, 0] = math.tan(math.radians(rng.uniform(-cfg.shear, cfg.shear)))
    translate = np.eye(3)
    translate[0, 2] = rng.uniform(0.5 - cfg.translate, 0.5 + cfg.translate) * out_size
    translate[1, 2] = rng.uniform(0.5 - cfg.translate, 0.5 + cfg.translate) * out_size
    m = translate @ shear @ rotate @ centre
    inverse = np.linalg.inv(m)[:2].reshape(-1)
    warped = Image.fromarray(image).transform((out_size, out_size), Image.Transform.AFFINE, tuple(inverse),
                                              Image.Resampling.BILINEAR, fillcolor=(PAD_VALUE,) * 3)
    if len(boxes):
        corners = boxes[:, [1, 2, 3, 4, 1, 4, 3, 2]].reshape(-1, 2)
        xy = (np.c_[corners, np.ones(len(corners))] @ m.T)[:, :2].reshape(-1, 8)
        new = np.c_[xy[:, 0::2].min(1), xy[:, 1::2].min(1), xy[:, 0::2].max(1), xy[:, 1::2].max(1)]
        new = np.clip(new, 0, out_size)
        keep = box_candidates(boxes[:, 1:] * s, new)
        boxes = np.c_[boxes[keep, :1], new[keep]].astype(np.float32)
    return np.asarray(warped), boxes


def hsv_jitter(image: np.ndarray, rng: np.random.Generator, gains: tuple[float, float, float]) -> np.ndarray:
    """Random hue shift and saturation/value scaling through lookup tables (`augment_hsv`)."""
    r = rng.uniform(-1, 1, 3) * np.array(gains) + 1
    x = np.arange(256, dtype=np.float64)
    luts = [((x * r[0]) % 256).astype(np.uint8), np.clip(x * r[1], 0, 255).astype(np.uint8),
            np.clip(x * r[2], 0, 255).astype(np.uint8)]
    bands = Image.fromarray(image).convert("HSV").split()
    hsv = Image.merge("HSV", [band.point(lut.tolist()) for band, lut in zip(bands, luts)])
    return np.asarray(hsv.convert("RGB"))


def letterbox(image: np.ndarray, boxes: np.ndarray, size: int, scaleup: bool = True):
    """Resize keeping the aspect ratio to fit size×size and pad the rest with grey, centred."""
    h, w = image.shape[:2]
    r = size / max(h, w) if scaleup else min(1.0, size / max(h, w))
    nw, nh = round(w * r), round(h * r)
    if (nw, nh) != (w, h):
        image = np.asarray(Image.fromarray(image).resize((nw, nh), Image.Resampling.BILINEAR))
    top, left = round((size - nh) / 2 - 0.1), round((size - nw) / 2 - 0.1)
    canvas = np.full((size, size, 3), PAD_VALUE, np.uint8)
    canvas[top:top + nh, left:left + nw] = image
    boxes = boxes.copy()
    boxes[:, [1, 3]] = boxes[:, [1, 3]] * r + left
    boxes[:, [2, 4]] = boxes[:, [2, 4]] * r + top
    return canvas, boxes


def to_columns(image: np.ndarray, boxes: np.ndarray, size: int, max_boxes: int) -> tuple[np.ndarray, np.ndarray]:
    """(image CHW float32 in [0, 1], labels (M, 6) [valid, class, cx, cy, w, h] normalised, zero-padded)."""
    labels = np.zeros((max_boxes, 6), np.float32)
    boxes = boxes[:max_boxes]
    n = len(boxes)
    labels[:n, 0] = 1.0
    labels[:n, 1] = boxes[:, 0]
    labels[:n, 2] = (boxes[:, 1] + boxes[:, 3]) / 2 / size
    labels[:n, 3] = (boxes[:, 2] + boxes[:, 4]) / 2 / size
    labels[:n, 4] = (boxes[:, 3] - boxes[:, 1]) / size
    labels[:n, 5] = (boxes[:, 4] - boxes[:, 2]) / size
    return np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32) / 255.0, labels


class YoloTransform:
    """The pipeline's Python map: stored columns (jpeg, boxes)×k, index -> (image, labels)."""

    def __init__(self, mode: str, size: int, max_boxes: int, seed: int, cfg: AugmentConfig = AugmentConfig()) -> None:
        self.mode, self.size, self.max_boxes, self.seed, self.cfg = mode, size, max_boxes, seed, cfg
        self._seen: dict[int, int] = defaultdict(int)
        self._lock = threading.Lock()

    def rng(self, index: int) -> np.random.Generator:
        with self._lock:
            visit = self._seen[index]
            self._seen[index] += 1
        return np.random.default_rng([self.seed, index, visit])

    def __call__(self, *columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = int(columns[-1])
        parts = [load_resized(columns[i], np.asarray(columns[i + 1], np.float32).reshape(-1, 5), self.size)
                 for i in range(0, len(columns) - 1, 2)]
        if self.mode == "eval":
            image, boxes = letterbox(*parts[0], self.size, scaleup=False)
            return to_columns(image, boxes, self.size, self.max_boxes)
        rng = self.rng(index)
        if self.mode == "mosaic":
            image, boxes = random_affine(*mosaic(parts, self.size, rng), rng, self.cfg, self.size)
            image = hsv_jitter(image, rng, self.cfg.hsv)
        else:
            image, boxes = letterbox(*parts[0], self.size)
        if rng.random() < self.cfg.flip:
            image = np.ascontiguousarray(image[:, ::-1])
            boxes = boxes.copy()
            boxes[:, [1, 3]] = self.size - boxes[:, [3, 1]]
        return to_columns(image, boxes, self.size, self.max_boxes)
