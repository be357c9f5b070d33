"""Run the `index_folder` job in this process against the persistent Dagster instance in PATHRAG_HOME.

This is how `pathrag index`, `pathrag quickstart` and Python callers index: the run, its asset
materialisations, checks and logs land in the same instance the UI (`pathrag dev`), the sensor and the
schedule use, so the UI's run list and asset pages match the tables. The steps run in the caller's process
(no subprocess, no daemon needed); the stage reports come back through the `reports` resource so the CLI
prints exactly what it printed before. `pathrag index` calls this only when there is work: it first asks
`pathrag_pipeline.index.pending_work`, and a folder with nothing new, changed, deleted or pending gets no
run at all (as a sensor tick with no change launches none). Called directly, this always runs.

    from assets.runs import index_folder
    report = index_folder(Settings.from_env(docs=Path("docs/")), trigger="python")

`pathrag_pipeline.index.pipeline.run_indexing` stays the Dagster-free way (evaluation, benchmarks): it
writes the same tables but records no Dagster run.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from assets.automation import RUN_TAGS, index_job
from assets.event_log_engines import keep_engines
from assets.failures import original_error
from assets.graph import embeddings, graph
from assets.ingestion import TRIGGER_TAG, ingest
from assets.resources import PathragResource, RunReports
from assets.stale_runs import own_tags, pool_holders, release_dead_runs
from pathrag_pipeline.config import Settings
from pathrag_pipeline.dagster_home import ensure_dagster_yaml
from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.index.pipeline import IndexReport, assemble_report
from pathrag_pipeline.storage.run_lock import held_here, index_lock
from pathrag_pipeline.storage.store import Store

QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def instance_for(settings: Settings) -> dg.DagsterInstance:
    """The persistent instance in PATHRAG_HOME/dagster (created, with its dagster.yaml, on first use), its SQLite
    event log keeping one engine per shard (``event_log_engines``)."""
    ensure_dagster_yaml(settings.dagster_home)
    return keep_engines(dg.DagsterInstance.from_config(str(settings.dagster_home)))


def index_folder(settings: Settings, *, trigger: str = "python", triples: Path | None = None,
                 reembed: bool = False, replace_folder: bool = False, instance: dg.DagsterInstance | None = None,
                 quiet: bool = True, retry_failed: bool = False) -> IndexReport:
    """Index ``settings.docs`` as one `index_folder` run recorded in the Dagster instance; returns the report.
    ``replace_folder``: index it in place of the folder the home holds (the `ingest` step's ``replace``)."""
    started = time.perf_counter()
    reports = RunReports(across_steps=True)   # released below when the run ends
    resources = {"pathrag": PathragResource(home=str(settings.home), docs=str(settings.docs),
                                            triples=str(triples) if triples else None,
                                            retry_failed=retry_failed),
                 "reports": reports}
    job = dg.Definitions(
        assets=[ingest, graph, embeddings],
        jobs=[index_job], resources=resources,
    ).resolve_job_def(index_job.name)
    run_config = {"ops": {"ingest": {"config": {"replace": replace_folder}},
                          "embeddings": {"config": {"reembed": reembed}}}, **(QUIET if quiet else {})}
    own = instance is None
    # One indexing run per home: the lock is held for the whole job (its steps re-enter it), and from before the
    # instance is opened: two first runs on a fresh home would otherwise both create Dagster's SQLite schema and
    # one would fail ("table ... already exists"). A failing step re-raises its own exception here (a
    # PipelineError prints as one clear line in the CLI) after the run is recorded as failed in the instance.
    # The pool is waited for *outside* the index lock: a live UI/daemon run whose step holds the pool slot takes
    # the index lock next, and waiting for its slot while holding the lock would deadlock both. When an outer
    # caller holds the lock (`pathrag index`), it has done that wait itself (``pool_busy``) just before.
    outer = held_here(settings.home)
    try:
        while True:
            with index_lock(settings.home):
                instance = instance or instance_for(settings)
                if outer or pool_busy(instance) is None:
                    if outer:
                        wait_for_pool(instance, index_lock_held=True)
                    try:
                        with runs_recorded_from_code_location(instance, job.name), sigterm_kept():
                            result = job.execute_in_process(instance=instance, run_config=run_config,
                                                            tags={**RUN_TAGS, TRIGGER_TAG: trigger, **own_tags()})
                    except dg.Failure as failure:   # a step's one-line failure: the caller gets the original
                        raise original_error(failure) from None
                    break
            wait_for_pool(instance)
        # the report's counts on the connection the run's steps held, if they held one (``RunReports.holding``)
        report = assemble_report(reports.get("sync"), reports.get("graph"), reports.get("embeddings"),
                                 reports.holds() or Store.for_settings(settings),
                                 seconds=time.perf_counter() - started)
    finally:
        reports.release()
        if own and instance is not None:
            instance.dispose()
    report.dagster_run_id = result.run_id
    return report


@contextmanager
def sigterm_kept():
    """The process's SIGTERM disposition as it was before a Dagster run. A run in the main thread maps SIGTERM to
    SIGINT's disposition (``dagster._utils.interrupts.setup_interrupt_handlers``, "for k8s") and leaves it so: in a
    process started with SIGINT ignored (a script's background job, ``pathrag index DIR &``) SIGTERM was ignored
    after its first run, so ``kill PID`` no longer stopped it, and every process it started later inherited the
    ignored signal (the ``tail -F`` that Dagster's compute-log capture starts outlived it: its orphan watcher ends
    it with SIGTERM)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if before is not None and signal.getsignal(signal.SIGTERM) is not before:
            signal.signal(signal.SIGTERM, before)


CODE_LOCATION = "pathrag"   # workspace.yaml's location_name and [tool.dg.project] code_location_name


def code_location_origin(job_name: str):
    """The origin the UI (`pathrag dev`) gives a run of ``job_name`` launched from its code location."""
    from dagster._core.remote_origin import (
        ManagedGrpcPythonEnvCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    from pathrag_pipeline.config import PACKAGE_ROOT

    location = ManagedGrpcPythonEnvCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name="assets.definitions",
                             working_directory=str(PACKAGE_ROOT)), location_name=CODE_LOCATION)
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job_name)


@contextmanager
def runs_recorded_from_code_location(instance: dg.DagsterInstance, job_name: str):
    """Record the in-process run with the code location's origin, so the UI can re-execute it.

    `execute_in_process` records a run without one, and the UI's Re-execute of such a run fails with a raw
    `CheckError: Expected non-None value` (it looks the job up in the code location the parent run came from).
    The run is created by this instance's `create_run_for_job`; for the duration of the call that method adds
    the origin. Re-execution resolves the job by location and job name in the live workspace, which holds the
    same `index_folder` job (its resources read PATHRAG_HOME / PATHRAG_DOCS from the UI's environment).
    """
    create = instance.create_run_for_job
    origin = code_location_origin(job_name)

    def with_origin(*args, **kwargs):
        kwargs.setdefault("remote_job_origin", origin)
        return create(*args, **kwargs)

    instance.create_run_for_job = with_origin
    try:
        yield
    finally:
        del instance.create_run_for_job


class PoolWaitInterrupted(PipelineError):
    """Ctrl-C or SIGTERM while waiting for the duckdb pool: nothing was started, nothing is lost."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pool_busy(instance: dg.DagsterInstance, *, notice: Callable[[str], None] = _stderr) -> list | None:
    """Under the index lock: release runs whose process died (the lock-held rule included), then the live
    holders of the duckdb pool, or None when it is free. A caller that gets holders drops the lock and
    ``wait_for_pool`` outside it, then tries again."""
    for line in release_dead_runs(instance, index_lock_held=True):
        notice(line)
    return pool_holders(instance) or None


def wait_for_pool(instance: dg.DagsterInstance, *, notice: Callable[[str], None] = _stderr,
                  poll: float = 1.0, index_lock_held: bool = False) -> None:
    """Release runs whose process died (assets/stale_runs.py), then wait while a live run holds the duckdb
    pool, saying once which run (and again when the holder changes). Dagster's own wait for a pool slot spins
    a core and ignores SIGTERM; this one sleeps, and Ctrl-C or SIGTERM stop it at once with one line."""
    for line in release_dead_runs(instance, index_lock_held=index_lock_held):
        notice(line)
    holders = pool_holders(instance)
    if not holders:
        return
    installed, previous = False, None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM during the wait ends it like Ctrl-C (only the main thread may set handlers)
        def _terminate(signum, frame):
            raise KeyboardInterrupt
        previous, installed = signal.signal(signal.SIGTERM, _terminate), True
    said = None
    try:
        while holders:
            text = "; ".join(h.describe() for h in holders)
            if text != said:
                notice(f"waiting: {text} holds the duckdb pool (one writing step at a time per home); this run "
                       "starts when it ends (Ctrl-C to give up; a run whose process is gone is released "
                       "automatically, one on another host or without a recorded process can be terminated "
                       "in the UI, `pathrag dev`)")
                said = text
            time.sleep(poll)
            for line in release_dead_runs(instance, index_lock_held=index_lock_held):
                notice(line)
            holders = pool_holders(instance)
    except KeyboardInterrupt:
        raise PoolWaitInterrupted("stopped while waiting for the duckdb pool; no run was started and the index "
                                  "is unchanged") from None
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def record_runless(settings: Settings, report: IndexReport, instance: dg.DagsterInstance | None = None) -> int:
    """Record an index run made without Dagster (``run_indexing``) in the instance as runless materialisations
    of the index assets, with the metadata the sensor gives such runs (it then skips them). What
    `pathrag index --runless` does after the indexing work; returns the events recorded."""
    from assets.automation import materialisations_of_run

    events = materialisations_of_run(Store.for_settings(settings), report.sync.run_id)
    own = instance is None
    with index_lock(settings.home):  # as in index_folder: one process at a time creates the instance's storage
        instance = instance or instance_for(settings)
        try:
            for event in events:
                instance.report_runless_asset_event(event)
        finally:
            if own:
                instance.dispose()
    return len(events)

