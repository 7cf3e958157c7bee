"""A generated shapes detection set: JPEG scenes of coloured shapes with boxes and classes.

No downloads: scene `i` of a split is a pure function of (split, i). Class c is a pair of a hue
(c % 20, of a 20-hue palette) and a shape (rectangle, ellipse, triangle, cross: (c // 20 + c) % 4):
80 distinct pairs at `full`, and at `tiny` a few classes that differ in both colour and shape.
Shapes sit on a noisy two-colour gradient, may overlap a little, and the box is the tight box of the
drawn shape. Scenes are stored as JPEG bytes (encoded once)
at the preset's stored size, so the pipeline pays the real cost of decoding, as a COCO pipeline does.
A stored row is (jpeg uint8[n], boxes float32 (n, 5) [class, x1, y1, x2, y2] in stored pixels).
"""

from __future__ import annotations

import colorsys
import io

import numpy as np
from PIL import Image, ImageDraw

DATA_VERSION = 2                   # bump when scenes change, so MindRecord files are rewritten
SPLIT_SEEDS = {"train": 31, "eval": 47}
SHAPES = ("rectangle", "ellipse", "triangle", "cross")
HUES = 20
JPEG_QUALITY = 90
MAX_OVERLAP_IOU = 0.3              # a new shape is redrawn elsewhere if it hides an earlier one more than this


def class_style(label: int) -> tuple[str, tuple[int, int, int]]:
    """(shape, colour) of a class: unique for 4 x 20 classes; hues interleaved (x7 mod 20) so that
    neighbouring ids look different."""
    shape = SHAPES[(label // HUES + label) % len(SHAPES)]
    r, g, b = colorsys.hsv_to_rgb((label % HUES) * 7 % HUES / HUES, 0.85, 0.95)
    return shape, (int(r * 255), int(g * 255), int(b * 255))


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[float, float, float, float],
               colour: tuple[int, int, int]) -> None:
    x1, y1, x2, y2 = box
    if shape == "rectangle":
        draw.rectangle(box, fill=colour)
    elif shape == "ellipse":
        draw.ellipse(box, fill=colour)
    elif shape == "triangle":
        draw.polygon([((x1 + x2) / 2, y1), (x2, y2), (x1, y2)], fill=colour)
    else:  # cross: two bars a third of the box thick
        tx, ty = (x2 - x1) / 3, (y2 - y1) / 3
        draw.rectangle((x1 + tx, y1, x2 - tx, y2), fill=colour)
        draw.rectangle((x1, y1 + ty, x2, y2 - ty), fill=colour)


def box_iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box with each of `others` (n, 4)."""
    lt, rb = np.maximum(box[:2], others[:, :2]), np.minimum(box[2:], others[:, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=1)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    return inter / (area(box) + area(others) - inter)


def render_scene(rng: np.random.Generator, width: int, height: int, num_classes: int, max_objects: int,
                 size_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(image HxWx3 uint8, boxes (n, 5) float32 [class, x1, y1, x2, y2])."""
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    c0, c1 = rng.uniform(40, 215, size=(2, 3))
    t = (xs * rng.uniform(-1, 1) + ys * rng.uniform(-1, 1)) / max(width, height)
    t = (t - t.min()) / max(float(np.ptp(t)), 1e-6)
    background = c0 + (c1 - c0) * t[..., None] + rng.normal(0, 12, size=(height, width, 3))
    image = Image.fromarray(np.clip(background, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    boxes: list[list[float]] = []
    short = min(width, height)
    for _ in range(int(rng.integers(1, max_objects + 1))):
        label = int(rng.integers(num_classes))
        for _attempt in range(10):
            w = rng.uniform(*size_range) * short
            h = w * rng.uniform(0.6, 1.6)
            h = min(h, 0.95 * height)
            x1, y1 = rng.uniform(0, width - w), rng.uniform(0, height - h)
            box = np.array([x1, y1, x1 + w, y1 + h])
            if not boxes or box_iou(box, np.array(boxes)[:, 1:]).max() < MAX_OVERLAP_IOU:
                break
        shape, colour = class_style(label)
        shade = rng.uniform(0.8, 1.0)
        draw_shape(draw, shape, tuple(box), tuple(int(c * shade) for c in colour))  # type: ignore[arg-type]
        boxes.append([label, *box])
    return np.asarray(image), np.array(boxes, np.float32).reshape(-1, 5)


def encode_jpeg(image: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def decode_jpeg(data: np.ndarray) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(np.asarray(data).tobytes())).convert("RGB"))


class ShapesSource:
    """Random access to stored scenes `(jpeg, boxes)`; each scene is rendered and encoded once."""

    def __init__(self, split: str, count: int, num_classes: int, width: int, height: int, max_objects: int,
                 size_range: tuple[float, float]) -> None:
        self.split, self.count, self.num_classes = split, count, num_classes
        self.width, self.height, self.max_objects, self.size_range = width, height, max_objects, size_range
        self._stored: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < self.count:
            raise IndexError(index)
        if index not in self._stored:
            rng = np.random.default_rng([SPLIT_SEEDS[self.split], index])
            image, boxes = render_scene(rng, self.width, self.height, self.num_classes, self.max_objects,
                                        self.size_range)
            self._stored[index] = (encode_jpeg(image), boxes)
        return self._stored[index]


class MosaicSource:
    """Rows of four stored scenes (a scene and three partners drawn from its index) plus the index, so
    a MindRecord row holds everything YOLO's mosaic needs and decoding happens in the pipeline."""

    def __init__(self, scenes: ShapesSource, group: int) -> None:
        self.scenes, self.group = scenes, group

    def __len__(self) -> int:
        return len(self.scenes)

    def partners(self, index: int) -> list[int]:
        rng = np.random.default_rng([SPLIT_SEEDS[self.scenes.split], index, 1])
        return [index] + [int(i) for i in rng.integers(0, len(self.scenes), self.group - 1)]

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        row: list[np.ndarray] = []
        for i in self.partners(index):
            row.extend(self.scenes[i])
        return (*row, np.array(index, np.int32))
