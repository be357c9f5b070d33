"""One indexing run per PATHRAG_HOME at a time (issue 10, item 4): two `pathrag index` processes on one
home do the extraction once, neither crashes, and the tables are consistent. Readers keep working."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import duckdb
import pytest

from pathrag_pipeline.storage.run_lock import index_lock
from pathrag_pipeline.storage.store import Store


def _folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"doc{i:02}.txt").write_text(
            f"Harbour {i}\n\nAda Halden{i} surveyed the harbour of Port Aster{i} with Tomas Brill{i} in 18{i:02}.\n")
    return docs


def _index_process(home, docs):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env["PATHRAG_HOME"] = str(home)
    return subprocess.Popen([sys.executable, "-c", "from pathrag_pipeline.cli import main; main()", "index", str(docs)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_concurrent_index_runs_extract_once_and_agree(tmp_path) -> None:
    home, docs = tmp_path / "home", _folder(tmp_path)
    waiting = threading.Barrier(3, timeout=120)
    errs: dict[int, list[str]] = {0: [], 1: []}

    def watch(i, proc):
        told = False
        for line in proc.stderr:
            errs[i].append(line)
            if not told and "another indexing run holds" in line:
                told = True
                waiting.wait()

    # The test holds the lock first, so both processes are certainly running at once and both must wait.
    with index_lock(home, on_wait=None):
        procs = [_index_process(home, docs) for _ in range(2)]
        watchers = [threading.Thread(target=watch, args=(i, p), daemon=True) for i, p in enumerate(procs)]
        for w in watchers:
            w.start()
        waiting.wait()                      # both printed the waiting notice
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for w in watchers:
        w.join(timeout=30)
    assert [p.returncode for p in procs] == [0, 0], (outs, errs)

    with duckdb.connect(str(home / "pathrag.duckdb"), read_only=True) as con:
        usage = con.execute("SELECT items FROM llm_usage WHERE stage = 'extract' ORDER BY created_at").fetchall()
        chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
        records = con.execute("SELECT count(*) FROM extractions WHERE status = 'ok'").fetchone()[0]
        entities = con.execute("SELECT count(*) FROM entities").fetchone()[0]
        dangling = con.execute("""SELECT count(*) FROM relations r WHERE NOT EXISTS
                                  (SELECT 1 FROM entities e WHERE e.entity_key = r.src_key)""").fetchone()[0]
    # exactly one run extracted; the other, let in after it, found nothing to do: it launched no run (the
    # no-op check of `pathrag index`) or, when the first run left work behind, ran and extracted nothing
    assert [items for (items,) in usage if items] == [chunks], usage
    assert len(usage) + sum("Up to date, no run launched" in out for out in outs) == 2, (usage, outs)
    assert records == chunks == 12 and entities > 0 and dangling == 0
    import lancedb

    vectors = lancedb.connect(str(home / "lancedb"))
    assert vectors.open_table("entities").count_rows() == entities


def test_store_says_when_it_waits_for_the_duckdb_lock(tmp_path) -> None:
    path = tmp_path / "pathrag.duckdb"
    Store(path).connect().__enter__().close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.readline()"),
        str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    notices: list[str] = []

    def notice(message: str) -> None:       # the reader says it waits; then the writer lets go
        notices.append(message)
        holder.stdin.write("done\n")
        holder.stdin.flush()

    with Store(path, notice_after=0.0, on_wait=notice).connect(read_only=True) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)
    holder.wait(timeout=30)
    assert len(notices) == 1 and f"pid {holder.pid} (" in notices[0] and "is writing to it" in notices[0]


def test_concurrent_runs_in_one_process_wait_for_each_other(tmp_path) -> None:
    """The same lock between threads (each takes its own open file, so flock excludes them too)."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    home, docs = tmp_path / "home", _folder(tmp_path)
    settings = Settings.from_env(env={"PATHRAG_HOME": str(home), "PATHRAG_DOCS": str(docs)})
    reports = []
    with index_lock(home, on_wait=None):
        threads = [threading.Thread(target=lambda: reports.append(run_indexing(settings, folder=docs)))
                   for _ in range(2)]
        for t in threads:
            t.start()
        # Both threads are blocked on the lock the test holds: nothing was indexed yet.
        assert not (home / "pathrag.duckdb").exists() or not reports
    for t in threads:
        t.join(timeout=120)
    assert len(reports) == 2
    assert sorted(r.extraction.pending for r in reports) == [0, 12]
    assert sorted(len(r.sync.plan.new) for r in reports) == [0, 12]
