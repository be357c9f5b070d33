from pathlib import Path

from pathrag_pipeline.storage.schema_docs import markdown, tables

DOC = Path(__file__).resolve().parent.parent / "docs" / "tables.md"


def test_every_column_is_documented():
    undocumented = [(t, c) for t, cols in tables() for c, _, meaning in cols if not meaning]
    assert undocumented == []


def test_public_tables_are_all_there():
    names = {t for t, _ in tables()}
    assert {"documents", "chunks", "ingest_runs", "extractions", "entities", "relations", "entity_aliases",
            "llm_usage", "queries", "path_traces", "retrieved_nodes"} <= names


def test_docs_tables_md_is_current():
    assert DOC.read_text() == markdown(), "regenerate: python -m pathrag_pipeline.storage.schema_docs > docs/tables.md"
