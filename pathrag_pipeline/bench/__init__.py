"""Benchmarks: ingest, indexing, query latency, pruning scaling, CLI start-up, and the report that writes
docs/benchmarks.md. Run through ``pathrag bench ...``.

May import: every core package, ``evaluation`` and ``testing`` (the scripted server of LLM mode); never
``cli``. Core modules never import this package.
"""
