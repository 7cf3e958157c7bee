"""The few git questions msbench asks (resolve a revision, list first-parent history), with clear errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

from msbench.errors import UserError


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run git in `repo` and return stdout; a failure is a UserError carrying git's own message."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise UserError("git is not installed (needed to read commit history)") from None
    if check and proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError(f"git {' '.join(args)} failed in {repo}: {message[-1] if message else proc.returncode}")
    return proc.stdout.strip() if proc.returncode == 0 else ""


def repo_root(start: Path) -> Path:
    root = git(start, "rev-parse", "--show-toplevel", check=False)
    if not root:
        raise UserError(f"{start} is not inside a git repository")
    return Path(root)


def rev_parse(repo: Path, rev: str) -> str | None:
    """The full hash of a revision, or None when it is not one (or `repo` is not a repository)."""
    return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False) or None


def is_shallow(repo: Path) -> bool:
    return git(repo, "rev-parse", "--is-shallow-repository") == "true"


def first_parent_history(repo: Path, branch: str) -> list[str]:
    """Commits of `branch`, newest first, following first parents (the commits asv benchmarks)."""
    return git(repo, "rev-list", "--first-parent", branch).split()
