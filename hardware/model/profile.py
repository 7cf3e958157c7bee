"""Hardware profiles: chip datasheets as TOML, parsed strictly into typed frozen dataclasses.

Units live in key names (`tflops_fp16`, `gib`, `gbps`, `_us`), efficiency curves are tables of
`[threshold, efficiency]` rows (descending thresholds, the last one 0), and every key is
checked: an unknown or missing key is a ConfigError naming the file, the key and what is allowed.
The schema *is* the dataclasses below, so the parser (hardware/model/profile_toml.py, which reads their type
hints) and the documentation cannot drift apart.

Any constant may be labelled an estimate: `[estimates."launch.step_us"] range = [100, 600]` and a
`reason`. For a number the range is in its own unit and must contain the value; for an efficiency
table it is a factor on every efficiency of the table (so it must contain 1). Predictions list the
estimates they depend on, and `with_estimate` gives the profile at either end of a range.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tomllib
import typing
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, Mapping

from hardware.model.profile_toml import EfficiencyTable, parse_section
from hardware.model.tip_estimates import TIP_RANGES, TipEstimates
from msbench.errors import ConfigError
from msbench.resources import suite_path

PROFILE_DIR = suite_path("hardware/profiles")


@dataclass(frozen=True)
class ProfileInfo:
    name: str
    description: str
    kind: str                  # "npu" (a separate accelerator) or "cpu" (the host is the device)
    # cpu profiles: the CPU model (/proc/cpuinfo "model name") of the runs the fit was measured on. A fit
    # predicts that CPU; msbench validate says when it is compared with another.
    fitted_cpu: str = ""


@dataclass(frozen=True)
class MatrixUnit:
    """The Cube (matrix engine). `efficiency` is indexed by the GEMM's reduction length K; a profile
    with `[kernel_classes]` costs its Cube kernels by class instead and leaves it out."""

    cores: int
    ghz: float
    tile: int                  # matrix tile edge: GEMM dims are padded up to a multiple of it
    tflops_fp16: float
    tflops_bf16: float         # 0 = not supported
    tflops_fp32: float         # 0 = no fp32 matrix path (fp32 matrix ops run as fp16)
    efficiency: EfficiencyTable | None = None
    tflops_hf32: float = 0.0   # HF32 (fp32 range, ~fp16 mantissa): the rate of convs under precision.hf32_convs


@dataclass(frozen=True)
class VectorUnit:
    """The Vector unit (elementwise, reductions, norms). `efficiency` is indexed by the elements of the
    largest tensor a kernel streams (compute.vector_work_elements)."""

    cores: int
    tflops_fp16: float
    tflops_fp32: float
    efficiency: EfficiencyTable


@dataclass(frozen=True)
class DeviceMemory:
    """Device memory and on-chip L2. `efficiency` is indexed by bytes an op moves (left out, like the
    Cube's, where `[kernel_classes]` holds per-class traffic tables)."""

    gib: float
    usable_gib: float          # what MindSpore may allocate (the OOM threshold)
    gbps: float
    l2_mib: float
    l2_gbps: float             # ops whose whole working set fits in L2 stream at this rate
    fragmentation: float       # allocator overhead on the dynamic (pool) memory (fraction)
    workspace_mib: float       # runtime workspace (kernel scratch, streams, collective buffers)
    efficiency: EfficiencyTable | None = None


@dataclass(frozen=True)
class OpCost:
    """One op type's measured kernel time on a CPU: fixed_us + us_per_mb·MB moved + us_per_gflop·GFLOP
    (hardware.model.compute.cost_work), fitted by hardware.calibration.derive on that CPU's per-op
    profiles. CPU kernels are not a step function of the work per core (oneDNN picks a different
    algorithm per shape), so where an op type has enough profiled shapes its own line beats its class's
    table; `rows` says how many distinct shapes it was fitted on."""

    op_type: str
    dtype: str                 # fp32 | fp16: the dtype the op computes in
    fixed_us: float
    us_per_mb: float
    us_per_gflop: float
    rows: int


@dataclass(frozen=True)
class KernelClasses:
    """Efficiency per kernel class (hardware.model.opclass), derived from per-op profiles by
    `python -m hardware.calibration.derive`. Cube classes are indexed by the work per core,
    ceil(M/16)·ceil(N/16)·ceil(K/16)·batch / cores, and are relative to the Cube peak of the dtype;
    Vector classes and `memory` (the traffic of Cube kernels) by the bytes a kernel moves, relative to
    the memory bandwidth. Every kernel costs `min_kernel_us` on the device before its roofline time,
    and a Vector kernel whose innermost dimension is not a whole number of 32-byte blocks (the unit
    the DaVinci MTE and Unified Buffer move) takes `unaligned_<class>` times its aligned time. A chip
    with Ascend's fused attention kernel has `flash_attention` (FlashAttentionScore) and
    `flash_attention_grad` tables, indexed by the tile-equivalents of the kernel's FLOPs per core,
    FLOPs / (2·16³·cores), relative to the Cube peak; a chip without them has no such kernel to cost."""

    min_kernel_us: float
    unaligned_elementwise: float
    unaligned_reduction: float
    unaligned_data_movement: float
    memory: EfficiencyTable
    conv_forward: EfficiencyTable
    conv_input_grad: EfficiencyTable
    conv_filter_grad: EfficiencyTable
    matmul: EfficiencyTable
    matmul_long_k: EfficiencyTable
    batch_matmul: EfficiencyTable
    elementwise: EfficiencyTable
    reduction: EfficiencyTable
    data_movement: EfficiencyTable
    flash_attention: EfficiencyTable | None = None
    flash_attention_grad: EfficiencyTable | None = None
    op_costs: tuple[OpCost, ...] | None = None     # a CPU's per-op-type lines; the tables cost the rest

    def table(self, kernel_class: str) -> EfficiencyTable:
        return typing.cast(EfficiencyTable, getattr(self, kernel_class))

    def unaligned(self, kernel_class: str) -> float:
        """The time factor of an unaligned kernel of this class (1 for the Cube classes)."""
        return float(getattr(self, f"unaligned_{kernel_class}", 1.0))

    def op_cost(self, op_type: str, dtype: str) -> OpCost | None:
        """The op type's own fitted line in this dtype, if the profile has one."""
        return op_cost_index(self.op_costs or ()).get((op_type, dtype))


@functools.cache
def op_cost_index(costs: tuple[OpCost, ...]) -> dict[tuple[str, str], OpCost]:
    return {(c.op_type, c.dtype): c for c in costs}


@dataclass(frozen=True)
class Estimate:
    """A constant with no direct measurement behind it: its plausible range and why."""

    key: str                   # dotted path of the constant: "launch.step_us", "kernel_classes.matmul"
    low: float
    high: float
    reason: str


# Every profile's estimates include the tips' (their values are HardwareProfile.tips).
TIP_ESTIMATES = tuple(Estimate(f"tips.{name}", rng["low"], rng["high"], reason) for name, rng, reason in TIP_RANGES)


@dataclass(frozen=True)
class Precision:
    matrix_fp32_as: str        # "fp32" or "fp16": what an fp32 matrix op really runs as (MindSpore default)
    fuses_casts: bool          # the compiler folds Cast into neighbouring kernels: no Cast kernel, no copy
    hf32_convs: bool = False   # CANN's default allow_hf32 on this chip: fp32 Conv-class ops run as HF32
                               # (cube.tflops_hf32), fp32 MatMul-class ops stay fp32


@dataclass(frozen=True)
class Launch:
    """Per-op host dispatch and per-step round trips, microseconds of *host* time on this profile's host."""

    pynative_us: float         # eager: Python + framework dispatch of one op
    graph_o0_us: float         # graph mode, kernel by kernel
    graph_o1_us: float         # graph mode with graph-kernel fusion (per fused or unfused kernel)
    graph_o2_us: float         # whole graph sunk to the device: per-task scheduling on the device
    step_us: float             # one host round trip per step (launch the graph, fetch the loss)
    asynchronous: bool         # host dispatch overlaps device execution (a separate accelerator)
    supports_sink: bool        # dataset sink mode available
    nonsink_us: float = 0.0    # without sink, the rest of the loop's per-step host work, serial with the device
                               # (derived by hardware/calibration/nonsink.py from a profiler step trace)


@dataclass(frozen=True)
class Host:
    cores_per_device: int      # host CPU cores available to each device's data pipeline
    core_speed: float          # single-core speed relative to the reference host (this CPU machine kind)
    link_gbps: float           # host <-> device link (PCIe), GB/s
    shares_device: bool        # the data pipeline competes with the device for the same cores


@dataclass(frozen=True)
class Level:
    """One level of the interconnect: `size` devices joined by `algorithm` over links of `gbps`."""

    name: str
    size: int                  # devices per group at this level (0 = unbounded, e.g. between servers)
    gbps: float                # per-link unidirectional bandwidth, GB/s
    latency_us: float          # α per message step
    algorithm: str             # "ring" or "mesh"


@dataclass(frozen=True)
class Comm:
    bucket_mib: float          # gradient fusion bucket size (buckets all-reduce while backward runs)
    efficiency: float          # achieved / link bandwidth of the collective library
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class HardwareProfile:
    profile: ProfileInfo
    cube: MatrixUnit
    vector: VectorUnit
    memory: DeviceMemory
    precision: Precision
    launch: Launch
    host: Host
    comm: Comm
    kernel_classes: KernelClasses | None = None
    tips: TipEstimates = TipEstimates()      # the tips' estimate constants (hardware/model/tip_estimates.py), not in the TOML
    estimates: tuple[Estimate, ...] = ()
    digest: str = ""           # sha256 of the canonical content (records carry it)

    @property
    def name(self) -> str:
        return self.profile.name

    @classmethod
    def from_toml(cls, path: str | Path) -> "HardwareProfile":
        path = Path(path)
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError("profile file", str(path), "an existing TOML file") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError("profile file", str(path), f"valid TOML ({err})") from None
        return cls.from_mapping(data, where=str(path))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "<profile>", complete: bool = True
                     ) -> "HardwareProfile":
        """`complete=False` accepts a profile without its efficiency tables (the datasheet part that
        hardware.calibration.derive reads before it writes them)."""
        parsed = parse_section(cls, data, where, "", skip=("digest", "estimates", "tips"))
        if complete and parsed.kernel_classes is None and (parsed.cube.efficiency is None or parsed.memory.efficiency is None):
            raise ConfigError("kernel_classes", None, "[kernel_classes] or both cube.efficiency and memory.efficiency",
                              where, rule="missing key")
        parsed = dataclasses.replace(parsed, estimates=tuple(sorted(
            parse_estimates(parsed, data.get("estimates", {}), where) + TIP_ESTIMATES, key=lambda e: e.key)))
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        return typing.cast(HardwareProfile, type(parsed)(**{**parsed.__dict__, "digest": digest}))


