"""`pathrag bench kills`: `kill -9` of `pathrag index` at several points of a run, then a plain `pathrag index`.

A generated corpus is indexed once on a clean home (the reference). Then, for each point, a fresh home:
`pathrag index FOLDER` is started and killed with SIGKILL (an OOM kill, a power cut) at that point of its run,
and a plain `pathrag index FOLDER` is run with no help. The points follow the run's progress, not the clock
(a time fraction lands elsewhere on every machine): during start-up, then a delay after each step (ingest,
graph, embeddings) claims the `duckdb` pool, read from the Dagster instance's SQLite. Recorded per point: the
step holding the pool when the kill came, whether the second run completed, its wall time and whether the
home's tables equal the clean build's (``fingerprint``: every document, chunk, entity and relation with its
content, the extraction records, and the LanceDB tables' keys). A killed run that blocked the next one (issue
22 item 1) shows as a second run that did not complete within its timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.concurrency import _env

Log = Callable[[str], None]
HEADING = "Kill -9 during an index run"
# (step, seconds after it claimed the pool); step None: seconds after the process started
POINTS: tuple[tuple[str | None, float], ...] = ((None, 1.0), ("ingest", 0.0), ("graph", 0.0), ("graph", 2.0),
                                                ("embeddings", 0.5))
TABLES = {
    "documents": "SELECT id, path, title, content_hash, status FROM documents",
    "chunks": "SELECT id, document_id, ordinal, content_hash FROM chunks",
    "entities": "SELECT entity_key, name, type, description, mention_count FROM entities",
    "relations": "SELECT relation_key, src_key, tgt_key, keywords, description, strength FROM relations",
    "extractions": "SELECT chunk_id, chunk_hash, extractor, status FROM extractions",
}


def _quiet(_: str) -> None:
    """Default progress sink."""


def fingerprint(home: Path) -> dict[str, str]:
    """A hash per table of its rows (sorted), and of each LanceDB table's keys."""
    import lancedb

    from pathrag_pipeline.storage.store import Store

    out = {}
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        for name, sql in TABLES.items():
            rows = sorted(json.dumps(r, default=str) for r in con.execute(sql).fetchall())
            out[name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    db = lancedb.connect(str(home / "lancedb"))
    for name in ("entities", "relations", "chunks"):
        keys = sorted(db.open_table(name).to_arrow().column("key").to_pylist())
        out[f"lancedb {name}"] = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    return out


def _index(folder: Path) -> list[str]:
    return [sys.executable, "-m", "pathrag_pipeline.cli", "index", str(folder)]


def _step_holding_pool(home: Path) -> str:
    """The Dagster step that held the duckdb pool, read from the instance's SQLite (read-only)."""
    index_db = home / "dagster" / "history" / "runs" / "index.db"
    try:
        with closing(sqlite3.connect(f"file:{index_db}?mode=ro", uri=True, timeout=1)) as con:
            row = con.execute("SELECT step_key FROM concurrency_slots WHERE concurrency_key = 'duckdb' "
                              "AND run_id IS NOT NULL").fetchone()
    except sqlite3.Error:
        return "before the run started"
    return row[0] if row else "between steps"


def _wait_for(home: Path, proc: subprocess.Popen, step: str | None, delay: float) -> bool:
    """Wait until ``step`` holds the pool (or the start), then ``delay`` s; False when the run ended first."""
    if step is not None:
        while proc.poll() is None and _step_holding_pool(home) != step:
            time.sleep(0.02)
    time.sleep(delay)
    return proc.poll() is None


def _label(step: str | None, delay: float) -> str:
    return f"start-up, {delay:g} s in" if step is None else f"{step} step, {delay:g} s after it started"


def clean_build(base: Path, n_docs: int, log: Log) -> tuple[Path, float, dict[str, str]]:
    """A generated corpus of ``n_docs`` under ``base/corpus`` (kept between runs) indexed offline into
    ``base/clean`` by a `pathrag index` process: (the corpus, the build's seconds, its ``fingerprint``)."""
    from pathrag_lab.bench.ingest import generate_corpus

    folder = base / "corpus"
    if not folder.exists():
        generate_corpus(folder, n_docs)
    clean = base / "clean"
    log(f"clean build of {n_docs} documents")
    started = time.perf_counter()
    proc = subprocess.run(_index(folder), env=_env(clean), capture_output=True, text=True)
    clean_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"the clean build failed: {proc.stderr.strip().splitlines()[-1:]}")
    return folder, clean_s, fingerprint(clean)


