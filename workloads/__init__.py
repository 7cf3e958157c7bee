"""Workloads: the networks msbench trains (ResNet50, the YOLO family, the Transformer family)."""
