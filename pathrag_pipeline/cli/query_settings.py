"""The query settings as command-line options, made from their one declaration (``query/params.py``, ``SETTINGS``).

`pathrag ask --help` shows the few settings marked ``front``; every setting is reachable as ``--set NAME=VALUE``
(repeatable) and, as before, as its own ``--NAME`` option (hidden from the help so it fits one screen);
``--settings`` prints them all with their defaults, bounds and origin. Options left out keep the setting's default
(or the preset's), so a command line says only what it changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from pathrag_pipeline.query.params import PRESETS, SETTINGS, Setting, parse_setting


def click_type(spec: Setting) -> click.ParamType:
    if spec.choices:
        return click.Choice(spec.choices)
    if spec.kind == "int":
        return click.IntRange(min=None if spec.lo is None else int(spec.lo),
                              max=None if spec.hi is None else int(spec.hi))
    if spec.kind == "float":
        return click.FloatRange(spec.lo, spec.hi, min_open=spec.lo_open)
    if spec.kind == "bool":
        return click.BOOL
    return click.STRING


def _option(spec: Setting) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    help_text = f"{spec.help} [default: {spec.shown_default()}]"
    hidden = not spec.front
    if spec.kind == "bool":
        name = spec.option[2:]
        return click.option(f"--{name}/--no-{name}", spec.name, default=None, hidden=hidden, help=help_text)
    return click.option(spec.option, spec.name, type=click_type(spec), default=None, hidden=hidden,
                        multiple=spec.kind == "list", help=help_text)


def _print_settings(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from rich.table import Table

    from pathrag_pipeline.cli.terminal import make_console

    table = Table(title="Query settings (pathrag ask --set NAME=VALUE; docs/configuration.md)", show_lines=False)
    for column in ("setting", "default", "allowed", "read by", "whose", "what"):
        table.add_column(column, overflow="fold")
    for spec in SETTINGS.values():
        table.add_row(spec.name, spec.shown_default(), spec.bounds(), spec.scope, spec.origin, spec.help)
    make_console().print(table)
    ctx.exit(0)


def query_setting_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add every query setting (front ones shown), ``--set``, ``--preset`` and ``--settings`` to ``command``."""
    for spec in reversed(list(SETTINGS.values())):
        command = _option(spec)(command)
    command = click.option("--set", "set_", multiple=True, metavar="NAME=VALUE",
                           help="Any query setting, e.g. --set max_hops=14 --set revert=none (repeatable; "
                                "--settings lists them).")(command)
    command = click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
                           help="A method end to end: 'paper' is PathRAG as published (paths-only prompt, the "
                                "paths' own passages, none of our tuned departures); 'public-code' as its public code "
                                "runs it. Settings given beside it win.")(command)
    return click.option("--settings", is_flag=True, expose_value=False, is_eager=True, callback=_print_settings,
                        help="List every query setting (default, bounds, whose) and exit.")(command)


def given_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The settings a command line gave, from the setting options and ``--set`` (popped from ``values``), with
    the preset's filled in for the rest; UsageError for an unknown name, a bad value or a setting given twice."""
    given: dict[str, Any] = {}
    for name, spec in SETTINGS.items():
        value = values.pop(name, None)
        if spec.kind == "list" and value == ():
            value = None
        if value is not None:
            given[name] = tuple(value) if spec.kind == "list" else value
    for item in values.pop("set_", ()) or ():
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise click.UsageError(f"--set {item!r}: give NAME=VALUE, e.g. --set max_hops=14")
        if name in given:
            raise click.UsageError(f"{name} is given twice (as --{name.replace('_', '-')} and --set); keep one")
        try:
            given[name] = parse_setting(name, text)
        except ValueError as exc:
            raise click.UsageError(f"--set {item}: {exc}") from None
    preset = values.pop("preset", None)
    if preset is not None:
        for name, value in PRESETS[preset].items():
            given.setdefault(name, tuple(value) if isinstance(value, tuple) else value)
    return given


def not_read_by(mode: str, given: dict[str, Any]) -> list[str]:
    """The given settings that ``mode`` does not read and that differ from their default (a command line that
    shapes another mode's pruning or tracking is a mistake worth saying)."""
    return [SETTINGS[name].option for name, value in given.items()
            if SETTINGS[name].scope not in ("all", mode) and value != SETTINGS[name].default]