def run_kills_bench(n_docs: int = 300, points: tuple[tuple[str | None, float], ...] = POINTS,
                    workdir: Path | None = None,
                    log: Log = _quiet) -> dict[str, Any]:
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-kills-"))
    folder, clean_s, reference = clean_build(base, n_docs, log)
    rows = []
    for i, (target, delay) in enumerate(points):
        home = base / f"killed-{i}"
        log(f"kill -9 at {_label(target, delay)}, then a plain index")
        first = subprocess.Popen(_index(folder), env=_env(home), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        started_first = time.perf_counter()
        running = _wait_for(home, first, target, delay)
        step = _step_holding_pool(home)
        killed_after = time.perf_counter() - started_first
        finished_first = not running
        if running:
            os.kill(first.pid, signal.SIGKILL)
        first.wait()
        started = time.perf_counter()
        try:
            again = subprocess.run(_index(folder), env=_env(home), capture_output=True, text=True,
                                   timeout=max(120.0, 10 * clean_s))
            completed, stderr = again.returncode == 0, again.stderr
        except subprocess.TimeoutExpired:
            completed, stderr = False, "timed out (blocked?)"
        seconds = time.perf_counter() - started
        equal = completed and fingerprint(home) == reference
        rows.append({"point": _label(target, delay), "killed_after_s": round(killed_after, 1), "step": step,
                     "ended_before_kill": finished_first, "completed": completed, "second_run_s": round(seconds, 1),
                     "released_dead_run": "left running by a process that is gone" in stderr,
                     "tables_equal_clean": equal, "error": "" if completed else stderr.strip().splitlines()[-1:]})
    from pathrag_lab.bench.report import machine_info

    return {"documents": n_docs, "clean_s": round(clean_s, 1), "points": rows, "reference": reference,
            "machine": machine_info()}


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import md_table

    rows = [[f"{p['point']} ({p['killed_after_s']} s)", p["step"] + (" (the run had ended: no kill)" if p["ended_before_kill"] else ""),
             "yes" if p["completed"] else "NO", p["second_run_s"], "yes" if p["released_dead_run"] else "no",
             "yes" if p["tables_equal_clean"] else "NO"] for p in r["points"]]
    good = sum(p["completed"] and p["tables_equal_clean"] for p in r["points"] if not p["ended_before_kill"])
    killed = sum(not p["ended_before_kill"] for p in r["points"])
    m = r["machine"]
    return "\n\n".join([
        f"## {HEADING}",
        f"Reproduce: `pathrag bench kills --docs {r['documents']} --update-docs docs/benchmarks.md`",
        f"A generated corpus of {r['documents']} documents indexed offline on a clean home in {r['clean_s']} s (the "
        "reference). Then, on a fresh home per point, `pathrag index` was killed with SIGKILL at that point of its run "
        "(during start-up, or a delay after a step claimed the duckdb pool; seconds since its start in brackets), "
        "and a plain `pathrag index` was run with no help. \"dead run released\": the second run "
        "found the killed run still STARTED in Dagster holding the duckdb pool, marked it failed and freed the slot "
        "(assets/stale_runs.py). \"tables equal\": documents, chunks, entities, relations and extraction records "
        "(their content, not timestamps) and the LanceDB tables' keys equal the clean build's.",
        md_table(["killed at", "step holding the pool", "second run completed", "second run s", "dead run released",
                  "tables equal"], rows),
        f"**{good} of {killed}** kills: the next plain `pathrag index` completed and left the tables of a "
        "clean build.",
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']})._",
    ])


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
