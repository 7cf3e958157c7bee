"""Generated labelled images for ResNet, stored as JPEG, and the ImageNet-style transforms that decode them.

No downloads: every image is a pure function of (class, split, index). A class is a striped texture
(orientation, frequency, two colours) with a blob of a third colour; each sample adds random phase,
orientation jitter, blob position, brightness and Gaussian noise, so the task needs learning but is
learnable at any number of classes. Samples are JPEG bytes at the preset's stored resolution, so the
pipeline pays the real host cost of decoding, as an ImageNet pipeline does.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image

DATA_VERSION = 1                  # bump when the generator changes, so MindRecord files are rewritten
SPLIT_SEEDS = {"train": 11, "eval": 23}
JPEG_QUALITY = 90
NOISE_STD = 40.0                  # pixel noise (0-255 scale) that makes samples differ within a class

# ImageNet channel statistics on the 0-255 scale, as the reference ResNet pipelines normalise.
MEAN_RGB = (123.675, 116.28, 103.53)
STD_RGB = (58.395, 57.12, 57.375)


class ClassStyle:
    """The class-dependent parameters of the texture and blob (derived from the class id only)."""

    def __init__(self, label: int) -> None:
        rng = np.random.default_rng([7, label])
        self.angle = float(rng.uniform(0.0, math.pi))
        self.cycles = float(rng.uniform(2.0, 6.0))          # stripes across the image width
        self.colours = rng.uniform(0.0, 255.0, size=(3, 3)).astype(np.float32)  # stripe a, stripe b, blob
        self.blob_radius = float(rng.uniform(0.12, 0.3))     # fraction of the shorter side


def render(label: int, width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """One HxWx3 uint8 image of class `label`."""
    style = ClassStyle(label)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = style.angle + rng.normal(0.0, 0.1)
    along = (xs * math.cos(angle) + ys * math.sin(angle)) / width
    wave = 0.5 + 0.5 * np.sin(2 * math.pi * style.cycles * along + rng.uniform(0, 2 * math.pi))
    a, b, blob = style.colours
    image = a + (b - a) * wave[..., None]
    cy, cx = rng.uniform(0.2, 0.8) * height, rng.uniform(0.2, 0.8) * width
    radius = style.blob_radius * min(width, height) * rng.uniform(0.8, 1.2)
    inside = (ys - cy) ** 2 + (xs - cx) ** 2 < radius**2
    image[inside] = blob
    image = image * rng.uniform(0.7, 1.3) + rng.normal(0.0, NOISE_STD, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def encode_jpeg(image: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


class JpegImageSource:
    """Random access to `(jpeg_bytes uint8[n], label int32)`; each image is encoded once, then served as
    stored bytes (like a reader of JPEG files), so repeated epochs measure decoding, not generation."""

    def __init__(self, split: str, count: int, num_classes: int, width: int, height: int) -> None:
        self.split, self.count, self.num_classes = split, count, num_classes
        self.width, self.height = width, height
        self._stored: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.count

    def label(self, index: int) -> int:
        return index % self.num_classes     # balanced classes; the pipeline shuffles the order

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < self.count:
            raise IndexError(index)
        if index not in self._stored:
            rng = np.random.default_rng([SPLIT_SEEDS[self.split], index])
            self._stored[index] = encode_jpeg(render(self.label(index), self.width, self.height, rng))
        return self._stored[index], np.array(self.label(index), dtype=np.int32)


def train_transforms(image_size: int, augment: str) -> list:
    """`imagenet`: the reference MindSpore ResNet train pipeline (random-resized crop fused with decode,
    flip, normalise, HWC->CHW); `light`: decode, resize, flip (for CPU-sized presets)."""
    from mindspore.dataset import vision

    tail = [vision.RandomHorizontalFlip(prob=0.5), vision.Normalize(MEAN_RGB, STD_RGB), vision.HWC2CHW()]
    if augment == "imagenet":
        return [vision.RandomCropDecodeResize(image_size, scale=(0.08, 1.0), ratio=(0.75, 1.333))] + tail
    return [vision.Decode(), vision.Resize((image_size, image_size))] + tail


def eval_transforms(image_size: int, augment: str) -> list:
    """No randomness: resize the short side to size/0.875 and centre-crop (imagenet), or resize (light)."""
    from mindspore.dataset import vision

    if augment == "imagenet":
        resize = [vision.Resize(int(round(image_size / 0.875))), vision.CenterCrop(image_size)]
    else:
        resize = [vision.Resize((image_size, image_size))]
    return [vision.Decode(), *resize, vision.Normalize(MEAN_RGB, STD_RGB), vision.HWC2CHW()]
