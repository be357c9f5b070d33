"""What every command shares: settings from the environment as a clean error, and table printing.

Data is never markup: rich reads ``[...]`` in a string as a style tag, so document text like ``[/home]``
would crash the print and ``[citation needed]`` would vanish. Table cells and titles go in as ``Text``
objects, and data put into a marked-up message goes through ``esc`` (``rich.markup.escape``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from pathrag_pipeline.config import ConfigError, Settings

if TYPE_CHECKING:
    from rich.console import Console

    console: Console


def _console() -> "Console":
    """The shared console, made on first use: importing rich costs a light command (an ask handed to the query
    service) a fifth of its start-up."""
    if "console" not in globals():
        from pathrag_pipeline.cli.terminal import make_console

        globals()["console"] = make_console()
    return globals()["console"]


def __getattr__(name: str) -> Any:
    """``common.console`` (and ``from ... import console``) without making it at import."""
    if name == "console":
        return _console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_settings(**overrides) -> Settings:
    try:
        return Settings.from_env(**overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def esc(value: object) -> str:
    """``value`` as text that rich prints literally inside a marked-up message."""
    from rich.markup import escape

    return escape(str(value))


def plain(value: object):
    """``value`` as a rich Text: printed as it is, never parsed as markup."""
    from rich.text import Text

    return Text("" if value is None else str(value))


def print_table(columns: list[str], rows: list[tuple], title: str | None = None, out: "Console | None" = None) -> None:
    from rich.table import Table

    table = Table(title=plain(title) if title is not None else None, show_lines=False)
    for col in columns:
        table.add_column(plain(col), overflow="fold")
    for row in rows:
        table.add_row(*[plain(v) for v in row])
    (out or _console()).print(table)


def query_process_threads() -> None:
    """One OpenBLAS thread in a process that answers queries (`ask`, `serve`). A query's matrix products are
    small (a few query vectors against at most tens of thousands of rows): OpenBLAS's worker threads gain
    nothing there and spin after each product, which doubled a query's CPU (55 ms wall, 102 ms CPU on
    musique-100; 53 ms with one thread), CPU that 50 concurrent asks or a busy service need. Must run before
    numpy loads; an explicit OPENBLAS_NUM_THREADS wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
