"""Where commands write (run files, traces, reports): checked before any work, written atomically.

A bad path (empty, a file where a directory belongs or the reverse, a directory that cannot be
created or written) is one line naming the option before any cell runs or any prediction is made.
A file is written to a temporary file beside it and renamed over it (`os.replace`), so a full disk
or a failed write never leaves a truncated trace or report: the old file, or none, stays.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from msbench.errors import UserError


def why_not(err: OSError) -> str:
    return "disk full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else (err.strerror or str(err))


def unwritable(directory: Path) -> str | None:
    """Why no file can be created in `directory` (made if missing), or None. A real file is tried: root
    passes os.access, a read-only mount does not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".msbench-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"{directory}: {why_not(err)}"
    return None


def check_dir(option: str, value: str | Path) -> Path:
    """`value` as a directory this process can write in (created if missing), or a UserError naming `option`."""
    return check_output(option, value, directory=True)


def check_file(option: str, value: str | Path) -> Path:
    """`value` as a file path whose directory this process can write in, or a UserError naming `option`."""
    return check_output(option, value, directory=False)


def check_output(option: str, value: str | Path, directory: bool) -> Path:
    text, kind = str(value), "directory" if directory else "file"
    if not text:
        raise UserError(f"{option}='' is not allowed; allowed: a {kind} path")
    path = Path(text)
    if path.exists() and path.is_dir() != directory:
        raise UserError(f"{option}={text!r} is not allowed; allowed: a {kind} path (this is a "
                        f"{'file' if directory else 'directory'})")
    where = path if directory else path.parent
    why = f"{where} is a file" if where.exists() and not where.is_dir() else unwritable(where)
    if why:
        place = "a directory" if directory else "a file path in a directory"
        raise UserError(f"{option}={text!r} is not allowed; allowed: {place} this user can write ({why})")
    return path


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` to `path` through a temporary file in its directory and `os.replace`: readers see the old
    file or the whole new one. A failure removes the temporary file and is one line (UserError)."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {why_not(err)}; nothing was written there") from None
    return path
