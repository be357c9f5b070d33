"""The lab beside the product: benchmarks, the report that writes docs/benchmarks.md, and the test doubles.

``pathrag_lab`` imports the product (``pathrag_pipeline``) and is never imported by it: the product's CLI finds
``pathrag bench`` through the ``pathrag.commands`` entry point (pyproject.toml), and ``tests/test_architecture.py``
fails on any import of the lab from ``pathrag_pipeline`` or ``assets``. Its extra dependencies are the ``bench``
extra.

May import: every package of the product. Inside the lab, ``testing`` comes first (standard library only),
then ``bench``, then ``cli``.
"""
