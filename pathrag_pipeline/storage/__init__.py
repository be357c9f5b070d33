"""Storage: the DuckDB store (connections, locking, every table's DDL and its generated docs) and the
LanceDB vector store (embeddings with model identity, upserts, search).

May import: ``errors``, ``config``, ``text``, ``llm`` (the embedder a vector table is written with).
"""
