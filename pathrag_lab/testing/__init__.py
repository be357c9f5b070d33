"""Test doubles that the tests and the benchmarks share: ``openai_server``, a real OpenAI-compatible HTTP
server on 127.0.0.1 with scripted responses, call counting and injected faults. They live in the package,
not in ``tests/``, so ``pathrag bench`` runs from an installed package without importing the test suite.

Importing this package loads nothing heavy; ``openai_server`` uses the standard library only.

May import: the product's ``errors`` and ``config`` (it needs neither today). The lab's ``bench`` imports it.
"""
