"""A parse worker that dies, for tests/test_ingest.py: it must be importable by name in a spawned process."""

import os


def die(*_args, **_kwargs):
    os._exit(3)   # as a parser that crashes its process on a hostile file would
