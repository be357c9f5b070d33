"""`pathrag bench fanout`: extract_fanout on dagster-celery workers, and queries with LanceDB on an object store.

Part 1, extraction. A generated corpus (``bench.indexing``'s, ``n_docs`` documents) is ingested once; each run
starts from a copy of that home. The scripted OpenAI-compatible server answers like an extraction LLM (the
offline extractor's output, ``OfflineBackedModel``) after a fixed ``delay`` per request and serves requests
concurrently (a threaded server), so the endpoint's latency, not this machine's CPU, bounds the work. Redis is
the broker; moto's S3 server holds the shard data (PATHRAG_SHARD_STORAGE=s3://...). For each count of shard
workers, one worker process per count serves the default queue with one request in flight each
(PATHRAG_LLM_MAX_CONCURRENCY=1: a worker is one endpoint slot), and one more worker, the "home host's",
serves the DuckDB steps (plan, write; its summary calls may run 8 at once). The job always has ``shards``
shards. Reported: wall time of the run, speedup against one shard worker, and whether extractions, entities,
relations and llm_usage equal a one-process run's (``run_extraction`` in this process, 8 requests at once).

Part 2, queries. The sample corpus indexed offline twice, vectors in the home's folder and on moto's S3 server
(PATHRAG_LANCEDB_URI), then each sample question asked ``query_rounds`` times per store: p50 of the
query time, and the ratio.

Every process is started here and stopped at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from pathrag_lab.testing.backing_services import ServiceUnavailable  # noqa: F401 - what the CLI reports

Log = Callable[[str], None]
HEADING = "Extraction on celery workers, vectors on an object store"
TABLES = {
    "extractions": "SELECT chunk_id, chunk_hash, document_id, extractor, status, result::VARCHAR, calls, "
                   "prompt_tokens, completion_tokens FROM extractions ORDER BY chunk_id",
    "entities": "SELECT * EXCLUDE (updated_at) FROM entities ORDER BY entity_key",
    "relations": "SELECT * EXCLUDE (updated_at) FROM relations ORDER BY relation_key",
    "llm_usage": "SELECT stage, extractor, items, calls, prompt_tokens, completion_tokens, cache_hits, failed "
                 "FROM llm_usage ORDER BY stage",
}
"""What "the same tables" means: every row of these, timestamps and run ids aside."""
HOME_CONCURRENCY = 8      # the home host's worker: requests in flight for description summaries (write step)


def _quiet(_: str) -> None:
    """Default progress sink."""


def table_rows(duckdb_path: Path) -> dict[str, list[tuple]]:
    from pathrag_pipeline.storage.store import Store

    with Store(duckdb_path).connect(read_only=True) as con:
        return {name: con.execute(sql).fetchall() for name, sql in TABLES.items()}


@contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _reference(template: Path, home: Path, folder: Path, base_url: str) -> tuple[float, dict[str, list[tuple]]]:
    """One process, no Dagster: the extraction stage as the write step runs it, 8 requests at once."""
    from pathrag_lab.bench.indexing import _settings
    from pathrag_pipeline.index.extraction_stage import run_extraction, summariser_for
    from pathrag_pipeline.index.llm_extraction import extractor_from_settings
    from pathrag_pipeline.storage.store import Store

    shutil.copytree(template, home)
    settings = _settings(home, folder, llm_base_url=base_url, llm_model="fake-chat", llm_max_concurrency=8)
    extractor = extractor_from_settings(settings, gleaning=settings.gleaning)
    started = time.perf_counter()
    run_extraction(Store.for_settings(settings), extractor, summarise=summariser_for(extractor),
                   max_concurrency=settings.llm_max_concurrency)
    return time.perf_counter() - started, table_rows(settings.duckdb_path)


def _celery_run(n_workers: int, shards: int, template: Path, base: Path, folder: Path, base_url: str,
                broker: str, s3_env: dict[str, str], log: Log) -> dict[str, Any]:
    import dagster as dg

    from assets.executors import HOME_QUEUE, SHARD_QUEUE
    from assets.fanout import fanout_job
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml
    from pathrag_lab.testing.backing_services import start_workers

    run_dir = base / f"celery-{n_workers}"
    shutil.rmtree(run_dir, ignore_errors=True)
    home, dagster_home = run_dir / "home", run_dir / "dagster"
    shutil.copytree(template, home)
    ensure_dagster_yaml(dagster_home)
    env = {**s3_env, "DAGSTER_HOME": str(dagster_home), "PATHRAG_HOME": str(home), "PATHRAG_DOCS": str(folder),
           "PATHRAG_LLM_BASE_URL": base_url, "PATHRAG_LLM_MODEL": "fake-chat", "PATHRAG_LLM_API_KEY": "bench-key",
           "PATHRAG_SHARD_STORAGE": f"s3://shards/run-{n_workers}", "PATHRAG_LLM_MAX_CONCURRENCY": "1"}
    home_env = {**env, "PATHRAG_LLM_MAX_CONCURRENCY": str(HOME_CONCURRENCY)}
    log(f"starting 1 home worker and {n_workers} shard worker(s)")
    workers = start_workers([("home", [HOME_QUEUE])], broker, home_env, run_dir)
    try:
        workers += start_workers([(f"shard{i}", [SHARD_QUEUE]) for i in range(n_workers)], broker, env, run_dir)
        log(f"extract_fanout, {shards} shards on {n_workers} shard worker(s)")
        with _environ(env), dg.DagsterInstance.from_config(str(dagster_home)) as instance:
            started = time.perf_counter()
            result = dg.execute_job(
                dg.reconstructable(fanout_job), instance=instance,
                run_config={"ops": {"plan_extraction_shards": {"config": {"shards": shards}}},
                            "execution": {"config": {"celery": {"broker": broker}}},
                            "loggers": {"console": {"config": {"log_level": "WARNING"}}}})
            seconds = time.perf_counter() - started
            if not result.success:
                raise RuntimeError(f"extract_fanout failed on {n_workers} worker(s); see {run_dir}")
            pids = {e.event_specific_data.metadata["pid"].value for e in result.all_events
                    if e.is_successful_output and e.step_key.startswith("extract_extraction_shard")}
            steps = {e.step_key: e.event_specific_data.duration_ms / 1000 for e in result.all_events
                     if e.event_type_value == "STEP_SUCCESS"}
    finally:
        for worker in workers:
            worker.stop()
    return {"workers": n_workers, "seconds": round(seconds, 1), "shard_processes": len(pids),
            "plan_s": round(steps.get("plan_extraction_shards", 0), 1),
            "write_s": round(steps.get("write_extraction_shards", 0), 1),
            "shard_s": sorted(round(v, 1) for k, v in steps.items() if k.startswith("extract_extraction_shard")),
            "tables": table_rows(home / "pathrag.duckdb")}


def _query_p50(settings: Any, questions: list[str], rounds: int) -> dict[str, float]:
    from pathrag_pipeline.query import PathRAG

    rag = PathRAG(settings=settings, record=False)
    started = time.perf_counter()
    rag.query(questions[0])                     # loads the graph and the vector tables
    first = time.perf_counter() - started
    times = []
    for _ in range(rounds):
        for q in questions:
            t = time.perf_counter()
            rag.query(q)
            times.append(time.perf_counter() - t)
    return {"first_ms": round(first * 1000, 1), "p50_ms": round(statistics.median(times) * 1000, 1),
            "queries": len(times)}


def _query_part(base: Path, s3: Any, rounds: int, log: Log) -> dict[str, Any]:
    from pathrag_lab.bench.indexing import _settings
    from pathrag_lab.bench.query import parse_question_table
    from pathrag_pipeline.config import SAMPLE_DOCS, Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    questions = parse_question_table()
    s3.create_bucket("vectors")
    local = _settings(base / "query-local", SAMPLE_DOCS)
    remote = Settings.from_env(env={
        "PATHRAG_HOME": str(base / "query-s3"), "PATHRAG_DOCS": str(SAMPLE_DOCS),
        "PATHRAG_LANCEDB_URI": "s3://vectors/pathrag/lancedb",
        "PATHRAG_LANCEDB_STORAGE_OPTIONS": json.dumps(s3.storage_options())})
    out: dict[str, Any] = {"questions": len(questions), "rounds": rounds}
    for name, settings in (("home folder", local), ("S3 (moto, 127.0.0.1)", remote)):
        shutil.rmtree(settings.home, ignore_errors=True)
        log(f"indexing the sample corpus, vectors in {name}")
        started = time.perf_counter()
        run_indexing(settings)
        index_s = time.perf_counter() - started
        log(f"asking {len(questions)} questions x {rounds}, vectors in {name}")
        out[name] = {"index_s": round(index_s, 1), **_query_p50(settings, questions, rounds)}
    out["p50_ratio"] = round(out["S3 (moto, 127.0.0.1)"]["p50_ms"] / out["home folder"]["p50_ms"], 2)
    return out


def run_fanout_bench(n_docs: int = 1000, workers: tuple[int, ...] = (1, 2, 4), shards: int = 4,
                     delay: float = 0.2, query_rounds: int = 5, workdir: Path | None = None,
                     log: Log = _quiet) -> dict[str, Any]:
    """Both parts (see the module docstring); raises ``ServiceUnavailable`` when Redis or moto cannot start."""
    from pathrag_lab.bench.indexing import OfflineBackedModel, _corpus, _settings
    from pathrag_lab.bench.report import machine_info
    from pathrag_pipeline.index.pipeline import ingest_stage
    from pathrag_pipeline.storage.store import Store
    from pathrag_lab.testing.backing_services import RedisServer, S3Server
    from pathrag_lab.testing.openai_server import FakeOpenAIServer

    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-fanout-"))
    base.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    folder, _ = _corpus(base, n_docs)
    template = base / "home-ingested"
    shutil.rmtree(template, ignore_errors=True)
    log(f"ingesting {n_docs} generated documents")
    settings = _settings(template, folder)
    ingest_stage(settings, Store.for_settings(settings))
    result: dict[str, Any] = {"documents": n_docs, "shards": shards, "delay_s": delay, "runs": []}
    with FakeOpenAIServer() as server, RedisServer(base / "redis") as redis, S3Server(base / "moto") as s3:
        server.chat_responder = OfflineBackedModel()
        server.response_delay = delay
        s3.create_bucket("shards")
        with Store(template / "pathrag.duckdb").connect(read_only=True) as con:
            result["chunks"] = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
        log("one-process reference run")
        shutil.rmtree(base / "single", ignore_errors=True)
        result["single_s"], reference = _reference(template, base / "single", folder, server.base_url)
        result["single_s"] = round(result["single_s"], 1)
        result["requests_per_run"] = server.count("chat")
        for n in workers:
            server.reset()
            run = _celery_run(n, shards, template, base, folder, server.base_url, redis.url(), s3.env(), log)
            tables = run.pop("tables")
            run["requests"] = server.count("chat")
            run["max_in_flight"] = server.max_processing
            run["tables_equal"] = tables == reference
            run["differing_tables"] = [t for t in TABLES if tables[t] != reference[t]]
            result["runs"].append(run)
            log(f"{n} worker(s): {run['seconds']} s, tables equal: {run['tables_equal']}")
        first = result["runs"][0]["seconds"]
        for run in result["runs"]:
            run["speedup"] = round(first / run["seconds"], 2)
        result["query"] = _query_part(base, s3, query_rounds, log)
    result["load_1min"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["machine"] = machine_info()
    return result


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_stamp, md_table

    rows = [[run["workers"], run["shard_processes"], f"{run['seconds']:.1f}", f"{run['speedup']:.2f}x",
             f"{run['plan_s']:.1f}", ", ".join(f"{s:.0f}" for s in run["shard_s"]), f"{run['write_s']:.1f}",
             run["requests"], run["max_in_flight"],
             "yes" if run["tables_equal"] else "no: " + ", ".join(run["differing_tables"])] for run in r["runs"]]
    q = r["query"]
    local, remote = q["home folder"], q["S3 (moto, 127.0.0.1)"]
    qrows = [[name, f"{v['index_s']:.1f}", f"{v['first_ms']:.0f}", f"{v['p50_ms']:.1f}"]
             for name, v in (("home folder", local), ("S3 (moto, 127.0.0.1)", remote))]
    load = r["load_1min"]
    busy = (" The machine was shared with an LLM benchmark (a llama.cpp server) during the run; the load says how "
            "busy it was." if max(load.values()) > (r["machine"].get("usable_cores") or 2) else "")
    workers = ",".join(str(run["workers"]) for run in r["runs"])
    return "\n\n".join([
        f"## {HEADING}",
        f"Reproduce: `pathrag bench fanout --docs {r['documents']} --workers {workers} --delay {r['delay_s']} "
        f"--update-docs docs/benchmarks.md` (needs `pip install -e \".[distributed]\"` and redis-server; "
        "docs/scaling.md says what runs where).",
        f"**Extraction.** `extract_fanout` in LLM mode on {r['documents']} generated documents ({r['chunks']} chunks, "
        f"gleaning 1) with the celery executor: Redis as broker, shard data in moto's S3 server, every worker its "
        f"own `celery -A dagster_celery.app worker --pool solo` process. The scripted server answers each request "
        f"after a fixed {r['delay_s']} s and serves requests concurrently, so the endpoint's latency bounds the "
        "work; each shard worker keeps one request in flight (`PATHRAG_LLM_MAX_CONCURRENCY=1`: a worker is one "
        f"endpoint slot). The job always has {r['shards']} shards (few and large: each step also pays a job "
        "reconstruction in its worker); workers = shard workers, plus one worker on the home's queue for the "
        f"plan and write steps (the write step's description summaries go {HOME_CONCURRENCY} at a time). Seconds: "
        "the run's wall time from launch to success. Tables: extractions, entities, relations and llm_usage "
        "compared row by row with a one-process run of the same extraction "
        f"({r['single_s']:.0f} s with 8 requests in flight, {r['requests_per_run']} requests).",
        md_table(["shard workers", "processes that ran shards", "seconds", "speedup", "plan s", "shard steps s",
                  "write s", "requests", "most in flight", "tables equal one process"], rows),
        f"**Queries with LanceDB on an object store.** The sample corpus indexed offline with its vectors in the "
        "home's folder and on moto's S3 server on 127.0.0.1 (`PATHRAG_LANCEDB_URI=s3://vectors/pathrag/lancedb`), "
        f"then {q['questions']} sample questions asked {q['rounds']} times each in path mode (one `PathRAG`, not "
        "logged): the first query (opens the tables and reads their vectors into memory) and the median of the "
        "rest. Past the first query the search runs in memory, but every search still lists and opens its table "
        "to check its version: a few HTTP round trips to the store per search, the likely cause of the difference "
        "(not profiled). moto is a local Python server: a real object store's round trips are longer. Index s: "
        "the first row also pays this process's first imports of the indexing stages.",
        md_table(["vectors in", "index s", "first query ms", "query p50 ms"], qrows),
        f"Query p50 on S3 / home folder: **{q['p50_ratio']}x**.",
        f"_Measured {machine_stamp(r['machine'])}; 1-min load average {load['before']} at the start, "
        f"{load['after']} at the end.{busy} This section ran {r['seconds'] / 60:.0f} min._",
    ])


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
