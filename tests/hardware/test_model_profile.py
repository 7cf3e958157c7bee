"""Hardware profiles: every shipped profile loads; bad files are refused with the file, key and rule."""

from __future__ import annotations

import tomllib

import pytest

from hardware.model.profile import (PROFILE_DIR, EfficiencyTable, HardwareProfile, constant, list_profiles,
                                    load_profile, profile_names, with_estimate)
from msbench.errors import ConfigError

SHIPPED = ("ascend910a", "ascend910b", "ascend910b4", "atlas300i-duo", "cpu")


def write_variant(tmp_path, edit, base: str = "ascend910b") -> str:
    """A shipped profile's text, edited by `edit(text) -> text`, written to a temp file."""
    text = (PROFILE_DIR / f"{base}.toml").read_text()
    path = tmp_path / "variant.toml"
    path.write_text(edit(text))
    return str(path)


def test_every_shipped_profile_loads_and_is_listed():
    assert set(SHIPPED) <= set(profile_names())
    rows = {r["name"]: r for r in list_profiles()}
    assert set(SHIPPED) <= set(rows)
    assert rows["ascend910b"]["cube_tflops_fp16"] == pytest.approx(353.9)
    assert rows["ascend910a"]["fp32_matrix_as"] == "fp16" and rows["ascend910b"]["fp32_matrix_as"] == "fp32"
    assert not rows["cpu"]["sink"]


def test_units_and_topology_as_documented():
    a, b = load_profile("ascend910a"), load_profile("ascend910b")
    assert [(lv.name, lv.size, lv.algorithm) for lv in a.comm.levels] == [
        ("hccs", 4, "mesh"), ("pcie", 2, "ring"), ("roce", 0, "ring")]
    assert [(lv.name, lv.size) for lv in b.comm.levels] == [("hccs", 8), ("roce", 0)]
    assert b.memory.usable_gib < b.memory.gib
    assert a.cube.tflops_fp32 == 0 and b.cube.tflops_fp32 > 0


