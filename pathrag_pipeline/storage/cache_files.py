"""Files of the home's cache folder (``PATHRAG_HOME/cache``): derived data a process saves for the next one.

Each is written whole (a temporary file renamed into place, so a reader never sees half of one) and replaces the
files it supersedes (the same kind for an older version of the data), so the folder holds one file per kind
instead of one per change. Everything here only saves time: a file that cannot be written (a read-only home) is
not written, and deleting the folder is always safe.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def write_whole(path: Path, write: Callable[[BinaryIO], None], supersedes: str) -> bool:
    """Write ``path`` with ``write(file)``, then remove the other files of its folder matching the glob
    ``supersedes``. False when it could not be written (nothing is left behind)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return False
    for other in path.parent.glob(supersedes):
        if other != path:
            with contextlib.suppress(OSError):
                other.unlink()
    return True
