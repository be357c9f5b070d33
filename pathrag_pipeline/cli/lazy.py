"""A click group whose subcommands are imported only when they run, and which shows expected failures as
one line.

``pathrag --version`` and ``pathrag --help`` must start at once, so the root group names its commands with
their one-line help here and imports a command's module (and the heavy libraries behind it) only when that
command is invoked or asked for its own ``--help``.
"""

from __future__ import annotations

import importlib
import re

import click

from pathrag_pipeline.errors import PipelineError, disk_full_cause


def plugin_commands(group: str) -> dict[str, tuple[str, str, str]]:
    """The commands installed packages declare in entry-point ``group`` (``name = "module:attribute"``), as
    name -> (module, attribute, one-line help). The help is the first line of the module's docstring, read from
    its source without importing it, so ``pathrag --help`` stays fast and the product never imports a plugin."""
    import ast
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    found: dict[str, tuple[str, str, str]] = {}
    for point in entry_points(group=group):
        module, _, attribute = point.value.partition(":")
        help_line = ""
        try:
            spec = find_spec(module)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                with open(spec.origin, encoding="utf-8") as source:
                    doc = ast.get_docstring(ast.parse(source.read())) or ""
                help_line = doc.strip().splitlines()[0] if doc.strip() else ""
        except (ImportError, OSError, SyntaxError, ValueError):
            continue   # a plugin whose package is gone is not offered
        if spec is not None:
            found[point.name] = (module, attribute or point.name, help_line)
    return found


class LazyGroup(click.Group):
    """``lazy_commands``: name -> (module, attribute, one-line help)."""

    def __init__(self, *args, lazy_commands: dict[str, tuple[str, str, str]] | None = None,
                 plugin_group: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.plugin_group = plugin_group   # scanned on first need (``_all_commands``), not at import

    def _all_commands(self) -> dict[str, tuple[str, str, str]]:
        """The declared commands and, from the first call on, the plugins' (``plugin_commands``): a command this
        group declares runs without scanning the installed packages' entry points (importing
        ``importlib.metadata`` and reading every package's metadata: ~30 ms of every command before)."""
        if self.plugin_group:
            for name, entry in plugin_commands(self.plugin_group).items():
                self.lazy_commands.setdefault(name, entry)
            self.plugin_group = None
        return self.lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._all_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        commands = self.lazy_commands if cmd_name in self.lazy_commands else self._all_commands()
        if cmd_name in commands:
            module, attribute, _ = commands[cmd_name]
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the declared one-line helps, without importing any command module."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:
                rows.append((name, self.lazy_commands[name][2]))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted(ctx)
        except Exception as exc:
            if _dagster_interrupted(exc):
                _interrupted(ctx)
            message = expected_failure(exc)
            if message is not None:
                raise click.ClickException(message) from None
            raise
        except BaseException as exc:   # Dagster's interrupt error is a BaseException, like KeyboardInterrupt
            if type(exc).__name__ == "DagsterExecutionInterruptedError":
                _interrupted(ctx)
            raise


def expected_failure(exc: Exception) -> str | None:
    """The one line a command shows for an expected failure (``errors.PipelineError``, a missing file, a failed
    Dagster step's own error, a full disk, a table the home lacks, a damaged store); None for a bug, which keeps
    its traceback. The query service says the same line for an index run handed to it."""
    if isinstance(exc, (PipelineError, FileNotFoundError)):
        return str(exc)
    failure = _dagster_failure(exc)
    if failure is not None:   # a step's expected failure, already one line (assets/failures.py)
        return failure
    full = disk_full_cause(exc)
    if full is not None:
        return disk_full_message(full)
    return _missing_table(exc) or damaged_store(exc)


# What each store says when its bytes are damaged (DuckDB's checksum, SQLite's, Lance's reads of a cut file), and
# which part of the home that is.
_DAMAGE = (("Corrupt database file", "the home's DuckDB file (pathrag.duckdb)"),
           ("Could not read enough bytes from file", "the home's DuckDB file (pathrag.duckdb)"),
           ("database disk image is malformed", "the home's Dagster storage (dagster/)"),
           ("file is not a database", "the home's Dagster storage (dagster/)"),
           ("LanceError(IO)", "a vector table of the home (LanceDB)"))


def damaged_store(exc: BaseException | None) -> str | None:
    """One line for an error, anywhere in the chain, that says a store of the home is damaged (issue 61: a
    traceback of 40 to 110 lines named no way out), pointing at `pathrag status --check`, which names each damaged
    part and the command that repairs it."""
    seen = 0
    while exc is not None and seen < 20:
        text = " ".join(str(exc).split())
        if type(exc).__name__ == "RustPanic":   # LanceDB's Rust side panicked opening a table (a cut manifest does it)
            text = f"LanceError(IO): a panic in LanceDB reading a vector table ({text})"
        for sign, part in _DAMAGE:
            if sign in text:
                return (f"{part} is damaged ({text[:200]}); `pathrag status --check` names each damaged part and the "
                        "command that repairs it")
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _interrupted(ctx: click.Context) -> None:
    """Ctrl-C: one line, not a traceback (issue 61); every stage keeps what it finished and runs resume. A Dagster
    run interrupted this way is marked failed in the instance as before."""
    click.echo("Interrupted: what was finished is kept; run the same command again to go on.", err=True)
    ctx.exit(130)


def _dagster_interrupted(exc: BaseException | None) -> bool:
    """Whether Dagster turned a Ctrl-C into its own exception (in-process runs raise
    ``DagsterExecutionInterruptedError`` from the step), anywhere in the chain."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "DagsterExecutionInterruptedError":
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _dagster_failure(exc: BaseException) -> str | None:
    """The description of a ``dagster.Failure`` (without importing Dagster here)."""
    if type(exc).__name__ == "Failure" and type(exc).__module__.startswith("dagster"):
        description = getattr(exc, "description", None)
        return str(description) if description else None
    return None


_MISSING_TABLE = re.compile(r"Table with name (\w+) does not exist")


def _missing_table(exc: BaseException) -> str | None:
    """One line for a DuckDB catalog error on a pathrag table the home lacks (a first index that stopped before
    it created the schema, or a file that is not a pathrag index), without importing DuckDB here."""
    if type(exc).__name__ != "CatalogException" or "duckdb" not in type(exc).__module__:
        return None
    match = _MISSING_TABLE.search(str(exc))
    if match is None:
        return None
    import os

    home = os.environ.get("PATHRAG_HOME", "PATHRAG_HOME")
    return (f"the index in {home} has no table {match.group(1)}: its first `pathrag index` stopped before it "
            "finished (or the file is not a pathrag index); run `pathrag index PATH` to build it")


def disk_full_message(exc: BaseException) -> str:
    """``errors.disk_full_message`` with the home of the current settings when the error names no file."""
    import os

    from pathrag_pipeline.errors import disk_full_message as message

    home = os.environ.get("PATHRAG_HOME")
    if not home:
        from pathrag_pipeline.config import Settings

        try:
            home = str(Settings.from_env().home)
        except Exception:  # noqa: BLE001 - a bad setting must not hide the disk-full message
            home = None
    return message(exc, home)
