"""Count first-party imports inside functions (issue 40: each stays only with a reason: a cycle, a heavy import
or an optional dependency), and list those without a `# ` comment on their line or the line above.

    python tools/inner_imports.py [--list] [--unexplained]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("msbench", "hardware", "workloads")


def first_party(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
    return any(a.name.split(".")[0] in PACKAGES for a in node.names)


def inner_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, explained) of each first-party import inside a function of `path`."""
    lines = path.read_text().splitlines()
    found = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and first_party(node):
                    above = node.lineno - 2
                    while above > 0 and lines[above].lstrip().startswith(("from ", "import ")):
                        above -= 1     # consecutive imports share the comment above them
                    explained = "# " in lines[node.lineno - 1] or lines[above].strip().startswith("#")
                    found.append((node.lineno, explained))
    return sorted(set(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each import's file:line")
    parser.add_argument("--unexplained", action="store_true", help="only those without a reason comment")
    args = parser.parse_args()
    total = unexplained = 0
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, explained in inner_imports(path):
                total += 1
                unexplained += not explained
                if args.list and not (args.unexplained and explained):
                    print(f"{path.relative_to(ROOT)}:{line}{'' if explained else '  (no reason)'}")
    print(f"first-party imports inside functions: {total} ({unexplained} without a reason comment)")


if __name__ == "__main__":
    main()