def test_the_a2_host_is_the_910a_hosts_core_at_the_7265s_clock():
    """The two training servers' hosts differ only as their CPUs' published figures do: one more socket's
    worth of cores per device (4 x 64 against 4 x 48, over 8 NPUs) and the same Kunpeng 920 core at
    3.0 GHz against 2.6 GHz; the A2's speed is derived from the 910A's estimate, and its range too."""
    a, b = load_profile("ascend910a"), load_profile("ascend910b")
    assert (a.host.cores_per_device, b.host.cores_per_device) == (4 * 48 // 8, 4 * 64 // 8)
    assert b.host.core_speed == pytest.approx(a.host.core_speed * 3.0 / 2.6, abs=5e-4)
    old, new = (next(e for e in p.estimates if e.key == "host.core_speed") for p in (a, b))
    assert (new.low, new.high) == pytest.approx((old.low, round(old.high * 3.0 / 2.6, 2)))


def test_hash_is_content_based(tmp_path):
    same = HardwareProfile.from_toml(write_variant(tmp_path, lambda t: t + "\n# a comment only\n"))
    assert same.digest == load_profile("ascend910b").digest
    changed = HardwareProfile.from_toml(write_variant(tmp_path, lambda t: t.replace("gbps = 1382.0", "gbps = 1600.0", 1)))
    assert changed.digest != same.digest and len(changed.digest) == 64


def test_efficiency_table_lookup():
    table = EfficiencyTable(((512.0, 0.20), (256.0, 0.18), (64.0, 0.12), (0.0, 0.06)))
    assert table.at(4096) == 0.20 and table.at(512) == 0.20 and table.at(300) == 0.18 and table.at(1) == 0.06
    classes = load_profile("ascend910a").kernel_classes
    for (threshold, eff), (_, below) in zip(classes.matmul.rows, classes.matmul.rows[1:]):
        assert classes.matmul.at(threshold) == eff and classes.matmul.at(threshold * 0.999) == below


# An end-to-end fitted cpu profile's Cube line as it stands in the file (a refit changes its value, not the edits
# below); `cpu` and `cpu-icelake` take their kernel times from [kernel_classes] instead.
CPU_CUBE = next(line.split("#")[0].strip() for line in
                (PROFILE_DIR / "cpu-xeon.toml").read_text().split("[cube]")[1].splitlines() if line.startswith("efficiency ="))


@pytest.mark.parametrize("edit, key, words, base", [
    (lambda t: t.replace("[cube]\n", "[cube]\nturbo = true\n"), "cube.turbo", "unknown key", "ascend910b"),
    (lambda t: t.replace("tile = 16", ""), "cube.tile", "missing key", "ascend910b"),
    (lambda t: t.replace("usable_gib = 58.0", 'usable_gib = "lots"'), "memory.usable_gib", "a number", "ascend910b"),
    (lambda t: t.replace('matrix_fp32_as = "fp32"', 'matrix_fp32_as = "fp8"'), "precision.matrix_fp32_as", "fp32|fp16",
     "ascend910b"),
    (lambda t: t.replace(CPU_CUBE, "efficiency = [[512, 0.2], [64, 0.1]]"), "cube.efficiency",
     "the last threshold must be 0", "cpu-xeon"),
    (lambda t: t.replace(CPU_CUBE, "efficiency = [[64, 0.2], [512, 0.1], [0, 0.1]]"), "cube.efficiency",
     "thresholds must descend", "cpu-xeon"),
    (lambda t: t.replace(CPU_CUBE, "efficiency = [[512, 1.5], [0, 0.1]]"), "cube.efficiency", "efficiencies in (0, 1]", "cpu-xeon"),
    (lambda t: t.replace(CPU_CUBE, ""), "kernel_classes", "or both cube.efficiency and memory.efficiency", "cpu-xeon"),
    (lambda t: t.replace("matmul = [[", "matmul = [[1e9, 1.5], [", 1), "kernel_classes.matmul", "efficiencies in (0, 1]",
     "ascend910a"),
    (lambda t: t + '\n[estimates."cube.ghz"]\nrange = [2, 3]\nreason = "x"\n', "estimates.cube.ghz",
     "the range must contain the value", "ascend910a"),
    (lambda t: t + '\n[estimates."launch.turbo_us"]\nrange = [1, 2]\nreason = "x"\n', "estimates.launch.turbo_us",
     "unknown constant", "ascend910a"),
    (lambda t: t + '\n[estimates."cube.tile"]\nrange = [8, 32]\n', "estimates.cube.tile", "reason", "ascend910a"),
    (lambda t: t.replace('dtype = "fp32"', 'dtype = "fp8"', 1), "kernel_classes.op_costs[0].dtype", "fp32|fp16|bf16",
     "cpu-icelake"),
    (lambda t: t.replace("fixed_us = ", "fixed_us = -", 1), "kernel_classes.op_costs[0].fixed_us", ">= 0", "cpu-icelake"),
])
def test_bad_profiles_are_refused_naming_file_and_key(tmp_path, edit, key, words, base):
    path = write_variant(tmp_path, edit, base)
    with pytest.raises(ConfigError) as err:
        HardwareProfile.from_toml(path)
    message = str(err.value)
    assert path in message and key in message and words in message


def test_corrupt_and_missing_files(tmp_path):
    bad = tmp_path / "corrupt.toml"
    bad.write_text("[cube\ncores = ")
    with pytest.raises(ConfigError, match="valid TOML"):
        HardwareProfile.from_toml(bad)
    with pytest.raises(ConfigError, match="an existing TOML file"):
        HardwareProfile.from_toml(tmp_path / "absent.toml")


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        load_profile("ascend999")
    assert "ascend999" in str(err.value) and "ascend910b" in str(err.value)


def test_profile_files_are_plain_toml_with_sources():
    for name in SHIPPED:
        text = (PROFILE_DIR / f"{name}.toml").read_text()
        tomllib.loads(text)
        assert text.count("#") > 20, f"{name}: every figure needs its source in a comment"


def test_estimates_carry_ranges_and_move_their_constant():
    b = load_profile("ascend910b")
    labelled = {e.key: e for e in b.estimates}
    assert "kernel_classes.matmul" in labelled and "launch.step_us" in labelled
    for e in b.estimates:                                  # every label names a real constant in its range
        value = constant(b, e.key)
        centre = 1.0 if isinstance(value, EfficiencyTable) else value
        assert e.low <= centre <= e.high and e.reason
    step = labelled["launch.step_us"]
    assert with_estimate(b, "launch.step_us", step.high).launch.step_us == step.high
    slow = with_estimate(b, "kernel_classes.matmul", 0.5)
    assert [e for _, e in slow.kernel_classes.matmul.rows] == [min(1.0, e * 0.5) for _, e in b.kernel_classes.matmul.rows]
    assert slow.digest != b.digest
    hccs = with_estimate(b, "comm.levels.hccs.latency_us", 9.0)
    assert hccs.comm.levels[0].latency_us == 9.0 and hccs.comm.levels[1] == b.comm.levels[1]


def test_910a_tables_are_measured_and_the_others_labelled():
    a, b = load_profile("ascend910a"), load_profile("ascend910b")
    assert a.kernel_classes is not None and b.kernel_classes is not None
    leveled = {"conv_forward", "conv_input_grad", "conv_filter_grad", "elementwise", "reduction", "memory"}
    assert {e.key for e in a.estimates if e.key.startswith("kernel_classes.")} == {f"kernel_classes.{k}" for k in leveled}
    assert {f"kernel_classes.{k}" for k in ("matmul", "conv_forward", "elementwise", "min_kernel_us")} <= {
        e.key for e in b.estimates}
