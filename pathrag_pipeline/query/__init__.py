"""Query: question -> keywords -> nodes -> pruned paths -> prompt -> answer, each stage timed, and the
append-only query log. ``PathRAG`` (in ``engine``) is the Python API; ``params`` holds the modes and
defaults with no heavy imports; ``results`` the result type.

May import: ``errors``, ``config``, ``text``, ``llm``, ``storage``, ``index`` (the offline extractor's
sentence and keyword rules). ``from pathrag_pipeline.query import PathRAG`` loads the engine on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PathRAG": "engine",
    "run_questions": "engine",
    "load_questions": "engine",
    "QueryParams": "params",
    "MODES": "params",
    "QueryResult": "results",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
