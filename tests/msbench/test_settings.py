import pytest

from msbench.errors import ConfigError
from hardware.knob_table import knob_table
from msbench.settings import DEFAULTS, RULES, Settings, make_settings, parse_assignments, recorded_settings

DESIGN_KNOBS = ["mode", "jit_level", "graph_kernel", "amp_level", "loss_scale", "keep_batchnorm_fp32", "batch_size",
                "grad_accum", "recompute", "workers", "prefetch", "data_format", "cache", "sink", "sink_size",
                "devices", "optimizer", "lr_schedule", "grad_clip", "seed", "lr_scaling", "tensor_parallel",
                "pipeline_stages", "micro_batches", "sequence_parallel", "optimizer_shard", "flash_attention", "parallel_mode",
                "python_multiprocessing", "shared_mem", "augment_device", "drop_remainder", "memory_optimize_level",
                "max_device_memory"]


def test_every_design_knob_is_listed_with_its_fields():
    rows = knob_table()
    assert [r["name"] for r in rows] == DESIGN_KNOBS
    for row in rows:
        assert set(row) >= {"name", "type", "default", "allowed", "help"} and row["help"]


def test_defaults_are_mindspore_defaults():
    s = Settings()
    assert (s.mode, s.jit_level, s.amp_level, s.prefetch, s.workers, s.sink_size) == ("pynative", "O0", "O0", 16, 1, -1)
    # GeneratorDataset threads; ds.config.get_enable_shared_mem() is True in 2.10; set_memory's optimize_level O0
    assert (s.python_multiprocessing, s.shared_mem, s.memory_optimize_level, s.max_device_memory) == (False, True, "O0", None)


def test_the_memory_cap_parses_as_gib_and_unset():
    assert parse_assignments(["max_device_memory=16", "drop_remainder=false"]) == {"max_device_memory": 16.0,
                                                                                   "drop_remainder": False}
    assert parse_assignments(["max_device_memory=unset"]) == {"max_device_memory": None}
    assert make_settings({"max_device_memory": 16.0}).non_default() == {"max_device_memory": 16.0}


@pytest.mark.parametrize("values, field, fragment", [
    ({"colour": "red"}, "knob", "allowed: mode, jit_level"),
    ({"shared_mem": False}, "shared_mem", "unless python_multiprocessing=true"),
    ({"drop_remainder": False, "grad_accum": 2}, "drop_remainder", "grad_accum equal micro-batches"),
    ({"max_device_memory": 0.0}, "max_device_memory", "GiB > 0 and <= 1024, or unset"),
    ({"max_device_memory": 16}, "max_device_memory", "float"),
    ({"augment_device": "gpu"}, "augment_device", "cpu|ascend"),
    ({"amp_level": "O5"}, "amp_level", "O0|O1|O2|O3"),
    ({"batch_size": "64"}, "batch_size", "int"),
    ({"graph_kernel": 1}, "graph_kernel", "bool"),
    ({"grad_accum": 0}, "grad_accum", "1..1024"),
    ({"devices": 3}, "devices", "1|2|4|8"),
    ({"sink": True}, "sink", "dataset sink needs mode=graph"),
    ({"mode": "graph", "sink_size": 4}, "sink_size", "only with sink=true"),
    ({"jit_level": "O2"}, "jit_level", "needs mode=graph"),
    ({"graph_kernel": True}, "graph_kernel", "needs mode=graph"),
    ({"loss_scale": "dynamic"}, "loss_scale", "amp_level other than O0"),
    ({"cache": True}, "cache", "mappable source"),
])
def test_bad_values_and_combinations_name_the_field_value_and_rule(values, field, fragment):
    with pytest.raises(ConfigError) as err:
        make_settings(values, where="m.toml")
    assert err.value.field == field
    assert fragment in str(err.value) and "m.toml" in str(err.value)


# One crafted combination per rule, in RULES order: each must break exactly that rule.
RULE_FIRES = [
    {"mode": "pynative", "sink": True},
    {"mode": "graph", "sink_size": 8},
    {"mode": "graph", "sink": True, "sink_size": 0},
    {"mode": "pynative", "jit_level": "O1"},
    {"mode": "pynative", "graph_kernel": True},
    {"mode": "graph", "jit_level": "O2", "graph_kernel": True},
    {"amp_level": "O0", "loss_scale": "static"},
    {"amp_level": "O1", "keep_batchnorm_fp32": True},
    {"amp_level": "O2", "keep_batchnorm_fp32": True},
    {"shared_mem": False},
    {"drop_remainder": False, "grad_accum": 4},
    {"data_format": "generator", "cache": True},
    {"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 3},
    {"devices": 8, "tensor_parallel": 2},
    {"devices": 8, "pipeline_stages": 2, "micro_batches": 2},
    {"parallel_mode": "semi_auto"},
    {"devices": 8, "parallel_mode": "semi_auto", "sequence_parallel": True},
    {"devices": 8, "parallel_mode": "semi_auto", "pipeline_stages": 4, "micro_batches": 2},
    {"micro_batches": 4},
    {"devices": 8, "optimizer_shard": True},
    {"devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 8, "optimizer_shard": True},
    {"flash_attention": True},
]


def test_every_rule_can_fire_and_defaults_break_none():
    assert not any(rule.violated(Settings()) for rule in RULES)
    assert len({r.text for r in RULES}) == len(RULES)
    assert len(RULE_FIRES) == len(RULES)
    for rule, values in zip(RULES, RULE_FIRES):
        candidate = recorded_settings(values)
        assert [r.text for r in RULES if r.violated(candidate)] == [rule.text], values
        with pytest.raises(ConfigError) as err:
            make_settings(values)
        assert err.value.field == rule.knobs[0] and err.value.rule == rule.text


def test_recorded_settings_keep_an_invalid_combination_but_check_each_value():
    s = recorded_settings({"mode": "pynative", "sink": True})
    assert (s.mode, s.sink) == ("pynative", True) and s.non_default() == {"sink": True}
    with pytest.raises(ConfigError, match="amp_level='O9'"):
        recorded_settings({"amp_level": "O9"})
    with pytest.raises(ConfigError, match="knob='colour'"):
        recorded_settings({"colour": "red"})


def test_cli_assignments_are_typed():
    assert parse_assignments(["amp_level=O2", "batch_size=64", "graph_kernel=true"]) == \
        {"amp_level": "O2", "batch_size": 64, "graph_kernel": True}
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_assignments(["amp_level"])
    with pytest.raises(ConfigError, match="true\\|false"):
        parse_assignments(["sink=maybe"])


def test_non_default_is_the_canonical_form():
    s = make_settings({"mode": "graph", "amp_level": "O0"})
    assert s.non_default() == {"mode": "graph"}
    assert set(DEFAULTS) == set(s.to_dict())


def test_batchnorm_precision_follows_mindspore_level_default_unless_set():
    assert make_settings({"amp_level": "O2"}).batchnorm_in_fp32 is True
    assert make_settings({"amp_level": "O3"}).batchnorm_in_fp32 is False
    assert make_settings({"amp_level": "O3", "keep_batchnorm_fp32": True}).batchnorm_in_fp32 is True
    assert parse_assignments(["keep_batchnorm_fp32=unset"]) == {"keep_batchnorm_fp32": None}
