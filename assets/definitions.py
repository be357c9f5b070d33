"""The Dagster code location (loaded by workspace.yaml: `dg dev` from the repo root, or `pathrag dev`)."""


import dagster as dg

from assets.automation import (
    document_folder_sensor,
    graph_job,
    query_job,
    ingest_job,
    reconcile_documents,
    reconcile_schedule,
    remove_deleted_documents,
)
from assets.graph import embedding_keys_match, embeddings, graph, graph_has_provenance, relations_have_entities
from assets.ingestion import chunks, documents
from assets.query import answer_questions
from assets.resources import PathragResource

defs = dg.Definitions(
    assets=[documents, chunks, graph, embeddings, answer_questions],
    asset_checks=[relations_have_entities, graph_has_provenance, embedding_keys_match],
    jobs=[ingest_job, remove_deleted_documents, reconcile_documents, graph_job, query_job],
    sensors=[document_folder_sensor],
    schedules=[reconcile_schedule],
    resources={"pathrag": PathragResource()},
)
