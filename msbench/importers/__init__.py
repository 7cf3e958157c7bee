"""Config importers: a user's own training config (MindFormers, mindcv or mindyolo YAML) as a cell's workload, preset, overrides
and knobs, with every field accounted for (msbench/importers/fields.py). `msbench predict --config FILE` and a
matrix workload's `config = "FILE"` read configs through `import_config`."""

from __future__ import annotations

from pathlib import Path

from msbench.errors import UserError
from msbench.importers.fields import ImportedConfig
from msbench.importers.mindcv import import_mindcv, is_mindcv
from msbench.importers.mindformers import import_mindformers, is_mindformers
from msbench.importers.mindyolo import import_mindyolo, is_mindyolo
from msbench.importers.yaml_file import load_yaml

FORMATS = ("a MindFormers training config (model.model_config, parallel_config, runner_config, context ...) or a "
           "mindcv one (model, batch_size, image_resize, amp_level, opt, scheduler ...) or a mindyolo one (network "
           "with model_name, per_batch_size, img_size, ms_amp_level ...)")


def import_config(path: str | Path) -> ImportedConfig:
    """The cell a config file describes; a file of no known format is one line naming what is read."""
    data = load_yaml(path)
    if is_mindformers(data):
        return import_mindformers(data, str(path))
    if is_mindcv(data):
        return import_mindcv(data, str(path))
    if is_mindyolo(data):
        return import_mindyolo(data, str(path))
    raise UserError(f"{path}: not a config msbench reads; allowed: {FORMATS}")
