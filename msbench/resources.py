"""Where the suite's own files are, found through the packages that ship them (importlib.resources).

The suite is four top-level packages: `msbench`, `hardware` (profiles, calibration files, validation cases),
`workloads` (presets) and `matrices` (the shipped matrix files). A checkout has them side by side, an
installed wheel in site-packages, and Ray's `py_modules` unpacks each into a directory of its own on a
node: so no file is found from another package's location or from the working directory, only through
its own package. A file is named `<package>/<path inside it>` (`hardware/profiles/ascend910b.toml`), as
it is in the repository, wherever it was unpacked.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

PACKAGES = ("msbench", "hardware", "workloads", "matrices")


@functools.lru_cache(maxsize=None)
def package_dir(package: str) -> Path:
    """The directory an installed top-level package of the suite is in (a real directory: every way the
    suite is installed or shipped unpacks it)."""
    if package not in PACKAGES:
        raise ValueError(f"{package!r} is not a package of the suite; allowed: {', '.join(PACKAGES)}")
    return Path(str(resources.files(package))).resolve()


def suite_path(name: str) -> Path:
    """The file or folder a repository-relative name denotes: `hardware/profiles` -> the `profiles` folder of
    the installed `hardware` package."""
    package, _, inside = name.strip("/").partition("/")
    root = package_dir(package)
    return root / inside if inside else root


def suite_name(path: Path | str) -> str | None:
    """`<package>/<path inside it>` for a file of the suite's packages, else None."""
    resolved = Path(path).resolve()
    for package in PACKAGES:
        try:
            root = package_dir(package)
        except ModuleNotFoundError:        # a copy of the suite without that package
            continue
        if resolved == root or resolved.is_relative_to(root):
            return Path(package, resolved.relative_to(root)).as_posix()
    return None


def in_checkout_order(path: Path | str) -> Path:
    """A sort key that orders files of the suite as they lie in the repository, wherever each package was
    unpacked (the path it would have beside `msbench`); any other file by its own path. A hash over files
    in this order is the same for a checkout, a wheel and a Ray node's copy."""
    name = suite_name(path)
    return package_dir("msbench").parent / name if name else Path(path)


def package_roots() -> list[str]:
    """The directories that hold the suite's packages, each once, for a child process's PYTHONPATH (one
    directory in a checkout or site-packages, one per package where Ray unpacked them)."""
    roots: list[str] = []
    for package in PACKAGES:
        root = str(package_dir(package).parent)
        if root not in roots:
            roots.append(root)
    return roots


def child_pythonpath(*extra: str) -> str:
    """PYTHONPATH for a child that imports the suite: the directories of this process's packages (so the
    child runs the same code), then `extra` (e.g. the working directory, for a --allow-plugin module), then
    the current PYTHONPATH."""
    current = os.environ.get("PYTHONPATH")
    parts: list[str] = []
    for part in [*package_roots(), *extra, *filter(None, (current or "").split(os.pathsep))]:
        if part not in parts:
            parts.append(part)
    return os.pathsep.join(parts)
