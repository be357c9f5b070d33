"""The Dagster code location (loaded by workspace.yaml: `dg dev` from the repo root, or `pathrag dev`)."""


import dagster as dg

from assets.automation import (
    document_folder_sensor,
    ingest_job,
    reconcile_documents,
    reconcile_schedule,
    remove_deleted_documents,
)
from assets.ingestion import chunks, documents
from assets.resources import PathragResource

defs = dg.Definitions(
    assets=[documents, chunks],
    jobs=[ingest_job, remove_deleted_documents, reconcile_documents],
    sensors=[document_folder_sensor],
    schedules=[reconcile_schedule],
    resources={"pathrag": PathragResource()},
)
