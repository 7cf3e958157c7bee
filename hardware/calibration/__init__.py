"""Calibration: public component-level measurements and the scripts that turn them into profile tables.

`convert` reads the An et al. per-operator profiles (a local git mirror) into the small checked-in
table under `data/`; `derive` reads only that table and the datasheet facts of the profiles and
regenerates the derived block of each Ascend profile, with the chip's MatMul and fused-attention tables
from public component-level timings where they exist (`gemm_bench`, `flash_bench`). Nothing here reads the published end-to-end
runs (the validation set): calibration and validation stay disjoint.
"""
