"""How a ``pathrag`` process runs Python's cyclic garbage collector: rarely while it loads, never at its exit.

Measured on a one-file edit in a new process (200 files, scripted model; ``pathrag bench peers``), the work is
CPU-bound and about a fifth of it was the collector, not ours:

- **While it runs.** A command imports Dagster, openai, LanceDB and pydantic models: about 300,000 objects the
  collector tracks, which live until the process ends. CPython's default thresholds (700, 10, 10) run a collection
  every 700 new container objects and, as the heap grows, full collections that walk everything imported so far
  again and again. ``THRESHOLDS`` collects the youngest generation once a million more container objects were
  made than freed since the last collection (the older generations keep their default ratios): a command's
  start-up then runs no collection at all (a one-file edit in a new process: 54 young and 5 middle collections
  with 50,000, ~0.17 s of its 2.4 s, collecting ~12,000 objects in all; none with a million), and a long command
  collects every million, garbage cycles waiting at most that many allocations (60-250 MB were every one of them
  garbage, a tuple to a dict each; the commands measured below free ~12,000 objects through the collector per
  edit, and their peak memory did not grow). ``pathrag serve`` runs with the same: a young collection every
  million, a pause of ~15 ms when a million objects are young (1 ms for 50,000, twenty times as often).
- **At its exit.** Finalisation collects the whole heap once more while it tears the modules down (~1.3 s of a ~9 s
  cold edit on a 2-core Xeon). An exit handler ``gc.freeze()``\\ s every object before that (registered when the
  command starts, it runs after the handlers registered later: exit handlers run last-in first-out): modules are
  still cleared and objects freed by reference counting as before; only objects left in reference cycles are not
  collected, so their ``__del__`` is not called, which Python never promises at exit anyway. Our stores close their
  files explicitly (DuckDB connections in ``finally`` blocks, LanceDB writes committed when they return), so nothing
  written depends on it.

For the ``pathrag`` command's own process only (``cli/main.py`` applies it): a Python program that imports the
package keeps its own collector settings. Measured, not tuned to a benchmark's figure (AMD EPYC, 2 cores): the
one-file edit above (``pathrag bench peers``' home, alternating runs of 3) 2.20 / 2.40 s with 50,000, 2.06 / 2.23
s with a million, 2.08 / 2.01 s with no collector; a full offline index of 1,000 files (10 MB, `pathrag bench
scale`'s generator, two runs each) 22.9 / 21.4 s and 1209 / 1229 MB peak RSS with 50,000, 21.9 / 20.2 s and
1180 / 1219 MB with a million. Sessions before chose 50,000 over the default on a Xeon (7.1 s against 9.2 s for
that edit then). `pathrag bench peers` measures the command with it, and its peers' drivers with the same.
"""

from __future__ import annotations

import atexit
import gc

THRESHOLDS = (1_000_000, 10, 10)   # only the youngest generation's changes: the older ones keep their default ratios
_applied = False


def apply() -> None:
    """Set ``THRESHOLDS`` and register the exit hook; once per process (a second call does nothing)."""
    global _applied
    if _applied:
        return
    _applied = True
    gc.set_threshold(*THRESHOLDS)
    atexit.register(gc.freeze)   # registered before the commands' own: runs after them
