"""The base class of the pipeline's expected failures.

An expected failure is one the user can act on: a bad setting, a locked index, an unreachable endpoint. Its
message is one clear line naming the file, value or endpoint and what to do. Entry points (the CLI, the
Dagster assets) show such a message as it is, with a non-zero exit, never as a traceback; anything else is a
bug and keeps its traceback. This module imports nothing, so every layer may use it.
"""


class PipelineError(Exception):
    """An expected failure whose message tells the user what went wrong and what to do."""


# How a full disk shows in the exceptions of the libraries that write the home: OSError errno 28 (Python,
# pyarrow), "No space left on device" in DuckDB's IOException and Lance's errors ("os error 28" from Rust),
# "database or disk is full" from SQLite (the Dagster instance).
ENOSPC = 28
DISK_FULL_MARKERS = ("no space left on device", "os error 28", "database or disk is full", "disk full")


def disk_full_cause(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain (itself, its cause, its context) that says the disk is full, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == ENOSPC:
            return current
        if any(marker in str(current).lower() for marker in DISK_FULL_MARKERS):
            return current
        current = current.__cause__ or current.__context__
    return None


def disk_full_message(exc: BaseException, home: str | None = None) -> str:
    """One line for a full disk: the path written (the error's file, else ``home``), the space left there, what
    to do. Shared by the CLI and the Dagster steps (assets/failures.py)."""
    import os
    import shutil
    from pathlib import Path

    target = getattr(exc, "filename", None) or home or os.environ.get("PATHRAG_HOME") or "PATHRAG_HOME"
    path = Path(target)
    free = ""
    for candidate in (path, *path.parents):
        if candidate.exists():
            free = f" ({shutil.disk_usage(candidate).free / 2**20:,.0f} MiB free there)"
            break
    return (f"disk full while writing {target}{free}: free space on that disk (or set PATHRAG_HOME to a folder "
            "on a larger one) and run the command again; the write that failed was rolled back and what was "
            "indexed before is kept (a new `pathrag index` goes on from there)")
