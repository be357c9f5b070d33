"""The Dagster code location (loaded by workspace.yaml: `dg dev` from the repo root, or `pathrag dev`)."""


import dagster as dg

from assets.automation import document_folder_sensor, graph_job, index_job, reconcile_schedule

from assets.fanout import extract_fanout
from assets.graph import embeddings, graph
from assets.ingestion import ingest
from assets.query import answer_questions, query_job
from assets.resources import PathragResource, RunReports
from assets.shard_storage import SHARD_IO, ShardStorage

defs = dg.Definitions(
    assets=[ingest, graph, embeddings, answer_questions],
    jobs=[index_job, graph_job, query_job, extract_fanout],
    sensors=[document_folder_sensor],
    schedules=[reconcile_schedule],
    resources={"pathrag": PathragResource(), "reports": RunReports(keep=False), SHARD_IO: ShardStorage()},
    # "Materialize" in the UI (an ad-hoc asset job) runs its steps in the run's process too; extract_fanout
    # sets its own executor (step subprocesses, or dagster-celery workers: assets/executors.py).
    executor=dg.in_process_executor,
)
