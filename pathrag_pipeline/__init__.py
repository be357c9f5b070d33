"""PathRAG pipeline: graph-RAG indexing and flow-pruned path retrieval (core library, no Dagster imports)."""

__version__ = "0.1.0"