def constant(profile: HardwareProfile, key: str) -> Any:
    """The value at a dotted path: `launch.step_us`, `kernel_classes.matmul`, `comm.levels.hccs.gbps`."""
    value: Any = profile
    parts = key.split(".")
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(value, tuple):                     # comm.levels.<name>
            value = next((lv for lv in value if getattr(lv, "name", None) == part), None)
        elif is_dataclass(value) and part in {f.name for f in fields(value)} and part not in ("estimates", "digest"):
            value = getattr(value, part)
        else:
            raise KeyError(key)
        if value is None:
            raise KeyError(key)
        i += 1
    if not isinstance(value, (float, int, EfficiencyTable)) or isinstance(value, bool):
        raise KeyError(key)
    return value


def parse_estimates(profile: HardwareProfile, table: Any, where: str) -> tuple[Estimate, ...]:
    allowed = 'a table {range = [low, high], reason = "..."} per constant'
    if not isinstance(table, Mapping):
        raise ConfigError("estimates", table, allowed, where)
    out = []
    for key, entry in sorted(table.items()):
        name = f"estimates.{key}"
        if key.startswith("tips."):
            raise ConfigError(name, entry, "a constant of this profile (tips.* are hardware/model/tip_estimates.py's)", where)
        if not isinstance(entry, Mapping) or set(entry) != {"range", "reason"}:
            raise ConfigError(name, entry, allowed, where)
        rng, reason = entry["range"], entry["reason"]
        ok = (isinstance(rng, list) and len(rng) == 2 and isinstance(reason, str) and reason
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in rng))
        if not ok or rng[0] > rng[1]:
            raise ConfigError(name, entry, allowed + " with 0 <= low <= high", where)
        try:
            value = constant(profile, key)
        except KeyError:
            raise ConfigError(name, key, "the dotted path of a numeric constant or efficiency table",
                              where, rule="unknown constant") from None
        centre = 1.0 if isinstance(value, EfficiencyTable) else float(value)
        if not rng[0] <= centre <= rng[1]:
            raise ConfigError(name, rng, f"a range containing {centre:g}", where,
                              rule="the range must contain the value (a factor 1 for a table)")
        out.append(Estimate(key=key, low=float(rng[0]), high=float(rng[1]), reason=reason))
    return tuple(out)


