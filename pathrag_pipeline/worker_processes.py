"""Worker process pools that end with their parent.

The pipeline runs CPU-bound work (parsing, offline extraction, the hashing embedder) in pools of spawned worker
processes. When the parent is killed (``kill -9``, the OOM killer) nothing tells the workers: they were seen
alive and idle 87 minutes later, re-parented to init (issue 61, item 7). Every worker started here watches its
parent's pid from a daemon thread and exits within ``WATCH_INTERVAL`` seconds of the parent's death.

Not ``prctl(PR_SET_PDEATHSIG)``: Linux sends that signal when the *thread* that started the child exits, and pools
start their workers lazily from whichever thread submits first (a Dagster step's, a query's), so workers would die
with a thread that merely finished.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

WATCH_INTERVAL = 1.0   # seconds between two looks at the parent's pid


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)   # the parent is gone: nothing will collect what this worker does
        time.sleep(WATCH_INTERVAL)


def _start_worker(parent: int, initializer: Callable[..., Any] | None, initargs: tuple[Any, ...]) -> None:
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def worker_pool(workers: int, initializer: Callable[..., Any] | None = None,
                initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (spawn, not fork: the parent holds threads, Dagster's and DuckDB's,
    that a forked child would inherit locked) that end when this process dies; ``initializer(*initargs)`` runs
    in each worker after its watch starts."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(os.getpid(), initializer, initargs))
