"""`extract_fanout`: extraction spread over worker processes or machines, DuckDB written by one step.

plan (reads DuckDB) → extract one shard per worker (LLM calls only, no DuckDB) → write (the ordinary
extraction stage replaying the shards' results: records, cache, graph merge, summaries, usage).
The executor (assets/executors.py) is chosen by run config: step subprocesses on this machine (`multiprocess`,
`max_concurrent` bounds them) or dagster-celery workers on any host (`celery`); the plan and write steps are
tagged for the celery queue of the host that holds the home. Shards and results travel through the
`shard_io` IO manager (assets/shard_storage.py: PATHRAG_SHARD_STORAGE, a shared folder or s3://), never a
worker's local disk. See docs/scaling.md. The result is the same tables one process writes
(tests/test_fanout.py checks it against the test LLM server, on both executors).
"""

import dagster as dg

from assets.failures import one_line_failures
from pydantic import Field

from assets.executors import HOME_QUEUE, QUEUE_TAG, fanout_executor
from assets.graph import extraction_cost, graph_metadata
from assets.ingestion import DUCKDB_POOL
from assets.resources import PathragResource
from assets.run_config import bounded_run_config
from assets.shard_storage import SHARD_IO
from pathrag_pipeline.index.extraction_shards import ReplayExtractor, ShardItem, extract_shard, plan_shards
from pathrag_pipeline.index.extraction_stage import run_extraction, summariser_for
from pathrag_pipeline.index.llm_extraction import extractor_from_settings


class FanoutConfig(dg.Config):
    shards: int = Field(default=4, ge=1, le=1024, description="how many pieces the pending texts are split into")


def _extractor(pathrag: PathragResource):
    settings = pathrag.settings()
    return settings, extractor_from_settings(settings, gleaning=settings.gleaning)


ON_HOME_HOST = {QUEUE_TAG: HOME_QUEUE}
"""Steps that open DuckDB: on celery, only the workers of the host that holds PATHRAG_HOME take them."""


def _where() -> dict:
    """The process a step ran in, for its output metadata (which worker did what)."""
    import os
    import socket

    return {"pid": os.getpid(), "host": socket.gethostname()}


@dg.op(out=dg.DynamicOut(list, io_manager_key=SHARD_IO), pool=DUCKDB_POOL, tags=ON_HOME_HOST,
       description="Split the texts that need the extractor into shards.")
@one_line_failures
def plan_extraction_shards(context: dg.OpExecutionContext, config: FanoutConfig, pathrag: PathragResource):
    _, extractor = _extractor(pathrag)
    shards = plan_shards(pathrag.store(), extractor.identity, config.shards)
    context.log.info(f"{sum(map(len, shards))} texts to extract in {len(shards)} shards")
    for i, shard in enumerate(shards):
        yield dg.DynamicOutput([(item.text, item.title) for item in shard], mapping_key=f"shard_{i}",
                               metadata={"texts": len(shard), **_where()})


@dg.op(out=dg.Out(dict, io_manager_key=SHARD_IO),
       description="Extract one shard: LLM (or offline) calls only, no DuckDB access.")
@one_line_failures
def extract_extraction_shard(context: dg.OpExecutionContext, pathrag: PathragResource, shard: list) -> dg.Output:
    _, extractor = _extractor(pathrag)
    results = extract_shard(extractor, [ShardItem(text, title) for text, title in shard])
    where = _where()
    return dg.Output({"worker": f"{where['host']}:{where['pid']}", "results": results},
                     metadata={"texts": len(shard), **where})


@dg.op(out=dg.Out(io_manager_key=SHARD_IO), pool=DUCKDB_POOL, tags=ON_HOME_HOST,
       description="Write the shards' results as one extraction run: records, graph merge, usage.")
@one_line_failures
def write_extraction_shards(context: dg.OpExecutionContext, pathrag: PathragResource, shards: list) -> dg.Output:
    settings, extractor = _extractor(pathrag)
    results = {text: r for shard in shards for text, r in shard["results"].items()}
    replay = ReplayExtractor(extractor, results)
    stats = run_extraction(pathrag.store(), replay, summarise=summariser_for(extractor),
                           max_concurrency=settings.llm_max_concurrency, run_id=context.run_id)
    workers = sorted({shard["worker"] for shard in shards})
    # the tables this step writes are the index assets' tables: recorded with the metadata index_folder's `graph`
    # asset records (assets/graph.py), so lineage and the asset pages show a fan-out run like any other writer
    cost = {**extraction_cost({"mode": "llm" if extractor.identity.startswith("llm:") else "offline",
                               "extractor": extractor.identity}, stats), "shards": len(shards)}
    for key, metadata in graph_metadata(pathrag.store(), cost).items():
        context.log_event(dg.AssetMaterialization(
            asset_key=key, description="written by extract_fanout (the fanned-out extraction's write step)",
            metadata=metadata))
    return dg.Output(None, metadata={"shards": len(shards), "worker_processes": len(workers),
                                     "workers": dg.MetadataValue.json(workers),
                                     "pending_chunks": stats.pending, "llm_calls": stats.calls,
                                     "replayed": replay.replayed, "failed_chunks": stats.failed, **_where()})


@dg.job(executor_def=fanout_executor, tags={"pathrag/duckdb": "write"},
        config=bounded_run_config({"plan_extraction_shards": FanoutConfig}),  # shards' bounds checked at launch
        description="Extraction fanned out over worker processes or dagster-celery workers (see docs/scaling.md); "
                    "writes like index_graph's extraction step. Run `index_folder` or `index_graph` afterwards "
                    "for the embeddings.")
def extract_fanout():
    shards = plan_extraction_shards().map(extract_extraction_shard)
    write_extraction_shards(shards.collect())


def fanout_job() -> dg.JobDefinition:
    """The job with its resources bound, for `dg.reconstructable` (multiprocess runs re-import it by name)."""
    from assets.definitions import defs

    return defs.resolve_job_def("extract_fanout")
