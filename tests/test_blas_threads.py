"""One BLAS thread while a query runs in a process that chose no BLAS threads itself (blas_threads.py)."""

from __future__ import annotations

import numpy as np  # noqa: F401  (loads the BLAS library threadpoolctl looks for)
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pathrag_pipeline import blas_threads
from pathrag_pipeline.blas_threads import one_blas_thread

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def two_threads(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if not blas():
        pytest.skip("numpy loaded no BLAS library threadpoolctl knows")
    with threadpool_limits(limits=2, user_api="blas"):
        yield


def test_a_query_runs_on_one_blas_thread_and_gives_the_process_its_limit_back(two_threads):
    assert set(blas()) == {2}
    with one_blas_thread():
        assert set(blas()) == {1}
    assert set(blas()) == {2}


def test_overlapping_queries_restore_the_limit_only_when_the_last_ends(two_threads):
    """Queries in threads (``pathrag serve``) overlap and end in any order: the first to start sets the limit,
    the last to end restores it (nested limiters ending out of order would leave the process at one thread)."""
    first, second = one_blas_thread(), one_blas_thread()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)   # the first query ends while the second still runs
    assert set(blas()) == {1}
    second.__exit__(None, None, None)
    assert set(blas()) == {2} and blas_threads._active == 0


def test_a_thread_count_the_user_chose_is_left_alone(two_threads, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    with one_blas_thread():
        assert set(blas()) == {2}


def test_a_query_through_the_python_api_runs_on_one_blas_thread(two_threads, monkeypatch, tmp_path):
    """``PathRAG.query`` holds the limit for the query (the products of its retrieval run inside it)."""
    from pathrag_pipeline.storage import vector_store

    seen: list[set[int]] = []
    search = vector_store.VectorStore._top

    def recording(self, *args, **kwargs):
        seen.append(set(blas()))
        return search(self, *args, **kwargs)

    monkeypatch.setattr(vector_store.VectorStore, "_top", recording)
    from pathrag_pipeline.query.engine import PathRAG
    from tests.query_fixtures import tiny_index_home

    settings = tiny_index_home(tmp_path, monkeypatch)
    PathRAG(settings, record=False).query("Who founded Acme?", mode="path")
    assert seen and all(s == {1} for s in seen)
    assert set(blas()) == {2}
