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
@click.option("--idle-exit", "idle_exit", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop after this many seconds without a request (default: run until stopped).")
@click.option("--stop", is_flag=True, help="Stop the service running for PATHRAG_HOME (once its requests in hand "
                                           "are done) instead of starting one.")
@click.option("--background", is_flag=True, hidden=True,
              help="Started by a command for the next ones (cli/background_service.py).")
def serve(host: str, port: int, workers: int | None, idle_exit: float | None, stop: bool, background: bool) -> None:
    """Answer `pathrag ask` and run `pathrag index` for PATHRAG_HOME from one long-lived process."""
    from pathrag_pipeline.cli.indexing import ServiceIndexer
    from pathrag_pipeline.query.service import ServiceStartError
    from pathrag_pipeline.query.service import serve as run

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if stop:
        _stop(settings)
        return

    def ready(info) -> None:
        if background:
            from pathrag_pipeline.cli.background_service import started

            started(settings.home)
        click.echo(f"query service for {settings.home} at {info.url} (token in "
                   f"{settings.home / 'query_service.json'}); `pathrag ask` and `pathrag index` use it, `pathrag "
                   "page` opens its page in a browser. " + (
                       f"Started in the background; it stops after {idle_exit:g} s without a request."
                       if background else "Ctrl-C or SIGTERM stops it."), err=True)

    try:
        answered = run(settings, host=host, port=port, workers=workers, ready=ready,
                       indexer=ServiceIndexer(settings), idle_exit=idle_exit, background=background)
    except ServiceStartError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"query service stopped after {answered} quer{'y' if answered == 1 else 'ies'}", err=True)


def _stop(settings: Settings) -> None:
    import time

    from pathrag_pipeline.query.service_client import ServiceError, ServiceUnavailable, call, live_service

    info = live_service(settings.home)
    if info is None:
        raise click.ClickException(f"no query service runs for {settings.home}")
    try:
        call(info, "/stop", {}, timeout=10.0)
    except (ServiceUnavailable, ServiceError) as exc:
        raise click.ClickException(f"the query service at {info.url} did not stop: {exc}") from None
    deadline = time.monotonic() + 60
    while live_service(settings.home) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if live_service(settings.home) is not None:
        raise click.ClickException(f"the query service at {info.url} was asked to stop and still runs after 60 s "
                                   "(an index run in hand finishes first)")
    click.echo(f"query service at {info.url} stopped", err=True)


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
