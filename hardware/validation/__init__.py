"""Published end-to-end MindSpore-on-Ascend training runs, read only by `msbench validate`.

Nothing under hardware/calibration/ or hardware/profiles/ may read this package: a figure that
checks the model cannot also have tuned it (tests/hardware/test_validation_isolation.py).
"""
