"""Worker process pools that end with their parent.

The pipeline runs CPU-bound work (parsing, offline extraction, the hashing embedder) in pools of spawned worker
processes. When the parent is killed (``kill -9``, the OOM killer) nothing tells the workers: they were seen
alive and idle 87 minutes later, re-parented to init (issue 61, item 7). Every worker started here watches its
parent's pid from a daemon thread and exits within ``WATCH_INTERVAL`` seconds of the parent's death, and ignores
Ctrl-C, which the parent handles for the whole group.

Not ``prctl(PR_SET_PDEATHSIG)``: Linux sends that signal when the *thread* that started the child exits, and pools
start their workers lazily from whichever thread submits first (a Dagster step's, a query's), so workers would die
with a thread that merely finished.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
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
    # Ctrl-C reaches the whole process group: the parent handles it (one line) and ends the pool; a worker that
    # took it too would print its own traceback (issue 61, item 5)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


class _Pool(ProcessPoolExecutor):
    """Starts each worker with Ctrl-C ignored from its first instruction: a child inherits an ignored SIGINT
    across exec, and Python then installs no KeyboardInterrupt handler, so a worker still importing when Ctrl-C
    comes prints nothing either. Only the main thread may change a handler; from another thread the worker
    ignores it once its initializer runs."""

    def _spawn_process(self) -> None:
        previous = signal.getsignal(signal.SIGINT)
        # only from the main thread, and only over a handler Python can put back (None: one set outside Python)
        if threading.current_thread() is not threading.main_thread() or previous is None:
            super()._spawn_process()
            return
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            super()._spawn_process()
        finally:
            signal.signal(signal.SIGINT, previous)


def worker_pool(workers: int, initializer: Callable[..., Any] | None = None,
                initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (spawn, not fork: the parent holds threads, Dagster's and DuckDB's,
    that a forked child would inherit locked) that end when this process dies; ``initializer(*initargs)`` runs
    in each worker after its watch starts."""
    return _Pool(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                 initializer=_start_worker, initargs=(os.getpid(), initializer, initargs))
