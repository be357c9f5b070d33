"""`pathrag serve`: keep the query engine loaded for a home so every `pathrag ask` skips its start-up, and
run the home's `pathrag index` runs (``cli/indexing.ServiceIndexer``) without theirs.

The service and its protocol are in ``query/service.py``; `pathrag ask` and `pathrag index` find it through
``PATHRAG_HOME/query_service.json`` and work locally when it is gone or runs with other settings.
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
    """Answer `pathrag ask` and run `pathrag index` for PATHRAG_HOME from one long-lived process."""
    from pathrag_pipeline.cli.indexing import ServiceIndexer
    from pathrag_pipeline.query.service import ServiceStartError
    from pathrag_pipeline.query.service import serve as run

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    def ready(info) -> None:
        click.echo(f"query service for {settings.home} at {info.url} (token in "
                   f"{settings.home / 'query_service.json'}); `pathrag ask` and `pathrag index` use it, `pathrag "
                   "page` opens its page in a browser. Ctrl-C or SIGTERM stops it.", err=True)

    try:
        answered = run(settings, host=host, port=port, workers=workers, ready=ready,
                       indexer=ServiceIndexer(settings))
    except ServiceStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"query service stopped after {answered} queries", err=True)


@click.command()
@click.option("--print-url", "print_url", is_flag=True,
              help="Print the page's address (with its one-time token) instead of opening a browser.")
def page(print_url: bool) -> None:
    """Open the query service's page (ask, see the paths drawn, earlier asks) in a browser."""
    import webbrowser

    from pathrag_pipeline.query.service_client import live_service

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    info = live_service(settings.home)
    if info is None:
        raise click.ClickException(f"no query service runs for {settings.home}: start one with `pathrag serve`, "
                                   "then run `pathrag page` again")
    url = f"{info.url}/?token={info.token}"
    if print_url or not webbrowser.open(url):
        # the address carries the token (it moves to a cookie on the first visit): shown only when asked for
        click.echo(url)
    else:
        click.echo(f"opened {info.url}/ in your browser", err=True)
