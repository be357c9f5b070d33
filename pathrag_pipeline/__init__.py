"""PathRAG pipeline: graph-RAG indexing and flow-pruned path retrieval (core library, no Dagster imports).

The subpackages follow the data flow; each may import only the ones before it in this list (a test checks):

- ``errors``, ``config``, ``dagster_home``, ``dagster_state``, ``worker_processes``, ``blas_threads``,
  ``slim_imports``: expected-failure base class; settings from the environment; the Dagster instance folder and a
  Dagster-free reader of its SQLite state (for ``pathrag status``); pools of worker processes that end with their
  parent; one BLAS thread while a query runs; openai, LanceDB and igraph imported without the parts we never
  use (generated models, matplotlib).
- ``testing``: test doubles the tests and the benchmarks share (the scripted OpenAI-compatible server);
  standard library only, and of this package only ``bench`` uses them.
- ``text``: tokenizer and entity-name normalisation, shared by every stage.
- ``llm``: model clients: the OpenAI-compatible chat client (instructor) and the embedders.
- ``storage``: the DuckDB store (every table's DDL) and the LanceDB vector store.
- ``ingest``: folder -> documents -> chunks (scan, parse, chunk).
- ``index``: chunks -> extractions -> graph -> embeddings (LLM and offline extraction, triples import,
  graph merge, aliases, the indexing pipeline).
- ``query``: question -> keywords -> nodes -> pruned paths -> prompt -> answer, and the query log.
- ``evaluation``: retrieval recall on QA datasets and the pairwise LLM judge.
- ``bench``: the benchmarks behind docs/benchmarks.md.
- ``cli``: the ``pathrag`` command line.

``assets/`` (outside this package) is the Dagster layer over the core; nothing here imports it.
"""

__version__ = "0.1.0"