def replace_path(obj: Any, parts: list[str], new: Any) -> Any:
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(obj, tuple):
        return tuple(replace_path(lv, rest, new) if lv.name == head else lv for lv in obj)
    return dataclasses.replace(obj, **{head: replace_path(getattr(obj, head), rest, new)})


def with_estimate(profile: HardwareProfile, key: str, value: float) -> HardwareProfile:
    """`profile` with estimate constant `key` set to `value` (a table: its efficiencies times `value`,
    capped at 1). The digest is marked so a record never confuses it with the shipped profile."""
    current = constant(profile, key)
    if isinstance(current, EfficiencyTable):
        new: Any = EfficiencyTable(tuple((t, min(1.0, e * value)) for t, e in current.rows))
    else:
        new = type(current)(value)
    changed = replace_path(profile, key.split("."), new)
    return dataclasses.replace(changed, digest=f"{profile.digest}+{key}={value:g}")


PROFILES_ENV = "MSBENCH_PROFILES"     # more profile folders (os.pathsep-separated), e.g. `msbench calibrate ascend --out`


def profile_dirs() -> list[Path]:
    """Where profiles are found: the shipped folder, then the folders in $MSBENCH_PROFILES (a user's own
    profiles, written by `msbench calibrate ascend --out DIR`); a shipped name wins."""
    return [PROFILE_DIR, *(Path(p) for p in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if p)]


