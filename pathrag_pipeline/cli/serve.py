"""`pathrag serve`: keep the query engine loaded for a home so every `pathrag ask` skips its start-up.

The service and its protocol are in ``query/service.py``; `pathrag ask` finds it through
``PATHRAG_HOME/query_service.json`` and answers locally when it is gone or runs with other settings.
"""

from __future__ import annotations


import click

from pathrag_pipeline.cli.common import query_process_threads
from pathrag_pipeline.config import ConfigError, Settings

query_process_threads()


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Every request needs the token in PATHRAG_HOME/query_service.json.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on (0: any free port; the chosen one is written to the service file).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Queries answered at once (default: one per core offline, PATHRAG_LLM_MAX_CONCURRENCY with an LLM).")
def serve(host: str, port: int, workers: int | None) -> None:
    """Answer `pathrag ask` (and HTTP POST /ask) for PATHRAG_HOME from one long-lived process."""
    from pathrag_pipeline.query.service import ServiceStartError
    from pathrag_pipeline.query.service import serve as run

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    def ready(info) -> None:
        click.echo(f"query service for {settings.home} at {info.url} (token in "
                   f"{settings.home / 'query_service.json'}); `pathrag ask` uses it. Ctrl-C or SIGTERM stops it.",
                   err=True)

    try:
        answered = run(settings, host=host, port=port, workers=workers, ready=ready)
    except ServiceStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"query service stopped after {answered} queries", err=True)
