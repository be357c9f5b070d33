"""A run whose process died never blocks the next one (issue 22 item 1): found, marked failed, pool slot freed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing

import dagster as dg
import pytest

from assets.runs import PoolWaitInterrupted, instance_for, wait_for_pool
from assets.stale_runs import PROCESS_TAG, TRIGGER_TAG, pool_holders, release_dead_runs
from pathrag_pipeline.config import Settings
from pathrag_pipeline.storage.process_identity import describe, identity, is_alive, parse


@pytest.fixture
def instance(tmp_path):
    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")})
    inst = instance_for(settings)
    yield inst
    inst.dispose()


def dead_identity() -> str:
    """The identity of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    value = identity(child.pid)
    child.kill()
    child.wait()
    return value


def stuck_run(instance: dg.DagsterInstance, tags: dict[str, str], step: str = "ingest", holds: bool = True) -> str:
    """A STARTED run holding the duckdb pool's slot, as a run killed in its step leaves it (``holds=False``: its
    step waits for the slot)."""
    run_id = str(uuid.uuid4())
    instance.add_run(dg.DagsterRun(job_name="index_folder", run_id=run_id, status=dg.DagsterRunStatus.STARTED,
                                   tags=tags))
    instance.event_log_storage.initialize_concurrency_limit_to_default("duckdb")
    claim = instance.event_log_storage.claim_concurrency_slot("duckdb", run_id, step)
    assert claim.is_claimed == holds
    return run_id


def test_identity_tells_a_live_process_from_a_dead_one_and_a_reused_pid():
    me = identity()
    assert is_alive(me) is True
    assert is_alive(dead_identity()) is False
    host, pid, start = parse(me)
    assert pid == os.getpid() and describe(me) == f"pid {pid} on {host}"
    if start:   # /proc: the same pid with another start time is a later process, not this one
        assert is_alive(f"{host}:{pid}:{int(start) + 1}") is False
    assert is_alive(f"another-host.example:{pid}:{start}") is None
    assert is_alive("not an identity") is None


def test_a_run_whose_process_is_gone_is_marked_failed_and_its_slot_freed(instance):
    dead = stuck_run(instance, {PROCESS_TAG: dead_identity(), TRIGGER_TAG: "sensor"})
    alive = stuck_run(instance, {PROCESS_TAG: identity(), TRIGGER_TAG: "sensor"}, step="graph", holds=False)

    lines = release_dead_runs(instance)

    assert len(lines) == 1 and dead[:8] in lines[0] and "marked failed" in lines[0]
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive).status == dg.DagsterRunStatus.STARTED
    assert instance.event_log_storage.claim_concurrency_slot("duckdb", alive, "graph").is_claimed  # its turn now
    assert [h.run_id for h in pool_holders(instance)] == [alive]
    assert release_dead_runs(instance) == []                   # nothing more to release


def test_a_run_without_a_recorded_process_is_released_only_when_index_folder_ran_it_under_the_held_lock(instance):
    legacy_cli = stuck_run(instance, {TRIGGER_TAG: "cli"})
    assert release_dead_runs(instance) == []                   # not holding the lock: it may be alive
    assert release_dead_runs(instance, index_lock_held=True)   # index_folder's lock: its runs hold it while alive
    assert instance.get_run_by_id(legacy_cli).status == dg.DagsterRunStatus.FAILURE
    from_ui = stuck_run(instance, {})                          # launched by the UI or daemon: cannot be told
    assert release_dead_runs(instance, index_lock_held=True) == []
    assert instance.get_run_by_id(from_ui).status == dg.DagsterRunStatus.STARTED


def test_wait_for_pool_says_what_it_waits_for_and_goes_on_once_the_holder_dies(instance):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_id = stuck_run(instance, {PROCESS_TAG: identity(holder.pid), TRIGGER_TAG: "sensor"})
        said: list[str] = []

        def notice(line: str) -> None:
            said.append(line)
            if line.startswith("waiting:"):
                holder.kill()
                holder.wait()

        wait_for_pool(instance, notice=notice, poll=0.05)
    finally:
        holder.kill()
        holder.wait()
    assert said[0].startswith(f"waiting: Dagster run {run_id[:8]} (step ingest, started, pid {holder.pid}")
    assert "marked failed" in said[1]
    assert pool_holders(instance) == []


def test_sigterm_while_waiting_for_the_pool_stops_with_one_line(instance):
    stuck_run(instance, {PROCESS_TAG: identity(), TRIGGER_TAG: "sensor"})   # a live holder: this very process

    def notice(line: str) -> None:
        if line.startswith("waiting:"):
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(PoolWaitInterrupted, match="no run was started and the index is unchanged"):
        wait_for_pool(instance, notice=notice, poll=0.05)
    assert signal.getsignal(signal.SIGTERM) == before          # the handler is put back