def profile_path(name: str) -> Path | None:
    return next((d / f"{name}.toml" for d in profile_dirs() if (d / f"{name}.toml").is_file()), None)


def profile_names() -> list[str]:
    return sorted({p.stem for d in profile_dirs() for p in d.glob("*.toml")})


@cache
def load_profile(name: str) -> HardwareProfile:
    """A profile by name (`hardware/profiles/<name>.toml`); the file's `profile.name` must match."""
    path = profile_path(name)
    if path is None:
        raise ConfigError("hardware", name, ", ".join(profile_names()))
    profile = HardwareProfile.from_toml(path)
    if profile.name != name:
        raise ConfigError("profile.name", profile.name, name, str(path), rule="must match the file name")
    return profile



def default_preset(profile: HardwareProfile) -> str:
    """`msbench predict`'s preset when none is given: the published network (`full`) on an NPU profile,
    `tiny` on a cpu profile (which is checked against real tiny-preset runs)."""
    return "full" if profile.profile.kind == "npu" else "tiny"

def list_profiles() -> list[dict[str, Any]]:
    """Rows for `msbench list hardware`."""
    rows = []
    for name in profile_names():
        p = load_profile(name)
        rows.append({
            "name": name,
            "kind": p.profile.kind,
            "cube_tflops_fp16": p.cube.tflops_fp16,
            "cube_tflops_fp32": p.cube.tflops_fp32,
            "memory_gib": p.memory.usable_gib,
            "memory_gbps": p.memory.gbps,
            "fp32_matrix_as": p.precision.matrix_fp32_as,
            "sink": p.launch.supports_sink,
            "hash": p.digest[:12],
        })
    return rows
