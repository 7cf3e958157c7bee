"""Reading a versioned calibration file: its JSON and the hash a prediction carries, read once.

Shared by the calibration files the device model reads (pipeline_modes.json; host_cost.json's
loader in host_cost.py does the same and can call this one)."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from msbench.errors import UserError


@functools.cache
def load_calibration(path: Path, schema: int, command: str) -> tuple[str, dict[str, Any]]:
    """(sha256 of the bytes, parsed JSON); a file of another schema names the command that re-measures it."""
    raw = path.read_bytes()
    data = json.loads(raw)
    if data.get("schema") != schema:
        raise UserError(f"{path}: schema={data.get('schema')!r} is not allowed; allowed: {schema} "
                        f"(re-measure it with `{command}`)")
    return hashlib.sha256(raw).hexdigest(), data
