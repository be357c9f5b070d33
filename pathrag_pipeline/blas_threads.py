"""One BLAS thread while a query runs in a process that did not choose its own.

A query's matrix products are small (a few keyword vectors against the entity, relation or chunk vectors). With
OpenBLAS's default of one thread per core, each product wakes the other threads, and when the other core is busy
(the LLM server on the same machine, an index run, the benchmark's scripted server) the product waits for a time
slice: 8 ms instead of 0.4 ms for 8 keywords x 1,855 entities x 384 on 2 cores with a local llama.cpp server
running (docs/benchmarks.md "Peers"). `pathrag ask` and `pathrag serve` set ``OPENBLAS_NUM_THREADS=1`` before numpy
loads (``cli.common.query_process_threads``); a Python API user's process has loaded numpy with the default, so
``PathRAG.query`` limits BLAS to one thread for the query's duration with threadpoolctl and gives the process its
own limit back afterwards. An explicit ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` is left alone.

The limit is process-wide (BLAS libraries have no per-thread setting): overlapping queries in threads share it,
counted, so the first to start sets it and the last to end restores it (nested ``threadpool_limits`` blocks that
end out of order would restore each other's values and could leave the process at one thread).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

_lock = threading.Lock()
_active = 0
_limiter: Any = None
_controller: Any = None


def _chosen_by_user() -> bool:
    return any(os.environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"))


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS (numpy's products) on one thread inside the block; the process's own setting after the last block."""
    global _active, _limiter, _controller
    if _chosen_by_user():
        yield
        return
    with _lock:
        if _active == 0:
            try:
                if _controller is None:
                    from threadpoolctl import ThreadpoolController

                    _controller = ThreadpoolController()   # the BLAS libraries loaded now (numpy's): ~2 ms, once
                _limiter = _controller.limit(limits=1, user_api="blas")
            except Exception:   # no BLAS found, an unknown one: the products run as they would have
                _limiter = None
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None
