"""Storage: the DuckDB store (connections and locking; every table's DDL in ``schema``, its generated docs) and the
LanceDB vector store (embeddings with model identity, upserts, search).

May import: ``errors``, ``config``, ``text``, ``llm`` (the embedder a vector table is written with).
"""
