"""ResNet-50 v1.5: the image-classification workload (network.py, data.py, workload.py, presets.toml)."""
