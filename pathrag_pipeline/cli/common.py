"""What every command shares: settings from the environment as a clean error, and table printing."""

from __future__ import annotations

import click

from pathrag_pipeline.cli.terminal import make_console
from pathrag_pipeline.config import ConfigError, Settings

console = make_console()


def load_settings(**overrides) -> Settings:
    try:
        return Settings.from_env(**overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def print_table(columns: list[str], rows: list[tuple], title: str | None = None) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    console.print(table)
