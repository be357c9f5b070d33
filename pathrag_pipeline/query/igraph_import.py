"""Importing igraph without matplotlib: about 1 s of every query process's start where matplotlib is installed.

``import igraph`` imports its drawing package, whose shape drawers call ``find_matplotlib()`` at import time:
``import matplotlib`` and ``import matplotlib.pyplot`` when matplotlib is installed (`pathrag-pipeline[dev]` and
``[bench]`` install it for the lab's plots). ``python -X importtime -c "import igraph"`` shows 1.1 s of its 1.15 s
in matplotlib on these machines; every `pathrag ask` process and every engine load paid it, for drawing code the
product never calls (answer pages are our own SVG, query/answer_page.py).

``import_igraph`` imports igraph with matplotlib hidden (an entry of ``None`` in ``sys.modules`` makes its import
raise ImportError, which igraph handles by drawing without it) and then takes the entry away, so the process can
import matplotlib itself afterwards. The one thing lost: igraph's own matplotlib backend (``igraph.plot`` onto a
matplotlib axes) in a process that imported igraph this way first. When matplotlib or igraph is already imported,
nothing is hidden. Tested in tests/test_architecture.py.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

HIDDEN = ("matplotlib", "matplotlib.pyplot")
_LOCK = threading.Lock()


def import_igraph() -> ModuleType:
    """``igraph``, imported once per process without importing matplotlib (see the module docstring)."""
    module = sys.modules.get("igraph")
    if module is not None:
        return module
    with _LOCK:
        hidden = [name for name in HIDDEN if name not in sys.modules]
        if len(hidden) < len(HIDDEN):
            hidden = []   # matplotlib is already here: igraph may as well use it
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]
        try:
            import igraph
        finally:
            for name in hidden:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
        return igraph
