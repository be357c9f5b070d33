"""extract_fanout on dagster-celery: a real Redis broker, worker processes started as on other hosts, shard data
through an S3-compatible server (moto); the tables equal a one-process run's. The unit tests need nothing extra;
the slow one skips, saying what to install, without redis-server or the `distributed` extra.

    apt-get install redis-server && pip install -e ".[distributed]" && pytest -m slow tests/test_fanout_celery.py
"""

from __future__ import annotations

import dagster as dg
import pytest

from assets.executors import HOME_QUEUE, QUEUE_TAG, SHARD_QUEUE, is_celery_run
from tests.test_fanout import setup, tables  # noqa: F401 - the fixture: a reference corpus and one to fan out


def test_the_duckdb_steps_go_to_the_home_hosts_queue_and_the_shards_to_any_worker():
    from assets.fanout import fanout_job

    job = fanout_job()
    tags = {node.name: node.definition.tags.get(QUEUE_TAG) for node in job.graph.node_dict.values()}
    assert tags == {"plan_extraction_shards": HOME_QUEUE, "write_extraction_shards": HOME_QUEUE,
                    "extract_extraction_shard": None}          # None: dagster-celery's default queue
    assert SHARD_QUEUE == "dagster"


def test_the_executor_is_chosen_by_run_config_alone():
    from assets.fanout import fanout_job

    job = fanout_job()
    base = {"ops": {"plan_extraction_shards": {"config": {"shards": 2}}}}
    for execution in ({}, {"multiprocess": {"max_concurrent": 2}}, {"celery": {"broker": "redis://127.0.0.1:1/0"}}):
        config = {**base, "execution": {"config": execution}} if execution else base
        assert dg.validate_run_config(job, config)
        assert is_celery_run(config) == ("celery" in execution)
    with pytest.raises(dg.DagsterInvalidConfigError):   # one executor at a time
        dg.validate_run_config(job, {**base, "execution": {"config": {
            "multiprocess": {}, "celery": {"broker": "redis://127.0.0.1:1/0"}}}})


def test_shard_storage_is_a_shared_folder_or_s3(tmp_path):
    from pathrag_pipeline.config import ConfigError, Settings

    assert Settings.from_env({}).shard_storage is None
    assert Settings.from_env({"PATHRAG_SHARD_STORAGE": str(tmp_path)}).shard_storage == str(tmp_path)
    assert Settings.from_env({"PATHRAG_SHARD_STORAGE": "s3://bucket/fanout/"}).shard_storage == "s3://bucket/fanout"
    with pytest.raises(ConfigError, match="PATHRAG_SHARD_STORAGE: scheme 'gs' is not supported"):
        Settings.from_env({"PATHRAG_SHARD_STORAGE": "gs://b/x"})


def test_a_shared_folder_carries_shard_data_from_step_to_step(setup, openai_server, tmp_path, monkeypatch):
    """In-process run with the IO manager on a folder: every output lands there, none in the Dagster home."""
    from assets.fanout import fanout_job

    single, fanned, calls_single = setup
    shared = tmp_path / "shared"
    monkeypatch.setenv("PATHRAG_SHARD_STORAGE", str(shared))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        result = fanout_job().execute_in_process(
            instance=instance, run_config={"ops": {"plan_extraction_shards": {"config": {"shards": 2}}}})
    assert result.success and tables(fanned) == tables(single)
    stored = {p.relative_to(shared / result.run_id).parts[0].split("[")[0]
              for p in (shared / result.run_id).rglob("*") if p.is_file()}
    assert stored == {"plan_extraction_shards", "extract_extraction_shard", "write_extraction_shards"}
    assert not list((tmp_path / "dagster" / "storage").glob(f"{result.run_id}/*/result"))


# ---- the real thing: Redis, moto, 3 worker processes --------------------------------------------------------
@pytest.fixture()
def cluster(tmp_path, monkeypatch):
    """Redis and moto on 127.0.0.1, a persistent Dagster home, and the environment a worker on another host would
    be given; yields (env, broker url, s3 server). Skips with what to install when a piece is missing."""
    pytest.importorskip("dagster_celery", reason="pip install -e '.[distributed]' (dagster-celery)")
    pytest.importorskip("dagster_aws", reason="pip install -e '.[distributed]' (dagster-aws)")
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml
    from pathrag_lab.testing.backing_services import RedisServer, S3Server, ServiceUnavailable

    started = []
    try:
        redis = RedisServer(tmp_path / "redis").start()
        started.append(redis)
        s3 = S3Server(tmp_path / "moto").start()
        started.append(s3)
    except ServiceUnavailable as exc:
        for service in started:
            service.stop()
        pytest.skip(str(exc))
    s3.create_bucket("shards")
    dagster_home = tmp_path / "dagster"
    ensure_dagster_yaml(dagster_home)    # the pathrag instance config: the duckdb pool limited to one step
    env = {**s3.env(), "DAGSTER_HOME": str(dagster_home), "PATHRAG_SHARD_STORAGE": "s3://shards/fanout"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        yield env, redis.url(), s3
    finally:
        for service in reversed(started):
            service.stop()


@pytest.mark.slow
def test_fanout_on_celery_workers_writes_the_tables_one_process_writes(setup, cluster, openai_server, tmp_path):
    import os

    import boto3

    from assets.fanout import fanout_job
    from pathrag_lab.testing.backing_services import start_workers

    single, fanned, calls_single = setup
    env, broker, s3 = cluster
    openai_server.response_delay = 0.3     # shards last long enough for both shard workers to take one
    worker_env = {**env, **{k: v for k, v in os.environ.items() if k.startswith("PATHRAG_")}}
    workers = start_workers([("home", [HOME_QUEUE]), ("shard-a", [SHARD_QUEUE]), ("shard-b", [SHARD_QUEUE])],
                            broker, worker_env, tmp_path / "workers")
    try:
        with dg.DagsterInstance.get() as instance:
            result = dg.execute_job(
                dg.reconstructable(fanout_job), instance=instance,
                run_config={"ops": {"plan_extraction_shards": {"config": {"shards": 4}}},
                            "execution": {"config": {"celery": {"broker": broker}}}})
            assert result.success
            events = result.all_events
    finally:
        for worker in workers:
            worker.stop()
    home, shard_pids = workers[0].pid, {w.pid for w in workers[1:]}
    ran_in: dict[str, set[int]] = {}      # op -> the pids its steps ran in (each output's metadata says)
    for event in events:
        if event.is_successful_output:
            pid = event.event_specific_data.metadata["pid"].value
            ran_in.setdefault(event.step_key.split("[")[0], set()).add(pid)
    assert ran_in["plan_extraction_shards"] == {home} and ran_in["write_extraction_shards"] == {home}
    assert len(ran_in["extract_extraction_shard"]) == 2 and ran_in["extract_extraction_shard"] <= shard_pids
    assert openai_server.count("chat") == calls_single      # every text extracted once, in the shard steps
    assert tables(fanned) == tables(single)
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="shards", Prefix="fanout/")["Contents"]]
    assert any("/extract_extraction_shard" in k for k in keys) and any("/plan_extraction_shards" in k for k in keys)
    local = tmp_path / "dagster" / "storage" / result.run_id       # the instance's compute logs only, no step data
    assert [p for p in local.rglob("*") if p.is_file() and "compute_logs" not in p.parts] == []
