"""Where and with what a run was made: captured once per run, stored in every record."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

SOURCE_ROOT = Path(__file__).resolve().parent.parent
ENV_KEYS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
            "OPENBLAS_CORETYPE", "MS_COMPILER_CACHE_ENABLE", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME",
            "MSBENCH_CACHE")
CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_bf16", "fma", "f16c")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state(root: Path = SOURCE_ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the suite's checkout; asv installs a wheel, so it passes MSBENCH_COMMIT instead."""
    commit = os.environ.get("MSBENCH_COMMIT") or os.environ.get("ASV_COMMIT")
    if commit:
        return commit, False
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
        return head, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def cpu_info() -> dict[str, Any]:
    model, flags = platform.processor() or "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            if key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": sorted(f for f in CPU_FLAGS_OF_INTEREST if f in flags)}


def ascend_versions() -> dict[str, str]:
    """CANN and driver versions where an Ascend toolkit is installed (empty elsewhere)."""
    out = {}
    for key, path in (("cann", "/usr/local/Ascend/ascend-toolkit/latest/version.cfg"),
                      ("driver", "/usr/local/Ascend/driver/version.info")):
        try:
            out[key] = Path(path).read_text().strip().splitlines()[0]
        except (OSError, IndexError):
            continue
    return out


def capture_provenance() -> dict[str, Any]:
    commit, dirty = git_state()
    return {
        "commit": commit,
        "dirty": dirty,
        "msbench": package_version("msbench"),
        "mindspore": package_version("mindspore"),
        "numpy": package_version("numpy"),
        "python": platform.python_version(),
        "cpu": cpu_info(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "ascend": ascend_versions(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
