"""ResNet-50 v1.5 in MindSpore: nn.Conv2d / nn.BatchNorm2d / nn.ReLU, bottleneck blocks marked for recompute.

v1.5 (torchvision, NVIDIA DeepLearningExamples, mindcv) puts the stride-2 downsampling on the 3x3
convolution of a bottleneck, not on the first 1x1 (v1). At width 64, blocks (3, 4, 6, 3) and 1000
classes it has 25,557,032 trainable parameters (the published 25.56 M).

Why our own implementation rather than mindcv's `create_model('resnet50')`: the recompute knob needs
to know which cells are blocks (each `Bottleneck` carries `recompute_unit`), the tiny preset needs
the same code at smaller width/depth, and it is one less dependency pinned to MindSpore versions.
"""

from __future__ import annotations

from typing import Sequence

from mindspore import nn, ops
from mindspore.common.initializer import HeNormal

EXPANSION = 4              # bottleneck output channels = EXPANSION x its 3x3 width


def conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    """Bias-free conv with torch-style symmetric padding and He (fan_out) init, as torchvision does."""
    return nn.Conv2d(cin, cout, kernel, stride=stride, pad_mode="pad", padding=kernel // 2, has_bias=False,
                     weight_init=HeNormal(mode="fan_out", nonlinearity="relu"))


def batch_norm(channels: int, zero_gamma: bool = False) -> nn.BatchNorm2d:
    """BN (momentum 0.9 = torch's 0.1); the last BN of a block starts at gamma 0 (Goyal et al. 2017)."""
    return nn.BatchNorm2d(channels, momentum=0.9, eps=1e-5, gamma_init="zeros" if zero_gamma else "ones")


class Bottleneck(nn.Cell):
    """1x1 reduce, 3x3 (carries the stride: v1.5), 1x1 expand; projection shortcut when the shape changes."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * EXPANSION
        self.conv1, self.bn1 = conv(cin, width, 1), batch_norm(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), batch_norm(width)
        self.conv3, self.bn3 = conv(width, cout, 1), batch_norm(cout, zero_gamma=True)
        self.relu = nn.ReLU()
        self.project = stride != 1 or cin != cout
        self.shortcut = nn.SequentialCell(conv(cin, cout, 1, stride), batch_norm(cout)) if self.project else nn.Identity()
        self.recompute_unit = "selective"      # workloads.base.marked_blocks

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


class Stem(nn.Cell):
    """7x7/2 conv, BN, ReLU, 3x3/2 max pool: 224 -> 56."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.recompute_unit = "full"           # workloads.base.marked_blocks
        self.conv, self.bn, self.relu = conv(3, width, 7, 2), batch_norm(width), nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)

    def construct(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class ResNet(nn.Cell):
    """Stem, four stages of bottlenecks (stride 1, 2, 2, 2), global average pool, dense classifier."""

    def __init__(self, num_classes: int, width: int = 64, blocks: Sequence[int] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.stem = Stem(width)
        layers, cin = [], width
        for stage, count in enumerate(blocks):
            stage_width = width * 2**stage
            for i in range(count):
                layers.append(Bottleneck(cin, stage_width, 2 if (i == 0 and stage > 0) else 1))
                cin = stage_width * EXPANSION
        self.blocks = nn.SequentialCell(layers)
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(cin, num_classes)   # MindSpore's default init is torch nn.Linear's

    def construct(self, x):
        x = self.blocks(self.stem(x))
        x = ops.mean(x, (2, 3))
        return self.fc(x)

