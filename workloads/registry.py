"""Workload names -> import paths: exact names, imported only when a workload is built."""

from __future__ import annotations

from functools import cache

from msbench.errors import ConfigError
from msbench.plugins import import_object
from workloads.base import Workload

WORKLOADS: dict[str, str] = {
    "resnet50": "workloads.resnet50.workload:ResNet50Workload",
    "yolov5s": "workloads.yolo.workload:YOLOv5sWorkload",
    "yolov8n": "workloads.yolo.workload:YOLOv8nWorkload",
    "yolov8s": "workloads.yolo.workload:YOLOv8sWorkload",
    "transformer-base": "workloads.transformer.workload:TransformerBaseWorkload",
    "transformer-large": "workloads.transformer.workload:TransformerLargeWorkload",
    "bert-base": "workloads.transformer.workload:BertBaseWorkload",
    "bert-large": "workloads.transformer.workload:BertLargeWorkload",
    "gpt2-small": "workloads.transformer.workload:GPT2SmallWorkload",
    "llama2-7b": "workloads.transformer.workload:Llama2_7BWorkload",
    "llama2-13b": "workloads.transformer.workload:Llama2_13BWorkload",
    "llama2-70b": "workloads.transformer.workload:Llama2_70BWorkload",
    "gpt3-175b": "workloads.transformer.workload:GPT3_175BWorkload",
}


@cache
def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise ConfigError("workload", name, ", ".join(WORKLOADS))
    cls = import_object(WORKLOADS[name])
    return cls()  # type: ignore[operator]
