"""Convert the An et al. (HPCC 2022) per-operator Ascend 910 profiles into the checked-in table.

    python -m hardware.calibration.convert GIT_DIR [--commit SHA]

GIT_DIR is a clone (bare or not) of github.com/Huawei-Performance-Model/Ascend-910B. For each
network run we keep, `<run>.csv` (op type, block dim, op_info shapes/dtypes/formats) is joined to
`aicore_intermediate_0_detail.csv` (AI-Core execution time, ms) on the full op name. Identical
kernels of one run (same type, block dim, tensors) are merged into one row with their count and
median duration, which keeps the table small without losing a distinct shape.

Dtype labels are kept as the profiler wrote them (NUMBER_TYPE_FLOAT -> fp32, FLOAT16 -> fp16). They
are not trustworthy in every run: in the ResNet-50 runs the input image Cast reads "FLOAT16" and
writes "FLOAT", and the Momentum parameters and BN statistics read "FLOAT16", the reverse of an
AMP O2 step, and taken as written many large kernels would stream faster than the HBM peak.
`derive` decides per network which reading the HBM peak allows (its "dtype check" lines).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess

from hardware.calibration.profiler_kernels import Kernel
from hardware.calibration.table import FIELDS, group_kernels
from msbench.resources import suite_path

REPO = "github.com/Huawei-Performance-Model/Ascend-910B"
# network name, batch -> run folder under application_test/. The BERT folders are named
# bert_<batch>_32: every one is BERT-base at seq 128 (its attention BatchMatMuls are batch x 12 heads x
# 128 x 128, its dense layers batch x 128 rows); ViT is ViT-B/32 at 224 (50 tokens, d 768, MLP 3072);
# DeepFM is named by its batch (its dense layers are batch rows). memorybound_app/ holds the BERT
# batches final_test/ lacks (its bert_128_32 is byte-identical to final_test's).
RUNS = {
    ("resnet50", 16): "final_test/resnet50_16_224_224",
    ("resnet50", 32): "final_test/resnet50_32_224_224",
    ("resnet50", 64): "final_test/resnet50_64_224_224",
    ("bert-base", 32): "memorybound_app/bert_32_32",
    ("bert-base", 64): "final_test/bert_64_32",
    ("bert-base", 128): "final_test/bert_128_32",
    ("bert-base", 256): "final_test/bert_256_32",
    ("bert-base", 512): "memorybound_app/bert_512_32",
    ("vit-b32", 64): "final_test/vit64",
    ("vit-b32", 128): "final_test/vit128",
    ("vit-b32", 256): "final_test/vit256",
    ("deepfm", 12000): "final_test/deepfm_12000",
    ("deepfm", 16000): "final_test/deepfm_16000",
    ("deepfm", 20000): "final_test/deepfm_20000",
    ("yolov5", 16): "final_test/yolov5_16",
    ("yolov5", 32): "final_test/yolov5_32",
    ("yolov5", 64): "final_test/yolov5_64",
    ("inceptionv3", 16): "final_test/inceptionv3_16",
    ("inceptionv3", 32): "final_test/inceptionv3_32",
    ("inceptionv3", 64): "final_test/inceptionv3_64",
}
DTYPE = {"NUMBER_TYPE_FLOAT": "fp32", "NUMBER_TYPE_FLOAT16": "fp16", "NUMBER_TYPE_INT16": "int16", "NUMBER_TYPE_INT32": "int32",
         "NUMBER_TYPE_UINT": "uint8", "NUMBER_TYPE_UINT8": "uint8", "NUMBER_TYPE_BEGIN": "bool"}
OUT = suite_path("hardware/calibration/data/an2022_ascend910_ops.csv")


def git_show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def tensor_text(spec: dict) -> str:
    """`dtype:format:d0xd1x...` for one op_info tensor."""
    shape = "x".join(s.strip() for s in str(spec["shape"]).split(",") if s.strip()) or "1"
    return f"{DTYPE[spec['data_type']]}:{spec['format']}:{shape}"


def run_rows(network: str, batch: int, ops_csv: str, times_csv: str) -> list[dict]:
    return group_kernels(network, batch, ((k.op_type, k.block_dim, k.inputs, k.outputs, k.duration_us)
                                          for k in run_kernels(ops_csv, times_csv)))


def run_kernels(ops_csv: str, times_csv: str) -> list[Kernel]:
    """Each kernel of one run that has an AI-Core timing row, in the run file's order (an2022_profiler writes
    them as a MindSpore Profiler's kernel_details.csv)."""
    times = {r["full_op_name"]: float(r["execution_time"]) for r in csv.DictReader(io.StringIO(times_csv))}
    kernels = []
    for row in csv.DictReader(io.StringIO(ops_csv)):
        if row["full_op_name"] not in times:
            continue                                  # a few ops have no AI-Core timing row
        info = json.loads(row["op_info"])
        ins = ";".join(tensor_text(v) for k, v in info.items() if k.startswith("input"))
        outs = ";".join(tensor_text(v) for k, v in info.items() if k.startswith("output"))
        kernels.append(Kernel(name=row["full_op_name"], op_type=row["op_type"], core="AI_CORE",
                              block_dim=int(row["block_dim"]), inputs=ins, outputs=outs,
                              duration_us=times[row["full_op_name"]] * 1000.0, step=""))
    return kernels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--commit", default="6066283e4ee22d0b5f5cb3c58cd1099f2ba8192a")
    args = parser.parse_args(argv)
    header, rows = [f"# source: {REPO} commit {args.commit} (An et al., HPCC 2022, Ascend 910 per-op AI-Core times)",
                    "# converted by: python -m hardware.calibration.convert; duration_us = median AI-Core time of",
                    "# `count` identical kernels; tensors are dtype:format:shape (dtypes as labelled, see convert.py)"], []
    for (network, batch), run in RUNS.items():
        base, name = f"application_test/{run}", run.rsplit("/", 1)[-1]
        header.append(f"# {network} batch {batch}: {base}/{name}.csv + {base}/aicore_intermediate_0_detail.csv")
        rows += run_rows(network, batch, git_show(args.git_dir, args.commit, f"{base}/{name}.csv"),
                         git_show(args.git_dir, args.commit, f"{base}/aicore_intermediate_0_detail.csv"))
    with open(OUT, "w", newline="") as fh:
        fh.write("\n".join(header) + "\n")
        writer = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
