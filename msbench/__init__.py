"""msbench: which MindSpore tuning knobs pay off, for which model, on which Ascend chip."""

__version__ = "0.1.0"
