"""Index: ``chunks`` -> ``extractions`` -> ``entities``/``relations`` -> embeddings. LLM extraction with
gleaning and the offline rule extractor (or a triples import), per-chunk records, the incremental graph
merge with aliases, the embedding stage, and ``pipeline.run_indexing`` that runs ingest and all of these.

May import: ``errors``, ``config``, ``text``, ``llm``, ``storage``, ``ingest``.
"""
