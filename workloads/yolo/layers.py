"""The YOLO building blocks (Ultralytics `nn/modules/{conv,block}.py`, mindyolo `models/layers`).

Every convolution is Conv-BN-SiLU with BatchNorm eps 1e-3 and momentum 0.03 (MindSpore spells the
latter 0.97). Blocks carry a `recompute_unit` class attribute (workloads.base.marked_blocks): "selective" (C3, C2f: what selective recompute
replays) or "conv" (Conv-BN-SiLU, SPPF: added by full recompute). An attribute, not isinstance, because
AMP O1 rewrites cells into look-alike classes that isinstance does not recognise.
"""

from __future__ import annotations

import math

from mindspore import nn, ops


def make_divisible(x: float, divisor: int = 8) -> int:
    """Ultralytics `make_divisible`: channel counts scaled by the width multiple, rounded up to 8."""
    return int(math.ceil(x / divisor) * divisor)


def scaled_depth(n: int, depth: float) -> int:
    """Ultralytics `parse_model`: repeats scaled by the depth multiple, at least 1."""
    return max(round(n * depth), 1) if n > 1 else n


class ConvBNSiLU(nn.Cell):
    """`Conv`: k×k convolution without bias, BatchNorm, SiLU; 'same' padding k//2."""

    recompute_unit = "full"

    def __init__(self, c_in: int, c_out: int, k: int = 1, s: int = 1, p: int | None = None) -> None:
        super().__init__()
        pad = k // 2 if p is None else p
        self.conv = nn.Conv2d(c_in, c_out, k, s, pad_mode="pad", padding=pad, has_bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=1e-3, momentum=0.97)
        self.act = nn.SiLU()

    def construct(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Cell):
    """Residual pair of convolutions; v5 uses kernels (1, 3), v8 uses (3, 3)."""

    def __init__(self, c_in: int, c_out: int, shortcut: bool = True, kernels: tuple[int, int] = (1, 3),
                 e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c_out * e)
        self.cv1 = ConvBNSiLU(c_in, hidden, kernels[0], 1)
        self.cv2 = ConvBNSiLU(hidden, c_out, kernels[1], 1)
        self.add = shortcut and c_in == c_out

    def construct(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Cell):
    """YOLOv5 CSP block with three convolutions: two 1×1 branches, n bottlenecks on one, fused by a 1×1."""

    recompute_unit = "selective"

    def __init__(self, c_in: int, c_out: int, n: int = 1, shortcut: bool = True, e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c_out * e)
        self.cv1 = ConvBNSiLU(c_in, hidden, 1, 1)
        self.cv2 = ConvBNSiLU(c_in, hidden, 1, 1)
        self.cv3 = ConvBNSiLU(2 * hidden, c_out, 1, 1)
        self.m = nn.SequentialCell([Bottleneck(hidden, hidden, shortcut, (1, 3), 1.0) for _ in range(n)])

    def construct(self, x):
        return self.cv3(ops.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class C2f(nn.Cell):
    """YOLOv8 CSP block: split a 1×1 output in two, chain n bottlenecks, concatenate every stage."""

    recompute_unit = "selective"

    def __init__(self, c_in: int, c_out: int, n: int = 1, shortcut: bool = False, e: float = 0.5) -> None:
        super().__init__()
        self.hidden = int(c_out * e)
        self.cv1 = ConvBNSiLU(c_in, 2 * self.hidden, 1, 1)
        self.cv2 = ConvBNSiLU((2 + n) * self.hidden, c_out, 1, 1)
        self.m = nn.CellList([Bottleneck(self.hidden, self.hidden, shortcut, (3, 3), 1.0) for _ in range(n)])

    def construct(self, x):
        y = self.cv1(x)
        outs = [y[:, :self.hidden], y[:, self.hidden:]]
        last = outs[1]
        for block in self.m:
            last = block(last)
            outs.append(last)
        return self.cv2(ops.cat(outs, 1))


class SPPF(nn.Cell):
    """Spatial pyramid pooling, fast: three chained 5×5 max-pools concatenated with their input."""

    recompute_unit = "full"

    def __init__(self, c_in: int, c_out: int, k: int = 5) -> None:
        super().__init__()
        hidden = c_in // 2
        self.cv1 = ConvBNSiLU(c_in, hidden, 1, 1)
        self.cv2 = ConvBNSiLU(hidden * 4, c_out, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, pad_mode="same")

    def construct(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(ops.cat((x, y1, y2, self.m(y2)), 1))


class Upsample(nn.Cell):
    """Nearest-neighbour 2× upsampling (`nn.Upsample(None, 2, 'nearest')`)."""

    def construct(self, x):
        return ops.interpolate(x, size=(x.shape[2] * 2, x.shape[3] * 2), mode="nearest")
