"""The accuracy runs pair by seed: one seed gives every numerics setting the same initial weights and the same
data order, and another seed changes both (the paired interval of a delta rests on this)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.mindspore.accuracy import ACCURACY_PRESET
from msbench.settings import make_settings
from workloads.registry import get_workload


def initial_weights(workload, preset, knobs) -> list[np.ndarray]:
    import mindspore as ms

    from workloads.train_step import apply_amp

    settings = make_settings(knobs)
    ms.set_seed(settings.seed)
    network = apply_amp(workload.build_parallel_network(preset, settings), settings)
    return [p.asnumpy() for p in network.get_parameters()]


def first_labels(workload, preset, knobs, tmp_path, batches: int = 2) -> list[np.ndarray]:
    data = workload.make_dataset(preset, "train", make_settings(knobs), preset.batch_size, workdir=tmp_path)
    out = []
    for i, row in enumerate(data.create_tuple_iterator(num_epochs=1, output_numpy=True)):
        if i == batches:
            break
        out.append(row[-1])
    return out


@pytest.mark.parametrize("name", ["resnet50", "yolov8s"])
def test_one_seed_pairs_init_and_data_order_across_numerics(name, tmp_path):
    wl = get_workload(name)
    preset = wl.preset(ACCURACY_PRESET)
    fp32, fp16 = {"amp_level": "O0", "seed": 3}, {"amp_level": "O2", "loss_scale": "dynamic", "seed": 3}
    other = {**fp32, "seed": 4}
    same = zip(initial_weights(wl, preset, fp32), initial_weights(wl, preset, fp16), strict=True)
    assert all(np.array_equal(a, b) for a, b in same)
    assert not all(np.array_equal(a, b) for a, b in zip(initial_weights(wl, preset, fp32),
                                                         initial_weights(wl, preset, other)))
    order = first_labels(wl, preset, fp32, tmp_path)
    assert all(np.array_equal(a, b) for a, b in zip(order, first_labels(wl, preset, fp16, tmp_path), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(order, first_labels(wl, preset, other, tmp_path)))
