"""Runs whose process died: found, marked failed, their ``duckdb`` pool slots freed, before a new run waits.

Every pathrag step runs in the ``duckdb`` pool (one step at a time) and every job runs in-process, so a run's
steps live in one process: the run worker. ``kill -9`` of that process (an OOM kill, a reboot) leaves the run
STARTED and its claimed slot held; Dagster's in-process executor then waits for that slot forever, spinning a
core and deaf to SIGTERM (issue 22). So each run records its process (``PROCESS_TAG``, see
``pathrag_pipeline/storage/process_identity.py``) when the ``pathrag`` resource starts, and every caller that
is about to launch or run a pathrag job (`pathrag index`, the folder sensor, the nightly schedule) first calls
``release_dead_runs``: an unfinished run whose recorded process is gone is reported failed with a message
naming that process, and its slots and pending steps are freed. A run with no recorded process (started
before this release) is dead too when it was executed in-process by `index_folder` (`pathrag index`,
quickstart, Python: its trigger tag says so) and the caller holds the home's index lock: `index_folder` holds
that lock for its run's whole life. Any other run without a recorded process, or on another host, is left
alone: it may be alive.

``pool_holders`` lists the live holders, so a waiting `pathrag index` can say what it waits for.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from assets.executors import is_celery_run
from pathrag_pipeline.storage.process_identity import describe, identity, is_alive

PROCESS_TAG = "pathrag/process"
TRIGGER_TAG = "pathrag/trigger"   # as assets/ingestion.py
IN_PROCESS_TRIGGERS = ("cli", "quickstart", "python")   # runs executed by index_folder under the index lock
POOL = "duckdb"
UNFINISHED = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


@dataclass(frozen=True)
class Holder:
    """A run holding (or waiting in) the pool: its id, step, status and recorded process ('' if none)."""

    run_id: str
    step_key: str
    status: str
    process: str

    def describe(self) -> str:
        where = describe(self.process) if self.process else "process not recorded"
        return f"Dagster run {self.run_id[:8]} (step {self.step_key}, {self.status.lower()}, {where})"


def own_tags() -> dict[str, str]:
    """The tag naming this process, for a run executed here."""
    return {PROCESS_TAG: identity()}


def run_worker_identity() -> str:
    """The process that runs the whole run: this one, or, in a step subprocess of the multiprocess executor
    (`extract_fanout`), its parent. Tagging a step subprocess would let the run look dead between two steps."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    return identity(parent.pid) if parent is not None and parent.pid else identity()


def tag_run(instance: dg.DagsterInstance | None, run_id: str | None) -> None:
    """Record the run worker's process on the run; never fails the run."""
    if instance is None or not run_id:
        return
    try:
        value = run_worker_identity()
        run = instance.get_run_by_id(run_id)
        if run is not None and is_celery_run(run.run_config):
            return   # its steps run in celery workers, possibly on other hosts: none of them is the run's process
        if run is not None and run.tags.get(PROCESS_TAG) != value:
            instance.add_run_tags(run_id, {PROCESS_TAG: value})
    except Exception:  # noqa: BLE001 - a storage hiccup must not fail the step; the run is only not recoverable
        pass


def _slots(instance: dg.DagsterInstance) -> list[tuple[str, str]]:
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    try:
        info = storage.get_concurrency_info(POOL)
    except Exception:  # noqa: BLE001 - no pool table yet (a fresh instance)
        return []
    return [(s.run_id, s.step_key) for s in info.claimed_slots]


def _dead(run: dg.DagsterRun, index_lock_held: bool) -> str | None:
    """Why ``run``'s process is known to be gone, or None when it is alive or cannot be told."""
    process = run.tags.get(PROCESS_TAG, "")
    if process:
        return f"its process ({describe(process)}) is gone" if is_alive(process) is False else None
    if index_lock_held and run.tags.get(TRIGGER_TAG) in IN_PROCESS_TRIGGERS:
        return ("it ran inside a `pathrag index` process, which holds the home's index lock while it lives, and "
                "this process holds that lock now")
    return None


def release_dead_runs(instance: dg.DagsterInstance, *, index_lock_held: bool = False) -> list[str]:
    """Mark failed every unfinished run whose process is known to be gone, free the pool slots of those and of
    finished or deleted runs; one line per run released. ``index_lock_held``: the caller holds the home's
    index lock (see the module docstring)."""
    released: list[str] = []
    candidates: dict[str, str] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        candidates[run.run_id] = ""
    for run_id, step in _slots(instance):
        candidates[run_id] = step
    storage = instance.event_log_storage
    for run_id, step in candidates.items():
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            if step:   # a slot left behind by a run that ended or was deleted
                storage.free_concurrency_slots_for_run(run_id)
                released.append(f"freed the {POOL} pool slot of Dagster run {run_id[:8]}, which had ended")
            continue
        why = _dead(run, index_lock_held)
        if why is None:
            continue
        instance.report_run_failed(run, f"Marked failed by pathrag: {why} (killed, out of memory or a reboot); "
                                        f"its {POOL} pool slot is freed.")
        if storage.supports_global_concurrency_limits:
            storage.free_concurrency_slots_for_run(run_id)
        released.append(f"Dagster run {run_id[:8]} was left running by a process that is gone ({why}): "
                        f"marked failed, its {POOL} pool slot freed")
    return released


def pool_holders(instance: dg.DagsterInstance) -> list[Holder]:
    """The runs that hold the pool's slot now (after ``release_dead_runs``: live or unknown ones)."""
    holders = []
    for run_id, step in _slots(instance):
        run = instance.get_run_by_id(run_id)
        if run is not None:
            holders.append(Holder(run_id, step, run.status.value, run.tags.get(PROCESS_TAG, "")))
    return holders
