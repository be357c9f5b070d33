"""Benchmarks: ingest, indexing, query latency, pruning scaling, CLI start-up, and the report that writes
docs/benchmarks.md. Run through ``pathrag bench ...``.

May import: every package of the product and the lab's ``testing`` (the scripted server of LLM mode); never
the lab's ``cli``. The product never imports this package.
"""
