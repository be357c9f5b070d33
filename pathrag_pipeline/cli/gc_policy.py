"""How a ``pathrag`` process runs Python's cyclic garbage collector: rarely while it loads, never at its exit.

Measured on a one-file edit in a new process (200 files, scripted model; ``pathrag bench peers``), the work is
CPU-bound and about a fifth of it was the collector, not ours:

- **While it runs.** A command imports Dagster, openai, LanceDB and pydantic models: about 340,000 objects the
  collector tracks, which live until the process ends. CPython's default thresholds (700, 10, 10) run a collection
  every 700 new container objects and, as the heap grows, full collections that walk everything imported so far
  again and again. ``THRESHOLDS`` collects the youngest generation every 50,000 instead: the same collector, run
  ~70x less often while modules load; garbage cycles wait for at most that many allocations (a few MB), nothing at a
  home's scale.
- **At its exit.** Finalisation collects the whole heap once more while it tears the modules down (~1.3 s of a ~9 s
  cold edit on a 2-core Xeon). An exit handler ``gc.freeze()``\\ s every object before that (registered when the
  command starts, it runs after the handlers registered later: exit handlers run last-in first-out): modules are
  still cleared and objects freed by reference counting as before; only objects left in reference cycles are not
  collected, so their ``__del__`` is not called, which Python never promises at exit anyway. Our stores close their
  files explicitly (DuckDB connections in ``finally`` blocks, LanceDB writes committed when they return), so nothing
  written depends on it.

For the ``pathrag`` command's own process only (``cli/main.py`` applies it): a Python program that imports the
package keeps its own collector settings. Chosen from the collector's design, not tuned on a benchmark:
the youngest generation is collected about as often as a module-heavy import adds a tenth of what it keeps; on the
edit above, 50,000 and no collector at all gave the same time (median of 5 each: 7.1 and 7.3 s, against 9.2 s with
the default thresholds). `pathrag bench peers` measures the command with it.
"""

from __future__ import annotations

import atexit
import gc

THRESHOLDS = (50_000, 10, 10)   # only the youngest generation's changes: the older ones keep their default ratios
_applied = False


def apply() -> None:
    """Set ``THRESHOLDS`` and register the exit hook; once per process (a second call does nothing)."""
    global _applied
    if _applied:
        return
    _applied = True
    gc.set_threshold(*THRESHOLDS)
    atexit.register(gc.freeze)   # registered before the commands' own: runs after them
