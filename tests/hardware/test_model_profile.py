"""Hardware profiles: every shipped profile loads; bad files are refused with the file, key and rule."""

from __future__ import annotations

import tomllib

import pytest

from hardware.model.profile import PROFILE_DIR, HardwareProfile, list_profiles, load_profile, profile_names
from msbench.errors import ConfigError

SHIPPED = ("ascend910a", "ascend910b", "ascend910b4", "atlas300i-duo", "cpu")


def write_variant(tmp_path, edit) -> str:
    """The 910B profile's text, edited by `edit(text) -> text`, written to a temp file."""
    text = (PROFILE_DIR / "ascend910b.toml").read_text()
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


def test_hash_is_content_based(tmp_path):
    same = HardwareProfile.from_toml(write_variant(tmp_path, lambda t: t + "\n# a comment only\n"))
    assert same.digest == load_profile("ascend910b").digest
    changed = HardwareProfile.from_toml(write_variant(tmp_path, lambda t: t.replace("gbps = 1382.0", "gbps = 1600.0", 1)))
    assert changed.digest != same.digest and len(changed.digest) == 64


def test_efficiency_table_lookup():
    table = load_profile("ascend910a").cube.efficiency
    assert table.at(4096) == 0.20 and table.at(512) == 0.20 and table.at(300) == 0.18 and table.at(1) == 0.06


@pytest.mark.parametrize("edit, key, words", [
    (lambda t: t.replace("[cube]\n", "[cube]\nturbo = true\n"), "cube.turbo", "unknown key"),
    (lambda t: t.replace("tile = 16", ""), "cube.tile", "missing key"),
    (lambda t: t.replace("usable_gib = 58.0", 'usable_gib = "lots"'), "memory.usable_gib", "a number"),
    (lambda t: t.replace('matrix_fp32_as = "fp32"', 'matrix_fp32_as = "fp8"'), "precision.matrix_fp32_as", "fp32|fp16"),
    (lambda t: t.replace("[[512, 0.20], [256, 0.18], [64, 0.12], [0, 0.06]]", "[[512, 0.2], [64, 0.1]]"),
     "cube.efficiency", "the last threshold must be 0"),
    (lambda t: t.replace("[[512, 0.20], [256, 0.18], [64, 0.12], [0, 0.06]]", "[[64, 0.2], [512, 0.1], [0, 0.1]]"),
     "cube.efficiency", "thresholds must descend"),
    (lambda t: t.replace("[[512, 0.20], [256, 0.18], [64, 0.12], [0, 0.06]]", "[[512, 1.5], [0, 0.1]]"),
     "cube.efficiency", "efficiencies in (0, 1]"),
])
def test_bad_profiles_are_refused_naming_file_and_key(tmp_path, edit, key, words):
    path = write_variant(tmp_path, edit)
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
