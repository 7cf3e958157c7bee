"""Names that become file names (matrix `name`, `--run-id`): letters, digits and `._-` only, so a name
can never climb out of the results directory or create one."""

from __future__ import annotations

import re

from msbench.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9._-]+")


def check_name(field: str, value: object, where: str = "") -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value) or value in (".", ".."):
        raise ConfigError(field, value, "letters, digits and . _ - (it becomes a file name)", where)
    return value
