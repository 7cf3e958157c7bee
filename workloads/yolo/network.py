"""YOLOv5 (v6.0+, anchor-based) and YOLOv8 (anchor-free, decoupled) built from depth/width multiples.

Layer tables follow Ultralytics `yolov5s.yaml` / `yolov8.yaml` (identical in mindyolo's configs):
backbone channels 64..1024 and repeats (3, 6, 9|6, 3) scaled by the multiples, SPPF, a PAN neck and
a detection head on strides 8/16/32. `construct(image)` returns the raw head maps of the three levels;
the losses and the eval decoder read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from mindspore import Tensor, nn, ops

from workloads.yolo.layers import C2f, C3, SPPF, ConvBNSiLU, Upsample, make_divisible, scaled_depth

STRIDES = (8, 16, 32)
# YOLOv5 P3/P4/P5 anchors in pixels (yolov5s.yaml `anchors`).
V5_ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))


@dataclass(frozen=True)
class YoloArch:
    """The scale of one network: version ("v5"|"v8"), multiples, classes, input size."""

    version: str
    depth: float
    width: float
    num_classes: int
    image_size: int
    max_channels: int = 1024
    reg_max: int = 16                          # v8: bins of the distribution-focal box regression

    def ch(self, c: int) -> int:
        return make_divisible(min(c, self.max_channels) * self.width, 8)

    def n(self, repeats: int) -> int:
        return scaled_depth(repeats, self.depth)

    @property
    def outputs_per_anchor(self) -> int:
        return self.num_classes + 5 if self.version == "v5" else self.num_classes + 4 * self.reg_max


class Backbone(nn.Cell):
    """CSPDarknet: stem, four stride-2 stages with CSP blocks, SPPF; returns P3, P4, P5."""

    def __init__(self, arch: YoloArch) -> None:
        super().__init__()
        block, repeats = (C3, (3, 6, 9, 3)) if arch.version == "v5" else (C2f, (3, 6, 6, 3))
        c = [arch.ch(x) for x in (64, 128, 256, 512, 1024)]
        self.stem = ConvBNSiLU(3, c[0], 6, 2, 2) if arch.version == "v5" else ConvBNSiLU(3, c[0], 3, 2)
        self.stages = nn.CellList([
            nn.SequentialCell([ConvBNSiLU(c[i], c[i + 1], 3, 2), block(c[i + 1], c[i + 1], arch.n(r), True)])
            for i, r in enumerate(repeats)])
        self.sppf = SPPF(c[4], c[4], 5)

    def construct(self, x):
        x = self.stem(x)
        p2 = self.stages[0](x)
        p3 = self.stages[1](p2)
        p4 = self.stages[2](p3)
        p5 = self.sppf(self.stages[3](p4))
        return p3, p4, p5


class V5Neck(nn.Cell):
    """YOLOv5 PAN: 1×1 laterals before each upsample, C3 (no shortcut) after each concat."""

    def __init__(self, arch: YoloArch) -> None:
        super().__init__()
        c3, c4, c5 = arch.ch(256), arch.ch(512), arch.ch(1024)
        n = arch.n(3)
        self.up = Upsample()
        self.lat5 = ConvBNSiLU(c5, c4, 1, 1)
        self.td4 = C3(2 * c4, c4, n, False)
        self.lat4 = ConvBNSiLU(c4, c3, 1, 1)
        self.td3 = C3(2 * c3, c3, n, False)
        self.down3 = ConvBNSiLU(c3, c3, 3, 2)
        self.bu4 = C3(2 * c3, c4, n, False)
        self.down4 = ConvBNSiLU(c4, c4, 3, 2)
        self.bu5 = C3(2 * c4, c5, n, False)

    def construct(self, p3, p4, p5):
        l5 = self.lat5(p5)
        l4 = self.lat4(self.td4(ops.cat((self.up(l5), p4), 1)))
        o3 = self.td3(ops.cat((self.up(l4), p3), 1))
        o4 = self.bu4(ops.cat((self.down3(o3), l4), 1))
        o5 = self.bu5(ops.cat((self.down4(o4), l5), 1))
        return o3, o4, o5


class V8Neck(nn.Cell):
    """YOLOv8 PAN: upsample and concatenate directly, C2f (no shortcut) after each concat."""

    def __init__(self, arch: YoloArch) -> None:
        super().__init__()
        c3, c4, c5 = arch.ch(256), arch.ch(512), arch.ch(1024)
        n = arch.n(3)
        self.up = Upsample()
        self.td4 = C2f(c5 + c4, c4, n, False)
        self.td3 = C2f(c4 + c3, c3, n, False)
        self.down3 = ConvBNSiLU(c3, c3, 3, 2)
        self.bu4 = C2f(c3 + c4, c4, n, False)
        self.down4 = ConvBNSiLU(c4, c4, 3, 2)
        self.bu5 = C2f(c4 + c5, c5, n, False)

    def construct(self, p3, p4, p5):
        t4 = self.td4(ops.cat((self.up(p5), p4), 1))
        o3 = self.td3(ops.cat((self.up(t4), p3), 1))
        o4 = self.bu4(ops.cat((self.down3(o3), t4), 1))
        o5 = self.bu5(ops.cat((self.down4(o4), p5), 1))
        return o3, o4, o5


def head_conv(c_in: int, c_out: int, prior: np.ndarray, add: bool) -> nn.Conv2d:
    """A 1×1 prediction convolution with the Ultralytics bias prior (`_initialize_biases`): YOLOv5 adds it
    to the default initial bias, YOLOv8 sets the bias to it."""
    conv = nn.Conv2d(c_in, c_out, 1, 1, has_bias=True)
    bias = prior.astype(np.float32) + (conv.bias.asnumpy() if add else 0)
    conv.bias.set_data(Tensor(bias.astype(np.float32)))
    return conv


class V5Detect(nn.Cell):
    """Coupled anchor head: per level a 1×1 conv to anchors × (box 4, objectness 1, classes).

    The objectness/class priors count cells at the preset's input size (Ultralytics writes 640, the
    size it trains at), so a small input starts with the same expected objects per image."""

    def __init__(self, arch: YoloArch, channels: tuple[int, int, int]) -> None:
        super().__init__()
        no, na = arch.outputs_per_anchor, len(V5_ANCHORS[0]) // 2
        convs = []
        for c, s in zip(channels, STRIDES):
            bias = np.zeros((na, no))
            bias[:, 4] = math.log(8 / (arch.image_size / s) ** 2)          # ~8 objects per image
            bias[:, 5:] = math.log(0.6 / (arch.num_classes - 0.99))
            convs.append(head_conv(c, na * no, bias.reshape(-1), add=True))
        self.m = nn.CellList(convs)

    def construct(self, x3, x4, x5):
        return self.m[0](x3), self.m[1](x4), self.m[2](x5)


class V8Detect(nn.Cell):
    """Decoupled anchor-free head: a box branch (4 × reg_max bins) and a class branch per level."""

    def __init__(self, arch: YoloArch, channels: tuple[int, int, int]) -> None:
        super().__init__()
        nc, rm = arch.num_classes, arch.reg_max
        c2, c3 = max(16, channels[0] // 4, rm * 4), max(channels[0], min(nc, 100))
        box_prior = np.ones(4 * rm)
        self.box = nn.CellList([nn.SequentialCell([ConvBNSiLU(c, c2, 3), ConvBNSiLU(c2, c2, 3),
                                                   head_conv(c2, 4 * rm, box_prior, add=False)]) for c in channels])
        cls_priors = [np.full(nc, math.log(5 / nc / (arch.image_size / s) ** 2)) for s in STRIDES]  # ~5 objects
        self.cls = nn.CellList([nn.SequentialCell([ConvBNSiLU(c, c3, 3), ConvBNSiLU(c3, c3, 3),
                                                   head_conv(c3, nc, prior, add=False)])
                                for c, prior in zip(channels, cls_priors)])

    def construct(self, x3, x4, x5):
        return (ops.cat((self.box[0](x3), self.cls[0](x3)), 1),
                ops.cat((self.box[1](x4), self.cls[1](x4)), 1),
                ops.cat((self.box[2](x5), self.cls[2](x5)), 1))


class YoloNet(nn.Cell):
    """Backbone, neck and head; returns the three raw level maps (B, outputs, H, W)."""

    def __init__(self, arch: YoloArch) -> None:
        super().__init__()
        self.arch = arch
        self.backbone = Backbone(arch)
        channels = (arch.ch(256), arch.ch(512), arch.ch(1024))
        if arch.version == "v5":
            self.neck, self.head = V5Neck(arch), V5Detect(arch, channels)
        else:
            self.neck, self.head = V8Neck(arch), V8Detect(arch, channels)

    def construct(self, image):
        p3, p4, p5 = self.backbone(image)
        o3, o4, o5 = self.neck(p3, p4, p5)
        return self.head(o3, o4, o5)
