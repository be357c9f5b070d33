"""`pathrag dev`: the Dagster UI with its instance folder inside PATHRAG_HOME."""

from __future__ import annotations

import os
import shutil
import signal
import sys

import click

from pathrag_pipeline.cli.common import load_settings
from pathrag_pipeline.config import PACKAGE_ROOT


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("dg_args", nargs=-1, type=click.UNPROCESSED)
def dev(dg_args: tuple[str, ...]) -> None:
    """Open the Dagster UI (`dg dev`) with DAGSTER_HOME in PATHRAG_HOME, so runs and sensor cursors persist.

    Extra arguments go to `dg dev` (e.g. `pathrag dev -p 3001`)."""
    settings = load_settings()
    from pathrag_pipeline.ingest.home_folder import home_folder, watched_folder

    watched, mismatch = watched_folder(home_folder(settings), os.environ.get("PATHRAG_DOCS"), settings.docs)
    click.echo(f"Dagster UI for PATHRAG_HOME {settings.home}: the sensor, the schedule and runs launched from the UI "
               f"index {watched}")
    if mismatch:
        click.echo(f"warning: {mismatch}", err=True)
    settings.dagster_home.mkdir(parents=True, exist_ok=True)
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml

    ensure_dagster_yaml(settings.dagster_home)
    _report_asks(settings)
    # The `dg` of this interpreter's environment first, so `.venv/bin/pathrag dev` works without activating the
    # venv, and its children (webserver, daemon) find the same environment's commands.
    bin_dir = os.path.dirname(sys.executable)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    env = dict(os.environ, DAGSTER_HOME=str(settings.dagster_home), PATH=path)
    dg = shutil.which("dg", path=path)
    if dg is None:
        raise click.ClickException("`dg` was not found; install the project with `pip install -e .`")
    os.chdir(PACKAGE_ROOT)
    # A shell starts background jobs (`pathrag dev &`) with SIGINT ignored, and an ignored signal stays ignored
    # across exec: `dg dev` and its webserver and daemon would then outlive Ctrl-C / kill -INT. Give them the
    # default dispositions back.
    for name in ("SIGINT", "SIGTERM", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execvpe(dg, [dg, "dev", *dg_args], env)


def _report_asks(settings) -> None:
    """The asks logged since the catalog last recorded the query tables, as their runless materialisations, so
    the UI opens with them (the sensor reports later ones while it is on)."""
    from assets.automation import asks_outside_runs
    from assets.runs import instance_for
    from pathrag_pipeline.storage.store import Store

    instance = instance_for(settings)
    try:
        events = asks_outside_runs(instance, Store(settings.duckdb_path, lock_timeout=1.0), "pathrag dev")
        for event in events:
            instance.report_runless_asset_event(event)
        if events:
            click.echo(f"the query tables gained {events[0].metadata['asks_since_last_report'].value} ask(s) since "
                       "the catalog last recorded them: reported as their materialisations")
    finally:
        instance.dispose()
