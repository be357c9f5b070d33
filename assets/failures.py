"""Expected failures as one line in the Dagster UI.

A ``PipelineError`` (a bad setting, an unreachable endpoint, a locked index: errors.py) or a full disk raised in
a step used to show in the UI as the exception's traceback: up to a hundred lines for a disk-full DuckDB or Lance
write (issue 22). ``one_line_failures`` wraps an asset's or op's function so those become ``dg.Failure`` with the
same one-line message the CLI prints (the disk-full one names the path and what to free); anything else is a bug
and keeps its traceback. `pathrag index` and ``index_folder`` run the job in-process: they raise the original
exception again (``original_error``), so Python callers catch the same types as before and the CLI prints its
usual line (it also prints a ``dg.Failure``'s description as one line: cli/lazy.py).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from pathrag_pipeline.errors import PipelineError, disk_full_cause


def _one_line(exc: BaseException) -> str | None:
    if isinstance(exc, dg.Failure):
        return None
    if isinstance(exc, PipelineError):
        return str(exc)
    full = disk_full_cause(exc)
    if full is not None:
        from pathrag_pipeline.errors import disk_full_message

        return disk_full_message(full)
    return None


def _failure(line: str, exc: BaseException) -> dg.Failure:
    """The one-line ``dg.Failure``; it carries the original exception (not chained: the UI would print its
    traceback again) so an in-process caller can raise that instead (``original_error``)."""
    failure = dg.Failure(description=line, allow_retries=False)
    failure.original = exc  # type: ignore[attr-defined]
    return failure


def original_error(exc: BaseException) -> BaseException:
    """The exception a step's one-line ``dg.Failure`` stands for (itself for anything else)."""
    return getattr(exc, "original", None) or exc


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        line = _one_line(exc)
        if line is None:
            raise
        raise _failure(line, exc) from None


def one_line_failures(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an asset's or op's compute function, plain or a generator) with expected failures raised as
    ``dg.Failure(description=<one line>)``; the signature Dagster reads is ``fn``'s (``functools.wraps``)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def steps(*args: Any, **kwargs: Any) -> Any:
            with _one_line_errors():
                yield from fn(*args, **kwargs)
        return steps

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        with _one_line_errors():
            return fn(*args, **kwargs)
    return step
