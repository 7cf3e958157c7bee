"""The layers contract (pyproject.toml, checked by `make lint`) names modules one by one where a package is
split between two layers (msbench: base and application): a module added there and left out of every layer
would escape the check. Every module of the three packages is in a layer, save the package root above the split."""

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("msbench", "hardware", "workloads")
UNLAYERED = {"msbench"}     # an __init__ file holding no code


def layer_modules() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [name.strip() for line in contract["layers"] for name in line.replace("|", ":").split(":")]


def package_modules() -> list[str]:
    names = []
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_is_in_a_layer():
    layers = layer_modules()
    missing = [m for m in package_modules() if m not in UNLAYERED
               and not any(m == layer or m.startswith(layer + ".") for layer in layers)]
    assert not missing, f"add these modules to a layer of [tool.importlinter] in pyproject.toml: {sorted(missing)}"