@pytest.mark.e2e   # index runs in subprocesses: end to end, run by .ci/run (pytest -m e2e)
def test_index_killed_while_holding_the_pool_does_not_block_the_next_index(tmp_path):
    """kill -9 of `pathrag index` inside its first step, then a plain `pathrag index` completes (it used to
    wait forever, spinning a core and deaf to SIGTERM)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(150):
        (docs / f"d{i}.txt").write_text(f"Ada Lovelace met Charles Babbage in London, note {i}. " * 40)
    home = tmp_path / "home"
    env = {**os.environ, "PATHRAG_HOME": str(home)}
    first = subprocess.Popen([sys.executable, "-m", "pathrag_pipeline.cli", "index", str(docs)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    settings = Settings.from_env(env={"PATHRAG_HOME": str(home)})
    index_db = settings.dagster_home / "history" / "runs" / "index.db"
    deadline = time.monotonic() + 120
    claimed: list[tuple[str, str]] = []
    try:
        # read Dagster's SQLite read-only: opening the instance here while the child creates its schema
        # would race it ("table already exists")
        while not claimed and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.1)
            try:
                with closing(sqlite3.connect(f"file:{index_db}?mode=ro", uri=True, timeout=1)) as con:
                    claimed = con.execute("SELECT run_id, step_key FROM concurrency_slots "
                                          "WHERE concurrency_key = 'duckdb' AND run_id IS NOT NULL").fetchall()
            except sqlite3.Error:   # not created yet
                claimed = []
    finally:
        first.kill()
        first.wait()
    assert claimed, "the first index never claimed the pool (it ended too fast to be killed inside a step)"

    second = subprocess.run([sys.executable, "-m", "pathrag_pipeline.cli", "index", str(docs)], env=env,
                            capture_output=True, text=True, timeout=300)

    assert second.returncode == 0, second.stderr[-2000:]
    assert f"Dagster run {claimed[0][0][:8]} was left running by a process that is gone" in second.stderr
    inst = dg.DagsterInstance.from_config(str(settings.dagster_home))
    try:
        assert inst.get_run_by_id(claimed[0][0]).status == dg.DagsterRunStatus.FAILURE
        assert inst.event_log_storage.get_concurrency_info("duckdb").claimed_slots == []
    finally:
        inst.dispose()


def test_the_sensor_and_the_schedule_release_a_dead_run_before_requesting_theirs(instance, tmp_path):
    from assets.automation import document_folder_sensor, reconcile_schedule
    from assets.resources import PathragResource

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Ada Halden founded Valmere University in 1851.\n")
    pathrag = PathragResource(home=str(tmp_path / "home"), docs=str(docs))
    by_sensor = stuck_run(instance, {PROCESS_TAG: dead_identity(), TRIGGER_TAG: "sensor"})
    result = document_folder_sensor(dg.build_sensor_context(instance=instance, resources={"pathrag": pathrag}))
    assert len(result.run_requests) == 1
    assert instance.get_run_by_id(by_sensor).status == dg.DagsterRunStatus.FAILURE

    by_schedule = stuck_run(instance, {PROCESS_TAG: dead_identity(), TRIGGER_TAG: "schedule"})
    request = reconcile_schedule(dg.build_schedule_context(instance=instance))
    assert request.tags[TRIGGER_TAG] == "schedule" and request.tags["pathrag/duckdb"] == "write"
    assert instance.get_run_by_id(by_schedule).status == dg.DagsterRunStatus.FAILURE
    assert pool_holders(instance) == []


def test_a_step_subprocess_records_its_run_worker_not_itself():
    """extract_fanout's steps run in child processes: the run must not look dead once a step's child exits."""
    import multiprocessing

    from assets.stale_runs import run_worker_identity

    assert run_worker_identity() == identity()     # in-process: the run worker is this process
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        child_says = pool.apply(run_worker_identity)
    assert child_says == identity()                # a spawned step names its parent, the run worker


HOLDER = """
import sys, uuid
import dagster as dg
from assets.runs import instance_for
from assets.stale_runs import PROCESS_TAG, TRIGGER_TAG
from pathrag_pipeline.config import Settings
from pathrag_pipeline.storage.process_identity import identity
from pathrag_pipeline.storage.run_lock import index_lock

settings = Settings.from_env(env={"PATHRAG_HOME": sys.argv[1]})
instance = instance_for(settings)
run_id = str(uuid.uuid4())
instance.add_run(dg.DagsterRun(job_name="index_folder", run_id=run_id, status=dg.DagsterRunStatus.STARTED,
                               tags={PROCESS_TAG: identity(), TRIGGER_TAG: "sensor"}))
instance.event_log_storage.initialize_concurrency_limit_to_default("duckdb")
assert instance.event_log_storage.claim_concurrency_slot("duckdb", run_id, "ingest").is_claimed
print("holding", flush=True)
sys.stdin.readline()                      # then, like a step of a UI run, it takes the home's index lock
with index_lock(settings.home, on_wait=None):
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)
print("done", flush=True)
"""


@pytest.mark.e2e   # index runs in subprocesses: end to end, run by .ci/run (pytest -m e2e)
def test_index_waits_for_a_live_pool_holder_outside_the_index_lock_so_both_finish(tmp_path):
    """A UI/daemon run's step holds the duckdb pool and then needs the index lock: `pathrag index` must not wait
    for the pool while holding that lock (both would wait forever)."""
    import queue
    import threading

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Ada Halden founded Valmere University in 1851.\n")
    home = tmp_path / "home"
    env = {**os.environ, "PATHRAG_HOME": str(home)}
    cli = [sys.executable, "-m", "pathrag_pipeline.cli", "index", str(docs)]
    assert subprocess.run(cli, env=env, capture_output=True).returncode == 0
    (docs / "b.md").write_text("The Drayton Railway reached Carrick in 1880.\n")   # so the next index has work
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        index = subprocess.Popen(cli, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in index.stderr], daemon=True).start()
        line = lines.get(timeout=120)
        while not line.startswith("waiting:"):
            line = lines.get(timeout=120)
        assert "holds the duckdb pool" in line and f"pid {holder.pid}" in line
        said: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: said.put(holder.stdout.readline().strip()), daemon=True).start()
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert said.get(timeout=120) == "done"   # it got the index lock: `pathrag index` waited outside it
        assert index.wait(timeout=300) == 0
    finally:
        for proc in (holder, locals().get("index")):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
