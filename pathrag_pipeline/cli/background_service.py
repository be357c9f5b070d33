"""The query service a command starts in the background for the next ones (issue 64).

A one-file edit through `pathrag index` in a new process spends most of its time before and around the work:
importing openai, Dagster and LanceDB, opening the Dagster instance, DuckDB's first opens (about 6 of 8 s on
2 cores), none of which a new process can skip. `pathrag serve` keeps them loaded and runs the home's index runs
and asks without them ("Peers" in docs/benchmarks.md). So after a `pathrag index` or `pathrag ask` that ran in
its own process, the command starts `pathrag serve` for the home in the background, as build tools start their
daemon (Gradle's, Bazel's server): the next command on the home hands its work to it.

- When: ``PATHRAG_AUTO_SERVE`` (``Settings.auto_serve``): ``terminal`` (the default) when the command's stderr is
  a terminal, so scripts, cron jobs, CI and tests never leave a process behind unless they ask; ``always``;
  ``never``. Only the plain commands start one (not ``--local``, ``--runless``, ``--triples``, ``--reembed``,
  ``pathrag quickstart``), and only when the command succeeded and no service runs or is starting for the home.
- What: ``python -m pathrag_pipeline.cli serve --idle-exit IDLE_EXIT_S --background`` in its own session (a
  terminal's hang-up or Ctrl-C does not reach it), stdin from /dev/null, its output appended to
  ``PATHRAG_HOME/query_service.log``, the command's environment (its settings and keys, which never reach the
  log or the description). It stops after ``IDLE_EXIT_S`` without a request, on `pathrag serve --stop`, or when
  a later command finds it runs with other settings, keys or code (``service_client``): that command asks it to
  stop, works in its own process, and starts a matching one.
- Only one starts: ``PATHRAG_HOME/query_service.starting`` is created exclusively and names the starting process;
  it is removed once the service is up, and ignored after ``STARTING_FOR_S`` (so a start that failed is tried
  again then, not by every command).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click

from pathrag_pipeline.config import ENV_NAMES, Settings

IDLE_EXIT_S = 900            # a background service stops after 15 minutes without a request
STARTING_FOR_S = 120.0       # a start marker older than this is a start that failed (its log says why)
STARTING_FILE = "query_service.starting"
LOG_FILE = "query_service.log"
LOG_KEEP_BYTES = 1 << 20     # a log past 1 MiB is moved to query_service.log.1 when the next service starts


def wanted(settings: Settings) -> bool:
    """Whether this command should leave a service behind for the next one (``PATHRAG_AUTO_SERVE``)."""
    if settings.auto_serve == "never":
        return False
    if settings.auto_serve == "always":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):   # a closed or replaced stderr
        return False


def starting_file(home: Path) -> Path:
    return Path(home) / STARTING_FILE


def start_under_way(home: Path) -> bool:
    """A service for ``home`` was started less than ``STARTING_FOR_S`` ago and is not up yet: it is starting, or it
    failed (its log says why), and then it is not tried again before that time (a start that fails every time
    does not cost every command a background process)."""
    try:
        return time.time() - starting_file(home).stat().st_mtime < STARTING_FOR_S
    except OSError:
        return False


def start_for_next_command(settings: Settings) -> int | None:
    """Start `pathrag serve` for the home in the background when wanted and none runs or is starting; its pid,
    after one stderr line saying so, or None. Never raises: a service that cannot start leaves the command's
    result as it was (the log says why)."""
    from pathrag_pipeline.query.service_client import live_service

    home = settings.home
    if not wanted(settings) or not home.is_dir() or live_service(home) is not None or start_under_way(home):
        return None
    marker = starting_file(home)
    marker.unlink(missing_ok=True)   # a stale one (start_under_way said so)
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:   # another command created it just now, or the home is read-only
        return None
    try:
        pid = _spawn(home)
    except OSError as exc:
        os.close(fd)
        marker.unlink(missing_ok=True)
        click.echo(f"note: no query service started in the background ({exc.strerror or exc})", err=True)
        return None
    from pathrag_pipeline.storage.process_identity import identity

    with os.fdopen(fd, "w") as fh:
        fh.write(identity(pid))
    click.echo(f"started a query service for this home in the background (pid {pid}, log {home / LOG_FILE}): the "
               f"next `pathrag index` and `pathrag ask` here hand their work to it and skip their start-up; it stops "
               f"after {IDLE_EXIT_S // 60} minutes without one (`pathrag serve --stop` now; "
               f"{ENV_NAMES['auto_serve']}=never starts none)", err=True)
    return pid


def _spawn(home: Path) -> int:
    log = home / LOG_FILE
    try:
        if log.stat().st_size > LOG_KEEP_BYTES:
            os.replace(log, log.with_name(LOG_FILE + ".1"))
    except OSError:
        pass
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pathrag_pipeline.cli", "serve", "--idle-exit", str(IDLE_EXIT_S), "--background"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=home, start_new_session=True,
            close_fds=True)
    proc.returncode = 0   # not waited for: it outlives this process (and Popen's finaliser would warn)
    return proc.pid


def started(home: Path) -> None:
    """The service is up (its description is written): the start marker goes."""
    starting_file(home).unlink(missing_ok=True)
